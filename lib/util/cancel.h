/* A run's cancellation.  Signal handling is process-wide state, so cmd/
 * installs the handlers; the handler stores the signal's number in a flag
 * that lib reads through the run's context wherever it waits (the API
 * client's transfers and back-offs, the smoke companion, the output lock),
 * and ends what it does with np_error_cancelled. */
#ifndef NP_CANCEL_H
#define NP_CANCEL_H

#include <signal.h>
#include <stdio.h>

#include "util/err.h"

typedef volatile sig_atomic_t np_cancel_flag;

/* 0, or the number of the signal that stopped the run (flag NULL: never). */
static inline int np_cancelled(const np_cancel_flag *flag)
{
	return flag ? (int)*flag : 0;
}

/* "SIGTERM", "SIGINT", else "signal N". */
static inline const char *np_signal_name(int sig, char *buf, size_t len)
{
	if (sig == SIGTERM)
		return "SIGTERM";
	if (sig == SIGINT)
		return "SIGINT";
	snprintf(buf, len, "signal %d", sig);
	return buf;
}

/* "stopped by SIGTERM while WHAT" (NP_EINTERNAL; cmd/ exits 128 + sig). */
static inline int np_error_cancelled(np_error *err, int sig, const char *what)
{
	char b[24];
	return np_error_set(err, NP_EINTERNAL, 0, "stopped by %s while %s",
			    np_signal_name(sig, b, sizeof(b)), what);
}

#endif
