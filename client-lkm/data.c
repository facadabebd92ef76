// SPDX-License-Identifier: GPL-2.0
/*
 * data.c - file data to and from the I/O servers, either transport.
 *
 * The helper asks the metaserver for the layout (extents + capabilities); a
 * read-ahead window or writeback batch becomes READs or WRITEs of at most
 * RDFS_IO_MAX_LEN, up to RDFS_IO_INFLIGHT in flight at once over every I/O
 * server it touches: over kernel TCP (data_tcp.c, whose socket per server the
 * helper authenticates and hands over) or RDMA (data_rdma.c), both straight
 * between the pages and the wire. A fenced capability is tried again on a
 * fresh layout, a failed server on another copy; a connection error fails the
 * request with EIO and the next request reconnects. Writeback's WRITEs are
 * unstable (acknowledged on receipt, made durable by IO_COMMIT later:
 * unstable.c), O_DIRECT's and resent ones stable.
 */
#include <linux/highmem.h>
#include <linux/pagemap.h>
#include <linux/slab.h>

#include "rdfs.h"

/* One READ or WRITE sent and not yet answered. */
struct rdfs_io_pending {
	u32 server_id;
	int seg;		/* the layout segment it serves (rdfs_io_set.seg_err) */
	u16 op;
	u64 verifier;		/* the IoReply's, once answered */
	struct rdfs_tcp_req *treq;	/* transport=tcp */
	struct rdfs_rdma_req *rreq;	/* transport=rdma */
};

/*
 * Send one READ or WRITE of @len bytes on @server_id from byte @off % 4096 of
 * block @first_block (a READ: whole blocks; a WRITE may be a byte range, which
 * the I/O server merges into its blocks), data in @pages from byte @off; a
 * WRITE is durable before its reply if @stable. Both transports keep many in
 * flight per connection; rdfs_io_finish() waits for the reply.
 */
static int rdfs_io_start(struct rdfs_sb_info *sbi, u16 op, u32 server_id, const u8 *cap,
			 u32 cap_len, u64 first_block, struct page **pages, size_t off, u32 len,
			 u32 data_len, bool stable, struct rdfs_io_pending *p)
{
	*p = (struct rdfs_io_pending){ .server_id = server_id, .op = op };
	if (sbi->rdma)
		return rdfs_rdma_start(sbi, op, server_id, cap, cap_len, first_block,
				       pages + (off >> PAGE_SHIFT), off & ~PAGE_MASK, len, stable,
				       &p->rreq);
	return rdfs_tcp_start(sbi, op, server_id, cap, cap_len, first_block, pages, off, len,
			      data_len, stable, &p->treq);
}

static int rdfs_io_finish(struct rdfs_io_pending *p)
{
	if (p->rreq)
		return rdfs_rdma_finish(p->rreq, &p->verifier);
	return rdfs_tcp_finish(p->treq, &p->verifier);
}

/* Requests of one read-ahead window or writeback batch in flight at once. */
#define RDFS_IO_INFLIGHT	8
/* Bytes per READ or WRITE: what one RDMA registration covers (data_rdma.c). */
#define RDFS_IO_MAX_LEN		(1u << 20)

struct rdfs_io_set {
	struct rdfs_io_pending p[RDFS_IO_INFLIGHT];
	int n;
	int err;		/* the first error */
	u32 failed_server;	/* of the first error that was not a fence */
	bool failed;
	int *seg_err;		/* if set: the first error of each layout segment */
	struct rdfs_wverf *unstable;	/* if set: WRITEs are unstable, noted here */
};

/* Request @seg's to @server_id failed with @err (at start or in its reply). */
static void rdfs_io_failed(struct rdfs_io_set *set, int seg, u32 server_id, int err)
{
	if (!set->err)
		set->err = err;
	if (err != -ESTALE && !set->failed) {
		set->failed = true;
		set->failed_server = server_id;
	}
	if (set->seg_err && !set->seg_err[seg])
		set->seg_err[seg] = err;
}

static void rdfs_io_drain(struct rdfs_io_set *set)
{
	int i, err;

	for (i = 0; i < set->n; i++) {
		err = rdfs_io_finish(&set->p[i]);
		if (err)
			rdfs_io_failed(set, set->p[i].seg, set->p[i].server_id, err);
		else if (set->unstable && set->p[i].op == RDFS_OP_WRITE)
			rdfs_wverf_note(set->unstable, set->p[i].server_id, set->p[i].verifier);
	}
	set->n = 0;
}

/* Start one more request of @set, once fewer than RDFS_IO_INFLIGHT are in flight. */
static int rdfs_io_add(struct rdfs_sb_info *sbi, struct rdfs_io_set *set, int seg, u16 op,
		       u32 server_id, const u8 *cap, u32 cap_len, u64 first_block,
		       struct page **pages, size_t off, u32 len, u32 data_len)
{
	int err;

