/* SPDX-License-Identifier: MIT */
/*
 * ms_int.h - what the files of the metadata core share: the context struct,
 * the inode lock table, the allocator, the registry, the open-file table and
 * the LevelDB helpers. Not for use outside metaserver/.
 */
#ifndef RDFS_MS_INT_H
#define RDFS_MS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <leveldb/c.h>

#include "metrics.h"
#include "ms.h"
#include "rdfs_frame.h"
#include "ms_keys.h"

struct ms_batch;

/* ---------------------------------------------------------------- inode locks (lock.c) */

/* Power of two; enough that unrelated operations rarely share a stripe. */
#define MS_LOCK_STRIPES		1024
#define MS_LOCKSET_MAX		6

struct ms_locks {
	pthread_rwlock_t stripe[MS_LOCK_STRIPES];
};

struct ms_lockset {
	int n;
	unsigned int idx[MS_LOCKSET_MAX];
	int excl[MS_LOCKSET_MAX];
	int held;
};

void locks_init(struct ms_locks *l);
void locks_destroy(struct ms_locks *l);
void lockset_init(struct ms_lockset *ls);
/* Add inode @ino exclusive (0 is ignored). */
void lockset_add(struct ms_lockset *ls, uint64_t ino);
/* Add inode @ino shared: only its times may be rewritten (see lock.c). */
void lockset_add_shared(struct ms_lockset *ls, uint64_t ino);
/* Add the entry @name of directory @parent, exclusive. */
void lockset_add_name(struct ms_lockset *ls, uint64_t parent, const char *name);
void lockset_lock(struct ms_locks *l, struct ms_lockset *ls);
void lockset_unlock(struct ms_locks *l, struct ms_lockset *ls);

/* ---------------------------------------------------------------- allocator (alloc.c) */

struct ms_volume {
	uint32_t id;
	uint64_t capacity;		/* blocks */
	uint64_t used;
	uint64_t hint;			/* where the next search without a goal starts */
	uint64_t *bits;
	/* no block at or above was handed out (this process's view; only grows) */
	uint64_t high;
	uint64_t high_durable;		/* the mark in the database ('H' key) */
};

struct ms_alloc {
	pthread_mutex_t mu;
	int n;
	struct ms_volume *vols;
};

void alloc_init(struct ms_alloc *a);
void alloc_destroy(struct ms_alloc *a);
/* Add server @id with @capacity blocks, or resize it. */
int alloc_set_capacity(struct ms_alloc *a, uint32_t id, uint64_t capacity);
/*
 * Lower @id's capacity to @capacity, at once and only if no block at or above
 * it is in use (held ones included): -EBUSY otherwise, and nothing changes. A
 * capacity at or above the current one (or an unknown @id) is left alone.
 */
int alloc_shrink(struct ms_alloc *a, uint32_t id, uint64_t capacity);
/*
 * Startup: mark blocks in use (raising the in-memory high-water mark over them).
 * -EEXIST when some were already marked (double use).
 */
int alloc_mark(struct ms_alloc *a, uint32_t id, uint64_t block, uint64_t count);
/*
 * Take up to @want free blocks starting exactly at @block; returns how many (0..want).
 * *@reused: how many of them, from @block on, lie below the high-water mark
 * (they may hold old data and must be zeroed before use).
 */
uint64_t alloc_extend(struct ms_alloc *a, uint32_t id, uint64_t block, uint64_t want,
		      uint64_t *reused);
/* Take one free run of 1..@want blocks at or after @goal (wrapping); -ENOSPC. *@reused as above. */
int64_t alloc_run(struct ms_alloc *a, uint32_t id, uint64_t want, uint64_t goal,
		  uint64_t *block, uint64_t *reused);
void alloc_free(struct ms_alloc *a, uint32_t id, uint64_t block, uint64_t count);
int alloc_usage(struct ms_alloc *a, uint32_t id, uint64_t *capacity, uint64_t *free_blocks);
int alloc_copy_bitmap(struct ms_alloc *a, uint32_t id, uint64_t **words, uint64_t *nblocks);
/* The ids of every volume in the maps (at most @max); returns their count. */
int alloc_ids(struct ms_alloc *a, uint32_t *ids, int max);
/* Set both high-water marks of @id (startup, first registration). */
void alloc_high_water_set(struct ms_alloc *a, uint32_t id, uint64_t mark);
int alloc_high_water(struct ms_alloc *a, uint32_t id, uint64_t *high, uint64_t *durable);
/* The database now holds @mark for @id (only ever raises it). */
void alloc_high_water_durable(struct ms_alloc *a, uint32_t id, uint64_t mark);

