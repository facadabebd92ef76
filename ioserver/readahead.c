// SPDX-License-Identifier: MIT
/*
 * readahead.c - stream detection and the bounded read-ahead cache (see readahead.h).
 *
 * Segment life: free -> loading (in the hash) -> valid (in the hash and the
 * LRU list) -> free. Invalidation takes a segment out of the hash at once;
 * its memory goes back to the free list when no load and no ra_read() copy
 * still uses it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "log.h"
#include "readahead.h"
#include "xport.h"

#define RA_SEG_BYTES	((size_t)RA_SEG_BLOCKS * RDFS_BLOCK_SIZE)

enum seg_state { SEG_LOADING, SEG_VALID };

struct ra_seg {
	uint64_t idx;			/* blocks [idx * RA_SEG_BLOCKS, + nblocks) */
	uint32_t nblocks;
	enum seg_state state;
	bool hashed;
	int refs;			/* ra_read() copies in progress */
	struct ra_waiter *waiters;	/* loading: READs waiting for it */
	struct ra_seg *hnext;
	struct ra_seg *prev, *next;	/* LRU list (valid) or free list (next) */
	void *buf;
};

struct ra_stream {
	uint64_t end;			/* block after the stream's last READ */
	uint64_t ahead_to;		/* read ahead up to here */
	uint32_t ahead;			/* how far ahead of end to read; 0: not yet */
	uint64_t used;			/* clock of the last READ, for replacement */
	bool live;
};

struct ra_cache {
	pthread_mutex_t mutex;
	uint64_t capacity;		/* the volume's blocks */
	uint32_t segs_max, segs;	/* allocated segments, at most segs_max */
	uint32_t ahead_max;
	uint32_t hash_size;
	struct ra_seg **hash;
	struct ra_seg *lru_head, *lru_tail;	/* most, least recently used */
	struct ra_seg *free;
	struct ra_stream streams[RA_STREAMS];
	uint64_t clock;
};

int ra_create(uint64_t bytes, uint64_t capacity, struct ra_cache **out)
{
	struct ra_cache *ra;
	uint64_t segs = bytes / RA_SEG_BYTES;

	if (segs < 4 || segs > (1u << 24))
		return -EINVAL;
	ra = calloc(1, sizeof(*ra));
	if (!ra)
		return -ENOMEM;
	ra->hash_size = 1;
	while (ra->hash_size < segs)
		ra->hash_size <<= 1;
	ra->hash = calloc(ra->hash_size, sizeof(*ra->hash));
	if (!ra->hash) {
		free(ra);
		return -ENOMEM;
	}
	pthread_mutex_init(&ra->mutex, NULL);
	ra->capacity = capacity;
	ra->segs_max = (uint32_t)segs;
	ra->ahead_max = RA_MAX_BLOCKS;
	if (ra->ahead_max > segs * RA_SEG_BLOCKS / 4)
		ra->ahead_max = (uint32_t)(segs * RA_SEG_BLOCKS / 4);
	*out = ra;
	return 0;
}

static void seg_free_mem(struct ra_seg *s)
{
	xport_mem_deregister(s->buf, RA_SEG_BYTES);
	free(s->buf);
	free(s);
}

void ra_destroy(struct ra_cache *ra)
{
	struct ra_seg *s, *n;
	uint32_t i;

	if (!ra)
		return;
	for (i = 0; i < ra->hash_size; i++)
		for (s = ra->hash[i]; s; s = n) {
			n = s->hnext;
			seg_free_mem(s);
		}
	for (s = ra->free; s; s = n) {
		n = s->next;
		seg_free_mem(s);
	}
	free(ra->hash);
	pthread_mutex_destroy(&ra->mutex);
	free(ra);
}

static uint32_t hash_of(const struct ra_cache *ra, uint64_t idx)
{
	return (uint32_t)((idx * 0x9e3779b97f4a7c15ull) >> 32) & (ra->hash_size - 1);
}

static struct ra_seg *hash_find(struct ra_cache *ra, uint64_t idx)
{
	struct ra_seg *s;

	for (s = ra->hash[hash_of(ra, idx)]; s; s = s->hnext)
		if (s->idx == idx)
			return s;
	return NULL;
}

static void hash_remove(struct ra_cache *ra, struct ra_seg *s)
{
	struct ra_seg **pp = &ra->hash[hash_of(ra, s->idx)];

	while (*pp && *pp != s)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = s->hnext;
	s->hnext = NULL;
	s->hashed = false;
}

static void lru_remove(struct ra_cache *ra, struct ra_seg *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		ra->lru_head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		ra->lru_tail = s->prev;
	s->prev = s->next = NULL;
}

static void lru_push(struct ra_cache *ra, struct ra_seg *s)
{
	s->prev = NULL;
	s->next = ra->lru_head;
	if (ra->lru_head)
		ra->lru_head->prev = s;
	else
		ra->lru_tail = s;
	ra->lru_head = s;
}

