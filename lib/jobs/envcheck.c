/* Settings in the pod that would override nicpick's outputs.
 *
 * NCCL loads NCCL_CONF_FILE without overwriting variables already in the
 * environment (param.cc, setEnvFile), so a value set in a training
 * container's env wins over nccl.conf.  NCCL also treats a
 * NCCL_SOCKET_IFNAME of one character or less as unset (socket.cc,
 * ncclFindInterfaces: `if (env && strlen(env) > 1)`) and then picks an
 * interface by itself, which is the failure nicpick exists to prevent.
 * Gloo has the same rule: ProcessGroupGloo::Options::create_default uses
 * GLOO_SOCKET_IFNAME only `if (ifnameEnv && ifnameEnv->size() > 1)`, else
 * the device the hostname resolves to (pytorch,
 * torch/csrc/distributed/c10d/ProcessGroupGloo.cpp).  Gloo and TensorPipe
 * read only the environment. */
#include <stdio.h>
#include <string.h>

#include "jobs/jobs.h"
#include "jobs/jobs_priv.h"

static const char *const checked[] = {
	"NCCL_SOCKET_IFNAME",
	"GLOO_SOCKET_IFNAME",
	"NCCL_SOCKET_FAMILY",
	"NCCL_IB_HCA",
};

static const char *ours(const struct jobs_vars *env, const char *key)
{
	for (size_t i = 0; i < env->n; i++)
		if (strcmp(env->v[i].key, key) == 0)
			return env->v[i].value;
	return NULL;
}

static const struct jobs_env *find_env(const struct jobs_container *c, const char *name)
{
	for (size_t i = 0; i < c->n_env; i++)
		if (strcmp(c->env[i].name, name) == 0)
			return &c->env[i];
	return NULL;
}

static void add(struct jobs_env_warnings *w, const struct jobs_container *c, const struct jobs_env *e,
		const char *want, const char *why)
{
	if (w->n >= sizeof(w->v) / sizeof(w->v[0]))
		return;
	struct jobs_env_warning *x = &w->v[w->n++];
	snprintf(x->container, sizeof(x->container), "%s", c->name);
	snprintf(x->var, sizeof(x->var), "%s", e->name);
	snprintf(x->value, sizeof(x->value), "%s", e->from_ref ? "" : e->value);
	snprintf(x->want, sizeof(x->want), "%s", want ? want : "");
	snprintf(x->why, sizeof(x->why), "%s", why);
}

/* path lies at or under dir: the rest ("" or "/sub") goes to *rest. */
static bool under(const char *path, const char *dir, const char **rest)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (strncmp(path, dir, n) != 0 || (path[n] && path[n] != '/'))
		return false;
	*rest = path + n;
	return true;
}

int jobs_conf_path(const struct jobs_pod *p, const struct jobs_container *c, const char *out_dir,
		     char *buf, size_t len, const char **volume)
{
	for (size_t i = 0; i < p->n_containers; i++) {
		const struct jobs_container *ic = &p->containers[i];
		for (size_t j = 0; ic->init && j < ic->n_mounts; j++) {
			const char *rest;
			if (ic->mounts[j].has_sub_path || !under(out_dir, ic->mounts[j].path, &rest))
				continue;
			*volume = ic->mounts[j].volume;
			for (size_t k = 0; k < c->n_mounts; k++) {
				const struct jobs_mount *m = &c->mounts[k];
				if (m->has_sub_path || strcmp(m->volume, *volume) != 0)
					continue;
				size_t pl = strlen(m->path);
				while (pl > 1 && m->path[pl - 1] == '/')
					pl--;
				snprintf(buf, len, "%.*s%s/nccl.conf", (int)pl, m->path, rest);
				return 0;
			}
			return -1;
		}
	}
	return 1;
}

