#include "util/text.h"

#include <stdio.h>
#include <string.h>

static size_t escape(char *dst, size_t size, const unsigned char *p)
{
	size_t o = 0;
	for (; *p && o + 1 < size; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			if (o + 5 >= size)
				break;
			o += (size_t)snprintf(dst + o, size - o, "\\x%02x", *p);
		} else {
			dst[o++] = (char)*p;
		}
	}
	dst[o] = '\0';
	return o;
}

size_t np_text_clean(char *dst, size_t size, const char *src, enum np_text_rule rule)
{
	if (size == 0)
		return 0;
	if (rule == NP_TEXT_ESCAPE)
		return escape(dst, size, (const unsigned char *)src);
	size_t n = strlen(src);
	if (n >= size) {
		n = size - 1;
		while (rule == NP_TEXT_SPACE && n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
			n--; /* never cut a UTF-8 sequence */
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		if (rule == NP_TEXT_SPACE)
			dst[i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
		else
			dst[i] = c < 0x20 || c > 0x7e ? '?' : (char)c;
	}
	dst[n] = '\0';
	return n;
}
