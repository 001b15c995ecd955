/* User policy: --include/--exclude, --cidr, --family, --min-speed. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/policy.h"

void policy_init(struct policy *p)
{
	memset(p, 0, sizeof(*p));
	p->family = AF_UNSPEC;
}

int policy_set_include(struct policy *p, const char *list, np_error *err)
{
	if (policy_list_parse(list, &p->include, err) < 0)
		return np_error_wrap(err, "invalid --include");
	return 0;
}

int policy_set_exclude(struct policy *p, const char *list, np_error *err)
{
	if (policy_list_parse(list, &p->exclude, err) < 0)
		return np_error_wrap(err, "invalid --exclude");
	return 0;
}

/* Strict decimal integer in [lo, hi]; the whole string must be digits. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
	if (!s || !*s || *s == '+' || *s == '-' || *s == ' ')
		return -1;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int policy_set_cidr(struct policy *p, const char *cidr, np_error *err)
{
	if (np_prefix_parse(cidr, &p->cidr, err) < 0)
		return np_error_wrap(err, "invalid --cidr");
	p->has_cidr = true;
	return 0;
}

int policy_set_family(struct policy *p, const char *family, np_error *err)
{
	static const struct {
		const char *name;
		int family;
	} names[] = {
		{"inet", AF_INET},
		{"4", AF_INET},
		{"inet6", AF_INET6},
		{"6", AF_INET6},
	};
	for (size_t i = 0; family && i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(family, names[i].name) == 0) {
			p->family = names[i].family;
			return 0;
		}
	}
	return np_error_set(err, NP_EUSAGE, 0,
			    "invalid --family '%s': expected inet, inet6, 4 or 6",
			    family ? family : "");
}

int policy_set_min_speed(struct policy *p, const char *mbps, np_error *err)
{
	char num[32];
	long mult = 1;
	size_t len = mbps ? strlen(mbps) : 0;
	if (len > 0 && len < sizeof(num)) {
		memcpy(num, mbps, len + 1);
		if (num[len - 1] == 'G' || num[len - 1] == 'g') {
			num[len - 1] = '\0';
			mult = 1000;
		}
		long v;
		if (parse_long(num, 1, LONG_MAX / 1000, &v) == 0) {
			p->min_speed = v * mult;
			return 0;
		}
	}
	return np_error_set(err, NP_EUSAGE, 0,
			    "invalid --min-speed '%s': expected a positive number of Mb/s "
			    "(100000) or Gb/s with a G suffix (100G)",
			    mbps ? mbps : "");
}