static void check_conf_file(const struct jobs_pod *p, const struct jobs_container *c, const char *out_dir,
			    struct jobs_env_warnings *w)
{
	const struct jobs_env *e = find_env(c, "NCCL_CONF_FILE");
	if (!e || !out_dir)
		return;
	char want[1100];
	const char *volume = NULL;
	int where = jobs_conf_path(p, c, out_dir, want, sizeof(want), &volume);
	if (e->from_ref) {
		add(w, c, e, where == 0 ? want : NULL,
		    "set through valueFrom: nicpick cannot see whether NCCL reads its nccl.conf");
	} else if (!e->value[0]) {
		add(w, c, e, where == 0 ? want : NULL, "empty: NCCL reads no nccl.conf of nicpick's");
	} else if (where < 0) {
		char why[256 + JOBS_VALUE_MAX];
		snprintf(why, sizeof(why),
			 "this container does not mount volume %s, where nicpick writes nccl.conf", volume);
		add(w, c, e, NULL, why);
	} else if (where == 0 && strcmp(e->value, want) != 0) {
		add(w, c, e, want, "NCCL reads another file than nicpick's nccl.conf");
	}
}

void jobs_envcheck(const struct jobs_pod *p, const struct jobs_vars *env, const char *out_dir,
		   struct jobs_env_warnings *w)
{
	memset(w, 0, sizeof(*w));
	for (size_t i = 0; i < p->n_containers; i++) {
		const struct jobs_container *c = &p->containers[i];
		if (c->init)
			continue; /* nicpick itself, or what runs before training */
		for (size_t k = 0; k < sizeof(checked) / sizeof(checked[0]); k++) {
			const struct jobs_env *e = find_env(c, checked[k]);
			const char *mine = ours(env, checked[k]);
			if (!e || (mine && c->sources_nccl_env))
				continue; /* nccl.env, sourced after, sets nicpick's value */
			if (e->from_ref)
				add(w, c, e, mine,
				    "set through valueFrom: nicpick cannot see the value, and it wins over nccl.conf");
			else if (strcmp(checked[k], "NCCL_SOCKET_IFNAME") == 0 && strlen(e->value) <= 1)
				add(w, c, e, mine,
				    "NCCL ignores a value of one character or less and picks an interface by itself");
			else if (strcmp(checked[k], "GLOO_SOCKET_IFNAME") == 0 && strlen(e->value) <= 1)
				add(w, c, e, mine,
				    "Gloo ignores a value of one character or less and uses the address the hostname resolves to");
			else if (!mine)
				add(w, c, e, NULL,
				    strcmp(checked[k], "NCCL_IB_HCA") == 0
					    ? "nicpick found no RDMA port for NCCL to use, but NCCL will try these"
					    : "nicpick leaves this unset, but this value restricts NCCL");
			else if (strcmp(e->value, mine) != 0)
				add(w, c, e, mine,
				    strncmp(checked[k], "NCCL_", 5) == 0
					    ? "wins over nccl.conf: NCCL never overwrites a variable already set"
					    : "Gloo reads only the environment, so this value wins");
		}
		check_conf_file(p, c, out_dir, w);
	}
}

void jobs_env_warning_text(const struct jobs_env_warning *w, char *buf, size_t len)
{
	char want[600] = "";
	if (w->want[0])
		snprintf(want, sizeof(want), "; nicpick wrote '%s'", w->want);
	if (strcmp(w->var, "NCCL_CONF_FILE") == 0 && w->want[0])
		snprintf(want, sizeof(want), "; nicpick's nccl.conf is at %s", w->want);
	snprintf(buf, len, "container %s sets %s='%s': %s%s", w->container, w->var, w->value, w->why, want);
}

int jobs_envcheck_pod(const json_t *pod, const struct jobs_vars *env, const char *out_dir,
		      bool strict, struct jobs_env_warnings *w, np_error *err)
{
	struct jobs_pod p;
	memset(w, 0, sizeof(*w));
	if (jobs_pod_parse(pod, &p, err) < 0) {
		jobs_pod_free(&p);
		return np_error_wrap(err, "cannot check the pod's containers");
	}
	jobs_envcheck(&p, env, out_dir, w);
	jobs_pod_free(&p);
	if (!strict || w->n == 0)
		return 0;
	char first[1024];
	jobs_env_warning_text(&w->v[0], first, sizeof(first));
	return np_error_set(err, NP_EUSAGE, 0,
			    "%zu setting(s) in this pod override nicpick's outputs and --strict-env is set: "
			    "%s%s; remove them from the pod spec",
			    w->n, first, w->n > 1 ? " (and more, see the warnings above)" : "");
}
