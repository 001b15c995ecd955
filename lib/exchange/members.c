/* Who is in the job: the gatherer's table of pods, folded from watch
 * events, with pods of earlier attempts and old incarnations set aside.
 *
 * A job may have 16,384 pods and the watch brings several events per pod,
 * so every event costs O(1) amortised (plus the few attempts of one job
 * index): members are found by name through a hash index, pods of one job
 * index are chained together, and the counts the gatherer waits on are
 * kept as members change instead of being recounted.  A report is kept
 * with the candidates it has (agree_view over one allocation), not in a
 * whole agree_report sized for AGREE_CAND_MAX. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/gather_priv.h"
#include "util/grow.h"
#include "util/jsonread.h"

static const char *index_labels[] = {
	"training.kubeflow.org/replica-type", "training.kubeflow.org/replica-index",
	"jobset.sigs.k8s.io/job-global-index", "batch.kubernetes.io/job-completion-index",
};

#define NONE SIZE_MAX

/* FNV-1a, 64 bits; NULL hashes as a value no text has. */
uint64_t gather_text_hash(const char *s)
{
	if (!s)
		return 1;
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h | 2; /* never 1 */
}

/* --- the index ------------------------------------------------------------ */

static const char *name_at(const struct gather *g, size_t pos)
{
	return g->m[pos].name;
}

static const char *key_at(const struct gather *g, size_t pos)
{
	return g->groups[pos].key;
}

static size_t index_find(const struct gather *g, const struct member_index *ix, const char *s,
			 const char *(*at)(const struct gather *, size_t), size_t *slot_out)
{
	if (!ix->cap) {
		*slot_out = NONE;
		return NONE;
	}
	size_t mask = ix->cap - 1, i = (size_t)gather_text_hash(s) & mask;
	while (ix->slot[i]) {
		size_t pos = ix->slot[i] - 1;
		if (strcmp(at(g, pos), s) == 0) {
			*slot_out = i;
			return pos;
		}
		i = (i + 1) & mask;
	}
	*slot_out = i;
	return NONE;
}

/* Room for one more (load at most 1/2), then insert at a free slot. */
static int index_insert(const struct gather *g, struct member_index *ix, size_t pos,
			const char *(*at)(const struct gather *, size_t))
{
	if ((ix->used + 1) * 2 > ix->cap) {
		size_t cap = ix->cap ? ix->cap * 2 : 128;
		uint32_t *slot = calloc(cap, sizeof(*slot));
		if (!slot)
			return -1;
		for (size_t i = 0; i < ix->cap; i++) {
			if (!ix->slot[i])
				continue;
			size_t k = (size_t)gather_text_hash(at(g, ix->slot[i] - 1)) & (cap - 1);
			while (slot[k])
				k = (k + 1) & (cap - 1);
			slot[k] = ix->slot[i];
		}
		free(ix->slot);
		ix->slot = slot;
		ix->cap = cap;
	}
	size_t i = (size_t)gather_text_hash(at(g, pos)) & (ix->cap - 1);
	while (ix->slot[i])
		i = (i + 1) & (ix->cap - 1);
	ix->slot[i] = (uint32_t)(pos + 1);
	ix->used++;
	return 0;
}

static void index_free(struct member_index *ix)
{
	free(ix->slot);
	memset(ix, 0, sizeof(*ix));
}

/* The group of a key, made when new; NONE when out of memory. */
static size_t group_of(struct gather *g, const char *key)
{
	size_t slot;
	size_t pos = index_find(g, &g->by_key, key, key_at, &slot);
	if (pos != NONE)
		return pos;
	if (np_grow(&g->groups, &g->cap_groups, g->n_groups, sizeof(*g->groups), 64) < 0)
		return NONE;
	char *k = strdup(key);
	if (!k)
		return NONE;
	g->groups[g->n_groups] = (struct member_group){ .key = k, .head = NONE };
	if (index_insert(g, &g->by_key, g->n_groups, key_at) < 0) {
		free(k);
		return NONE;
	}
	return g->n_groups++;
}

