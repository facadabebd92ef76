// SPDX-License-Identifier: MIT
/*
 * copy.c - copy_file_range without the bytes: for every piece of the source
 * that has blocks, the destination's I/O server is asked to COPY it, fetching
 * the bytes from the source's I/O server itself (ioserver/copy.c); pieces
 * where the source has a hole, or blocks never written (as the read path
 * sees them), become holes (punched) in the destination.
 *
 * A COPY is a stable WRITE of the destination as far as the I/O servers are
 * concerned: the written blocks are recorded for the next COMMIT as any
 * write's, and the copy ends with one, so the size and the written blocks
 * reach the metaserver before the call returns.
 *
 * Threads: the caller's; the files' write-behind is drained first, so our
 * own earlier writes are on the servers before they are copied.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "client_internal.h"
#include "frame.h"

/* Largest copy per call: copy_file_range may copy less than asked. */
#define COPY_CALL_MAX	(1ull << 30)
/* Largest COPY request (ioserver/copy.h). */
#define COPY_PIECE_MAX	(4u << 20)

struct copy_piece {
	struct io_req r;
	Rdfs__CopySrc src;
};

/*
 * Queue the COPY of @len bytes from source offset @s0 (copy @ks of @ss) to
 * destination offset @d0 (copy @k of @ds).
 */
static int copy_piece_add(const struct layout_seg *ds, int k, uint64_t d0,
			  const struct layout_seg *ss, int ks, uint64_t s0, uint64_t len,
			  struct copy_piece **pieces, size_t *np, size_t *cap)
{
	struct copy_piece *p;

	if (!seg_copy_usable(ds, k, RDFS_CAP_WRITE))
		return -EIO;
	if (*np == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct copy_piece *q = realloc(*pieces, nc * sizeof(*q));

		if (!q)
			return -ENOMEM;
		*pieces = q;
		*cap = nc;
	}
	p = &(*pieces)[(*np)++];
	memset(p, 0, sizeof(*p));
	p->r.seg = ds;
	p->r.copy = k;
	p->r.first_block = ds->copy[k].block + (BLK_DOWN(d0) - ds->start);
	p->r.head = (uint32_t)(d0 % BLK);
	p->r.length = (uint32_t)len;
	p->r.block_count = (uint32_t)BLK_UP(p->r.head + len);
	p->r.stable = 1;
	rdfs__copy_src__init(&p->src);
	p->src.cap = (Rdfs__Capability *)ss->copy[ks].cap;
	p->src.first_block = ss->copy[ks].block + (BLK_DOWN(s0) - ss->start);
	p->src.head = (uint32_t)(s0 % BLK);
	p->src.block_count = (uint32_t)BLK_UP(p->src.head + len);
	return 0;
}

/*
 * Queue the COPYs of source bytes [a, a + n) (one extent @ss of the source)
 * to destination bytes [b, b + n), allocating the destination.
 */
static int copy_extent(struct rdfs_file *dst, const struct layout_seg *ss, uint64_t a, uint64_t b,
		       uint64_t n, struct copy_piece **pieces, size_t *np, size_t *cap,
		       struct layout_seg ***held, size_t *nheld, int **nsegs)
{
	struct layout_seg *ds;
	int nd, ks = seg_pick_copy(dst->c, ss);