/* ---------------------------------------------------------------- high-water marks (high_water.c) */

/* Startup, after registry_load: each server's mark from the database. */
int high_water_load(struct ms *ms);
/* Startup, after layout_rebuild_bitmaps: persist marks the layouts went past. */
int high_water_settle(struct ms *ms);
/* Put @id's mark into @b (a new server's registration: 0). */
void high_water_put(leveldb_writebatch_t *b, uint32_t id, uint64_t mark);
/*
 * Write @mb, which records the allocation of the @n runs @runs, raising in the
 * same batch every persisted mark a run reaches. Returns ns_write()'s result.
 */
int high_water_write(struct ms *ms, struct ms_batch *mb, const struct ms_ext *runs, size_t n);
/*
 * Have the @n runs @runs (only server_id, block, count are used) zeroed through
 * the zeroer, if one is set. 0 or -EIO.
 */
int high_water_zero(struct ms *ms, const struct ms_ext *runs, size_t n);

/* ---------------------------------------------------------------- registry (registry.c) */

struct ms_ioserver {
	uint32_t id;
	uint64_t capacity;
	char url[256];
	char name[256];
	char domain[64];		/* failure domain; "": one of its own */
	uint8_t uuid[64];
	size_t uuid_len;
	struct ms_session *up;		/* the live registration session, or NULL */
	int64_t down_since_ms;		/* CLOCK_MONOTONIC: when it went down (or we started) */
	int draining;			/* rdfs drain: nothing new there, its copies go */
	int read_only;			/* rdfs servers set --read-only: nothing new there */
	char label[MS_LABEL_MAX + 1];	/* rdfs servers label: the admin's note */
	uint64_t epoch;			/* of that registration (ms_server_epoch) */
	/* freed blocks a fence could not reach: free once it registers again */
	size_t nheld, held_cap;
	struct ms_ext *held;
};

struct ms_registry {
	pthread_mutex_t mu;
	int n;
	struct ms_ioserver *servers;	/* sorted by id */
	int64_t wait_until_ms;		/* CLOCK_MONOTONIC; see ms_options.startup_wait_ms */
	uint64_t last_epoch;
};

int registry_load(struct ms *ms);
/* Start the startup wait of @ms milliseconds (none when no server is known). */
void registry_start_wait(struct ms_registry *r, int ms);
void registry_destroy(struct ms_registry *r);
/* The ids of the up servers, ascending; returns the count (at most @max). */
int registry_up_ids(struct ms_registry *r, uint32_t *ids, int max);
/* The ids of the servers new blocks may go to: up, not read-only, not being drained. */
int registry_alloc_ids(struct ms_registry *r, uint32_t *ids, int max);
/*
 * A key of server @id's failure domain: equal keys, same domain. A server
 * without one (or unknown) is a domain of its own: its key is unique to it.
 */
uint64_t registry_domain(struct ms_registry *r, uint32_t id);
int registry_is_up(struct ms_registry *r, uint32_t id);
/*
 * 1 if server @id is up or has been down for less than @grace_ms, and is not
 * being drained: its copies still count (a restart or a short outage is not
 * worth rebuilding them).
 */
int registry_alive(struct ms_registry *r, uint32_t id, int64_t grace_ms);
/*
 * 0 when allocation may go on; -EAGAIN during the startup wait while a known
 * server has not registered again (*@up of *@known are up).
 */
int registry_ready(struct ms_registry *r, int *up, int *known);
/*
 * Keep @n extents of server @id out of the allocator until it registers again
 * (a fence did not reach it). 0, or -ENOENT/-ENOMEM: the caller frees them.
 */
int registry_hold(struct ms_registry *r, uint32_t id, const struct ms_ext *e, size_t n);
void registry_session_closed(struct ms_registry *r, struct ms_session *s);
/* Every server's held extents, one malloc'ed array (fsck). 0 or -ENOMEM. */
int registry_copy_held(struct ms_registry *r, struct ms_ext **out, size_t *n);

/* ---------------------------------------------------------------- chunk records (layout.c) */

/* One chunk record of a file, loaded: its extents (every copy's). */
struct ms_chunk {
	uint64_t idx;
	int n, cap;
	int dirty;
	struct ms_ext *e;
};