/* --- counts ----------------------------------------------------------------- */

static bool probe_done(const struct gather *g, const struct member *m)
{
	return m->has_probe && m->probe.epoch == g->epoch;
}

static void account(struct gather *g, const struct member *m, int sign)
{
	if (!m->selected)
		return;
	g->n_selected += (size_t)sign;
	if (m->has_report)
		g->n_reported += (size_t)sign;
	if (probe_done(g, m))
		g->n_probed += (size_t)sign;
	if (m->assigned_epoch != g->epoch)
		g->n_unassigned += (size_t)sign;
}

void gather_recount(struct gather *g)
{
	g->n_selected = g->n_reported = g->n_probed = g->n_unassigned = 0;
	for (size_t i = 0; i < g->n; i++)
		account(g, &g->m[i], +1);
	g->counted_epoch = g->epoch;
	g->counted_phase = g->phase;
}

/* The newer of two live pods of one job index: later creation, then name. */
static bool newer(const struct member *a, const struct member *b)
{
	int c = strcmp(a->created, b->created);
	return c > 0 || (c == 0 && strcmp(a->name, b->name) > 0);
}

/* Pick, per job index, the newest live pod: a pod of an earlier attempt
 * must not count.  Only the group of one key changes at a time. */
static void group_unaccount(struct gather *g, size_t grp)
{
	if (grp == NONE)
		return;
	for (size_t i = g->groups[grp].head; i != NONE; i = g->m[i].next_same_key)
		account(g, &g->m[i], -1);
}

static void group_select(struct gather *g, size_t grp)
{
	if (grp == NONE)
		return;
	struct member *best = NULL;
	for (size_t i = g->groups[grp].head; i != NONE; i = g->m[i].next_same_key) {
		struct member *m = &g->m[i];
		m->selected = false;
		if (m->live && (!best || newer(m, best)))
			best = m;
	}
	if (best)
		best->selected = true;
	for (size_t i = g->groups[grp].head; i != NONE; i = g->m[i].next_same_key)
		account(g, &g->m[i], +1);
}

static size_t member_group(struct gather *g, const struct member *m)
{
	if (!m->key)
		return NONE;
	size_t slot;
	return index_find(g, &g->by_key, m->key, key_at, &slot);
}

static void group_unlink(struct gather *g, size_t grp, size_t pos)
{
	if (grp == NONE)
		return;
	size_t *link = &g->groups[grp].head;
	while (*link != NONE && *link != pos)
		link = &g->m[*link].next_same_key;
	if (*link == pos)
		*link = g->m[pos].next_same_key;
	g->m[pos].next_same_key = NONE;
}

/* Everything that changes a member goes through here: the member's group
 * (and its new one) leave the counts, the change is made, and they come
 * back selected again. */
struct change {
	struct gather *g;
	struct member *m;
	size_t grp;
};

static struct change change_begin(struct gather *g, struct member *m)
{
	if (g->counted_epoch != g->epoch || g->counted_phase != g->phase)
		gather_recount(g);
	struct change c = { .g = g, .m = m, .grp = member_group(g, m) };
	group_unaccount(g, c.grp);
	return c;
}

static void change_end(struct change *c)
{
	struct gather *g = c->g;
	size_t now = member_group(g, c->m);
	if (now != c->grp) {
		/* Its contribution left with its old group. */
		c->m->selected = false;
		group_select(g, c->grp);
		group_unaccount(g, now);
	}
	group_select(g, now);
}

