/* nicpick discover: the node's interfaces and their verdicts, as a table
 * or as `--json` (streamed).  It also takes the policy and the sources,
 * declared with select's options. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "select/decision.h"
#include "util/arena.h"
#include "util/jsonw.h"

static const struct cli_opt opts[] = {
	{ "json", no_argument, NULL, NULL, CLI_SEC_SELECT, CLI_DISCOVER | CLI_SMOKE, CLI_FLAG(json) },
	CLI_OPT_END,
};

static int write_item(json_t *obj, void *ud)
{
	int r = np_jsonw_item(ud, obj);
	np_json_arena_reset(); /* obj and all it holds are gone */
	return r;
}

/* Streamed: one interface's object at a time, in an arena that is rewound
 * after each, so a thousand interfaces touch the memory of one.  The bytes
 * are those of the whole array dumped compactly. */
static int write_json(const struct select_result *r)
{
	static struct np_jsonw out;
	np_jsonw_init(&out, STDOUT_FILENO);
	np_json_arena_begin();
	int rc = np_jsonw_raw("[", 1, &out) == 0 &&
				 select_discover_each(&r->nics, &r->ranking, write_item, &out) == 0 &&
				 np_jsonw_raw("]\n", 2, &out) == 0
			 ? 0
			 : NP_EINTERNAL;
	np_json_arena_end();
	if (!np_jsonw_flush(&out)) {
		/* written past stdio: main's flushed() cannot see it */
		np_error err = { 0 };
		np_error_set(&err, NP_EINTERNAL, out.error, "cannot write to standard output");
		return cli_fail(&err);
	}
	return rc;
}

static int run(int argc, char **argv)
{
	struct cli cli;
	int rc = cli_parse(argc, argv, &cli_discover, &cli);
	if (rc)
		return rc;
	np_error err = { 0 };
	struct select_result r;
	if (select_gather(&cli.sel, &r, &err) < 0) {
		select_result_free(&r);
		return cli_fail(&err);
	}
	if (cli.json) {
		rc = write_json(&r);
	} else {
		char *t = select_render_table(&r.nics, &r.ranking);
		if (t)
			fputs(t, stdout);
		rc = t ? 0 : NP_EINTERNAL;
		free(t);
	}
	select_result_free(&r);
	return rc; /* main's flushed() checks what stdio wrote */
}

const struct cli_verb cli_discover = {
	.name = "discover",
	.bit = CLI_DISCOVER,
	.synopsis = { "nicpick discover [--json] [SOURCE...]" },
	.opts = opts,
	.run = run,
};
