// SPDX-License-Identifier: MIT
/*
 * quota.c - block and inode usage per user, group and project, with soft and
 * hard limits and a grace period (docs/DESIGN.md, "Quotas").
 *
 * What counts: the blocks of an inode record (in->blocks: every copy of every
 * block) and the inode itself, charged to its uid, its gid and its project (0:
 * none, not counted). Every inode remembers what it is charged with as its
 * record holds it (in->charge, set by inode_decode()); ns_inode_put() and
 * ns_inode_purge() note the difference into the mutation's batch
 * (quota_note_inode), so every path that writes an inode record moves usage,
 * and none can forget. The usage records are written by the group commit
 * leader (group_commit.c), which applies the changes of the batches it writes
 * in queue order to the table in memory and puts the records they touched,
 * with their new values, into the same LevelDB write: the database's usage
 * is always the sum of the inode records it holds, a crash included. A write
 * that fails restores the table.
 *
 * Limits are checked against the table (usage + what batches not yet written
 * reserved): at inode creation and chown (all or nothing) and at allocation,
 * where the blocks are granted as far as they fit (quota_reserve). A
 * reservation lives in its batch until the leader applies the batch, or
 * until the batch is destroyed unwritten.
 *
 * Threads: any. Locks: ms->quotas.mu, a leaf, guards the table and the grace
 * periods; the leader holds it from quota_commit_begin() to
 * quota_commit_put(), and again in quota_commit_end() when it must roll
 * back. Entries are never freed while the metaserver runs (one per id ever
 * seen). A batch is its mutation's thread's alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "ms_int.h"

static const uint8_t key_quota_format[] = { MS_TAG_FORMAT, 'q', 'u', 'o', 't', 'a' };

static const char *type_name(uint32_t type)
{
	static const char *const names[MS_QUOTA_TYPES] = { "user", "group", "project" };

	return type < MS_QUOTA_TYPES ? names[type] : "?";
}

/* ---------------------------------------------------------------- the table */

void quotas_init(struct ms_quotas *qs)
{
	memset(qs, 0, sizeof(*qs));
	pthread_mutex_init(&qs->mu, NULL);
	for (int t = 0; t < MS_QUOTA_TYPES; t++)
		qs->grace_s[t] = MS_QUOTA_GRACE_DEFAULT_S;
}

static void quotas_clear(struct ms_quotas *qs)
{
	for (size_t i = 0; i < MS_QUOTA_BUCKETS; i++) {
		struct ms_qent *e = qs->bucket[i], *next;

		for (; e; e = next) {
			next = e->next;
			free(e);
		}
		qs->bucket[i] = NULL;
	}
}

void quotas_destroy(struct ms_quotas *qs)
{
	quotas_clear(qs);
	pthread_mutex_destroy(&qs->mu);
}

static size_t qhash(uint32_t type, uint32_t id)
{
	uint64_t h = ((uint64_t)type << 32 | id) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 54) & (MS_QUOTA_BUCKETS - 1);
}

/* The entry of @type/@id, NULL if there is none. Under qs->mu. */
static struct ms_qent *qent_find(struct ms_quotas *qs, uint32_t type, uint32_t id)
{
	struct ms_qent *e = qs->bucket[qhash(type, id)];

	while (e && (e->q.type != type || e->q.id != id))
		e = e->next;
	return e;
}

/* The entry of @type/@id, made empty if there is none; NULL without memory. Under qs->mu. */
static struct ms_qent *qent_get(struct ms_quotas *qs, uint32_t type, uint32_t id)
{
	struct ms_qent *e = qent_find(qs, type, id);
	size_t h;

	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->q.type = type;
	e->q.id = id;
	h = qhash(type, id);
	e->next = qs->bucket[h];
	qs->bucket[h] = e;
	return e;
}

static int quota_empty(const struct ms_quota *q)
{
	return !q->blocks && !q->inodes && !q->block_soft && !q->block_hard && !q->inode_soft &&
	       !q->inode_hard;
}