/* Move a member to the group of key (the member is inside a change). */
static void set_key(struct gather *g, struct member *m, const char *key)
{
	if (m->key && strcmp(m->key, key) == 0)
		return;
	size_t pos = (size_t)(m - g->m);
	group_unlink(g, member_group(g, m), pos);
	char *k = strdup(key);
	size_t grp = k ? group_of(g, key) : NONE;
	if (grp == NONE) {
		free(k);
		return; /* out of memory: the member counts nowhere */
	}
	free(m->key);
	m->key = k;
	m->next_same_key = g->groups[grp].head;
	g->groups[grp].head = pos;
}

/* --- members ------------------------------------------------------------------ */

struct member *gather_member(struct gather *g, const char *name, bool create)
{
	size_t slot;
	size_t pos = index_find(g, &g->by_name, name, name_at, &slot);
	if (pos != NONE)
		return &g->m[pos];
	if (!create || g->n >= UINT32_MAX - 1)
		return NULL;
	if (np_grow(&g->m, &g->cap, g->n, sizeof(*g->m), 64) < 0)
		return NULL;
	struct member *m = &g->m[g->n];
	memset(m, 0, sizeof(*m));
	m->next_same_key = NONE;
	m->rep_hash = m->as_hash = m->pr_hash = gather_text_hash(NULL);
	if (!(m->name = strdup(name)))
		return NULL;
	if (index_insert(g, &g->by_name, g->n, name_at) < 0) {
		free(m->name);
		return NULL;
	}
	g->n++;
	return m;
}

static void report_clear(struct member *m)
{
	free(m->rep_mem);
	m->rep_mem = NULL;
	memset(&m->rep, 0, sizeof(m->rep));
	m->has_report = false;
}

/* A pinned pod's candidates on the pinned network: the pinned interface
 * is the one the kernel routes it through, the others are not. */
static void apply_pin(struct agree_cand *c, size_t n, const struct member_pin *pin)
{
	for (size_t i = 0; pin && i < n; i++)
		if (c[i].prefixlen == pin->net.len && np_prefix_contains(&pin->net, c[i].family, c[i].addr))
			c[i].route = strcmp(c[i].ifname, pin->ifname) == 0 ? AGREE_ROUTE_USED : AGREE_ROUTE_UNUSED;
}

int gather_member_pin(struct member *m, const char *ifname, const struct np_prefix *net)
{
	if (!m->pin && !(m->pin = calloc(1, sizeof(*m->pin))))
		return -1;
	snprintf(m->pin->ifname, sizeof(m->pin->ifname), "%s", ifname);
	m->pin->net = *net;
	if (m->has_report)
		apply_pin(m->rep_mem, m->rep.n, m->pin);
	return 0;
}

/* One allocation: the candidates, the gpu block if any, pod and node.  A
 * pinned member's candidates are stored pinned: the decision reads them
 * as they are, with no copy. */
static int report_store(struct member *m, const struct agree_report *r)
{
	size_t n = r->n < AGREE_CAND_MAX ? r->n : AGREE_CAND_MAX;
	size_t cands = n * sizeof(struct agree_cand), gpu = r->gpu.has ? sizeof(struct agree_gpu) : 0;
	size_t lp = strlen(r->pod) + 1, ln = strlen(r->node) + 1;
	char *mem = malloc(cands + gpu + lp + ln);
	if (!mem)
		return -1;
	report_clear(m);
	memcpy(mem, r->c, cands);
	if (gpu)
		memcpy(mem + cands, &r->gpu, gpu);
	memcpy(mem + cands + gpu, r->pod, lp);
	memcpy(mem + cands + gpu + lp, r->node, ln);
	apply_pin((struct agree_cand *)mem, n, m->pin);
	m->rep_mem = mem;
	m->rep = (struct agree_view){ .pod = mem + cands + gpu, .node = mem + cands + gpu + lp,
				      .gpu = gpu ? (const struct agree_gpu *)(mem + cands) : NULL,
				      .n = n, .c = (const struct agree_cand *)mem };
	m->has_report = true;
	return 0;
}

static void set_text(char **at, const char *why)
{
	free(*at);
	*at = why && why[0] ? strdup(why) : NULL;
}

