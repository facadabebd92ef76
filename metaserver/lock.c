// SPDX-License-Identifier: MIT
/*
 * lock.c - the striped inode lock table. An operation collects the inodes it
 * touches into a lock set and locks their stripes in ascending stripe order, so
 * two operations never wait on each other in a cycle (see ms.h).
 */
#include "ms_int.h"

void locks_init(struct ms_locks *l)
{
	for (int i = 0; i < MS_LOCK_STRIPES; i++)
		pthread_mutex_init(&l->stripe[i], NULL);
}

void locks_destroy(struct ms_locks *l)
{
	for (int i = 0; i < MS_LOCK_STRIPES; i++)
		pthread_mutex_destroy(&l->stripe[i]);
}

void lockset_init(struct ms_lockset *ls)
{
	ls->n = 0;
	ls->held = 0;
}

static unsigned int stripe_of(uint64_t ino)
{
	/* Fibonacci hashing: consecutive inode numbers land on distant stripes. */
	return (unsigned int)((ino * 0x9e3779b97f4a7c15ull) >> 54) & (MS_LOCK_STRIPES - 1);
}

void lockset_add(struct ms_lockset *ls, uint64_t ino)
{
	unsigned int s = stripe_of(ino);
	int i;

	if (ino == 0)
		return;
	for (i = 0; i < ls->n; i++)
		if (ls->idx[i] == s)
			return;
	if (ls->n == MS_LOCKSET_MAX)
		return;
	/* keep sorted: insertion */
	i = ls->n++;
	while (i > 0 && ls->idx[i - 1] > s) {
		ls->idx[i] = ls->idx[i - 1];
		i--;
	}
	ls->idx[i] = s;
}

void lockset_lock(struct ms_locks *l, struct ms_lockset *ls)
{
	for (int i = 0; i < ls->n; i++)
		pthread_mutex_lock(&l->stripe[ls->idx[i]]);
	ls->held = 1;
}

void lockset_unlock(struct ms_locks *l, struct ms_lockset *ls)
{
	if (!ls->held)
		return;
	for (int i = ls->n - 1; i >= 0; i--)
		pthread_mutex_unlock(&l->stripe[ls->idx[i]]);
	ls->held = 0;
}
