/* nicpick version: what was built, from what. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifndef NICPICK_VERSION
#define NICPICK_VERSION "0.0.0"
#endif
#ifndef NICPICK_GITREV
#define NICPICK_GITREV "unknown"
#endif

static const struct cli_opt opts[] = { CLI_OPT_END };

static int run(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		cli_help(&cli_version);
	if (argc > 1)
		return argv[1][0] == '-' ? cli_usage_error("unknown option '%s' of version", argv[1])
					 : cli_usage_error("unexpected argument '%s'", argv[1]);
	printf("nicpick %s (%s)\n", NICPICK_VERSION, NICPICK_GITREV);
	return 0;
}

const struct cli_verb cli_version = {
	.name = "version",
	.synopsis = { "nicpick version" },
	.opts = opts,
	.run = run,
};