static uint64_t add_clamped(uint64_t v, int64_t d)
{
	if (d < 0 && (uint64_t)-d > v)
		return 0; /* only a corrupt record is below what leaves it: fsck says so */
	return v + (uint64_t)d;
}

/*
 * Start or end the grace periods of @q after a change: usage above a soft
 * limit refuses from @now + the grace on; at or below it, no grace runs.
 */
static void grace_update(struct ms_quota *q, int64_t now, uint64_t grace_s)
{
	int64_t end = now + (int64_t)(grace_s * 1000000000ull);

	if (q->block_soft && q->blocks > q->block_soft) {
		if (!q->block_grace_ns)
			q->block_grace_ns = end;
	} else {
		q->block_grace_ns = 0;
	}
	if (q->inode_soft && q->inodes > q->inode_soft) {
		if (!q->inode_grace_ns)
			q->inode_grace_ns = end;
	} else {
		q->inode_grace_ns = 0;
	}
}

/* ---------------------------------------------------------------- batches */

void ms_batch_init(struct ms_batch *mb)
{
	memset(mb, 0, sizeof(*mb));
	mb->b = leveldb_writebatch_create();
}

/* Give back what @mb reserved (under qs->mu). */
static void release_locked(struct ms_quotas *qs, struct ms_batch *mb)
{
	for (int t = 0; t < MS_QUOTA_TYPES; t++) {
		struct ms_qres *r = &mb->res[t];
		struct ms_qent *e;

		if (!r->on)
			continue;
		e = qent_find(qs, (uint32_t)t, r->id);
		if (e) {
			e->res_blocks -= r->blocks;
			e->res_inodes -= r->inodes;
		}
		r->on = 0;
	}
}

static int reserved(const struct ms_batch *mb)
{
	for (int t = 0; t < MS_QUOTA_TYPES; t++)
		if (mb->res[t].on)
			return 1;
	return 0;
}

/* The batch was not written: its inodes are charged with what the database holds. */
static void charges_undo(struct ms_batch *mb)
{
	while (mb->nundo) {
		struct ms_charge_undo *u = &mb->undo[--mb->nundo];

		u->in->charge = u->old;
	}
}

void quota_batch_written(struct ms_batch *mb, int ret)
{
	if (ret)
		charges_undo(mb);
	mb->nundo = 0;
	mb->nq = 0;
}

void ms_batch_destroy(struct ms *ms, struct ms_batch *mb)
{
	charges_undo(mb);
	if (reserved(mb)) {
		pthread_mutex_lock(&ms->quotas.mu);
		release_locked(&ms->quotas, mb);
		pthread_mutex_unlock(&ms->quotas.mu);
	}
	if (mb->b)
		leveldb_writebatch_destroy(mb->b);
	free(mb->q);
	free(mb->undo);
	memset(mb, 0, sizeof(*mb));
}

int quota_note_change(struct ms_batch *mb, const struct ms_qchange *c)
{
	/* deltas of one id add up: a rename or a chown notes a few of them */
	if (!c->set) {
		for (size_t i = 0; i < mb->nq; i++) {
			struct ms_qchange *p = &mb->q[i];

			if (!p->set && p->type == c->type && p->id == c->id) {
				p->blocks += c->blocks;
				p->inodes += c->inodes;
				return 0;
			}
		}
	}
	if (mb->nq == mb->capq) {
		size_t cap = mb->capq ? mb->capq * 2 : 8;
		struct ms_qchange *q = realloc(mb->q, cap * sizeof(*q));

		if (!q) {
			mb->err = -ENOMEM;
			return -ENOMEM;
		}
		mb->q = q;
		mb->capq = cap;
	}
	mb->q[mb->nq++] = *c;
	return 0;
}

static void note_ids(struct ms_batch *mb, const struct ms_charge *ch, int sign)
{
	uint32_t ids[MS_QUOTA_TYPES] = { ch->uid, ch->gid, ch->project };

	for (int t = 0; t < MS_QUOTA_TYPES; t++) {
		struct ms_qchange c = { .type = (uint8_t)t, .id = ids[t] };

		if (t == MS_QUOTA_PROJECT && ch->project == 0)
			continue;
		c.blocks = sign * (int64_t)ch->blocks;
		c.inodes = sign;
		quota_note_change(mb, &c);
	}
}

