/* The one way a hand-grown array makes room: doubling, from a first
 * capacity. */
#ifndef NP_GROW_H
#define NP_GROW_H

#include <stddef.h>

/* Make room for element n of the array *itemsp points to (cap elements of
 * size bytes): when n == *cap, realloc to twice *cap (first: initial).
 * Returns 0, or -1 when out of memory (the array and *cap unchanged). */
int np_grow(void *itemsp, size_t *cap, size_t n, size_t size, size_t initial);

#endif
