// SPDX-License-Identifier: MIT
/*
 * rebuild.c - the rebuilder: brings every chunk back to its file's copies.
 *
 * A pass walks every chunk record and counts, per block, the copies that
 * count ("alive": not stale, on a server that is up or has been down for less
 * than the grace period) and the ones that can be read now (not stale, server
 * up). A chunk is repaired when it has stale extents (freed: never read, they
 * only hold space), more alive copies than wanted (the copies of one server
 * dropped, a down one first), or blocks with fewer than wanted and at least
 * one readable (one new copy per pass, on a server that holds none).
 *
 * A new copy is built without stopping readers, and without letting a write
 * slip past it:
 *   1. under the inode lock, blocks are allocated on the target and recorded
 *      as extents flagged STALE|BUILDING (never described to clients, freed by
 *      the next pass if we crash), the chunk is marked as being rebuilt, and
 *      the file is fenced: every capability granted before is refused;
 *   2. while it is marked, LAYOUT refuses to allocate in the chunk (-EAGAIN:
 *      clients retry) and grants reads only, so no write can reach the source
 *      copy behind the copying;
 *   3. the target I/O server COPYs the bytes from a readable copy (the
 *      metaserver's ms_copy_fn, as the server);
 *   4. under the inode lock again, the new extents take the flags their
 *      source has now (a COMMIT may have come meanwhile) and count from then
 *      on; the mark is cleared. An extent whose source left the file (a punch,
 *      a truncate) stays stale and goes with the next pass.
 * A failed copy frees what step 1 allocated (fenced first, as any freed block).
 *
 * Threads: one caller at a time (the metaserver's rebuilder thread, or a
 * test); the mark is read by LAYOUT under the inode lock of the file, and
 * written here under that lock and ms->rebuild_mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "frame.h"
#include "log.h"
#include "ms_int.h"

#define BLK		4096ull
#define MAX_WORK	1024
#define MAX_SERVERS	256

struct work {
	uint64_t ino, idx;
};

/* One new copy's run: target blocks and where their bytes come from. */
struct copy_job {
	uint32_t dst, src;
	uint64_t dst_block, src_block;
	uint32_t off, count;		/* in the chunk, blocks */
	uint8_t flags;			/* the source extent's when planned */
};

void ms_set_copier(struct ms *ms, ms_copy_fn fn, void *arg)
{
	pthread_mutex_lock(&ms->rebuild_mu);
	ms->copy = fn;
	ms->copy_arg = arg;
	pthread_mutex_unlock(&ms->rebuild_mu);
}

