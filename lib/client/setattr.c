// SPDX-License-Identifier: MIT
/*
 * setattr.c - SETATTR, and what a size change needs around it: a shrink to
 * the middle of a block zeroes the rest of that block on its I/O server first
 * (so a later extension reads zeros there, not the cut-off bytes), and after
 * the change this client forgets layouts and writes past the new end.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "frame.h"

static int64_t timespec_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

int io_zero_tail(struct rdfs_client *c, struct rdfs_inode *in, struct rdfs_file *f,
		 const struct rdfs_cred *cr, uint64_t size)
{
	uint64_t b = BLK_DOWN(size);
	struct layout_seg *segs = NULL;
	struct io_req r[RDFS_MAX_COPIES];
	int n, ret = 0, attempt, has_data, k;

	if (size % BLK == 0)
		return 0;
	for (attempt = 0; attempt < IO_TRIES; attempt++) {
		n = layout_get(c, in, f, cr, b, b + 1, b + 1, 0, &segs);
		if (n < 0)
			return n;
		pthread_mutex_lock(&in->lock);
		has_data = n == 1 && !segs[0].hole &&
			   (!segs[0].unwritten || inode_block_written_here(in, b, b + 1));
		pthread_mutex_unlock(&in->lock);
		if (!has_data) {
			/* a hole or a block nobody wrote reads as zeros already */
			layout_segs_put(segs, n);
			return 0;
		}
		for (k = 0, has_data = 1; k < segs[0].ncopies; k++)
			has_data &= seg_copy_usable(&segs[0], k, RDFS_CAP_WRITE);
		if (!has_data) {
			/* the block is allocated: asking with allocate only grants WRITE */
			layout_segs_put(segs, n);
			n = layout_get(c, in, f, cr, b, b + 1, b + 1, 1, &segs);
			if (n < 0)
				return n;
		}
		/* every copy of the block, as any write */
		memset(r, 0, sizeof(r));
		for (k = 0; k < segs[0].ncopies; k++) {
			r[k].seg = &segs[0];
			r[k].copy = k;
			r[k].first_block = segs[0].copy[k].block;
			r[k].block_count = 1;
			r[k].head = size % BLK;
			r[k].length = BLK - r[k].head;
			r[k].stable = 1;
			r[k].iov[0].iov_base = (void *)rdfs_zero_block;
			r[k].iov[0].iov_len = r[k].length;
			r[k].niov = 1;
		}
		ret = io_batch_run(c, RDFS_OP_WRITE, r, segs[0].ncopies);
		if (ret && !io_cap_error(ret)) {
			/* landed on some copies: the others are stale, if the metaserver agrees */
			int ok = 0, err = 0;

			for (k = 0; k < segs[0].ncopies; k++)
				ok += r[k].status == 0;
			for (k = 0; ok && k < segs[0].ncopies && !err; k++)
				if (r[k].status)
					err = io_copy_stale(c, in, f, cr, io_req_server(&r[k]), b, b + 1);
			if (ok && !err) {
				ret = 0;
				layout_refused(in, -EIO, b, b + 1);
			}
		}
		layout_segs_put(segs, n);
		if (!io_cap_error(ret))
			break;
		layout_refused(in, ret, b, b + 1);
	}
	return io_cap_error(ret) ? -EIO : ret;
}

/* The size the file has now, for deciding whether a SET_SIZE shrinks it. */
int inode_current_size(struct rdfs_client *c, const struct rdfs_cred *cr, struct rdfs_inode *in,
			uint64_t *size)
{
	struct stat st;
	int ret;

	pthread_mutex_lock(&in->lock);
	*size = inode_size(in);
	ret = in->open_count > 0 || in->dirty;
	pthread_mutex_unlock(&in->lock);
	if (ret)
		return 0;
	ret = rdfs_getattr(c, cr, in->ino, &st);
	if (ret)
		return ret;
	*size = st.st_size;
	return 0;
}

