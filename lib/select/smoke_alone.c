/* `nicpick smoke`: who this pod is in the all-reduce when it runs alone,
 * from a finished out-dir's decision.json or from the ranks given. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select/decision.h"
#include "select/select.h"

/* NCCL_COMM_ID is used as given (NCCL parses it); checked here only so
 * that a malformed one is a usage error, not an NCCL failure. */
static int check_comm_id(const char *cid, np_error *err)
{
	const char *colon = strrchr(cid, ':');
	if (!colon || colon == cid || !colon[1])
		return np_error_set(err, NP_EUSAGE, 0,
				    "--comm-id '%s': expected ADDR:PORT or [IPV6]:PORT", cid);
	char *end;
	errno = 0;
	long port = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || port < 1 || port > 65535)
		return np_error_set(err, NP_EUSAGE, 0, "--comm-id '%s': the port must be 1 to 65535",
				    cid);
	return 0;
}

int select_smoke_alone_args(int rank, int world, const char *comm_id, const char *iface,
			    const char *env_ifname, struct select_smoke_alone *s, np_error *err)
{
	memset(s, 0, sizeof(*s));
	s->plan = (struct select_smoke_plan){ .min_mbps = -1, .root_pod = "", .rank = rank,
					      .world = world };
	/* NCCL's settings are the environment's own; the device is checked
	 * against --interface, else NCCL_SOCKET_IFNAME when it names exactly
	 * one interface. */
	const char *want = iface ? iface : env_ifname;
	if (want && *want == '=')
		want++;
	if (want && *want && !strchr(want, ',') && !strchr(want, '^') && strlen(want) < sizeof(s->ifname))
		snprintf(s->ifname, sizeof(s->ifname), "%s", want);
	s->plan.ifname = s->ifname[0] ? s->ifname : NULL;
	s->plan.comm_id = comm_id; /* the caller's, as given */
	return check_comm_id(comm_id, err);
}

int select_smoke_alone_outdir(const char *dir, struct select_smoke_alone *s, np_error *err)
{
	memset(s, 0, sizeof(*s));
	struct select_decision_read *od = &s->decision;
	if (select_decision_load(dir, od, err) < 0)
		return -1;
	for (size_t i = 0; i < od->n_vars && s->env.n < OUTPUTS_VARS_MAX; i++) {
		s->env.vars[s->env.n].key = od->key[i];
		snprintf(s->env.vars[s->env.n++].value, sizeof(s->env.vars[0].value), "%s", od->value[i]);
	}
	s->plan = (struct select_smoke_plan){
		.rank = od->rank,
		.world = od->world,
		.root_pod = "",
		.ifname = od->ifname,
		.ib_hca = od->ib_hca[0] ? od->ib_hca : NULL,
		.min_mbps = od->min_mbps,
		.comm_id = od->comm_id,
	};
	return check_comm_id(od->comm_id, err);
}
