/* sysfs attribute parsing: the text of `speed`, `mtu`, `uevent`, an
 * InfiniBand port's `rate`, PCI addresses and `device` link targets.  The
 * file reading around them (one read(2) of a small file, NUL-terminated)
 * is not fuzzed; the parsers of what it read are, each with the property it
 * promises.  The first byte picks the parser. */
#include "fuzz.h"

#include <ctype.h>

#include "nic/nic_priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char *s = fuzz_cstr(data + 1, size - 1);
	long v = 0;
	char out[4096];
	switch (data[0] % 6) {
	case 0:
		if (nicp_parse_long(s, &v))
			FUZZ_CHECK(*s && (isdigit((unsigned char)s[strlen(s) - 1])), "'%s'", s);
		break;
	case 1:
		v = nicp_parse_speed(s);
		FUZZ_CHECK(v == -1 || (v > 0 && v < 100000000L), "speed %ld from '%s'", v, s);
		break;
	case 2: {
		char dt[16];
		if (nicp_uevent_devtype(s, dt, sizeof(dt)))
			FUZZ_CHECK(strlen(dt) < sizeof(dt) && !strchr(dt, '\n'), "devtype '%s'", dt);
		break;
	}
	case 3:
		v = nicp_parse_rate(s);
		FUZZ_CHECK(v >= -1, "rate %ld from '%s'", v, s);
		break;
	case 4:
		if (nicp_is_pci_addr(s))
			FUZZ_CHECK(strlen(s) >= 12 && s[strlen(s) - 2] == '.', "pci '%s'", s);
		break;
	default: {
		/* The normalised path stays inside the root: no leading '/', no
		 * ".." or "." component, no empty one. */
		size_t len = 1 + (data[0] / 6) % 64;
		nicp_path_normalise(s, out, len);
		FUZZ_CHECK(strlen(out) < len && out[0] != '/', "'%s' -> '%s'", s, out);
		for (char *c = out; *c;) {
			char *e = strchrnul(c, '/');
			size_t cl = (size_t)(e - c);
			FUZZ_CHECK(cl > 0 && !(cl == 1 && c[0] == '.') &&
					   !(cl == 2 && c[0] == '.' && c[1] == '.'),
				   "'%s' -> '%s'", s, out);
			c = *e ? e + 1 : e;
		}
		break;
	}
	}
	free(s);
	return 0;
}
