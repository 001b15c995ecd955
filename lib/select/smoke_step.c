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

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
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
 * remove it, so that a run leaves the out-dir as a clean run would. */
static void remove_stale(const char *out_dir)
{
	DIR *d = opendir(out_dir);
	if (!d)
		return;
	struct dirent *de;
	char path[SMOKE_PATH_MAX + 300];
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, ".nicpick-smoke.", 15) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", out_dir, de->d_name);
		remove_dir(path);
	}
	closedir(d);
}

/* --nccl-debug keeps NCCL's files in OUT/nccl-debug: an earlier run's
 * nccl-debug.* would be read with this run's and could decide its verdict,
 * so they go before the companion starts.  Training's own train.* files
 * stay. */
static int remove_logs(const char *dir, np_error *err)
{
	DIR *d = opendir(dir);
	if (!d)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot read %s", dir);
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

/* With three or more pods, the incoming ring link much slower than the
 * rest, named by rank (and by pod and address where this pod knows them). */
static void name_suspect(const struct select_smoke_plan *p, struct smoke_report *rep)
{
	double gbps = 0, median = 0;
	rep->suspect = rep->ran ? smoke_ring_suspect(&rep->result, &gbps, &median) : -1;
	if (rep->suspect < 0)
		return;
	int s = rep->suspect, from = (s + rep->world - 1) % rep->world;
	char a[160] = "", b[160] = "";
	if (p->rank_name) {
		p->rank_name(p->rank_ud, s, a, sizeof(a));
		p->rank_name(p->rank_ud, from, b, sizeof(b));
	}
	snprintf(rep->suspect_text, sizeof(rep->suspect_text),
		 "suspect: the link into rank %d%s%s%s from rank %d%s%s%s carries %.2f GB/s, the ring's median is %.2f GB/s",
		 s, a[0] ? " (" : "", a, a[0] ? ")" : "", from, b[0] ? " (" : "", b, b[0] ? ")" : "",
		 gbps, median);
}

int select_smoke(const struct select_smoke_opts *o, const struct select_ctx *cx, const char *out_dir,
		 const struct select_smoke_plan *p, const struct outputs_env *env,
		 struct smoke_report *rep, np_error *err)
{
	bool required = o->mode == SELECT_SMOKE_REQUIRED;
	int64_t t0 = np_now_ms();
	rep->suspect = -1;
	rep->rank = p->rank;
	rep->world = p->world;
	snprintf(rep->comm_id, sizeof(rep->comm_id), "%s", p->comm_id);
	snprintf(rep->ifname, sizeof(rep->ifname), "%s", p->ifname ? p->ifname : "");
	snprintf(rep->ib_hca, sizeof(rep->ib_hca), "%s", p->ib_hca ? p->ib_hca : "");
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
	if (outputs_mkdir_p(out_dir, err) < 0)
		return -1;
	if (o->nccl_debug) {
		snprintf(log_dir, sizeof(log_dir), "%s/nccl-debug", out_dir);
		if (mkdir(log_dir, 0755) < 0 && errno != EEXIST)
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

	const char *vars[2 * OUTPUTS_VARS_MAX + 1];
	size_t nv = 0;
	for (size_t i = 0; i < env->n; i++) {
		/* --nccl-debug's own NCCL_DEBUG* are for training; the smoke
		 * test sets its own. */
		if (strncmp(env->vars[i].key, "NCCL_DEBUG", 10) == 0)
			continue;
		vars[nv++] = env->vars[i].key;
		vars[nv++] = env->vars[i].value;
	}
	vars[nv] = NULL;
	struct smoke_opts so = {
		.cancel = cx->cancel,
		.companion = companion,
		.base_env = o->base_env,
		.vars = vars,
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
		snprintf(line, sizeof(line), "smoke: rank %d of %d, NCCL_COMM_ID=%s, on %s",
			 p->rank, p->world, rep->comm_id, p->ifname ? p->ifname : "NCCL's choice");
		cx->log(cx->log_ud, EXCHANGE_INFO, line);
	}
	np_error serr = { 0 };
	int ret = smoke_spawn(&so, false, &rep->result, &serr);
	/* A companion that is there but cannot start (ENOENT: no glibc
	 * loader, as in the scratch release image) makes the test
	 * unavailable here, not failed: the training image runs it. */
	if (ret < 0 && !required && cannot_start(&serr)) {
		if (!o->nccl_debug)
			remove_dir(log_dir);
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
		remove_dir(log_dir);
	rep->verdict_ms = np_now_ms() - t0;
	name_suspect(p, rep);

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
		if (rep->suspect >= 0)
			snprintf(rep->reason + strlen(rep->reason),
				 sizeof(rep->reason) - strlen(rep->reason), "; %s", rep->suspect_text);
		if (p->world > 1 && rep->ran && rep->result.phase == SMOKE_PHASE_INIT)
			snprintf(rep->reason + strlen(rep->reason),
				 sizeof(rep->reason) - strlen(rep->reason),
				 "; rank 0 (%s) hosts the bootstrap at %s: a pod that never started its smoke test, or that port blocked or taken, stops every rank here",
				 p->root_pod[0] ? p->root_pod : "the gatherer", rep->comm_id);
		return np_error_set(err, NP_ESMOKE, 0, "%s", rep->reason);
	}
	rep->status = SMOKE_PASSED;
	if (verdict > 0) { /* passed, but NCCL's log cannot show the network */
		snprintf(rep->not_proven, sizeof(rep->not_proven), "%s", serr.msg);
		if (cx->log)
			cx->log(cx->log_ud, EXCHANGE_WARN, rep->not_proven);
	}
	smoke_report_summary(rep, rep->reason, sizeof(rep->reason));
	if (rep->suspect >= 0 && cx->log)
		cx->log(cx->log_ud, EXCHANGE_WARN, rep->suspect_text);
	return 0;
}