int chunk_reserve(struct ms_chunk *c, int want);
int chunk_parse(struct ms_chunk *c, const char *v, size_t vl);
/* Load chunk @idx of @ino (an empty one if it has no record). */
int chunk_load(struct ms *ms, uint64_t ino, uint64_t idx, struct ms_chunk *c);
/* Put @c (deleted when empty) into @b. */
void chunk_store(leveldb_writebatch_t *b, uint64_t ino, const struct ms_chunk *c);
/* Sort by offset (then server) and merge what continues on disk with the same flags. */
void chunk_normalize(struct ms_chunk *c);
void chunks_free(struct ms_chunk *cs, size_t n);
#define MS_ANY_SERVER	UINT32_MAX
/*
 * The position in @up (the @n servers new blocks may go to, ascending ids)
 * of the server chunk @idx of @in goes to first: the file's first server
 * (position stripe_start, or with MS_INO_STRIPE_ID the server of id
 * stripe_start, else the next id up, wrapping) plus @idx modulo its stripe
 * count (0, or more than @n: all @n). Further copies follow at the next
 * positions, so they land on other servers. 0 when @n is 0.
 */
int ms_stripe_pos(const struct ms_inode *in, uint64_t idx, const uint32_t *up, int n);
/*
 * Give blocks [r0, r1) of the file (chunk @c starts at file block @base) flags
 * @to where their extent has flags @from and server @sid (MS_ANY_SERVER: any),
 * splitting extents at r0 and r1.
 */
int chunk_reflag_on(struct ms_chunk *c, uint32_t sid, uint64_t base, uint64_t r0, uint64_t r1,
		    uint8_t from, uint8_t to);

/*
 * 1 if a chunk in [@first, @last] of @ino is being rebuilt: LAYOUT neither
 * allocates there (-EAGAIN) nor grants WRITE (rebuild.c says why).
 */
int ms_rebuild_busy(struct ms *ms, uint64_t ino, uint64_t first, uint64_t last);
/* Startup: a rebalance asked before the restart goes on (rebuild.c). */
int rebalance_load(struct ms *ms);

/* ---------------------------------------------------------------- fencing (fence.c) */

#define MS_GEN_BUCKETS	4096

struct ms_gen {
	uint64_t ino;
	uint32_t gen;
	struct ms_gen *next;
};

/* Layout generations of the files fenced in this run; the others are at 0. */
struct ms_gens {
	pthread_mutex_t mu;
	struct ms_gen *bucket[MS_GEN_BUCKETS];
};

void gens_init(struct ms_gens *g);
void gens_destroy(struct ms_gens *g);
/*
 * Fence @ino on the up servers of its @n freed extents @e and return those to
 * the allocator, the ones of a server the fence did not reach once it
 * registers again. Caller holds the inode lock.
 */
void fence_and_free(struct ms *ms, uint64_t ino, const struct ms_ext *e, size_t n);

/* Servers one fence may name: more than any file's blocks span in practice. */
#define FENCE_MAX_SERVERS	256

/* What fence_only() told, for fence_free(). */
struct fence_result {
	uint32_t servers[FENCE_MAX_SERVERS];
	int status[FENCE_MAX_SERVERS];
	int ns;				/* servers told, or -ENOMEM: free nothing */
	int capped;			/* more up servers than FENCE_MAX_SERVERS */
};

/*
 * fence_and_free() in two steps, for freeing.c: fence @ino on the up servers
 * of @e (no lock needed for an inode gone for good), then, with blocks_rw
 * held shared, return the blocks as fence_and_free() does.
 */
void fence_only(struct ms *ms, uint64_t ino, const struct ms_ext *e, size_t n,
		struct fence_result *r);
void fence_free(struct ms *ms, uint64_t ino, const struct ms_ext *e, size_t n,
		const struct fence_result *r);

/* ---------------------------------------------------------------- freeing (freeing.c) */

struct freeing_item;

struct ms_freeing {
	pthread_mutex_t mu;		/* everything below but thread and running */
	pthread_cond_t work;		/* an item queued, or stopping */
	pthread_cond_t drained;		/* an item was fenced and freed */
	struct freeing_item *head, **tail;
	uint64_t blocks;		/* in the queue */
	uint64_t queued, done;		/* items, ever */
	int stopping;
	pthread_t thread;
	int running;			/* ms_set_freeing_async(): not under mu */
};

void freeing_init(struct ms_freeing *fr);
void freeing_destroy(struct ms_freeing *fr);
/*
 * Queue purged inode @ino's freed extents @e (taken over on success; the
 * caller holds blocks_rw shared). 0, or -ESRCH (not async) / -ENOMEM: the
 * caller frees them itself.
 */
