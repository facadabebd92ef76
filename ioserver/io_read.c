// SPDX-License-Identifier: MIT
/*
 * io_read.c - READ (see io_request.h): the unit pipeline, its sends, and the
 * read-ahead loads a READ starts.
 *
 * Life (io_internal.h): JOB_READING while the pipeline runs, stepped by its
 * own disk reads' completions; it rests in JOB_READ_WAIT_BUF (no buffer
 * anywhere: the ring's buffer-wait list steps it), JOB_READ_WAIT_RA (its next
 * unit is being read ahead: the load's ring thread posts it) or
 * JOB_READ_WAIT_SEND (it holds as many buffers as it may: the next send
 * completion claims the state and posts it).
 *
 * Threads: everything here runs on the job's ring thread, except unit_sent()
 * (the main loop, or whichever thread completes a send) and unit_seg_loaded()
 * (the loading ring thread): they give buffers back and post the job. Over
 * TCP a unit with nothing queued ahead of it is sent from the ring thread
 * without a completion (see send_now_or_copy()), so the common case never
 * visits the main loop.
 *
 * Locks: the READ holds its blocks shared until every unit is off the disk.
 *
 * Copies per byte read (disk to wire): none in user space, in both send
 * modes. The disk DMAs into a pool buffer (O_DIRECT) and the transport sends
 * that buffer by reference (one writev; TCP's own kernel copy into the socket
 * is the only one; a unit sent without a completion is copied by the
 * transport only in the rare case that the socket does not take it whole). A
 * read-ahead cache hit is sent by reference from the cache segments the same
 * way (a unit spanning more than UNIT_SEGS segments, i.e. whole mode or units
 * over 896 KiB, is copied once instead).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "log.h"
#include "volume.h"
#include "xport.h"

/* Read-ahead segments one READ may start loading. */
#define RA_LOADS_PER_READ	64
/*
 * Read-ahead segments that follow one another on the volume, loaded by one
 * readv: a 1 MiB read instead of eight 128 KiB ones (fewer, larger requests
 * are what a disk serves best, and fewer compete with the READs' own).
 */
#define RA_LOAD_SEGS		8

struct ra_load {
	struct ring_op base;
	struct ra_seg *segs[RA_LOAD_SEGS];
	struct iovec iov[RA_LOAD_SEGS];	/* what is still to read, for the ring */
	int nsegs;
	uint64_t off;			/* volume byte offset of the first segment */
	uint32_t len, done;
};

static void unit_read_done(struct ring *r, struct rw_op *op, int err)
{
	struct io_unit *u = (struct io_unit *)op;
	struct io_job *j = op->job;

	j->reading--;
	if (err) {
		log_error(1200007, "ino=%llu: volume read of blocks %llu+%u failed: %s",
			  (unsigned long long)(j->io->cap ? j->io->cap->ino : 0),
			  (unsigned long long)u->first, u->nblocks, strerror(-err));
		if (!j->err)
			j->err = err;
	}
	u->state = UNIT_VALID;	/* holds a buffer; with j->err set it is never sent */
	/* The final reply may go out in read_step, and its send complete at once. */
	atomic_fetch_add(&j->refs, 1);
	read_step(j);
	job_put(j);
}

/*
 * Whether @j's next frame may go without a send completion: on a transport
 * that copies into the kernel anyway (not RDMA, where the NIC reads our
 * buffer), when nothing is queued ahead of it. Then the socket almost always
 * takes the frame at once, xport_post_send() with no completion copies only
 * what it does not take, and the buffer is ours again on return: no hop to
 * the main loop per unit (an eventfd wake, epoll_wait, the completion) and
 * the next read can reuse it at once. With frames queued (the network is the
 * bottleneck) we send by reference and wait for the completion, as a copy
 * would then be of every byte.
 */
static bool send_now_or_copy(const struct io_job *j)
{
	return !(xport_conn_caps(j->req.conn) & XPORT_CAP_RDMA) &&
	       xport_conn_queued_bytes(j->req.conn) == 0;
}