	if (set->n == RDFS_IO_INFLIGHT)
		rdfs_io_drain(set);
	err = rdfs_io_start(sbi, op, server_id, cap, cap_len, first_block, pages, off, len,
			    data_len, !set->unstable, &set->p[set->n]);
	if (!err)
		set->p[set->n++].seg = seg;
	else
		rdfs_io_failed(set, seg, server_id, err);
	return err;
}

/*
 * What the last try of a read or write learnt: @refresh, a capability was
 * fenced (the helper must ask the metaserver again); @failed, I/O server
 * @failed_server failed (a read should go to another copy).
 */
struct rdfs_io_try {
	bool refresh;
	bool failed;
	u32 failed_server;
};

/* What a try learnt, as RDFS_DEV_LAYOUT_* flags for the next layout. */
static u32 rdfs_io_try_flags(const struct rdfs_io_try *t)
{
	return (t->refresh ? RDFS_DEV_LAYOUT_REFRESH : 0) | (t->failed ? RDFS_DEV_LAYOUT_FAILED : 0);
}

static void rdfs_zero_pages(struct page **pages, int from, int to)
{
	for (; from < to; from++)
		zero_user(pages[from], 0, PAGE_SIZE);
}

/*
 * Tries of a read or write whose capability an I/O server refused as fenced,
 * or of a read whose I/O server failed (each try passes over the last one
 * that failed: with RDFS_MAX_COPIES copies, each gets its turn).
 */
#define RDFS_IO_TRIES	RDFS_MAX_COPIES

/*
 * The errors of an I/O server that is dead, unreachable or failing (not a
 * refused capability, not a lack of memory here): another copy may serve.
 */
static bool rdfs_io_server_failed(int err)
{
	switch (err) {
	case -EIO: case -ETIMEDOUT: case -ECONNREFUSED: case -ECONNRESET:
	case -ECONNABORTED: case -EHOSTUNREACH: case -ENETUNREACH: case -ENOTCONN:
	case -EPIPE: case -ENOLINK:	/* ENOLINK: its registration lapsed (a lease) */
		return true;
	}
	return false;
}

/* A refused capability or lapsed lease that outlived the tries is an I/O error to callers. */
static int rdfs_io_app_err(int err)
{
	return err == -ESTALE || err == -ENOLINK ? -EIO : err;
}

/* Take what a failed try learnt into @t: true if another try may succeed. */
static bool rdfs_io_retry(struct rdfs_io_try *t, int err, const struct rdfs_io_set *set)
{
	if (err == -ESTALE) {
		t->refresh = true;
		return true;
	}
	if (!set->failed || !rdfs_io_server_failed(err))
		return false;
	t->failed = true;
	t->failed_server = set->failed_server;
	return true;
}

/* One try of rdfs_data_read(); -ESTALE: a capability was fenced. */
static int rdfs_data_read_once(struct inode *inode, u64 handle, struct page **pages,
			       int npages, u64 base, struct rdfs_io_try *t,
			       struct rdfs_io_set *set)
{
	struct rdfs_sb_info *sbi = RDFS_SB(inode->i_sb);
	u64 pos = base, end = pos + ((u64)npages << PAGE_SHIFT);
	u64 isize = i_size_read(inode), done = pos;
	const struct rdfs_dev_layout_reply *rep;
	struct rdfs_layout *l;
	u32 i;
	int err = 0;

	if (isize < end)
		end = round_up(isize, PAGE_SIZE);
	if (end <= pos) {
		rdfs_zero_pages(pages, 0, npages);
		return 0;
	}
	l = rdfs_layout_get(inode, handle, pos, end - pos, false, rdfs_io_try_flags(t),
			    t->failed_server);
	if (IS_ERR(l))
		return PTR_ERR(l);
	rep = rdfs_layout_reply(l);
	for (i = 0; i < rep->nsegs && !err; i++) {
		const struct rdfs_dev_seg *s = &rep->segs[i];
		u64 a = max(s->offset, pos), b = min(s->offset + s->length, end), n;

		if (a >= b)
			continue;
		if (a > done)
			rdfs_zero_pages(pages, (done - pos) >> PAGE_SHIFT, (a - pos) >> PAGE_SHIFT);
		if (s->flags & RDFS_DEV_SEG_HOLE)
			rdfs_zero_pages(pages, (a - pos) >> PAGE_SHIFT, (b - pos) >> PAGE_SHIFT);
		for (; !(s->flags & RDFS_DEV_SEG_HOLE) && a < b && !err; a += n) {
			n = min_t(u64, b - a, RDFS_IO_MAX_LEN);
			err = rdfs_io_add(sbi, set, i, RDFS_OP_READ, s->server_id,
					  (u8 *)rep + s->cap_off, s->cap_len,
					  s->block + ((a - s->offset) / RDFS_BLOCK_SIZE),
					  pages, a - pos, n, n);
		}
		done = b;
	}
	rdfs_io_drain(set);
	if (!err)
		err = set->err;
	rdfs_layout_put(l);
	if (err) {
		if (err != -ESTALE)
			pr_warn_ratelimited(RDFS_MSG(1500013)
					    "ino=%lu: read [%llu, %llu) failed: %d\n",
					    inode->i_ino, pos, end, err);
		return err;
	}
	rdfs_zero_pages(pages, (done - pos) >> PAGE_SHIFT, npages);
	/* the tail of the last block past the end of the file */
	if (isize > pos && isize < pos + ((u64)npages << PAGE_SHIFT) && (isize & ~PAGE_MASK))
		zero_user_segment(pages[(isize - pos) >> PAGE_SHIFT], isize & ~PAGE_MASK,
				  PAGE_SIZE);
	return 0;
}

