// SPDX-License-Identifier: MIT
/*
 * write_behind.c - write-behind: rdfs_pwrite() copies the caller's bytes and
 * returns; writes that continue each other are gathered into chunk-sized
 * units, and each full unit is sent at once (all its WRITEs in flight) while
 * the caller goes on writing (SuperNBD's asynchronous write, and what NFS
 * clients do). At most opts.write_behind_kb are in flight; past that a write
 * waits for the oldest unit.
 *
 * What is gathered goes out when a write does not continue it, and everything
 * is waited for at a read of the file through this client, a truncate,
 * flush, fsync and release. A unit whose WRITEs fail is retried once on a
 * fresh layout (a unit a quota or the space cuts short: what still fits of
 * it); if that fails too the error is kept and returned by the
 * file's next write and by its next flush, fsync or release, which forgets it
 * (NFS's deferred write errors): a failure is never silent.
 *
 * The state is per inode, not per open, so a read through any open of the
 * file here sees the bytes written through another. One open owns the
 * gathered bytes at a time (its handle and credentials send them); a write
 * through another open sends them first.
 *
 * A write that is a whole chunk by itself, with nothing gathered before it,
 * need not be copied when its caller can hand the buffer over
 * (rdfs_pwrite_lend: rdfs-fuse's request buffers): the unit is sent from it
 * and gives it back through the caller's release when it is freed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "client_internal.h"
#include "log.h"

#define WB_MAX_UNITS		64

/* One chunk-sized run of gathered bytes and the WRITEs that carry it. */
struct wb_unit {
	uint64_t off;
	size_t len;
	size_t cap;
	uint8_t *buf;			/* ours, or lent (never written through then) */
	void (*release)(void *arg);	/* a lent buffer's, else NULL */
	void *release_arg;
	struct write_plan plan;
};

struct write_behind {
	struct rdfs_file *owner;	/* whose writes the units hold */
	struct wb_unit *fill;		/* gathering, not yet sent */
	struct wb_unit *q[WB_MAX_UNITS];	/* sent, oldest first */
	int head;
	int count;
	uint64_t inflight;		/* bytes in q */
	int error;			/* first failure not yet reported by a flush */
};

static uint64_t wb_limit(const struct rdfs_client *c)
{
	return (uint64_t)c->opts.write_behind_kb << 10;
}

static void unit_free(struct wb_unit *u)
{
	if (!u)
		return;
	if (u->release)
		u->release(u->release_arg);
	else
		free(u->buf);
	free(u);
}

/* What a later write, flush or fsync reports for a write-behind failure @ret. */
static int wb_error_of(int ret)
{
	return ret == -ENOSPC || ret == -EDQUOT || ret == -ENOMEM || ret == -EACCES ? ret : -EIO;
}

/* Wait for the oldest unit in flight; a failure is retried once, then kept. */
static void wb_complete_oldest(struct rdfs_inode *in, struct write_behind *wb)
{
	struct wb_unit *u = wb->q[wb->head];
	int ret;

	wb->head = (wb->head + 1) % WB_MAX_UNITS;
	wb->count--;
	wb->inflight -= u->len;
	ret = write_plan_end(wb->owner, &u->plan);
	if (ret == -EIO || io_cap_error(ret)) {
		layout_refused(in, ret, BLK_DOWN(u->off), BLK_UP(u->off + u->len));
		ret = write_what_fits(wb->owner, u->buf, u->len, u->off);
	} else if (ret == -EDQUOT || ret == -ENOSPC) {
		ret = write_what_fits(wb->owner, u->buf, u->len, u->off);
	}
	if (ret) {
		log_warn(1600015, "write-behind of ino=%llu bytes %llu+%zu failed: %s",
			 (unsigned long long)in->ino, (unsigned long long)u->off, u->len,
			 strerror(-ret));
		if (!wb->error)
			wb->error = wb_error_of(ret);
	}
	unit_free(u);
}

/* 1 if a unit in flight shares a block with @u. */
static int wb_overlaps(const struct write_behind *wb, const struct wb_unit *u)
{
	uint64_t start = BLK_DOWN(u->off), end = BLK_UP(u->off + u->len);
	int i;

	for (i = 0; i < wb->count; i++) {
		const struct wb_unit *q = wb->q[(wb->head + i) % WB_MAX_UNITS];

		if (BLK_DOWN(q->off) < end && start < BLK_UP(q->off + q->len))
			return 1;
	}
	return 0;
}

/* Send the gathered unit; keeps the in-flight bytes within the limit. */
static void wb_send_fill(struct rdfs_inode *in, struct write_behind *wb)
{
	struct rdfs_client *c = wb->owner->c;
	struct wb_unit *u = wb->fill;
	int ret;

	if (!u)
		return;
	wb->fill = NULL;
	while (wb->count && (wb->count == WB_MAX_UNITS || wb->inflight + u->len > wb_limit(c)))
		wb_complete_oldest(in, wb);
	/*
	 * WRITEs in flight together may land in any order: an older unit that
	 * shares blocks with this one must land first, or it could overwrite
	 * the newer bytes. A stream's units never share blocks (they end at
	 * chunk boundaries), so only rewrites wait.
	 */
	while (wb_overlaps(wb, u))
		wb_complete_oldest(in, wb);
	memset(&u->plan, 0, sizeof(u->plan));
	u->plan.off = u->off;
	u->plan.size = u->len;
	u->plan.buf = u->buf;
	ret = write_plan_start(wb->owner, &u->plan);
	if (ret) {
		/* no WRITE went out: try the whole unit the synchronous way */
		write_plan_end(wb->owner, &u->plan);
		ret = write_what_fits(wb->owner, u->buf, u->len, u->off);
		if (ret && !wb->error)
			wb->error = wb_error_of(ret);
		unit_free(u);
		return;
	}
	__atomic_add_fetch(&c->stats.write_behind_writes, u->plan.n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->stats.write_behind_bytes, u->len, __ATOMIC_RELAXED);
	wb->q[(wb->head + wb->count) % WB_MAX_UNITS] = u;
	wb->count++;
	wb->inflight += u->len;
}

