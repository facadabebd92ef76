// SPDX-License-Identifier: MIT
/*
 * io_write.c - the write path: allocate (LAYOUT with allocate) the blocks the
 * write touches, split by extents, send every WRITE at once, then record the
 * written blocks and the new size for the next COMMIT.
 *
 * A write that covers only part of a block is sent as it is: the metaserver
 * hands out only blocks that read as zeros (it zeroes recycled ones before
 * allocating them), and the I/O server does the read-modify-write of the
 * block, serialized per block, so partial writes of one block from any number
 * of clients all land.
 *
 * Writes that allocate at the end of the file preallocate ahead of themselves
 * (like XFS's speculative preallocation), so a stream pays one LAYOUT per
 * window rather than one per write: see stream_note().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "client_internal.h"
#include "frame.h"
#include "log.h"

static int plan_add(struct write_plan *p, const struct layout_seg *s, int k, uint64_t a,
		    uint64_t b)
{
	struct io_req *r;

	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;

		r = realloc(p->r, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		p->r = r;
		p->cap = cap;
	}
	r = &p->r[p->n++];
	memset(r, 0, sizeof(*r));
	r->seg = s;
	r->copy = k;
	r->first_block = s->copy[k].block + (BLK_DOWN(a) - s->start);
	r->head = a % BLK;
	r->length = b - a;
	r->block_count = BLK_UP(r->head + r->length);
	r->stable = p->stable;
	r->iov[0].iov_base = (void *)(p->buf + (a - p->off));
	r->iov[0].iov_len = b - a;
	r->niov = 1;
	return 0;
}

/*
 * WRITEs of the caller's bytes ∩ extent @s, at most RDFS_IO_MAX each, to every
 * copy: the requests of one piece are neighbours, copy 0 first.
 */
static int plan_extent(struct write_plan *p, const struct layout_seg *s)
{
	uint64_t a = s->start * BLK > p->off ? s->start * BLK : p->off;
	uint64_t b = s->end * BLK < p->off + p->size ? s->end * BLK : p->off + p->size;
	int ret;

	while (a < b) {
		uint64_t piece_end = (a / RDFS_IO_MAX + 1) * RDFS_IO_MAX;
		uint64_t e = piece_end < b ? piece_end : b;

		for (int k = 0; k < s->ncopies; k++) {
			ret = plan_add(p, s, k, a, e);
			if (ret)
				return ret;
		}
		a = e;
	}
	return 0;
}

/*
 * Under in->lock: note the write [off, end) at the end of the file and return
 * how many blocks an allocation for it should ask for from its first block
 * (0: just what it touches). A write that continues the last one (give or
 * take RDFS_STREAM_SLACK, as a multi-threaded writer reorders a little) is a
 * stream: each of its allocations asks for the window, which then doubles. A
 * first write or a jump starts over, so sparse writes stay sparse. The extra
 * blocks are unwritten, so nobody reads them as data, and the metaserver frees
 * what is left of them past EOF at the file's last release.
 */
static uint64_t stream_note(struct rdfs_inode *in, uint64_t off, uint64_t end, int allocating)
{
	uint64_t w;

	if (!in->stream_end || off > in->stream_end + RDFS_STREAM_SLACK ||
	    off + RDFS_STREAM_SLACK < in->stream_end) {
		in->stream_end = end;
		in->prealloc_window = 0;
		return 0;
	}
	if (end > in->stream_end)
		in->stream_end = end;
	if (!allocating)
		return 0;
	w = in->prealloc_window ? in->prealloc_window : RDFS_PREALLOC_MIN;
	in->prealloc_window = w * 2 < RDFS_PREALLOC_MAX ? w * 2 : RDFS_PREALLOC_MAX;
	return BLK_UP(w);
}

/*
 * The segments of blocks [bstart, bend) with write rights, allocating what is
 * missing: exactly that inside the file, ahead of the write at its end.
 */
static int write_layout(struct rdfs_file *f, uint64_t off, size_t size, struct layout_seg **segs)
{
	struct rdfs_client *c = f->c;
	struct rdfs_inode *in = f->in;
	uint64_t bstart = BLK_DOWN(off), bend = BLK_UP(off + size), fetch_end = bend;
	int n;

	pthread_mutex_lock(&in->lock);
	n = layout_cache_lookup(&in->layout, bstart, bend, 1, cap_now_ns(), segs);
	if (off + size >= inode_size(in)) {
		uint64_t want = bstart + stream_note(in, off, off + size, n == -ENOENT);

		if (want > fetch_end)
			fetch_end = want;
	}
	pthread_mutex_unlock(&in->lock);
	if (n != -ENOENT)
		return n;

	n = layout_get(c, in, f, NULL, bstart, bend, fetch_end, 1, segs);
	if (n == -ENOSPC && fetch_end > bend) {
		/* too little space for the window: the write alone may still fit */
		pthread_mutex_lock(&in->lock);
		in->prealloc_window = 0;
		pthread_mutex_unlock(&in->lock);
		return layout_get(c, in, f, NULL, bstart, bend, bend, 1, segs);
	}
	if (n >= 0 && fetch_end > bend)
		__atomic_add_fetch(&c->stats.prealloc_bytes, (fetch_end - bend) * BLK,
				   __ATOMIC_RELAXED);
	return n;
}

