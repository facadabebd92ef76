/* SPDX-License-Identifier: MIT */
/*
 * range_lock.h - exclusive locks on block ranges of a volume.
 *
 * A writer holds the range of blocks it touches while it reads, modifies and
 * writes them, so a read-modify-write of a partial block is serialized against
 * every other write of that block (partial or whole). Disjoint ranges never wait
 * for each other. A range is taken whole, at once, so there is no lock order to
 * get wrong. Only I/O threads hold ranges, so the held list stays as short as
 * the thread pool, and a linear scan under one mutex is cheaper than any tree.
 */
#ifndef RDFS_IOS_RANGE_LOCK_H
#define RDFS_IOS_RANGE_LOCK_H

#include <pthread.h>
#include <stdint.h>

struct range_lock_entry {
	uint64_t first;			/* blocks [first, end) */
	uint64_t end;
	struct range_lock_entry *next;
};

struct range_lock {
	pthread_mutex_t mutex;
	pthread_cond_t released;
	struct range_lock_entry *held;
};

int range_lock_init(struct range_lock *rl);
void range_lock_destroy(struct range_lock *rl);

/* Wait until no held range overlaps [first, end), then hold it in @e (caller's storage). */
void range_lock_acquire(struct range_lock *rl, struct range_lock_entry *e, uint64_t first,
			uint64_t end);
void range_lock_release(struct range_lock *rl, struct range_lock_entry *e);

#endif