int freeing_queue(struct ms *ms, uint64_t ino, struct ms_ext *e, size_t n);
/* Append the queued extents to @out (fsck, under blocks_rw exclusive). */
int freeing_copy(struct ms *ms, struct ms_ext **out, size_t *n);
/* Wait until what is queued now is freed; 1 if anything was, 0 if nothing. */
int freeing_wait(struct ms *ms);
uint64_t ext_blocks(const struct ms_ext *e, size_t n);
/* Fence @ino on every up server (rights may have been taken away). Inode lock held. */
void fence_file(struct ms *ms, uint64_t ino);
/* @ino is gone for good: no capability will name it again. */
void gens_forget(struct ms *ms, uint64_t ino);

/* ---------------------------------------------------------------- fsck (fsck.c) */

struct ms_quarantine {
	pthread_mutex_t mu;
	atomic_size_t n;
	size_t cap;
	struct ms_ext *e;
	int64_t *due_ns;		/* CLOCK_MONOTONIC, per entry */
};

void quarantine_init(struct ms_quarantine *q);
void quarantine_destroy(struct ms_quarantine *q);
/* Free the quarantined blocks whose time has come. Caller holds blocks_rw shared. */
void quarantine_release_due(struct ms *ms);

/* ---------------------------------------------------------------- client nodes (nodes.c) */

struct ms_nodes {
	pthread_mutex_t mu;		/* held across a node's small synced write */
	int n;
	struct ms_node *nodes;
};

int nodes_load(struct ms *ms);
void nodes_destroy(struct ms_nodes *t);

/* ---------------------------------------------------------------- open files (handles.c) */

struct ms_handle {
	uint64_t id;
	uint64_t ino;
	uint32_t flags;
	struct ms_handle *next;
};

struct ms_session {
	pthread_mutex_t mu;
	struct ms_squash squash;	/* under mu: a node's policy changes it live */
	char identity[64];		/* AUTH_ID_MAX */
	struct ms_handle *handles;
};

#define MS_OPENTAB_BUCKETS	4096

struct ms_openent {
	uint64_t ino;
	uint32_t count;
	struct ms_openent *next;
};

struct ms_opentab {
	pthread_mutex_t mu;
	struct ms_openent *bucket[MS_OPENTAB_BUCKETS];
};

void opentab_init(struct ms_opentab *t);
void opentab_destroy(struct ms_opentab *t);
uint32_t opentab_count(struct ms_opentab *t, uint64_t ino);
/* 0 or -ENOMEM. */
int opentab_inc(struct ms_opentab *t, uint64_t ino);
/* Drop one open of @ino; returns the count left. */
uint32_t opentab_dec(struct ms_opentab *t, uint64_t ino);

/* Register a handle for @ino (the caller holds the inode lock). */
uint64_t handle_add(struct ms *ms, struct ms_session *s, uint64_t ino, uint32_t flags);
/* The flags of handle @id of @s if it is open on @ino: 0, or -EBADF. */
int handle_flags(struct ms_session *s, uint64_t id, uint64_t ino, uint32_t *flags);

/* ---------------------------------------------------------------- the context */

/* ms_metrics_register(): what the core counts itself; NULL families when off */
struct ms_core_metrics {
	struct metric *sync_seconds;	/* histogram: one synced LevelDB write (a group) */
	struct metric *sync_batch;	/* histogram: mutations that write carried */
};

/* group_commit.c: the synced writes of concurrent mutations, as one */
struct ms_group_commit {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct gc_waiter *head, **tail;	/* queued for the next leader */
	int leading;			/* a leader is writing */
	atomic_uint_fast64_t syncs;	/* synced writes made */
	atomic_uint_fast64_t mutations;	/* batches they carried */
	atomic_uint_fast64_t unsynced;	/* writes made without a sync (ms_batch.nosync) */
	atomic_int fail_next;		/* tests: writes to fail (ms_debug_fail_writes) */
};
void group_commit_init(struct ms_group_commit *gc);
void group_commit_destroy(struct ms_group_commit *gc);
/*
 * Write @mb with sync=1, with whatever else is queued, and the usage records
 * its quota changes move (quota_commit_*); 0, -EIO or -ENOMEM. A group whose
 * batches all say nosync is written without a sync: it survives a crash of
 * the process, and the next synced write makes it durable (LevelDB's log is
 * one sequence).
 */
int group_commit_write(struct ms *ms, struct ms_batch *mb);

/* ---------------------------------------------------------------- quotas (quota.c) */