/*
 * Fill @npages consecutive page-cache pages (locked, not uptodate) from the
 * I/O servers: holes and what lies past the end of the file read as zeros. A
 * fenced capability (the metaserver took blocks of the file back) is retried
 * with a layout the helper fetches again; a failed I/O server with a layout
 * that names another copy where the file has one.
 */
int rdfs_data_read_at(struct inode *inode, u64 handle, struct page **pages, int npages,
		      u64 base)
{
	struct rdfs_io_try t = {};
	int err, i;

	if (base & (PAGE_SIZE - 1))
		return -EINVAL;
	/*
	 * Blocks this client wrote and has not committed are unwritten to the
	 * metaserver, and the helper describes them as holes: commit them first
	 * (an O_DIRECT read after an O_DIRECT write, or a page the cache dropped
	 * after writeback).
	 */
	if (rdfs_dirty_overlaps(inode, base >> PAGE_SHIFT, (base >> PAGE_SHIFT) + npages)) {
		err = rdfs_commit(inode, rdfs_wb_handle(inode));
		if (err)
			return err;
	}
	for (i = 0;; i++) {
		struct rdfs_io_set set = {};

		err = rdfs_data_read_once(inode, handle, pages, npages, base, &t, &set);
		if (!err || i + 1 == RDFS_IO_TRIES || !rdfs_io_retry(&t, err, &set))
			break;
		if (t.failed)
			atomic64_inc(&rdfs_stats.read_failovers);
	}
	return rdfs_io_app_err(err);
}

/*
 * Copy @i of a write layout missed the write that the others took: the
 * helper marks it stale (0), or it cannot (the write failed).
 */
static int rdfs_copy_lost(struct inode *inode, u64 handle, const struct rdfs_dev_seg *s,
			  u64 a, u64 b)
{
	struct rdfs_dev_copy_lost cl = { .offset = a, .length = b - a,
					 .server_id = s->server_id };
	struct rdfs_dev_call c;
	int err;

	rdfs_call_init(&c, RDFS_DEV_COPY_LOST, inode->i_ino, handle);
	rdfs_call_arg(&c, &cl, sizeof(cl));
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (!err)
		atomic64_inc(&rdfs_stats.copies_lost);
	/* the next write layout must not name the stale copy */
	rdfs_layout_forget(inode);
	return err;
}

/*
 * After a write to the segments of @rep, settle each run written to several
 * copies (a segment and the RDFS_DEV_SEG_COPY ones after it): a fence anywhere
 * is -ESTALE (the whole write is tried again), a run no copy took is its
 * error, and copies that failed where another took the bytes are reported
 * lost. [pos, end) is the write.
 */
static int rdfs_write_settle(struct inode *inode, u64 handle,
			     const struct rdfs_dev_layout_reply *rep, const int *seg_err,
			     u64 pos, u64 end)
{
	u32 i, j, k;
	int err = 0;

	for (i = 0; i < rep->nsegs; i++)
		if (seg_err[i] == -ESTALE)
			return -ESTALE;
	for (i = 0; i < rep->nsegs && !err; i = j) {
		const struct rdfs_dev_seg *s = &rep->segs[i];
		u64 a = max(s->offset, pos), b = min(s->offset + s->length, end);
		u32 ok = 0;

		for (j = i; j < rep->nsegs && (j == i || rep->segs[j].flags & RDFS_DEV_SEG_COPY); j++)
			ok += !seg_err[j];
		if (a >= b)
			continue;
		if (!ok)
			return seg_err[i];
		for (k = i; k < j && !err; k++)
			if (seg_err[k])
				err = rdfs_copy_lost(inode, handle, &rep->segs[k], a, b);
	}
	return err;
}

