/* The variables for a choice and the text of nccl.env / nccl.conf. */
#include <errno.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "outputs/outputs.h"

#ifndef NICPICK_VERSION
#define NICPICK_VERSION "0.0.0-dev"
#endif

/* NCCL's setEnvFile reads at most 1023 bytes of a value. */
#define NCCL_CONF_VALUE_MAX 1023

static int add_var(struct outputs_env *env, const char *key, np_error *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int add_var(struct outputs_env *env, const char *key, np_error *err, const char *fmt, ...)
{
	if (env->n == OUTPUTS_VARS_MAX)
		return np_error_set(err, NP_EINTERNAL, 0, "too many variables for %s", key);
	struct outputs_var *v = &env->vars[env->n];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(v->value, sizeof(v->value), fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= sizeof(v->value))
		return np_error_set(err, NP_EUSAGE, 0, "value of %s is too long (%d bytes, at most %zu)",
				    key, len, sizeof(v->value) - 1);
	v->key = key;
	env->n++;
	return 0;
}

/* Can NCCL's list syntax carry this exact name?  NCCL splits on ',' and
 * reads what follows ':' as a port (utils.cc parseStringList). */
static int check_iface(const char *name, np_error *err)
{
	if (!name || !*name)
		return np_error_set(err, NP_EUSAGE, 0, "an empty interface name cannot be passed to NCCL");
	if (strchr(name, ','))
		return np_error_set(err, NP_EUSAGE, 0,
				    "interface '%s' cannot be passed to NCCL: its name contains ',', "
				    "which NCCL_SOCKET_IFNAME reads as a separator; rename the interface",
				    name);
	if (strchr(name, ':'))
		return np_error_set(err, NP_EUSAGE, 0,
				    "interface '%s' cannot be passed to NCCL: its name contains ':', "
				    "which NCCL_SOCKET_IFNAME reads as the start of a port; rename the "
				    "interface",
				    name);
	if (strlen(name) >= IFNAMSIZ)
		return np_error_set(err, NP_EUSAGE, 0,
				    "interface '%s' cannot be passed to NCCL: longer than %d characters",
				    name, IFNAMSIZ - 1);
	return 0;
}

int outputs_env_from_choice(const struct outputs_choice *c, struct outputs_env *env, np_error *err)
{
	memset(env, 0, sizeof(*env));
	size_t n = c->n_ifaces;
	if (n == 0 || n > sizeof(c->ifaces) / sizeof(c->ifaces[0]))
		return np_error_set(err, NP_EINTERNAL, 0, "choice has %zu interfaces (1 to %zu allowed)",
				    n, sizeof(c->ifaces) / sizeof(c->ifaces[0]));
	/* IFNAMSIZ per name plus a comma each: fits the 512-byte values. */
	char list[sizeof(c->ifaces) / sizeof(c->ifaces[0]) * (IFNAMSIZ + 1)] = "";
	for (size_t i = 0; i < n; i++) {
		if (check_iface(c->ifaces[i], err) < 0)
			return -1;
		if (i)
			strcat(list, ",");
		strcat(list, c->ifaces[i]);
	}
	/* One '=' makes the whole list exact in NCCL ("=eth1,eth2"). */
	if (add_var(env, "NCCL_SOCKET_IFNAME", err, "=%s", list) < 0 ||
	    add_var(env, "GLOO_SOCKET_IFNAME", err, "%s", list) < 0 ||
	    add_var(env, "TP_SOCKET_IFNAME", err, "%s", c->ifaces[0]) < 0)
		return -1;
	if (c->family == AF_INET || c->family == AF_INET6) {
		if (add_var(env, "NCCL_SOCKET_FAMILY", err, "%s",
			    c->family == AF_INET ? "AF_INET" : "AF_INET6") < 0)
			return -1;
	} else if (c->family != AF_UNSPEC) {
		return np_error_set(err, NP_EINTERNAL, 0, "unknown address family %d", c->family);
	}
	if (c->ib_hca && *c->ib_hca) {
		if (c->ib_hca[0] == '^')
			return np_error_set(err, NP_EUSAGE, 0,
					    "NCCL_IB_HCA '%s': an exclude list cannot name the chosen HCAs",
					    c->ib_hca);
		const char *hca = c->ib_hca[0] == '=' ? c->ib_hca + 1 : c->ib_hca;
		if (add_var(env, "NCCL_IB_HCA", err, "=%s", hca) < 0)
			return -1;
	}
	if (c->gid_index >= 0 && add_var(env, "NCCL_IB_GID_INDEX", err, "%d", c->gid_index) < 0)
		return -1;
	return 0;
}

char *outputs_sh_quote(const char *s)
{
	size_t len = 2;
	for (const char *p = s; *p; p++)
		len += *p == '\'' ? 4 : 1;
	char *out = malloc(len + 1), *o = out;
	if (!out)
		return NULL;
	*o++ = '\'';
	for (const char *p = s; *p; p++) {
		if (*p == '\'') {
			/* close the quote, an escaped quote, reopen */
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *p;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return out;
}

char *outputs_render_env(const struct outputs_env *env)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return NULL;
	bool ok = fprintf(f, "# written by nicpick %s\n", NICPICK_VERSION) > 0;
	if (ok && env->decision_id[0])
		ok = fprintf(f, "# decision %s\n", env->decision_id) > 0;
	for (size_t i = 0; ok && i < env->n; i++) {
		char *q = outputs_sh_quote(env->vars[i].value);
		ok = q && fprintf(f, "export %s=%s\n", env->vars[i].key, q) > 0;
		free(q);
	}
	if (fclose(f) != 0 || !ok) {
		free(buf);
		return NULL;
	}
	return buf;
}

int outputs_render_conf(const struct outputs_env *env, char **out, np_error *err)
{
	*out = NULL;
	for (size_t i = 0; i < env->n; i++) {
		const struct outputs_var *v = &env->vars[i];
		for (const unsigned char *p = (const unsigned char *)v->value; *p; p++) {
			/* NCCL strips only the trailing '\n': any other control
			 * character would end up in the value or split the line. */
			if (*p < 0x20 || *p == 0x7f)
				return np_error_set(err, NP_EUSAGE, 0,
						    "%s cannot be written to nccl.conf: its value contains "
						    "control character 0x%02x, which NCCL's conf parser "
						    "would misread",
						    v->key, *p);
		}
		if (strlen(v->value) > NCCL_CONF_VALUE_MAX)
			return np_error_set(err, NP_EUSAGE, 0,
					    "%s cannot be written to nccl.conf: NCCL reads at most %d "
					    "bytes of a value",
					    v->key, NCCL_CONF_VALUE_MAX);
		if (!*v->key || v->key[0] == '#' || strchr(v->key, '=') || strchr(v->key, '\n'))
			return np_error_set(err, NP_EINTERNAL, 0, "invalid variable name '%s'", v->key);
	}

	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return np_error_set(err, NP_EINTERNAL, errno, "rendering nccl.conf");
	/* Only NCCL_* keys: NCCL exports every key of the file, but Gloo and
	 * TensorPipe read theirs before NCCL ever starts, so they live in
	 * nccl.env only.  No '=' in a comment: NCCL before 2.26.2 skips a '#'
	 * line only because it has none (param.cc, setEnvFile). */
	bool ok = fprintf(f,
			  "# written by nicpick %s\n"
			  "# read by NCCL via NCCL_CONF_FILE; variables already set in the "
			  "environment take precedence\n",
			  NICPICK_VERSION) > 0;
	if (ok && env->decision_id[0])
		ok = fprintf(f, "# decision %s\n", env->decision_id) > 0;
	for (size_t i = 0; ok && i < env->n; i++) {
		if (strncmp(env->vars[i].key, "NCCL_", 5) != 0)
			continue;
		ok = fprintf(f, "%s=%s\n", env->vars[i].key, env->vars[i].value) > 0;
	}
	if (fclose(f) != 0 || !ok) {
		free(buf);
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "rendering nccl.conf");
	}
	*out = buf;
	return 0;
}

char *outputs_render_json(const json_t *decision)
{
	char *s = json_dumps(decision, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!s)
		return NULL;
	size_t len = strlen(s);
	char *out = realloc(s, len + 2);
	if (!out) {
		free(s);
		return NULL;
	}
	out[len] = '\n';
	out[len + 1] = '\0';
	return out;
}
