/* NCCL's interface list syntax (--include / --exclude, NCCL_SOCKET_IFNAME).
 * Checks what the parser promises: bounded entries of interface-name size,
 * none empty or holding a separator, and matching that agrees with a
 * plain reading of the entries. */
#include "fuzz.h"

#include <net/if.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* First line: the list; second: a name to match against it. */
	char *s = fuzz_cstr(data, size);
	char *name = strchr(s, '\n');
	if (name)
		*name++ = '\0';
	else
		name = "eth0";
	struct policy_list l;
	np_error err = { 0 };
	if (policy_list_parse(s, &l, &err) < 0) {
		FUZZ_CHECK(err.status == NP_EUSAGE && !strchr(err.msg, '\n'), "'%s'", err.msg);
		free(s);
		return 0;
	}
	FUZZ_CHECK(l.set == (strlen(s) > 1), "set %d for '%s'", l.set, s);
	FUZZ_CHECK(l.n <= POLICY_LIST_MAX, "%zu entries", l.n);
	bool any = false;
	for (size_t i = 0; i < l.n; i++) {
		size_t n = strlen(l.names[i]);
		FUZZ_CHECK(n >= 1 && n < IFNAMSIZ, "entry %zu has %zu bytes", i, n);
		FUZZ_CHECK(!strpbrk(l.names[i], ",:"), "entry '%s'", l.names[i]);
		if (l.exact ? strcmp(name, l.names[i]) == 0 : strncmp(name, l.names[i], n) == 0)
			any = true;
	}
	FUZZ_CHECK(policy_list_matches(&l, name) == (l.set && any), "'%s' vs '%s'", s, name);
	if (l.set)
		FUZZ_CHECK(policy_list_selects(&l, name) == ((l.n == 0 || any) != l.exclude),
			   "'%s' vs '%s'", s, name);
	else
		FUZZ_CHECK(policy_list_selects(&l, name), "unset list refused '%s'", name);
	free(s);
	return 0;
}