/* Everything sent and answered; the inode no longer reports write-behind bytes. */
static void wb_drain_locked(struct rdfs_inode *in, struct write_behind *wb)
{
	wb_send_fill(in, wb);
	while (wb->count)
		wb_complete_oldest(in, wb);
	pthread_mutex_lock(&in->lock);
	in->wb_end = 0;
	pthread_mutex_unlock(&in->lock);
}

int write_behind_drain(struct rdfs_inode *in, int report)
{
	struct write_behind *wb;
	int ret = 0;

	/* the common case - nothing was ever buffered - takes no lock */
	if (!__atomic_load_n(&in->wb, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&in->wb_lock);
	wb = in->wb;
	if (wb->owner)
		wb_drain_locked(in, wb);
	wb->owner = NULL;
	if (report) {
		ret = wb->error;
		wb->error = 0;
	}
	pthread_mutex_unlock(&in->wb_lock);
	return ret;
}

/* Bytes from @off to the end of its chunk (at most RDFS_IO_MAX): a unit's size. */
static size_t unit_cap(struct rdfs_inode *in, uint64_t off)
{
	uint64_t chunk;

	pthread_mutex_lock(&in->lock);
	chunk = in->chunk_size ? in->chunk_size : (1u << 20);
	pthread_mutex_unlock(&in->lock);
	if (chunk > RDFS_IO_MAX)
		chunk = RDFS_IO_MAX;
	return chunk - off % chunk;
}

/* The unit the byte at @off goes to: up to the end of its chunk. */
static struct wb_unit *unit_new(struct rdfs_inode *in, uint64_t off)
{
	struct wb_unit *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->off = off;
	u->cap = unit_cap(in, off);
	u->buf = malloc(u->cap);
	if (!u->buf) {
		free(u);
		return NULL;
	}
	return u;
}

/*
 * The unit of a whole chunk sent from the caller's buffer, or NULL when @buf
 * is not exactly one (then it is copied; so is it without memory for the unit).
 */
static struct wb_unit *unit_lent(struct rdfs_inode *in, const void *buf, size_t size,
				 uint64_t off, struct rdfs_lend *lend)
{
	struct wb_unit *u;

	if (!lend || !lend->release || size != unit_cap(in, off))
		return NULL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->off = off;
	u->len = u->cap = size;
	u->buf = (uint8_t *)buf;
	u->release = lend->release;
	u->release_arg = lend->arg;
	lend->kept = 1;
	return u;
}

ssize_t write_behind_write(struct rdfs_file *f, const void *buf, size_t size, uint64_t off,
			   struct rdfs_lend *lend)
{
	struct rdfs_inode *in = f->in;
	struct write_behind *wb;
	const uint8_t *src = buf;
	size_t done = 0;
	ssize_t ret;

	pthread_mutex_lock(&in->wb_lock);
	wb = in->wb;
	if (!wb) {
		wb = calloc(1, sizeof(*wb));
		if (!wb) {
			pthread_mutex_unlock(&in->wb_lock);
			return -ENOMEM;
		}
		__atomic_store_n(&in->wb, wb, __ATOMIC_RELEASE);
	}
	if (wb->error) {
		ret = wb->error;
		goto out;
	}
	if (wb->owner && wb->owner != f)
		wb_drain_locked(in, wb);
	wb->owner = f;
	if (wb->fill && off != wb->fill->off + wb->fill->len)
		wb_send_fill(in, wb);

	pthread_mutex_lock(&in->lock);
	if (off + size > in->wb_end)
		in->wb_end = off + size;
	in->mtime_ns = cap_now_ns();
	in->dirty = 1;
	inode_data_changed(in);
	pthread_mutex_unlock(&in->lock);

	if (!wb->fill) {
		struct wb_unit *u = unit_lent(in, buf, size, off, lend);

		if (u) {
			__atomic_add_fetch(&f->c->stats.write_behind_lent_bytes, size,
					   __ATOMIC_RELAXED);
			wb->fill = u;
			wb_send_fill(in, wb);
			done = size;
		}
	}
	while (done < size) {
		struct wb_unit *u = wb->fill;
		size_t n;

		if (!u) {
			u = unit_new(in, off + done);
			if (!u) {
				/* no memory to gather: write the rest now */
				ret = write_now(f, src + done, size - done, off + done);
				if (ret)
					goto out;
				break;
			}
			wb->fill = u;
		}
		n = u->cap - u->len < size - done ? u->cap - u->len : size - done;
		memcpy(u->buf + u->len, src + done, n);
		u->len += n;
		done += n;
		if (u->len == u->cap)
			wb_send_fill(in, wb);
	}
	ret = size;
out:
	pthread_mutex_unlock(&in->wb_lock);
	return ret;
}

void write_behind_free(struct rdfs_inode *in)
{
	struct write_behind *wb = in->wb;

	if (!wb)
		return;
	/* a release drains; only a client closed with files open gets here with data */
	unit_free(wb->fill);
	while (wb->count) {
		struct wb_unit *u = wb->q[wb->head];

		write_plan_end(wb->owner, &u->plan);
		wb->head = (wb->head + 1) % WB_MAX_UNITS;
		wb->count--;
		unit_free(u);
	}
	free(wb);
	in->wb = NULL;
}
