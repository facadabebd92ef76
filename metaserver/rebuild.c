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
 * A pass also moves copies of chunks that need no repair: always where two
 * copies share a failure domain and another domain has a server with room,
 * and while an rdfs rebalance is asked, from servers fuller than the cluster
 * to emptier ones until every server is in the band. A move is a new copy
 * (steps 1-4) and then the old copy dropped under the same lock, once the
 * blocks it holds have their copies without it.
 *
 * Threads: one caller at a time (the metaserver's rebuilder thread, or a
 * test); the mark is read by LAYOUT under the inode lock of the file, and
 * written here under that lock and ms->rebuild_mu. The rebalance request is
 * under ms->rebalance_mu (set by ms_rebalance() on a request's thread).
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
	struct ms_batch mb;
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
	ms_batch_init(&mb);
	chunk_store(mb.b, in->ino, c);
	/* the copies dropped leave the owner's usage with the blocks */
	ns_inode_put(&mb, in);
	ret = ns_write_freeing(ms, &mb, &f);
	ms_batch_destroy(ms, &mb);
	freelist_release(ms, &f, ret == 0);
	return ret;
}

/*
 * 1 if every block of @c that server @sid holds has at least @floor copies
 * that count without it (@alive and @readable are overwritten).
 */
static int covered_without(struct ms *ms, const struct ms_chunk *c, uint64_t cpb, uint32_t sid,
			   uint32_t floor, uint8_t *alive, uint8_t *readable)
{
	int ok = floor > 0;

	census(ms, c, cpb, sid, alive, readable);
	for (int i = 0; i < c->n && ok; i++) {
		const struct ms_ext *e = &c->e[i];

		if (e->server_id != sid)
			continue;
		for (uint64_t b = e->off; b < (uint64_t)e->off + e->count && b < cpb && ok; b++)
			ok = alive[b] >= floor;
	}
	return ok;
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

			if ((pass == 0) == registry_alive(&ms->reg, ids[k], ms->rebuild_grace_ms))
				continue;
			if (covered_without(ms, c, cpb, ids[k], floor, alive, readable)) {
				*dropped = 1;
				log_info(1100042,
					 "ino=%llu chunk %llu: dropping the extra copy on I/O "
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
	int first = ms_stripe_pos(in, c->idx, up, n);

	for (int k = 0; k < n; k++) {
		uint32_t id = up[(first + k) % n];
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
 * Step 1: allocate one new copy, on @dst, of the blocks @todo marks that have
 * a readable copy; record it STALE|BUILDING. The jobs say what to copy. Under
 * the inode lock.
 */
static int plan_copy(struct ms *ms, struct ms_inode *in, struct ms_chunk *c, uint64_t cpb,
		     uint32_t dst, const uint8_t *todo, struct copy_job **jobs, size_t *njobs)
{
	struct ms_ext *runs = NULL;
	size_t nruns = 0, cap = 0;
	uint64_t goal = UINT64_MAX, total = 0;
	struct ms_batch mb;
	int ret = 0;

	/*
	 * From the maps to a durable layout, the allocation included: fsck
	 * waits (ms->blocks_rw), or it would find blocks allocated here and not
	 * yet recorded, call them leaked and --repair would quarantine them.
	 */
	pthread_rwlock_rdlock(&ms->blocks_rw);
	for (uint64_t blk = 0; blk < cpb && !ret;) {
		const struct ms_ext *found = NULL;
		struct ms_ext src;
		uint64_t end;

		if (!todo[blk]) {
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
		/* the run: what this source extent covers of the blocks to copy */
		for (end = blk; end < (uint64_t)src.off + src.count && end < cpb && todo[end]; end++)
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
		ms_batch_init(&mb);
		chunk_store(mb.b, in->ino, c);
		/* a new copy counts to its owner at once, over a limit or not */
		ns_inode_put(&mb, in);
		ret = high_water_write(ms, &mb, runs, nruns);
		ms_batch_destroy(ms, &mb);
		if (ret)
			in->blocks -= total;
	}
	if (ret)
		for (size_t i = 0; i < nruns; i++)
			alloc_free(&ms->alloc, runs[i].server_id, runs[i].block, runs[i].count);
	pthread_rwlock_unlock(&ms->blocks_rw);
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
	ret = ns_write_plain(ms, b);
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

/* The rebuilder's copier now (NULL: none), and its argument into *@arg. */
static ms_copy_fn copier(struct ms *ms, void **arg)
{
	ms_copy_fn fn;

	pthread_mutex_lock(&ms->rebuild_mu);
	fn = ms->copy;
	*arg = ms->copy_arg;
	pthread_mutex_unlock(&ms->rebuild_mu);
	return fn;
}

/* build_copy()'s answers besides 0 (the new copy counts) and -errno. */
enum { COPY_FAILED = 1, COPY_GONE = 2 };

/*
 * Steps 1 to 4: a new copy on @dst of the blocks @todo marks of chunk @c of
 * @in, whose inode lock @ls holds. The lock is let go while the bytes are
 * copied and held again on return, with @in and @c as they are then. 0 once
 * the new copy counts; COPY_FAILED when a copy failed (logged; what step 1
 * allocated is freed again); COPY_GONE when the file or the chunk went
 * meanwhile (their blocks with them: nothing to undo); -ENOSPC when @dst has
 * no room; else -errno. The bytes copied are added to @st and *@bytes.
 */
static int build_copy(struct ms *ms, struct ms_lockset *ls, struct ms_inode *in,
		      struct ms_chunk *c, uint64_t cpb, uint32_t dst, const uint8_t *todo,
		      ms_copy_fn copy, void *copy_arg, struct ms_rebuild_stats *st,
		      int64_t started_ms, uint64_t *bytes)
{
	uint64_t ino = in->ino, idx = c->idx;
	struct copy_job *jobs = NULL;
	size_t njobs = 0;
	uint32_t gen;
	int ret;

	ret = plan_copy(ms, in, c, cpb, dst, todo, &jobs, &njobs);
	if (ret) {
		free(jobs);
		return ret;
	}
	/* no write may reach the source behind the copy: capabilities from before are refused */
	mark_chunk(ms, ino, idx, 1);
	fence_file(ms, ino);
	gen = ms_file_gen(ms, ino);
	lockset_unlock(&ms->locks, ls);

	for (size_t j = 0; j < njobs && !ret; j++) {
		ret = copy(copy_arg, ino, gen, jobs[j].dst, jobs[j].dst_block, jobs[j].src,
			   jobs[j].src_block, jobs[j].count);
		if (!ret) {
			st->bytes_copied += (uint64_t)jobs[j].count * BLK;
			*bytes += (uint64_t)jobs[j].count * BLK;
			throttle(ms, st->bytes_copied, started_ms);
		}
	}

	if (ns_inode_lock_get(ms, ls, ino, in) || chunk_load(ms, ino, idx, c)) {
		/* removed meanwhile: its blocks went with it */
		ret = COPY_GONE;
	} else if (ret) {
		log_warn(1100043, "ino=%llu chunk %llu: copy to I/O server %u failed: %s",
			 (unsigned long long)ino, (unsigned long long)idx, dst, strerror(-ret));
		ret = chunk_drop(ms, in, c, dst, MS_EXT_BUILDING);
		if (!ret)
			ret = COPY_FAILED;
	} else {
		ret = finish_copy(ms, in, c, cpb, jobs, njobs);
	}
	mark_chunk(ms, 0, 0, 0);
	free(jobs);
	return ret;
}

/* Repair chunk @idx of @ino (what chunk_needs said, checked again under its lock). */
static int rebuild_chunk(struct ms *ms, uint64_t ino, uint64_t idx, struct ms_rebuild_stats *st,
			 int64_t started_ms)
{
	struct ms_lockset ls;
	struct ms_inode *in = malloc(sizeof(*in));
	struct ms_chunk c = { 0 };
	uint8_t *alive = NULL, *readable = NULL, *todo = NULL;
	uint64_t cpb = 0, bytes = 0;
	uint32_t wanted, dst = 0;
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
	todo = malloc(cpb ? cpb : 1);
	ret = alive && readable && todo && cpb ? chunk_load(ms, ino, idx, &c) : -ENOMEM;
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
	copy = copier(ms, &copy_arg);
	if (!(need & NEED_COPY) || !copy)
		goto unlock;
	dst = pick_target(ms, in, &c);
	if (!dst) {
		log_debug(1100044, "ino=%llu chunk %llu: no I/O server for another copy",
			  (unsigned long long)ino, (unsigned long long)idx);
		goto unlock;
	}
	for (uint64_t b = 0; b < cpb; b++)
		todo[b] = alive[b] < wanted && readable[b];
	ret = build_copy(ms, &ls, in, &c, cpb, dst, todo, copy, copy_arg, st, started_ms, &bytes);
	if (!ret) {
		st->chunks_rebuilt++;
		log_info(1100045, "ino=%llu chunk %llu: new copy on I/O server %u",
			 (unsigned long long)ino, (unsigned long long)idx, dst);
	}
	/* no room, a failure already logged, or nothing left to copy: the next pass sees */
	if (ret == -ENOSPC || ret == COPY_FAILED || ret == COPY_GONE)
		ret = 0;
unlock:
	lockset_unlock(&ms->locks, &ls);
	free(c.e);
	free(alive);
	free(readable);
	free(todo);
	free(in);
	return ret;
}

/* ---------------------------------------------------------------- moving copies */

/* A server new blocks may go to, as a move sees it. */
struct srv_view {
	uint32_t id;
	uint64_t dom;			/* registry_domain() */
	uint64_t cap, used;		/* blocks */
};

/* The servers new blocks may go to, by id, with their usage now; their count. */
static int view_load(struct ms *ms, struct srv_view *v)
{
	uint32_t ids[MAX_SERVERS];
	int n = registry_alloc_ids(&ms->reg, ids, MAX_SERVERS), k = 0;

	for (int i = 0; i < n; i++) {
		uint64_t cap, free_blocks;

		if (alloc_usage(&ms->alloc, ids[i], &cap, &free_blocks) || !cap)
			continue;
		v[k++] = (struct srv_view){ .id = ids[i], .dom = registry_domain(&ms->reg, ids[i]),
					    .cap = cap,
					    .used = cap > free_blocks ? cap - free_blocks : 0 };
	}
	return k;
}

static const struct srv_view *view_find(const struct srv_view *v, int n, uint32_t id)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (v[mid].id == id)
			return &v[mid];
		if (v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static double used_frac(const struct srv_view *s)
{
	return (double)s->used / (double)s->cap;
}

/* The used fraction of the servers together: where a balanced cluster has each. */
static double view_mean(const struct srv_view *v, int n)
{
	uint64_t used = 0, cap = 0;

	for (int i = 0; i < n; i++) {
		used += v[i].used;
		cap += v[i].cap;
	}
	return cap ? (double)used / (double)cap : 0;
}

/* Servers whose used fraction is more than @half away from @mean. */
static uint32_t view_outside(const struct srv_view *v, int n, double mean, double half)
{
	uint32_t out = 0;

	for (int i = 0; i < n; i++) {
		double d = used_frac(&v[i]) - mean;

		/* the margin: a fraction computed twice must not flip in and out */
		out += d > half + 1e-9 || -d > half + 1e-9;
	}
	return out;
}

#define MOVE_MAX_COPIES	16

/* The servers of @c's copies that count, each once, and their domains; their count. */
static int counted_copies(struct ms *ms, const struct srv_view *v, int nv,
			  const struct ms_chunk *c, uint32_t *ids, uint64_t *doms)
{
	int n = 0;

	for (int i = 0; i < c->n && n < MOVE_MAX_COPIES; i++) {
		const struct ms_ext *e = &c->e[i];
		const struct srv_view *s;
		int seen = 0;

		if (e->flags & MS_EXT_STALE)
			continue;
		for (int k = 0; k < n; k++)
			seen |= ids[k] == e->server_id;
		if (seen)
			continue;
		/* a server in the view is up and not drained: its copy counts */
		s = view_find(v, nv, e->server_id);
		if (!s && !registry_alive(&ms->reg, e->server_id, ms->rebuild_grace_ms))
			continue;
		ids[n] = e->server_id;
		doms[n++] = s ? s->dom : registry_domain(&ms->reg, e->server_id);
	}
	return n;
}

static int holds_extent(const struct ms_chunk *c, uint32_t sid)
{
	for (int i = 0; i < c->n; i++)
		if (c->e[i].server_id == sid)
			return 1;
	return 0;
}

/*
 * The copy of @c to move so that its copies spread over more failure domains:
 * of two copies that count in one domain, the one on the fuller server, when
 * a server in a domain none of the copies is in takes blocks. 0: none.
 */
static uint32_t domain_source(struct ms *ms, const struct srv_view *v, int nv,
			      const struct ms_chunk *c)
{
	uint32_t ids[MOVE_MAX_COPIES], src = 0;
	uint64_t doms[MOVE_MAX_COPIES];
	int n = counted_copies(ms, v, nv, c, ids, doms);
	double worst = -1;

	for (int i = 0; i < n; i++) {
		for (int j = 0; j < n; j++) {
			const struct srv_view *s = view_find(v, nv, ids[i]);

			/* only a copy on a server in the view moves: it can be dropped now */
			if (i == j || doms[i] != doms[j] || !s || used_frac(s) <= worst)
				continue;
			src = ids[i];
			worst = used_frac(s);
		}
	}
	for (int k = 0; src && k < nv; k++) {
		int taken = 0;

		for (int i = 0; i < n; i++)
			taken |= doms[i] == v[k].dom;
		if (!taken && v[k].used < v[k].cap)
			return src;
	}
	return 0;
}

/*
 * The servers of copies of @c above @mean, fullest first, into @ids (room for
 * MOVE_MAX_COPIES): where a move evens out usage from. Their count.
 */
static int balance_sources(struct ms *ms, const struct srv_view *v, int nv,
			   const struct ms_chunk *c, double mean, uint32_t *ids)
{
	uint32_t all[MOVE_MAX_COPIES];
	uint64_t doms[MOVE_MAX_COPIES];
	double f[MOVE_MAX_COPIES];
	int n = counted_copies(ms, v, nv, c, all, doms), k = 0;

	for (int i = 0; i < n; i++) {
		const struct srv_view *s = view_find(v, nv, all[i]);
		int j;

		if (!s || used_frac(s) <= mean)
			continue;
		for (j = k; j > 0 && f[j - 1] < used_frac(s); j--) {
			ids[j] = ids[j - 1];
			f[j] = f[j - 1];
		}
		ids[j] = all[i];
		f[j] = used_frac(s);
		k++;
	}
	return k;
}

/* Distinct values among the @n of @doms, with @doms[@skip] read as @as. */
static int count_domains(const uint64_t *doms, int n, int skip, uint64_t as)
{
	int count = 0;

	for (int i = 0; i < n; i++) {
		uint64_t d = i == skip ? as : doms[i];
		int seen = 0;

		for (int k = 0; k < i; k++)
			seen |= (k == skip ? as : doms[k]) == d;
		count += !seen;
	}
	return count;
}

/*
 * Where the copy of @c on @src (@blocks blocks) goes: the emptiest server
 * taking blocks that holds no extent of @c and has the room, in a failure
 * domain none of the other copies that count is in; with @balance, else in
 * any domain that leaves the copies in no fewer domains, and only one below
 * @mean that stays below @src once the copy moved (no move back and forth).
 * 0: none.
 */
static uint32_t move_target(struct ms *ms, const struct srv_view *v, int nv,
			    const struct ms_chunk *c, uint32_t src, uint64_t blocks, int balance,
			    double mean)
{
	uint32_t ids[MOVE_MAX_COPIES];
	uint64_t doms[MOVE_MAX_COPIES];
	const struct srv_view *s = view_find(v, nv, src), *best = NULL;
	int n = counted_copies(ms, v, nv, c, ids, doms), at = -1, before;

	if (!s)
		return 0;
	for (int i = 0; i < n; i++)
		if (ids[i] == src)
			at = i;
	before = count_domains(doms, n, -1, 0);
	for (int round = 0; round < (balance ? 2 : 1) && !best; round++) {
		for (int k = 0; k < nv; k++) {
			const struct srv_view *t = &v[k];
			int other = 0;

			if (t->id == src || holds_extent(c, t->id) || t->cap - t->used < blocks)
				continue;
			for (int i = 0; i < n; i++)
				other |= i != at && doms[i] == t->dom;
			if (round == 0 && other)
				continue;
			if (round == 1 && at >= 0 && count_domains(doms, n, at, t->dom) < before)
				continue;
			if (balance && (used_frac(t) >= mean ||
					(double)(t->used + blocks) / (double)t->cap >
						(double)(s->used - blocks) / (double)s->cap))
				continue;
			if (!best || used_frac(t) < used_frac(best))
				best = t;
		}
	}
	return best ? best->id : 0;
}

/* move_chunk()'s answers besides -errno. */
enum { MOVE_NONE = 0, MOVE_DONE = 1, MOVE_FAILED = 2 };

/*
 * Move one copy of chunk @idx of @ino to another server if it needs it: for
 * the failure domains, else with @balance to even out usage around @mean. A
 * move is a new copy built as a rebuild builds one, then the old copy
 * dropped once the blocks it holds have their copies without it. Only a
 * chunk the rebuild has nothing to do for moves: the two never disagree on it.
 */
static int move_chunk(struct ms *ms, uint64_t ino, uint64_t idx, int balance, double mean,
		      struct ms_rebuild_stats *st, int64_t started_ms)
{
	struct ms_lockset ls;
	struct ms_inode *in = malloc(sizeof(*in));
	struct srv_view *v = malloc(MAX_SERVERS * sizeof(*v));
	struct ms_chunk c = { 0 };
	uint8_t *alive = NULL, *readable = NULL, *todo = NULL;
	uint64_t cpb, blocks = 0, bytes = 0;
	uint32_t wanted, src, dst = 0, srcs[MOVE_MAX_COPIES];
	ms_copy_fn copy;
	void *copy_arg;
	int ret, nv, by_domain, nsrc = 0;

	copy = copier(ms, &copy_arg);
	if (!in || !v || !copy) {
		free(in);
		free(v);
		return copy ? -ENOMEM : MOVE_NONE;
	}
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (ret) {
		ret = ret == -ENOENT ? MOVE_NONE : ret;
		goto unlock;
	}
	wanted = ms_copies(ms, in);
	cpb = in->chunk_size / BLK;
	alive = malloc(cpb ? cpb : 1);
	readable = malloc(cpb ? cpb : 1);
	todo = calloc(cpb ? cpb : 1, 1);
	ret = alive && readable && todo && cpb ? chunk_load(ms, ino, idx, &c) : -ENOMEM;
	if (ret || chunk_needs(ms, &c, cpb, wanted, alive, readable))
		goto unlock;
	nv = view_load(ms, v);
	src = domain_source(ms, v, nv, &c);
	by_domain = src != 0;
	if (src)
		srcs[nsrc++] = src;
	else if (balance)
		nsrc = balance_sources(ms, v, nv, &c, mean, srcs);
	/* the fullest copy that can go somewhere */
	for (int k = 0; k < nsrc && !dst; k++) {
		src = srcs[k];
		blocks = 0;
		for (int i = 0; i < c.n; i++)
			if (c.e[i].server_id == src && !(c.e[i].flags & MS_EXT_STALE))
				blocks += c.e[i].count;
		dst = move_target(ms, v, nv, &c, src, blocks, !by_domain, mean);
	}
	if (!dst)
		goto unlock;
	for (int i = 0; i < c.n; i++) {
		const struct ms_ext *e = &c.e[i];

		if (e->server_id != src || (e->flags & MS_EXT_STALE))
			continue;
		for (uint64_t b = e->off; b < (uint64_t)e->off + e->count && b < cpb; b++)
			todo[b] = 1;
	}
	ret = build_copy(ms, &ls, in, &c, cpb, dst, todo, copy, copy_arg, st, started_ms, &bytes);
	if (ret == COPY_FAILED) {
		ret = MOVE_FAILED;
		goto unlock;
	}
	if (ret == -ENOSPC || ret == COPY_GONE)
		ret = MOVE_NONE;
	if (ret)
		goto unlock;
	st->copies_moved++;
	if (!by_domain)
		st->bytes_moved += bytes;
	log_info(1100046, "ino=%llu chunk %llu: copy moved from I/O server %u to %u (%s)",
		 (unsigned long long)ino, (unsigned long long)idx, src, dst,
		 by_domain ? "failure domains" : "rebalance");
	/* a block written meanwhile keeps its old copy (the new one stayed stale) */
	if (covered_without(ms, &c, cpb, src, wanted, alive, readable))
		ret = chunk_drop(ms, in, &c, src, 0);
	ret = ret ? ret : MOVE_DONE;
unlock:
	lockset_unlock(&ms->locks, &ls);
	free(c.e);
	free(alive);
	free(readable);
	free(todo);
	free(v);
	free(in);
	return ret;
}

/* ---------------------------------------------------------------- the rebalance request */

static const uint8_t key_rebalance[] = { MS_TAG_REBALANCE };

int rebalance_load(struct ms *ms)
{
	char *v;
	size_t vl;
	int ret = ns_get(ms, key_rebalance, sizeof(key_rebalance), &v, &vl);

	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	ms->rebalance_on = 1;
	ms->rebalance_pct = vl == 4 ? get_le32((uint8_t *)v) : 0;
	if (!ms->rebalance_pct || ms->rebalance_pct > 100)
		ms->rebalance_pct = MS_REBALANCE_PCT;
	leveldb_free(v);
	return 0;
}

/* Under rebalance_mu: the request on (with @pct) or off, durably. */
static int rebalance_store(struct ms *ms, int on, uint32_t pct)
{
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	uint8_t v[4];
	int ret;

	put_le32(v, pct);
	if (on)
		leveldb_writebatch_put(b, (const char *)key_rebalance, sizeof(key_rebalance),
				       (char *)v, sizeof(v));
	else
		leveldb_writebatch_delete(b, (const char *)key_rebalance, sizeof(key_rebalance));
	ret = ns_write_plain(ms, b);
	leveldb_writebatch_destroy(b);
	if (!ret)
		ms->rebalance_on = on;
	return ret;
}

int ms_rebalance(struct ms *ms, struct ms_session *s, int on, uint32_t threshold_pct)
{
	uint32_t outside = 0;
	int ret;

	if (!ms_session_is_server(s))
		return -EPERM;
	if (threshold_pct > 100)
		return -EINVAL;
	if (!threshold_pct)
		threshold_pct = MS_REBALANCE_PCT;
	if (on) {
		struct srv_view *v = malloc(MAX_SERVERS * sizeof(*v));
		int nv;

		if (!v)
			return -ENOMEM;
		/* what a status asked before the first pass shows */
		nv = view_load(ms, v);
		outside = view_outside(v, nv, view_mean(v, nv), threshold_pct / 200.0);
		free(v);
	}
	pthread_mutex_lock(&ms->rebalance_mu);
	if (on && !ms->rebalance_on)
		ms->rebalance_moved = 0;
	ret = rebalance_store(ms, on, threshold_pct);
	if (!ret) {
		if (on) {
			ms->rebalance_pct = threshold_pct;
			ms->rebalance_outside = outside;
		}
		ms->rebalance_gen++;
		if (on)
			log_info(1100047,
				 "rebalance: moving copies until every I/O server is within "
				 "%g percentage points of the cluster's usage", threshold_pct / 2.0);
		else
			log_info(1100048, "rebalance cancelled");
	}
	pthread_mutex_unlock(&ms->rebalance_mu);
	return ret;
}

void ms_rebalance_status(struct ms *ms, struct ms_rebalance_status *out)
{
	pthread_mutex_lock(&ms->rebalance_mu);
	out->active = ms->rebalance_on;
	out->threshold_pct = ms->rebalance_pct ? ms->rebalance_pct : MS_REBALANCE_PCT;
	out->bytes_moved = ms->rebalance_moved;
	out->outside = ms->rebalance_outside;
	pthread_mutex_unlock(&ms->rebalance_mu);
}

/*
 * A pass's end of the rebalance it started with (@gen): the bytes it moved
 * and what is outside the band now; the request ends when nothing is, or
 * when nothing could move (@stuck), unless a new request came meanwhile.
 */
static void rebalance_pass_end(struct ms *ms, uint64_t gen, uint64_t moved, uint32_t outside,
			       int stuck)
{
	pthread_mutex_lock(&ms->rebalance_mu);
	ms->rebalance_moved += moved;
	ms->rebalance_outside = outside;
	if (ms->rebalance_on && ms->rebalance_gen == gen && (!outside || stuck) &&
	    rebalance_store(ms, 0, 0) == 0) {
		if (!outside)
			log_info(1100049,
				 "rebalance done: every I/O server within %g percentage points "
				 "of the cluster's usage", ms->rebalance_pct / 2.0);
		else
			log_warn(1100050,
				 "rebalance stopped: %u I/O server%s outside the band, and no copy "
				 "can move closer (room, failure domains, chunk size)", outside,
				 outside == 1 ? "" : "s");
	}
	pthread_mutex_unlock(&ms->rebalance_mu);
}

int ms_rebuild_pass(struct ms *ms, size_t max_chunks, struct ms_rebuild_stats *out)
{
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	struct ms_rebuild_stats st = { 0 };
	struct work *work = calloc(MAX_WORK, sizeof(*work));
	struct work *moves = calloc(MAX_WORK, sizeof(*moves));
	struct srv_view *view = malloc(MAX_SERVERS * sizeof(*view));
	struct ms_inode *in = malloc(sizeof(*in));
	uint8_t *alive = NULL, *readable = NULL;
	uint64_t cur_ino = 0, cpb = 0, bal_gen = 0;
	uint32_t wanted = 1, bal_pct = 0, srcs[MOVE_MAX_COPIES];
	size_t nwork = 0, nmoves = 0, budget;
	uint8_t tag = MS_TAG_LAYOUT;
	int64_t started = now_ms();
	int ret = 0, have_inode = 0, nv, labelled = 0, balancing, balance, moved = 0, failed = 0;
	double mean, half;

	if (!work || !moves || !view || !in) {
		ret = -ENOMEM;
		goto out;
	}
	{
		int up, known;

		/* just started: a server not back yet is not gone (registry_ready) */
		if (registry_ready(&ms->reg, &up, &known))
			goto out;
	}
	pthread_mutex_lock(&ms->rebalance_mu);
	balancing = ms->rebalance_on;
	bal_pct = ms->rebalance_pct;
	bal_gen = ms->rebalance_gen;
	pthread_mutex_unlock(&ms->rebalance_mu);
	nv = view_load(ms, view);
	mean = view_mean(view, nv);
	half = bal_pct / 200.0;
	/* copies never share a domain where no server names one: no need to look */
	for (int i = 0; i < nv; i++)
		labelled |= view[i].dom != view[i].id;
	balance = balancing && view_outside(view, nv, mean, half);
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
		if (!need && (labelled || balance) && nmoves < MAX_WORK &&
		    ((labelled && domain_source(ms, view, nv, &c)) ||
		     (balance && balance_sources(ms, view, nv, &c, mean, srcs))))
			moves[nmoves++] = (struct work){ ino, c.idx };
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
			log_warn(1100051, "ino=%llu chunk %llu: rebuild: %s",
				 (unsigned long long)work[i].ino, (unsigned long long)work[i].idx,
				 strerror(-r));
	}
	st.work_left = nwork > max_chunks ? nwork - max_chunks : 0;
	/* moves after repairs, within what is left of the pass's chunks */
	budget = nwork < max_chunks ? max_chunks - nwork : 0;
	for (size_t i = 0; i < nmoves && !ret; i++) {
		int r;

		if (i >= budget) {
			st.work_left += nmoves - i;
			break;
		}
		r = move_chunk(ms, moves[i].ino, moves[i].idx, balance, mean, &st, started);
		if (r < 0)
			log_warn(1100052, "ino=%llu chunk %llu: moving a copy: %s",
				 (unsigned long long)moves[i].ino, (unsigned long long)moves[i].idx,
				 strerror(-r));
		failed |= r < 0 || r == MOVE_FAILED;
		if (r != MOVE_DONE || !balance)
			continue;
		moved = 1;
		/* every server in the band: the rest are moves for the domains only */
		nv = view_load(ms, view);
		mean = view_mean(view, nv);
		balance = view_outside(view, nv, mean, half) != 0;
	}
	if (balancing) {
		uint32_t outside;

		nv = view_load(ms, view);
		outside = view_outside(view, nv, view_mean(view, nv), half);
		/* more candidates than one pass lists: go on at once */
		if (outside && moved && !st.work_left)
			st.work_left = 1;
		rebalance_pass_end(ms, bal_gen, st.bytes_moved, outside,
				   !moved && !failed && !nwork);
	}
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
	free(moves);
	free(view);
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