int rdfs_setattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		 const struct stat *in_st, unsigned int valid, struct rdfs_file *f, struct stat *out)
{
	Rdfs__SetattrReq req = RDFS__SETATTR_REQ__INIT;
	Rdfs__AttrReply *rep = NULL;
	struct rdfs_inode *in = NULL;
	Rdfs__Cred cred;
	uint64_t old_size, then;
	int ret;

	dir_attr_forget(c, ino);
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.ino = ino;
	req.valid = valid;
	req.mode = in_st->st_mode;
	req.uid = in_st->st_uid;
	req.gid = in_st->st_gid;
	req.size = in_st->st_size;
	req.atime_ns = timespec_ns(&in_st->st_atim);
	req.mtime_ns = timespec_ns(&in_st->st_mtim);
	req.ctime_ns = timespec_ns(&in_st->st_ctim);

	if (valid & RDFS_SET_SIZE) {
		if (in_st->st_size < 0)
			return -EINVAL;
		in = f ? f->in : inode_get(&c->itab, ino);
		if (!in)
			return -ENOMEM;
		/* write-behind bytes must not land past the new end after it */
		write_behind_drain(in, 0);
		ret = inode_current_size(c, cr, in, &old_size);
		if (ret == 0 && (uint64_t)in_st->st_size < old_size)
			ret = io_zero_tail(c, in, f, cr, in_st->st_size);
		if (ret)
			goto out;
	}

	then = size_clock_now(c);
	if (f)
		ret = ms_file_call(f, RDFS_OP_SETATTR, &req.base, &req.handle,
				   &rdfs__attr_reply__descriptor, &rep, MS_IDEMPOTENT);
	else
		ret = ms_call(c, RDFS_OP_SETATTR, &req.base, &rdfs__attr_reply__descriptor, &rep,
			      MS_IDEMPOTENT);
	if (ret)
		goto out;

	if (in) {
		pthread_mutex_lock(&in->lock);
		inode_truncate_state(in, in_st->st_size);
		if (rep->attr)
			in->ms_size = rep->attr->size;
		inode_size_settled(c, in);
		pthread_mutex_unlock(&in->lock);
	}
	if (rep->attr)
		attr_note(c, rep->attr, then, out);
	else if (out)
		ret = rdfs_getattr(c, cr, ino, out);
	protobuf_c_message_free_unpacked(&rep->base, NULL);
out:
	if (in && !f)
		inode_put(&c->itab, in);
	return ret;
}

static uint64_t u64_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Zero the bytes [@from, @to) of @f, which lie inside one block. */
static int zero_bytes(struct rdfs_file *f, uint64_t from, uint64_t to)
{
	if (from >= to)
		return 0;
	return write_now(f, rdfs_zero_block, (size_t)(to - from), from);
}

/* Allocate the blocks of [@off, @off + @len) of @f (unwritten: they read as zeros). */
static int allocate_range(struct rdfs_file *f, uint64_t off, uint64_t len)
{
	uint64_t b = BLK_DOWN(off), end = BLK_UP(off + len);

	while (b < end) {
		struct layout_seg *segs = NULL;
		int n = layout_get(f->c, f->in, f, NULL, b, end, end, LAYOUT_ALLOC_KEEP, &segs);

		if (n < 0)
			return n;
		if (n == 0)
			return -EIO;
		b = segs[n - 1].end;
		layout_segs_put(segs, n);
	}
	return 0;
}

/*
 * COLLAPSE_RANGE or INSERT_RANGE (@insert): the metaserver moves the layout
 * from @off on. What this client wrote is durable and committed first: a
 * COMMIT that came after would name the old offsets.
 */
static int shift_range(struct rdfs_file *f, int insert, uint64_t off, uint64_t len)
{
	Rdfs__ShiftReq req = RDFS__SHIFT_REQ__INIT;
	Rdfs__AttrReply *rep = NULL;
	struct rdfs_inode *in = f->in;
	Rdfs__Cred cred;
	int ret;

	if (off % BLK || len % BLK)
		return -EINVAL;
	ret = rdfs_fsync(f, 0);
	if (ret)
		return ret;
	cred_to_pb(&f->cred, &cred);
	req.cred = &cred;
	req.ino = in->ino;
	req.offset = off;
	req.length = len;
	req.insert = insert;
	/* not idempotent: sent once, never again after a lost reply */
	ret = ms_file_call(f, RDFS_OP_SHIFT, &req.base, &req.handle, &rdfs__attr_reply__descriptor,
			   &rep, 0);
	if (ret)
		return ret;
	pthread_mutex_lock(&in->lock);
	/* the file was fenced: every cached extent is of the old generation */
	layout_cache_forget(&in->layout, 0, UINT64_MAX);
	range_set_remove(&in->committed, off / BLK, UINT64_MAX);
	if (rep->attr && rep->attr->ino == in->ino) {
		in->ms_size = rep->attr->size;
		if (!in->dirty)
			in->pending_size = rep->attr->size;
		inode_size_settled(f->c, in);
	}
	inode_data_changed(in);
	pthread_mutex_unlock(&in->lock);
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return 0;
}

