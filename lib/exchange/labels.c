/* Which pods form the job, and which one gathers: lib/jobs decides from the
 * pod's own object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"
#include "jobs/jobs.h"

int exchange_selectors(const json_t *pod, char **selector, char **leader_selector, np_error *err)
{
	*selector = *leader_selector = NULL;
	struct jobs_pod p;
	struct jobs_rule r;
	int ret = jobs_pod_parse(pod, &p, err) < 0 || jobs_rule(&p, &r, err) < 0 ? -1 : 0;
	jobs_pod_free(&p);
	if (ret < 0)
		return -1;
	*selector = strdup(r.selector);
	*leader_selector = strdup(r.leader_selector);
	if (!*selector || !*leader_selector) {
		free(*selector);
		free(*leader_selector);
		*selector = *leader_selector = NULL;
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	}
	return 0;
}

void exchange_gatherer_why(const json_t *pod, char *buf, size_t len)
{
	struct jobs_pod p;
	struct jobs_rule r;
	np_error e = { 0 };
	if (jobs_pod_parse(pod, &p, &e) < 0 || jobs_rule(&p, &r, &e) < 0)
		snprintf(buf, len, "no rule applies (%s)", e.msg);
	else
		snprintf(buf, len, "it is %s of %s %s, which gathers by the rule for the kind \"%s\"%s", r.gatherer,
			 r.kind == JOBS_KIND_BATCH ? "Job" : r.kind == JOBS_KIND_JOBSET ? "JobSet" : "PyTorchJob",
			 r.job, jobs_kind_name(r.kind),
			 r.kind == JOBS_KIND_PYTORCH_WORKERS && !p.pt_role_master
				 ? " (its containers carry no MASTER_ADDR)" : "");
	jobs_pod_free(&p);
}