/* One try of rdfs_data_write(); -ESTALE: a capability was fenced. */
static int rdfs_data_write_once(struct inode *inode, u64 handle, struct page **pages,
				int npages, u64 base, u32 off, u64 len, struct rdfs_io_try *t,
				struct rdfs_io_set *set)
{
	struct rdfs_sb_info *sbi = RDFS_SB(inode->i_sb);
	u64 pos = base + off, end = pos + len;
	u64 lo = round_down(pos, RDFS_BLOCK_SIZE), hi = round_up(end, RDFS_BLOCK_SIZE);
	const struct rdfs_dev_layout_reply *rep;
	struct rdfs_layout *l;
	u64 covered = pos, copy_a = 0, copy_b = 0;
	u32 i;
	int err = 0;

	if (!len || off + len > ((u64)npages << PAGE_SHIFT))
		return -EINVAL;
	l = rdfs_layout_get(inode, handle, lo, hi - lo, true, rdfs_io_try_flags(t),
			    t->failed_server);
	if (IS_ERR(l))
		return PTR_ERR(l);
	rep = rdfs_layout_reply(l);
	set->seg_err = kcalloc(max(rep->nsegs, 1u), sizeof(*set->seg_err), GFP_NOFS);
	if (!set->seg_err) {
		rdfs_layout_put(l);
		return -ENOMEM;
	}
	for (i = 0; i < rep->nsegs && !err; i++) {
		const struct rdfs_dev_seg *s = &rep->segs[i];
		u64 a = max(s->offset, pos), b = min(s->offset + s->length, end), n;

		if (a >= b)
			continue;
		if (s->flags & RDFS_DEV_SEG_COPY) {
			/* another copy of the run before it: the same bytes again */
			if (!i || a != copy_a || b != copy_b || (s->flags & RDFS_DEV_SEG_HOLE))
				err = -EIO;
		} else if (a != covered || (s->flags & RDFS_DEV_SEG_HOLE)) {
			err = -EIO;
		}
		if (err)
			break;
		copy_a = a;
		copy_b = b;
		/* a copy that fails at the start is settled below, with the others */
		for (; a < b && !set->seg_err[i]; a += n) {
			/* at most RDFS_IO_MAX_LEN / 4096 pages, whatever the head */
			n = min_t(u64, b - a, RDFS_IO_MAX_LEN - a % RDFS_BLOCK_SIZE);
			rdfs_io_add(sbi, set, i, RDFS_OP_WRITE, s->server_id,
				    (u8 *)rep + s->cap_off, s->cap_len,
				    s->block + ((a - s->offset) / RDFS_BLOCK_SIZE),
				    pages, a - base, n, 0);
		}
		covered = b;
	}
	rdfs_io_drain(set);
	if (err)
		pr_warn_ratelimited(RDFS_MSG(1500014)
				    "ino=%lu: bad write layout [%llu, %llu) at %llu\n",
				    inode->i_ino, pos, end, covered);
	else if (covered < end)
		err = -EIO;
	else if (set->err)
		err = rdfs_write_settle(inode, handle, rep, set->seg_err, pos, end);
	kfree(set->seg_err);
	set->seg_err = NULL;
	rdfs_layout_put(l);
	if (err && err != -ESTALE)
		pr_warn_ratelimited(RDFS_MSG(1500015) "ino=%lu: write [%llu, %llu) failed: %d\n",
				    inode->i_ino, pos, end, err);
	return err;
}

/*
 * Write the @len bytes from byte @off of @npages consecutive pages (under
 * writeback) to the I/O servers, allocating blocks as needed. Exactly those
 * bytes go: a partial page's other bytes are as this client last read them
 * and may be stale, so the I/O server keeps its own (read-modify-write). A
 * fenced capability is retried with a layout the helper fetches again, and so
 * is a failed I/O server (a restarted one: the connection to it was stale;
 * writes are idempotent). Where a file has several copies, one that fails
 * while another takes the bytes is reported lost instead. With @unstable
 * the I/O servers acknowledge on receipt, and each one's verifier is noted
 * there for the IO_COMMIT that makes the bytes durable (unstable.c).
 */
int rdfs_data_write_at(struct inode *inode, u64 handle, struct page **pages, int npages,
		       u64 base, u32 off, u64 len, struct rdfs_wverf *unstable)
{
	struct rdfs_io_try t = {};
	int err, i;

	if (base & (PAGE_SIZE - 1))
		return -EINVAL;
	for (i = 0;; i++) {
		struct rdfs_io_set set = { .unstable = unstable };

		err = rdfs_data_write_once(inode, handle, pages, npages, base, off, len, &t,
					   &set);
		if (!err || i + 1 == RDFS_IO_TRIES || !rdfs_io_retry(&t, err, &set))
			break;
	}
	return rdfs_io_app_err(err);
}
