/* The smoke step of `select`: after every pod's probe passed and before
 * anything is written, run the all-reduce with exactly the variables the
 * outputs will hold, and judge it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exchange/message.h"
#include "select/select.h"
#include "util/clock.h"
#include "util/jsonread.h"
#include "util/text.h"

/* "10.9.0.1:29418", "[fd00::1]:29418" (NCCL_COMM_ID's syntax). */
void select_comm_id(const char *addr, int port, char *buf, size_t len)
{
	if (strchr(addr, ':'))
		snprintf(buf, len, "[%s]:%d", addr, port);
	else
		snprintf(buf, len, "%s:%d", addr, port);
}

/* The smoke step's own bound within the overall deadline. */
static int64_t smoke_deadline(const struct select_smoke_opts *o, const struct select_ctx *cx,
			      int64_t t0)
{
	return o->timeout_s > 0 && t0 + o->timeout_s * 1000LL < cx->deadline_ms
		       ? t0 + o->timeout_s * 1000LL
		       : cx->deadline_ms;
}

#define NEEDS_GLIBC " (it needs glibc: run the smoke step from the training image)"

/* A companion that is there but cannot start (ENOENT: no glibc loader, as
 * in the scratch release image). */
static bool cannot_start(const np_error *e)
{
	return e->status == NP_ESMOKE &&
	       (e->sys_errno == ENOENT || e->sys_errno == ENOEXEC || e->sys_errno == EACCES);
}

bool select_smoke_info(const struct select_smoke_opts *o, const struct select_ctx *cx, struct agree_gpu *g,
		       char *why, size_t len)
{
	memset(g, 0, sizeof(*g));
	why[0] = '\0';
	char companion[SMOKE_PATH_MAX];
	np_error e = { 0 };
	g->has = true;
	if (smoke_find_companion(o->smoke_bin, o->self_exe, o->path_env, companion, sizeof(companion),
				 &e) < 0) {
		snprintf(g->smoke, sizeof(g->smoke), "%s", smoke_unavailable_name(SMOKE_NO_COMPANION));
		snprintf(why, len, "%s", e.msg);
		return true;
	}
	struct smoke_opts so = { .companion = companion, .base_env = o->base_env,
				 .deadline_ms = smoke_deadline(o, cx, np_now_ms()), .cancel = cx->cancel };
	struct smoke_result r;
	if (smoke_spawn(&so, true, &r, &e) < 0) {
		if (cannot_start(&e)) {
			snprintf(g->smoke, sizeof(g->smoke), "%s",
				 smoke_unavailable_name(SMOKE_NO_COMPANION));
			snprintf(why, len, "%s%s", e.msg, NEEDS_GLIBC);
			return true;
		}
		g->has = false;
		snprintf(why, len, "%s", e.msg);
		return false;
	}
	g->nccl = r.nccl_version;
	g->driver = r.cuda_driver;
	g->runtime = r.cuda_runtime;
	np_text_clean(g->model, sizeof(g->model), r.gpu, NP_TEXT_SPACE);
	if (!np_str_ok(g->model, NP_CS_TEXT))
		g->model[0] = '\0';
	if (!r.ok && r.unavailable)
		snprintf(g->smoke, sizeof(g->smoke), "%s", smoke_unavailable_name(r.unavailable));
	if (!r.ok)
		snprintf(why, len, "%s", r.error);
	return true;
}

/* A container killed during an earlier smoke test left its log directory:
 * remove it, so that a run leaves the out-dir as a clean run would.  The
 * out-dir is shared with the training container: a name of ours that is a
 * symbolic link is not followed (outputs_remove_flat_dir). */
static void remove_stale(const char *out_dir)
{
	DIR *d = opendir(out_dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, ".nicpick-smoke.", 15) == 0)
			outputs_remove_flat_dir(dirfd(d), de->d_name);
	closedir(d);
}

/* --nccl-debug keeps NCCL's files in OUT/nccl-debug: an earlier run's
 * nccl-debug.* would be read with this run's and could decide its verdict,
 * so they go before the companion starts.  Training's own train.* files
 * stay.  OUT/nccl-debug must be a directory, not a link to one elsewhere:
 * nicpick writes only into the out-dir. */
