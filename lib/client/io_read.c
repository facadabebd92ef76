// SPDX-License-Identifier: MIT
/*
 * io_read.c - the read path: clamp to the size this client knows, split the
 * range by extents, zero-fill holes and blocks nobody has written yet, and
 * READ the rest from every server at once (io_batch.c).
 *
 * Copies: the transport receives each READ reply's data into its own buffer
 * and io_batch copies it once into the caller's buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"

struct io_reqs {
	struct io_req *r;
	size_t n;
	size_t cap;
};

static struct io_req *io_reqs_add(struct io_reqs *q)
{
	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 16;
		struct io_req *r = realloc(q->r, cap * sizeof(*r));

		if (!r)
			return NULL;
		q->r = r;
		q->cap = cap;
	}
	memset(&q->r[q->n], 0, sizeof(q->r[0]));
	return &q->r[q->n++];
}

/* READs for bytes [a, b) of extent @s, at most RDFS_IO_MAX bytes each. */
static int read_plan_extent(struct io_reqs *q, const struct layout_seg *s, uint64_t a, uint64_t b,
			    uint8_t *dst)
{
	while (a < b) {
		uint64_t piece_end = (a / RDFS_IO_MAX + 1) * RDFS_IO_MAX;
		uint64_t e = piece_end < b ? piece_end : b;
		struct io_req *r = io_reqs_add(q);

		if (!r)
			return -ENOMEM;
		r->seg = s;
		r->first_block = s->block + (BLK_DOWN(a) - s->start);
		r->head = a % BLK;
		r->length = e - a;
		r->block_count = BLK_UP(r->head + r->length);
		r->buf = dst;
		dst += e - a;
		a = e;
	}
	return 0;
}

/* One attempt at reading [off, off + size), all inside the file. */
static int read_range(struct rdfs_file *f, uint8_t *buf, size_t size, uint64_t off,
		      uint64_t fsize)
{
	struct rdfs_inode *in = f->in;
	struct layout_seg *segs = NULL;
	struct io_reqs q = { 0 };
	uint64_t bstart = BLK_DOWN(off), bend = BLK_UP(off + size);
	uint64_t fetch_end = bstart + RDFS_LAYOUT_READAHEAD / BLK;
	int n, i, ret = 0;

	if (fetch_end > BLK_UP(fsize))
		fetch_end = BLK_UP(fsize);
	n = layout_get(f->c, in, f, NULL, bstart, bend, fetch_end, 0, &segs);
	if (n < 0)
		return n;

	pthread_mutex_lock(&in->lock);
	for (i = 0; i < n && ret == 0; i++) {
		const struct layout_seg *s = &segs[i];
		uint64_t a = s->start * BLK > off ? s->start * BLK : off;
		uint64_t b = s->end * BLK < off + size ? s->end * BLK : off + size;
		uint64_t blk = BLK_DOWN(a);
		struct range w;

		if (a >= b)
			continue;
		if (s->hole) {
			memset(buf + (a - off), 0, b - a);
			continue;
		}
		if (!s->unwritten) {
			ret = read_plan_extent(&q, s, a, b, buf + (a - off));
			continue;
		}
		/* unwritten: only the blocks this client wrote hold data (for us) */
		while (a < b && ret == 0) {
			uint64_t wa, wb;
			int have = range_set_next(&in->uncommitted, blk, BLK_UP(b), &w);
			struct range w2;

			if (range_set_next(&in->committed, blk, BLK_UP(b), &w2) &&
			    (!have || w2.start < w.start)) {
				w = w2;
				have = 1;
			}
			if (!have) {
				memset(buf + (a - off), 0, b - a);
				break;
			}
			/* extend the run through blocks in either set */
			while (inode_block_written_here(in, w.end, w.end + 1) && w.end < BLK_UP(b))
				w.end++;
			wa = w.start * BLK > a ? w.start * BLK : a;
			wb = w.end * BLK < b ? w.end * BLK : b;
			if (wa > a)
				memset(buf + (a - off), 0, wa - a);
			ret = read_plan_extent(&q, s, wa, wb, buf + (wa - off));
			a = wb;
			blk = w.end;
		}
	}
	pthread_mutex_unlock(&in->lock);

	if (ret == 0 && q.n)
		ret = io_batch_run(f->c, RDFS_OP_READ, q.r, q.n);
	free(q.r);
	layout_segs_put(segs, n);
	return ret;
}

ssize_t rdfs_pread(struct rdfs_file *f, void *buf, size_t size, off_t off)
{
	struct rdfs_inode *in = f->in;
	uint64_t fsize;
	int ret, attempt;

	if (off < 0)
		return -EINVAL;
	if ((f->flags & O_ACCMODE) == O_WRONLY)
		return -EBADF;
	pthread_mutex_lock(&in->lock);
	fsize = inode_size(in);
	pthread_mutex_unlock(&in->lock);
	if ((uint64_t)off >= fsize || size == 0)
		return 0;
	if (size > fsize - off)
		size = fsize - off;
	if (size > (1u << 30))
		size = 1u << 30;

	for (attempt = 0; attempt < 2; attempt++) {
		ret = read_range(f, buf, size, off, fsize);
		if (ret == -EIO) {
			/* a restarted server may be elsewhere: the next call asks again */
			pthread_mutex_lock(&in->lock);
			layout_cache_forget(&in->layout, BLK_DOWN(off), BLK_UP(off + size));
			pthread_mutex_unlock(&in->lock);
		}
		if (!io_cap_error(ret))
			break;
		/* refused capability (expired, or blocks moved): ask again */
		pthread_mutex_lock(&in->lock);
		layout_cache_forget(&in->layout, BLK_DOWN(off), BLK_UP(off + size));
		pthread_mutex_unlock(&in->lock);
	}
	if (io_cap_error(ret))
		ret = -EIO;
	return ret ? ret : (ssize_t)size;
}
