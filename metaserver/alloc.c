// SPDX-License-Identifier: MIT
/*
 * alloc.c - the block allocator: one in-memory bitmap per registered I/O server.
 *
 * The bitmaps are never persisted: the layout records are the truth, and
 * startup rebuilds the maps from them (layout_rebuild_bitmaps). A caller marks
 * blocks here before its write batch and frees them again if the batch fails;
 * blocks a batch releases are freed only once that batch is durable, so a block
 * is never handed out while a durable record still points at it.
 *
 * Each map also keeps the server's high-water marks (high_water.c): a block
 * taken below `high` may hold a freed file's data, so the allocation functions
 * report how much of a run lies below it, and raise it, under the same mutex
 * that hands the run out.
 *
 * One short mutex guards all maps; nothing does I/O under it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ms_int.h"

static int bit_test(const uint64_t *w, uint64_t b)
{
	return (w[b >> 6] >> (b & 63)) & 1;
}

static void bit_set(uint64_t *w, uint64_t b)
{
	w[b >> 6] |= 1ull << (b & 63);
}

static void bit_clear(uint64_t *w, uint64_t b)
{
	w[b >> 6] &= ~(1ull << (b & 63));
}

static uint64_t nwords(uint64_t blocks)
{
	return (blocks + 63) / 64;
}

void alloc_init(struct ms_alloc *a)
{
	pthread_mutex_init(&a->mu, NULL);
	a->n = 0;
	a->vols = NULL;
}

void alloc_destroy(struct ms_alloc *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->vols[i].bits);
	free(a->vols);
	pthread_mutex_destroy(&a->mu);
}

static struct ms_volume *vol_find(struct ms_alloc *a, uint32_t id)
{
	for (int i = 0; i < a->n; i++)
		if (a->vols[i].id == id)
			return &a->vols[i];
	return NULL;
}

int alloc_set_capacity(struct ms_alloc *a, uint32_t id, uint64_t capacity)
{
	struct ms_volume *v;
	int ret = 0;

	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (!v) {
		struct ms_volume *nv = realloc(a->vols, (a->n + 1) * sizeof(*nv));

		if (!nv) {
			ret = -ENOMEM;
			goto out;
		}
		a->vols = nv;
		v = &a->vols[a->n++];
		memset(v, 0, sizeof(*v));
		v->id = id;
	}
	if (v->capacity != capacity || !v->bits) {
		uint64_t *bits = calloc(nwords(capacity) ? nwords(capacity) : 1, sizeof(uint64_t));

		if (!bits) {
			ret = -ENOMEM;
			goto out;
		}
		/* Blocks in use beyond a shrunk capacity stay referenced; they are simply not counted. */
		v->used = 0;
		if (v->bits) {
			uint64_t keep = v->capacity < capacity ? v->capacity : capacity;

			for (uint64_t b = 0; b < keep; b++)
				if (bit_test(v->bits, b)) {
					bit_set(bits, b);
					v->used++;
				}
		}
		free(v->bits);
		v->bits = bits;
		v->capacity = capacity;
		if (v->hint >= capacity)
			v->hint = 0;
	}
out:
	pthread_mutex_unlock(&a->mu);
	return ret;
}

int alloc_shrink(struct ms_alloc *a, uint32_t id, uint64_t capacity)
{
	struct ms_volume *v;
	int ret = 0;

	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (!v || capacity >= v->capacity)
		goto out;
	/* a bit at a time up to a word's start, then whole words (no bit past the end is set) */
	for (uint64_t b = capacity; b < v->capacity; b += (b & 63) ? 1 : 64)
		if ((b & 63) ? bit_test(v->bits, b) : v->bits[b >> 6] != 0) {
			ret = -EBUSY;
			goto out;
		}
	/* nothing above is in use: the words past the new end stay, all clear */
	v->capacity = capacity;
	if (v->hint >= capacity)
		v->hint = 0;
out:
	pthread_mutex_unlock(&a->mu);
	return ret;
}

int alloc_mark(struct ms_alloc *a, uint32_t id, uint64_t block, uint64_t count)
{
	struct ms_volume *v;
	int ret = 0;

	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (!v) {
		ret = -ENOENT;
		goto out;
	}
	for (uint64_t b = block; b < block + count && b < v->capacity; b++) {
		if (bit_test(v->bits, b)) {
			ret = -EEXIST;
			continue;
		}
		bit_set(v->bits, b);
		v->used++;
	}
	if (count && block + count > v->high)
		v->high = block + count;
out:
	pthread_mutex_unlock(&a->mu);
	return ret;
}

/* Blocks [block, block + n) were just taken: how many lie below the mark; raise it. */
static uint64_t take_below_high(struct ms_volume *v, uint64_t block, uint64_t n)
{
	uint64_t reused = 0;

	if (n == 0)
		return 0;
	if (block < v->high)
		reused = v->high - block < n ? v->high - block : n;
	if (block + n > v->high)
		v->high = block + n;
	return reused;
}