/* @s is out of the hash and the LRU list and nobody uses it: recycle it. */
static void seg_recycle(struct ra_cache *ra, struct ra_seg *s)
{
	s->next = ra->free;
	ra->free = s;
}

/* A segment to load into: recycled, new, or the least recently used valid one. */
static struct ra_seg *seg_alloc(struct ra_cache *ra)
{
	struct ra_seg *s = ra->free;

	if (s) {
		ra->free = s->next;
		return s;
	}
	if (ra->segs < ra->segs_max) {
		s = calloc(1, sizeof(*s));
		if (s && posix_memalign(&s->buf, RDFS_BLOCK_SIZE, RA_SEG_BYTES)) {
			free(s);
			s = NULL;
		}
		/*
		 * Cache hits are sent from the segment itself: declared for its
		 * whole life, an RDMA connection registers it once. Undeclared it
		 * still works (registered per send).
		 */
		if (s && xport_mem_register(s->buf, RA_SEG_BYTES))
			log_debug(1200019, "readahead: segment not declared to the transport");
		if (s)
			ra->segs++;
		return s;
	}
	for (s = ra->lru_tail; s && s->refs; s = s->prev)
		;
	if (!s)
		return NULL;
	lru_remove(ra, s);
	hash_remove(ra, s);
	return s;
}

/* Segments one ra_read() may span: a whole RDFS_MAX_DATA request, unaligned. */
#define RA_READ_SEGS	(RDFS_MAX_DATA / RDFS_BLOCK_SIZE / RA_SEG_BLOCKS + 2)

/* Under the mutex: release a hold of ra_read(); a dropped segment may now be recycled. */
static void seg_unref(struct ra_cache *ra, struct ra_seg *s)
{
	if (--s->refs == 0 && !s->hashed)
		seg_recycle(ra, s);
}

int ra_hold_or_wait(struct ra_cache *ra, uint64_t first, uint64_t count, struct ra_seg **segs,
		    int max, struct ra_waiter *w)
{
	uint64_t b, end = first + count, seg_end;
	struct ra_seg *loading = NULL;
	int i, n = 0;

	if (!count)
		return -ENOENT;
	pthread_mutex_lock(&ra->mutex);
	for (b = first; b < end; b = seg_end) {
		struct ra_seg *s = hash_find(ra, b / RA_SEG_BLOCKS);

		seg_end = (b / RA_SEG_BLOCKS + 1) * RA_SEG_BLOCKS;
		if (!s || s->idx * RA_SEG_BLOCKS + s->nblocks < (end < seg_end ? end : seg_end)) {
			pthread_mutex_unlock(&ra->mutex);
			return -ENOENT;
		}
		if (s->state != SEG_VALID) {
			if (!w) {
				pthread_mutex_unlock(&ra->mutex);
				return -ENOENT;
			}
			if (!loading)
				loading = s;
			continue;
		}
		if (n == max) {
			pthread_mutex_unlock(&ra->mutex);
			return -E2BIG;
		}
		segs[n++] = s;
	}
	if (loading) {
		w->next = loading->waiters;
		loading->waiters = w;
		pthread_mutex_unlock(&ra->mutex);
		return -EINPROGRESS;
	}
	for (i = 0; i < n; i++) {
		segs[i]->refs++;
		lru_remove(ra, segs[i]);
		lru_push(ra, segs[i]);
	}
	pthread_mutex_unlock(&ra->mutex);
	return n;
}

int ra_hold(struct ra_cache *ra, uint64_t first, uint64_t count, struct ra_seg **segs, int max)
{
	return ra_hold_or_wait(ra, first, count, segs, max, NULL);
}

void ra_release(struct ra_cache *ra, struct ra_seg *const *segs, int n)
{
	int i;

	pthread_mutex_lock(&ra->mutex);
	for (i = 0; i < n; i++)
		seg_unref(ra, segs[i]);
	pthread_mutex_unlock(&ra->mutex);
}

int ra_read(struct ra_cache *ra, uint64_t first, uint64_t count, void *dst)
{
	struct ra_seg *segs[RA_READ_SEGS];
	uint64_t end = first + count, lo, hi;
	int i, n;

	if (!count)
		return 0;
	n = ra_hold(ra, first, count, segs, RA_READ_SEGS);
	if (n < 0)
		return -ENOENT;
	/* Copy without the mutex: held segments do not change. */
	for (i = 0; i < n; i++) {
		lo = segs[i]->idx * RA_SEG_BLOCKS;
		hi = lo + RA_SEG_BLOCKS;
		if (lo < first)
			lo = first;
		if (hi > end)
			hi = end;
		memcpy((uint8_t *)dst + (lo - first) * RDFS_BLOCK_SIZE,
		       (uint8_t *)segs[i]->buf + (lo - segs[i]->idx * RA_SEG_BLOCKS) * RDFS_BLOCK_SIZE,
		       (hi - lo) * RDFS_BLOCK_SIZE);
	}
	ra_release(ra, segs, n);
	return 0;
}