#define MS_QUOTA_BUCKETS	1024

/* One usage record in memory. */
struct ms_qent {
	struct ms_quota q;		/* as the last group written (or being written) has it */
	uint64_t res_blocks;		/* reserved by batches not yet written */
	uint64_t res_inodes;
	uint64_t stamp;			/* quota_commit: touched by the group of that stamp */
	uint64_t rewrite;		/* ...and written by it even if unchanged */
	struct ms_qent *next;
};

/*
 * Every usage record, loaded at startup: checks read no LevelDB. mu is a
 * leaf lock; a group commit leader holds it while it applies its group's
 * changes (never across the write itself).
 */
struct ms_quotas {
	pthread_mutex_t mu;
	struct ms_qent *bucket[MS_QUOTA_BUCKETS];
	uint64_t grace_s[MS_QUOTA_TYPES];
	uint64_t stamp;			/* of the last group applied */
};

/* The ids an inode is charged to; types not in @mask are not (project 0). */
struct ms_qids {
	uint32_t id[MS_QUOTA_TYPES];
	unsigned int mask;		/* 1u << MS_QUOTA_* */
};

/* ms_qchange.set, beyond MS_QUOTA_SET_*: write the record even if unchanged (fsck) */
#define MS_QUOTA_SET_REWRITE	0x100u

/* A change of one usage record that a batch makes. */
struct ms_qchange {
	uint8_t type;
	uint32_t set;			/* MS_QUOTA_SET_*: limits (or the grace) set; 0: a delta */
	uint32_t id;
	int64_t blocks, inodes;		/* deltas */
	uint64_t block_soft, block_hard, inode_soft, inode_hard, grace_s;
};

/* Usage an inode record moved in a batch not yet written: undone if it never is. */
struct ms_charge_undo {
	struct ms_inode *in;
	struct ms_charge old;
};

/* Room a batch reserved under the limits of one id until it is written. */
struct ms_qres {
	int on;
	uint32_t id;
	uint64_t blocks, inodes;
};

/*
 * One mutation's write: its LevelDB records (b) and what they change in quota
 * usage. ns_inode_put() and ns_inode_purge() note the usage an inode record
 * moves, so no path can forget it; ns_write() hands both to group commit,
 * whose leader puts the usage records into the same LevelDB write, and
 * applies the changes to the table in memory only for a write that is made
 * (rolled back if it fails). A batch that is never written gives its inodes'
 * charges and its reservation back at ms_batch_destroy().
 */
struct ms_batch {
	leveldb_writebatch_t *b;
	struct ms_qchange *q;
	size_t nq, capq;
	struct ms_charge_undo *undo;
	size_t nundo, capundo;
	struct ms_qres res[MS_QUOTA_TYPES];
	int err;			/* -ENOMEM noting a change: it must not be written */
	int nosync;			/* may be written without a sync (group_commit_write) */
};

void ms_batch_init(struct ms_batch *mb);
/* Any thread; with the inodes noted in @mb still alive (their charges may go back). */
void ms_batch_destroy(struct ms *ms, struct ms_batch *mb);

void quotas_init(struct ms_quotas *qs);
void quotas_destroy(struct ms_quotas *qs);
/*
 * Startup, before orphans are reclaimed: load the usage records, or on a
 * database without them compute them from every inode and write them.
 */
int quota_load(struct ms *ms);
/* Put the marker that usage records count every inode into @b (a new database). */
void quota_put_format(leveldb_writebatch_t *b);
/* The ids @in is charged to now. */
void quota_ids_of(const struct ms_inode *in, struct ms_qids *ids);
/*
 * @in's record goes into @mb (@gone: it is deleted): note the usage that
 * moves from in->charge, and make that the charge.
 */
void quota_note_inode(struct ms_batch *mb, struct ms_inode *in, int gone);
/*
 * ns_write() of @mb ended with @ret: written, its inodes are charged as put;
 * not, as the database has them. Either way its changes are done.
 */
void quota_batch_written(struct ms_batch *mb, int ret);
/* Note a change of limits or of the grace period (ms_quota_set), or an fsck correction. */
int quota_note_change(struct ms_batch *mb, const struct ms_qchange *c);

#define MS_QRES_CLAMP	1	/* blocks: grant what fits (*granted), not all or nothing */
/*
 * Reserve @blocks and @inodes under the limits of @ids in @mb until it is
 * written (or destroyed): -EDQUOT where a hard limit, or a soft one whose
 * grace is over, would be passed. With MS_QRES_CLAMP the blocks are granted
 * as far as they fit (*@granted, 0 included). @cr uid 0 is never refused
 * (CAP_SYS_RESOURCE); the usage still counts. One reservation per id.
 */
