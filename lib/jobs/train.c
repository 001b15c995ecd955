/* How the training containers will get nicpick's variables, so that the
 * smoke test can deliver them the same way (lib/select/smoke_step.c).
 *
 * NCCL reads NCCL_CONF_FILE with setenv(key, value, 0) (src/misc/param.cc,
 * setEnvFile): a variable already in the environment wins over the file,
 * and an empty value is still "set".  A container whose command sources
 * nccl.env gets nicpick's values for every variable nccl.env sets, whatever
 * its env says; its other variables stay. */
#include <stdio.h>
#include <string.h>

#include "jobs/jobs.h"
#include "jobs/jobs_priv.h"

const char *jobs_delivery_name(enum jobs_delivery d)
{
	return d == JOBS_DELIVERY_FILE ? "file" : d == JOBS_DELIVERY_ENV ? "env" : "unseen";
}

static bool ours(const char *name)
{
	return strncmp(name, "NCCL_", 5) == 0 || strncmp(name, "GLOO_", 5) == 0 ||
	       strncmp(name, "TP_", 3) == 0;
}

static const struct jobs_env *find_env(const struct jobs_container *c, const char *name)
{
	for (size_t i = 0; i < c->n_env; i++)
		if (strcmp(c->env[i].name, name) == 0)
			return &c->env[i];
	return NULL;
}

/* Does c mount the volume an init container writes out_dir to? */
static bool mounts_out_dir(const struct jobs_pod *p, const struct jobs_container *c, const char *out_dir)
{
	char path[1100];
	const char *volume = NULL;
	return out_dir && jobs_conf_path(p, c, out_dir, path, sizeof(path), &volume) == 0;
}

static enum jobs_delivery delivery_of(const struct jobs_pod *p, const struct jobs_container *c,
				      const char *out_dir, struct jobs_train *t)
{
	char want[1100] = "";
	const char *volume = NULL;
	bool seen = out_dir && jobs_conf_path(p, c, out_dir, want, sizeof(want), &volume) == 0;
	if (seen) {
		/* nccl.env lies beside nccl.conf */
		snprintf(t->env_path, sizeof(t->env_path), "%.*s/nccl.env",
			 (int)(strrchr(want, '/') - want), want);
	}
	const struct jobs_env *e = find_env(c, "NCCL_CONF_FILE");
	if (c->sources_nccl_env) {
		snprintf(t->why, sizeof(t->why), "container %s sources nccl.env in its command", c->name);
		return JOBS_DELIVERY_ENV;
	}
	if (e && !e->from_ref && e->value[0] && seen && strcmp(e->value, want) == 0) {
		snprintf(t->conf_path, sizeof(t->conf_path), "%s", e->value);
		snprintf(t->why, sizeof(t->why),
			 "container %s sets NCCL_CONF_FILE=%s and does not source nccl.env", c->name,
			 e->value);
		return JOBS_DELIVERY_FILE;
	}
	snprintf(t->why, sizeof(t->why),
		 "container %s neither sources nccl.env nor sets NCCL_CONF_FILE to nicpick's nccl.conf%s: tested through the environment",
		 c->name, seen ? "" : " (or nicpick cannot see where it mounts the out-dir)");
	return JOBS_DELIVERY_UNSEEN;
}

static void add_unknown(struct jobs_train *t, const char *what, const char *name, const char *how)
{
	if (t->n_unknown < JOBS_TRAIN_UNKNOWN_MAX)
		snprintf(t->unknown[t->n_unknown++], sizeof(t->unknown[0]), "%s%s%s", what, name, how);
}

int jobs_train_find(const struct jobs_pod *p, const char *out_dir, const char *const *names,
		    size_t n_names, struct jobs_train *t, np_error *err)
{
	memset(t, 0, sizeof(*t));
	const struct jobs_container *train[JOBS_TRAIN_NAMES_MAX];
	size_t n = 0;
	for (size_t k = 0; k < n_names && n < JOBS_TRAIN_NAMES_MAX; k++) {
		const struct jobs_container *c = NULL;
		for (size_t i = 0; i < p->n_containers && !c; i++)
			if (strcmp(p->containers[i].name, names[k]) == 0)
				c = &p->containers[i];
		if (!c)
			return np_error_set(err, NP_EUSAGE, 0,
					    "--train-container %s: pod %s has no container of that name",
					    names[k], p->name);
		train[n++] = c;
	}
	for (size_t i = 0; n_names == 0 && i < p->n_containers && n < JOBS_TRAIN_NAMES_MAX; i++)
		if (!p->containers[i].init && mounts_out_dir(p, &p->containers[i], out_dir))
			train[n++] = &p->containers[i];
	if (n == 0) {
		snprintf(t->why, sizeof(t->why),
			 "no container of pod %s mounts nicpick's out-dir (name it with --train-container): tested through the environment",
			 p->name);
		return 0;
	}
	const struct jobs_container *c = train[0];
	snprintf(t->container, sizeof(t->container), "%s", c->name);
	t->delivery = delivery_of(p, c, out_dir, t);
	for (size_t i = 1; i < n; i++) {
		struct jobs_train other = { 0 };
		other.delivery = delivery_of(p, train[i], out_dir, &other);
		if (other.delivery != t->delivery) {
			size_t len = strlen(t->why);
			snprintf(t->why + len, sizeof(t->why) - len,
				 "; container %s gets them another way (%s): the proof tests %s's",
				 train[i]->name, jobs_delivery_name(other.delivery), c->name);
			break;
		}
	}
	for (size_t i = 0; i < c->n_env; i++) {
		const struct jobs_env *e = &c->env[i];
		if (!ours(e->name) || strcmp(e->name, "NCCL_CONF_FILE") == 0)
			continue;
		if (e->from_ref)
			add_unknown(t, "", e->name, " (valueFrom)");
		else if (t->n_vars < JOBS_TRAIN_VARS_MAX)
			t->vars[t->n_vars++] = *e;
	}
	for (size_t i = 0; i < c->n_env_from; i++)
		add_unknown(t, "envFrom ", c->env_from[i], "");
	return 0;
}
