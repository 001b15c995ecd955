/* `nicpick install DIR`: hand nicpick to another container.  A first init
 * container copies its own executable, and the smoke companion when one
 * sits beside it, into a shared volume (an emptyDir); the training image
 * then runs them from there. */
#ifndef NP_INSTALL_H
#define NP_INSTALL_H

#include <limits.h>

#include "util/err.h"

#define INSTALL_SMOKE_NAME "nicpick-smoke"
#define INSTALL_PLUGIN_NAME "kubectl-nicpick"
#define INSTALL_MAX_FILES 3

struct install_result {
	int n;                                  /* files installed */
	char paths[INSTALL_MAX_FILES][PATH_MAX]; /* DIR/nicpick, DIR/nicpick-smoke,
						  * DIR/kubectl-nicpick */
};

/* Copy the program at SELF (a path or a link to it, such as /proc/self/exe)
 * as DIR/nicpick, and SELF's directory's nicpick-smoke, if present, as
 * DIR/nicpick-smoke, and DIR/kubectl-nicpick, a symbolic link to nicpick
 * (kubectl's plugin name: `kubectl nicpick status JOB` with DIR on PATH):
 * each to a temporary in DIR, mode 0755, fsync'ed, then all renamed into
 * place.  DIR must be an existing directory (NP_EUSAGE
 * otherwise: a mistyped mount path is not created inside the image); a
 * failure to write leaves DIR as it was (NP_EINTERNAL). */
int install_self(const char *self, const char *dir, struct install_result *out, np_error *err);

#endif