static int charge_equal(const struct ms_charge *a, const struct ms_charge *b)
{
	if (a->counted != b->counted)
		return 0;
	return !a->counted || (a->uid == b->uid && a->gid == b->gid && a->project == b->project &&
			       a->blocks == b->blocks);
}

void quota_note_inode(struct ms_batch *mb, struct ms_inode *in, int gone)
{
	struct ms_charge now = { 0 };

	if (!gone)
		now = (struct ms_charge){ .uid = in->uid,
					  .gid = in->gid,
					  .project = in->project,
					  .blocks = in->blocks,
					  .counted = 1 };
	/* most puts (times, modes, directories) move nothing */
	if (charge_equal(&now, &in->charge))
		return;
	if (mb->nundo == mb->capundo) {
		size_t cap = mb->capundo ? mb->capundo * 2 : 4;
		struct ms_charge_undo *u = realloc(mb->undo, cap * sizeof(*u));

		if (!u) {
			mb->err = -ENOMEM;
			return;
		}
		mb->undo = u;
		mb->capundo = cap;
	}
	mb->undo[mb->nundo++] = (struct ms_charge_undo){ .in = in, .old = in->charge };
	if (in->charge.counted)
		note_ids(mb, &in->charge, -1);
	if (now.counted)
		note_ids(mb, &now, 1);
	in->charge = now;
}

void quota_ids_of(const struct ms_inode *in, struct ms_qids *ids)
{
	ids->id[MS_QUOTA_USER] = in->uid;
	ids->id[MS_QUOTA_GROUP] = in->gid;
	ids->id[MS_QUOTA_PROJECT] = in->project;
	ids->mask = 1u << MS_QUOTA_USER | 1u << MS_QUOTA_GROUP |
		    (in->project ? 1u << MS_QUOTA_PROJECT : 0);
}

/* ---------------------------------------------------------------- limits */

/*
 * How much more @e may take of usage @used (+ @res reserved) under @soft and
 * @hard: up to the hard limit, and once the soft limit's grace is over, up to
 * the soft limit. UINT64_MAX: no limit.
 */
static uint64_t room(uint64_t used, uint64_t res, uint64_t soft, uint64_t hard, int64_t grace,
		     int64_t now)
{
	uint64_t cur = used + res, r = UINT64_MAX;

	if (hard)
		r = hard > cur ? hard - cur : 0;
	if (soft && grace && now >= grace) {
		uint64_t s = soft > cur ? soft - cur : 0;

		if (s < r)
			r = s;
	}
	return r;
}

int quota_reserve(struct ms *ms, struct ms_batch *mb, const struct ms_cred *cr,
		  const struct ms_qids *ids, uint64_t blocks, uint64_t inodes, int flags,
		  uint64_t *granted)
{
	struct ms_quotas *qs = &ms->quotas;
	struct ms_qent *e[MS_QUOTA_TYPES] = { NULL };
	int64_t now = ns_now();
	uint64_t give = blocks;
	int force = cr && cr->uid == 0, ret = 0;

	pthread_mutex_lock(&qs->mu);
	for (int t = 0; t < MS_QUOTA_TYPES && !ret; t++) {
		uint64_t r;

		if (!(ids->mask & 1u << t))
			continue;
		if (mb->res[t].on && mb->res[t].id != ids->id[t]) {
			ret = -EINVAL; /* a second id of a type in one batch: a bug */
			break;
		}
		e[t] = qent_get(qs, (uint32_t)t, ids->id[t]);
		if (!e[t]) {
			ret = -ENOMEM;
			break;
		}
		if (force)
			continue;
		r = room(e[t]->q.inodes, e[t]->res_inodes, e[t]->q.inode_soft, e[t]->q.inode_hard,
			 e[t]->q.inode_grace_ns, now);
		if (inodes > r) {
			log_debug(1100035, "quota: %s %u is at its inode limit",
				  type_name((uint32_t)t), ids->id[t]);
			ret = -EDQUOT;
			break;
		}
		r = room(e[t]->q.blocks, e[t]->res_blocks, e[t]->q.block_soft, e[t]->q.block_hard,
			 e[t]->q.block_grace_ns, now);
		if (r < give)
			give = r;
	}
	if (!ret && give < blocks && !(flags & MS_QRES_CLAMP))
		ret = -EDQUOT;
	if (!ret) {
		for (int t = 0; t < MS_QUOTA_TYPES; t++) {
			if (!e[t])
				continue;
			e[t]->res_blocks += give;
			e[t]->res_inodes += inodes;
			mb->res[t].on = 1;
			mb->res[t].id = ids->id[t];
			mb->res[t].blocks += give;
			mb->res[t].inodes += inodes;
		}
	}
	pthread_mutex_unlock(&qs->mu);
	if (granted)
		*granted = ret ? 0 : give;
	return ret;
}