uint64_t alloc_extend(struct ms_alloc *a, uint32_t id, uint64_t block, uint64_t want,
		      uint64_t *reused)
{
	struct ms_volume *v;
	uint64_t got = 0;

	*reused = 0;
	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (v) {
		while (got < want && block + got < v->capacity && !bit_test(v->bits, block + got)) {
			bit_set(v->bits, block + got);
			got++;
		}
		v->used += got;
		*reused = take_below_high(v, block, got);
	}
	pthread_mutex_unlock(&a->mu);
	return got;
}

/* First free block at or after @from, or capacity. Skips full words. */
static uint64_t find_free(const struct ms_volume *v, uint64_t from)
{
	uint64_t b = from;

	while (b < v->capacity) {
		if ((b & 63) == 0 && v->bits[b >> 6] == ~0ull) {
			b += 64;
			continue;
		}
		if (!bit_test(v->bits, b))
			return b;
		b++;
	}
	return v->capacity;
}

int64_t alloc_run(struct ms_alloc *a, uint32_t id, uint64_t want, uint64_t goal,
		  uint64_t *block, uint64_t *reused)
{
	struct ms_volume *v;
	uint64_t start, n = 0;
	int64_t ret;

	*reused = 0;
	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (!v || v->used >= v->capacity || want == 0) {
		ret = -ENOSPC;
		goto out;
	}
	if (goal >= v->capacity)
		goal = v->hint;
	start = find_free(v, goal);
	if (start >= v->capacity)
		start = find_free(v, 0);
	if (start >= v->capacity) {
		ret = -ENOSPC;
		goto out;
	}
	while (n < want && start + n < v->capacity && !bit_test(v->bits, start + n)) {
		bit_set(v->bits, start + n);
		n++;
	}
	v->used += n;
	v->hint = start + n < v->capacity ? start + n : 0;
	*reused = take_below_high(v, start, n);
	*block = start;
	ret = (int64_t)n;
out:
	pthread_mutex_unlock(&a->mu);
	return ret;
}

void alloc_free(struct ms_alloc *a, uint32_t id, uint64_t block, uint64_t count)
{
	struct ms_volume *v;

	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (v) {
		for (uint64_t b = block; b < block + count && b < v->capacity; b++) {
			if (bit_test(v->bits, b)) {
				bit_clear(v->bits, b);
				v->used--;
			}
		}
	}
	pthread_mutex_unlock(&a->mu);
}

int alloc_usage(struct ms_alloc *a, uint32_t id, uint64_t *capacity, uint64_t *free_blocks)
{
	struct ms_volume *v;
	int ret = 0;

	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (v) {
		*capacity = v->capacity;
		*free_blocks = v->capacity - v->used;
	} else {
		ret = -ENOENT;
	}
	pthread_mutex_unlock(&a->mu);
	return ret;
}

int alloc_ids(struct ms_alloc *a, uint32_t *ids, int max)
{
	int n;

	pthread_mutex_lock(&a->mu);
	n = a->n;
	for (int i = 0; i < n && i < max; i++)
		ids[i] = a->vols[i].id;
	pthread_mutex_unlock(&a->mu);
	return n;
}

int alloc_copy_bitmap(struct ms_alloc *a, uint32_t id, uint64_t **words, uint64_t *nblocks)
{
	struct ms_volume *v;
	int ret = 0;

	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (!v) {
		ret = -ENOENT;
		goto out;
	}
	*words = malloc((nwords(v->capacity) + 1) * sizeof(uint64_t));
	if (!*words) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(*words, v->bits, nwords(v->capacity) * sizeof(uint64_t));
	*nblocks = v->capacity;
out:
	pthread_mutex_unlock(&a->mu);
	return ret;
}

void alloc_high_water_set(struct ms_alloc *a, uint32_t id, uint64_t mark)
{
	struct ms_volume *v;

	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (v)
		v->high = v->high_durable = mark;
	pthread_mutex_unlock(&a->mu);
}

int alloc_high_water(struct ms_alloc *a, uint32_t id, uint64_t *high, uint64_t *durable)
{
	struct ms_volume *v;
	int ret = -ENOENT;

	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (v) {
		*high = v->high;
		*durable = v->high_durable;
		ret = 0;
	}
	pthread_mutex_unlock(&a->mu);
	return ret;
}

void alloc_high_water_durable(struct ms_alloc *a, uint32_t id, uint64_t mark)
{
	struct ms_volume *v;

	pthread_mutex_lock(&a->mu);
	v = vol_find(a, id);
	if (v && mark > v->high_durable)
		v->high_durable = mark;
	pthread_mutex_unlock(&a->mu);
}