int write_plan_start(struct rdfs_file *f, struct write_plan *p)
{
	int n, i, ret = 0;

	n = write_layout(f, p->off, p->size, &p->segs);
	if (n < 0) {
		p->segs = NULL;
		return n;
	}
	p->nsegs = n;
	p->stable = f->c->opts.write_stable;
	for (i = 0; i < n && ret == 0; i++)
		ret = plan_extent(p, &p->segs[i]);
	if (ret == 0) {
		io_batch_begin(&p->batch, f->c, RDFS_OP_WRITE, p->r, p->n);
		p->started = 1;
	}
	return ret;
}

int io_copy_stale(struct rdfs_client *c, struct rdfs_inode *in, struct rdfs_file *f,
		  const struct rdfs_cred *cr, uint32_t server_id, uint64_t b0, uint64_t b1)
{
	Rdfs__StaleReq req = RDFS__STALE_REQ__INIT;
	Rdfs__BlockRange range = RDFS__BLOCK_RANGE__INIT, *rp = &range;
	Rdfs__Cred cred;
	int ret;

	cred_to_pb(f ? &f->cred : cr, &cred);
	req.cred = &cred;
	req.ino = in->ino;
	req.server_id = server_id;
	range.first = b0 * BLK;
	range.count = (b1 - b0) * BLK;
	req.ranges = &rp;
	req.n_ranges = 1;
	/* marking a copy stale twice is marking it once */
	if (f)
		ret = ms_file_call(f, RDFS_OP_STALE, &req.base, &req.handle, NULL, NULL,
				   MS_IDEMPOTENT);
	else
		ret = ms_call(c, RDFS_OP_STALE, &req.base, NULL, NULL, MS_IDEMPOTENT);
	/* EIO: it is the last current copy (a file of one copy): the caller reports it */
	if (ret && ret != -EIO)
		log_warn(1600014,
			 "ino=%llu: cannot mark the copy on I/O server %u of blocks %llu-%llu "
			 "stale: %s", (unsigned long long)in->ino, server_id,
			 (unsigned long long)b0, (unsigned long long)b1, strerror(-ret));
	return ret;
}

/* The file offset of the bytes request @r of plan @p carries. */
static uint64_t req_file_off(const struct write_plan *p, const struct io_req *r)
{
	return p->off + (uint64_t)((const uint8_t *)r->iov[0].iov_base - p->buf);
}

/*
 * A WRITE failed with @ret (not a refused capability). Where another copy
 * took every piece a failed request carried, the write has landed: the copies
 * that missed it are marked stale (never served again) and it is 0. A piece no
 * copy took, or a copy the metaserver would not mark, is @ret.
 */
static int write_copies_settle(struct rdfs_file *f, struct write_plan *p, int ret)
{
	size_t i = 0, j, k;

	while (i < p->n) {
		int ok = 0, bad = 0;

		for (j = i; j < p->n && p->r[j].seg == p->r[i].seg &&
			    p->r[j].iov[0].iov_base == p->r[i].iov[0].iov_base; j++) {
			if (p->r[j].status)
				bad++;
			else
				ok++;
		}
		if (bad && !ok)
			return ret;
		i = j;
	}
	for (k = 0; k < p->n; k++) {
		const struct io_req *r = &p->r[k];
		uint64_t a = req_file_off(p, r);

		if (r->status && io_copy_stale(f->c, f->in, f, NULL, io_req_server(r), BLK_DOWN(a),
					       BLK_UP(a + r->length)))
			return ret;
	}
	/* later writes must not go to the stale copy: its layout is asked for again */
	layout_refused(f->in, -EIO, BLK_DOWN(p->off), BLK_UP(p->off + p->size));
	return 0;
}

int write_plan_end(struct rdfs_file *f, struct write_plan *p)
{
	struct rdfs_inode *in = f->in;
	uint64_t bstart = BLK_DOWN(p->off), bend = BLK_UP(p->off + p->size);
	int ret = -EIO;
	size_t j;

	if (p->started)
		ret = io_batch_end(&p->batch);
	if (ret && p->started && !io_cap_error(ret))
		ret = write_copies_settle(f, p, ret);
	pthread_mutex_lock(&in->lock);
	if (ret == 0) {
		ret = range_set_add(&in->uncommitted, bstart, bend);
		if (p->off + p->size > in->pending_size)
			in->pending_size = p->off + p->size;
		in->mtime_ns = cap_now_ns();
		in->dirty = 1;
		/* a copy marked stale holds nothing we must commit */
		if (!p->stable)
			for (j = 0; j < p->n && ret == 0; j++)
				if (p->r[j].status == 0) {
					const struct io_req *r = &p->r[j];
					uint64_t a = req_file_off(p, r);

					ret = inode_note_unstable(in, io_req_server(r), r->verifier,
								  0, BLK_DOWN(a),
								  BLK_UP(a + r->length));
				}
	}
	/* whatever landed (even in part) may differ from what a read-ahead holds */
	if (p->started)
		inode_data_changed(in);
	pthread_mutex_unlock(&in->lock);

	free(p->r);
	p->r = NULL;
	p->n = p->cap = 0;
	p->started = 0;
	if (p->segs)
		layout_segs_put(p->segs, p->nsegs);
	p->segs = NULL;
	return ret;
}

