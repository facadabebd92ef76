// SPDX-License-Identifier: MIT
/*
 * lock.c - the striped lock table. Stripes are reader/writer locks keyed by
 * inode number or by (directory, name). An operation collects what it touches
 * into a lock set - each stripe once, in the strongest mode asked for - and
 * locks the stripes in ascending order, so two operations never wait on each
 * other in a cycle (see ms.h).
 *
 * Why shared mode: creating or removing a non-directory changes only the
 * parent's times, so such operations hold the parent shared and the entry's
 * name exclusive. Many creates in one directory then run - and sync - at once,
 * which is what lets LevelDB merge their writes into one fsync. Everything
 * that changes more of a directory (mkdir/rmdir: nlink; rename; setattr;
 * rmdir of the directory itself) holds it exclusive.
 *
 * The stripes prefer writers, so a stream of creates cannot starve a chmod.
 */
#include <string.h>

#include "ms_int.h"

void locks_init(struct ms_locks *l)
{
	pthread_rwlockattr_t attr;

	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (int i = 0; i < MS_LOCK_STRIPES; i++)
		pthread_rwlock_init(&l->stripe[i], &attr);
	pthread_rwlockattr_destroy(&attr);
}

void locks_destroy(struct ms_locks *l)
{
	for (int i = 0; i < MS_LOCK_STRIPES; i++)
		pthread_rwlock_destroy(&l->stripe[i]);
}

void lockset_init(struct ms_lockset *ls)
{
	ls->n = 0;
	ls->held = 0;
}

static unsigned int stripe_of(uint64_t key)
{
	/* Fibonacci hashing: consecutive inode numbers land on distant stripes. */
	return (unsigned int)((key * 0x9e3779b97f4a7c15ull) >> 54) & (MS_LOCK_STRIPES - 1);
}

static void lockset_add_stripe(struct ms_lockset *ls, unsigned int s, int exclusive)
{
	int i;

	for (i = 0; i < ls->n; i++)
		if (ls->idx[i] == s) {
			ls->excl[i] |= exclusive;
			return;
		}
	if (ls->n == MS_LOCKSET_MAX)
		return;
	/* keep sorted: insertion */
	i = ls->n++;
	while (i > 0 && ls->idx[i - 1] > s) {
		ls->idx[i] = ls->idx[i - 1];
		ls->excl[i] = ls->excl[i - 1];
		i--;
	}
	ls->idx[i] = s;
	ls->excl[i] = exclusive;
}

void lockset_add(struct ms_lockset *ls, uint64_t ino)
{
	if (ino)
		lockset_add_stripe(ls, stripe_of(ino), 1);
}

void lockset_add_shared(struct ms_lockset *ls, uint64_t ino)
{
	if (ino)
		lockset_add_stripe(ls, stripe_of(ino), 0);
}

void lockset_add_name(struct ms_lockset *ls, uint64_t parent, const char *name)
{
	/* FNV-1a over the name, seeded with the directory */
	uint64_t h = 0xcbf29ce484222325ull ^ parent;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	lockset_add_stripe(ls, stripe_of(h), 1);
}

void lockset_lock(struct ms_locks *l, struct ms_lockset *ls)
{
	for (int i = 0; i < ls->n; i++) {
		if (ls->excl[i])
			pthread_rwlock_wrlock(&l->stripe[ls->idx[i]]);
		else
			pthread_rwlock_rdlock(&l->stripe[ls->idx[i]]);
	}
	ls->held = 1;
}

void lockset_unlock(struct ms_locks *l, struct ms_lockset *ls)
{
	if (!ls->held)
		return;
	for (int i = ls->n - 1; i >= 0; i--)
		pthread_rwlock_unlock(&l->stripe[ls->idx[i]]);
	ls->held = 0;
}
