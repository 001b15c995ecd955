#include "util/jsonmem.h"

#include <stdint.h>
#include <stdlib.h>

static json_malloc_t under_malloc = malloc;
static bool installed;

/* The budget of this thread's parse under way; off outside one. */
static _Thread_local struct {
	bool on, over;
	size_t left, used;
} tb;

size_t np_json_budget_charge(size_t n)
{
	if (n > SIZE_MAX - 32)
		return SIZE_MAX;
	size_t c = (n + 8 + 15) & ~(size_t)15;
	return c < 32 ? 32 : c;
}

static void *counted_malloc(size_t n)
{
	if (tb.on) {
		size_t c = np_json_budget_charge(n);
		if (c > tb.left) {
			tb.over = true;
			return NULL; /* jansson fails the parse and frees what it built */
		}
		tb.left -= c;
		tb.used += c;
	}
	return under_malloc(n);
}

void np_json_budget_install(void)
{
	if (installed)
		return;
	json_malloc_t m = NULL;
	json_free_t f = NULL;
	json_get_alloc_funcs(&m, &f);
	under_malloc = m ? m : malloc;
	/* Blocks stay the underlying allocator's: freed by its free, also
	 * after the parse. */
	json_set_alloc_funcs(counted_malloc, f ? f : free);
	installed = true;
}

bool np_json_budget_installed(void)
{
	return installed;
}

json_t *np_json_loadb_budget(const char *buf, size_t len, size_t flags, size_t budget,
			     json_error_t *error, bool *over, size_t *used)
{
	tb.on = true;
	tb.over = false;
	tb.left = budget;
	tb.used = 0;
	json_t *j = json_loadb(buf, len, flags, error);
	bool refused = tb.over;
	size_t n = tb.used;
	tb.on = false;
	tb.over = false;
	if (refused) {
		/* jansson may still have returned a value where a failed
		 * allocation was not fatal to it: the budget decides. */
		json_decref(j);
		j = NULL;
	}
	if (over)
		*over = refused;
	if (used)
		*used = n;
	return j;
}