/* ---------------------------------------------------------------- the leader */

void quota_commit_begin(struct ms *ms, struct quota_commit *qc)
{
	memset(qc, 0, sizeof(*qc));
	pthread_mutex_lock(&ms->quotas.mu);
	qc->stamp = ++ms->quotas.stamp;
}

/* Remember @e's state before the group, once. Under qs->mu. */
static int touch(struct quota_commit *qc, struct ms_qent *e)
{
	if (e->stamp == qc->stamp)
		return 0;
	if (qc->n == qc->cap) {
		size_t cap = qc->cap ? qc->cap * 2 : 16;
		struct ms_qent **t = realloc(qc->touched, cap * sizeof(*t));
		struct ms_quota *o;

		if (!t)
			return -ENOMEM;
		qc->touched = t;
		o = realloc(qc->old, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		qc->old = o;
		qc->cap = cap;
	}
	qc->touched[qc->n] = e;
	qc->old[qc->n] = e->q;
	qc->n++;
	e->stamp = qc->stamp;
	return 0;
}

int quota_commit_add(struct ms *ms, struct quota_commit *qc, struct ms_batch *mb)
{
	struct ms_quotas *qs = &ms->quotas;
	int64_t now;
	int ret = 0;

	if (reserved(mb)) {
		release_locked(qs, mb);
		qc->any = 1;
	}
	if (!mb->nq)
		return 0;
	now = ns_now();
	qc->any = 1;
	for (size_t i = 0; i < mb->nq && !ret; i++) {
		const struct ms_qchange *c = &mb->q[i];
		struct ms_qent *e;

		if (c->set & MS_QUOTA_SET_GRACE) {
			if (!(qc->grace_set & 1u << c->type))
				qc->grace_old[c->type] = qs->grace_s[c->type];
			qc->grace_set |= 1u << c->type;
			qs->grace_s[c->type] = c->grace_s;
		}
		if (!c->set && !c->blocks && !c->inodes)
			continue;
		if (c->set == MS_QUOTA_SET_GRACE)
			continue;
		e = qent_get(qs, c->type, c->id);
		ret = e ? touch(qc, e) : -ENOMEM;
		if (ret)
			break;
		if (c->set & MS_QUOTA_SET_REWRITE)
			e->rewrite = qc->stamp;
		e->q.blocks = add_clamped(e->q.blocks, c->blocks);
		e->q.inodes = add_clamped(e->q.inodes, c->inodes);
		if (c->set & MS_QUOTA_SET_BLOCK_SOFT)
			e->q.block_soft = c->block_soft;
		if (c->set & MS_QUOTA_SET_BLOCK_HARD)
			e->q.block_hard = c->block_hard;
		if (c->set & MS_QUOTA_SET_INODE_SOFT)
			e->q.inode_soft = c->inode_soft;
		if (c->set & MS_QUOTA_SET_INODE_HARD)
			e->q.inode_hard = c->inode_hard;
		grace_update(&e->q, now, qs->grace_s[c->type]);
	}
	return ret;
}

void quota_commit_put(struct ms *ms, struct quota_commit *qc, leveldb_writebatch_t *all)
{
	struct ms_quotas *qs = &ms->quotas;

	for (size_t i = 0; i < qc->n; i++) {
		const struct ms_quota *q = &qc->touched[i]->q;
		uint8_t k[MS_KEY_MAX], v[MS_QUOTA_REC];
		size_t kl = key_quota(k, q->type, q->id);

		if (!memcmp(q, &qc->old[i], sizeof(*q)) && qc->touched[i]->rewrite != qc->stamp)
			continue;
		if (quota_empty(q)) {
			leveldb_writebatch_delete(all, (char *)k, kl);
			continue;
		}
		quota_encode(q, v);
		leveldb_writebatch_put(all, (char *)k, kl, (char *)v, sizeof(v));
	}
	for (int t = 0; t < MS_QUOTA_TYPES; t++) {
		uint8_t k[MS_KEY_MAX], v[8];

		if (!(qc->grace_set & 1u << t))
			continue;
		put_le64(v, qs->grace_s[t]);
		leveldb_writebatch_put(all, (char *)k, key_grace(k, (uint32_t)t), (char *)v, 8);
	}
	pthread_mutex_unlock(&qs->mu);
}

void quota_commit_end(struct ms *ms, struct quota_commit *qc, int ret)
{
	struct ms_quotas *qs = &ms->quotas;

	if (ret && (qc->n || qc->grace_set)) {
		/* nothing of the group is in the database: neither is it in the table */
		pthread_mutex_lock(&qs->mu);
		for (size_t i = 0; i < qc->n; i++)
			qc->touched[i]->q = qc->old[i];
		for (int t = 0; t < MS_QUOTA_TYPES; t++)
			if (qc->grace_set & 1u << t)
				qs->grace_s[t] = qc->grace_old[t];
		pthread_mutex_unlock(&qs->mu);
	}
	free(qc->touched);
	free(qc->old);
	qc->touched = NULL;
	qc->old = NULL;
	qc->n = qc->cap = 0;
}

/* ---------------------------------------------------------------- startup */

void quota_put_format(leveldb_writebatch_t *b)
{
	uint8_t v[4];

	put_le32(v, MS_QUOTA_FORMAT);
	leveldb_writebatch_put(b, (const char *)key_quota_format, sizeof(key_quota_format),
			       (char *)v, 4);
}

/* Load every record with @tag into the table. Under nothing: startup. */
static int load_records(struct ms *ms)
{
	struct ms_quotas *qs = &ms->quotas;
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	uint8_t tag = MS_TAG_GRACE;
	int ret = 0;

	for (leveldb_iter_seek(it, (char *)&tag, 1); leveldb_iter_valid(it);
	     leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v = leveldb_iter_value(it, &vl);

		if (kl == 0 || k[0] != MS_TAG_GRACE)
			break;
		if (kl == 2 && k[1] < MS_QUOTA_TYPES && vl == 8)
			qs->grace_s[k[1]] = get_le64((const uint8_t *)v);
		else
			log_error(1100036, "quota: corrupt grace record");
	}
	tag = MS_TAG_QUOTA;
	for (leveldb_iter_seek(it, (char *)&tag, 1); leveldb_iter_valid(it) && !ret;
	     leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v = leveldb_iter_value(it, &vl);
		struct ms_qent *e;
		uint32_t id;

		if (kl == 0 || k[0] != MS_TAG_QUOTA)
			break;
		if (kl != MS_QUOTA_KEY || k[1] >= MS_QUOTA_TYPES) {
			log_error(1100037, "quota: corrupt usage record key");
			continue;
		}
		id = (uint32_t)k[2] << 24 | (uint32_t)k[3] << 16 | (uint32_t)k[4] << 8 | k[5];
		e = qent_get(qs, k[1], id);
		if (!e) {
			ret = -ENOMEM;
			break;
		}
		/* a corrupt one counts from zero; rdfs fsck --repair sets it right */
		if (quota_decode(v, vl, &e->q))
			log_error(1100038,
				  "quota: corrupt usage record of %s %u (rdfs fsck --repair)",
				  type_name(k[1]), id);
		e->q.type = k[1];
		e->q.id = id;
	}
	leveldb_iter_destroy(it);
	return ret;
}

/*
 * A database from before quotas: count every inode, then write the records
 * and the marker in one batch.
 */
static int compute_records(struct ms *ms)
{
	struct ms_quotas *qs = &ms->quotas;
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	leveldb_writebatch_t *b;
	struct ms_inode *in = malloc(sizeof(*in));
	uint8_t tag = MS_TAG_INODE;
	uint64_t n = 0, ids = 0;
	int ret = 0;

	if (!in) {
		leveldb_iter_destroy(it);
		return -ENOMEM;
	}
	for (leveldb_iter_seek(it, (char *)&tag, 1); leveldb_iter_valid(it) && !ret;
	     leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v = leveldb_iter_value(it, &vl);
		struct ms_qids q;

		if (kl == 0 || k[0] != MS_TAG_INODE)
			break;
		if (kl != 9 || inode_decode(get_be64(k + 1), v, vl, in))
			continue; /* fsck reports it */
		quota_ids_of(in, &q);
		for (int t = 0; t < MS_QUOTA_TYPES; t++) {
			struct ms_qent *e;

			if (!(q.mask & 1u << t))
				continue;
			e = qent_get(qs, (uint32_t)t, q.id[t]);
			if (!e) {
				ret = -ENOMEM;
				break;
			}
			e->q.blocks += in->blocks;
			e->q.inodes++;
		}
		n++;
	}
	leveldb_iter_destroy(it);
	free(in);
	if (ret)
		return ret;
	b = leveldb_writebatch_create();
	for (size_t i = 0; i < MS_QUOTA_BUCKETS; i++) {
		for (struct ms_qent *e = qs->bucket[i]; e; e = e->next) {
			uint8_t k[MS_KEY_MAX], v[MS_QUOTA_REC];

			quota_encode(&e->q, v);
			leveldb_writebatch_put(b, (char *)k, key_quota(k, e->q.type, e->q.id),
					       (char *)v, sizeof(v));
			ids++;
		}
	}
	quota_put_format(b);
	ret = ns_write_plain(ms, b);
	leveldb_writebatch_destroy(b);
	if (!ret)
		log_info(1100039,
			 "quota: usage of %llu ids computed from %llu inodes (first start with "
			 "quotas)",
			 (unsigned long long)ids, (unsigned long long)n);
	return ret;
}

int quota_load(struct ms *ms)
{
	char *v;
	size_t vl;
	int ret;

	/* the database is what counts: forget what the writes of opening applied */
	pthread_mutex_lock(&ms->quotas.mu);
	quotas_clear(&ms->quotas);
	pthread_mutex_unlock(&ms->quotas.mu);
	ret = ns_get(ms, key_quota_format, sizeof(key_quota_format), &v, &vl);
	if (ret == 0) {
		uint32_t ver = vl == 4 ? get_le32((uint8_t *)v) : 0;

		leveldb_free(v);
		if (ver != MS_QUOTA_FORMAT) {
			log_error(1100040,
				  "quota: usage records of format %u, this program reads %u", ver,
				  MS_QUOTA_FORMAT);
			return -EINVAL;
		}
		return load_records(ms);
	}
	if (ret != -ENOENT)
		return ret;
	ret = load_records(ms); /* the grace periods, should there be any */
	if (!ret) {
		pthread_mutex_lock(&ms->quotas.mu);
		quotas_clear(&ms->quotas);
		pthread_mutex_unlock(&ms->quotas.mu);
		ret = compute_records(ms);
	}
	return ret;
}

/* ---------------------------------------------------------------- requests */

static int may_administer(struct ms_session *s, const struct ms_cred *cr)
{
	return (s && ms_session_is_server(s)) || (cr && cr->uid == 0);
}

int ms_quota_get(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint32_t type,
		 uint32_t id, struct ms_quota *out)
{
	struct ms_qent *e;

	if (type >= MS_QUOTA_TYPES)
		return -EINVAL;
	/* as Linux's quotactl(Q_GETQUOTA): one's own uid and groups, else an administrator */
	if (!may_administer(s, cr) && !(type == MS_QUOTA_USER && cr && id == cr->uid) &&
	    !(type == MS_QUOTA_GROUP && cr && perm_in_group(cr, id)))
		return -EPERM;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&ms->quotas.mu);
	e = qent_find(&ms->quotas, type, id);
	if (e)
		*out = e->q;
	pthread_mutex_unlock(&ms->quotas.mu);
	out->type = type;
	out->id = id;
	return 0;
}