int quota_reserve(struct ms *ms, struct ms_batch *mb, const struct ms_cred *cr,
		  const struct ms_qids *ids, uint64_t blocks, uint64_t inodes, int flags,
		  uint64_t *granted);

/* The group commit leader's part (group_commit.c). */
struct quota_commit {
	uint64_t stamp;
	struct ms_qent **touched;
	struct ms_quota *old;		/* each touched entry before: a failed write restores */
	size_t n, cap;
	uint64_t grace_old[MS_QUOTA_TYPES];
	unsigned int grace_set;		/* types whose grace changed */
	int any;
};
void quota_commit_begin(struct ms *ms, struct quota_commit *qc);
/* Apply @mb's changes and release its reservation. 0 or -ENOMEM. */
int quota_commit_add(struct ms *ms, struct quota_commit *qc, struct ms_batch *mb);
/* Put every usage record the group changed into @all; releases ms->quotas.mu. */
void quota_commit_put(struct ms *ms, struct quota_commit *qc, leveldb_writebatch_t *all);
/* After the write (@ret): a failed one restores the table. */
void quota_commit_end(struct ms *ms, struct quota_commit *qc, int ret);

struct ms {
	leveldb_t *db;
	leveldb_options_t *opts;
	leveldb_cache_t *cache;
	leveldb_filterpolicy_t *filter;
	leveldb_readoptions_t *ropts;
	leveldb_writeoptions_t *wsync;
	leveldb_writeoptions_t *wnosync;
	/*
	 * Random, new at every start, never 0 or RDFS_INCARNATION_MIXED: layouts
	 * carry it, and a COMMIT of writes made under another one checks that its
	 * blocks' allocation survived (allocations are written without a sync).
	 */
	uint64_t incarnation;
	uint32_t chunk_size;
	uint32_t default_copies;

	struct ms_locks locks;
	pthread_mutex_t rename_mu;

	pthread_mutex_t ino_mu;
	uint64_t next_ino;
	uint64_t ino_limit;		/* persisted: nothing at or above was handed out */

	atomic_uint_fast64_t nfiles;
	atomic_uint_fast64_t next_handle;

	struct ms_alloc alloc;
	/* held across the synced write of an allocation that raises a high-water mark */
	pthread_mutex_t high_mu;
	ms_zero_fn zero;		/* ms_set_zeroer(); NULL: recycled blocks are not zeroed */
	void *zero_arg;
	struct ms_registry reg;
	struct ms_nodes nodes;
	struct ms_gens gens;
	struct ms_freeing freeing;	/* blocks of purged inodes awaiting their fence */
	ms_fence_fn fence;		/* ms_set_fencer(); NULL: blocks freed at once */
	void *fence_arg;
	struct ms_opentab opentab;
	struct ms_core_metrics metrics;
	struct ms_group_commit gc;
	struct ms_quotas quotas;

	/* the rebuilder (rebuild.c) */
	pthread_mutex_t rebuild_mu;	/* the fields below */
	ms_copy_fn copy;
	void *copy_arg;
	int rebuilding;			/* atomic: chunk rebuild_idx of rebuild_ino is being copied */
	uint64_t rebuild_ino, rebuild_idx;
	struct ms_rebuild_stats rebuild_last;
	uint64_t rebuild_passes;
	int64_t rebuild_grace_ms;	/* set at open */
	uint64_t rebuild_rate;		/* bytes/s, 0: unlimited; set at open */
	/* rdfs rebalance (rebuild.c): the fields below; held across the request's write */
	pthread_mutex_t rebalance_mu;
	int rebalance_on;		/* asked, not yet done (persisted) */
	uint32_t rebalance_pct;		/* its band's width, percentage points */
	uint64_t rebalance_gen;		/* moves on with every request: a pass ends only its own */
	uint64_t rebalance_moved;	/* bytes moved since it was asked */
	uint32_t rebalance_outside;	/* servers outside the band at the last pass */
	/*
	 * Held shared by whoever has blocks between the allocator's maps and the
	 * database: marked in a map but not yet in a durable layout (LAYOUT's
	 * allocation), or out of a durable layout but not yet back in the map (a
	 * freelist between its batch and its release; a server's held blocks as
	 * they are freed). fsck holds it exclusive for the moment it copies the
	 * maps and takes its snapshot, so that the two agree. Never taken twice by
	 * one thread (it prefers writers); taken before the allocator's, registry's
	 * and quarantine's mutexes, after inode locks.
	 */
	pthread_rwlock_t blocks_rw;
	/* leaked blocks fsck --repair found: free once no capability can reach them */
	struct ms_quarantine quarantine;
	pthread_mutex_t fsck_mu;	/* one fsck at a time */
};

