#include "util/rate.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

static const struct {
	const char *name;
	double bytes; /* a second */
} units[] = { { "GB/s", 1e9 }, { "MB/s", 1e6 }, { "kB/s", 1e3 }, { "B/s", 1 } };
#define N_UNITS (sizeof(units) / sizeof(units[0]))

/* The largest unit in which the figure, rounded to three digits, is at
 * least 1 (999.96 MB/s is 1.00 GB/s, not "1000 MB/s"); B/s below that. */
static size_t unit_of(double gbps)
{
	for (size_t u = 0; u < N_UNITS; u++)
		if (gbps * 1e9 / units[u].bytes >= 0.9995)
			return u;
	return N_UNITS - 1;
}

/* Decimals for three significant digits of v (at most 9). */
static int decimals(double v)
{
	if (v >= 99.95)
		return 0;
	if (v >= 9.995)
		return 1;
	int d = 2;
	for (double t = v; t > 0 && t < 0.9995 && d < 9; t *= 10)
		d++;
	return d;
}

/* Not a rate nicpick measures (negative, NaN, infinite): as it is. */
static bool odd(double gbps)
{
	return !isfinite(gbps) || gbps < 0;
}

void np_rate_text(char *buf, size_t len, double gbps, const char *sep)
{
	if (!len)
		return;
	if (odd(gbps)) {
		snprintf(buf, len, "%g%sGB/s", gbps, sep);
		return;
	}
	if (gbps == 0) {
		snprintf(buf, len, "0%sGB/s", sep);
		return;
	}
	size_t u = unit_of(gbps);
	double v = gbps * 1e9 / units[u].bytes;
	snprintf(buf, len, "%.*f%s%s", decimals(v), v, sep, units[u].name);
}

void np_rate_pair_text(char *buf, size_t len, double a, double b, const char *sep)
{
	if (!len)
		return;
	if (odd(a) || odd(b)) {
		snprintf(buf, len, "%g/%g%sGB/s", a, b, sep);
		return;
	}
	double hi = a > b ? a : b, lo = a > b ? b : a;
	if (hi == 0) {
		snprintf(buf, len, "0/0%sGB/s", sep);
		return;
	}
	size_t u = unit_of(hi);
	double va = a * 1e9 / units[u].bytes, vb = b * 1e9 / units[u].bytes;
	double vlo = lo * 1e9 / units[u].bytes, scaled = vlo;
	int d = decimals(hi * 1e9 / units[u].bytes);
	for (int i = 0; i < d; i++)
		scaled *= 10;
	int dlo = vlo > 0 && scaled < 0.5 ? decimals(vlo) : d;
	snprintf(buf, len, "%.*f/%.*f%s%s", a < hi ? dlo : d, va, b < hi ? dlo : d, vb, sep,
		 units[u].name);
}
