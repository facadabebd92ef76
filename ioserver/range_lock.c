// SPDX-License-Identifier: MIT
/*
 * range_lock.c - exclusive block-range locks (see range_lock.h).
 */
#include <errno.h>
#include <stddef.h>

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
	rl->waiting = rl->waiting_tail = NULL;
	return 0;
}

void range_lock_destroy(struct range_lock *rl)
{
	pthread_cond_destroy(&rl->released);
	pthread_mutex_destroy(&rl->mutex);
}

/* Does any entry of @list before @stop conflict with [first, end) (@shared)? */
static int list_overlaps(const struct range_lock_entry *list, const struct range_lock_entry *stop,
			 uint64_t first, uint64_t end, int shared)
{
	const struct range_lock_entry *e;

	for (e = list; e && e != stop; e = e->next)
		if (e->first < end && first < e->end && !(shared && e->shared))
			return 1;
	return 0;
}

static int range_busy(const struct range_lock *rl, uint64_t first, uint64_t end, int shared)
{
	return list_overlaps(rl->held, NULL, first, end, shared) ||
	       list_overlaps(rl->waiting, NULL, first, end, shared);
}

static void hold(struct range_lock *rl, struct range_lock_entry *e, uint64_t first, uint64_t end)
{
	e->first = first;
	e->end = end;
	e->next = rl->held;
	rl->held = e;
}

void range_lock_acquire(struct range_lock *rl, struct range_lock_entry *e, uint64_t first,
			uint64_t end)
{
	pthread_mutex_lock(&rl->mutex);
	while (range_busy(rl, first, end, 0))
		pthread_cond_wait(&rl->released, &rl->mutex);
	e->granted = NULL;
	e->shared = 0;
	hold(rl, e, first, end);
	pthread_mutex_unlock(&rl->mutex);
}

int range_lock_acquire_async(struct range_lock *rl, struct range_lock_entry *e,
			     uint64_t first, uint64_t end, int shared,
			     void (*granted)(void *arg), void *arg)
{
	int now;

	e->granted = granted;
	e->arg = arg;
	e->shared = shared;
	pthread_mutex_lock(&rl->mutex);
	now = !range_busy(rl, first, end, shared);
	if (now) {
		hold(rl, e, first, end);
	} else {
		e->first = first;
		e->end = end;
		e->next = NULL;
		if (rl->waiting_tail)
			rl->waiting_tail->next = e;
		else
			rl->waiting = e;
		rl->waiting_tail = e;
	}
	pthread_mutex_unlock(&rl->mutex);
	return now;
}

void range_lock_release(struct range_lock *rl, struct range_lock_entry *e)
{
	struct range_lock_entry **pp, *w, *prev = NULL, *next, *grants = NULL;

	pthread_mutex_lock(&rl->mutex);
	for (pp = &rl->held; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	/* Grant, in order, every waiter that conflicts with nothing held or before it. */
	for (w = rl->waiting; w; w = next) {
		next = w->next;
		if (list_overlaps(rl->held, NULL, w->first, w->end, w->shared) ||
		    list_overlaps(rl->waiting, w, w->first, w->end, w->shared)) {
			prev = w;
			continue;
		}
		if (prev)
			prev->next = next;
		else
			rl->waiting = next;
		if (rl->waiting_tail == w)
			rl->waiting_tail = prev;
		hold(rl, w, w->first, w->end);
		w->grant_next = grants;
		grants = w;
	}
	/* Waiters may want any part of the freed range; let each re-check. */
	pthread_cond_broadcast(&rl->released);
	pthread_mutex_unlock(&rl->mutex);
	/* The callbacks may release or take ranges themselves. */
	while ((w = grants)) {
		grants = w->grant_next;
		w->granted(w->arg);
	}
}