/* Send completion of a unit, on the main loop's thread. */
static void unit_sent(void *arg, int status)
{
	struct io_unit *u = arg;
	struct io_job *j = u->rw.job;
	struct io_pool *p = j->pool;

	if (u->nsegs) {
		ra_release(p->ra, u->segs, u->nsegs);
	} else {
		job_buf_put(j, u->rw.buf, u->buf_len);
		pool_buffers_returned(p);
	}
	if (job_state(j) == JOB_DONE) {
		job_put(j);
		return;
	}
	atomic_fetch_add(&j->returned, 1);
	/* Wake the ring only when the job waits for this; most sends finish unawaited. */
	if (job_claim_state(j, JOB_READ_WAIT_SEND, JOB_READING))
		ring_post(j->ring, j);	/* our reference goes with it */
	else
		job_put(j);
}

/*
 * Give back what an unsent unit holds: cache segments or a pool buffer. A
 * buffer wakes the READs that wait for one, as a send completion does: a
 * failed READ may be the last holder on an otherwise idle server.
 */
static void unit_release(struct io_pool *p, struct io_unit *u)
{
	if (u->nsegs) {
		ra_release(p->ra, u->segs, u->nsegs);
	} else {
		job_buf_put(u->rw.job, u->rw.buf, u->buf_len);
		pool_buffers_returned(p);
	}
}

/* The iovecs of @u's data: its buffer, or the cache segments holding it. */
static int unit_iov(const struct io_unit *u, struct iovec *iov)
{
	uint64_t lo = u->first * RDFS_BLOCK_SIZE + u->data_off, hi = lo + u->data_len;
	uint64_t s_lo, s_hi;
	int i, n = 0;

	if (!u->nsegs) {
		iov[0].iov_base = u->rw.buf + u->data_off;
		iov[0].iov_len = u->data_len;
		return 1;
	}
	for (i = 0; i < u->nsegs; i++) {
		s_lo = ra_seg_first(u->segs[i]) * RDFS_BLOCK_SIZE;
		s_hi = s_lo + (uint64_t)ra_seg_blocks(u->segs[i]) * RDFS_BLOCK_SIZE;
		if (s_lo < lo)
			s_lo = lo;
		if (s_hi > hi)
			s_hi = hi;
		if (s_lo >= s_hi)
			continue;
		iov[n].iov_base = (uint8_t *)ra_seg_buf(u->segs[i]) +
				  (s_lo - ra_seg_first(u->segs[i]) * RDFS_BLOCK_SIZE);
		iov[n].iov_len = s_hi - s_lo;
		n++;
	}
	return n;
}

static void read_reply_error(struct io_job *j)
{
	int i;

	for (i = j->next_send; i < j->next_start; i++) {
		if (j->units[i].state == UNIT_VALID) {
			unit_release(j->pool, &j->units[i]);
			j->units[i].state = UNIT_SENT;
		}
	}
	rpc_server_reply_error(&j->req, j->err, j->err == -ENOMEM ? "out of memory"
							       : "volume read failed");
	job_finish(j);
}

/*
 * Put every unit that is next in order and read on the wire; the last one ends
 * the reply. Returns how many units went without a completion (their buffers
 * are back already, see send_now_or_copy()).
 */
