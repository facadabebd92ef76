// SPDX-License-Identifier: MIT
/*
 * io_read.c - the read path: clamp to the size this client knows, split the
 * range by extents, zero-fill holes and blocks nobody has written yet, and
 * READ the rest from every server at once (io_batch.c).
 *
 * Copies: the transport receives each READ reply's data (one buffer per
 * frame: a reply may come in several RDFS_FRAME_MORE parts) into buffers of
 * its own; rdfs_pread() copies it once into the caller's buffer (also when it
 * is served from read-ahead, readahead.c, which keeps the received buffers),
 * rdfs_pread_iov() hands out the received buffers themselves (no copy).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"
#include "log.h"
#include "xport.h"

struct rdfs_read_buf {
	struct io_req *r;		/* holding their replies */
	size_t n;
	void *zeros;
	struct iovec *iov;
	void *placed;			/* rdma_mode write: the destination the servers wrote */
	struct placed_pool *pool;	/* ... a slot of this pool, or NULL: allocated */
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

/* READs for bytes [a, b) of copy @k of extent @s, at most RDFS_IO_MAX bytes each. */
static int plan_extent(struct read_plan *pl, const struct layout_seg *s, int k, uint64_t a,
		       uint64_t b)
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
		r->copy = k;
		r->first_block = s->copy[k].block + (BLK_DOWN(a) - s->start);
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
			  int k, uint64_t a, uint64_t b)
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
			ret = plan_extent(pl, s, k, wa, wb);
		a = wb;
		blk = w.end;
	}
	return ret;
}

int read_plan_start(struct rdfs_file *f, struct read_plan *pl, size_t size, uint64_t fsize)
{
	struct rdfs_inode *in = f->in;
	struct layout_seg *segs = NULL;
	uint64_t off = pl->off;
	uint64_t bstart = BLK_DOWN(off), bend = BLK_UP(off + size);
	uint64_t fetch_end = bstart + RDFS_LAYOUT_READAHEAD / BLK;
	int n, i, ret = 0;

	pl->size = size;
	if (fetch_end > BLK_UP(fsize))
		fetch_end = BLK_UP(fsize);
	n = layout_get(f->c, in, f, NULL, bstart, bend, fetch_end, 0, &segs);
	if (n < 0)
		return n;
	pl->segs = segs;
	pl->nsegs = n;

	pthread_mutex_lock(&in->lock);
	for (i = 0; i < n && ret == 0; i++) {
		const struct layout_seg *s = &segs[i];
		uint64_t a = s->start * BLK > off ? s->start * BLK : off;
		uint64_t b = s->end * BLK < off + size ? s->end * BLK : off + size;

		if (a >= b)
			continue;
		if (s->ncopies > 1)
			pl->had_copies = 1;
		if (s->hole)
			ret = plan_zeros(pl, a, b);
		else if (!s->unwritten)
			ret = plan_extent(pl, s, seg_pick_copy(f->c, s), a, b);
		else
			ret = plan_unwritten(pl, in, s, seg_pick_copy(f->c, s), a, b);
	}
	pthread_mutex_unlock(&in->lock);

	if (ret == 0 && pl->n) {
		io_batch_begin(&pl->batch, f->c, RDFS_OP_READ, pl->r, pl->n);
		pl->started = 1;
	}
	return ret;
}

int read_plan_end(struct read_plan *pl)
{
	int ret = 0;

	if (pl->started) {
		ret = io_batch_end(&pl->batch);
		pl->started = 0;
	}
	/* the requests no longer need their segments; their replies stay in @pl */
	if (pl->segs)
		layout_segs_put(pl->segs, pl->nsegs);
	pl->segs = NULL;
	pl->nsegs = 0;
	return ret;
}

void read_plan_reset(struct read_plan *pl)
{
	size_t i;

	read_plan_end(pl);
	for (i = 0; i < pl->n; i++)
		rpc_reply_release(&pl->r[i].reply);
	free(pl->r);
	free(pl->p);
	pl->r = NULL;
	pl->p = NULL;
	pl->n = pl->cap = pl->np = pl->pcap = 0;
	pl->max_zeros = 0;
	pl->had_copies = 0;
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
	int ret, ended, attempt, failovers = 0, multi;

	for (attempt = 0; attempt < IO_TRIES; attempt++) {
		ret = read_plan_start(f, pl, size, fsize);
		ended = read_plan_end(pl);
		if (ret == 0 && ended == 0)
			return 0;
		multi = pl->had_copies;
		read_plan_reset(pl);
		/* the metaserver's own answer (EACCES after a chmod, say) is final */
		if (ret)
			return ret;
		ret = ended;
		/*
		 * A refused capability (expired, fenced, blocks moved) or a server
		 * that may have restarted elsewhere: the next try asks again.
		 */
		if (ret == -EIO || io_cap_error(ret))
			layout_refused(in, ret, BLK_DOWN(pl->off), BLK_UP(pl->off + size));
		/*
		 * A failed server is passed over now (io_batch_end): the next try
		 * reads another copy, while one is left to try.
		 */
		if (ret == -EIO && failovers < RDFS_MAX_COPIES && multi) {
			failovers++;
			attempt--;
			continue;
		}
		if (!io_cap_error(ret))
			break;
	}
	return io_cap_error(ret) ? -EIO : ret;
}