static int remove_logs(const char *dir, np_error *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR))
		return np_error_set(err, NP_EINTERNAL, 0,
				    "%s is not a directory (a symbolic link?): remove it; nicpick keeps "
				    "NCCL's logs only in a directory of the out-dir",
				    dir);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return np_error_set(err, NP_EINTERNAL, e, "cannot read %s", dir);
	}
	struct dirent *de;
	int ret = 0;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "nccl-debug.", 11) != 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT) {
			ret = np_error_set(err, NP_EINTERNAL, errno,
					   "cannot remove an earlier run's %s/%s", dir, de->d_name);
			break;
		}
	}
	closedir(d);
	return ret;
}

static int skip(struct smoke_report *rep, const char *why)
{
	rep->status = SMOKE_SKIPPED;
	snprintf(rep->reason, sizeof(rep->reason), "%s", why);
	return 0;
}

/* With three or more pods: the nodes the ring links name, by the labels
 * the ranks gave themselves (every pod names the same ones). */
static void name_slow(struct smoke_report *rep)
{
	if (!rep->ran)
		return;
	smoke_links_judge(&rep->result, &rep->links);
	smoke_links_text(&rep->result, &rep->links, rep->links_text, sizeof(rep->links_text));
}

/* Variables the smoke test sets itself, whatever training sets. */
static bool smoke_own(const char *key)
{
	return strncmp(key, "NCCL_DEBUG", 10) == 0 || strcmp(key, "NCCL_COMM_ID") == 0 ||
	       strcmp(key, "NCCL_CONF_FILE") == 0;
}

static const char *env_value(const struct outputs_env *env, const char *key)
{
	for (size_t i = 0; i < env->n; i++)
		if (strcmp(env->vars[i].key, key) == 0)
			return env->vars[i].value;
	return NULL;
}

static void source(struct smoke_report *rep, const char *var, const char *value, const char *from)
{
	if (rep->n_sources == SMOKE_SOURCES_MAX)
		return;
	struct smoke_source *s = &rep->sources[rep->n_sources++];
	snprintf(s->var, sizeof(s->var), "%s", var);
	np_text_clean(s->value, sizeof(s->value), value, NP_TEXT_ASCII);
	snprintf(s->from, sizeof(s->from), "%s", from);
}

/* Which delivery the proof tests, recorded also when it is skipped. */
static void describe_delivery(const struct select_smoke_plan *p, struct smoke_report *rep)
{
	const struct jobs_train *t = p->train;
	snprintf(rep->delivery, sizeof(rep->delivery), "%s",
		 jobs_delivery_name(t ? t->delivery : JOBS_DELIVERY_UNSEEN));
	snprintf(rep->delivery_why, sizeof(rep->delivery_why), "%s",
		 t ? t->why : "no pod object to read (not --peers k8s): tested through the environment");
	snprintf(rep->train_container, sizeof(rep->train_container), "%s", t ? t->container : "");
	rep->n_unknown = 0;
	for (size_t i = 0; t && i < t->n_unknown && i < sizeof(rep->unknown) / sizeof(rep->unknown[0]); i++)
		snprintf(rep->unknown[rep->n_unknown++], sizeof(rep->unknown[0]), "%s", t->unknown[i]);
}

#define DELIVERY_VARS (2 * (OUTPUTS_VARS_MAX + JOBS_TRAIN_VARS_MAX + 1) + 1)

struct delivery {
	const char *vars[DELIVERY_VARS];
	const char *unset[OUTPUTS_VARS_MAX + 1];
	char conf[SMOKE_PATH_MAX + 16];
};

/* What the companion gets, the way the training container will get it
 * (lib/jobs/train.c):
 *   file:  NCCL_CONF_FILE names a copy of the nccl.conf about to be
 *          written, and none of nicpick's variables is in the environment;
 *          the container's literal values are set on top, as NCCL sees
 *          them (setEnvFile never overwrites a set variable);
 *   env:   nicpick's variables in the environment (nccl.env, sourced in
 *          the command, sets them after the container's env), and the
 *          container's other literal values.
 * The sources go into rep. */
