// SPDX-License-Identifier: MIT
/*
 * fsck.c - `rdfs fsck` inside the metaserver: every layout against the
 * allocation maps, the high-water marks, the orphans and the namespace,
 * while the metaserver serves.
 *
 * How it sees one consistent state without stopping anything: it takes
 * ms->blocks_rw exclusive just long enough to copy the maps, the servers'
 * held extents and the quarantine and to take a LevelDB snapshot. Every
 * operation that has blocks between a map and a durable layout holds that
 * lock shared (ms_int.h), so at that instant "in use in a map" equals "owned
 * by a layout in the snapshot, held, or quarantined", and anything else is a
 * real fault. Namespace checks need no lock: each batch is atomic, so the
 * snapshot is a state the database really had.
 *
 * Every inode-level finding is checked again on the live database under the
 * inode's lock before it is reported or repaired, so what changed since the
 * snapshot (a file removed, a last close that was under way) is not reported.
 * Map-level findings need no second look: a block in a map that no layout
 * owns stays so (only a layout's release frees a block, only a free makes it
 * allocatable), and an owned block the map lost is re-marked under the
 * exclusive lock.
 *
 * Quota usage needs no second look either: the usage records change in the
 * batches of the inode records they count, so in the snapshot each must be
 * the sum of its inodes. A repair adds the difference through a batch of its
 * own, so changes since the snapshot stay counted.
 *
 * Repairs go through the paths the operations use: a freed layout is fenced
 * before its blocks are reused (fence.c). Blocks only a map held are not
 * freed at once: the file they belonged to is unknown, so no fence can be
 * sent; they wait in a quarantine until every capability granted before the
 * repair has expired.
 *
 * Threads: one fsck at a time (ms->fsck_mu), on a worker thread; memory is
 * about 48 bytes per inode and two bits per volume block.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "ms_int.h"

#define FSCK_MAX_VOLS	4096

struct fsck_ino {
	uint64_t ino;
	uint32_t mode, nlink;
	uint64_t blocks;		/* the record's count */
	uint64_t ext_blocks;		/* what its extents add up to */
	uint32_t refs;			/* entries naming it */
	uint8_t orphan;
};

/* What the snapshot's inodes charge one user, group or project with. */
struct fsck_usage {
	uint32_t type, id;
	uint64_t blocks, inodes;
	uint8_t used;			/* the slot holds an id */
	uint8_t recorded;		/* a usage record names it */
};

struct fsck_vol {
	uint32_t id;
	uint64_t capacity;
	uint64_t high;			/* the persisted mark in the snapshot */
	uint64_t need_high;		/* repair: raise it to this */
	uint64_t *mapped;		/* the map, copied under blocks_rw */
	uint64_t *owned;		/* built from the snapshot's layouts */
};

struct fsck {
	struct ms *ms;
	struct ms_fsck_report *r;
	size_t max;
	int repair;
	int64_t quarantine_ns;
	const leveldb_snapshot_t *snap;
	leveldb_readoptions_t *ro;

	struct fsck_vol *vols;
	int nvols;
	struct ms_ext *held;		/* held and quarantined extents */
	size_t nheld;
	size_t nheld_only;		/* the first nheld_only are held, the rest quarantined */

	struct fsck_ino *inos;		/* sorted by ino (the key order) */
	size_t nino, cap_ino;
	uint64_t *refs;			/* targets of every entry */
	size_t nref, cap_ref;
	uint64_t last_missing;		/* missing_inode_layout(): reported already */