uint64_t ms_quota_grace(struct ms *ms, uint32_t type)
{
	uint64_t g;

	if (type >= MS_QUOTA_TYPES)
		return 0;
	pthread_mutex_lock(&ms->quotas.mu);
	g = ms->quotas.grace_s[type];
	pthread_mutex_unlock(&ms->quotas.mu);
	return g;
}

int ms_quota_set(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, struct ms_quota *q,
		 uint32_t valid, uint64_t grace_s)
{
	struct ms_qchange c = { 0 };
	struct ms_batch mb;
	int ret;

	if (q->type >= MS_QUOTA_TYPES ||
	    (valid & ~(MS_QUOTA_SET_BLOCK_SOFT | MS_QUOTA_SET_BLOCK_HARD | MS_QUOTA_SET_INODE_SOFT |
		       MS_QUOTA_SET_INODE_HARD | MS_QUOTA_SET_GRACE)))
		return -EINVAL;
	/* project 0 is no project: nothing counts there, so no limit could bind */
	if (q->type == MS_QUOTA_PROJECT && q->id == 0 && (valid & ~MS_QUOTA_SET_GRACE))
		return -EINVAL;
	/* ten years: a grace longer than that is a typo, and ns arithmetic stays far from overflow */
	if ((valid & MS_QUOTA_SET_GRACE) && grace_s > 10ull * 366 * 24 * 3600)
		return -EINVAL;
	if (!may_administer(s, cr))
		return -EPERM;
	c.type = (uint8_t)q->type;
	c.id = q->id;
	c.set = valid;
	c.block_soft = q->block_soft;
	c.block_hard = q->block_hard;
	c.inode_soft = q->inode_soft;
	c.inode_hard = q->inode_hard;
	c.grace_s = grace_s;
	ms_batch_init(&mb);
	ret = valid ? quota_note_change(&mb, &c) : 0;
	if (!ret && valid)
		ret = ns_write(ms, &mb);
	ms_batch_destroy(ms, &mb);
	if (ret)
		return ret;
	if (valid & ~MS_QUOTA_SET_GRACE)
		log_info(1100041, "quota: limits of %s %u set", type_name(q->type), q->id);
	return ms_quota_get(ms, s, cr, q->type, q->id, q);
}