int ms_rebuild_busy(struct ms *ms, uint64_t ino, uint64_t first, uint64_t last)
{
	int busy;

	/* every LAYOUT asks: nothing being copied (nearly always) costs no lock */
	if (!__atomic_load_n(&ms->rebuilding, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&ms->rebuild_mu);
	busy = ms->rebuilding && ms->rebuild_ino == ino && ms->rebuild_idx >= first &&
	       ms->rebuild_idx <= last;
	pthread_mutex_unlock(&ms->rebuild_mu);
	return busy;
}

static void mark_chunk(struct ms *ms, uint64_t ino, uint64_t idx, int on)
{
	pthread_mutex_lock(&ms->rebuild_mu);
	ms->rebuild_ino = ino;
	ms->rebuild_idx = idx;
	__atomic_store_n(&ms->rebuilding, on, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ms->rebuild_mu);
}

/*
 * Per block of chunk @c (@cpb blocks): copies that count (@alive) and copies
 * readable now (@readable), leaving out the extents of server @skip.
 */
static void census(struct ms *ms, const struct ms_chunk *c, uint64_t cpb, uint32_t skip,
		   uint8_t *alive, uint8_t *readable)
{
	memset(alive, 0, cpb);
	memset(readable, 0, cpb);
	for (int i = 0; i < c->n; i++) {
		const struct ms_ext *e = &c->e[i];
		int a, r;

		if ((e->flags & MS_EXT_STALE) || e->server_id == skip)
			continue;
		a = registry_alive(&ms->reg, e->server_id, ms->rebuild_grace_ms);
		r = registry_is_up(&ms->reg, e->server_id);
		for (uint64_t b = e->off; b < (uint64_t)e->off + e->count && b < cpb; b++) {
			alive[b] += a;
			readable[b] += r;
		}
	}
}

/*
 * How many copies that count a chunk can have: @wanted, or fewer when fewer
 * servers take blocks (a drain must not wait for a copy there is no room for).
 */
static uint32_t copies_possible(struct ms *ms, uint32_t wanted)
{
	uint32_t ids[MAX_SERVERS];
	int n = registry_alloc_ids(&ms->reg, ids, MAX_SERVERS);

	return (uint32_t)n < wanted ? (uint32_t)n : wanted;
}

/* What chunk @c needs. */
enum { NEED_FREE_STALE = 1, NEED_DROP = 2, NEED_COPY = 4, LOST = 8, UNDER = 16 };

static int chunk_needs(struct ms *ms, const struct ms_chunk *c, uint64_t cpb, uint32_t wanted,
		       uint8_t *alive, uint8_t *readable)
{
	int need = 0, possible = -1;

	census(ms, c, cpb, MS_ANY_SERVER, alive, readable);
	/* every block some extent holds, once per extent that holds it */
	for (int i = 0; i < c->n; i++) {
		const struct ms_ext *e = &c->e[i];
		uint64_t end = (uint64_t)e->off + e->count < cpb ? (uint64_t)e->off + e->count : cpb;

		if (e->flags & MS_EXT_STALE)
			need |= NEED_FREE_STALE;
		/* a copy that does not count (draining, down too long) goes once it is not needed */
		if (!(e->flags & MS_EXT_STALE) &&
		    !registry_alive(&ms->reg, e->server_id, ms->rebuild_grace_ms)) {
			int enough = 1;

			if (possible < 0)
				possible = (int)copies_possible(ms, wanted);
			for (uint64_t b = e->off; b < end; b++)
				enough &= alive[b] >= (uint32_t)possible;
			if (enough && possible > 0)
				need |= NEED_DROP;
		}
		for (uint64_t b = e->off; b < end; b++) {
			if (alive[b] > wanted)
				need |= NEED_DROP;
			if (alive[b] < wanted) {
				need |= UNDER;
				if (readable[b])
					need |= NEED_COPY;
			}
			/* held by no copy that counts: its data is gone, or away past the grace */
			if (!alive[b])
				need |= LOST;
		}
	}
	return need;
}

/*
 * Take the extents of chunk @c on server @sid (MS_ANY_SERVER: any) whose
 * flags include @flags out of the file, durably; their blocks are fenced,
 * then freed. Under the inode lock of @in.
 */
static int chunk_drop(struct ms *ms, struct ms_inode *in, struct ms_chunk *c, uint32_t sid,
		      uint8_t flags)
{
	struct ms_freelist f = { 0 };
	leveldb_writebatch_t *b;
	int j = 0, ret;

	f.ino = in->ino;
	for (int i = 0; i < c->n; i++) {
		struct ms_ext *e = &c->e[i];

		if ((sid == MS_ANY_SERVER || e->server_id == sid) && (e->flags & flags) == flags) {
			freelist_add(&f, e->server_id, e->block, e->count);
			in->blocks -= e->count;
			continue;
		}
		c->e[j++] = *e;
	}
	if (j == c->n) {
		freelist_release(ms, &f, 0);
		return 0;
	}
	c->n = j;
	b = leveldb_writebatch_create();
	chunk_store(b, in->ino, c);
	ns_inode_put(b, in);
	ret = ns_write_freeing(ms, b, &f);
	leveldb_writebatch_destroy(b);
	freelist_release(ms, &f, ret == 0);
	return ret;
}

/* Drop the copy of one server while every block keeps @wanted alive without it. */
static int drop_extra(struct ms *ms, struct ms_inode *in, struct ms_chunk *c, uint64_t cpb,
		      uint32_t wanted, uint8_t *alive, uint8_t *readable, int *dropped)
{
	uint32_t ids[MAX_SERVERS], possible = copies_possible(ms, wanted);
	int n = 0;

	for (int i = 0; i < c->n && n < MAX_SERVERS; i++) {
		int seen = 0;

		for (int k = 0; k < n; k++)
			seen |= ids[k] == c->e[i].server_id;
		if (!seen)
			ids[n++] = c->e[i].server_id;
	}
	/* a copy that does not count (draining, down too long) goes first, then the highest id */
	for (int pass = 0; pass < 2; pass++) {
		for (int k = n - 1; k >= 0; k--) {
			/* one that counts goes only above @wanted; one that does not, above what can be */
			uint32_t floor = pass == 0 ? possible : wanted;
			int ok = floor > 0;

			if ((pass == 0) == registry_alive(&ms->reg, ids[k], ms->rebuild_grace_ms))
				continue;
			census(ms, c, cpb, ids[k], alive, readable);
			for (int i = 0; i < c->n && ok; i++) {
				const struct ms_ext *e = &c->e[i];

				if (e->server_id != ids[k])
					continue;
				for (uint64_t b = e->off; b < (uint64_t)e->off + e->count && ok; b++)
					ok = alive[b] >= floor;
			}
			if (ok) {
				*dropped = 1;
				log_info("inode %llu chunk %llu: dropping the extra copy on I/O "
					 "server %u", (unsigned long long)in->ino,
					 (unsigned long long)c->idx, ids[k]);
				return chunk_drop(ms, in, c, ids[k], 0);
			}
		}
	}
	return 0;
}

/*
 * The server for a new copy of chunk @c: taking blocks, holding none of its
 * extents, in a failure domain none of its copies that count is in if there
 * is one, in the order of the file's stripe. 0 if there is none.
 */
static uint32_t pick_target_in(struct ms *ms, const struct ms_inode *in, const struct ms_chunk *c,
			       const uint32_t *up, int n, int new_domain);

static uint32_t pick_target(struct ms *ms, const struct ms_inode *in, const struct ms_chunk *c)
{
	uint32_t up[MAX_SERVERS];
	int n = registry_alloc_ids(&ms->reg, up, MAX_SERVERS);

	for (int round = 0; round < 2; round++) {
		uint32_t id = pick_target_in(ms, in, c, up, n, round == 0);

		if (id)
			return id;
	}
	return 0;
}

/* pick_target(), among @up; with @new_domain, only in a domain no copy that counts is in. */
static uint32_t pick_target_in(struct ms *ms, const struct ms_inode *in, const struct ms_chunk *c,
			       const uint32_t *up, int n, int new_domain)
{
	for (int k = 0; k < n; k++) {
		uint32_t id = up[(in->stripe_start + c->idx + (uint64_t)k) % (uint64_t)n];
		uint64_t dom = registry_domain(&ms->reg, id), capacity, free_blocks;
		int used = 0;

		for (int i = 0; i < c->n && !used && new_domain; i++)
			used = !(c->e[i].flags & MS_EXT_STALE) &&
			       registry_alive(&ms->reg, c->e[i].server_id, ms->rebuild_grace_ms) &&
			       registry_domain(&ms->reg, c->e[i].server_id) == dom;
		for (int i = 0; i < c->n && !used; i++)
			used = c->e[i].server_id == id;
		if (!used && alloc_usage(&ms->alloc, id, &capacity, &free_blocks) == 0 &&
		    free_blocks > 0)
			return id;
	}
	return 0;
}

/* Room for twice as many runs and jobs (the same count each). */
static int grow_runs(struct ms_ext **runs, struct copy_job **jobs, size_t *cap)
{
	size_t nc = *cap ? *cap * 2 : 8;
	struct ms_ext *nr = realloc(*runs, nc * sizeof(*nr));
	struct copy_job *nj;

	if (!nr)
		return -ENOMEM;
	*runs = nr;
	nj = realloc(*jobs, nc * sizeof(*nj));
	if (!nj)
		return -ENOMEM;
	*jobs = nj;
	*cap = nc;
	return 0;
}

/*
 * Step 1: allocate one new copy, on @dst, of the blocks of @c that lack
 * copies and have a readable one; record it STALE|BUILDING. The jobs say
 * what to copy. Under the inode lock.
 */
static int plan_copy(struct ms *ms, struct ms_inode *in, struct ms_chunk *c, uint64_t cpb,
		     uint32_t wanted, uint32_t dst, const uint8_t *alive, const uint8_t *readable,
		     struct copy_job **jobs, size_t *njobs)
{
	struct ms_ext *runs = NULL;
	size_t nruns = 0, cap = 0;
	uint64_t goal = UINT64_MAX, total = 0;
	leveldb_writebatch_t *b;
	int ret = 0;

	for (uint64_t blk = 0; blk < cpb && !ret;) {
		const struct ms_ext *found = NULL;
		struct ms_ext src;
		uint64_t end;

		if (alive[blk] >= wanted || !readable[blk]) {
			blk++;
			continue;
		}
		for (int i = 0; i < c->n && !found; i++) {
			const struct ms_ext *e = &c->e[i];

			if (!(e->flags & MS_EXT_STALE) && e->off <= blk &&
			    blk < (uint64_t)e->off + e->count && registry_is_up(&ms->reg, e->server_id))
				found = e;
		}
		if (!found) {
			blk++;
			continue;
		}
		/* a copy: c->e may move as extents are added below */
		src = *found;
		/* the run: what this source extent covers of the blocks lacking copies */
		for (end = blk; end < (uint64_t)src.off + src.count && end < cpb &&
				alive[end] < wanted; end++)
			;
		while (blk < end && !ret) {
			uint64_t block, reused;
			int64_t got = alloc_run(&ms->alloc, dst, end - blk, goal, &block, &reused);

			if (got < 0) {
				ret = (int)got;
				break;
			}
			if ((nruns == cap && grow_runs(&runs, jobs, &cap)) ||
			    chunk_reserve(c, c->n + 1)) {
				alloc_free(&ms->alloc, dst, block, (uint64_t)got);
				ret = -ENOMEM;
				break;
			}
			runs[nruns] = (struct ms_ext){ .server_id = dst, .block = block,
						       .count = (uint32_t)got };
			(*jobs)[nruns] = (struct copy_job){
				.dst = dst, .src = src.server_id, .dst_block = block,
				.src_block = src.block + (blk - src.off), .off = (uint32_t)blk,
				.count = (uint32_t)got, .flags = src.flags,
			};
			nruns++;
			c->e[c->n++] = (struct ms_ext){
				.off = (uint32_t)blk, .count = (uint32_t)got, .server_id = dst,
				.block = block,
				.flags = (uint8_t)((*jobs)[nruns - 1].flags | MS_EXT_STALE |
						   MS_EXT_BUILDING),
			};
			goal = block + (uint64_t)got;
			total += (uint64_t)got;
			blk += (uint64_t)got;
		}
		if (!ret)
			blk = end;
	}
	if (!ret && nruns == 0)
		ret = -ENOSPC;
	if (!ret) {
		chunk_normalize(c);
		in->blocks += total;
		b = leveldb_writebatch_create();
		chunk_store(b, in->ino, c);
		ns_inode_put(b, in);
		/* from the maps to a durable layout: fsck waits (ms->blocks_rw) */
		pthread_rwlock_rdlock(&ms->blocks_rw);
		ret = high_water_write(ms, b, runs, nruns);
		pthread_rwlock_unlock(&ms->blocks_rw);
		leveldb_writebatch_destroy(b);
		if (ret)
			in->blocks -= total;
	}
	if (ret)
		for (size_t i = 0; i < nruns; i++)
			alloc_free(&ms->alloc, runs[i].server_id, runs[i].block, runs[i].count);
	free(runs);
	*njobs = ret ? 0 : nruns;
	return ret;
}

/*
 * Step 4: the copied extents count from now on, with the flags their source
 * has now. Under the inode lock; @c freshly loaded.
 */
static int finish_copy(struct ms *ms, struct ms_inode *in, struct ms_chunk *c, uint64_t cpb,
		       const struct copy_job *jobs, size_t njobs)
{
	uint64_t base = c->idx * cpb;
	leveldb_writebatch_t *b;
	int ret = 0, n0;

	for (size_t j = 0; j < njobs && !ret; j++) {
		const struct copy_job *job = &jobs[j];
		uint8_t building = (uint8_t)(job->flags | MS_EXT_STALE | MS_EXT_BUILDING);

		/* the source's extents over the job's range, as they are now */
		n0 = c->n;
		for (int i = 0; i < n0 && !ret; i++) {
			struct ms_ext e = c->e[i];
			uint64_t a = e.off > job->off ? e.off : job->off;
			uint64_t z = (uint64_t)e.off + e.count < (uint64_t)job->off + job->count ?
					     (uint64_t)e.off + e.count :
					     (uint64_t)job->off + job->count;

			if (e.server_id != job->src || (e.flags & MS_EXT_STALE) || a >= z)
				continue;
			/* the same bytes on the source: the blocks copied from there */
			if (e.block + (a - e.off) != job->src_block + (a - job->off))
				continue;
			ret = chunk_reflag_on(c, job->dst, base, base + a, base + z, building,
					      e.flags);
		}
	}
	if (ret)
		return ret;
	chunk_normalize(c);
	b = leveldb_writebatch_create();
	chunk_store(b, in->ino, c);
	ret = ns_write(ms, b);
	leveldb_writebatch_destroy(b);
	return ret;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Hold the rebuild to ms->rebuild_rate bytes a second, over the pass so far. */
static void throttle(struct ms *ms, uint64_t bytes, int64_t started_ms)
{
	int64_t due, now = now_ms();
	struct timespec ts;

	if (!ms->rebuild_rate)
		return;
	due = started_ms + (int64_t)(bytes * 1000 / ms->rebuild_rate);
	if (due <= now)
		return;
	ts.tv_sec = (due - now) / 1000;
	ts.tv_nsec = (long)((due - now) % 1000) * 1000000;
	nanosleep(&ts, NULL);
}

/* Repair chunk @idx of @ino (what chunk_needs said, checked again under its lock). */
static int rebuild_chunk(struct ms *ms, uint64_t ino, uint64_t idx, struct ms_rebuild_stats *st,
			 int64_t started_ms)
{
	struct ms_lockset ls;
	struct ms_inode *in = malloc(sizeof(*in));
	struct ms_chunk c = { 0 };
	struct copy_job *jobs = NULL;
	size_t njobs = 0;
	uint8_t *alive = NULL, *readable = NULL;
	uint64_t cpb = 0;
	uint32_t wanted, dst = 0, gen;
	ms_copy_fn copy;
	void *copy_arg;
	int ret, need, dropped = 0;

	if (!in)
		return -ENOMEM;
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (ret) {
		/* gone since the scan (its blocks went with it) */
		lockset_unlock(&ms->locks, &ls);
		free(in);
		return ret == -ENOENT ? 0 : ret;
	}
	wanted = ms_copies(ms, in);
	cpb = in->chunk_size / BLK;
	alive = malloc(cpb ? cpb : 1);
	readable = malloc(cpb ? cpb : 1);
	ret = alive && readable && cpb ? chunk_load(ms, ino, idx, &c) : -ENOMEM;
	if (ret)
		goto unlock;
	need = chunk_needs(ms, &c, cpb, wanted, alive, readable);
	if (need & NEED_FREE_STALE) {
		ret = chunk_drop(ms, in, &c, MS_ANY_SERVER, MS_EXT_STALE);
		if (ret)
			goto unlock;
		st->stale_freed++;
		need = chunk_needs(ms, &c, cpb, wanted, alive, readable);
	}
	if (need & NEED_DROP) {
		ret = drop_extra(ms, in, &c, cpb, wanted, alive, readable, &dropped);
		if (ret)
			goto unlock;
		st->copies_dropped += dropped;
		need = chunk_needs(ms, &c, cpb, wanted, alive, readable);
	}
	pthread_mutex_lock(&ms->rebuild_mu);
	copy = ms->copy;
	copy_arg = ms->copy_arg;
	pthread_mutex_unlock(&ms->rebuild_mu);
	if (!(need & NEED_COPY) || !copy)
		goto unlock;
	dst = pick_target(ms, in, &c);
	if (!dst) {
		log_debug("inode %llu chunk %llu: no I/O server for another copy",
			  (unsigned long long)ino, (unsigned long long)idx);
		goto unlock;
	}
	ret = plan_copy(ms, in, &c, cpb, wanted, dst, alive, readable, &jobs, &njobs);
	if (ret) {
		if (ret == -ENOSPC)
			ret = 0;
		goto unlock;
	}
	/* no write may reach the source behind the copy: capabilities from before are refused */
	mark_chunk(ms, ino, idx, 1);
	fence_file(ms, ino);
	gen = ms_file_gen(ms, ino);
	lockset_unlock(&ms->locks, &ls);

	for (size_t j = 0; j < njobs && !ret; j++) {
		ret = copy(copy_arg, ino, gen, jobs[j].dst, jobs[j].dst_block, jobs[j].src,
			   jobs[j].src_block, jobs[j].count);
		if (!ret) {
			st->bytes_copied += (uint64_t)jobs[j].count * BLK;
			throttle(ms, st->bytes_copied, started_ms);
		}
	}

	if (ns_inode_lock_get(ms, &ls, ino, in) || chunk_load(ms, ino, idx, &c)) {
		/* removed meanwhile: its blocks went with it */
		ret = 0;
	} else if (ret) {
		log_warn("inode %llu chunk %llu: copy to I/O server %u failed: %s",
			 (unsigned long long)ino, (unsigned long long)idx, dst, strerror(-ret));
		ret = chunk_drop(ms, in, &c, dst, MS_EXT_BUILDING);
	} else {
		ret = finish_copy(ms, in, &c, cpb, jobs, njobs);
		if (!ret) {
			st->chunks_rebuilt++;
			log_info("inode %llu chunk %llu: new copy on I/O server %u",
				 (unsigned long long)ino, (unsigned long long)idx, dst);
		}
	}
	mark_chunk(ms, 0, 0, 0);
unlock:
	lockset_unlock(&ms->locks, &ls);
	free(c.e);
	free(jobs);
	free(alive);
	free(readable);
	free(in);
	return ret;
}

int ms_rebuild_pass(struct ms *ms, size_t max_chunks, struct ms_rebuild_stats *out)
{
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	struct ms_rebuild_stats st = { 0 };
	struct work *work = calloc(MAX_WORK, sizeof(*work));
	struct ms_inode *in = malloc(sizeof(*in));
	uint8_t *alive = NULL, *readable = NULL;
	uint64_t cur_ino = 0, cpb = 0;
	uint32_t wanted = 1;
	size_t nwork = 0;
	uint8_t tag = MS_TAG_LAYOUT;
	int64_t started = now_ms();
	int ret = 0, have_inode = 0;

	if (!work || !in) {
		ret = -ENOMEM;
		goto out;
	}
	{
		int up, known;

		/* just started: a server not back yet is not gone (registry_ready) */
		if (registry_ready(&ms->reg, &up, &known))
			goto out;
	}
	for (leveldb_iter_seek(it, (char *)&tag, 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v;
		struct ms_chunk c = { 0 };
		uint64_t ino;
		int need;

		if (kl == 0 || k[0] != MS_TAG_LAYOUT)
			break;
		if (kl != 17)
			continue;
		ino = get_be64(k + 1);
		if (ino != cur_ino) {
			cur_ino = ino;
			have_inode = ns_inode_get(ms, ino, in) == 0 && in->chunk_size >= BLK;
			if (have_inode) {
				uint64_t n = in->chunk_size / BLK;

				if (n > cpb) {
					free(alive);
					free(readable);
					alive = malloc(n);
					readable = malloc(n);
					if (!alive || !readable) {
						ret = -ENOMEM;
						break;
					}
				}
				cpb = n;
				wanted = ms_copies(ms, in);
			}
		}
		if (!have_inode)
			continue;
		c.idx = get_be64(k + 9);
		v = leveldb_iter_value(it, &vl);
		if (chunk_parse(&c, v, vl)) {
			free(c.e);
			continue;
		}
		need = chunk_needs(ms, &c, in->chunk_size / BLK, wanted, alive, readable);
		free(c.e);
		if (need & UNDER)
			st.chunks_under++;
		if (need & LOST)
			st.chunks_lost++;
		if ((need & (NEED_FREE_STALE | NEED_DROP | NEED_COPY)) && nwork < MAX_WORK)
			work[nwork++] = (struct work){ ino, c.idx };
	}
	leveldb_iter_destroy(it);
	it = NULL;
	for (size_t i = 0; i < nwork && i < max_chunks && !ret; i++) {
		int r = rebuild_chunk(ms, work[i].ino, work[i].idx, &st, started);

		if (r)
			log_warn("inode %llu chunk %llu: rebuild: %s",
				 (unsigned long long)work[i].ino, (unsigned long long)work[i].idx,
				 strerror(-r));
	}
	st.work_left = nwork > max_chunks ? nwork - max_chunks : 0;
out:
	if (it)
		leveldb_iter_destroy(it);
	pthread_mutex_lock(&ms->rebuild_mu);
	ms->rebuild_last = st;
	ms->rebuild_passes++;
	pthread_mutex_unlock(&ms->rebuild_mu);
	if (out)
		*out = st;
	free(work);
	free(in);
	free(alive);
	free(readable);
	return ret;
}

void ms_rebuild_status(struct ms *ms, struct ms_rebuild_stats *out)
{
	pthread_mutex_lock(&ms->rebuild_mu);
	*out = ms->rebuild_last;
	out->chunks_building = ms->rebuilding;
	out->passes = ms->rebuild_passes;
	pthread_mutex_unlock(&ms->rebuild_mu);
}
