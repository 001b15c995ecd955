/* What the readers of nccl.env and nccl.conf make of the rendered text,
 * for the env/conf round-trip targets.
 *
 * sh_read_env() is a reader of a strict subset of POSIX sh: `export
 * KEY=WORD` lines where WORD is made of '...' (everything literal up to the
 * next quote), \c (c literal) and characters that are never special to sh
 * (letters, digits, and _ = , . : / + @ % -).  Any other unquoted character
 * fails the check, so text outside that subset, which only a real shell
 * could judge, is reported rather than guessed at.  fuzz_envsh runs the
 * real /bin/sh on the same files.
 *
 * nccl_read_conf() follows NCCL's setEnvFile (param.cc): a line starting
 * with '#' is a comment, the key ends at the first '=', the value is the
 * rest of the line (only '\n' stripped), cut at 1023 bytes. */
#ifndef NP_FUZZ_ENV_MODEL_H
#define NP_FUZZ_ENV_MODEL_H

#include <stdbool.h>
#include <string.h>

#include "outputs/outputs.h"

struct model_var {
	char key[64];
	char value[2048];
};

static inline bool sh_plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("_=,.:/+@%-", c);
}

/* Returns the number of variables read, or -1 (why in *why). */
static inline int sh_read_env(const char *t, struct model_var *vars, int max, const char **why)
{
	int n = 0;
	/* The first line is the comment. */
	if (*t != '#') {
		*why = "no comment line";
		return -1;
	}
	t = strchr(t, '\n');
	if (!t) {
		*why = "comment line not ended";
		return -1;
	}
	t++;
	while (*t) {
		if (strncmp(t, "export ", 7) != 0) {
			*why = "a line that is not `export`";
			return -1;
		}
		t += 7;
		if (n == max) {
			*why = "too many variables";
			return -1;
		}
		struct model_var *v = &vars[n++];
		size_t k = 0;
		while ((*t >= 'A' && *t <= 'Z') || *t == '_' || (*t >= '0' && *t <= '9'))
			if (k < sizeof(v->key) - 1)
				v->key[k++] = *t++;
			else
				t++;
		v->key[k] = '\0';
		if (!k || *t++ != '=') {
			*why = "no NAME= after export";
			return -1;
		}
		size_t o = 0;
		for (;;) {
			if (o >= sizeof(v->value) - 1) {
				*why = "value too long";
				return -1;
			}
			unsigned char c = (unsigned char)*t;
			if (c == '\0') {
				*why = "file ends inside a line";
				return -1;
			} else if (c == '\n') {
				t++;
				break;
			} else if (c == '\'') {
				const char *e = strchr(t + 1, '\'');
				if (!e) {
					*why = "unterminated single quote";
					return -1;
				}
				size_t len = (size_t)(e - t - 1);
				if (o + len >= sizeof(v->value)) {
					*why = "value too long";
					return -1;
				}
				memcpy(v->value + o, t + 1, len);
				o += len;
				t = e + 1;
			} else if (c == '\\') {
				if (t[1] == '\0') {
					*why = "backslash at the end";
					return -1;
				}
				if (t[1] != '\n') /* \<newline> is a line continuation */
					v->value[o++] = t[1];
				t += 2;
			} else if (sh_plain(c)) {
				v->value[o++] = (char)c;
				t++;
			} else {
				*why = "a character special to sh outside quotes";
				return -1;
			}
		}
		v->value[o] = '\0';
	}
	return n;
}

static inline int nccl_read_conf(const char *t, struct model_var *vars, int max)
{
	int n = 0;
	while (*t) {
		const char *e = strchrnul(t, '\n');
		const char *eq = memchr(t, '=', (size_t)(e - t));
		if (*t != '#' && eq && n < max) {
			struct model_var *v = &vars[n++];
			size_t kl = (size_t)(eq - t), vl = (size_t)(e - eq - 1);
			if (kl >= sizeof(v->key))
				kl = sizeof(v->key) - 1;
			if (vl > 1023)
				vl = 1023;
			memcpy(v->key, t, kl);
			v->key[kl] = '\0';
			memcpy(v->value, eq + 1, vl);
			v->value[vl] = '\0';
		}
		t = *e ? e + 1 : e;
	}
	return n;
}

/* The input as a choice: NUL-separated interface names (up to 3), then the
 * HCA list; the first byte picks the family and GID index. */
struct fuzz_choice {
	char buf[4096];
	struct outputs_choice c;
};

static inline bool fuzz_choice_from(const uint8_t *data, size_t size, struct fuzz_choice *fc)
{
	if (size < 1 || size >= sizeof(fc->buf))
		return false;
	memset(&fc->c, 0, sizeof(fc->c));
	unsigned sel = data[0];
	memcpy(fc->buf, data + 1, size - 1);
	fc->buf[size - 1] = '\0';
	const char *parts[4] = { 0 };
	size_t np = 0;
	for (char *p = fc->buf; np < 4 && p <= fc->buf + size - 1;) {
		parts[np++] = p;
		p += strlen(p) + 1;
	}
	fc->c.n_ifaces = np > 3 ? 3 : np;
	for (size_t i = 0; i < fc->c.n_ifaces; i++)
		fc->c.ifaces[i] = parts[i];
	fc->c.ib_hca = np > 3 ? parts[3] : NULL;
	fc->c.family = (sel & 3) == 1 ? 2 /* AF_INET */ : (sel & 3) == 2 ? 10 /* AF_INET6 */ : 0;
	fc->c.gid_index = (sel & 4) ? (int)(sel >> 3) : -1;
	return true;
}

#endif
