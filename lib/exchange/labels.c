/* Which pods form the job, and which one gathers: lib/jobs decides from the
 * pod's own object. */
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