void gather_member_set_why(struct member *m, const char *why)
{
	set_text(&m->why, why);
}

/* Each annotation's refusal is cleared by a readable text of that one
 * only: a probe result that is read at last says nothing of the report. */
static void set_probe_why(struct member *m, const char *why)
{
	set_text(&m->probe_why, why);
}

const char *gather_member_why(const struct member *m)
{
	return m->why ? m->why : m->probe_why ? m->probe_why : "";
}

static void probe_store(struct member *m, const struct exchange_probe *p)
{
	free(m->probe.text);
	memset(&m->probe, 0, sizeof(m->probe));
	m->has_probe = p != NULL;
	if (!p)
		return;
	m->probe.epoch = p->epoch;
	m->probe.n = p->n < EXCHANGE_PARTS_MAX ? p->n : EXCHANGE_PARTS_MAX;
	size_t len = 0;
	for (size_t i = 0; i < m->probe.n; i++) {
		m->probe.ok[i] = p->t[i].ok;
		m->probe.mbps[i] = p->t[i].mbps;
		if (!p->t[i].ok)
			len += strlen(p->t[i].detail) + strlen(p->t[i].route_if);
	}
	/* Only a failed trial's texts are read (a passed one has no route_if). */
	char *t = len ? malloc(len + 2 * m->probe.n) : NULL;
	if (!t)
		return; /* none, or out of memory: "probe failed" stands for them */
	m->probe.text = t;
	for (size_t i = 0; i < m->probe.n; i++) {
		const char *d = p->t[i].ok ? "" : p->t[i].detail, *r = p->t[i].ok ? "" : p->t[i].route_if;
		size_t ld = strlen(d) + 1, lr = strlen(r) + 1;
		memcpy(t, d, ld);
		memcpy(t + ld, r, lr);
		t += ld + lr;
	}
}

/* Trial k's detail (text 2k) or route_if (text 2k + 1) in probe.text. */
static const char *probe_text(const struct member *m, size_t k, size_t which)
{
	const char *t = m->probe.text;
	if (!t || k >= m->probe.n)
		return "";
	for (size_t i = 0; i < 2 * k + which; i++)
		t += strlen(t) + 1;
	return t;
}

const char *gather_probe_detail(const struct member *m, size_t k)
{
	return probe_text(m, k, 0);
}

const char *gather_probe_route_if(const struct member *m, size_t k)
{
	return probe_text(m, k, 1);
}

/* A new incarnation: nothing of the old one counts. */
static void member_reset(struct member *m)
{
	report_clear(m);
	probe_store(m, NULL);
	gather_member_set_why(m, NULL);
	set_probe_why(m, NULL);
	free(m->uid);
	m->uid = NULL;
	m->assigned_epoch = 0;
	m->rep_hash = m->as_hash = m->pr_hash = gather_text_hash(NULL);
	m->n_parts = 0;
	free(m->pin);
	m->pin = NULL;
}

void gather_member_set(struct gather *g, struct member *m, bool live, const char *key,
		       const char *created)
{
	struct change c = change_begin(g, m);
	m->live = live;
	if (key)
		set_key(g, m, key);
	if (created)
		snprintf(m->created, sizeof(m->created), "%s", created);
	change_end(&c);
}

void gather_member_set_report(struct gather *g, struct member *m, const struct agree_report *r)
{
	struct change c = change_begin(g, m);
	if (!r)
		report_clear(m);
	else if (report_store(m, r) < 0)
		gather_member_set_why(m, "out of memory");
	change_end(&c);
}

void gather_member_set_probe(struct gather *g, struct member *m, const struct exchange_probe *p)
{
	struct change c = change_begin(g, m);
	probe_store(m, p);
	change_end(&c);
}

void gather_member_set_assigned(struct gather *g, struct member *m, int epoch)
{
	struct change c = change_begin(g, m);
	m->assigned_epoch = epoch;
	change_end(&c);
}

