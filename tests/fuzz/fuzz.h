/* Helpers shared by the libFuzzer targets (tests/fuzz/fuzz_*.c).
 * A target checks a property, not only "no crash": when the property fails
 * it aborts with a message, and libFuzzer saves the input. */
#ifndef NP_FUZZ_H
#define NP_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                  \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "fuzz property failed: %s: ", #cond);  \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			abort();                                               \
		}                                                              \
	} while (0)

/* The input as a C string (cut at its first NUL, as a C caller sees it). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

#endif
