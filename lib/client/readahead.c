// SPDX-License-Identifier: MIT
/*
 * readahead.c - client read-ahead for rdfs_pread(): when an open file is read
 * sequentially (a read starts where the last one ended), the next window of
 * the file is requested from the I/O servers in chunk-sized units before it is
 * asked for, so the reader finds it in memory (as SuperNBD's server does
 * across clients, here within one client, and what the kernel does for FUSE).
 *
 * A unit keeps the buffers its READ replies were received in and a hit copies
 * out of them: the same one copy as a read without read-ahead. The units are
 * per open file and bounded (opts.readahead_kb). Every change this client makes
 * to the file's bytes bumps the inode's data_gen, and a unit read under an
 * older one is thrown away unread, so a read never returns bytes older than
 * a write made through this client. A random read drops the window.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

#define RA_DEFAULT_KB		8192
#define RA_MAX_UNITS		64

struct ra_unit {
	struct read_plan plan;		/* iov mode: holds the replies */
	uint64_t gen;			/* in->data_gen when it was sent */
	int ended;
	int status;
};

struct readahead {
	uint64_t next;			/* where a sequential read starts */
	struct ra_unit *q[RA_MAX_UNITS];	/* contiguous, in file order */
	int head;
	int count;
};

static uint64_t ra_window(const struct rdfs_client *c)
{
	int kb = c->opts.readahead_kb ? c->opts.readahead_kb : RA_DEFAULT_KB;

	return kb < 0 ? 0 : (uint64_t)kb << 10;
}

static uint64_t data_gen(struct rdfs_inode *in)
{
	return __atomic_load_n(&in->data_gen, __ATOMIC_ACQUIRE);
}

static void unit_free(struct ra_unit *u)
{
	read_plan_reset(&u->plan);
	free(u);
}

static void ra_pop(struct readahead *ra)
{
	unit_free(ra->q[ra->head]);
	ra->head = (ra->head + 1) % RA_MAX_UNITS;
	ra->count--;
}

static void ra_clear(struct readahead *ra)
{
	while (ra->count)
		ra_pop(ra);
}

size_t readahead_serve(struct rdfs_file *f, void *buf, size_t size, uint64_t off, uint64_t fsize)
{
	struct readahead *ra;
	size_t done = 0;

	pthread_mutex_lock(&f->ra_lock);
	ra = f->ra;
	if (!ra || !ra->count)
		goto out;
	/* units wholly behind the read are done with */
	while (ra->count) {
		struct ra_unit *u = ra->q[ra->head];

		if (u->plan.off + u->plan.size > off)
			break;
		ra_pop(ra);
	}
	while (ra->count && done < size) {
		struct ra_unit *u = ra->q[ra->head];
		uint64_t pos = off + done;
		uint64_t end = u->plan.off + u->plan.size;
		size_t n;

		if (pos < u->plan.off || pos >= end) {
			/* not where the window is: a jump */
			ra_clear(ra);
			break;
		}
		if (!u->ended) {
			u->status = read_plan_end(&u->plan);
			u->ended = 1;
		}
		if (u->status || u->gen != data_gen(f->in) || end > fsize) {
			/* failed (the caller reads it itself), stale or past a new EOF */
			ra_clear(ra);
			break;
		}
		n = end - pos < size - done ? end - pos : size - done;
		read_plan_copy(&u->plan, pos - u->plan.off, (uint8_t *)buf + done, n);
		done += n;
		if (pos + n == end)
			ra_pop(ra);
	}
out:
	pthread_mutex_unlock(&f->ra_lock);
	if (done)
		__atomic_add_fetch(&f->c->stats.readahead_hit_bytes, done, __ATOMIC_RELAXED);
	return done;
}

/* Send the READs of [off, off + len) as one unit. */
static int ra_send(struct rdfs_file *f, struct readahead *ra, uint64_t off, uint64_t len,
		   uint64_t fsize)
{
	struct ra_unit *u = calloc(1, sizeof(*u));
	int ret;

	if (!u)
		return -ENOMEM;
	u->gen = data_gen(f->in);
	u->plan.off = off;
	ret = read_plan_start(f, &u->plan, len, fsize);
	if (ret) {
		unit_free(u);
		return ret;
	}
	ra->q[(ra->head + ra->count) % RA_MAX_UNITS] = u;
	ra->count++;
	__atomic_add_fetch(&f->c->stats.readahead_bytes, len, __ATOMIC_RELAXED);
	return 0;
}

void readahead_next(struct rdfs_file *f, uint64_t off, size_t size, uint64_t fsize)
{
	uint64_t window = ra_window(f->c), unit, from, to;
	struct readahead *ra;
	int sequential;

	if (!window)
		return;
	pthread_mutex_lock(&f->ra_lock);
	ra = f->ra;
	if (!ra) {
		ra = calloc(1, sizeof(*ra));
		if (!ra)
			goto out;
		f->ra = ra;
		ra->next = UINT64_MAX;
	}
	sequential = off == ra->next;
	ra->next = off + size;
	if (!sequential) {
		ra_clear(ra);
		goto out;
	}
	/* units of a chunk (one I/O server), or of the reader's size if larger */
	pthread_mutex_lock(&f->in->lock);
	unit = f->in->chunk_size ? f->in->chunk_size : (1u << 20);
	pthread_mutex_unlock(&f->in->lock);
	while (unit < size && unit < RDFS_IO_MAX)
		unit *= 2;
	if (window < 2 * size)
		window = 2 * size;
	from = off + size;
	if (ra->count) {
		struct ra_unit *last = ra->q[(ra->head + ra->count - 1) % RA_MAX_UNITS];

		if (last->plan.off + last->plan.size > from)
			from = last->plan.off + last->plan.size;
	}
	/* whole units only (the window ends up to one unit further), but for the last */
	to = off + size + window < fsize ? off + size + window : fsize;
	while (from < to && ra->count < RA_MAX_UNITS) {
		uint64_t end = (from / unit + 1) * unit;

		if (end > fsize)
			end = fsize;
		if (ra_send(f, ra, from, end - from, fsize))
			break;
		from = end;
	}
out:
	pthread_mutex_unlock(&f->ra_lock);
}

void readahead_drop(struct rdfs_file *f)
{
	pthread_mutex_lock(&f->ra_lock);
	if (f->ra) {
		ra_clear(f->ra);
		free(f->ra);
		f->ra = NULL;
	}
	pthread_mutex_unlock(&f->ra_lock);
}