/* The report annotation, read only when its text changed. */
static void read_report(struct member *m, const char *rep, const char *name, const char *uid)
{
	uint64_t h = gather_text_hash(rep);
	if (h == m->rep_hash)
		return;
	m->rep_hash = h;
	report_clear(m);
	gather_member_set_why(m, NULL);
	if (!rep)
		return;
	struct agree_report *r = malloc(sizeof(*r));
	np_error e = { 0 };
	char why[256];
	if (!r) {
		gather_member_set_why(m, "out of memory");
	} else if (agree_report_parse(rep, strlen(rep), r, &e) < 0) {
		snprintf(why, sizeof(why), "%.250s", e.msg);
		gather_member_set_why(m, why);
	} else if (strcmp(r->pod, name) != 0 || strcmp(r->uid, uid) != 0) {
		gather_member_set_why(m, "report was written by an earlier incarnation of the pod");
	} else if (report_store(m, r) < 0) {
		gather_member_set_why(m, "out of memory");
	}
	free(r);
}

/* Fold one Pod object into the member table. */
void gather_member_update(struct gather *g, const char *leader_uid, json_t *pod)
{
	const char *name = ex_meta(pod, "name"), *uid = ex_meta(pod, "uid");
	if (!name || !uid)
		return;
	struct member *m = gather_member(g, name, true);
	if (!m)
		return;
	struct change c = change_begin(g, m);
	if (!m->uid || strcmp(m->uid, uid) != 0) {
		member_reset(m);
		m->uid = strdup(uid);
	}
	/* The gatherer's watch leaves finished pods out and carries no
	 * status (gather_watch); a pod read whole (this pod's own GET) may
	 * tell its phase. */
	const char *phase = np_json_cstr(json_object_get(json_object_get(pod, "status"), "phase"));
	m->live = m->uid && !json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp") &&
		  !(phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0));
	const char *created = ex_meta(pod, "creationTimestamp");
	snprintf(m->created, sizeof(m->created), "%s", created ? created : "");
	char key[AGREE_NAME_MAX];
	size_t off = 0;
	key[0] = '\0';
	for (size_t i = 0; i < sizeof(index_labels) / sizeof(index_labels[0]); i++) {
		const char *v = ex_label(pod, index_labels[i]);
		if (v)
			off += (size_t)snprintf(key + off, sizeof(key) - off, "%s/", v);
		if (off >= sizeof(key))
			break;
	}
	set_key(g, m, key[0] ? key : name);

	const char *rep = ex_annotation(pod, EXCHANGE_ANN_REPORT);
	read_report(m, rep, name, uid);
	if (!rep && ex_annotation_nul(pod, EXCHANGE_ANN_REPORT)) {
		char why[128];
		snprintf(why, sizeof(why), "its %s annotation has a NUL character", EXCHANGE_ANN_REPORT);
		gather_member_set_why(m, why);
	} else if (!rep) {
		gather_member_set_why(m, NULL); /* nothing there to refuse */
	}
	/* What this gatherer handed out and what came back; anything else
	 * (an earlier incarnation's, unreadable) does not count.  A text read
	 * before is not read again: the watch repeats it in every event. */
	const char *a = ex_annotation(pod, EXCHANGE_ANN_ASSIGN);
	uint64_t ah = gather_text_hash(a);
	if (ah != m->as_hash) {
		struct exchange_assignment *as = malloc(sizeof(*as));
		np_error e = { 0 };
		m->as_hash = ah;
		m->assigned_epoch = 0;
		if (a && as && exchange_assignment_parse(a, strlen(a), as, &e) == 0 &&
		    strcmp(as->leader, leader_uid) == 0)
			m->assigned_epoch = as->epoch;
		free(as);
	}
	const char *p = ex_annotation(pod, EXCHANGE_ANN_PROBE);
	uint64_t ph = gather_text_hash(p);
	if (!p && ex_annotation_nul(pod, EXCHANGE_ANN_PROBE)) {
		char why[128];
		snprintf(why, sizeof(why), "its %s annotation has a NUL character", EXCHANGE_ANN_PROBE);
		set_probe_why(m, why);
		m->pr_hash = gather_text_hash(NULL); /* a text after it is read again */
	} else if (!p) {
		m->pr_hash = ph;
		set_probe_why(m, NULL); /* nothing there to refuse */
	} else if (ph != m->pr_hash) {
		struct exchange_probe pr;
		np_error e = { 0 };
		m->pr_hash = ph;
		set_probe_why(m, NULL);
		if (p && exchange_probe_parse(p, strlen(p), &pr, &e) < 0) {
			char why[256];
			snprintf(why, sizeof(why), "%.250s", e.msg);
			set_probe_why(m, why);
		} else if (p && strcmp(pr.leader, leader_uid) == 0 &&
			   !(m->has_probe && pr.epoch < m->probe.epoch && m->probe.epoch <= g->epoch)) {
			/* Never an older round's over a newer one: the gatherer's
			 * own result of a round may reach its pod only with the
			 * next round's write, after it probed that one too.  A
			 * result of a round this gatherer has not reached (an
			 * earlier incarnation's, or anyone's write) is kept for
			 * gather_next_epoch, but never holds off the current
			 * round's. */
			probe_store(m, &pr);
		}
	}
	change_end(&c);
}