static int deliver(const struct select_smoke_plan *p, const struct outputs_env *env,
		   const char *log_dir, struct delivery *d, struct smoke_report *rep, np_error *err)
{
	const struct jobs_train *t = p->train;
	bool file = t && t->delivery == JOBS_DELIVERY_FILE;
	size_t nv = 0, nu = 0;
	if (file) {
		char *conf = NULL;
		if (outputs_render_conf(env, &conf, err) < 0)
			return -1;
		snprintf(d->conf, sizeof(d->conf), "%s/nccl.conf", log_dir);
		/* A new file: with --nccl-debug the directory is the out-dir's,
		 * where a link left in place of an earlier copy is not written
		 * through. */
		if (unlink(d->conf) < 0 && errno != ENOENT) {
			free(conf);
			return np_error_set(err, NP_EINTERNAL, errno, "cannot replace %s", d->conf);
		}
		int fd = open(d->conf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
		if (!f && fd >= 0)
			close(fd);
		bool ok = f && fputs(conf, f) >= 0;
		if (f && fclose(f) != 0)
			ok = false;
		free(conf);
		if (!ok)
			return np_error_set(err, NP_EINTERNAL, errno, "cannot write %s", d->conf);
		d->vars[nv++] = "NCCL_CONF_FILE";
		d->vars[nv++] = d->conf;
		for (size_t i = 0; i < env->n; i++)
			d->unset[nu++] = env->vars[i].key;
	}
	for (size_t i = 0; i < env->n; i++) {
		const char *key = env->vars[i].key;
		if (smoke_own(key))
			continue;
		const struct jobs_env *c = NULL;
		for (size_t j = 0; t && j < t->n_vars && !c; j++)
			if (strcmp(t->vars[j].name, key) == 0)
				c = &t->vars[j];
		if (file) {
			/* Gloo and TensorPipe are not in nccl.conf: only nccl.env has them */
			if (!c && strncmp(key, "NCCL_", 5) == 0)
				source(rep, key, env->vars[i].value, "nccl.conf");
			continue;
		}
		d->vars[nv++] = key;
		d->vars[nv++] = env->vars[i].value;
		source(rep, key, env->vars[i].value, "nicpick");
	}
	for (size_t j = 0; t && j < t->n_vars; j++) {
		const struct jobs_env *c = &t->vars[j];
		if (smoke_own(c->name) || (!file && env_value(env, c->name)))
			continue; /* env delivery: nccl.env, sourced after, wins */
		d->vars[nv++] = c->name;
		d->vars[nv++] = c->value;
		source(rep, c->name, c->value, "container");
	}
	d->vars[nv] = NULL;
	d->unset[nu] = NULL;
	return 0;
}

int select_smoke(const struct select_smoke_opts *o, const struct select_ctx *cx, const char *out_dir,
		 const struct select_smoke_plan *p, const struct outputs_env *env,
		 struct smoke_report *rep, np_error *err)
{
	bool required = o->mode == SELECT_SMOKE_REQUIRED;
	int64_t t0 = np_now_ms();
	rep->rank = p->rank;
	rep->world = p->world;
	snprintf(rep->comm_id, sizeof(rep->comm_id), "%s", p->comm_id);
	snprintf(rep->ifname, sizeof(rep->ifname), "%s", p->ifname ? p->ifname : "");
	snprintf(rep->ib_hca, sizeof(rep->ib_hca), "%s", p->ib_hca ? p->ib_hca : "");
	describe_delivery(p, rep);
	/* A pod whose training reads only nccl.conf on an NCCL that ignores
	 * NCCL_CONF_FILE: the proof would pass and training would not use the
	 * network.  Job-wide, before any all-reduce. */
	if (p->floor && p->floor[0]) {
		snprintf(rep->floor, sizeof(rep->floor), "%s", p->floor);
		if (required) {
			rep->status = SMOKE_FAILED;
			snprintf(rep->reason, sizeof(rep->reason), "%s", p->floor);
			return np_error_set(err, NP_ESMOKE, 0, "%s", p->floor);
		}
		if (cx->log)
			cx->log(cx->log_ud, EXCHANGE_WARN, p->floor);
	}
	if (o->mode == SELECT_SMOKE_OFF)
		return skip(rep, "--smoke off");
	/* The gatherer saw a pod where it cannot run: every pod skips (an
	 * all-reduce without that pod would only fail in init). */
	if (p->job_skip && p->job_skip[0]) {
		char why[NP_ERR_MSG_MAX];
		snprintf(why, sizeof(why), "the smoke test cannot run on every pod of the job: %s%s%s",
			 p->job_skip, p->here && p->here[0] ? "; here: " : "", p->here ? p->here : "");
		if (!required)
			return skip(rep, why);
		rep->status = SMOKE_FAILED;
		snprintf(rep->reason, sizeof(rep->reason), "%s", why);
		return np_error_set(err, NP_ESMOKE, 0, "--smoke required: %s", why);
	}

	char companion[SMOKE_PATH_MAX];
	np_error ferr = { 0 };
	if (smoke_find_companion(o->smoke_bin, o->self_exe, o->path_env, companion,
				 sizeof(companion), &ferr) < 0) {
		if (!required)
			return skip(rep, ferr.msg);
		rep->status = SMOKE_FAILED;
		snprintf(rep->reason, sizeof(rep->reason), "%s", ferr.msg);
		return np_error_set(err, NP_ESMOKE, 0, "--smoke required: %s", ferr.msg);
	}

	/* The log directory: kept in the out-dir with --nccl-debug, else a
	 * private one removed afterwards.  Never /tmp: a restricted pod's
	 * root file system is read-only, the out-dir is its emptyDir. */
	char log_dir[SMOKE_PATH_MAX];
	if (outputs_mkdir_p(out_dir, cx->made, err) < 0)
		return -1;
	if (o->nccl_debug) {
		snprintf(log_dir, sizeof(log_dir), "%s/nccl-debug", out_dir);
		if (mkdir(log_dir, 0755) == 0)
			outputs_made_add(cx->made, log_dir);
		else if (errno != EEXIST)
			return np_error_set(err, NP_EINTERNAL, errno, "cannot create %s", log_dir);
		if (remove_logs(log_dir, err) < 0)
			return -1;
	} else {
		remove_stale(out_dir);
		snprintf(log_dir, sizeof(log_dir), "%s/.nicpick-smoke.XXXXXX", out_dir);
		if (!mkdtemp(log_dir))
			return np_error_set(err, NP_EINTERNAL, errno, "cannot create a directory in %s",
					    out_dir);
	}

	/* --nccl-debug's own NCCL_DEBUG* are for training; the smoke test
	 * sets its own. */
	static struct delivery d;
	memset(&d, 0, sizeof(d));
	if (deliver(p, env, log_dir, &d, rep, err) < 0) {
		if (!o->nccl_debug)
			outputs_remove_flat_dir(AT_FDCWD, log_dir);
		return -1;
	}
	struct smoke_opts so = {
		.cancel = cx->cancel,
		.companion = companion,
		.base_env = o->base_env,
		.vars = d.vars,
		.unset = d.unset,
		.label = p->label,
		.no_links = o->no_links,
		.rank = p->rank,
		.world = p->world,
		.comm_id = rep->comm_id,
		.max_bytes = o->bytes > 0 ? o->bytes : SMOKE_DEFAULT_BYTES,
		.gpu = 0,
		.deadline_ms = smoke_deadline(o, cx, t0),
		.log_dir = log_dir,
	};
	if (cx->log) {
		char line[256];
		snprintf(line, sizeof(line), "smoke: rank %d of %d, NCCL_COMM_ID=%s, on %s, delivered as %s%s%s",
			 p->rank, p->world, rep->comm_id, p->ifname ? p->ifname : "NCCL's choice",
			 rep->delivery, rep->train_container[0] ? " to container " : "", rep->train_container);
		cx->log(cx->log_ud, EXCHANGE_INFO, line);
	}
	np_error serr = { 0 };
	int ret = smoke_spawn(&so, false, &rep->result, &serr);
	/* A companion that is there but cannot start (ENOENT: no glibc
	 * loader, as in the scratch release image) makes the test
	 * unavailable here, not failed: the training image runs it. */
	if (ret < 0 && !required && cannot_start(&serr)) {
		if (!o->nccl_debug)
			outputs_remove_flat_dir(AT_FDCWD, log_dir);
		char why[sizeof(serr.msg) + 96];
		snprintf(why, sizeof(why), "%s%s", serr.msg, NEEDS_GLIBC);
		return skip(rep, why);
	}
	if (ret == 0) {
		rep->ran = true;
		smoke_log_read_dir(log_dir, &rep->log, &serr);
	}
	if (o->nccl_debug)
		snprintf(rep->debug_dir, sizeof(rep->debug_dir), "%s", log_dir);
	else
		outputs_remove_flat_dir(AT_FDCWD, log_dir);
	rep->verdict_ms = np_now_ms() - t0;
	name_slow(rep);

	if (ret == 0 && !rep->result.ok && rep->result.unavailable && !required)
		return skip(rep, rep->result.error);
	/* The companion bootstraps through NCCL_COMM_ID, so NCCL took the
	 * bootstrap interface by rank 0's subnet (smoke.h, smoke_boot_rule). */
	/* p->ifname is this pod's rail list, "eth2,eth1" (one name without
	 * rails): every one of them must carry NCCL's sockets. */
	char names[EXCHANGE_RAILS_MAX][IFNAMSIZ];
	const char *ifs[EXCHANGE_RAILS_MAX];
	size_t n_ifs = 0;
	for (const char *s = p->ifname; s && *s && n_ifs < EXCHANGE_RAILS_MAX;) {
		size_t n = strcspn(s, ",");
		snprintf(names[n_ifs], sizeof(names[n_ifs]), "%.*s", (int)n, s);
		ifs[n_ifs] = names[n_ifs];
		n_ifs++;
		s += n + (s[n] == ',');
	}
	struct smoke_expect x = { .ifs = ifs, .n_ifs = n_ifs, .ib_hca = p->ib_hca,
				  .boot = so.comm_id ? SMOKE_BOOT_SUBNET : SMOKE_BOOT_IFNAME,
				  .required = required };
	if (o->min_busbw > 0) {
		x.min_busbw = o->min_busbw;
		snprintf(x.min_busbw_why, sizeof(x.min_busbw_why), "--min-busbw %g", o->min_busbw);
	} else if (so.max_bytes >= SMOKE_DEFAULT_MIN_SIZE &&
		   (x.min_busbw = smoke_default_min_busbw(p->min_mbps)) > 0) {
		snprintf(x.min_busbw_why, sizeof(x.min_busbw_why),
			 "5%% of the slowest agreed link, %ld Mb/s", p->min_mbps);
	}
	rep->min_busbw = x.min_busbw;
	snprintf(rep->min_busbw_why, sizeof(rep->min_busbw_why), "%s", x.min_busbw_why);
	int verdict = ret < 0 ? -1 : smoke_judge(&rep->result, rep->ran ? &rep->log : NULL, &x, &serr);
	if (verdict < 0) {
		rep->status = SMOKE_FAILED;
		snprintf(rep->reason, sizeof(rep->reason), "%s", serr.msg);
		if (rep->links_text[0])
			snprintf(rep->reason + strlen(rep->reason),
				 sizeof(rep->reason) - strlen(rep->reason), "; %s", rep->links_text);
		if (rep->floor[0]) /* the likely cause of a wrong interface */
			snprintf(rep->reason + strlen(rep->reason),
				 sizeof(rep->reason) - strlen(rep->reason), "; %s", rep->floor);
		if (p->world > 1 && rep->ran && rep->result.phase == SMOKE_PHASE_INIT)
			snprintf(rep->reason + strlen(rep->reason),
				 sizeof(rep->reason) - strlen(rep->reason),
				 "; rank 0 (%s) hosts the bootstrap at %s: a pod that never started its smoke test, or that port blocked or taken, stops every rank here",
				 p->root_pod[0] ? p->root_pod : "the gatherer", rep->comm_id);
		return np_error_set(err, NP_ESMOKE, 0, "%s", rep->reason);
	}
	rep->slow_link_fails = o->slow_link_fail;
	if (rep->links_text[0] && o->slow_link_fail) {
		rep->status = SMOKE_FAILED;
		snprintf(rep->reason, sizeof(rep->reason), "slow link: %s (--slow-link fail)",
			 rep->links_text);
		return np_error_set(err, NP_ESMOKE, 0, "%s", rep->reason);
	}
	rep->status = SMOKE_PASSED;
	if (verdict > 0) { /* passed, but NCCL's log cannot show the network */
		snprintf(rep->not_proven, sizeof(rep->not_proven), "%s", serr.msg);
		if (cx->log)
			cx->log(cx->log_ud, EXCHANGE_WARN, rep->not_proven);
	}
	smoke_report_summary(rep, rep->reason, sizeof(rep->reason));
	if (rep->links_text[0] && cx->log)
		cx->log(cx->log_ud, EXCHANGE_WARN, rep->links_text);
	return 0;
}