static int read_send_ready(struct io_job *j)
{
	Rdfs__IoReply reply = RDFS__IO_REPLY__INIT;
	struct iovec iov[UNIT_SEGS];
	struct io_unit *u;
	int niov, ret, freed = 0;
	bool now;

	while (!j->err && j->next_send < j->nunits &&
	       (u = &j->units[j->next_send])->state == UNIT_VALID) {
		niov = unit_iov(u, iov);
		if (rpc_request_has_sink(&j->req)) {
			/* Gfarm's figure 2: the unit goes straight into the client's buffer. */
			atomic_fetch_add(&j->refs, 1);	/* the send's */
			ret = rpc_server_reply_part_write(&j->req, j->placed, iov, niov,
							  unit_sent, u);
			if (ret) {
				atomic_fetch_sub(&j->refs, 1);
				j->err = ret;
				break;
			}
			j->placed += u->data_len;
			u->state = UNIT_SENT;
			j->next_send++;
			atomic_fetch_add(&j->pool->n_parts, 1);
			if (j->next_send == j->nunits) {
				reply.length = j->io->length;
				reply.verifier = atomic_load(&j->pool->verifier);
				rpc_server_reply(&j->req, 0, &reply.base, NULL, 0);
				job_finish(j);
				return freed;
			}
			continue;
		}
		now = send_now_or_copy(j);
		if (j->next_send == j->nunits - 1) {
			reply.length = j->io->length;
			reply.verifier = atomic_load(&j->pool->verifier);
			u->state = UNIT_SENT;
			j->next_send++;
			if (now) {
				/* a failure closed the connection: nobody is left to tell */
				rpc_server_reply(&j->req, 0, &reply.base, iov, niov);
				unit_release(j->pool, u);
				if (!u->nsegs)
					pool_buffers_returned(j->pool);
				job_finish(j);
				return freed + 1;
			}
			atomic_fetch_add(&j->refs, 1);	/* the send's */
			ret = rpc_server_reply_zc(&j->req, 0, &reply.base, iov, niov, unit_sent, u);
			if (ret) {
				atomic_fetch_sub(&j->refs, 1);
				unit_release(j->pool, u);
			}
			job_finish(j);
			return freed;
		}
		if (now) {
			ret = rpc_server_reply_part(&j->req, iov, niov, NULL, NULL);
		} else {
			atomic_fetch_add(&j->refs, 1);	/* the send's */
			ret = rpc_server_reply_part(&j->req, iov, niov, unit_sent, u);
			if (ret)
				atomic_fetch_sub(&j->refs, 1);
		}
		if (ret) {
			j->err = ret;
			break;
		}
		u->state = UNIT_SENT;
		j->next_send++;
		atomic_fetch_add(&j->pool->n_parts, 1);
		if (now) {
			unit_release(j->pool, u);
			if (!u->nsegs)
				pool_buffers_returned(j->pool);
			j->held--;
			freed++;
		}
	}
	return freed;
}

/* The read-ahead load the next unit waited for has ended (any ring thread). */
static void unit_seg_loaded(struct ra_waiter *w)
{
	struct io_job *j = (struct io_job *)((uint8_t *)w - offsetof(struct io_job, ra_wait));

	atomic_store(&j->ra_ready, true);
	ring_post(j->ring, j);	/* the reference taken for the wait */
}

/*
 * Start the next units, as many as the pipeline's depth and the job's
 * buffers allow, each from the read-ahead cache or the disk. Leaves
 * JOB_READING when the next unit must wait for a load or for any buffer.
 * Returns whether a read went on the ring.
 */
static bool read_units(struct io_job *j)
{
	struct io_pool *p = j->pool;
	struct io_unit *u;
	bool queued = false;

	while (!j->err && job_state(j) == JOB_READING && j->next_start < j->nunits &&
	       j->reading < p->depth && j->held < j->held_max) {
		u = &j->units[j->next_start];
		u->rw.job = j;
		/*
		 * A cache hit is sent from the cache itself, without a copy; blocks
		 * still being read ahead are waited for, not read a second time.
		 */
		if (p->ra) {
			atomic_fetch_add(&j->refs, 1);	/* the wait's, if we wait */
			u->nsegs = ra_hold_or_wait(p->ra, u->first, u->nblocks, u->segs,
						   UNIT_SEGS, &j->ra_wait);
			if (u->nsegs == -EINPROGRESS) {
				u->nsegs = 0;
				/* the load may have ended already: ra_ready tells */
				job_set_state(j, JOB_READ_WAIT_RA);
				break;
			}
			atomic_fetch_sub(&j->refs, 1);
			if (u->nsegs > 0) {
				u->state = UNIT_VALID;
				j->held++;
				j->next_start++;
				atomic_fetch_add(&p->n_units_cache, 1);
				continue;
			}
		}
		u->nsegs = 0;
		u->rw.buf = job_buf_get(j, u->buf_len);
		if (!u->rw.buf && j->held == 0 && j->reading == 0) {
			/*
			 * Nothing of ours will step us again: wait for anyone's buffer.
			 * Counted before trying again, so a buffer given back in between
			 * is either ours now or wakes us.
			 */
			atomic_fetch_add(&p->buf_waiters, 1);
			u->rw.buf = job_buf_get(j, u->buf_len);
			if (!u->rw.buf) {
				job_set_state(j, JOB_READ_WAIT_BUF);
				ring_wait_buffer(j->ring, j);
				break;
			}
			atomic_fetch_sub(&p->buf_waiters, 1);
		}
		if (!u->rw.buf)
			break;	/* our own sends give buffers back and step us */
		u->rw.job = j;
		j->held++;
		j->next_start++;
		if (p->ra && ra_read(p->ra, u->first, u->nblocks, u->rw.buf) == 0) {
			u->state = UNIT_VALID;
			atomic_fetch_add(&p->n_units_cache, 1);
			continue;
		}
		atomic_fetch_add(&p->n_units_disk, 1);
		u->state = UNIT_READING;
		j->reading++;
		rw_start(j->ring, &u->rw, j, false, u->rw.buf, u->first,
			 u->nblocks * RDFS_BLOCK_SIZE, 0, unit_read_done);
		queued = true;
	}
	return queued;
}