void gather_member_gone(struct gather *g, const char *name, const char *uid)
{
	struct member *m = name ? gather_member(g, name, false) : NULL;
	if (m && uid && m->uid && strcmp(m->uid, uid) == 0 && m->live)
		gather_member_set(g, m, false, NULL, NULL);
}

void gather_members_relist(struct gather *g)
{
	for (size_t i = 0; i < g->n; i++) {
		g->m[i].live = false;
		g->m[i].selected = false;
	}
	gather_recount(g);
}

/* A restarted gatherer finds its last round on its own pod, but the parts
 * of the next one go out before the round does (run_round in gather.c),
 * so they may be on the other pods, and probed, although its pod never got
 * the round: numbered again, a probe result of those parts, made with the
 * old token, would pass for one of the new round.  Each such restart puts
 * the pods one round ahead of the gatherer's pod; a pod's annotation much
 * further ahead is no part this gatherer handed out but a write of
 * someone else's (anyone who may patch pods), which must not push the
 * rounds past what the readers take (EPOCH_MAX in message.c). */
int gather_next_epoch(const struct gather *g)
{
	int e = g->epoch;
	for (size_t i = 0; i < g->n; i++) {
		const struct member *m = &g->m[i];
		int seen = m->assigned_epoch;
		if (m->has_probe && m->probe.epoch > seen)
			seen = m->probe.epoch;
		if (seen > e && seen <= g->epoch + GATHER_EPOCH_SLACK)
			e = seen;
	}
	return e + 1;
}

size_t gather_selected(struct gather *g)
{
	if (g->counted_epoch != g->epoch || g->counted_phase != g->phase)
		gather_recount(g);
	return g->n_selected;
}

void gather_free_members(struct gather *g)
{
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		report_clear(m);
		probe_store(m, NULL);
		free(m->why);
		free(m->probe_why);
		free(m->name);
		free(m->uid);
		free(m->key);
		free(m->parts);
		free(m->pin);
	}
	free(g->m);
	g->m = NULL;
	g->n = g->cap = 0;
	for (size_t i = 0; i < g->n_groups; i++)
		free(g->groups[i].key);
	free(g->groups);
	g->groups = NULL;
	g->n_groups = g->cap_groups = 0;
	index_free(&g->by_name);
	index_free(&g->by_key);
	g->n_selected = g->n_reported = g->n_probed = g->n_unassigned = 0;
}
