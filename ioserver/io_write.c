// SPDX-License-Identifier: MIT
/*
 * io_write.c - WRITE and ZERO (see io_request.h).
 *
 * Life (io_internal.h): a WRITE waits in JOB_LOCK_WAIT for its blocks if they
 * are taken, then goes to JOB_WRITE_MERGE while its partial first/last blocks
 * are read into the bounce block, and to JOB_WRITING once every write is
 * issued; it ends when they complete. ZERO runs whole within the step that
 * holds its blocks.
 *
 * Threads: the job's ring thread. ZERO's fallocate + fdatasync blocks it
 * (rare, and the metaserver's alone).
 *
 * Locks: WRITE and ZERO hold their blocks exclusive until written, and let
 * them go only after dropping them from the read-ahead cache.
 *
 * Copies: whole blocks are written straight from the transport's 4096-aligned
 * receive buffer; only a partial first/last block (or data not aligned in
 * memory) is copied, once, into the bounce block for its read-modify-write.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "io_internal.h"
#include "log.h"
#include "volume.h"

/*
 * A write-back WRITE we acknowledged failed on the disk: its data is lost. As
 * after a restart, a new verifier makes every client whose unstable writes
 * predate it send them again (the next COMMIT shows the change).
 */
static void verifier_change(struct io_pool *p)
{
	uint64_t v;

	if (auth_random(&v, sizeof(v)))
		v = atomic_load(&p->verifier) + 0x9e3779b97f4a7c15ull;
	atomic_store(&p->verifier, v);
	log_error(1200008, "an acknowledged write-back write was lost; new write verifier %016llx",
		  (unsigned long long)v);
}

static void write_done(struct io_job *j)
{
	struct io_pool *p = j->pool;
	const Rdfs__IoReq *io = j->io;
	uint64_t n = volume_blocks_touched(io->head, io->length);
	int err = j->err;

	/*
	 * Before the acknowledgement and before the READs waiting for these
	 * blocks go on: none of them may find the old bytes cached.
	 */
	if (p->ra)
		ra_invalidate(p->ra, io->first_block, n);
	range_lock_release(volume_range_lock(p->vol), &j->lock);
	j->locked = false;
	if (err == -ESTALE) {
		/* fenced (job_fenced() answered it): nothing was written */
	} else if (err) {
		log_error(1200009,
			  "ino=%llu: volume write of %u bytes at block %llu+%u failed: %s",
			  (unsigned long long)(io->cap ? io->cap->ino : 0), io->length,
			  (unsigned long long)io->first_block, io->head, strerror(-err));
		if (j->acked)
			verifier_change(p);
		else
			rpc_server_reply_error(&j->req, err, err == -ENOSPC ? "volume is full"
									   : "volume write failed");
	} else if (!j->acked) {
		io_reply_length(p, &j->req, io->length);
	}
	job_finish(j);
}

static void write_piece_done(struct ring *r, struct rw_op *op, int err);

/* Every partial block is read: merge the new bytes and write the bounce buffer. */
static void write_bounce(struct io_job *j)
{
	const Rdfs__IoReq *io = j->io;
	const uint8_t *data = j->req.msg->data;
	int flags = io->stable ? RWF_DSYNC : 0;

	if (j->tail_full != UINT32_MAX) {
		memcpy(j->bounce, data + (size_t)j->tail_full * RDFS_BLOCK_SIZE,
		       io->length - (size_t)j->tail_full * RDFS_BLOCK_SIZE);
		rw_start(j->ring, &j->wop[2], j, true, j->bounce, io->first_block + j->tail_full,
			 RDFS_BLOCK_SIZE, flags, write_piece_done);
	} else {
		memcpy(j->bounce + io->head, data, io->length);
		rw_start(j->ring, &j->wop[2], j, true, j->bounce, io->first_block,
			 (uint32_t)j->bounce_len, flags, write_piece_done);
	}
	j->writes_pending++;
}

static void write_piece_done(struct ring *r, struct rw_op *op, int err)
{
	struct io_job *j = op->job;

	if (err && !j->err)
		j->err = err;
	if (op->write) {
		j->writes_pending--;
	} else if (--j->reads_pending == 0) {
		/* the bounce block is whole, or one of its reads failed: nothing more to read */
		job_set_state(j, JOB_WRITING);
		if (!j->err)
			write_bounce(j);
	}
	if (job_state(j) == JOB_WRITING && !j->writes_pending)
		write_done(j);
}

/*
 * The range is ours (from JOB_NEW or JOB_LOCK_WAIT). Whole blocks go straight
 * from the transport's aligned buffer; a partial block is read into a bounce
 * buffer first (read-modify-write).
 */
