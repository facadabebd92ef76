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

/* Keep @segs (@n of them) referenced until the COPYs naming them are done. */
static int hold_segs(struct layout_seg *segs, int n, struct layout_seg ***held, int **nsegs,
		     size_t *nheld)
{
	struct layout_seg **h = realloc(*held, (*nheld + 1) * sizeof(*h));
	int *ns;

	if (h)
		*held = h;
	ns = h ? realloc(*nsegs, (*nheld + 1) * sizeof(*ns)) : NULL;
	if (ns)
		*nsegs = ns;
	if (!h || !ns) {
		layout_segs_put(segs, n);
		return -ENOMEM;
	}
	(*held)[*nheld] = segs;
	(*nsegs)[*nheld] = n;
	(*nheld)++;
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
	int nd, ret, ks = seg_pick_copy(dst->c, ss);

	nd = layout_get(dst->c, dst->in, dst, NULL, BLK_DOWN(b), BLK_UP(b + n), BLK_UP(b + n), 1, &ds);
	if (nd < 0)
		return nd;
	ret = hold_segs(ds, nd, held, nsegs, nheld);
	if (ret)
		return ret;
	for (int i = 0; i < nd; i++) {
		uint64_t d0 = ds[i].start * BLK > b ? ds[i].start * BLK : b;
		uint64_t d1 = ds[i].end * BLK < b + n ? ds[i].end * BLK : b + n;

		while (d0 < d1) {
			uint64_t len = d1 - d0 < COPY_PIECE_MAX ? d1 - d0 : COPY_PIECE_MAX;

			if (ds[i].hole)
				return -EIO;
			/* every copy of the destination fetches the bytes itself */
			for (int k = 0; k < ds[i].ncopies; k++) {
				ret = copy_piece_add(&ds[i], k, d0, ss, ks, a + (d0 - b), len,
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
 * What the source holds in the copied range, decided once from one layout:
 * pieces that read as zeros and pieces with data, in source bytes. Deciding
 * twice (once to punch, once to copy) could see the source change between
 * (a stale cached layout replaced by a fresh one, a COMMIT of ours) and leave
 * a range neither punched nor copied: the destination's old bytes.
 */
struct copy_plan {
	struct {
		uint64_t a0, a1;	/* source bytes [a0, a1) */
		int zeros;
	} *p;
	size_t n;
};

static int plan_add(struct copy_plan *pl, uint64_t a0, uint64_t a1, int zeros)
{
	void *q;

	if (pl->n && pl->p[pl->n - 1].a1 == a0 && pl->p[pl->n - 1].zeros == zeros) {
		pl->p[pl->n - 1].a1 = a1;
		return 0;
	}
	q = realloc(pl->p, (pl->n + 1) * sizeof(*pl->p));
	if (!q)
		return -ENOMEM;
	pl->p = q;
	pl->p[pl->n].a0 = a0;
	pl->p[pl->n].a1 = a1;
	pl->p[pl->n].zeros = zeros;
	pl->n++;
	return 0;
}

static int copy_plan_make(struct rdfs_file *src, uint64_t off_in, uint64_t len,
			  struct copy_plan *pl)
{
	struct layout_seg *ss;
	int nss, ret = 0;

	nss = layout_get(src->c, src->in, src, NULL, BLK_DOWN(off_in), BLK_UP(off_in + len),
			 BLK_UP(off_in + len), 0, &ss);
	if (nss < 0)
		return nss;
	for (int i = 0; i < nss && !ret; i++) {
		uint64_t a0 = ss[i].start * BLK > off_in ? ss[i].start * BLK : off_in;
		uint64_t a1 = ss[i].end * BLK < off_in + len ? ss[i].end * BLK : off_in + len;

		if (a0 < a1)
			ret = plan_add(pl, a0, a1, source_zeros(src, &ss[i], a0, a1));
	}
	layout_segs_put(ss, nss);
	return ret;
}

/*
 * Punch the destination where the plan says the source reads as zeros
 * (@zeros 1), or where a copy found holes it did not plan for (@late).
 * Each punch fences the destination (its generation moves on), so the
 * planned ones come first, before any capability for the COPYs is fetched.
 */
static int copy_holes(const struct copy_plan *pl, uint64_t off_in, struct rdfs_file *dst,
		      uint64_t off_out, uint64_t dst_size)
{
	int ret = 0;

	for (size_t i = 0; i < pl->n && !ret; i++) {
		uint64_t b0 = off_out + (pl->p[i].a0 - off_in);

		/* past the destination's end there is nothing to take away */
		if (!pl->p[i].zeros || b0 >= dst_size)
			continue;
		ret = rdfs_fallocate(dst, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, b0,
				     pl->p[i].a1 - pl->p[i].a0);
	}
	return ret;
}

/*
 * One attempt at copying the plan's data pieces to @off_out (its zero pieces
 * are punched already): 0, or the I/O servers' error in *@io_err, or another
 * error. A data piece the source no longer has blocks for (another client
 * punched or truncated it meanwhile) goes into @late, to be punched: it reads
 * as zeros now. Unwritten blocks are copied as they are: zeros, or our own
 * uncommitted bytes.
 */
static int copy_once(const struct copy_plan *pl, struct rdfs_file *src, uint64_t off_in,
		     struct rdfs_file *dst, uint64_t off_out, uint64_t len, struct copy_plan *late,
		     int *io_err)
{
	struct rdfs_client *c = src->c;
	struct layout_seg **held = NULL;
	struct copy_piece *pieces = NULL;
	struct io_req *reqs = NULL;
	size_t np = 0, cap = 0, nheld = 0;
	int *nsegs = NULL, ret = 0;

	*io_err = 0;
	late->n = 0;
	for (size_t j = 0; j < pl->n && !ret; j++) {
		struct layout_seg *ss;
		int nss;

		if (pl->p[j].zeros)
			continue;
		nss = layout_get(c, src->in, src, NULL, BLK_DOWN(pl->p[j].a0),
				 BLK_UP(pl->p[j].a1), BLK_UP(pl->p[j].a1), 0, &ss);
		if (nss < 0) {
			ret = nss;
			break;
		}
		ret = hold_segs(ss, nss, &held, &nsegs, &nheld);
		for (int i = 0; i < nss && !ret; i++) {
			uint64_t a0 = ss[i].start * BLK > pl->p[j].a0 ? ss[i].start * BLK
								       : pl->p[j].a0;
			uint64_t a1 = ss[i].end * BLK < pl->p[j].a1 ? ss[i].end * BLK : pl->p[j].a1;

			if (a0 >= a1)
				continue;
			if (ss[i].hole || !ss[i].copy[seg_pick_copy(c, &ss[i])].cap)
				ret = plan_add(late, a0, a1, 1);
			else
				ret = copy_extent(dst, &ss[i], a0, off_out + (a0 - off_in), a1 - a0,
						  &pieces, &np, &cap, &held, &nheld, &nsegs);
		}
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
	free(held);
	free(nsegs);
	free(pieces);
	free(reqs);
	return ret;
}

int64_t rdfs_copy_range(struct rdfs_file *src, uint64_t off_in, struct rdfs_file *dst,
			uint64_t off_out, uint64_t len)
{
	struct copy_plan plan = { 0 }, late = { 0 };
	uint64_t size, dst_size;
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

	ret = inode_current_size(dst->c, &dst->cred, dst->in, &dst_size);
	if (!ret)
		ret = copy_plan_make(src, off_in, len, &plan);
	if (!ret)
		ret = copy_holes(&plan, off_in, dst, off_out, dst_size);
	if (!ret) {
		for (int attempt = 0; attempt < IO_TRIES; attempt++) {
			ret = copy_once(&plan, src, off_in, dst, off_out, len, &late, &io_err);
			if (ret != io_err || !io_cap_error(ret))
				break;
			/* a refused capability: both layouts may have moved on */
			layout_refused(src->in, ret, BLK_DOWN(off_in), BLK_UP(off_in + len));
			layout_refused(dst->in, ret, BLK_DOWN(off_out), BLK_UP(off_out + len));
		}
	}
	if (!ret)
		ret = copy_holes(&late, off_in, dst, off_out, dst_size);
	free(plan.p);
	free(late.p);
	if (ret)
		return io_cap_error(ret) ? -EIO : ret;
	/* the size and the written blocks reach the metaserver now */
	ret = rdfs_flush(dst);
	return ret ? ret : (int64_t)len;
}
