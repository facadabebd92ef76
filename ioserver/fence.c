// SPDX-License-Identifier: MIT
/*
 * fence.c - the registration epoch and the file fences (see fence.h): a
 * chained hash under one mutex, expired entries dropped as they are met.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "fence.h"

#define FENCE_BUCKETS	4096

struct fence {
	uint64_t ino;
	uint64_t epoch;			/* of the registration whose generations it counts */
	uint32_t gen;			/* refused below this, in that epoch */
	int64_t until_ns;
	struct fence *next;
};

struct fence_table {
	_Atomic uint64_t epoch;
	/* capabilities of epochs up to lease_epoch are good until lease_until_ms */
	_Atomic uint64_t lease_epoch;
	_Atomic int64_t lease_until_ms;
	atomic_size_t count;		/* lets a check of an empty table skip the lock */
	pthread_mutex_t mu;
	struct fence *bucket[FENCE_BUCKETS];
};

int fence_table_create(struct fence_table **out)
{
	struct fence_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->mu, NULL);
	atomic_store(&t->lease_until_ms, INT64_MAX);
	*out = t;
	return 0;
}

void fence_table_destroy(struct fence_table *t)
{
	if (!t)
		return;
	for (int i = 0; i < FENCE_BUCKETS; i++)
		while (t->bucket[i]) {
			struct fence *f = t->bucket[i];

			t->bucket[i] = f->next;
			free(f);
		}
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* Raise the epoch to @epoch; never lower it. */
static void epoch_raise(struct fence_table *t, uint64_t epoch)
{
	uint64_t cur = atomic_load(&t->epoch);

	while (cur < epoch && !atomic_compare_exchange_weak(&t->epoch, &cur, epoch))
		;
}

void fence_set_epoch(struct fence_table *t, uint64_t epoch)
{
	epoch_raise(t, epoch);
}

uint64_t fence_epoch(const struct fence_table *t)
{
	return atomic_load(&((struct fence_table *)t)->epoch);
}

static struct fence **slot(struct fence_table *t, uint64_t ino)
{
	return &t->bucket[(ino * 0x9e3779b97f4a7c15ull) >> 52];
}

/* The live fence of @ino in its chain (dropping expired ones met on the way). Under mu. */
static struct fence *find_locked(struct fence_table *t, uint64_t ino, int64_t now_ns)
{
	struct fence **p = slot(t, ino), *f;

	while ((f = *p)) {
		if (f->until_ns <= now_ns) {
			*p = f->next;
			free(f);
			atomic_fetch_sub(&t->count, 1);
			continue;
		}
		if (f->ino == ino)
			return f;
		p = &f->next;
	}
	return NULL;
}

int fence_add(struct fence_table *t, uint64_t ino, uint32_t gen, uint64_t epoch,
	      int64_t until_ns, int64_t now_ns)
{
	struct fence *f;
	int ret = 0;

	pthread_mutex_lock(&t->mu);
	f = find_locked(t, ino, now_ns);
	if (f && epoch > f->epoch) {
		/* a new registration's generations: the old fence counted another series */
		f->epoch = epoch;
		f->gen = gen;
		f->until_ns = until_ns;
	} else if (f && epoch == f->epoch) {
		if (gen > f->gen)
			f->gen = gen;
		if (until_ns > f->until_ns)
			f->until_ns = until_ns;
	} else if (f) {
		/* a late fence of an older registration: its capabilities are refused anyway */
	} else if (until_ns > now_ns) {
		f = malloc(sizeof(*f));
		if (f) {
			struct fence **p = slot(t, ino);

			f->ino = ino;
			f->epoch = epoch;
			f->gen = gen;
			f->until_ns = until_ns;
			f->next = *p;
			*p = f;
			atomic_fetch_add(&t->count, 1);
		} else {
			ret = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return ret;
}

int64_t fence_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fence_set_lease(struct fence_table *t, uint64_t epoch, int64_t until_ms)
{
	/*
	 * The time first: a check that sees the new epoch with the old time
	 * would refuse a capability of the registration just made.
	 */
	atomic_store(&t->lease_until_ms, until_ms);
	atomic_store(&t->lease_epoch, epoch);
}

const char *fence_why(int err)
{
	return err == -ENOLINK ? "I/O server not registered with the metaserver: serving nothing"
			       : "capability fenced: fetch the layout again";
}

int fence_check(struct fence_table *t, uint64_t epoch, uint64_t ino, uint32_t gen,
		int64_t now_ns)
{
	struct fence *f;
	int ret = 0;

	if (epoch < atomic_load(&t->epoch))
		return -ESTALE;
	if (epoch <= atomic_load(&t->lease_epoch) &&
	    atomic_load(&t->lease_until_ms) != INT64_MAX &&
	    fence_mono_ms() > atomic_load(&t->lease_until_ms))
		return -ENOLINK;
	epoch_raise(t, epoch);
	if (atomic_load(&t->count) == 0)
		return 0;
	pthread_mutex_lock(&t->mu);
	f = find_locked(t, ino, now_ns);
	if (f && epoch == f->epoch && gen < f->gen)
		ret = -ESTALE;
	pthread_mutex_unlock(&t->mu);
	return ret;
}

size_t fence_count(struct fence_table *t)
{
	return atomic_load(&t->count);
}