void write_locked(struct io_job *j)
{
	const Rdfs__IoReq *io = j->io;
	const uint8_t *data = j->req.msg->data;
	uint64_t n = volume_blocks_touched(io->head, io->length);
	uint32_t tail = (io->head + io->length) % RDFS_BLOCK_SIZE;
	int flags = io->stable ? RWF_DSYNC : 0;
	uint32_t full;

	/*
	 * An acknowledged write-back WRITE was admitted before any fence and has
	 * been in line for its blocks since: it lands before a new owner's ZERO
	 * of them (which then wipes it), so it is never dropped here.
	 */
	if (!j->acked && job_fenced(j)) {
		j->err = -ESTALE;
		write_done(j);
		return;
	}
	j->tail_full = UINT32_MAX;
	if (io->head == 0 && ((uintptr_t)data % RDFS_BLOCK_SIZE) == 0) {
		full = io->length / RDFS_BLOCK_SIZE;
		if (full) {
			rw_start(j->ring, &j->wop[0], j, true, (void *)data, io->first_block,
				 full * RDFS_BLOCK_SIZE, flags, write_piece_done);
			j->writes_pending++;
		}
		if (tail) {
			j->tail_full = full;
			j->bounce_len = RDFS_BLOCK_SIZE;
		}
	} else {
		j->bounce_len = n * RDFS_BLOCK_SIZE;
	}
	if (j->bounce_len) {
		if (posix_memalign((void **)&j->bounce, RDFS_BLOCK_SIZE, j->bounce_len)) {
			j->bounce = NULL;
			j->err = -ENOMEM;
		} else if (j->tail_full != UINT32_MAX) {
			rw_start(j->ring, &j->wop[1], j, false, j->bounce,
				 io->first_block + j->tail_full, RDFS_BLOCK_SIZE, 0,
				 write_piece_done);
			j->reads_pending++;
		} else {
			if (io->head) {
				rw_start(j->ring, &j->wop[0], j, false, j->bounce, io->first_block,
					 RDFS_BLOCK_SIZE, 0, write_piece_done);
				j->reads_pending++;
			}
			/* The last block, unless it is the first one and is being read. */
			if (tail && !(n == 1 && io->head)) {
				rw_start(j->ring, &j->wop[1], j, false,
					 j->bounce + (n - 1) * RDFS_BLOCK_SIZE,
					 io->first_block + n - 1, RDFS_BLOCK_SIZE, 0,
					 write_piece_done);
				j->reads_pending++;
			}
		}
	}
	if (j->reads_pending) {
		job_set_state(j, JOB_WRITE_MERGE);
		return;
	}
	job_set_state(j, JOB_WRITING);
	/* a bounce block with no partial block to read: data not aligned in memory */
	if (j->bounce)
		write_bounce(j);
	if (!j->writes_pending)
		write_done(j);
}

/* The ZERO holds its blocks (from JOB_NEW or JOB_LOCK_WAIT). */
void zero_locked(struct io_job *j)
{
	struct io_pool *p = j->pool;
	const Rdfs__IoReq *io = j->io;
	int ret;

	if (job_fenced(j)) {
		job_finish(j);
		return;
	}
	/* fallocate and fdatasync have no cheap ring form for every fallback; ZERO is rare */
	ret = volume_zero_locked(p->vol, io->first_block, io->block_count);

	if (p->ra)
		ra_invalidate(p->ra, io->first_block, io->block_count);
	range_lock_release(volume_range_lock(p->vol), &j->lock);
	j->locked = false;
	if (ret) {
		log_error(1200010,
			  "ino=%llu: zeroing blocks %llu+%u failed: %s",
			  (unsigned long long)(io->cap ? io->cap->ino : 0),
			  (unsigned long long)io->first_block,
			  io->block_count, strerror(-ret));
		rpc_server_reply_error(&j->req, ret, ret == -ENOSPC ? "volume is full"
								   : "zeroing blocks failed");
	} else {
		io_reply_length(p, &j->req, 0);
	}
	job_finish(j);
}

/*
 * ZERO: the metaserver's request, before it hands newly allocated blocks to a
 * file, that they read as zeros (they may hold a freed file's data). A
 * capability with WRITE rights, as for WRITE, so nobody else can wipe blocks.
 */
void zero_start(struct io_job *j)
{
	if (job_lock_blocks(j, j->io->block_count, false))
		zero_locked(j);
}

void write_start(struct io_job *j)
{
	const Rdfs__IoReq *io = j->io;
	bool granted;

	if (j->req.msg->hdr.data_len != io->length) {
		rpc_server_reply_error(&j->req, -EINVAL,
				       "WRITE data length differs from its length field");
		job_finish(j);
		return;
	}
	if (!io->length) {
		io_reply_length(j->pool, &j->req, 0);
		job_finish(j);
		return;
	}
	granted = job_lock_blocks(j, volume_blocks_touched(io->head, io->length), false);
	/*
	 * Write-back (SuperNBD's asynchronous write): acknowledged on receipt. The
	 * data stays in the transport's buffer until written, and the WRITE is in
	 * line for its blocks, so every later READ of them waits for it; COMMIT
	 * waits for it too.
	 */
	if (!io->stable) {
		io_reply_length(j->pool, &j->req, io->length);
		j->acked = true;
	}
	if (granted)
		write_locked(j);
}
