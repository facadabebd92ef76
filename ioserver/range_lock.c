// SPDX-License-Identifier: MIT
/*
 * range_lock.c - exclusive block-range locks (see range_lock.h).
 */
#include <errno.h>

#include "range_lock.h"

int range_lock_init(struct range_lock *rl)
{
	int ret = pthread_mutex_init(&rl->mutex, NULL);

	if (ret)
		return -ret;
	ret = pthread_cond_init(&rl->released, NULL);
	if (ret) {
		pthread_mutex_destroy(&rl->mutex);
		return -ret;
	}
	rl->held = NULL;
	return 0;
}

void range_lock_destroy(struct range_lock *rl)
{
	pthread_cond_destroy(&rl->released);
	pthread_mutex_destroy(&rl->mutex);
}

static int range_lock_overlaps(const struct range_lock *rl, uint64_t first, uint64_t end)
{
	const struct range_lock_entry *e;

	for (e = rl->held; e; e = e->next)
		if (e->first < end && first < e->end)
			return 1;
	return 0;
}

void range_lock_acquire(struct range_lock *rl, struct range_lock_entry *e, uint64_t first,
			uint64_t end)
{
	pthread_mutex_lock(&rl->mutex);
	while (range_lock_overlaps(rl, first, end))
		pthread_cond_wait(&rl->released, &rl->mutex);
	e->first = first;
	e->end = end;
	e->next = rl->held;
	rl->held = e;
	pthread_mutex_unlock(&rl->mutex);
}

void range_lock_release(struct range_lock *rl, struct range_lock_entry *e)
{
	struct range_lock_entry **pp;

	pthread_mutex_lock(&rl->mutex);
	for (pp = &rl->held; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	/* Waiters may want any part of the freed range; let each re-check. */
	pthread_cond_broadcast(&rl->released);
	pthread_mutex_unlock(&rl->mutex);
}
