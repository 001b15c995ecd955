#include "util/err.h"
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Messages quote names and values that came from outside (interface names,
 * other pods' reports, API bodies): a control character in one must not
 * split the one-line error or drive the terminal, so it is written \xNN. */
static void one_line(char *msg, size_t cap)
{
	char tmp[NP_ERR_MSG_MAX];
	np_text_clean(tmp, sizeof(tmp), msg, NP_TEXT_ESCAPE);
	snprintf(msg, cap, "%s", tmp);
}

int np_error_set(np_error *err, int status, int sys_errno, const char *fmt, ...)
{
	if (!err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		err->msg[0] = '\0';
	if (sys_errno) {
		size_t len = strlen(err->msg);
		snprintf(err->msg + len, sizeof(err->msg) - len, ": %s", strerror(sys_errno));
	}
	one_line(err->msg, sizeof(err->msg));
	err->status = status ? status : NP_EINTERNAL;
	err->sys_errno = sys_errno;
	return -1;
}

int np_error_wrap(np_error *err, const char *fmt, ...)
{
	if (!err)
		return -1;
	char prefix[NP_ERR_MSG_MAX];
	char old[NP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	one_line(prefix, sizeof(prefix));
	memcpy(old, err->msg, sizeof(old));
	/* Truncation keeps the start of both parts, which is what a reader needs. */
	size_t plen = strnlen(prefix, sizeof(err->msg) - 3);
	memcpy(err->msg, prefix, plen);
	memcpy(err->msg + plen, ": ", 2);
	size_t room = sizeof(err->msg) - plen - 3;
	size_t olen = strnlen(old, room);
	memcpy(err->msg + plen + 2, old, olen);
	err->msg[plen + 2 + olen] = '\0';
	if (err->status == NP_OK)
		err->status = NP_EINTERNAL;
	return -1;
}

void np_error_clear(np_error *err)
{
	if (!err)
		return;
	err->status = NP_OK;
	err->sys_errno = 0;
	err->msg[0] = '\0';
}
