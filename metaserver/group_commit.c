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
 * only after the write that carried its batch returned.
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
	leveldb_writebatch_t *b;
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
}

void group_commit_destroy(struct ms_group_commit *gc)
{
	pthread_cond_destroy(&gc->cv);
	pthread_mutex_destroy(&gc->mu);
}

/* Write @group (a list of waiters) as one synced batch; 0 or -EIO. */
static int write_group(struct ms *ms, struct gc_waiter *group, uint64_t *n)
{
	leveldb_writebatch_t *all = group->b;
	struct gc_waiter *w;
	char *err = NULL;

	*n = 1;
	if (group->next) {
		all = leveldb_writebatch_create();
		*n = 0;
		for (w = group; w; w = w->next, (*n)++)
			leveldb_writebatch_append(all, w->b);
	}
	leveldb_write(ms->db, ms->wsync, all, &err);
	if (all != group->b)
		leveldb_writebatch_destroy(all);
	if (err) {
		log_error("leveldb write: %s", err);
		leveldb_free(err);
		return -EIO;
	}
	return 0;
}

int group_commit_write(struct ms *ms, leveldb_writebatch_t *b)
{
	struct ms_group_commit *gc = &ms->gc;
	struct ms_core_metrics *m = &ms->metrics;
	struct gc_waiter self = { .b = b };

	pthread_mutex_lock(&gc->mu);
	*gc->tail = &self;
	gc->tail = &self.next;
	while (!self.done) {
		struct gc_waiter *group, *w, *next;
		uint64_t t0 = 0, n;
		int ret;

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
		ret = write_group(ms, group, &n);
		if (m->sync_seconds) {
			metrics_observe(m->sync_seconds, 0, metrics_now_ns() - t0);
			metrics_observe(m->sync_batch, 0, n);
		}
		atomic_fetch_add(&gc->syncs, 1);
		atomic_fetch_add(&gc->mutations, n);

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

void group_commit_counts(struct ms *ms, uint64_t *syncs, uint64_t *mutations)
{
	*syncs = atomic_load(&ms->gc.syncs);
	*mutations = atomic_load(&ms->gc.mutations);
}
