/* Internals shared by the lib/nic sources; not part of the public API. */
#ifndef NP_NIC_PRIV_H
#define NP_NIC_PRIV_H

#include <sys/types.h>

#include "nic/nic.h"

/* Facts that matter only while discovering: classification inputs that
 * struct nic does not keep, and the resolved `device` path for matching
 * RDMA devices.  One per interface, parallel to nic_list.v. */
struct nicp_facts {
	bool loopback;     /* IFF_LOOPBACK */
	bool has_bonding;  /* sysfs bonding/ */
	bool has_bridge;   /* sysfs bridge/ */
	bool has_tun_flags; /* sysfs tun_flags */
	bool link_other_ns; /* netlink IFLA_LINK refers to another namespace */
	bool speed_known;   /* speed_mbps came from ethtool: skip sysfs `speed` */
	char *devpath;     /* `device` target, normalised, relative to the
			    * sysfs root ("devices/pci0000:00/0000:00:03.0");
			    * NULL when there is no device link */
};

/* Open-addressing hash from ifindex and from name to a position in a
 * nic_list, so that every cross-reference is O(1) and discovery of n
 * interfaces stays O(n). */
struct nicp_index {
	size_t cap;       /* power of two */
	ssize_t *by_idx;  /* positions, -1 empty */
	ssize_t *by_name;
	const struct nic_list *l;
};

int nicp_index_build(struct nicp_index *ix, const struct nic_list *l, np_error *err);
void nicp_index_free(struct nicp_index *ix);
ssize_t nicp_index_pos(const struct nicp_index *ix, int ifindex);
ssize_t nicp_index_name(const struct nicp_index *ix, const char *name);

/* Append one zeroed interface (fields set to "unknown") to *l. */
struct nic *nicp_list_add(struct nic_list *l, size_t *cap, np_error *err);
int nicp_nic_add_addr(struct nic *n, const struct nic_addr *a, np_error *err);
void nicp_nic_init(struct nic *n);
void nicp_nic_clear(struct nic *n);

/* Link and address sources: fill name, ifindex, kind, arphrd, up, operstate,
 * carrier, mtu, mac, master_ifindex, link_ifindex, addrs; and fx[i].loopback
 * and fx[i].link_other_ns.  *fx is allocated parallel to out->v. */
int nicp_netlink_read(struct nic_list *out, struct nicp_facts **fx, np_error *err);
int nicp_json_read(const char *path, struct nic_list *out, struct nicp_facts **fx,
		   np_error *err);

/* Speeds of all interfaces from one ethtool netlink dump; -1 when ethtool
 * netlink is not available (then sysfs is read instead). */
int nicp_ethtool_speeds(struct nic_list *l, const struct nicp_index *ix, struct nicp_facts *fx);
/* sysfs facts for every interface (speed, device, DEVTYPE, ...). */
int nicp_sysfs_read(const char *root, struct nic_list *l, struct nicp_facts *fx,
		    np_error *err);
/* True for netlink kinds that are pure software (veth, bridge, vlan, ...):
 * the kind alone decides their class and they have no `device`. */
bool nicp_kind_is_software(const char *kind);
/* Classify every interface from its facts. */
void nicp_classify_all(struct nic_list *l, const struct nicp_facts *fx);
/* Fill master/link from sysfs where the link source gave none (bonding/slaves,
 * brif/, lower_*), then build every `lower` array.  Needs the classes.
 * masters_complete: the live netlink dump named every master already, so
 * bonding/slaves and brif/ need not be read. */
int nicp_links_build(const char *root, struct nic_list *l, const struct nicp_facts *fx,
		     const struct nicp_index *ix, bool masters_complete, np_error *err);
/* RDMA ports from class/infiniband, attached to their interfaces. */
int nicp_rdma_read(const char *root, struct nic_list *l, const struct nicp_facts *fx,
		   const struct nicp_index *ix, np_error *err);

/* Small sysfs helpers (sysfs.c), all relative to a directory fd. */
/* Read a small file into buf, trailing newline stripped; -1 with errno. */
ssize_t nicp_read_small(int dirfd, const char *path, char *buf, size_t len);
/* Parse a decimal long; false when the text is not a number. */
bool nicp_parse_long(const char *s, long *out);
/* Lexically normalise "a/b/../c" (no leading '/'), clamping ".." at the
 * root; writes into out. */
void nicp_path_normalise(const char *in, char *out, size_t len);
/* Resolve CLASSDIR/NAME/device (e.g. "class/infiniband", "mlx5_0") to a
 * normalised path relative to the sysfs root, following the link of NAME
 * itself lexically so that fixture trees resolve inside their root.  *out
 * is malloc'd; -1 (errno set) when there is no device link. */
int nicp_device_path(int rootfd, const char *classdir, const char *name, char **out);
/* snprintf for paths; false when the result did not fit (the compiler
 * cannot prove it does, and a cut path must not be used). */
bool nicp_pathf(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Copy a string into a fixed field, cutting it to fit. */
void nicp_copy(char *dst, size_t len, const char *src);
/* sysfs `speed` in Mb/s; -1 for unknown (-1, (u32)-1) or not a number. */
long nicp_parse_speed(const char *s);
/* DEVTYPE= of a uevent file's text into out (cut to fit); false if none. */
bool nicp_uevent_devtype(const char *uevent, char *out, size_t len);
/* InfiniBand port `rate` ("100 Gb/sec (4X EDR)") in Mb/s; -1 if unreadable. */
long nicp_parse_rate(const char *s);
/* "0000:a2:00.0" shape. */
bool nicp_is_pci_addr(const char *s);

#endif
