/* How much memory jansson may take to parse one document.  A body's size
 * does not bound its tree: `[{},{},...]` turns every 3 bytes into an
 * object of over 200 bytes, so that 8 MiB of it take over a GiB.  jansson
 * has no limit on values, but lets its allocation functions be replaced:
 * the ones below count what the parse on the calling thread allocates and
 * refuse past a budget, which makes jansson give the parse up and free
 * what it built.
 *
 * json_set_alloc_funcs is process-wide state, so cmd/ installs these once
 * at start-up, before any thread; lib/ only ever sets a budget for its own
 * thread around one parse (np_json_loadb_budget).  Other threads, and this
 * one outside such a parse, allocate as before.  Without the install the
 * budget is not enforced (a program linking lib/ that never installs). */
#ifndef NP_JSONMEM_H
#define NP_JSONMEM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Route jansson's allocations through the counter (cmd/, once, before
 * threads start): the functions installed before stay underneath. */
void np_json_budget_install(void);
bool np_json_budget_installed(void);

/* What glibc's malloc takes for a request of n bytes: the chunk with its
 * 8-byte header, rounded up to 16, 32 bytes at least.  A budget is counted
 * in these. */
size_t np_json_budget_charge(size_t n);

/* json_loadb, with what jansson allocates for it counted against budget
 * bytes (np_json_budget_charge each, frees not given back: the count only
 * grows, so it bounds the peak too).  NULL and *over true (over may be
 * NULL) when the budget refused it; *used (may be NULL) gets the count. */
json_t *np_json_loadb_budget(const char *buf, size_t len, size_t flags, size_t budget,
			     json_error_t *error, bool *over, size_t *used);

#endif