void read_plan_copy(const struct read_plan *pl, uint64_t from, void *dst, size_t len)
{
	uint8_t *d = dst;
	uint64_t pos = 0;
	size_t i;

	for (i = 0; i < pl->np && len; i++) {
		const struct read_piece *p = &pl->p[i];
		uint64_t inner, n;

		if (from >= pos + p->len) {
			pos += p->len;
			continue;
		}
		inner = from - pos;
		n = p->len - inner < len ? p->len - inner : len;
		if (p->req < 0)
			memset(d, 0, n);
		else
			rpc_reply_data_copy(&pl->r[p->req].reply, inner, d, n);
		d += n;
		from += n;
		len -= n;
		pos += p->len;
	}
}

ssize_t rdfs_pread(struct rdfs_file *f, void *buf, size_t size, off_t off)
{
	struct read_plan pl = { .buf = buf, .off = off };
	uint64_t fsize;
	size_t done;
	int ret;

	/* our own writes still in flight are part of what we read */
	ret = write_behind_drain(f->in, 0);
	if (ret)
		return ret;
	ret = read_clamp(f, &size, off, &fsize);
	if (ret <= 0)
		return ret;
	ret = 0;
	done = readahead_serve(f, buf, size, off, fsize);
	if (done < size) {
		pl.buf = (uint8_t *)buf + done;
		pl.off = off + done;
		ret = read_run(f, &pl, size - done, fsize);
		read_plan_reset(&pl);
	}
	readahead_next(f, off, size, fsize);
	return ret ? ret : (ssize_t)size;
}