/* Under the mutex: the stream @first continues, or a new one replacing the stalest. */
static struct ra_stream *stream_for(struct ra_cache *ra, uint64_t first, bool *continued)
{
	struct ra_stream *best = NULL, *old = &ra->streams[0];
	uint64_t dist, best_dist = 0;
	int i;

	for (i = 0; i < RA_STREAMS; i++) {
		struct ra_stream *st = &ra->streams[i];

		if (!st->live) {
			old = st;
			continue;
		}
		dist = first > st->end ? first - st->end : st->end - first;
		if (dist <= RA_WINDOW_BLOCKS && (!best || dist < best_dist)) {
			best = st;
			best_dist = dist;
		}
		if (old->live && st->used < old->used)
			old = st;
	}
	*continued = best != NULL;
	if (best)
		return best;
	memset(old, 0, sizeof(*old));
	old->live = true;
	return old;
}

int ra_note_read(struct ra_cache *ra, uint64_t first, uint64_t count, struct ra_seg **loads,
		 int max)
{
	uint64_t end = first + count, from, to, idx;
	struct ra_stream *st;
	bool continued;
	int n = 0;

	pthread_mutex_lock(&ra->mutex);
	st = stream_for(ra, first, &continued);
	st->used = ++ra->clock;
	if (!continued) {
		st->end = end;
		st->ahead_to = end;
		pthread_mutex_unlock(&ra->mutex);
		return 0;
	}
	if (end > st->end)
		st->end = end;
	/* Each READ that continues the stream doubles how far ahead we go. */
	st->ahead = st->ahead ? st->ahead * 2 : RA_INIT_BLOCKS;
	if (st->ahead > ra->ahead_max)
		st->ahead = ra->ahead_max;
	from = st->ahead_to > st->end ? st->ahead_to : st->end;
	to = st->end + st->ahead;
	if (to > ra->capacity)
		to = ra->capacity;
	for (idx = from / RA_SEG_BLOCKS; idx * RA_SEG_BLOCKS < to && n < max; idx++) {
		struct ra_seg *s;

		if (hash_find(ra, idx))
			continue;
		s = seg_alloc(ra);
		if (!s)
			break;
		s->idx = idx;
		s->nblocks = RA_SEG_BLOCKS;
		if (idx * RA_SEG_BLOCKS + s->nblocks > ra->capacity)
			s->nblocks = (uint32_t)(ra->capacity - idx * RA_SEG_BLOCKS);
		s->state = SEG_LOADING;
		s->refs = 0;
		s->waiters = NULL;
		s->prev = s->next = NULL;
		s->hashed = true;
		s->hnext = ra->hash[hash_of(ra, idx)];
		ra->hash[hash_of(ra, idx)] = s;
		loads[n++] = s;
	}
	st->ahead_to = idx * RA_SEG_BLOCKS > from ? idx * RA_SEG_BLOCKS : from;
	pthread_mutex_unlock(&ra->mutex);
	return n;
}

void *ra_seg_buf(const struct ra_seg *s)
{
	return s->buf;
}

uint64_t ra_seg_first(const struct ra_seg *s)
{
	return s->idx * RA_SEG_BLOCKS;
}

uint32_t ra_seg_blocks(const struct ra_seg *s)
{
	return s->nblocks;
}

void ra_seg_loaded(struct ra_cache *ra, struct ra_seg *s, int err)
{
	struct ra_waiter *w, *waiters;

	pthread_mutex_lock(&ra->mutex);
	waiters = s->waiters;
	s->waiters = NULL;
	if (err && s->hashed)
		hash_remove(ra, s);
	if (!s->hashed) {
		/* failed, or invalidated while loading: its bytes may be old */
		seg_recycle(ra, s);
	} else {
		s->state = SEG_VALID;
		lru_push(ra, s);
	}
	pthread_mutex_unlock(&ra->mutex);
	/* after the unlock: a waiter asks again at once, maybe on this thread */
	while ((w = waiters)) {
		waiters = w->next;
		w->loaded(w);
	}
}

void ra_invalidate(struct ra_cache *ra, uint64_t first, uint64_t count)
{
	uint64_t idx, last;
	struct ra_seg *s;

	if (!count)
		return;
	last = (first + count - 1) / RA_SEG_BLOCKS;
	pthread_mutex_lock(&ra->mutex);
	for (idx = first / RA_SEG_BLOCKS; idx <= last; idx++) {
		s = hash_find(ra, idx);
		if (!s)
			continue;
		hash_remove(ra, s);
		if (s->state == SEG_VALID) {
			lru_remove(ra, s);
			if (!s->refs)
				seg_recycle(ra, s);
		}
		/* loading: ra_seg_loaded() recycles it */
	}
	pthread_mutex_unlock(&ra->mutex);
}
