/* Ranking of a node's interfaces, user policy, NCCL's interface list syntax.
 * Everything here is pure: no I/O, so it is unit-tested and fuzzed alone. */
#ifndef NP_POLICY_H
#define NP_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "nic/nic.h"
#include "util/err.h"
#include "util/prefix.h"

/* NCCL_SOCKET_IFNAME syntax, as NCCL's own parser reads it (socket.cc
 * ncclFindInterfaces / ncclOsFindInterfaces, utils.cc parseStringList):
 *  - a value of zero or one character counts as unset (NCCL ignores it);
 *  - a leading '^' excludes, then a leading '=' means exact names, otherwise
 *    each entry is a prefix ("eth1" matches "eth10");
 *  - entries are separated by ',', empty entries are skipped;
 *  - "name:port" is accepted: the name is what is matched and the port is
 *    ignored, as NCCL ignores it for socket interfaces (it passes port -1);
 *    an entry with nothing before ':' is skipped;
 *  - an empty list after the prefixes ("^=", "=,") behaves as in NCCL: it
 *    matches every name, so with '^' it selects none.
 * Where NCCL's reading would differ from a plain reading, the list is
 * refused with NP_EUSAGE instead of guessed at:
 *  - more than 16 entries: NCCL parses only the first MAX_IFS (16) and
 *    silently ignores the rest, so an exclude list would stop excluding;
 *  - an entry longer than an interface name can be (IFNAMSIZ - 1): in an
 *    include list it selects nothing, in an exclude list it excludes
 *    nothing, both almost certainly a typo (a missing ','); and NCCL copies
 *    entries into a 64-byte buffer without a bound. */
#define POLICY_LIST_MAX 16 /* NCCL's MAX_IFS */
#define POLICY_LIST_TEXT_MAX 256

struct policy_list {
	bool set;     /* false: no filter */
	bool exclude; /* '^' */
	bool exact;   /* '=' */
	size_t n;
	char names[POLICY_LIST_MAX][IFNAMSIZ + 8];
	char text[POLICY_LIST_TEXT_MAX]; /* the value as given, for messages */
};

int policy_list_parse(const char *s, struct policy_list *out, np_error *err);
/* True when `name` is selected by the list: an unset list selects every
 * name; an exclude list selects names that match none of its entries. */
bool policy_list_selects(const struct policy_list *l, const char *name);
/* True when `name` matches one of the entries (exact or prefix, per the
 * list's '='), whatever the list's '^' says; false for an unset list. */
bool policy_list_matches(const struct policy_list *l, const char *name);

struct policy {
	struct policy_list include; /* --include */
	struct policy_list exclude; /* --exclude: entries are names to refuse,
				     * whatever the leading '^' says, so
				     * "--exclude ^docker,lo" and "--exclude
				     * docker,lo" both refuse docker* and lo* */
	bool has_cidr;
	struct np_prefix cidr; /* --cidr */
	int family;      /* AF_UNSPEC, AF_INET, AF_INET6 (--family) */
	long min_speed;  /* Mb/s; 0 = none (--min-speed) */
};

void policy_init(struct policy *p);
/* "10.0.0.0/8", "fd00::/64"; host bits are accepted and cleared. */
int policy_set_cidr(struct policy *p, const char *cidr, np_error *err);
/* "inet", "inet6", "4" or "6". */
int policy_set_family(struct policy *p, const char *family, np_error *err);
/* Mb/s as a positive integer ("100000"), or Gb/s with a 'G' suffix ("100G"). */
int policy_set_min_speed(struct policy *p, const char *mbps, np_error *err);
/* --include / --exclude (NCCL list syntax, see above). */
int policy_set_include(struct policy *p, const char *list, np_error *err);
int policy_set_exclude(struct policy *p, const char *list, np_error *err);

#define POLICY_REASONS_MAX 8
#define POLICY_REASON_LEN 96

/* The verdict on one interface. */
struct policy_verdict {
	bool usable;   /* may carry NCCL traffic to another node */
	long score;    /* higher is better; meaningful when usable, 0 otherwise */
	int addr;      /* index into nic->addrs of the address to use, -1 none */
	int family;    /* family of that address */
	long socket_mbps; /* the speed that counts for socket traffic, -1 unknown:
			   * an IPoIB link's rate is not what sockets get over it */
	size_t n_reasons; /* why not usable, or notes on a usable one */
	char reasons[POLICY_REASONS_MAX][POLICY_REASON_LEN];
};

struct policy_ranking {
	struct policy_verdict *v; /* parallel to nic_list.v */
	size_t n;
	size_t *order;   /* indexes of usable interfaces, best first */
	size_t n_usable;
};

/* Judge and order every interface.  Never fails for "nothing usable": then
 * n_usable is 0 and every verdict says why.
 *
 * The score of a usable interface is a sum, each part written as a note:
 *   class:  physical, sriov-vf, bond, ipoib 1000; vlan, macvlan, ipvlan and
 *           bridge take the points of their lower device (so a bridge over a
 *           NIC ranks with the NIC); macvlan/ipvlan/vlan whose lower device
 *           is in another namespace (Multus secondary) 800; veth 500;
 *           tunnel 200; other virtual 100;
 *   speed:  1 + eff_speed_mbps / 100 (capped at 3.2 Tb/s); unknown 0;
 *   rdma:   300 when an RDMA port on the interface is ACTIVE;
 * that sum is multiplied by 10 and 1 is added when the chosen address is
 * IPv4, so the family only breaks ties.  Equal scores order by name. */
int policy_rank(const struct policy *p, const struct nic_list *l, struct policy_ranking *out,
		np_error *err);
void policy_ranking_free(struct policy_ranking *r);

#endif
