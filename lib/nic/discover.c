/* Discovery: the pipeline that builds the interface list from netlink (or
 * a recorded dump), ethtool, sysfs and the RDMA devices. */
#include "nic/nic.h"
#include "nic/nic_priv.h"

#include <stdlib.h>

static void facts_free(struct nicp_facts *fx, size_t n)
{
	if (!fx)
		return;
	for (size_t i = 0; i < n; i++)
		free(fx[i].devpath);
	free(fx);
}

int nic_discover(const struct nic_source *src, struct nic_list *out, np_error *err)
{
	const char *root = src && src->sysfs_root ? src->sysfs_root : "/sys";
	struct nic_list l = { 0 };
	struct nicp_facts *fx = NULL;
	struct nicp_index ix = { 0 };
	int rc;

	out->v = NULL;
	out->n = 0;
	if (src && src->netlink_json)
		rc = nicp_json_read(src->netlink_json, &l, &fx, err);
	else
		rc = nicp_netlink_read(&l, &fx, err);
	if (rc < 0)
		goto fail;
	rc = nicp_index_build(&ix, &l, err);
	if (rc < 0)
		goto fail;
	/* On the live node one ethtool dump replaces a thousand `speed` files;
	 * if it is not available, sysfs is read as for a fixture tree. */
	if (!(src && (src->sysfs_root || src->netlink_json)))
		(void)nicp_ethtool_speeds(&l, &ix, fx);
	rc = nicp_sysfs_read(root, &l, fx, err);
	if (rc < 0)
		goto fail;
	nicp_classify_all(&l, fx);
	rc = nicp_links_build(root, &l, fx, &ix, !(src && src->netlink_json), err);
	if (rc < 0)
		goto fail;
	rc = nicp_rdma_read(root, &l, fx, &ix, err);
	if (rc < 0)
		goto fail;
	nic_compute_effective_speed(&l);
	nicp_index_free(&ix);
	facts_free(fx, l.n);
	*out = l;
	return 0;
fail:
	nicp_index_free(&ix);
	facts_free(fx, l.n);
	nic_list_free(&l);
	return -1;
}