/* ---------------------------------------------------------------- LevelDB helpers (ns.c) */

int64_t ns_now(void);
/* 0, -ENOENT, -EIO */
int ns_get(struct ms *ms, const uint8_t *key, size_t klen, char **val, size_t *vlen);
int ns_inode_get(struct ms *ms, uint64_t ino, struct ms_inode *out);
/*
 * The opening of an operation on one inode: lock @ino exclusively in a fresh
 * @ls, then load it. Returns ns_inode_get()'s result; the lock is held either
 * way, for the caller's exit path to lockset_unlock().
 */
/* Copies a chunk of @in should have (its own setting, else the cluster's). */
static inline uint32_t ms_copies(const struct ms *ms, const struct ms_inode *in)
{
	return in->copies ? in->copies : ms->default_copies;
}

int ns_inode_lock_get(struct ms *ms, struct ms_lockset *ls, uint64_t ino, struct ms_inode *in);
/* Put @in's record into @mb, noting the quota usage it moves (in->charge). */
void ns_inode_put(struct ms_batch *mb, struct ms_inode *in);
int ns_dirent_get(struct ms *ms, uint64_t parent, const char *name, uint64_t *ino,
		  uint32_t *type);
void ns_dirent_put(leveldb_writebatch_t *b, uint64_t parent, const char *name, uint64_t ino,
		   uint32_t type);
void ns_dirent_del(leveldb_writebatch_t *b, uint64_t parent, const char *name);
/*
 * Write @mb synced, with the usage records it moves; 0, -EIO (logged) or
 * -ENOMEM. On failure the charges of its inodes go back to what the database
 * holds. @mb stays the caller's to destroy.
 */
int ns_write(struct ms *ms, struct ms_batch *mb);
/* Write @b synced: records of no inode (servers, nodes, marks, counters). */
int ns_write_plain(struct ms *ms, leveldb_writebatch_t *b);
int ns_alloc_ino(struct ms *ms, uint64_t *ino);
void ns_attr_from_inode(const struct ms_inode *in, struct ms_attr *out);
/* 0 when @name is a valid single component; -ENAMETOOLONG, -EINVAL, -ENOENT (empty). */
int ns_check_name(const char *name);
/* Does directory @ino hold any entry? 1, 0 or -EIO. */
int ns_dir_has_entries(struct ms *ms, uint64_t ino);

/*
 * Lock the entry @name of @parent, @parent (exclusive when the entry is a
 * directory or @parent_excl, else shared) and the inode the entry points to,
 * so that the entry cannot change under us. Returns 0 with the locks held and
 * *@child set (0: no such entry), or -EIO.
 */
int ns_lock_entry(struct ms *ms, uint64_t parent, const char *name, int parent_excl,
		  struct ms_lockset *ls, uint64_t *child);
/* Read directory @ino: -ENOENT (also when removed), -ENOTDIR. */
int ns_get_dir(struct ms *ms, uint64_t ino, struct ms_inode *dir);

/*
 * Blocks of one inode to return to the allocator once a batch freeing them is
 * durable, after the fence (fence.c).
 */
struct ms_freelist {
	size_t n, cap;
	struct ms_ext *e;
	uint64_t ino;			/* whose blocks they are (0: none yet) */
	uint64_t inodes;		/* inodes purged, for the file count */
	int busy;			/* holds ms->blocks_rw shared (ns_write_freeing) */
};
void freelist_add(struct ms_freelist *f, uint32_t server, uint64_t block, uint64_t count);
/*
 * With @commit the caller still holds the inode lock of f->ino. Always called,
 * on every path, once @f was used: it also ends what ns_write_freeing began.
 */
void freelist_release(struct ms *ms, struct ms_freelist *f, int commit);
/*
 * ns_write() of a batch that takes @f's blocks out of layouts: from here to
 * freelist_release() they are in no durable layout yet still in the maps, so
 * fsck must not look in between (ms->blocks_rw).
 */
int ns_write_freeing(struct ms *ms, struct ms_batch *mb, struct ms_freelist *f);

