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
	p->cidr_family = AF_UNSPEC;
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
	const char *slash = cidr ? strchr(cidr, '/') : NULL;
	if (!slash)
		return np_error_set(err, NP_EUSAGE, 0,
				    "invalid --cidr '%s': expected ADDRESS/PREFIX, e.g. 10.0.0.0/8",
				    cidr ? cidr : "");
	char addr[INET6_ADDRSTRLEN];
	size_t alen = (size_t)(slash - cidr);
	if (alen == 0 || alen >= sizeof(addr))
		return np_error_set(err, NP_EUSAGE, 0, "invalid --cidr '%s': bad address", cidr);
	memcpy(addr, cidr, alen);
	addr[alen] = '\0';

	unsigned char bytes[16] = {0};
	int family, maxlen;
	if (inet_pton(AF_INET, addr, bytes) == 1) {
		family = AF_INET;
		maxlen = 32;
	} else if (inet_pton(AF_INET6, addr, bytes) == 1) {
		family = AF_INET6;
		maxlen = 128;
	} else {
		return np_error_set(err, NP_EUSAGE, 0,
				    "invalid --cidr '%s': '%s' is not an IPv4 or IPv6 address", cidr,
				    addr);
	}
	long prefix;
	if (parse_long(slash + 1, 0, maxlen, &prefix) < 0)
		return np_error_set(err, NP_EUSAGE, 0,
				    "invalid --cidr '%s': prefix length must be 0 to %d", cidr,
				    maxlen);
	/* "10.1.2.3/8" is accepted as 10.0.0.0/8: users paste host addresses. */
	for (int bit = (int)prefix; bit < maxlen; bit++)
		bytes[bit / 8] &= (unsigned char)~(0x80u >> (bit % 8));

	p->has_cidr = true;
	p->cidr_family = family;
	memcpy(p->cidr_bytes, bytes, sizeof(bytes));
	p->cidr_prefix = (int)prefix;
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

json_t *policy_to_json(const struct policy *p)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "include", p->include.set ? json_string(p->include.text) : json_null());
	json_object_set_new(o, "exclude", p->exclude.set ? json_string(p->exclude.text) : json_null());
	if (p->has_cidr) {
		char a[INET6_ADDRSTRLEN], buf[INET6_ADDRSTRLEN + 8];
		inet_ntop(p->cidr_family, p->cidr_bytes, a, sizeof(a));
		snprintf(buf, sizeof(buf), "%s/%d", a, p->cidr_prefix);
		json_object_set_new(o, "cidr", json_string(buf));
	} else {
		json_object_set_new(o, "cidr", json_null());
	}
	json_object_set_new(o, "family",
			    p->family == AF_INET    ? json_string("inet")
			    : p->family == AF_INET6 ? json_string("inet6")
						    : json_null());
	json_object_set_new(o, "min_speed_mbps",
			    p->min_speed > 0 ? json_integer(p->min_speed) : json_null());
	return o;
}