	struct fsck_usage *usage;	/* open addressing, a power of two */
	size_t nusage, cap_usage;
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ---------------------------------------------------------------- quarantine */

void quarantine_init(struct ms_quarantine *q)
{
	pthread_mutex_init(&q->mu, NULL);
	atomic_init(&q->n, 0);
	q->cap = 0;
	q->e = NULL;
	q->due_ns = NULL;
}

void quarantine_destroy(struct ms_quarantine *q)
{
	free(q->e);
	free(q->due_ns);
	pthread_mutex_destroy(&q->mu);
}

/* Caller holds blocks_rw shared. */
static int quarantine_add(struct ms *ms, const struct ms_ext *e, int64_t due)
{
	struct ms_quarantine *q = &ms->quarantine;
	size_t n;
	int ret = 0;

	pthread_mutex_lock(&q->mu);
	n = atomic_load(&q->n);
	if (n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 16;
		struct ms_ext *ne = realloc(q->e, cap * sizeof(*ne));
		int64_t *nd;

		if (ne)
			q->e = ne;
		nd = ne ? realloc(q->due_ns, cap * sizeof(*nd)) : NULL;
		if (!nd) {
			ret = -ENOMEM;
			goto out;
		}
		q->due_ns = nd;
		q->cap = cap;
	}
	q->e[n] = *e;
	q->due_ns[n] = due;
	atomic_store(&q->n, n + 1);
out:
	pthread_mutex_unlock(&q->mu);
	return ret;
}

void quarantine_release_due(struct ms *ms)
{
	struct ms_quarantine *q = &ms->quarantine;
	int64_t now;
	size_t n, k = 0;

	if (atomic_load(&q->n) == 0)
		return;
	now = mono_ns();
	pthread_mutex_lock(&q->mu);
	n = atomic_load(&q->n);
	for (size_t i = 0; i < n; i++) {
		if (q->due_ns[i] <= now) {
			alloc_free(&ms->alloc, q->e[i].server_id, q->e[i].block, q->e[i].count);
			log_info(1100004,
				 "fsck: freed %u quarantined blocks at %llu on I/O server %u",
				 q->e[i].count, (unsigned long long)q->e[i].block, q->e[i].server_id);
			continue;
		}
		q->e[k] = q->e[i];
		q->due_ns[k++] = q->due_ns[i];
	}
	atomic_store(&q->n, k);
	pthread_mutex_unlock(&q->mu);
}

/* Append the quarantine's extents to @out (fsck, under blocks_rw exclusive). */
static int quarantine_copy(struct ms_quarantine *q, struct ms_ext **out, size_t *n)
{
	size_t qn;
	struct ms_ext *e;
	int ret = 0;

	pthread_mutex_lock(&q->mu);
	qn = atomic_load(&q->n);
	if (qn) {
		e = realloc(*out, (*n + qn) * sizeof(*e));
		if (!e) {
			ret = -ENOMEM;
		} else {
			memcpy(e + *n, q->e, qn * sizeof(*e));
			*out = e;
			*n += qn;
		}
	}
	pthread_mutex_unlock(&q->mu);
	return ret;
}

/* ---------------------------------------------------------------- findings */

static void note(struct fsck *f, uint32_t kind, uint64_t ino, uint64_t other, uint32_t server,
		 uint64_t block, uint64_t count, int repaired)
{
	struct ms_fsck_report *r = f->r;

	r->counts[kind]++;
	r->problems++;
	if (repaired)
		r->repaired++;
	if (r->n < f->max) {
		r->p[r->n++] = (struct ms_fsck_problem){ .kind = kind, .ino = ino,
							 .other_ino = other, .server_id = server,
							 .block = block, .count = count,
							 .repaired = repaired };
	}
	log_warn(1100005, "fsck: problem %u: ino=%llu (%llu), server %u, %llu+%llu%s", kind,
		 (unsigned long long)ino, (unsigned long long)other, server,
		 (unsigned long long)block, (unsigned long long)count,
		 repaired ? ": repaired" : "");
}

static struct fsck_vol *vol_of(struct fsck *f, uint32_t id)
{
	for (int i = 0; i < f->nvols; i++)
		if (f->vols[i].id == id)
			return &f->vols[i];
	return NULL;
}

static struct fsck_ino *ino_find(struct fsck *f, uint64_t ino)
{
	size_t lo = 0, hi = f->nino;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->inos[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->nino && f->inos[lo].ino == ino ? &f->inos[lo] : NULL;
}

static int bit(const uint64_t *w, uint64_t b)
{
	return (w[b >> 6] >> (b & 63)) & 1;
}

/*
 * Mark [block, block + count) owned on @v; report the runs already owned as
 * doubly owned by @ino.
 */
static void own(struct fsck *f, struct fsck_vol *v, uint64_t ino, uint64_t block, uint64_t count)
{
	uint64_t run = 0, end = block + count;

	if (end > v->capacity)
		end = v->capacity;
	for (uint64_t b = block; b < end; b++) {
		if (bit(v->owned, b)) {
			run++;
			continue;
		}
		if (run)
			note(f, MS_FSCK_DOUBLE, ino, 0, v->id, b - run, run, 0);
		run = 0;
		v->owned[b >> 6] |= 1ull << (b & 63);
	}
	if (run)
		note(f, MS_FSCK_DOUBLE, ino, 0, v->id, end - run, run, 0);
}

/* ---------------------------------------------------------------- the moment */

/*
 * Take blocks_rw exclusive without stalling the block path for long: a holder
 * may be waiting on an I/O server (a fence, a ZERO), and while a writer waits
 * the lock lets no new reader in. So wait in short turns and step back between
 * them; only a server that is never quiet for 100 ms makes the last try block.
 */
static void blocks_exclusive(struct ms *ms)
{
	for (int i = 0; i < 50; i++) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_rwlock_timedwrlock(&ms->blocks_rw, &ts) == 0)
			return;
		/* let the readers that queued behind us through */
		sched_yield();
		nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000000 }, NULL);
	}
	pthread_rwlock_wrlock(&ms->blocks_rw);
}

