// SPDX-License-Identifier: MIT
/*
 * group_commit.c - every mutation's synced write, several at a time.
 *
 * A mutation ends with one LevelDB write batch that must be on stable storage
 * before its reply. Writers queue here; the first one in line becomes the
 * leader, takes everything queued, appends the batches into one and writes it
 * with sync=1, then wakes every writer it carried with the result. Writers that
 * arrive meanwhile queue for the next leader. N workers committing at once thus
 * cost one fsync, not N. LevelDB does the same internally, but says nothing of
 * it; doing it here counts exactly how many mutations each sync carried
 * (rdfs_ms_sync_batch_mutations) and keeps the promise visible: a reply is sent
 * only after the write that carried its batch returned. A batch marked nosync
 * (an allocation for writing: its COMMIT's sync will carry it) is written
 * without a sync when nothing else in its group needs one.
 *
 * The leader is also where quota usage is counted (quota.c): it applies the
 * usage changes of the batches it carries, in queue order, to the table in
 * memory and puts the usage records they changed into the same write, so
 * the records follow the order of the writes and are exact after any crash.
 * A write that fails takes the changes back out of the table.
 *
 * Threads: any (workers, the rebuilder, the zeroer). Lock: gc->mu guards the
 * queue and the leader flag; no lock is held across the write. A waiter's
 * record lives on its own stack until it is marked done.
 */
#include <errno.h>

#include "log.h"
#include "metrics.h"
#include "ms_int.h"

struct gc_waiter {
	struct ms_batch *mb;
	struct gc_waiter *next;
	int done;
	int ret;
};

void group_commit_init(struct ms_group_commit *gc)
{
	pthread_mutex_init(&gc->mu, NULL);
	pthread_cond_init(&gc->cv, NULL);
	gc->head = NULL;
	gc->tail = &gc->head;
	gc->leading = 0;
	atomic_init(&gc->fail_next, 0);
}

void group_commit_destroy(struct ms_group_commit *gc)
{
	pthread_cond_destroy(&gc->cv);
	pthread_mutex_destroy(&gc->mu);
}

/*
 * Write @group (a list of waiters) as one synced batch, with the usage records
 * its quota changes move (into the first waiter's batch when it is alone);
 * 0, -EIO or -ENOMEM.
 */
static int write_group(struct ms *ms, struct gc_waiter *group, uint64_t *n, int *synced)
{
	leveldb_writebatch_t *all = group->mb->b;
	struct quota_commit qc;
	struct gc_waiter *w;
	char *err = NULL;
	int ret = 0;

	*n = 1;
	*synced = 0;
	for (w = group; w && !*synced; w = w->next)
		*synced = !w->mb->nosync;
	if (group->next) {
		all = leveldb_writebatch_create();
		*n = 0;
		for (w = group; w; w = w->next, (*n)++)
			leveldb_writebatch_append(all, w->mb->b);
	}
	/* in queue order: each usage record put is its id's state after the whole group */
	quota_commit_begin(ms, &qc);
	for (w = group; w && !ret; w = w->next)
		ret = quota_commit_add(ms, &qc, w->mb);
	quota_commit_put(ms, &qc, all);
	if (!ret && atomic_load(&ms->gc.fail_next) > 0) {
		atomic_fetch_sub(&ms->gc.fail_next, 1);
		log_error(1100008, "leveldb write: failed on purpose (ms_debug_fail_writes)");
		ret = -EIO;
	} else if (!ret) {
		leveldb_write(ms->db, *synced ? ms->wsync : ms->wnosync, all, &err);
		if (err) {
			log_error(1100009, "leveldb write: %s", err);
			leveldb_free(err);
			ret = -EIO;
		}
	} else {
		log_error(1100010, "group commit: no memory to count quota usage; %llu writes fail",
			  (unsigned long long)*n);
	}
	quota_commit_end(ms, &qc, ret);
	if (all != group->mb->b)
		leveldb_writebatch_destroy(all);
	return ret;
}

int group_commit_write(struct ms *ms, struct ms_batch *mb)
{
	struct ms_group_commit *gc = &ms->gc;
	struct ms_core_metrics *m = &ms->metrics;
	struct gc_waiter self = { .mb = mb };

	pthread_mutex_lock(&gc->mu);
	*gc->tail = &self;
	gc->tail = &self.next;
	while (!self.done) {
		struct gc_waiter *group, *w, *next;
		uint64_t t0 = 0, n;
		int ret, synced;

		if (gc->leading) {
			pthread_cond_wait(&gc->cv, &gc->mu);
			continue;
		}
		/* lead: take everything queued, ourselves included */
		gc->leading = 1;
		group = gc->head;
		gc->head = NULL;
		gc->tail = &gc->head;
		pthread_mutex_unlock(&gc->mu);

		if (m->sync_seconds)
			t0 = metrics_now_ns();
		ret = write_group(ms, group, &n, &synced);
		if (!synced) {
			atomic_fetch_add(&gc->unsynced, 1);
		} else {
			if (m->sync_seconds) {
				metrics_observe(m->sync_seconds, 0, metrics_now_ns() - t0);
				metrics_observe(m->sync_batch, 0, n);
			}
			atomic_fetch_add(&gc->syncs, 1);
			atomic_fetch_add(&gc->mutations, n);
		}

		pthread_mutex_lock(&gc->mu);
		for (w = group; w; w = next) {
			next = w->next; /* @w may be gone once done is seen */
			w->ret = ret;
			w->done = 1;
		}
		gc->leading = 0;
		pthread_cond_broadcast(&gc->cv);
	}
	pthread_mutex_unlock(&gc->mu);
	return self.ret;
}

void ms_debug_fail_writes(struct ms *ms, int n)
{
	atomic_store(&ms->gc.fail_next, n);
}

void ms_write_counts(struct ms *ms, uint64_t *syncs, uint64_t *mutations, uint64_t *unsynced)
{
	*syncs = atomic_load(&ms->gc.syncs);
	*mutations = atomic_load(&ms->gc.mutations);
	*unsynced = atomic_load(&ms->gc.unsynced);
}