#define NS_PURGE_ORPHAN	1	/* it has an orphan key: delete that too */
#define NS_PURGE_SCAN	2	/* search every layout record, whatever in->blocks says */
/*
 * Drop inode @ino, whose last link is gone: delete its record, layout and
 * xattrs into @mb, with NS_PURGE_ORPHAN its orphan key too (it has one: it
 * waited for its last release), and collect its blocks into @f. @in is its
 * record (its usage leaves the quotas), or NULL when that is unreadable; a
 * record without blocks has no layout records (in->blocks counts their
 * blocks in the same batches), so none are searched for unless NULL or
 * NS_PURGE_SCAN.
 *
 * Why not just delete and scan everything: every delete of a LevelDB key
 * leaves a tombstone until compaction reaches the bottom level, and a prefix
 * scan that finds nothing steps over all tombstones up to the next live key,
 * so deleting keys that were never written (an orphan key per unlink) made
 * each later create and remove slower than the one before.
 */
int ns_inode_purge(struct ms *ms, struct ms_batch *mb, uint64_t ino, struct ms_inode *in,
		   int flags, struct ms_freelist *f);
/*
 * The last link of @in went away (nlink already 0): purge it now, or keep it
 * as an orphan while open handles exist.
 */
int ns_inode_unlinked(struct ms *ms, struct ms_batch *mb, struct ms_inode *in,
		      struct ms_freelist *f);
/* Remove the blocks of @in past byte @size into @b/@f, updating in->blocks. */
int layout_truncate(struct ms *ms, leveldb_writebatch_t *b, struct ms_inode *in, uint64_t size,
		    struct ms_freelist *f);
/*
 * Remove the unwritten blocks of @in past its size (rounded up to a block) into
 * @b/@f, updating in->blocks: what the writers' speculative preallocation left.
 */
int layout_trim_unwritten(struct ms *ms, leveldb_writebatch_t *b, struct ms_inode *in,
			  struct ms_freelist *f);
/* Startup: mark every layout record's blocks in the allocator. */
int layout_rebuild_bitmaps(struct ms *ms);

/* ---------------------------------------------------------------- POSIX ACLs (ns_acl.c) */

/* 1 if @name is system.posix_acl_access or system.posix_acl_default. */
int ns_acl_is_name(const char *name);
/* Load ACL xattr @name of @ino into @a: 0 (n == 0 when it is missing), -EIO. */
int ns_acl_load(struct ms *ms, uint64_t ino, const char *name, struct ms_acl *a);
/* Put ACL @a as @name of @ino into @b (n == 0: delete the record). */
void ns_acl_put(leveldb_writebatch_t *b, uint64_t ino, const char *name, const struct ms_acl *a);
/* getxattr of an ACL name: its length with *@value malloc'ed, -ENODATA, ... */
int ns_acl_getxattr(struct ms *ms, uint64_t ino, const char *name, void **value);
/* setxattr (@value) or removexattr of an ACL name, with Linux's errors. */
int ns_acl_change(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name,
		  const void *value, size_t len, uint32_t flags);
/* chmod of @in (its new mode set): rewrite its access ACL into @b. Inode lock held. */
void ns_acl_chmod(leveldb_writebatch_t *b, struct ms_inode *in);
/*
 * New inode @tmpl (ino, mode set) in directory @dir: inherit @dir's default
 * ACL into @tmpl's mode, flags and @b, or, without one, take @umask from the
 * mode. Locks of both held. 0, -ENOMEM, -EIO.
 */
int ns_acl_inherit(struct ms *ms, const struct ms_inode *dir, struct ms_inode *tmpl,
		   uint32_t umask, leveldb_writebatch_t *b);

/* ---------------------------------------------------------------- permissions (perm.c) */

#define MAY_EXEC	1
#define MAY_WRITE	2
#define MAY_READ	4

int perm_in_group(const struct ms_cred *cr, uint32_t gid);
/* 0 or -EACCES */
int perm_check(const struct ms_inode *in, const struct ms_cred *cr, int mask);
int perm_is_owner(const struct ms_inode *in, const struct ms_cred *cr);
/* Removing @victim from sticky @dir: 0 or -EPERM. */
int perm_sticky(const struct ms_inode *dir, const struct ms_inode *victim,
		const struct ms_cred *cr);
/* May @cr open @in with @flags (O_ACCMODE, O_TRUNC)? 0, -EACCES, -EISDIR, -ELOOP. */
int perm_open(const struct ms_inode *in, const struct ms_cred *cr, uint32_t flags);

#endif