/*
 * After a round of read_step(): whether another round can start units now;
 * else the job rests in its state until something steps it again.
 */
static bool read_round_again(struct io_job *j, int freed)
{
	if (job_state(j) == JOB_DONE)
		return false;
	/* sent without a completion: their buffers may carry the next units */
	if (freed && !j->err && j->next_start < j->nunits && j->reading < j->pool->depth)
		return true;
	if (j->err) {
		/* the error reply waits for the disk reads into our buffers */
		if (j->reading == 0)
			read_reply_error(j);
		return false;
	}
	if (job_state(j) != JOB_READING || j->reading || j->next_start == j->nunits)
		return false;
	/*
	 * Nothing on the disk and more to read, yet stopped: only our own sends'
	 * completions can give buffers back. The next one claims the wait and
	 * posts us; look again in case they came before we waited.
	 */
	job_set_state(j, JOB_READ_WAIT_SEND);
	return atomic_load(&j->returned) &&
	       job_claim_state(j, JOB_READ_WAIT_SEND, JOB_READING);
}

void read_step(struct io_job *j)
{
	struct io_pool *p = j->pool;
	bool queued;
	int freed;

	if (job_state(j) == JOB_DONE)
		return;
	do {
		j->held -= atomic_exchange(&j->returned, 0);
		if (job_state(j) == JOB_READ_WAIT_RA && atomic_exchange(&j->ra_ready, false))
			job_set_state(j, JOB_READING);
		queued = read_units(j);
		/*
		 * The next reads go to the disk before we spend time sending: with
		 * units read one after another (depth 1) the disk would idle for
		 * the send. With nothing to send the ring's loop submits them as soon.
		 */
		if (queued && j->next_send < j->nunits &&
		    j->units[j->next_send].state == UNIT_VALID)
			ring_flush(j->ring);
		/* Every unit is off the disk: writers of these blocks may go on. */
		if (j->locked && j->reading == 0 && (j->next_start == j->nunits || j->err)) {
			range_lock_release(volume_range_lock(p->vol), &j->lock);
			j->locked = false;
		}
		freed = read_send_ready(j);
	} while (read_round_again(j, freed));
}

/* A buffer came back to the pool while @j waited on its ring's list for one. */
void read_buffers_back(struct io_job *j)
{
	job_set_state(j, JOB_READING);
	read_step(j);
}

static void ra_load_submit(struct ring *r, struct ra_load *l)
{
	struct io_uring_sqe *sqe = ring_sqe(r);
	size_t skip = l->done, seg_len;
	int i, n = 0;

	for (i = 0; i < l->nsegs; i++) {
		seg_len = (size_t)ra_seg_blocks(l->segs[i]) * RDFS_BLOCK_SIZE;
		if (skip >= seg_len) {
			skip -= seg_len;
			continue;
		}
		l->iov[n].iov_base = (uint8_t *)ra_seg_buf(l->segs[i]) + skip;
		l->iov[n].iov_len = seg_len - skip;
		skip = 0;
		n++;
	}
	io_uring_prep_readv(sqe, r->pool->fd, l->iov, (unsigned int)n, l->off + l->done);
	ring_queue(r, sqe, &l->base);
}

