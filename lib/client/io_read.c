// SPDX-License-Identifier: MIT
/*
 * io_read.c - the read path: clamp to the size this client knows, split the
 * range by extents, zero-fill holes and blocks nobody has written yet, and
 * READ the rest from every server at once (io_batch.c).
 *
 * Copies: the transport receives each READ reply's data into a buffer of its
 * own; rdfs_pread() copies it once into the caller's buffer, rdfs_pread_iov()
 * hands out the received buffers themselves (no copy).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"

/* One piece of the result, in file order: READ reply data or zeros. */
struct read_piece {
	long req;			/* index into the requests, -1 for zeros */
	uint64_t len;
};

/* One attempt's plan: the READs, and (without a caller buffer) the pieces. */
struct read_plan {
	uint8_t *buf;			/* copy mode: the caller's buffer, else NULL */
	uint64_t off;
	struct io_req *r;
	size_t n;
	size_t cap;
	struct read_piece *p;
	size_t np;
	size_t pcap;
	uint64_t max_zeros;		/* longest run of zeros (iov mode) */
};

struct rdfs_read_buf {
	struct io_req *r;		/* holding their replies */
	size_t n;
	void *zeros;
	struct iovec *iov;
};

static int plan_piece(struct read_plan *pl, long req, uint64_t len)
{
	if (pl->np && req < 0 && pl->p[pl->np - 1].req < 0) {
		pl->p[pl->np - 1].len += len;
		len = pl->p[pl->np - 1].len;
	} else {
		if (pl->np == pl->pcap) {
			size_t cap = pl->pcap ? pl->pcap * 2 : 16;
			struct read_piece *p = realloc(pl->p, cap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			pl->p = p;
			pl->pcap = cap;
		}
		pl->p[pl->np].req = req;
		pl->p[pl->np++].len = len;
	}
	if (req < 0 && len > pl->max_zeros)
		pl->max_zeros = len;
	return 0;
}

/* Bytes [a, b) of the file read as zeros. */
static int plan_zeros(struct read_plan *pl, uint64_t a, uint64_t b)
{
	if (a >= b)
		return 0;
	if (pl->buf) {
		memset(pl->buf + (a - pl->off), 0, b - a);
		return 0;
	}
	return plan_piece(pl, -1, b - a);
}

/* READs for bytes [a, b) of extent @s, at most RDFS_IO_MAX bytes each. */
static int plan_extent(struct read_plan *pl, const struct layout_seg *s, uint64_t a, uint64_t b)
{
	while (a < b) {
		uint64_t piece_end = (a / RDFS_IO_MAX + 1) * RDFS_IO_MAX;
		uint64_t e = piece_end < b ? piece_end : b;
		struct io_req *r;

		if (pl->n == pl->cap) {
			size_t cap = pl->cap ? pl->cap * 2 : 16;

			r = realloc(pl->r, cap * sizeof(*r));
			if (!r)
				return -ENOMEM;
			pl->r = r;
			pl->cap = cap;
		}
		r = &pl->r[pl->n];
		memset(r, 0, sizeof(*r));
		r->seg = s;
		r->first_block = s->block + (BLK_DOWN(a) - s->start);
		r->head = a % BLK;
		r->length = e - a;
		r->block_count = BLK_UP(r->head + r->length);
		if (pl->buf)
			r->buf = pl->buf + (a - pl->off);
		else if (plan_piece(pl, (long)pl->n, e - a))
			return -ENOMEM;
		pl->n++;
		a = e;
	}
	return 0;
}

/* Bytes [a, b) of unwritten extent @s: only blocks this client wrote hold data (for us). */
static int plan_unwritten(struct read_plan *pl, struct rdfs_inode *in, const struct layout_seg *s,
			  uint64_t a, uint64_t b)
{
	uint64_t blk = BLK_DOWN(a);
	int ret = 0;

	while (a < b && ret == 0) {
		struct range w, w2;
		uint64_t wa, wb;
		int have = range_set_next(&in->uncommitted, blk, BLK_UP(b), &w);

		if (range_set_next(&in->committed, blk, BLK_UP(b), &w2) &&
		    (!have || w2.start < w.start)) {
			w = w2;
			have = 1;
		}
		if (!have)
			return plan_zeros(pl, a, b);
		/* extend the run through blocks in either set */
		while (w.end < BLK_UP(b) && inode_block_written_here(in, w.end, w.end + 1))
			w.end++;
		wa = w.start * BLK > a ? w.start * BLK : a;
		wb = w.end * BLK < b ? w.end * BLK : b;
		ret = plan_zeros(pl, a, wa);
		if (ret == 0)
			ret = plan_extent(pl, s, wa, wb);
		a = wb;
		blk = w.end;
	}
	return ret;
}

/*
 * One attempt at reading [off, off + size), all inside the file. The segments
 * stay referenced in *@segs_out (the requests point into them).
 */
static int read_range(struct rdfs_file *f, struct read_plan *pl, size_t size, uint64_t fsize,
		      struct layout_seg **segs_out, int *nsegs)
{
	struct rdfs_inode *in = f->in;
	struct layout_seg *segs = NULL;
	uint64_t off = pl->off;
	uint64_t bstart = BLK_DOWN(off), bend = BLK_UP(off + size);
	uint64_t fetch_end = bstart + RDFS_LAYOUT_READAHEAD / BLK;
	int n, i, ret = 0;

	if (fetch_end > BLK_UP(fsize))
		fetch_end = BLK_UP(fsize);
	n = layout_get(f->c, in, f, NULL, bstart, bend, fetch_end, 0, &segs);
	if (n < 0)
		return n;
	*segs_out = segs;
	*nsegs = n;

	pthread_mutex_lock(&in->lock);
	for (i = 0; i < n && ret == 0; i++) {
		const struct layout_seg *s = &segs[i];
		uint64_t a = s->start * BLK > off ? s->start * BLK : off;
		uint64_t b = s->end * BLK < off + size ? s->end * BLK : off + size;

		if (a >= b)
			continue;
		if (s->hole)
			ret = plan_zeros(pl, a, b);
		else if (!s->unwritten)
			ret = plan_extent(pl, s, a, b);
		else
			ret = plan_unwritten(pl, in, s, a, b);
	}
	pthread_mutex_unlock(&in->lock);

	if (ret == 0 && pl->n)
		ret = io_batch_run(f->c, RDFS_OP_READ, pl->r, pl->n);
	return ret;
}

static void plan_reset(struct read_plan *pl)
{
	size_t i;

	for (i = 0; i < pl->n; i++)
		rpc_reply_release(&pl->r[i].reply);
	free(pl->r);
	free(pl->p);
	pl->r = NULL;
	pl->p = NULL;
	pl->n = pl->cap = pl->np = pl->pcap = 0;
	pl->max_zeros = 0;
}

/* Clamp the request to the file; 0 when nothing is to be read. */
static int read_clamp(struct rdfs_file *f, size_t *size, off_t off, uint64_t *fsize)
{
	struct rdfs_inode *in = f->in;

	if (off < 0)
		return -EINVAL;
	if ((f->flags & O_ACCMODE) == O_WRONLY)
		return -EBADF;
	pthread_mutex_lock(&in->lock);
	*fsize = inode_size(in);
	pthread_mutex_unlock(&in->lock);
	if ((uint64_t)off >= *fsize || *size == 0)
		return 0;
	if (*size > *fsize - off)
		*size = *fsize - off;
	if (*size > (1u << 30))
		*size = 1u << 30;
	return 1;
}

/* Plan and run a read, retrying once with a fresh layout; leaves the result in @pl. */
static int read_run(struct rdfs_file *f, struct read_plan *pl, size_t size, uint64_t fsize)
{
	struct rdfs_inode *in = f->in;
	struct layout_seg *segs;
	int ret, attempt, nsegs;

	for (attempt = 0; attempt < 2; attempt++) {
		segs = NULL;
		nsegs = 0;
		ret = read_range(f, pl, size, fsize, &segs, &nsegs);
		/* the requests no longer need their segments; their replies stay in @pl */
		if (segs)
			layout_segs_put(segs, nsegs);
		if (ret == 0)
			return 0;
		plan_reset(pl);
		/*
		 * A refused capability (expired, blocks moved) or a server that may
		 * have restarted elsewhere: forget the layout, the next try asks again.
		 */
		if (ret == -EIO || io_cap_error(ret)) {
			pthread_mutex_lock(&in->lock);
			layout_cache_forget(&in->layout, BLK_DOWN(pl->off), BLK_UP(pl->off + size));
			pthread_mutex_unlock(&in->lock);
		}
		if (!io_cap_error(ret))
			break;
	}
	return io_cap_error(ret) ? -EIO : ret;
}

ssize_t rdfs_pread(struct rdfs_file *f, void *buf, size_t size, off_t off)
{
	struct read_plan pl = { .buf = buf, .off = off };
	uint64_t fsize;
	int ret;

	ret = read_clamp(f, &size, off, &fsize);
	if (ret <= 0)
		return ret;
	ret = read_run(f, &pl, size, fsize);
	plan_reset(&pl);
	return ret ? ret : (ssize_t)size;
}

ssize_t rdfs_pread_iov(struct rdfs_file *f, size_t size, off_t off, struct rdfs_read_buf **rb_out,
		       const struct iovec **iov_out, int *niov_out)
{
	struct read_plan pl = { .off = off };
	struct rdfs_read_buf *rb;
	uint64_t fsize;
	size_t i;
	int ret;

	*rb_out = NULL;
	*iov_out = NULL;
	*niov_out = 0;
	ret = read_clamp(f, &size, off, &fsize);
	if (ret <= 0)
		return ret;
	ret = read_run(f, &pl, size, fsize);
	if (ret)
		return ret;

	rb = calloc(1, sizeof(*rb));
	if (rb)
		rb->iov = calloc(pl.np ? pl.np : 1, sizeof(*rb->iov));
	/* one zero buffer serves every run of zeros: nobody writes to it */
	if (rb && pl.max_zeros)
		rb->zeros = calloc(1, pl.max_zeros);
	if (!rb || !rb->iov || (pl.max_zeros && !rb->zeros)) {
		if (rb) {
			free(rb->iov);
			free(rb->zeros);
			free(rb);
		}
		plan_reset(&pl);
		return -ENOMEM;
	}
	for (i = 0; i < pl.np; i++) {
		const struct read_piece *p = &pl.p[i];

		rb->iov[i].iov_base = p->req < 0 ? rb->zeros : pl.r[p->req].reply.msg->data;
		rb->iov[i].iov_len = p->len;
	}
	rb->r = pl.r;
	rb->n = pl.n;
	free(pl.p);
	*rb_out = rb;
	*iov_out = rb->iov;
	*niov_out = (int)pl.np;
	return (ssize_t)size;
}

void rdfs_read_buf_free(struct rdfs_read_buf *rb)
{
	size_t i;

	if (!rb)
		return;
	for (i = 0; i < rb->n; i++)
		rpc_reply_release(&rb->r[i].reply);
	free(rb->r);
	free(rb->zeros);
	free(rb->iov);
	free(rb);
}