	nd = layout_get(dst->c, dst->in, dst, NULL, BLK_DOWN(b), BLK_UP(b + n), BLK_UP(b + n), 1, &ds);
	if (nd < 0)
		return nd;
	{
		struct layout_seg **h = realloc(*held, (*nheld + 1) * sizeof(*h));
		int *ns = realloc(*nsegs, (*nheld + 1) * sizeof(*ns));

		if (h)
			*held = h;
		if (ns)
			*nsegs = ns;
		if (!h || !ns) {
			layout_segs_put(ds, nd);
			return -ENOMEM;
		}
		(*held)[*nheld] = ds;
		(*nsegs)[*nheld] = nd;
		(*nheld)++;
	}
	for (int i = 0; i < nd; i++) {
		uint64_t d0 = ds[i].start * BLK > b ? ds[i].start * BLK : b;
		uint64_t d1 = ds[i].end * BLK < b + n ? ds[i].end * BLK : b + n;

		while (d0 < d1) {
			uint64_t len = d1 - d0 < COPY_PIECE_MAX ? d1 - d0 : COPY_PIECE_MAX;

			if (ds[i].hole)
				return -EIO;
			/* every copy of the destination fetches the bytes itself */
			for (int k = 0; k < ds[i].ncopies; k++) {
				int ret = copy_piece_add(&ds[i], k, d0, ss, ks, a + (d0 - b), len,
							 pieces, np, cap);

				if (ret)
					return ret;
			}
			d0 += len;
		}
	}
	return 0;
}

/* Whether source bytes [a0, a1) of segment @s read as zeros (a hole, or never written). */
static int source_zeros(struct rdfs_file *src, const struct layout_seg *s, uint64_t a0,
			uint64_t a1)
{
	int zeros = s->hole || !s->copy[seg_pick_copy(src->c, s)].cap;

	if (!zeros && s->unwritten) {
		/* never written: zeros, unless the blocks are ours (not committed yet) */
		pthread_mutex_lock(&src->in->lock);
		zeros = !range_set_overlaps(&src->in->uncommitted, BLK_DOWN(a0), BLK_UP(a1)) &&
			!range_set_overlaps(&src->in->committed, BLK_DOWN(a0), BLK_UP(a1));
		pthread_mutex_unlock(&src->in->lock);
	}
	return zeros;
}

/*
 * Punch the destination where the source reads as zeros. First, and all of
 * them: each punch fences the destination (its generation moves on), so a
 * capability fetched before one would be refused.
 */
static int copy_holes(struct rdfs_file *src, uint64_t off_in, struct rdfs_file *dst,
		      uint64_t off_out, uint64_t len)
{
	struct layout_seg *ss;
	uint64_t dst_size;
	int nss, ret;

	nss = layout_get(src->c, src->in, src, NULL, BLK_DOWN(off_in), BLK_UP(off_in + len),
			 BLK_UP(off_in + len), 0, &ss);
	if (nss < 0)
		return nss;
	ret = inode_current_size(dst->c, &dst->cred, dst->in, &dst_size);
	for (int i = 0; i < nss && !ret; i++) {
		uint64_t a0 = ss[i].start * BLK > off_in ? ss[i].start * BLK : off_in;
		uint64_t a1 = ss[i].end * BLK < off_in + len ? ss[i].end * BLK : off_in + len;
		uint64_t b0 = off_out + (a0 - off_in);

		/* past the destination's end there is nothing to take away */
		if (a0 >= a1 || b0 >= dst_size || !source_zeros(src, &ss[i], a0, a1))
			continue;
		ret = rdfs_fallocate(dst, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, b0, a1 - a0);
	}
	layout_segs_put(ss, nss);
	return ret;
}

/*
 * One attempt at copying the source's data in [off_in, off_in + len) to
 * @off_out (its holes are punched already): 0, or the I/O servers' error in
 * *@io_err, or another error.
 */
