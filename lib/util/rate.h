/* A transfer rate as people read it.  nicpick measures rates in GB/s
 * (10^9 bytes a second, as NCCL's and nccl-tests' busbw), and they range
 * from 20 GB/s on a fast link to a few MB/s on a throttled one or a test
 * double: a fixed "%.2f GB/s" reads "0.00" for all of the latter.  These
 * pick the unit that suits the figure (GB/s, MB/s, kB/s, B/s, powers of
 * 1000) and print three significant digits in it:
 *   2.94 GB/s, 22.9 GB/s, 171 MB/s, 5.00 MB/s, 500 kB/s; 0 is "0 GB/s". */
#ifndef NP_RATE_H
#define NP_RATE_H

#include <stddef.h>

#define NP_RATE_TEXT_MAX 48

/* sep goes between the figure and its unit: " " in a sentence, "" in a
 * table's cell ("171MB/s").  Always terminated when len > 0. */
void np_rate_text(char *buf, size_t len, double gbps, const char *sep);

/* Two rates of one thing (a link's two directions) in one unit, the
 * larger one's: "0.25/0.24 GB/s", "500/480 kB/s".  The smaller gets the
 * larger's decimals, or more where those would show a rate that is not 0
 * as 0 ("2.61/0.00120 GB/s"). */
void np_rate_pair_text(char *buf, size_t len, double a, double b, const char *sep);

#endif
