#include "util/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int np_grow(void *itemsp, size_t *cap, size_t n, size_t size, size_t initial)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : initial;
	if (c <= n || c > SIZE_MAX / size)
		return -1;
	void *old;
	memcpy(&old, itemsp, sizeof(old));
	void *p = realloc(old, c * size);
	if (!p)
		return -1;
	memcpy(itemsp, &p, sizeof(p));
	*cap = c;
	return 0;
}