/*
 * One attempt at writing [off, off + size): 0, the I/O servers' error in
 * *@io_err, or the error of starting (the metaserver's, such as EACCES).
 */
static int write_range(struct rdfs_file *f, const uint8_t *buf, size_t size, uint64_t off,
		       int *io_err)
{
	struct write_plan p = { .off = off, .size = size, .buf = buf };
	int ret;

	ret = write_plan_start(f, &p);
	*io_err = write_plan_end(f, &p);
	return ret ? ret : *io_err;
}

int write_now(struct rdfs_file *f, const uint8_t *buf, size_t size, uint64_t off)
{
	int ret = 0, io_err = 0, attempt;

	for (attempt = 0; size > 0 && attempt < IO_TRIES; attempt++) {
		ret = write_range(f, buf, size, off, &io_err);
		/* the metaserver's own answer (EACCES after a chmod, say) is final */
		if (ret != io_err)
			return ret;
		/* a refused capability, or a restarted server that may be elsewhere */
		if (ret == -EIO || io_cap_error(ret))
			layout_refused(f->in, ret, BLK_DOWN(off), BLK_UP(off + size));
		if (!io_cap_error(ret))
			break;
	}
	return io_cap_error(ret) ? -EIO : ret;
}

/* Where a quota or the volumes' space ran out. */
static int limit_error(int ret)
{
	return ret == -EDQUOT || ret == -ENOSPC;
}

int write_what_fits(struct rdfs_file *f, const uint8_t *buf, size_t size, uint64_t off)
{
	uint64_t ok = off, bad = off + size;
	int ret = write_now(f, buf, size, off);

	if (!limit_error(ret))
		return ret;
	/*
	 * Invariant: [off, ok) is written and [ok, bad) does not fit. Try up
	 * to a block boundary halfway; what the limit still allows ends up
	 * written in at most log2(blocks) tries, on this error path only.
	 */
	for (;;) {
		uint64_t mid = (ok + (bad - ok) / 2) / BLK * BLK;
		int r;

		if (mid <= ok)
			mid = (ok / BLK + 1) * BLK;
		if (mid >= bad)
			return ret;
		r = write_now(f, buf + (ok - off), (size_t)(mid - ok), ok);
		if (!r)
			ok = mid;
		else if (limit_error(r))
			bad = mid;
		else
			return r;
	}
}

static int write_behind_on(const struct rdfs_file *f)
{
	return f->c->opts.write_behind_kb > 0 && !(f->flags & O_DIRECT) &&
	       !(f->flags & (O_SYNC | O_DSYNC));
}

static ssize_t pwrite_at(struct rdfs_file *f, const void *buf, size_t size, off_t off,
			 off_t *where, struct rdfs_lend *lend)
{
	struct rdfs_inode *in = f->in;
	int append = f->flags & O_APPEND;
	ssize_t ret = 0;

	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	if (off < 0)
		return -EINVAL;
	if (size > (1u << 30))
		size = 1u << 30;
	if (append) {
		pthread_mutex_lock(&in->append_lock);
		pthread_mutex_lock(&in->lock);
		off = inode_size(in);
		pthread_mutex_unlock(&in->lock);
	}
	if (where)
		*where = off;
	if (write_behind_on(f)) {
		ret = write_behind_write(f, buf, size, off, lend);
	} else {
		/* what write-behind holds of an earlier open goes first */
		ret = write_behind_drain(in, 0);
		if (ret == 0)
			ret = write_now(f, buf, size, off);
		if (ret == 0)
			ret = size;
	}
	if (append)
		pthread_mutex_unlock(&in->append_lock);
	if (ret > 0)
		__atomic_store_n(&f->written, 1, __ATOMIC_RELAXED);
	return ret;
}

ssize_t rdfs_pwrite_at(struct rdfs_file *f, const void *buf, size_t size, off_t off,
		       off_t *where)
{
	return pwrite_at(f, buf, size, off, where, NULL);
}

ssize_t rdfs_pwrite(struct rdfs_file *f, const void *buf, size_t size, off_t off)
{
	return pwrite_at(f, buf, size, off, NULL, NULL);
}

ssize_t rdfs_pwrite_lend(struct rdfs_file *f, const void *buf, size_t size, off_t off,
			 struct rdfs_lend *lend)
{
	lend->kept = 0;
	return pwrite_at(f, buf, size, off, NULL, lend);
}