static int quota_cmp(const void *a, const void *b)
{
	const struct ms_quota *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

int ms_quota_list(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint32_t type,
		  uint32_t start, uint32_t max, struct ms_quota **out, int *more)
{
	struct ms_quotas *qs = &ms->quotas;
	struct ms_quota *all = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;

	*out = NULL;
	*more = 0;
	if (type >= MS_QUOTA_TYPES)
		return -EINVAL;
	if (!may_administer(s, cr))
		return -EPERM;
	if (max == 0 || max > MS_QUOTA_LIST_MAX)
		max = MS_QUOTA_LIST_MAX;
	pthread_mutex_lock(&qs->mu);
	for (size_t i = 0; i < MS_QUOTA_BUCKETS && !ret; i++) {
		for (struct ms_qent *e = qs->bucket[i]; e; e = e->next) {
			if (e->q.type != type || e->q.id < start || quota_empty(&e->q))
				continue;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 64;
				struct ms_quota *na = realloc(all, nc * sizeof(*na));

				if (!na) {
					ret = -ENOMEM;
					break;
				}
				all = na;
				cap = nc;
			}
			all[n++] = e->q;
		}
	}
	pthread_mutex_unlock(&qs->mu);
	if (ret) {
		free(all);
		return ret;
	}
	if (n > 1)
		qsort(all, n, sizeof(*all), quota_cmp);
	if (n > max) {
		n = max;
		*more = 1;
	}
	*out = all;
	return (int)n;
}
