/* SPDX-License-Identifier: MIT */
/*
 * range_lock.h - exclusive locks on block ranges of a volume.
 *
 * A writer holds the range of blocks it touches while it reads, modifies and
 * writes them, so a read-modify-write of a partial block is serialized against
 * every other write of that block (partial or whole). Disjoint ranges never wait
 * for each other. A range is taken whole, at once, so there is no lock order to
 * get wrong.
 *
 * Ranges are exclusive (writers) or shared (readers: a READ holds its blocks
 * while it reads them, so it sees every write acknowledged before it arrived,
 * including write-back writes not yet on the disk); shared ranges conflict
 * only with exclusive ones.
 *
 * Two ways to wait: range_lock_acquire() blocks the thread (the synchronous
 * volume_* calls); range_lock_acquire_async() never blocks and calls back when
 * the range is granted, for the io_uring threads, which must keep reaping
 * completions (the holder's among them) while a request waits. Waiters are
 * granted in arrival order: a range is not handed out past an earlier waiter
 * that overlaps it, so two writes of one block land in the order they came.
 * Held and waiting lists stay as short as the writes in flight, so a linear
 * scan under one mutex is cheaper than any tree.
 */
#ifndef RDFS_IOS_RANGE_LOCK_H
#define RDFS_IOS_RANGE_LOCK_H

#include <pthread.h>
#include <stdint.h>

struct range_lock_entry {
	uint64_t first;			/* blocks [first, end) */
	uint64_t end;
	int shared;
	struct range_lock_entry *next;	/* on the held or the waiting list */
	struct range_lock_entry *grant_next;	/* release(): grants to call back */
	void (*granted)(void *arg);	/* async waiters only */
	void *arg;
};

struct range_lock {
	pthread_mutex_t mutex;
	pthread_cond_t released;
	struct range_lock_entry *held;
	struct range_lock_entry *waiting, *waiting_tail;	/* async, FIFO */
};

int range_lock_init(struct range_lock *rl);
void range_lock_destroy(struct range_lock *rl);

/* Wait until no held range overlaps [first, end), then hold it in @e (caller's storage). */
void range_lock_acquire(struct range_lock *rl, struct range_lock_entry *e, uint64_t first,
			uint64_t end);
/*
 * Hold [first, end) in @e (@shared: alongside other shared holders) now and
 * return 1, or queue @e and return 0: then @granted(@arg) runs once the range
 * is held, on the thread that released the last conflicting range (outside the
 * lock's mutex). Either way @e is in line from now on: a range asked for
 * later that conflicts with it comes after it.
 */
int range_lock_acquire_async(struct range_lock *rl, struct range_lock_entry *e,
			     uint64_t first, uint64_t end, int shared,
			     void (*granted)(void *arg), void *arg);
void range_lock_release(struct range_lock *rl, struct range_lock_entry *e);

#endif
