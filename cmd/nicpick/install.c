/* nicpick install DIR: copy nicpick (and nicpick-smoke beside it) into a
 * shared volume.  It takes no options. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "install/install.h"

static const struct cli_opt opts[] = {
	{ NULL, 0, "DIR",
	  "copy nicpick, and nicpick-smoke when it is beside it,\ninto the existing directory DIR (a shared volume)",
	  CLI_SEC_INSTALL, 0, .set = NULL },
	CLI_OPT_END,
};

static int run(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		cli_help(&cli_install);
	if (argc != 2 || argv[1][0] == '-')
		return cli_usage_error("%s", argc < 2 ? "install: DIR is required"
				       : argc > 2 ? "install: expected one DIR"
						  : "install takes no options");
	np_error err = { 0 };
	struct install_result r;
	if (install_self("/proc/self/exe", argv[1], &r, &err) < 0)
		return cli_fail(&err);
	for (int i = 0; i < r.n; i++)
		fprintf(stderr, "nicpick: installed %s\n", r.paths[i]);
	return 0;
}

const struct cli_verb cli_install = {
	.name = "install",
	.synopsis = { "nicpick install DIR" },
	.opts = opts,
	.run = run,
};
