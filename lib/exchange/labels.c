/* Which pods form the job, and which one gathers, from the pod's own labels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"
#include "exchange/exchange_priv.h"

/* Job kinds in order of precedence: a JobSet's pods also carry the labels
 * of the batch Job they belong to, so the JobSet comes first. */
static const struct job_kind {
	const char *name_label;
	/* labels and values that single out the gatherer (index 0) */
	const char *leader[2][2];
} job_kinds[] = {
	{ "training.kubeflow.org/job-name",
	  { { "training.kubeflow.org/replica-type", "master" },
	    { "training.kubeflow.org/replica-index", "0" } } },
	{ "jobset.sigs.k8s.io/jobset-name",
	  { { "jobset.sigs.k8s.io/job-global-index", "0" },
	    { "batch.kubernetes.io/job-completion-index", "0" } } },
	{ "batch.kubernetes.io/job-name",
	  { { "batch.kubernetes.io/job-completion-index", "0" }, { NULL, NULL } } },
};

int exchange_selectors(const json_t *pod, char **selector, char **leader_selector, np_error *err)
{
	*selector = *leader_selector = NULL;
	for (size_t i = 0; i < sizeof(job_kinds) / sizeof(job_kinds[0]); i++) {
		const struct job_kind *k = &job_kinds[i];
		const char *job = ex_label(pod, k->name_label);
		if (!job)
			continue;
		if (asprintf(selector, "%s=%s", k->name_label, job) < 0)
			break;
		char lead[1024];
		int off = snprintf(lead, sizeof(lead), "%s", *selector);
		for (size_t j = 0; j < 2 && k->leader[j][0]; j++)
			off += snprintf(lead + off, sizeof(lead) - (size_t)off, ",%s=%s", k->leader[j][0],
					k->leader[j][1]);
		*leader_selector = strdup(lead);
		if (!*leader_selector)
			break;
		return 0;
	}
	free(*selector);
	*selector = NULL;
	return np_error_set(err, NP_EUSAGE, 0,
			    "this pod carries none of the job labels (training.kubeflow.org/job-name, "
			    "jobset.sigs.k8s.io/jobset-name, batch.kubernetes.io/job-name): pass "
			    "--selector and --leader-selector");
}