/* Copy the maps, held extents and quarantine and take the snapshot, all at once. */
static int take_moment(struct fsck *f)
{
	struct ms *ms = f->ms;
	uint32_t ids[FSCK_MAX_VOLS];
	int n, ret = 0;

	blocks_exclusive(ms);
	f->snap = leveldb_create_snapshot(ms->db);
	n = alloc_ids(&ms->alloc, ids, FSCK_MAX_VOLS);
	if (n > FSCK_MAX_VOLS)
		n = FSCK_MAX_VOLS;
	f->vols = calloc(n ? (size_t)n : 1, sizeof(*f->vols));
	if (!f->vols) {
		ret = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < n && !ret; i++) {
		struct fsck_vol *v = &f->vols[f->nvols];

		v->id = ids[i];
		ret = alloc_copy_bitmap(&ms->alloc, ids[i], &v->mapped, &v->capacity);
		if (ret == 0) {
			v->owned = calloc(v->capacity / 64 + 2, sizeof(uint64_t));
			ret = v->owned ? 0 : -ENOMEM;
			f->nvols++;
		}
	}
	if (!ret)
		ret = registry_copy_held(&ms->reg, &f->held, &f->nheld);
	/* out of their files' layouts, waiting for the fence (freeing.c): held too */
	if (!ret)
		ret = freeing_copy(ms, &f->held, &f->nheld);
	f->nheld_only = f->nheld;
	if (!ret)
		ret = quarantine_copy(&ms->quarantine, &f->held, &f->nheld);
out:
	pthread_rwlock_unlock(&ms->blocks_rw);
	f->ro = leveldb_readoptions_create();
	leveldb_readoptions_set_fill_cache(f->ro, 0);
	leveldb_readoptions_set_snapshot(f->ro, f->snap);
	return ret;
}

/* ---------------------------------------------------------------- the scans */

typedef int (*scan_fn)(struct fsck *f, const uint8_t *key, size_t kl, const char *val,
		       size_t vl);

/* Call @fn for every snapshot record with tag @tag. */
static int scan(struct fsck *f, char tag, scan_fn fn)
{
	leveldb_iterator_t *it = leveldb_create_iterator(f->ms->db, f->ro);
	int ret = 0;

	for (leveldb_iter_seek(it, &tag, 1); leveldb_iter_valid(it) && !ret;
	     leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v;

		if (kl == 0 || k[0] != (uint8_t)tag)
			break;
		v = leveldb_iter_value(it, &vl);
		ret = fn(f, k, kl, v, vl);
	}
	leveldb_iter_destroy(it);
	return ret;
}

static int scan_high(struct fsck *f, const uint8_t *k, size_t kl, const char *v, size_t vl)
{
	struct fsck_vol *vol;
	uint32_t id;

	if (kl != 5 || vl != 8) {
		note(f, MS_FSCK_CORRUPT, 0, 0, 0, 0, 0, 0);
		return 0;
	}
	id = (uint32_t)k[1] << 24 | (uint32_t)k[2] << 16 | (uint32_t)k[3] << 8 | k[4];
	vol = vol_of(f, id);
	if (vol)
		vol->high = get_le64((const uint8_t *)v);
	return 0;
}