static void ra_load_done(struct ring *r, struct ring_op *op, int res)
{
	struct ra_load *l = (struct ra_load *)op;
	int i, err = ring_rw_advance(res, &l->done, l->len);

	if (err > 0) {
		ra_load_submit(r, l);
		return;
	}
	for (i = 0; i < l->nsegs; i++) {
		ra_seg_loaded(r->pool->ra, l->segs[i], err);
		atomic_fetch_add(&r->pool->n_ra_done, 1);
	}
	free(l);
}

/* SuperNBD: a READ continuing a stream reads further ahead into the cache. */
static void read_ahead(struct io_job *j, uint64_t first, uint64_t count)
{
	struct ra_seg *segs[RA_LOADS_PER_READ];
	struct ra_load *l = NULL;
	int i, n;

	n = ra_note_read(j->pool->ra, first, count, segs, RA_LOADS_PER_READ);
	for (i = 0; i <= n; i++) {
		/* a run of adjacent segments ends here: load it */
		if (l && (i == n || l->nsegs == RA_LOAD_SEGS ||
			  ra_seg_first(segs[i]) != ra_seg_first(l->segs[l->nsegs - 1]) +
						    ra_seg_blocks(l->segs[l->nsegs - 1]))) {
			ra_load_submit(j->ring, l);
			l = NULL;
		}
		if (i == n)
			break;
		if (!l) {
			l = calloc(1, sizeof(*l));
			if (!l) {
				ra_seg_loaded(j->pool->ra, segs[i], -ENOMEM);
				continue;
			}
			l->base.done = ra_load_done;
			l->off = volume_block_offset(ra_seg_first(segs[i]));
		}
		l->segs[l->nsegs++] = segs[i];
		l->len += ra_seg_blocks(segs[i]) * RDFS_BLOCK_SIZE;
		atomic_fetch_add(&j->pool->n_ra, 1);
	}
}

void read_start(struct io_job *j)
{
	struct io_pool *p = j->pool;
	const Rdfs__IoReq *io = j->io;
	uint64_t n = volume_blocks_touched(io->head, io->length);
	uint64_t ub, start, lo, hi, data_end = (uint64_t)io->head + io->length;
	int i;

	atomic_fetch_add(&p->n_reads, 1);
	if (!io->length) {
		io_reply_length(p, &j->req, 0);
		job_finish(j);
		return;
	}
	ub = p->send_mode == IOS_SEND_WHOLE ? n : p->unit_size / RDFS_BLOCK_SIZE;
	j->nunits = (int)((n + ub - 1) / ub);
	j->units = calloc((size_t)j->nunits, sizeof(*j->units));
	if (!j->units) {
		rpc_server_reply_error(&j->req, -ENOMEM, "out of memory");
		job_finish(j);
		return;
	}
	for (i = 0; i < j->nunits; i++) {
		struct io_unit *u = &j->units[i];

		start = (uint64_t)i * ub;
		u->first = io->first_block + start;
		u->nblocks = (uint32_t)(n - start < ub ? n - start : ub);
		u->buf_len = (size_t)ub * RDFS_BLOCK_SIZE;
		lo = start * RDFS_BLOCK_SIZE;
		hi = lo + (uint64_t)u->nblocks * RDFS_BLOCK_SIZE;
		if (hi > data_end)
			hi = data_end;
		if (lo < io->head)
			lo = io->head;
		u->data_off = (uint32_t)(lo - start * RDFS_BLOCK_SIZE);
		u->data_len = (uint32_t)(hi - lo);
	}
	j->held_max = p->depth * HELD_PER_DEPTH;
	j->ra_wait.loaded = unit_seg_loaded;
	/*
	 * Shared with other READs; after every WRITE that came before, even one
	 * acknowledged before it reached the disk (write-back).
	 */
	if (job_lock_blocks(j, n, true))
		read_locked(j);
}

/* The READ holds its blocks (from JOB_NEW or JOB_LOCK_WAIT). */
void read_locked(struct io_job *j)
{
	const Rdfs__IoReq *io = j->io;

	if (job_fenced(j)) {
		job_finish(j);
		return;
	}
	job_set_state(j, JOB_READING);
	read_step(j);
	/* After the request's own reads, which are queued first on the ring. */
	if (j->pool->ra)
		read_ahead(j, io->first_block, volume_blocks_touched(io->head, io->length));
}