int rdfs_fallocate(struct rdfs_file *f, int mode, uint64_t off, uint64_t len)
{
	Rdfs__PunchReq req = RDFS__PUNCH_REQ__INIT;
	Rdfs__AttrReply *rep = NULL;
	struct rdfs_inode *in = f->in;
	int keep = mode & FALLOC_FL_KEEP_SIZE;
	uint64_t size, end, head_end, tail_start;
	Rdfs__Cred cred;
	struct stat st;
	int ret;

	if (len == 0)
		return -EINVAL;
	if (off > INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return -EFBIG;
	end = off + len;
	switch (mode & ~FALLOC_FL_KEEP_SIZE) {
	case 0:
		ret = allocate_range(f, off, len);
		break;
	case FALLOC_FL_PUNCH_HOLE:
		if (!keep)
			return -EOPNOTSUPP;	/* as everywhere: a hole keeps the size */
		/* fall through */
	case FALLOC_FL_ZERO_RANGE:
		/* nothing of ours may land in the range after it */
		ret = write_behind_drain(in, 1);
		if (!ret)
			ret = inode_current_size(f->c, &f->cred, in, &size);
		if (ret)
			return ret;
		/* partial blocks at either end (inside the file): their bytes are zeroed */
		head_end = u64_min(BLK_UP(off) * BLK, end);
		tail_start = BLK_DOWN(end) * BLK > head_end ? BLK_DOWN(end) * BLK : head_end;
		ret = zero_bytes(f, off, u64_min(head_end, size));
		if (!ret && end % BLK)
			ret = zero_bytes(f, tail_start, u64_min(end, size));
		if (ret)
			return ret;
		/* the whole blocks between leave the file: fenced, freed, holes */
		cred_to_pb(&f->cred, &cred);
		req.cred = &cred;
		req.ino = in->ino;
		req.offset = off;
		req.length = len;
		ret = ms_file_call(f, RDFS_OP_PUNCH, &req.base, &req.handle,
				   &rdfs__attr_reply__descriptor, &rep, MS_IDEMPOTENT);
		if (ret)
			return ret;
		protobuf_c_message_free_unpacked(&rep->base, NULL);
		pthread_mutex_lock(&in->lock);
		layout_cache_forget(&in->layout, 0, UINT64_MAX);
		/* the whole blocks are holes now: what we wrote to them is gone */
		if (BLK_DOWN(end) > BLK_UP(off)) {
			range_set_remove(&in->uncommitted, BLK_UP(off), BLK_DOWN(end));
			range_set_remove(&in->committed, BLK_UP(off), BLK_DOWN(end));
		}
		inode_data_changed(in);
		pthread_mutex_unlock(&in->lock);
		/* ZERO_RANGE leaves the range allocated (later writes find room): unwritten again */
		if ((mode & FALLOC_FL_ZERO_RANGE) && BLK_DOWN(end) > BLK_UP(off))
			ret = allocate_range(f, BLK_UP(off) * BLK,
					     (BLK_DOWN(end) - BLK_UP(off)) * BLK);
		break;
	case FALLOC_FL_COLLAPSE_RANGE:
	case FALLOC_FL_INSERT_RANGE:
		return keep ? -EINVAL : shift_range(f, mode == FALLOC_FL_INSERT_RANGE, off, len);
	default:
		return -EOPNOTSUPP;	/* UNSHARE_RANGE: nothing is shared */
	}
	if (ret || keep)
		return ret;
	ret = inode_current_size(f->c, &f->cred, in, &size);
	if (ret || end <= size)
		return ret;
	memset(&st, 0, sizeof(st));
	st.st_size = (off_t)end;
	return rdfs_setattr(f->c, &f->cred, in->ino, &st, RDFS_SET_SIZE, f, NULL);
}

int64_t rdfs_seek_data(struct rdfs_file *f, uint64_t off, int whence)
{
	struct rdfs_inode *in = f->in;
	uint64_t size, b, end;
	int ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	/* our own writes still behind are data too */
	ret = write_behind_drain(in, 1);
	if (!ret)
		ret = inode_current_size(f->c, &f->cred, in, &size);
	if (ret)
		return ret;
	if (off >= size)
		return -ENXIO;
	b = BLK_DOWN(off);
	end = BLK_UP(size);
	while (b < end) {
		struct layout_seg *segs = NULL;
		int n = layout_get(f->c, in, f, NULL, b, end, end, 0, &segs), i;

		if (n <= 0)
			return n < 0 ? n : -EIO;
		for (i = 0; i < n; i++) {
			const struct layout_seg *s = &segs[i];
			int data;

			/* unwritten blocks read as zeros, except to the client that wrote them */
			pthread_mutex_lock(&in->lock);
			data = !s->hole && (!s->unwritten ||
					    inode_block_written_here(in, s->start, s->end));
			pthread_mutex_unlock(&in->lock);
			if (data == (whence == SEEK_DATA))
				break;
		}
		if (i < n) {
			uint64_t at = segs[i].start * BLK;

			layout_segs_put(segs, n);
			at = at > off ? at : off;
			return (int64_t)(at < size ? at : size);
		}
		b = segs[n - 1].end;
		layout_segs_put(segs, n);
	}
	/* past the last data there is the hole at the end of the file */
	return whence == SEEK_DATA ? -ENXIO : (int64_t)size;
}