static int scan_dirent(struct fsck *f, const uint8_t *k, size_t kl, const char *v, size_t vl)
{
	uint64_t ino;
	uint32_t type;

	if (kl < 10 || dirent_decode(v, vl, &ino, &type)) {
		note(f, MS_FSCK_CORRUPT, kl >= 9 ? get_be64(k + 1) : 0, 0, 0, 0, 0, 0);
		return 0;
	}
	if (f->nref == f->cap_ref) {
		size_t cap = f->cap_ref ? f->cap_ref * 2 : 1024;
		uint64_t *n = realloc(f->refs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		f->refs = n;
		f->cap_ref = cap;
	}
	f->refs[f->nref++] = ino;
	return 0;
}

/* The usage slot of @type/@id, added when missing; NULL without memory. */
static struct fsck_usage *usage_get(struct fsck *f, uint32_t type, uint32_t id)
{
	size_t mask, i;

	if (2 * (f->nusage + 1) > f->cap_usage) {
		size_t cap = f->cap_usage ? f->cap_usage * 2 : 256;
		struct fsck_usage *n = calloc(cap, sizeof(*n));

		if (!n)
			return NULL;
		for (size_t j = 0; j < f->cap_usage; j++) {
			if (!f->usage[j].used)
				continue;
			i = ((uint64_t)f->usage[j].type << 32 | f->usage[j].id) *
			    0x9e3779b97f4a7c15ull >> 20;
			while (n[i & (cap - 1)].used)
				i++;
			n[i & (cap - 1)] = f->usage[j];
		}
		free(f->usage);
		f->usage = n;
		f->cap_usage = cap;
	}
	mask = f->cap_usage - 1;
	for (i = ((uint64_t)type << 32 | id) * 0x9e3779b97f4a7c15ull >> 20;; i++) {
		struct fsck_usage *u = &f->usage[i & mask];

		if (!u->used) {
			*u = (struct fsck_usage){ .type = type, .id = id, .used = 1 };
			f->nusage++;
			return u;
		}
		if (u->type == type && u->id == id)
			return u;
	}
}

static int usage_charge(struct fsck *f, const struct ms_inode *in)
{
	struct ms_qids ids;

	quota_ids_of(in, &ids);
	for (uint32_t t = 0; t < MS_QUOTA_TYPES; t++) {
		struct fsck_usage *u;

		if (!(ids.mask & 1u << t))
			continue;
		u = usage_get(f, t, ids.id[t]);
		if (!u)
			return -ENOMEM;
		u->blocks += in->blocks;
		u->inodes++;
	}
	return 0;
}

static int scan_inode(struct fsck *f, const uint8_t *k, size_t kl, const char *v, size_t vl)
{
	struct ms_inode *in;
	uint64_t ino;

	if (kl != 9) {
		note(f, MS_FSCK_CORRUPT, 0, 0, 0, 0, 0, 0);
		return 0;
	}
	ino = get_be64(k + 1);
	in = malloc(sizeof(*in));
	if (!in)
		return -ENOMEM;
	if (inode_decode(ino, v, vl, in)) {
		note(f, MS_FSCK_CORRUPT, ino, 0, 0, 0, 0, 0);
		free(in);
		return 0;
	}
	if (f->nino == f->cap_ino) {
		size_t cap = f->cap_ino ? f->cap_ino * 2 : 1024;
		struct fsck_ino *n = realloc(f->inos, cap * sizeof(*n));

		if (!n) {
			free(in);
			return -ENOMEM;
		}
		f->inos = n;
		f->cap_ino = cap;
	}
	f->inos[f->nino++] = (struct fsck_ino){ .ino = ino, .mode = in->mode,
						.nlink = in->nlink, .blocks = in->blocks };
	/* what the usage records must add up to: the records' counts, as the batches keep them */
	if (usage_charge(f, in)) {
		free(in);
		return -ENOMEM;
	}
	f->r->inodes++;
	if (S_ISDIR(in->mode))
		f->r->dirs++;
	else if (S_ISREG(in->mode))
		f->r->files++;
	free(in);
	return 0;
}

static int scan_layout(struct fsck *f, const uint8_t *k, size_t kl, const char *v, size_t vl)
{
	size_t n = vl / MS_EXTENT_REC;
	struct ms_ext *e;
	struct fsck_ino *fi;
	uint64_t ino;
	int got;

	if (kl != 17) {
		note(f, MS_FSCK_CORRUPT, 0, 0, 0, 0, 0, 0);
		return 0;
	}
	ino = get_be64(k + 1);
	e = malloc((n ? n : 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	got = chunk_decode(v, vl, e, (int)n);
	if (got < 0) {
		note(f, MS_FSCK_CORRUPT, ino, 0, 0, get_be64(k + 9), 0, 0);
		free(e);
		return 0;
	}
	fi = ino_find(f, ino);
	for (int i = 0; i < got; i++) {
		struct fsck_vol *vol = vol_of(f, e[i].server_id);

		f->r->extents++;
		f->r->blocks_owned += e[i].count;
		if (fi)
			fi->ext_blocks += e[i].count;
		if (!vol || e[i].block + e[i].count > vol->capacity ||
		    e[i].block + e[i].count < e[i].block) {
			note(f, MS_FSCK_OUT_OF_RANGE, ino, 0, e[i].server_id, e[i].block,
			     e[i].count, 0);
			if (!vol || e[i].block >= vol->capacity)
				continue;
		}
		if (e[i].block + e[i].count > vol->high) {
			/* the repair raises the mark once per volume, after the scans */
			if (e[i].block + e[i].count > vol->need_high)
				vol->need_high = e[i].block + e[i].count;
			note(f, MS_FSCK_ABOVE_HIGH_WATER, ino, 0, e[i].server_id, e[i].block,
			     e[i].count, f->repair);
		}
		own(f, vol, ino, e[i].block, e[i].count);
	}
	free(e);
	return 0;
}

static int scan_orphan(struct fsck *f, const uint8_t *k, size_t kl, const char *v, size_t vl)
{
	struct fsck_ino *fi;

	(void)v;
	(void)vl;
	if (kl != 9) {
		note(f, MS_FSCK_CORRUPT, 0, 0, 0, 0, 0, 0);
		return 0;
	}
	fi = ino_find(f, get_be64(k + 1));
	if (fi)
		fi->orphan = 1;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------- live checks and repairs */

/* Sum the blocks of @ino's layout records in the live database. */
static int live_ext_blocks(struct ms *ms, uint64_t ino, uint64_t *sum, int *any)
{
	uint8_t k[MS_KEY_MAX];
	size_t klen = key_prefix(k, MS_TAG_LAYOUT, ino);
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	struct ms_ext *e = NULL;
	int ret = 0;

	*sum = 0;
	*any = 0;
	for (leveldb_iter_seek(it, (char *)k, klen); leveldb_iter_valid(it) && !ret;
	     leveldb_iter_next(it)) {
		size_t l, vl;
		const char *key = leveldb_iter_key(it, &l);
		const char *v;
		int n;

		if (l < klen || memcmp(key, k, klen))
			break;
		v = leveldb_iter_value(it, &vl);
		free(e);
		e = malloc((vl / MS_EXTENT_REC + 1) * sizeof(*e));
		if (!e) {
			ret = -ENOMEM;
			break;
		}
		n = chunk_decode(v, vl, e, (int)(vl / MS_EXTENT_REC));
		if (n < 0) {
			ret = n;
			break;
		}
		*any = 1;
		for (int i = 0; i < n; i++)
			*sum += e[i].count;
	}
	free(e);
	leveldb_iter_destroy(it);
	return ret;
}

static int live_has(struct ms *ms, const uint8_t *k, size_t kl)
{
	char *v;
	size_t vl;
	int ret = ns_get(ms, k, kl, &v, &vl);

	if (ret == 0)
		leveldb_free(v);
	return ret == 0 ? 1 : ret == -ENOENT ? 0 : ret;
}

/*
 * Check @kind of @ino again under its lock, on the live database, and with
 * f->repair fix it. Returns 1 if the problem is real (*@fixed: repaired),
 * 0 if it went away, or -errno.
 */
static int inode_recheck(struct fsck *f, uint32_t kind, uint64_t ino, uint64_t *a, uint64_t *b,
			 int *fixed)
{
	struct ms *ms = f->ms;
	struct ms_lockset ls;
	struct ms_inode *in = malloc(sizeof(*in));
	struct ms_freelist fl = { 0 };
	struct ms_batch mb;
	uint8_t k[MS_KEY_MAX];
	int ret, real = 0, has_inode, orphan, any;
	uint64_t sum;

	*fixed = 0;
	if (!in)
		return -ENOMEM;
	ms_batch_init(&mb);
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (ret && ret != -ENOENT)
		goto out;
	has_inode = ret == 0;
	orphan = live_has(ms, k, key_orphan(k, ino));
	ret = orphan < 0 ? orphan : live_ext_blocks(ms, ino, &sum, &any);
	if (ret)
		goto out;
	switch (kind) {
	case MS_FSCK_LAYOUT_NO_INODE:
		real = !has_inode && any;
		*a = sum;
		break;
	case MS_FSCK_ORPHAN_LEAKED:
		real = has_inode && in->nlink == 0 && orphan &&
		       opentab_count(&ms->opentab, ino) == 0;
		break;
	case MS_FSCK_UNLINKED_NO_ORPHAN:
		real = has_inode && in->nlink == 0 && !orphan &&
		       opentab_count(&ms->opentab, ino) == 0;
		break;
	case MS_FSCK_STALE_ORPHAN:
		real = orphan && (!has_inode || in->nlink > 0);
		break;
	case MS_FSCK_BLOCK_COUNT:
		real = has_inode && in->blocks != sum;
		*a = has_inode ? in->blocks : 0;
		*b = sum;
		break;
	default:
		break;
	}
	if (!real || !f->repair)
		goto out;

	switch (kind) {
	case MS_FSCK_LAYOUT_NO_INODE:
		/* no record: every prefix is searched; nothing counts as a file */
		ret = ns_inode_purge(ms, &mb, ino, NULL, orphan ? NS_PURGE_ORPHAN : 0, &fl);
		fl.inodes = 0;
		break;
	case MS_FSCK_ORPHAN_LEAKED:
	case MS_FSCK_UNLINKED_NO_ORPHAN:
		/* its block count may be wrong too: every layout record is searched */
		ret = ns_inode_purge(ms, &mb, ino, in,
				     NS_PURGE_SCAN | (orphan ? NS_PURGE_ORPHAN : 0), &fl);
		break;
	case MS_FSCK_STALE_ORPHAN:
		leveldb_writebatch_delete(mb.b, (char *)k, key_orphan(k, ino));
		break;
	case MS_FSCK_BLOCK_COUNT:
		/* the owner's usage moves with the count, as with any put */
		in->blocks = sum;
		ns_inode_put(&mb, in);
		break;
	default:
		break;
	}
	if (!ret)
		ret = ns_write_freeing(ms, &mb, &fl);
	if (!ret)
		*fixed = 1;
	/* fenced before the blocks are free again, like any freed blocks */
	freelist_release(ms, &fl, ret == 0);
out:
	ms_batch_destroy(ms, &mb);
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret ? ret : real;
}

static int report_inode(struct fsck *f, uint32_t kind, uint64_t ino, uint64_t a, uint64_t b)
{
	int fixed, ret = inode_recheck(f, kind, ino, &a, &b, &fixed);

	if (ret < 0)
		return ret;
	if (ret)
		note(f, kind, ino, 0, 0, a, b, fixed);
	return 0;
}

/* Persist @v's high-water mark at least at @mark. */
static int raise_high_water(struct fsck *f, struct fsck_vol *v, uint64_t mark)
{
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	uint64_t high, durable;
	int ret;

	pthread_mutex_lock(&f->ms->high_mu);
	/* an allocation since the snapshot may have raised it further: never lower it */
	if (alloc_high_water(&f->ms->alloc, v->id, &high, &durable) == 0 && durable > mark)
		mark = durable;
	high_water_put(b, v->id, mark);
	ret = ns_write_plain(f->ms, b);
	if (!ret)
		alloc_high_water_durable(&f->ms->alloc, v->id, mark);
	pthread_mutex_unlock(&f->ms->high_mu);
	leveldb_writebatch_destroy(b);
	if (!ret)
		v->high = mark;
	return ret;
}

/* ---------------------------------------------------------------- the passes */

static int check_namespace(struct fsck *f)
{
	int ret = 0;

	if (f->nref)
		qsort(f->refs, f->nref, sizeof(*f->refs), cmp_u64);
	/* refs per inode: both sorted, one merge */
	for (size_t i = 0, j = 0; i < f->nino; i++) {
		while (j < f->nref && f->refs[j] < f->inos[i].ino)
			j++;
		while (j < f->nref && f->refs[j] == f->inos[i].ino) {
			f->inos[i].refs++;
			j++;
		}
	}
	for (size_t i = 0; i < f->nino && !ret; i++) {
		struct fsck_ino *fi = &f->inos[i];

		if (fi->nlink == 0 && fi->orphan) {
			if (opentab_count(&f->ms->opentab, fi->ino) > 0)
				f->r->orphans_open++;
			else
				ret = report_inode(f, MS_FSCK_ORPHAN_LEAKED, fi->ino, 0, 0);
		} else if (fi->nlink == 0) {
			ret = report_inode(f, MS_FSCK_UNLINKED_NO_ORPHAN, fi->ino, 0, 0);
		} else if (!S_ISDIR(fi->mode) && fi->ino != MS_ROOT_INO && fi->nlink != fi->refs) {
			note(f, MS_FSCK_LINK_COUNT, fi->ino, 0, 0, fi->nlink, fi->refs, 0);
		}
		if (!ret && fi->blocks != fi->ext_blocks)
			ret = report_inode(f, MS_FSCK_BLOCK_COUNT, fi->ino, fi->blocks,
					   fi->ext_blocks);
	}
	return ret;
}

static int dangling_entry(struct fsck *f, const uint8_t *k, size_t kl, const char *v, size_t vl)
{
	uint64_t ino;
	uint32_t type;

	if (kl >= 10 && dirent_decode(v, vl, &ino, &type) == 0 && !ino_find(f, ino))
		note(f, MS_FSCK_DANGLING_ENTRY, get_be64(k + 1), ino, 0, 0, 0, 0);
	return 0;
}

/* Layout and orphan records of inodes the snapshot has no record of. */
static int missing_inode_layout(struct fsck *f, const uint8_t *k, size_t kl, const char *v,
				size_t vl)
{
	uint64_t ino;

	(void)v;
	(void)vl;
	if (kl != 17)
		return 0;
	ino = get_be64(k + 1);
	if (ino == f->last_missing || ino_find(f, ino))
		return 0;
	f->last_missing = ino;
	return report_inode(f, MS_FSCK_LAYOUT_NO_INODE, ino, 0, 0);
}

static int missing_inode_orphan(struct fsck *f, const uint8_t *k, size_t kl, const char *v,
				size_t vl)
{
	struct fsck_ino *fi;

	(void)v;
	(void)vl;
	if (kl != 9)
		return 0;
	fi = ino_find(f, get_be64(k + 1));
	if (!fi || fi->nlink > 0)
		return report_inode(f, MS_FSCK_STALE_ORPHAN, get_be64(k + 1), 0, 0);
	return 0;
}

/*
 * Usage record of @u says @blocks and @inodes (a corrupt one: 0, as the
 * metaserver loaded it): report what differs from the inodes, and with repair
 * add the difference (and with @rewrite write the record even if none).
 * Returns 1 if it repaired, 0 if not, or -ENOMEM.
 */
static int usage_check(struct fsck *f, const struct fsck_usage *u, uint64_t blocks,
		       uint64_t inodes, int rewrite)
{
	struct ms_qchange c = { .type = (uint8_t)u->type, .id = u->id };
	struct ms_batch mb;
	int fixed = 0, ret = 0;

	if (blocks == u->blocks && inodes == u->inodes && !rewrite)
		return 0;
	if (f->repair) {
		c.blocks = (int64_t)(u->blocks - blocks);
		c.inodes = (int64_t)(u->inodes - inodes);
		c.set = rewrite ? MS_QUOTA_SET_REWRITE : 0;
		ms_batch_init(&mb);
		ret = quota_note_change(&mb, &c);
		if (!ret)
			ret = ns_write(f->ms, &mb);
		ms_batch_destroy(f->ms, &mb);
		fixed = ret == 0;
	}
	if (blocks != u->blocks)
		note(f, MS_FSCK_QUOTA_BLOCKS, u->id, 0, u->type, blocks, u->blocks, fixed);
	if (inodes != u->inodes)
		note(f, MS_FSCK_QUOTA_INODES, u->id, 0, u->type, inodes, u->inodes, fixed);
	return ret == -ENOMEM ? ret : fixed;
}

static int scan_quota(struct fsck *f, const uint8_t *k, size_t kl, const char *v, size_t vl)
{
	struct ms_quota q = { 0 };
	struct fsck_usage *u;
	uint32_t id;
	int corrupt, ret;

	if (kl != MS_QUOTA_KEY || k[1] >= MS_QUOTA_TYPES) {
		int fixed = 0;

		/* no id to count it for: only a repair's delete helps */
		if (f->repair) {
			leveldb_writebatch_t *b = leveldb_writebatch_create();

			leveldb_writebatch_delete(b, (const char *)k, kl);
			fixed = ns_write_plain(f->ms, b) == 0;
			leveldb_writebatch_destroy(b);
		}
		note(f, MS_FSCK_QUOTA_CORRUPT, 0, 0, 0, 0, 0, fixed);
		return 0;
	}
	id = (uint32_t)k[2] << 24 | (uint32_t)k[3] << 16 | (uint32_t)k[4] << 8 | k[5];
	/* a corrupt one was loaded as zero usage and no limits: so it is compared */
	corrupt = quota_decode(v, vl, &q) != 0;
	if (corrupt)
		memset(&q, 0, sizeof(q));
	u = usage_get(f, k[1], id);
	if (!u)
		return -ENOMEM;
	u->recorded = 1;
	ret = usage_check(f, u, q.blocks, q.inodes, corrupt);
	if (ret < 0)
		return ret;
	if (corrupt)
		note(f, MS_FSCK_QUOTA_CORRUPT, id, 0, k[1], 0, 0, ret);
	return 0;
}

/* Ids the inodes charge that no usage record names. */
static int check_quota(struct fsck *f)
{
	int ret = 0;

	for (size_t i = 0; i < f->cap_usage && !ret; i++) {
		const struct fsck_usage *u = &f->usage[i];

		if (u->used && !u->recorded)
			ret = usage_check(f, u, 0, 0, 0);
	}
	return ret < 0 ? ret : 0;
}

/* One run of leaked or unmapped blocks: report it, and with repair fix it. */
static void map_run(struct fsck *f, struct fsck_vol *v, int kind, uint64_t block, uint64_t count,
		    int64_t due)
{
	struct ms *ms = f->ms;
	struct ms_ext e = { .server_id = v->id, .block = block, .count = (uint32_t)count };
	int fixed = 0;

	if (f->repair && kind == MS_FSCK_LEAKED) {
		pthread_rwlock_rdlock(&ms->blocks_rw);
		fixed = quarantine_add(ms, &e, due) == 0;
		pthread_rwlock_unlock(&ms->blocks_rw);
	} else if (f->repair) {
		/* freed from its layout since the snapshot? then the mark only leaks it */
		pthread_rwlock_wrlock(&ms->blocks_rw);
		alloc_mark(&ms->alloc, v->id, block, count);
		pthread_rwlock_unlock(&ms->blocks_rw);
		fixed = 1;
	}
	note(f, (uint32_t)kind, 0, 0, v->id, block, count, fixed);
}

static int check_maps(struct fsck *f)
{
	int64_t due = mono_ns() + f->quarantine_ns;

	/* held and quarantined blocks are accounted for, not leaked */
	for (size_t i = 0; i < f->nheld; i++) {
		struct fsck_vol *v = vol_of(f, f->held[i].server_id);

		if (i < f->nheld_only)
			f->r->blocks_held += f->held[i].count;
		else
			f->r->blocks_quarantined += f->held[i].count;
		if (v)
			own(f, v, 0, f->held[i].block, f->held[i].count);
	}
	for (int i = 0; i < f->nvols; i++) {
		struct fsck_vol *v = &f->vols[i];
		uint64_t start = 0, b = 0;
		int run = 0;

		while (b < v->capacity) {
			uint64_t w = b >> 6, step = 1;
			int kind, m, o;

			if ((b & 63) == 0 && b + 64 <= v->capacity && v->mapped[w] == v->owned[w]) {
				/* a clean word: most of them */
				f->r->blocks_mapped += (uint64_t)__builtin_popcountll(v->mapped[w]);
				kind = 0;
				step = 64;
			} else {
				m = bit(v->mapped, b);
				o = bit(v->owned, b);
				f->r->blocks_mapped += (uint64_t)m;
				kind = m && !o ? MS_FSCK_LEAKED : !m && o ? MS_FSCK_UNMAPPED : 0;
			}
			/* an extent's count is a u32: split longer runs */
			if (kind != run || (run && b - start >= 0x7fffffffu)) {
				if (run)
					map_run(f, v, run, start, b - start, due);
				run = kind;
				start = b;
			}
			b += step;
		}
		if (run)
			map_run(f, v, run, start, v->capacity - start, due);
	}
	return 0;
}

static int check_high_water(struct fsck *f)
{
	int ret = 0;

	for (int i = 0; i < f->nvols && !ret && f->repair; i++)
		if (f->vols[i].need_high > f->vols[i].high)
			ret = raise_high_water(f, &f->vols[i], f->vols[i].need_high);
	return ret;
}

int ms_fsck(struct ms *ms, struct ms_session *s, int repair, int64_t quarantine_ns, size_t max,
	    struct ms_fsck_report *out)
{
	struct fsck f = { .ms = ms, .r = out, .max = max, .repair = repair,
			  .quarantine_ns = quarantine_ns };
	int ret;

	memset(out, 0, sizeof(*out));
	if (!ms_session_is_server(s))
		return -EPERM;
	out->p = calloc(max ? max : 1, sizeof(*out->p));
	if (!out->p)
		return -ENOMEM;
	pthread_mutex_lock(&ms->fsck_mu);
	log_info(1100006, "fsck: started%s", repair ? " (repair)" : "");
	ret = take_moment(&f);
	if (!ret)
		ret = scan(&f, MS_TAG_HIGH_WATER, scan_high);
	if (!ret)
		ret = scan(&f, MS_TAG_DIRENT, scan_dirent);
	if (!ret)
		ret = scan(&f, MS_TAG_INODE, scan_inode);
	if (!ret)
		ret = scan(&f, MS_TAG_LAYOUT, scan_layout);
	if (!ret)
		ret = scan(&f, MS_TAG_ORPHAN, scan_orphan);
	if (!ret)
		ret = check_maps(&f);
	if (!ret)
		ret = check_high_water(&f);
	if (!ret)
		ret = check_namespace(&f);
	if (!ret)
		ret = scan(&f, MS_TAG_DIRENT, dangling_entry);
	if (!ret)
		ret = scan(&f, MS_TAG_LAYOUT, missing_inode_layout);
	if (!ret)
		ret = scan(&f, MS_TAG_ORPHAN, missing_inode_orphan);
	if (!ret)
		ret = scan(&f, MS_TAG_QUOTA, scan_quota);
	if (!ret)
		ret = check_quota(&f);
	if (repair) {
		/* what an earlier repair quarantined and is due now */
		pthread_rwlock_rdlock(&ms->blocks_rw);
		quarantine_release_due(ms);
		pthread_rwlock_unlock(&ms->blocks_rw);
	}
	log_info(1100007,
		 "fsck: %llu inodes, %llu extents, %llu blocks owned, %llu in use; %llu problems, "
		 "%llu repaired%s", (unsigned long long)out->inodes,
		 (unsigned long long)out->extents, (unsigned long long)out->blocks_owned,
		 (unsigned long long)out->blocks_mapped, (unsigned long long)out->problems,
		 (unsigned long long)out->repaired, ret ? " (stopped by an error)" : "");
	pthread_mutex_unlock(&ms->fsck_mu);

	if (f.ro)
		leveldb_readoptions_destroy(f.ro);
	if (f.snap)
		leveldb_release_snapshot(ms->db, f.snap);
	for (int i = 0; i < f.nvols; i++) {
		free(f.vols[i].mapped);
		free(f.vols[i].owned);
	}
	free(f.vols);
	free(f.held);
	free(f.inos);
	free(f.refs);
	free(f.usage);
	if (ret)
		ms_fsck_report_free(out);
	return ret;
}

void ms_fsck_report_free(struct ms_fsck_report *r)
{
	free(r->p);
	r->p = NULL;
	r->n = 0;
}

int ms_debug_map(struct ms *ms, uint32_t id, uint64_t block, uint64_t count, int used)
{
	int ret = 0;

	pthread_rwlock_wrlock(&ms->blocks_rw);
	if (used)
		ret = alloc_mark(&ms->alloc, id, block, count);
	else
		alloc_free(&ms->alloc, id, block, count);
	pthread_rwlock_unlock(&ms->blocks_rw);
	return ret;
}
