/* One error type for the whole library.
 *
 * A function that can fail takes `np_error *err` as its last parameter and
 * returns a negative value; the error carries a status (which maps 1:1 to the
 * command's exit code), the errno where one applies, and a message.  Callers
 * add context with np_error_wrap() on the way up instead of printing. */
#ifndef NP_ERR_H
#define NP_ERR_H

#include <stddef.h>

/* Statuses are the documented exit codes (README.md, "Exit codes"). */
enum np_status {
	NP_OK = 0,
	NP_EINTERNAL = 1, /* internal or runtime error (I/O, netlink, memory) */
	NP_EUSAGE = 2,    /* bad command line or bad input given by the user */
	NP_ENOIFACE = 3,  /* no usable interface on this node */
	NP_ENOCOMMON = 4, /* the job's pods share no usable network */
	NP_EK8S = 5,      /* Kubernetes API error or deadline */
	NP_ESMOKE = 6,    /* smoke all-reduce failed */
};

#define NP_ERR_MSG_MAX 1024

typedef struct np_error {
	int status;    /* enum np_status; NP_OK when no error is set */
	int sys_errno; /* errno at the failure, 0 if none */
	char msg[NP_ERR_MSG_MAX];
} np_error;

/* Set *err (if non-NULL) and return -1.  When sys_errno is non-zero,
 * ": strerror(sys_errno)" is appended to the message. */
int np_error_set(np_error *err, int status, int sys_errno, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prefix the message already in *err with "CONTEXT: "; returns -1. */
int np_error_wrap(np_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void np_error_clear(np_error *err);

#endif