/* The iovecs of @pl's data in file order (a reply in parts takes several). */
static int plan_iov(const struct read_plan *pl, const void *zeros, struct iovec **out)
{
	struct iovec *iov;
	int n = 0, k = 0;
	size_t i;

	for (i = 0; i < pl->np; i++)
		n += pl->p[i].req < 0 ? 1 : rpc_reply_data_iov(&pl->r[pl->p[i].req].reply, NULL, 0);
	iov = calloc(n ? n : 1, sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	for (i = 0; i < pl->np; i++) {
		const struct read_piece *p = &pl->p[i];
		uint64_t left = p->len;
		int m, j;

		if (p->req < 0) {
			iov[k].iov_base = (void *)zeros;
			iov[k++].iov_len = p->len;
			continue;
		}
		m = rpc_reply_data_iov(&pl->r[p->req].reply, iov + k, n - k);
		/* the reply may hold more than the piece: keep its first p->len bytes */
		for (j = 0; j < m && left; j++) {
			if (iov[k + j].iov_len > left)
				iov[k + j].iov_len = left;
			left -= iov[k + j].iov_len;
		}
		k += j;
	}
	*out = iov;
	return k;
}

void placed_pool_init(struct placed_pool *pp)
{
	pthread_mutex_init(&pp->lock, NULL);
	pp->mem = NULL;
	pp->free_mask = 0;
	pp->broken = 0;
}

void placed_pool_destroy(struct placed_pool *pp)
{
	size_t len = (size_t)PLACED_SLOTS * PLACED_SLOT_SIZE;

	if (pp->mem) {
		/* A read buffer still out is a caller bug: keep its memory then. */
		if (pp->free_mask != (1u << PLACED_SLOTS) - 1)
			log_warn(1600012, "client closed with read buffers still out");
		else if (xport_mem_deregister(pp->mem, len) == 0)
			free(pp->mem);
	}
	pp->mem = NULL;
	pthread_mutex_destroy(&pp->lock);
}

/* A free slot of @pp for @size bytes (the region made on first use), or NULL. */
static void *placed_slot_get(struct placed_pool *pp, size_t size)
{
	size_t len = (size_t)PLACED_SLOTS * PLACED_SLOT_SIZE;
	void *p = NULL;
	int i;

	if (size > PLACED_SLOT_SIZE)
		return NULL;
	pthread_mutex_lock(&pp->lock);
	if (!pp->mem && !pp->broken) {
		void *mem = NULL;

		if (posix_memalign(&mem, 4096, len) == 0 && xport_mem_register(mem, len) == 0) {
			/* Memory only: nothing is exposed until a READ binds a window. */
			pp->mem = mem;
			pp->free_mask = (1u << PLACED_SLOTS) - 1;
		} else {
			pp->broken = 1;
			free(mem);
			log_warn(1600013, "cannot set up %zu bytes of read destinations: allocating per read",
				 len);
		}
	}
	if (pp->free_mask) {
		i = __builtin_ctz(pp->free_mask);
		pp->free_mask &= ~(1u << i);
		p = pp->mem + (size_t)i * PLACED_SLOT_SIZE;
	}
	pthread_mutex_unlock(&pp->lock);
	return p;
}

static void placed_slot_put(struct placed_pool *pp, void *p)
{
	int i = (int)(((uint8_t *)p - pp->mem) / PLACED_SLOT_SIZE);

	pthread_mutex_lock(&pp->lock);
	pp->free_mask |= 1u << i;
	pthread_mutex_unlock(&pp->lock);
}

/*
 * rdma_mode write: a destination which the I/O servers RDMA-WRITE into,
 * exposed for each READ only, handed out as one iovec. A slot of the
 * client's declared pool when one is free (a window per request), else an
 * allocation of this call's own (a registration per request).
 */
static ssize_t pread_placed(struct rdfs_file *f, size_t size, off_t off,
			    struct rdfs_read_buf **rb_out, const struct iovec **iov_out,
			    int *niov_out)
{
	struct rdfs_read_buf *rb = calloc(1, sizeof(*rb));
	ssize_t n;

	if (!rb)
		return -ENOMEM;
	rb->iov = calloc(1, sizeof(*rb->iov));
	if (!rb->iov) {
		rdfs_read_buf_free(rb);
		return -ENOMEM;
	}
	rb->placed = placed_slot_get(&f->c->placed, size);
	if (rb->placed)
		rb->pool = &f->c->placed;
	else if (posix_memalign(&rb->placed, 4096, size ? size : 1)) {
		rb->placed = NULL;
		rdfs_read_buf_free(rb);
		return -ENOMEM;
	}
	n = rdfs_pread(f, rb->placed, size, off);
	if (n < 0) {
		rdfs_read_buf_free(rb);
		return n;
	}
	rb->iov[0].iov_base = rb->placed;
	rb->iov[0].iov_len = (size_t)n;
	*rb_out = rb;
	*iov_out = rb->iov;
	*niov_out = n ? 1 : 0;
	return n;
}

ssize_t rdfs_pread_iov(struct rdfs_file *f, size_t size, off_t off, struct rdfs_read_buf **rb_out,
		       const struct iovec **iov_out, int *niov_out)
{
	struct read_plan pl = { .off = off };
	struct rdfs_read_buf *rb;
	uint64_t fsize;
	int ret;

	*rb_out = NULL;
	*iov_out = NULL;
	*niov_out = 0;
	if (f->c->opts.rdma_mode == RDFS_RDMA_WRITE)
		return pread_placed(f, size, off, rb_out, iov_out, niov_out);
	ret = write_behind_drain(f->in, 0);
	if (ret)
		return ret;
	ret = read_clamp(f, &size, off, &fsize);
	if (ret <= 0)
		return ret;
	ret = read_run(f, &pl, size, fsize);
	if (ret)
		return ret;

	rb = calloc(1, sizeof(*rb));
	/* one zero buffer serves every run of zeros: nobody writes to it */
	if (rb && pl.max_zeros)
		rb->zeros = calloc(1, pl.max_zeros);
	if (rb && (!pl.max_zeros || rb->zeros))
		ret = plan_iov(&pl, rb->zeros, &rb->iov);
	if (!rb || (pl.max_zeros && !rb->zeros) || ret < 0) {
		if (rb) {
			free(rb->zeros);
			free(rb);
		}
		read_plan_reset(&pl);
		return -ENOMEM;
	}
	rb->r = pl.r;
	rb->n = pl.n;
	free(pl.p);
	*rb_out = rb;
	*iov_out = rb->iov;
	*niov_out = ret;
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
	if (rb->pool)
		placed_slot_put(rb->pool, rb->placed);
	else
		free(rb->placed);
	free(rb);
}
