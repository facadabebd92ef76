// SPDX-License-Identifier: MIT
/*
 * high_water.c - which allocated blocks must be zeroed before a file may use
 * them, and the persisted high-water marks that tell.
 *
 * Per server, `high` is where no block was ever handed out since the volume
 * was formatted: blocks at or above it still read as the zeros of a fresh
 * (sparse) volume, blocks below it may hold a freed file's data and are zeroed
 * (through the zeroer, zero.c in the server) before an allocation that reuses
 * them is recorded. Only a volume its I/O server vouched for as pristine at
 * its first registration starts at 0; any other starts at its capacity, so
 * each of its blocks is zeroed before its first use (registry.c).
 *
 * The mark in the database must never fall behind a block any durable layout
 * has pointed at, or a restart would hand that block out unzeroed once freed.
 * So an allocation batch that reaches past the persisted mark carries the new
 * mark itself, and such batches are written one at a time under high_mu, each
 * computing its mark from the last one written: a smaller mark can never
 * overwrite a larger one. The mark is rounded up by HIGH_WATER_STEP, so a file
 * streaming onto a fresh volume raises it (and takes high_mu) once per step,
 * not once per LAYOUT; after a restart the blocks between the real high water
 * and the rounded mark are merely zeroed once more than needed. A batch that
 * raises a mark is always synced, though allocations are not otherwise
 * (ms_layout): lost in a crash of the machine, the mark would fall back below
 * blocks a client has written since.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ms_int.h"

/* 64 MiB of 4 KiB blocks. */
#define HIGH_WATER_STEP		16384ull

void ms_set_zeroer(struct ms *ms, ms_zero_fn fn, void *arg)
{
	ms->zero = fn;
	ms->zero_arg = arg;
}

int ms_high_water(struct ms *ms, uint32_t id, uint64_t *mark)
{
	uint64_t durable;

	return alloc_high_water(&ms->alloc, id, mark, &durable);
}

void high_water_put(leveldb_writebatch_t *b, uint32_t id, uint64_t mark)
{
	uint8_t k[MS_KEY_MAX], v[8];

	put_le64(v, mark);
	leveldb_writebatch_put(b, (char *)k, key_high_water(k, id), (char *)v, 8);
}

int high_water_load(struct ms *ms)
{
	for (int i = 0; i < ms->reg.n; i++) {
		struct ms_ioserver *s = &ms->reg.servers[i];
		uint8_t k[MS_KEY_MAX];
		uint64_t mark;
		size_t vl;
		char *v;
		int ret = ns_get(ms, k, key_high_water(k, s->id), &v, &vl);

		if (ret == -ENOENT) {
			leveldb_writebatch_t *b = leveldb_writebatch_create();

			/* registered before marks existed: any block may have been used */
			mark = s->capacity;
			high_water_put(b, s->id, mark);
			ret = ns_write_plain(ms, b);
			leveldb_writebatch_destroy(b);
			if (ret)
				return ret;
		} else if (ret) {
			return ret;
		} else {
			mark = vl == 8 ? get_le64((uint8_t *)v) : 0;
			leveldb_free(v);
			if (vl != 8) {
				log_error(1100013,
					  "corrupt high-water mark of I/O server %u", s->id);
				return -EIO;
			}
		}
		alloc_high_water_set(&ms->alloc, s->id, mark);
	}
	return 0;
}

int high_water_settle(struct ms *ms)
{
	for (int i = 0; i < ms->reg.n; i++) {
		uint32_t id = ms->reg.servers[i].id;
		uint64_t high, durable;
		leveldb_writebatch_t *b;
		int ret;

		if (alloc_high_water(&ms->alloc, id, &high, &durable) || high <= durable)
			continue;
		log_warn(1100014, "I/O server %u: layouts use blocks up to %llu, past the high-water mark %llu; raising it",
			 id, (unsigned long long)high, (unsigned long long)durable);
		b = leveldb_writebatch_create();
		high_water_put(b, id, high);
		ret = ns_write_plain(ms, b);
		leveldb_writebatch_destroy(b);
		if (ret)
			return ret;
		alloc_high_water_durable(&ms->alloc, id, high);
	}
	return 0;
}

struct server_end {
	uint32_t id;
	uint64_t end;			/* of the runs allocated on it */
	uint64_t mark;			/* to persist, or 0 */
};

/* The highest run end per server; returns how many servers (at most @max). */
static size_t run_ends(const struct ms_ext *runs, size_t n, struct server_end *out, size_t max)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t end = runs[i].block + runs[i].count;
		size_t j;

		for (j = 0; j < m && out[j].id != runs[i].server_id; j++)
			;
		if (j == m) {
			if (m == max)
				continue;
			out[m++] = (struct server_end){ .id = runs[i].server_id };
		}
		if (end > out[j].end)
			out[j].end = end;
	}
	return m;
}

/* Does some run reach past its server's persisted mark? */
static int needs_raise(struct ms *ms, const struct server_end *se, size_t m)
{
	for (size_t i = 0; i < m; i++) {
		uint64_t high, durable;

		if (alloc_high_water(&ms->alloc, se[i].id, &high, &durable) == 0 &&
		    se[i].end > durable)
			return 1;
	}
	return 0;
}

int high_water_write(struct ms *ms, struct ms_batch *mb, const struct ms_ext *runs, size_t n)
{
	struct server_end *se = calloc(n ? n : 1, sizeof(*se));
	size_t m;
	int ret;

	if (!se)
		return -ENOMEM;
	m = run_ends(runs, n, se, n);
	/* the persisted marks only grow, so "not past it" read unlocked stays true */
	if (!needs_raise(ms, se, m)) {
		free(se);
		return ns_write(ms, mb);
	}
	/*
	 * A raised mark is synced: lost with its allocation, it would let the
	 * blocks a client wrote meanwhile go out again unzeroed.
	 */
	mb->nosync = 0;
	pthread_mutex_lock(&ms->high_mu);
	for (size_t i = 0; i < m; i++) {
		uint64_t high, durable;

		if (alloc_high_water(&ms->alloc, se[i].id, &high, &durable) || se[i].end <= durable)
			continue;
		se[i].mark = (se[i].end + HIGH_WATER_STEP - 1) / HIGH_WATER_STEP * HIGH_WATER_STEP;
		high_water_put(mb->b, se[i].id, se[i].mark);
	}
	ret = ns_write(ms, mb);
	if (ret == 0)
		for (size_t i = 0; i < m; i++)
			if (se[i].mark)
				alloc_high_water_durable(&ms->alloc, se[i].id, se[i].mark);
	pthread_mutex_unlock(&ms->high_mu);
	free(se);
	return ret;
}

int high_water_zero(struct ms *ms, const struct ms_ext *runs, size_t n)
{
	struct ms_zero_range *r;
	size_t m = 0;
	int ret;

	if (!ms->zero || n == 0)
		return 0;
	r = calloc(n, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct ms_zero_range *p = m ? &r[m - 1] : NULL;

		/* runs of neighbouring chunks often continue each other on disk */
		if (p && p->server_id == runs[i].server_id &&
		    p->block + p->count == runs[i].block &&
		    p->count + runs[i].count <= UINT32_MAX) {
			p->count += runs[i].count;
			continue;
		}
		r[m++] = (struct ms_zero_range){ .server_id = runs[i].server_id,
						 .block = runs[i].block, .count = runs[i].count };
	}
	ret = ms->zero(ms->zero_arg, r, m);
	free(r);
	return ret ? -EIO : 0;
}
