/* nccl.env and nccl.conf as a round trip, in process: for any choice, what
 * a POSIX shell reads back from nccl.env (see env_model.h for how much of
 * sh that reader covers) and what NCCL reads back from nccl.conf equal the
 * values meant, or the choice is refused with a one-line usage error. */
#include "fuzz.h"

#include "env_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fuzz_choice fc;
	static struct outputs_env env;
	static struct model_var got[OUTPUTS_VARS_MAX];
	np_error err = { 0 };
	const char *why = NULL;

	if (!fuzz_choice_from(data, size, &fc))
		return 0;
	if (outputs_env_from_choice(&fc.c, &env, &err) < 0) {
		FUZZ_CHECK(err.status == NP_EUSAGE && !strchr(err.msg, '\n'), "'%s'", err.msg);
		return 0;
	}
	/* What was meant: the exact names, as NCCL's '=' list and Gloo's list. */
	FUZZ_CHECK(!strcmp(env.vars[0].key, "NCCL_SOCKET_IFNAME") && env.vars[0].value[0] == '=' &&
			   !strcmp(env.vars[1].value, env.vars[0].value + 1) &&
			   !strncmp(env.vars[1].value, fc.c.ifaces[0], strlen(fc.c.ifaces[0])),
		   "names not carried");

	char *sh = outputs_render_env(&env);
	FUZZ_CHECK(sh, "render_env failed");
	int n = sh_read_env(sh, got, OUTPUTS_VARS_MAX, &why);
	FUZZ_CHECK(n == (int)env.n, "%s: read %d of %zu variables from:\n%s", why ? why : "", n,
		   env.n, sh);
	for (size_t i = 0; i < env.n; i++)
		FUZZ_CHECK(!strcmp(got[i].key, env.vars[i].key) &&
				   !strcmp(got[i].value, env.vars[i].value),
			   "%s: sh reads '%s', meant '%s'", env.vars[i].key, got[i].value,
			   env.vars[i].value);
	free(sh);

	char *conf = NULL;
	if (outputs_render_conf(&env, &conf, &err) < 0) {
		FUZZ_CHECK(err.status == NP_EUSAGE && !strchr(err.msg, '\n'), "'%s'", err.msg);
		return 0;
	}
	n = nccl_read_conf(conf, got, OUTPUTS_VARS_MAX);
	int k = 0;
	for (size_t i = 0; i < env.n; i++) {
		if (strncmp(env.vars[i].key, "NCCL_", 5) != 0)
			continue;
		FUZZ_CHECK(k < n && !strcmp(got[k].key, env.vars[i].key) &&
				   !strcmp(got[k].value, env.vars[i].value),
			   "%s: NCCL reads '%s', meant '%s'", env.vars[i].key, k < n ? got[k].value : "",
			   env.vars[i].value);
		k++;
	}
	FUZZ_CHECK(k == n, "NCCL reads %d variables, %d written", n, k);
	free(conf);
	return 0;
}
