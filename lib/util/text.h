/* Text that came from outside (interface names, other pods' reports, API
 * bodies, NCCL's errors, GPU names) made safe to show on one line.  One
 * sanitiser, three rules, because the places it lands differ:
 *   NP_TEXT_ESCAPE  a control character becomes \xNN (error messages: the
 *                   reader sees exactly what was there);
 *   NP_TEXT_SPACE   a control character becomes a space and UTF-8 is kept,
 *                   never cut inside a sequence (annotation fields another
 *                   pod shows);
 *   NP_TEXT_ASCII   anything but printable ASCII becomes '?' (the smoke
 *                   companion's result message and what nicpick quotes of
 *                   a file it did not write). */
#ifndef NP_TEXT_H
#define NP_TEXT_H

#include <stddef.h>

enum np_text_rule { NP_TEXT_ESCAPE, NP_TEXT_SPACE, NP_TEXT_ASCII };

/* Copy src into dst (size bytes, always terminated when size > 0) by the
 * rule, truncating what does not fit.  dst and src must not overlap,
 * except that NP_TEXT_SPACE and NP_TEXT_ASCII may clean in place
 * (dst == src).  Returns the length written. */
size_t np_text_clean(char *dst, size_t size, const char *src, enum np_text_rule rule);

#endif
