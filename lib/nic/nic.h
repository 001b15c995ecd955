/* Network interfaces of one node: discovery, classification, snapshots.
 *
 * Facts come from two sources that can each be replaced for tests and
 * offline replay: the netlink dump of links and addresses (or a saved
 * `ip -d -j addr show` document) and sysfs (or a fixture tree shaped like
 * /sys).  Classification never relies on the interface name. */
#ifndef NP_NIC_H
#define NP_NIC_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

enum nic_class {
	NIC_CLASS_PHYSICAL,
	NIC_CLASS_SRIOV_VF,
	NIC_CLASS_BOND,
	NIC_CLASS_VLAN,
	NIC_CLASS_MACVLAN,
	NIC_CLASS_IPVLAN,
	NIC_CLASS_IPOIB,
	NIC_CLASS_VETH,
	NIC_CLASS_BRIDGE,
	NIC_CLASS_TUNNEL,
	NIC_CLASS_TUNTAP,
	NIC_CLASS_LOOPBACK,
	NIC_CLASS_VIRTUAL, /* any other virtual device (dummy, team, ...) */
	NIC_CLASS_COUNT,
};

/* "physical", "sriov-vf", "bond", ... ; NULL for out-of-range values. */
const char *nic_class_name(enum nic_class c);
/* Inverse of nic_class_name; returns -1 for an unknown name. */
int nic_class_from_name(const char *name);

#define NIC_ADDR_TEXT_MAX 64 /* "ffff:...:ffff" plus "/128" */

struct nic_addr {
	int family;              /* AF_INET or AF_INET6 */
	unsigned char bytes[16]; /* network order; 4 used for AF_INET */
	int prefixlen;
	char text[NIC_ADDR_TEXT_MAX]; /* address only, no prefix: "10.0.0.1" */
};

/* True for 169.254.0.0/16 and fe80::/10. */
bool nic_addr_is_link_local(const struct nic_addr *a);

#define NIC_HCA_MAX 64

/* One port of an RDMA device that sits on this interface. */
struct nic_rdma_port {
	char hca[NIC_HCA_MAX]; /* "mlx5_0" */
	int port;              /* 1-based port number */
	bool active;           /* ports/N/state is "4: ACTIVE" */
	char link_layer[16];   /* "InfiniBand" or "Ethernet" */
	long rate_mbps;        /* from ports/N/rate, -1 unknown */
	int gid_index_v4_rocev2; /* index of the RoCE v2 GID that carries the
				  * interface's first IPv4 address, -1 none */
};

/* Can NCCL_IB_HCA carry this port exactly?  NCCL splits the list on ',',
 * reads what follows ':' as the port (misc/utils.cc parseStringList) and a
 * leading '^' or '=' as the list's mode (transport/net_ib.cc); the kernel
 * lets an RDMA device be renamed to almost anything (rdma dev set).
 * NP_EUSAGE, naming the device, when it cannot. */
int nic_hca_check(const struct nic_rdma_port *p, np_error *err);

struct nic {
	char name[IFNAMSIZ];
	int ifindex;
	char kind[32];   /* netlink IFLA_INFO_KIND ("veth", "bond"); "" none */
	int arphrd;      /* ARPHRD_* from netlink or sysfs `type`; -1 unknown */
	char devtype[32]; /* uevent DEVTYPE; "" none */
	enum nic_class cls;
	char tunnel[16]; /* for NIC_CLASS_TUNNEL: "vxlan", "geneve", ... */

	bool up;             /* IFF_UP */
	char operstate[16];  /* "up", "down", "unknown", ... */
	int carrier;         /* 1, 0, or -1 when unknown */
	int mtu;
	char mac[64];        /* link-layer address as text ("" none) */

	long speed_mbps;     /* own speed from sysfs, -1 unknown */
	long eff_speed_mbps; /* bond: sum of active slaves; bridge/vlan/macvlan:
			      * that of the physical lower device; else own */
	char pci[32];        /* PCI address of the `device` link, "" none */
	int numa_node;       /* -1 unknown */
	char driver[32];     /* driver module name, "" unknown */
	bool has_device;     /* sysfs `device` link present */
	bool is_vf;          /* `device/physfn` present */

	int master_ifindex;  /* bond or bridge this is enslaved to, 0 none */
	int link_ifindex;    /* lower device (vlan, macvlan, ipvlan), 0 none */
	int *lower;          /* ifindexes of lower devices: bond slaves,
			      * bridge ports, vlan/macvlan parent */
	size_t n_lower;

	struct nic_addr *addrs; /* global and link-local addresses, no host scope */
	size_t n_addrs;

	struct nic_rdma_port *rdma;
	size_t n_rdma;
};

struct nic_list {
	struct nic *v;
	size_t n;
};

/* Where discovery reads its facts from.  NULL members mean "this node". */
struct nic_source {
	const char *sysfs_root;   /* default "/sys" */
	const char *netlink_json; /* file with `ip -d -j addr show` output; NULL:
				   * ask the kernel over netlink */
};

int nic_discover(const struct nic_source *src, struct nic_list *out, np_error *err);
void nic_list_free(struct nic_list *l);
const struct nic *nic_list_find_index(const struct nic_list *l, int ifindex);
const struct nic *nic_list_find_name(const struct nic_list *l, const char *name);

/* Facts that classification uses; a pure function so it can be table-tested. */
struct nic_class_facts {
	const char *kind;    /* netlink kind or "" */
	int arphrd;          /* -1 unknown */
	const char *devtype; /* uevent DEVTYPE or "" */
	bool has_device;     /* sysfs `device` link */
	bool is_vf;          /* sysfs `device/physfn` */
	bool has_bonding;    /* sysfs `bonding/` */
	bool has_bridge;     /* sysfs `bridge/` */
	bool has_tun_flags;  /* sysfs `tun_flags` */
	bool is_loopback;    /* IFF_LOOPBACK */
};
enum nic_class nic_classify(const struct nic_class_facts *f, char *tunnel, size_t tunnel_len);

/* Fill eff_speed_mbps of every interface from its lower devices. */
void nic_compute_effective_speed(struct nic_list *l);

/* Snapshot: the JSON that `nicpick discover --json` prints, and back. The
 * JSON is an array of objects, one per interface; see snapshot.c. */
#include <jansson.h>
json_t *nic_list_to_json(const struct nic_list *l);
/* The same objects one at a time, for a writer that streams them: fn gets
 * each interface's object (its reference to keep or drop) and returns
 * non-zero to stop, which is then returned. */
int nic_list_each_json(const struct nic_list *l, int (*fn)(size_t i, json_t *obj, void *ud),
		       void *ud);
/* One interface without its list: "master"/"link" are null (the
 * *_ifindex keys still carry them) and "lower" holds ifindexes, not names.
 * To add per-interface keys, prefer nic_list_to_json and
 * json_array_get(arr, i): element i is l->v[i]. */
json_t *nic_to_json(const struct nic *n);
int nic_list_from_json(const json_t *arr, struct nic_list *out, np_error *err);
int nic_snapshot_load(const char *path, struct nic_list *out, np_error *err);

#endif
