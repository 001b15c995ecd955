/* NCCL's interface list syntax (NCCL_SOCKET_IFNAME), read the way NCCL reads
 * it so that a list means the same to nicpick and to NCCL. */
#include <string.h>

#include "policy/policy.h"

int policy_list_parse(const char *s, struct policy_list *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	/* NCCL only looks at the value when strlen > 1. */
	if (!s || strlen(s) <= 1)
		return 0;
	if (strlen(s) >= sizeof(out->text))
		return np_error_set(err, NP_EUSAGE, 0,
				    "interface list '%.40s...' is too long (at most %zu characters)",
				    s, sizeof(out->text) - 1);
	strcpy(out->text, s);
	out->set = true;

	const char *p = s;
	if (*p == '^') {
		out->exclude = true;
		p++;
	}
	if (*p == '=') {
		out->exact = true;
		p++;
	}

	while (*p) {
		size_t len = strcspn(p, ",:");
		const char *next = p + strcspn(p, ",");
		/* "name:port": NCCL keeps the name and, for sockets, ignores the
		 * port; ":port" with no name is skipped like an empty entry. */
		if (len > 0) {
			if (len > IFNAMSIZ - 1)
				return np_error_set(err, NP_EUSAGE, 0,
						    "interface list '%s': entry '%.*s' is longer than "
						    "an interface name can be (%d characters), so it "
						    "would never match: a missing ','?",
						    s, (int)len, p, IFNAMSIZ - 1);
			if (out->n == POLICY_LIST_MAX)
				return np_error_set(err, NP_EUSAGE, 0,
						    "interface list '%s' has more than %d entries, and NCCL "
						    "reads only the first %d: give at most %d",
						    s, POLICY_LIST_MAX, POLICY_LIST_MAX, POLICY_LIST_MAX);
			memcpy(out->names[out->n], p, len);
			out->names[out->n][len] = '\0';
			out->n++;
		}
		p = *next ? next + 1 : next;
	}
	return 0;
}

bool policy_list_matches(const struct policy_list *l, const char *name)
{
	if (!l->set)
		return false;
	for (size_t i = 0; i < l->n; i++) {
		if (l->exact ? strcmp(name, l->names[i]) == 0
			     : strncmp(name, l->names[i], strlen(l->names[i])) == 0)
			return true;
	}
	return false;
}

bool policy_list_selects(const struct policy_list *l, const char *name)
{
	if (!l->set)
		return true;
	/* As NCCL's matchIfList: an empty list matches everything. */
	bool match = l->n == 0 || policy_list_matches(l, name);
	return match != l->exclude;
}
