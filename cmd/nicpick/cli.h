/* The part every verb of nicpick shares: the options' tables and the usage
 * text generated from them, parsing, the log lines, and the exit codes.
 * Each verb's own options live in its own file (discover.c, select.c,
 * smoke.c, install.c); an option is declared once, in the table of the
 * verb it belongs to, with the other verbs that also take it. */
#ifndef NICPICK_CMD_CLI_H
#define NICPICK_CMD_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "select/select.h"
#include "util/err.h"
#include "util/log.h"

enum cli_verb_bit { CLI_DISCOVER = 1, CLI_SELECT = 2, CLI_SMOKE = 4, CLI_STATUS = 8, CLI_ALL = 15 };

/* The usage text's sections, in the order it shows them. */
enum cli_section {
	CLI_SEC_SELECT,
	CLI_SEC_SMOKE,
	CLI_SEC_POLICY,
	CLI_SEC_AGREE,
	CLI_SEC_LOG,
	CLI_SEC_INSTALL,
	CLI_SEC_STATUS,
	CLI_SEC_SOURCES,
	CLI_SEC_N,
};

/* Everything the verbs parse into. */
struct cli {
	bool json;
	struct select_opts sel;
	long timeout;
	/* smoke outside Kubernetes */
	long rank, world;
	const char *comm_id;
	const char *interface;
};

struct cli_opt {
	const char *name;  /* the long option; NULL: a row of the usage text only */
	int has_arg;       /* no_argument, required_argument, optional_argument */
	const char *usage; /* the usage text's left column; NULL: not shown */
	const char *help;  /* lines after the first start with '\n' */
	enum cli_section section;
	unsigned verbs;    /* CLI_* of the verbs that take it */
	int (*set)(struct cli *c, const char *arg); /* 0, or an exit code */
	/* Without set: store the value (CLI_STRING) or true (CLI_TRUE) at the
	 * field `at` of struct cli; CLI_HELP: print the verb's usage, exit 0. */
	enum { CLI_CALL, CLI_STRING, CLI_TRUE, CLI_HELP } kind;
	size_t at;
};
#define CLI_STR(field) .kind = CLI_STRING, .at = offsetof(struct cli, field)
#define CLI_FLAG(field) .kind = CLI_TRUE, .at = offsetof(struct cli, field)
#define CLI_OPT_END { .name = NULL, .usage = NULL }

struct cli_verb {
	const char *name;
	unsigned bit;             /* CLI_*; 0: parses no options of the tables */
	const char *synopsis[2];  /* its lines of the usage text */
	const struct cli_opt *opts; /* the options it owns, CLI_OPT_END last */
	int (*run)(int argc, char **argv);
};

/* main.c: every verb, in the usage text's order. */
extern const struct cli_verb *const cli_verbs[];
extern const struct cli_verb cli_discover, cli_select, cli_smoke, cli_install, cli_status,
	cli_version;

extern enum np_log_format cli_log_fmt;
extern int64_t cli_started_ms;
extern const char *cli_log_pod_name;

/* The whole usage text, generated from the tables. */
void cli_print_usage(FILE *out);
/* `nicpick VERB --help`: the verb's usage on stdout (its synopsis, the
 * options it takes, its own table's and the ones it shares with other
 * verbs, grouped as in the whole text, and the exit codes), then exit 0
 * (1 when stdout cannot be written). */
__attribute__((noreturn)) void cli_help(const struct cli_verb *verb);

/* Returns 0, or an exit code. */
int cli_parse(int argc, char **argv, const struct cli_verb *verb, struct cli *c);

/* Every line nicpick prints on stderr goes through here. */
void cli_emit(const char *level, const char *phase, bool elapsed, const char *msg,
	      const struct np_log_field *fields, size_t n_fields);
/* The exchange's and the smoke step's log lines, with the time since start. */
void cli_log_line(void *ud, enum exchange_log_level level, const char *msg);
/* The error line with what to do next; returns the exit code (128 + N
 * once signal N stopped the run, as a shell reports it). */
int cli_fail(const np_error *err);
/* The same, where table_shown says whether the verb printed the table
 * (interfaces, pods) that the next step for exit 3 and 4 points at. */
int cli_fail_shown(const np_error *err, bool table_shown);

/* SIGTERM (a pod's deletion) and SIGINT end a run within a second: the
 * handler stores the signal's number in the flag returned, which lib
 * reads through the run's context (util/cancel.h); a second signal, or a
 * run not ended a second later, ends the process at once with 128 + N.
 * Verbs that do not wait (discover, version, install) keep the default. */
const volatile sig_atomic_t *cli_catch_signals(void);
__attribute__((format(printf, 1, 2))) int cli_usage_error(const char *fmt, ...);
int cli_unknown_option(const char *arg, const char *verb);
int cli_check_value(const char *name, const char *value);

int cli_parse_long(const char *s, long min, long max, long *out);
/* --NAME's value in min..max, else the usage error "--NAME 'A': EXPECT". */
int cli_long(const char *name, const char *a, long min, long max, const char *expect, long *dst);
int cli_int(const char *name, const char *a, long min, long max, const char *expect, int *dst);
/* The index in words (NULL-terminated) of a, the value of --name: 0, or
 * the usage error "--name 'a': expected w0, w1 or w2" and its exit code. */
int cli_word(const char *name, const char *a, const char *const *words, int *dst);
/* "64M", "1G", "65536": bytes, binary suffixes. */
int cli_parse_bytes(const char *s, long min, long max, long *out);

/* Where nicpick-smoke is and what it inherits: read here, so lib/ reads no
 * environment of its own. */
void cli_smoke_env(struct select_smoke_opts *o);

#endif