static int copy_once(struct rdfs_file *src, uint64_t off_in, struct rdfs_file *dst,
		     uint64_t off_out, uint64_t len, int *io_err)
{
	struct rdfs_client *c = src->c;
	struct layout_seg *ss = NULL, **held = NULL;
	struct copy_piece *pieces = NULL;
	struct io_req *reqs = NULL;
	size_t np = 0, cap = 0, nheld = 0;
	int *nsegs = NULL, nss, ret = 0;

	*io_err = 0;
	nss = layout_get(c, src->in, src, NULL, BLK_DOWN(off_in), BLK_UP(off_in + len),
			 BLK_UP(off_in + len), 0, &ss);
	if (nss < 0)
		return nss;
	for (int i = 0; i < nss && !ret; i++) {
		uint64_t a0 = ss[i].start * BLK > off_in ? ss[i].start * BLK : off_in;
		uint64_t a1 = ss[i].end * BLK < off_in + len ? ss[i].end * BLK : off_in + len;
		uint64_t b0 = off_out + (a0 - off_in);

		if (a0 >= a1 || source_zeros(src, &ss[i], a0, a1))
			continue;
		ret = copy_extent(dst, &ss[i], a0, b0, a1 - a0, &pieces, &np, &cap, &held, &nheld,
				  &nsegs);
	}
	if (!ret && np) {
		reqs = calloc(np, sizeof(*reqs));
		if (!reqs)
			ret = -ENOMEM;
	}
	if (!ret && np) {
		for (size_t i = 0; i < np; i++) {
			reqs[i] = pieces[i].r;
			reqs[i].copy_src = &pieces[i].src;
		}
		ret = io_batch_run(c, RDFS_OP_COPY, reqs, np);
		*io_err = ret;
	}
	if (!ret) {
		struct rdfs_inode *in = dst->in;

		pthread_mutex_lock(&in->lock);
		ret = range_set_add(&in->uncommitted, BLK_DOWN(off_out), BLK_UP(off_out + len));
		if (off_out + len > in->pending_size)
			in->pending_size = off_out + len;
		in->mtime_ns = cap_now_ns();
		in->dirty = 1;
		pthread_mutex_unlock(&in->lock);
	}
	if (np) {
		/* whatever landed may differ from what a read-ahead holds */
		pthread_mutex_lock(&dst->in->lock);
		inode_data_changed(dst->in);
		pthread_mutex_unlock(&dst->in->lock);
	}
	for (size_t i = 0; i < nheld; i++)
		layout_segs_put(held[i], nsegs[i]);
	layout_segs_put(ss, nss);
	free(held);
	free(nsegs);
	free(pieces);
	free(reqs);
	return ret;
}

int64_t rdfs_copy_range(struct rdfs_file *src, uint64_t off_in, struct rdfs_file *dst,
			uint64_t off_out, uint64_t len)
{
	uint64_t size;
	int ret, io_err = 0;

	if ((src->flags & O_ACCMODE) == O_WRONLY || (dst->flags & O_ACCMODE) == O_RDONLY ||
	    (dst->flags & O_APPEND))
		return -EBADF;
	if (off_in > INT64_MAX || off_out > INT64_MAX)
		return -EINVAL;
	if (len > COPY_CALL_MAX)
		len = COPY_CALL_MAX;
	/* our own writes first, and the source's size as it is with them */
	ret = write_behind_drain(src->in, 1);
	if (!ret && dst->in != src->in)
		ret = write_behind_drain(dst->in, 1);
	if (!ret)
		ret = inode_current_size(src->c, &src->cred, src->in, &size);
	if (ret)
		return ret;
	if (off_in >= size || len == 0)
		return 0;
	if (len > size - off_in)
		len = size - off_in;
	/* as copy_file_range(2), once the count is what will be copied */
	if (len > (uint64_t)INT64_MAX - off_out)
		return -EFBIG;
	if (src->in == dst->in && off_in < off_out + len && off_out < off_in + len)
		return -EINVAL;

	ret = copy_holes(src, off_in, dst, off_out, len);
	if (ret)
		return ret;
	for (int attempt = 0; attempt < IO_TRIES; attempt++) {
		ret = copy_once(src, off_in, dst, off_out, len, &io_err);
		if (ret != io_err || !io_cap_error(ret))
			break;
		/* a refused capability: both layouts may have moved on */
		layout_refused(src->in, ret, BLK_DOWN(off_in), BLK_UP(off_in + len));
		layout_refused(dst->in, ret, BLK_DOWN(off_out), BLK_UP(off_out + len));
	}
	if (ret)
		return io_cap_error(ret) ? -EIO : ret;
	/* the size and the written blocks reach the metaserver now */
	ret = rdfs_flush(dst);
	return ret ? ret : (int64_t)len;
}
