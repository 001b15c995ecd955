/* Cleanup attributes so that early returns cannot leak (as crun does). */
#ifndef NP_CLEANUP_H
#define NP_CLEANUP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void np_freep(void *p)
{
	free(*(void **)p);
}
static inline void np_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
static inline void np_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

#define cleanup_free __attribute__((cleanup(np_freep)))
#define cleanup_close __attribute__((cleanup(np_closep)))
#define cleanup_fclose __attribute__((cleanup(np_fclosep)))

#endif
