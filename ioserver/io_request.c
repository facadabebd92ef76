// SPDX-License-Identifier: MIT
/*
 * io_request.c - READ/WRITE/IO_COMMIT/ZERO on io_uring ring threads (see io_request.h).
 *
 * Threads and ownership:
 *  - The main loop (rpc_server_next) creates a job per request and posts it to
 *    a ring thread; send completions (rpc_server_reply_part/_zc callbacks) also
 *    run there: they give the unit's buffer back to the pool (or the cache
 *    segments it was sent from), and post the job again only when it waits
 *    for that buffer to read further. Over TCP a unit with nothing queued
 *    ahead of it is sent from the ring thread without a completion (see
 *    send_now_or_copy()), so the common case never visits the main loop.
 *  - A READ whose blocks are being read ahead waits for that load
 *    (ra_hold_or_wait(); the load's ring thread posts the job) rather than
 *    reading them from the disk a second time.
 *  - A ring thread owns its jobs' state: only it reads or changes a job, apart
 *    from the atomics (refs, returned, want_return, final_posted, ra_ready). It sleeps in
 *    io_uring_submit_and_wait(); a read of its eventfd on the same ring wakes it
 *    for posted jobs and for buffers given back to the pool.
 *  - A job lives until its final reply is posted and every send holding one of
 *    its buffers has completed: refs counts the ring's hold, each posting and
 *    each send in flight.
 *  - Blocks: READs take their range lock shared, WRITE and ZERO exclusive,
 *    all through range_lock_acquire_async() so a ring thread never blocks on
 *    another request; lock order is arrival order.
 *
 * Memory copies per byte read (disk to wire): none in user space, in both
 * send modes. The disk DMAs into a pool buffer (O_DIRECT) and the transport
 * sends that buffer by reference (one writev; TCP's own kernel copy into the
 * socket is the only one; a unit sent without a completion is copied by the
 * transport only in the rare case that the socket does not take it whole).
 * A read-ahead cache hit is sent by reference from
 * the cache segments the same way (a unit spanning more than UNIT_SEGS
 * segments, i.e. whole mode or units over 896 KiB, is copied once instead).
 */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bufpool.h"
#include "cap.h"
#include "fence.h"
#include "frame.h"
#include "io_request.h"
#include "log.h"
#include "range_lock.h"
#include "rdfs.pb-c.h"
#include "readahead.h"
#include "volume.h"
#include "xport.h"

/* Submission queue entries per ring; the kernel keeps completions beyond it. */
#define RING_ENTRIES		256
/* Read-ahead segments one READ may start loading. */
#define RA_LOADS_PER_READ	64
/*
 * Cache segments one unit may be sent from by reference; a unit spanning more
 * (whole mode, huge units) is copied out of the cache instead.
 */
#define UNIT_SEGS		8
/*
 * Buffers one READ may hold, per unit read in flight: the units being read
 * plus as many read and waiting for the network, so the disk keeps going
 * while the previous units drain to the socket.
 */
#define HELD_PER_DEPTH		2

struct ring;
struct io_job;

/* Every completion of a ring: the submitter's callback, with the result. */
struct ring_op {
	void (*done)(struct ring *r, struct ring_op *op, int res);
};

/* A read or write of one byte range of the volume, resubmitted until whole. */
struct rw_op {
	struct ring_op base;
	struct io_job *job;
	uint8_t *buf;
	uint64_t off;
	uint32_t len, done;
	bool write;
	int rw_flags;
	/* the whole range is done (0) or failed (negative errno) */
	void (*finish)(struct ring *r, struct rw_op *op, int err);
};

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

enum unit_state { UNIT_IDLE, UNIT_READING, UNIT_VALID, UNIT_SENT };

struct io_unit {
	struct rw_op rw;		/* rw.buf is the pool buffer, NULL when nsegs */
	size_t buf_len;
	struct ra_seg *segs[UNIT_SEGS];	/* a cache hit sent from these, held */
	int nsegs;
	uint64_t first;			/* blocks [first, first + nblocks) */
	uint32_t nblocks;
	uint32_t data_off, data_len;	/* what of the buffer goes on the wire */
	enum unit_state state;
};

/*
 * Where a job is in its life (the model: SPDK's nvmf request states). The
 * job's owner changes it with job_set_state(), which aborts on a transition
 * not in this table: that is a bug, never a bad request. The owner is the
 * main loop until it posts the job or parks it behind an epoch, then its ring
 * thread. Other threads only post the job, and read whether it is JOB_DONE.
 * One state has two possible leavers: JOB_READ_WAIT_SEND is left by whoever
 * claims it first (job_claim_state()), the ring thread or a send completion.
 *
 *   state               waits for                          next
 *   NEW                 its first step on its ring         COMMIT_WAIT LOCK_WAIT READING
 *                                                          WRITE_MERGE WRITING COMMIT_SYNC DONE
 *   COMMIT_WAIT         the WRITEs received before it      COMMIT_SYNC
 *   LOCK_WAIT           its blocks' range lock             READING WRITE_MERGE WRITING DONE
 *   READING             its units' disk reads (the         READ_WAIT_BUF READ_WAIT_RA
 *                       pipeline runs)                     READ_WAIT_SEND DONE
 *   READ_WAIT_BUF       any job to give back a buffer      READING
 *   READ_WAIT_RA        the read-ahead load its next unit  READING DONE
 *                       is in (earlier units go on)
 *   READ_WAIT_SEND      its own sends to give buffers back READING
 *   WRITE_MERGE         the reads of its partial blocks    WRITING
 *   WRITING             its writes, all issued             DONE
 *   COMMIT_SYNC         the fdatasync                      DONE
 *   DONE                the final reply is posted; the job lives on while
 *                       sends hold its buffers (refs)
 *
 * ZERO goes from NEW or LOCK_WAIT to DONE within one step. A READ fails from
 * READING or READ_WAIT_RA once its disk reads are back (they fill its buffers).
 */
enum job_state {
	JOB_NEW,
	JOB_COMMIT_WAIT,
	JOB_LOCK_WAIT,
	JOB_READING,
	JOB_READ_WAIT_BUF,
	JOB_READ_WAIT_RA,
	JOB_READ_WAIT_SEND,
	JOB_WRITE_MERGE,
	JOB_WRITING,
	JOB_COMMIT_SYNC,
	JOB_DONE,
	JOB_NSTATES
};

struct epoch;

struct io_job {
	struct io_pool *pool;
	struct ring *ring;
	struct rpc_request req;
	/*
	 * The request's connection, held until the job is freed: sends of READ
	 * units complete after the reply released req.conn, and give their
	 * buffers back to this connection's share (job_buf_put).
	 */
	struct xport_conn *conn;
	Rdfs__IoReq *io;
	uint16_t op;
	_Atomic enum job_state state;	/* job_set_state(), job_claim_state() */
	atomic_int refs;
	uint64_t placed;		/* reply bytes written into the client's sink so far */
	/*
	 * On the ring's posted queue (ring mutex). Not a place in the job's life
	 * but a wake-up waiting to run: any thread posts, in several states, and
	 * two posts before the ring runs the job are one step.
	 */
	bool queued;
	struct io_job *qnext;		/* ring's posted queue (ring mutex) */
	struct io_job *wnext;		/* ring's buffer-wait list, in JOB_READ_WAIT_BUF */
	int err;			/* the outcome so far: the first error */

	/* READ */
	struct io_unit *units;
	int nunits, next_start, next_send, reading, held, held_max;
	atomic_int returned;		/* buffers given back by send completions */
	struct ra_waiter ra_wait;	/* the next unit waits for a read-ahead load */
	/*
	 * That load has ended: a message from the loading ring thread, which may
	 * not change the state (this ring may be stepping the job for its earlier
	 * units meanwhile); read_step() takes it and leaves JOB_READ_WAIT_RA.
	 */
	atomic_bool ra_ready;

	/* READ, WRITE, ZERO */
	struct range_lock_entry lock;
	/*
	 * lock is in line in the range lock, to be released once. A held
	 * resource, not a place in the life: a READ lets its blocks go as soon as
	 * its units are off the disk, while its last units are still being sent.
	 */
	bool locked;

	/* WRITE, ZERO */
	/*
	 * A write-back WRITE was answered on receipt, before the disk write: a
	 * fact about the reply, which decides how a later failure is told.
	 */
	bool acked;
	struct rw_op wop[3];
	int reads_pending, writes_pending;
	uint8_t *bounce;
	size_t bounce_len;
	uint32_t tail_full;		/* WRITE from aligned data: full blocks before the tail */
	struct epoch *epoch;

	/* IO_COMMIT */
	struct ring_op fsync_op;
	struct io_job *cnext;		/* an epoch's commits */
};

struct ring {
	struct io_pool *pool;
	pthread_t thread;
	bool started;
	struct io_uring uring;
	int efd;
	uint64_t efd_val;
	struct ring_op efd_op;		/* the eventfd read's completion */
	bool efd_armed;
	int inflight;			/* operations on the ring, the eventfd read too */
	atomic_bool buf_kick;		/* buffers came back: retry the waiting jobs */
	struct io_job *wait_head, *wait_tail;	/* jobs waiting for buffers */

	pthread_mutex_t mutex;		/* the posted queue and stop */
	struct io_job *posted_head, *posted_tail;
	bool stop;
};

/*
 * IO_COMMIT ordering: WRITEs are counted in the epoch current when they
 * arrive; a COMMIT closes the current epoch and runs once it and every older
 * epoch have no WRITE left.
 */
struct epoch {
	uint64_t pending;
	struct io_job *commits;
	struct epoch *next;
};

struct io_pool {
	struct volume *vol;
	int fd;
	const struct auth_secret *cap_key;
	const struct server_id *id;
	struct fence_table *fences;
	atomic_uint_fast64_t verifier;	/* changes when an acknowledged write-back write fails */
	enum ios_send_mode send_mode;
	uint32_t unit_size;
	int depth;
	struct bufpool *bufs;
	/*
	 * Pool bytes one connection may hold: a peer that stops reading its
	 * replies keeps its buffers until it closes, and must not take them all.
	 */
	size_t conn_share;
	struct ra_cache *ra;

	int nrings;
	struct ring *rings;
	atomic_uint next_ring;
	atomic_int busy;
	atomic_int buf_waiters;

	pthread_mutex_t epoch_mutex;
	struct epoch *ep_head, *ep_cur;

	atomic_uint_fast64_t n_reads, n_units_disk, n_units_cache, n_parts, n_ra, n_ra_done;
};

static inline enum job_state job_state(struct io_job *j)
{
	return atomic_load(&j->state);
}

#define TO(s)	(1u << (s))

static void read_step(struct io_job *j);
static void read_buffers_back(struct io_job *j);
static void read_locked(struct io_job *j);
static void write_piece_done(struct ring *r, struct rw_op *op, int err);
static bool job_lock_blocks(struct io_job *j, uint64_t count, bool shared);
static void epoch_end(struct io_pool *p, struct epoch *e);
static void job_step(struct io_job *j);

/* ------------------------------------------------------------ job states */

/* The transitions of enum job_state's table, and no other. */
static const unsigned int job_next[JOB_NSTATES] = {
	[JOB_NEW] = TO(JOB_COMMIT_WAIT) | TO(JOB_LOCK_WAIT) | TO(JOB_READING) |
		    TO(JOB_WRITE_MERGE) | TO(JOB_WRITING) | TO(JOB_COMMIT_SYNC) | TO(JOB_DONE),
	[JOB_COMMIT_WAIT] = TO(JOB_COMMIT_SYNC),
	[JOB_LOCK_WAIT] = TO(JOB_READING) | TO(JOB_WRITE_MERGE) | TO(JOB_WRITING) | TO(JOB_DONE),
	[JOB_READING] = TO(JOB_READ_WAIT_BUF) | TO(JOB_READ_WAIT_RA) | TO(JOB_READ_WAIT_SEND) |
			TO(JOB_DONE),
	[JOB_READ_WAIT_BUF] = TO(JOB_READING),
	[JOB_READ_WAIT_RA] = TO(JOB_READING) | TO(JOB_DONE),
	[JOB_READ_WAIT_SEND] = TO(JOB_READING),
	[JOB_WRITE_MERGE] = TO(JOB_WRITING),
	[JOB_WRITING] = TO(JOB_DONE),
	[JOB_COMMIT_SYNC] = TO(JOB_DONE),
	[JOB_DONE] = 0,
};

static const char *const job_state_name[JOB_NSTATES] = {
	[JOB_NEW] = "NEW",
	[JOB_COMMIT_WAIT] = "COMMIT_WAIT",
	[JOB_LOCK_WAIT] = "LOCK_WAIT",
	[JOB_READING] = "READING",
	[JOB_READ_WAIT_BUF] = "READ_WAIT_BUF",
	[JOB_READ_WAIT_RA] = "READ_WAIT_RA",
	[JOB_READ_WAIT_SEND] = "READ_WAIT_SEND",
	[JOB_WRITE_MERGE] = "WRITE_MERGE",
	[JOB_WRITING] = "WRITING",
	[JOB_COMMIT_SYNC] = "COMMIT_SYNC",
	[JOB_DONE] = "DONE",
};

static const char *job_state_str(enum job_state s)
{
	return (unsigned int)s < JOB_NSTATES ? job_state_name[s] : "?";
}

/* A job where its life cannot take it: carrying on would corrupt other requests' data. */
static _Noreturn void job_state_bug(const struct io_job *j, enum job_state from,
				    enum job_state to)
{
	log_error("I/O job for op %u: bad state transition %s -> %s", j->op,
		  job_state_str(from), job_state_str(to));
	abort();
}

static bool job_may_go(enum job_state from, enum job_state to)
{
	return (unsigned int)from < JOB_NSTATES && (unsigned int)to < JOB_NSTATES &&
	       (job_next[from] & TO(to));
}

/* The owner moves @j on; JOB_READ_WAIT_SEND, which another thread may claim, is not its alone. */
static void job_set_state(struct io_job *j, enum job_state to)
{
	enum job_state from = atomic_load(&j->state);

	if (from == JOB_READ_WAIT_SEND || !job_may_go(from, to) ||
	    !atomic_compare_exchange_strong(&j->state, &from, to))
		job_state_bug(j, from, to);
}

/* From any thread: move @j from @from to @to if it is still in @from; true if this call did. */
static bool job_claim_state(struct io_job *j, enum job_state from, enum job_state to)
{
	if (!job_may_go(from, to))
		job_state_bug(j, from, to);
	return atomic_compare_exchange_strong(&j->state, &from, to);
}

/* ------------------------------------------------------------ rings */

static struct io_uring_sqe *ring_sqe(struct ring *r)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&r->uring)))
		io_uring_submit(&r->uring);
	return sqe;
}

static void ring_queue(struct ring *r, struct io_uring_sqe *sqe, struct ring_op *op)
{
	io_uring_sqe_set_data(sqe, op);
	r->inflight++;
}

static void ring_flush(struct ring *r)
{
	io_uring_submit(&r->uring);
}

static void ring_kick(struct ring *r)
{
	uint64_t one = 1;

	if (write(r->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_error("cannot wake a ring thread: %s", strerror(errno));
}

static void job_put(struct io_job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) != 1)
		return;
	if (j->io)
		rdfs__io_req__free_unpacked(j->io, NULL);
	xport_conn_put(j->conn);
	free(j->units);
	free(j->bounce);
	free(j);
}

/* Have @j stepped on its ring; consumes one reference the caller holds. */
static void ring_post(struct ring *r, struct io_job *j)
{
	bool already;

	pthread_mutex_lock(&r->mutex);
	already = j->queued;
	if (!already) {
		j->queued = true;
		j->qnext = NULL;
		if (r->posted_tail)
			r->posted_tail->qnext = j;
		else
			r->posted_head = j;
		r->posted_tail = j;
	}
	pthread_mutex_unlock(&r->mutex);
	if (already)
		job_put(j);	/* the queued post holds one already */
	else
		ring_kick(r);
}

static void ring_run_posted(struct ring *r)
{
	struct io_job *j, *list;

	pthread_mutex_lock(&r->mutex);
	list = r->posted_head;
	r->posted_head = r->posted_tail = NULL;
	for (j = list; j; j = j->qnext)
		j->queued = false;
	pthread_mutex_unlock(&r->mutex);
	while ((j = list)) {
		list = j->qnext;
		job_step(j);
		job_put(j);
	}
}

/*
 * Park @j, which holds no buffer and reads nothing, until any buffer comes
 * back to the pool (pool_buffers_returned()); the list takes a reference.
 */
static void ring_wait_buffer(struct ring *r, struct io_job *j)
{
	atomic_fetch_add(&j->refs, 1);
	j->wnext = NULL;
	if (r->wait_tail)
		r->wait_tail->wnext = j;
	else
		r->wait_head = j;
	r->wait_tail = j;
}

static void ring_retry_buf_waiters(struct ring *r)
{
	struct io_job *j, *list = r->wait_head;

	r->wait_head = r->wait_tail = NULL;
	while ((j = list)) {
		list = j->wnext;
		atomic_fetch_sub(&j->pool->buf_waiters, 1);
		read_buffers_back(j);
		job_put(j);	/* the wait list's hold */
	}
}

/* The eventfd was written: posted jobs and returned buffers are looked at each turn. */
static void ring_efd_done(struct ring *r, struct ring_op *op, int res)
{
	r->efd_armed = false;
}

static void *ring_main(void *arg)
{
	struct ring *r = arg;
	struct io_uring_cqe *cqe;
	struct ring_op *op;
	unsigned int head, n;
	bool stop;

	for (;;) {
		if (!r->efd_armed) {
			struct io_uring_sqe *sqe = ring_sqe(r);

			io_uring_prep_read(sqe, r->efd, &r->efd_val, sizeof(r->efd_val), 0);
			ring_queue(r, sqe, &r->efd_op);
			r->efd_armed = true;
		}
		io_uring_submit_and_wait(&r->uring, 1);
		n = 0;
		io_uring_for_each_cqe(&r->uring, head, cqe) {
			n++;
			r->inflight--;
			op = io_uring_cqe_get_data(cqe);
			op->done(r, op, cqe->res);
		}
		io_uring_cq_advance(&r->uring, n);
		ring_run_posted(r);
		if (atomic_exchange(&r->buf_kick, false))
			ring_retry_buf_waiters(r);
		pthread_mutex_lock(&r->mutex);
		stop = r->stop && !r->posted_head;
		pthread_mutex_unlock(&r->mutex);
		/* nothing left on the ring but the eventfd read */
		if (stop && r->inflight == (r->efd_armed ? 1 : 0))
			break;
	}
	return NULL;
}

/*
 * Account the completion @res of a read or write of [*done, len): 1 when the
 * rest must go on the ring again (interrupted, or short), 0 when it is whole,
 * else the negative errno.
 */
static int ring_rw_advance(int res, uint32_t *done, uint32_t len)
{
	if (res == -EINTR || res == -EAGAIN)
		return 1;
	/* inside the volume there is no EOF unless it was cut behind our back */
	if (res <= 0)
		return res < 0 ? res : -EIO;
	*done += (uint32_t)res;
	return *done < len;
}

static void rw_submit(struct ring *r, struct rw_op *op)
{
	struct io_uring_sqe *sqe = ring_sqe(r);

	if (op->write)
		io_uring_prep_write(sqe, r->pool->fd, op->buf + op->done, op->len - op->done,
				    op->off + op->done);
	else
		io_uring_prep_read(sqe, r->pool->fd, op->buf + op->done, op->len - op->done,
				   op->off + op->done);
	sqe->rw_flags = op->rw_flags;
	ring_queue(r, sqe, &op->base);
}

static void rw_done(struct ring *r, struct ring_op *base, int res)
{
	struct rw_op *op = (struct rw_op *)base;
	int ret = ring_rw_advance(res, &op->done, op->len);

	if (ret > 0)
		rw_submit(r, op);
	else
		op->finish(r, op, ret);
}

static void rw_start(struct ring *r, struct rw_op *op, struct io_job *j, bool write, void *buf,
		     uint64_t block, uint32_t len, int rw_flags,
		     void (*finish)(struct ring *, struct rw_op *, int))
{
	op->base.done = rw_done;
	op->job = j;
	op->buf = buf;
	op->off = volume_block_offset(block);
	op->len = len;
	op->done = 0;
	op->write = write;
	op->rw_flags = rw_flags;
	op->finish = finish;
	rw_submit(r, op);
}

/* ------------------------------------------------------------ replies and checks */

static const char *rights_name(uint32_t rights)
{
	return rights == RDFS_CAP_WRITE ? "write" : "read";
}

/*
 * 0 if @cap lets this server's clients do @rights on the blocks; else replies the
 * error itself and returns it.
 */
static int io_check_cap(struct io_pool *p, struct rpc_request *req, const Rdfs__IoReq *io,
			uint32_t server_id, uint32_t rights)
{
	const char *why;
	int ret;

	if (!io->cap) {
		rpc_server_reply_error(req, -EACCES, "no capability");
		return -EACCES;
	}
	/* a server (another I/O server's COPY) acts for the client it checked holds it */
	ret = cap_check(p->cap_key, io->cap, server_id,
			!req->peer ? NULL : req->peer->cls == AUTH_CLASS_SERVER ? io->cap->holder :
			req->peer->id, rights, io->first_block, io->block_count, cap_now_ns());
	/* genuine, but perhaps taken back since: the client fetches the layout again */
	if (ret == 0 && p->fences &&
	    fence_check(p->fences, io->cap->epoch, io->cap->ino, io->cap->gen, cap_now_ns())) {
		rpc_server_reply_error(req, -ESTALE, "capability fenced: fetch the layout again");
		return -ESTALE;
	}
	switch (ret) {
	case 0:
		return 0;
	case -EBADMSG:
		log_warn("%s: forged capability for %s of blocks %llu+%u",
			 xport_conn_peer(req->conn), rights_name(rights),
			 (unsigned long long)io->first_block, io->block_count);
		rpc_server_reply_error(req, -EACCES, "forged capability");
		return -EACCES;
	case -EKEYEXPIRED:
		rpc_server_reply_error(req, -EKEYEXPIRED, "capability expired");
		return ret;
	case -EACCES:
		if (io->cap->server_id != server_id)
			why = "capability is for another I/O server";
		else if (!req->peer || !io->cap->holder || strcmp(io->cap->holder, req->peer->id))
			why = "capability was granted to another peer";
		else if ((io->cap->rights & rights) != rights)
			why = rights == RDFS_CAP_WRITE ? "capability does not grant write"
						       : "capability does not grant read";
		else
			why = "capability does not cover the requested blocks";
		rpc_server_reply_error(req, -EACCES, why);
		return ret;
	default:
		rpc_server_reply_error(req, ret, "cannot check capability");
		return ret;
	}
}

static int io_check_bounds(struct io_pool *p, struct rpc_request *req, const Rdfs__IoReq *io)
{
	int ret = volume_check_io(p->vol, io->first_block, io->block_count, io->head,
				  io->length, RDFS_MAX_DATA);

	if (ret == -ERANGE)
		rpc_server_reply_error(req, ret, "blocks past the end of the volume");
	else if (ret)
		rpc_server_reply_error(req, ret,
				       "bad range: head must be < 4096, head + length within the blocks, length <= 16 MiB");
	return ret;
}

static int io_check_zero_bounds(struct io_pool *p, struct rpc_request *req,
				const Rdfs__IoReq *io)
{
	int ret = volume_check_io(p->vol, io->first_block, io->block_count, 0, 0, 0);

	if (ret == -ERANGE)
		rpc_server_reply_error(req, ret, "blocks past the end of the volume");
	else if (ret)
		rpc_server_reply_error(req, ret, "bad range: ZERO needs at least one block");
	return ret;
}

static void io_reply_length(struct io_pool *p, struct rpc_request *req, uint32_t length)
{
	Rdfs__IoReply reply = RDFS__IO_REPLY__INIT;

	reply.length = length;
	reply.verifier = atomic_load(&p->verifier);
	rpc_server_reply(req, 0, &reply.base, NULL, 0);
}

/* The final reply is posted: the request is answered; the job may outlive it (sends). */
static void job_finish(struct io_job *j)
{
	struct io_pool *p = j->pool;

	if (j->locked) {
		range_lock_release(volume_range_lock(p->vol), &j->lock);
		j->locked = false;
	}
	if (j->epoch) {
		epoch_end(p, j->epoch);
		j->epoch = NULL;
	}
	rpc_request_done(&j->req);
	job_set_state(j, JOB_DONE);
	atomic_fetch_sub(&p->busy, 1);
	job_put(j);	/* the ring's hold */
}

/* ------------------------------------------------------------ READ */

static void unit_read_done(struct ring *r, struct rw_op *op, int err)
{
	struct io_unit *u = (struct io_unit *)op;
	struct io_job *j = op->job;

	j->reading--;
	if (err) {
		log_error("volume read of blocks %llu+%u failed: %s",
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

/* A pool buffer came back: wake the jobs of any ring that wait for one. */
static void pool_buffers_returned(struct io_pool *p)
{
	int i;

	if (atomic_load(&p->buf_waiters) > 0)
		for (i = 0; i < p->nrings; i++) {
			atomic_store(&p->rings[i].buf_kick, true);
			ring_kick(&p->rings[i]);
		}
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

/*
 * A pool buffer for @j within its connection's share (the rpc connection
 * counter holds the bytes each connection has), or NULL when either is spent.
 * Two rings may both pass the check: the share is exceeded by at most a
 * buffer a ring.
 */
static void *job_buf_get(struct io_job *j, size_t len)
{
	void *buf;

	if ((size_t)rpc_conn_counter_add(j->conn, 0) + len > j->pool->conn_share)
		return NULL;
	buf = bufpool_get(j->pool->bufs, len);
	if (buf)
		rpc_conn_counter_add(j->conn, (long long)len);
	return buf;
}

static void job_buf_put(struct io_job *j, void *buf, size_t len)
{
	bufpool_put(j->pool->bufs, buf, len);
	rpc_conn_counter_add(j->conn, -(long long)len);
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

/* Give back what an unsent unit holds: cache segments or a pool buffer. */
static void unit_release(struct io_pool *p, struct io_unit *u)
{
	if (u->nsegs)
		ra_release(p->ra, u->segs, u->nsegs);
	else
		job_buf_put(u->rw.job, u->rw.buf, u->buf_len);
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

static void read_step(struct io_job *j)
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
static void read_buffers_back(struct io_job *j)
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

static void read_start(struct io_job *j)
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

/*
 * Under the job's range lock: was its capability fenced since it was checked?
 * The fence's reply leaves before the metaserver frees the blocks, and a new
 * owner's ZERO or WRITE of them queues behind this lock: so a job that holds
 * the lock unfenced is done with the blocks before they change hands, and one
 * that takes it later sees the fence here. Replies -ESTALE (never called for
 * a job that has answered already).
 */
static bool job_fenced(struct io_job *j)
{
	const Rdfs__Capability *cap = j->io->cap;

	if (!j->pool->fences ||
	    !fence_check(j->pool->fences, cap->epoch, cap->ino, cap->gen, cap_now_ns()))
		return false;
	rpc_server_reply_error(&j->req, -ESTALE, "capability fenced: fetch the layout again");
	return true;
}

/* The READ holds its blocks (from JOB_NEW or JOB_LOCK_WAIT). */
static void read_locked(struct io_job *j)
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

/* ------------------------------------------------------------ WRITE and ZERO */

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
	log_error("an acknowledged write-back write was lost; new write verifier %016llx",
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
		log_error("volume write of %u bytes at block %llu+%u failed: %s", io->length,
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
static void write_locked(struct io_job *j)
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
static void zero_locked(struct io_job *j)
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
		log_error("zeroing blocks %llu+%u failed: %s", (unsigned long long)io->first_block,
			  io->block_count, strerror(-ret));
		rpc_server_reply_error(&j->req, ret, ret == -ENOSPC ? "volume is full"
								   : "zeroing blocks failed");
	} else {
		io_reply_length(p, &j->req, 0);
	}
	job_finish(j);
}

/* Range lock granted to a waiting job, on whichever thread released it. */
static void lock_granted(void *arg)
{
	struct io_job *j = arg;

	ring_post(j->ring, j);	/* the reference taken when it started waiting */
}

/*
 * Take the job's blocks: true when held now, else the job waits in
 * JOB_LOCK_WAIT and job_step() goes on once they are granted. Either way the
 * job is in line for them from here on.
 */
static bool job_lock_blocks(struct io_job *j, uint64_t count, bool shared)
{
	j->locked = true;
	atomic_fetch_add(&j->refs, 1);
	if (!range_lock_acquire_async(volume_range_lock(j->pool->vol), &j->lock,
				      j->io->first_block, j->io->first_block + count, shared,
				      lock_granted, j)) {
		/* the grant only posts the job: this ring steps it after this step */
		job_set_state(j, JOB_LOCK_WAIT);
		return false;
	}
	atomic_fetch_sub(&j->refs, 1);
	return true;
}

/*
 * ZERO: the metaserver's request, before it hands newly allocated blocks to a
 * file, that they read as zeros (they may hold a freed file's data). A
 * capability with WRITE rights, as for WRITE, so nobody else can wipe blocks.
 */
static void zero_start(struct io_job *j)
{
	if (job_lock_blocks(j, j->io->block_count, false))
		zero_locked(j);
}

static void write_start(struct io_job *j)
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

/* ------------------------------------------------------------ IO_COMMIT */

static void commit_fsync_done(struct ring *r, struct ring_op *op, int res)
{
	struct io_job *j = (struct io_job *)((uint8_t *)op - offsetof(struct io_job, fsync_op));

	if (res < 0) {
		log_error("volume sync failed: %s", strerror(-res));
		rpc_server_reply_error(&j->req, res, "volume sync failed");
	} else {
		/* the verifier tells the client whether its unstable writes predate a restart */
		io_reply_length(j->pool, &j->req, 0);
	}
	job_finish(j);
}

/* Every WRITE received before this COMMIT has completed: flush. */
static void commit_start(struct io_job *j)
{
	struct io_uring_sqe *sqe = ring_sqe(j->ring);

	job_set_state(j, JOB_COMMIT_SYNC);
	j->fsync_op.done = commit_fsync_done;
	io_uring_prep_fsync(sqe, j->pool->fd, IORING_FSYNC_DATASYNC);
	ring_queue(j->ring, sqe, &j->fsync_op);
}

static struct ring *pick_ring(struct io_pool *p)
{
	return &p->rings[atomic_fetch_add(&p->next_ring, 1) % (unsigned int)p->nrings];
}

static int epochs_init(struct io_pool *p)
{
	pthread_mutex_init(&p->epoch_mutex, NULL);
	p->ep_head = p->ep_cur = calloc(1, sizeof(*p->ep_head));
	return p->ep_head ? 0 : -ENOMEM;
}

/* Once every request is answered: no WRITE is left in any epoch. */
static void epochs_fini(struct io_pool *p)
{
	free(p->ep_head);
	pthread_mutex_destroy(&p->epoch_mutex);
}

/* Under epoch_mutex: pop finished epochs, collecting the commits they held back. */
static struct io_job *epochs_collect(struct io_pool *p)
{
	struct io_job *ready = NULL, *c;
	struct epoch *e;

	while ((e = p->ep_head) != p->ep_cur && e->pending == 0) {
		while ((c = e->commits)) {
			e->commits = c->cnext;
			c->cnext = ready;
			ready = c;
		}
		p->ep_head = e->next;
		free(e);
	}
	return ready;
}

static void commits_post(struct io_job *ready)
{
	struct io_job *c;

	while ((c = ready)) {
		ready = c->cnext;
		ring_post(c->ring, c);
	}
}

static void epoch_end(struct io_pool *p, struct epoch *e)
{
	struct io_job *ready;

	pthread_mutex_lock(&p->epoch_mutex);
	e->pending--;
	ready = epochs_collect(p);
	pthread_mutex_unlock(&p->epoch_mutex);
	commits_post(ready);
}

/* Main loop: a WRITE arrives. */
static struct epoch *epoch_add_write(struct io_pool *p)
{
	struct epoch *e;

	pthread_mutex_lock(&p->epoch_mutex);
	e = p->ep_cur;
	e->pending++;
	pthread_mutex_unlock(&p->epoch_mutex);
	return e;
}

/* Main loop: a COMMIT arrives. True: run it now; else it is posted when its writes are done. */
static bool epoch_add_commit(struct io_pool *p, struct io_job *j)
{
	struct epoch *next = calloc(1, sizeof(*next));
	bool now;

	pthread_mutex_lock(&p->epoch_mutex);
	now = p->ep_head == p->ep_cur && p->ep_cur->pending == 0;
	if (!now && !next) {
		/* cannot close the epoch: wait for the writes of the current one too */
		now = false;
	}
	if (!now) {
		/* parked: the ring that posts it later reads this state */
		job_set_state(j, JOB_COMMIT_WAIT);
		j->cnext = p->ep_cur->commits;
		p->ep_cur->commits = j;
		if (next) {
			p->ep_cur->next = next;
			p->ep_cur = next;
			next = NULL;
		}
	}
	pthread_mutex_unlock(&p->epoch_mutex);
	free(next);
	return now;
}

/* ------------------------------------------------------------ dispatch */

/* First step of a job on its ring: decode and check, then start its operation. */
static void job_begin(struct io_job *j)
{
	struct io_pool *p = j->pool;
	uint32_t rights = j->op == RDFS_OP_READ ? RDFS_CAP_READ : RDFS_CAP_WRITE;
	uint32_t server_id;

	if (j->op == RDFS_OP_IO_COMMIT) {
		commit_start(j);
		return;
	}
	j->io = rdfs__io_req__unpack(NULL, j->req.msg->hdr.body_len, j->req.msg->body);
	if (!j->io) {
		rpc_server_reply_error(&j->req, -EBADMSG, "undecodable IoReq");
		job_finish(j);
		return;
	}
	if (server_id_get(p->id, &server_id)) {
		rpc_server_reply_error(&j->req, -EAGAIN, "not registered yet");
		job_finish(j);
		return;
	}
	if (io_check_cap(p, &j->req, j->io, server_id, rights)) {
		job_finish(j);
		return;
	}
	if (j->op == RDFS_OP_ZERO) {
		/* whole blocks: head and length do not apply */
		if (io_check_zero_bounds(p, &j->req, j->io))
			job_finish(j);
		else
			zero_start(j);
		return;
	}
	if (io_check_bounds(p, &j->req, j->io)) {
		job_finish(j);
		return;
	}
	if (j->op == RDFS_OP_WRITE)
		write_start(j);
	else
		read_start(j);
}

/*
 * A posting of @j runs on its ring. Who posts, and so what the posting means,
 * follows from the state; a READ may also see a late wake-up for a wait it
 * has left already, which must find nothing to do or the next step.
 */
static void job_step(struct io_job *j)
{
	enum job_state s = job_state(j);

	switch (s) {
	case JOB_NEW:			/* io_pool_submit() */
	case JOB_COMMIT_WAIT:		/* the last WRITE before it (epoch_end()) */
		job_begin(j);
		return;
	case JOB_LOCK_WAIT:		/* lock_granted() */
		if (j->op == RDFS_OP_ZERO)
			zero_locked(j);
		else if (j->op == RDFS_OP_WRITE)
			write_locked(j);
		else
			read_locked(j);
		return;
	case JOB_READ_WAIT_SEND:
		/*
		 * A late wake-up, as the send completion that ends this wait
		 * moves the job to JOB_READING itself: read on either way.
		 */
		job_claim_state(j, JOB_READ_WAIT_SEND, JOB_READING);
		read_step(j);
		return;
	case JOB_READING:		/* a send completion or a read-ahead load, late or not */
	case JOB_READ_WAIT_RA:		/* unit_seg_loaded(), or late */
		read_step(j);
		return;
	case JOB_READ_WAIT_BUF:		/* late: only the ring's buffer-wait list ends it */
	case JOB_DONE:			/* late: nothing is left to do */
		return;
	case JOB_WRITE_MERGE:
	case JOB_WRITING:
	case JOB_COMMIT_SYNC:
	case JOB_NSTATES:
		break;			/* moved on by their ring completions alone */
	}
	log_error("I/O job for op %u: posted in state %s", j->op, job_state_str(s));
	abort();
}

void io_pool_submit(struct io_pool *p, const struct rpc_request *req)
{
	struct io_job *j = calloc(1, sizeof(*j));

	if (!j) {
		struct rpc_request r = *req;

		rpc_server_reply_error(&r, -ENOMEM, "out of memory");
		rpc_request_done(&r);
		return;
	}
	j->pool = p;
	j->req = *req;
	j->conn = req->conn;
	xport_conn_get(j->conn);
	j->op = req->msg->hdr.opcode;
	atomic_init(&j->state, JOB_NEW);
	atomic_init(&j->refs, 2);	/* the ring's hold and the posting's */
	atomic_init(&j->returned, 0);
	atomic_init(&j->ra_ready, false);
	j->ring = pick_ring(p);
	atomic_fetch_add(&p->busy, 1);
	if (j->op == RDFS_OP_WRITE)
		j->epoch = epoch_add_write(p);
	/* A COMMIT waiting for earlier WRITEs is posted by the last of them. */
	if (j->op == RDFS_OP_IO_COMMIT && !epoch_add_commit(p, j))
		return;
	ring_post(j->ring, j);
}

void io_pool_get_stats(struct io_pool *p, struct io_pool_stats *out)
{
	out->reads = atomic_load(&p->n_reads);
	out->units_from_disk = atomic_load(&p->n_units_disk);
	out->units_from_cache = atomic_load(&p->n_units_cache);
	out->parts_sent = atomic_load(&p->n_parts);
	out->ra_loads = atomic_load(&p->n_ra);
	out->ra_loads_done = atomic_load(&p->n_ra_done);
}

uint64_t io_pool_verifier(struct io_pool *p)
{
	return atomic_load(&p->verifier);
}

int io_pool_busy(struct io_pool *p)
{
	return atomic_load(&p->busy);
}

/* ------------------------------------------------------------ life cycle */

uint64_t io_pool_default_buffers(const struct io_pool_opts *o)
{
	uint64_t b = (uint64_t)o->threads * (uint64_t)o->pipeline_depth * o->unit_size *
		     HELD_PER_DEPTH * 8;

	return b < 2ull * RDFS_MAX_DATA ? 2ull * RDFS_MAX_DATA : b;
}

static int ring_init(struct io_pool *p, struct ring *r)
{
	int ret;

	r->pool = p;
	/* blocking: io_uring would fail a read of a non-blocking one with EAGAIN */
	r->efd = eventfd(0, EFD_CLOEXEC);
	if (r->efd < 0)
		return -errno;
	ret = io_uring_queue_init(RING_ENTRIES, &r->uring, 0);
	if (ret) {
		close(r->efd);
		r->efd = -1;
		return ret;
	}
	pthread_mutex_init(&r->mutex, NULL);
	atomic_init(&r->buf_kick, false);
	r->efd_op.done = ring_efd_done;
	return 0;
}

/* Set @r up and start its thread; on failure ring_fini() frees what was set up. */
static int ring_start(struct io_pool *p, struct ring *r)
{
	int ret = ring_init(p, r);

	if (ret)
		return ret;
	ret = -pthread_create(&r->thread, NULL, ring_main, r);
	if (ret)
		return ret;
	r->started = true;
	return 0;
}

static void ring_fini(struct ring *r)
{
	if (r->efd < 0)
		return;
	io_uring_queue_exit(&r->uring);
	close(r->efd);
	pthread_mutex_destroy(&r->mutex);
	r->efd = -1;
}

static void rings_stop(struct io_pool *p)
{
	int i;

	for (i = 0; i < p->nrings; i++) {
		struct ring *r = &p->rings[i];

		if (!r->started)
			continue;
		pthread_mutex_lock(&r->mutex);
		r->stop = true;
		pthread_mutex_unlock(&r->mutex);
		ring_kick(r);
		pthread_join(r->thread, NULL);
		r->started = false;
	}
}

static void pool_free(struct io_pool *p)
{
	int i;

	for (i = 0; i < p->nrings; i++)
		ring_fini(&p->rings[i]);
	free(p->rings);
	epochs_fini(p);
	ra_destroy(p->ra);
	bufpool_destroy(p->bufs);
	free(p);
}

int io_pool_create(const struct io_pool_opts *o, struct io_pool **out)
{
	struct io_pool *p;
	uint64_t budget;
	int i, ret;

	if (o->threads < 1 || o->pipeline_depth < 1 || !o->unit_size ||
	    o->unit_size % RDFS_BLOCK_SIZE || o->unit_size > RDFS_MAX_DATA)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->vol = o->vol;
	p->fd = volume_fd(o->vol);
	p->cap_key = o->cap_key;
	p->id = o->id;
	p->fences = o->fences;
	atomic_init(&p->verifier, o->verifier);
	p->send_mode = o->send_mode;
	p->unit_size = o->unit_size;
	p->depth = o->pipeline_depth;
	p->nrings = o->threads;
	ret = epochs_init(p);
	p->rings = calloc((size_t)p->nrings, sizeof(*p->rings));
	if (ret || !p->rings) {
		ret = -ENOMEM;
		goto err;
	}
	for (i = 0; i < p->nrings; i++)
		p->rings[i].efd = -1;
	budget = o->buffer_pool_bytes ? o->buffer_pool_bytes : io_pool_default_buffers(o);
	ret = bufpool_create(budget, o->unit_size, p->nrings * p->depth * HELD_PER_DEPTH,
			     &p->bufs);
	if (ret)
		goto err;
	/* a quarter each, but always room for one whole buffer of the send mode */
	p->conn_share = budget / 4;
	if (p->conn_share < (p->send_mode == IOS_SEND_WHOLE ? RDFS_MAX_DATA : p->unit_size))
		p->conn_share = p->send_mode == IOS_SEND_WHOLE ? RDFS_MAX_DATA : p->unit_size;
	if (o->readahead_bytes) {
		ret = ra_create(o->readahead_bytes, volume_capacity(o->vol), &p->ra);
		if (ret)
			goto err;
	}
	for (i = 0; i < p->nrings; i++) {
		ret = ring_start(p, &p->rings[i]);
		if (ret)
			goto err_rings;
	}
	*out = p;
	return 0;

err_rings:
	rings_stop(p);
err:
	pool_free(p);
	return ret;
}

void io_pool_stop(struct io_pool *p)
{
	if (!p)
		return;
	while (atomic_load(&p->busy))
		usleep(1000);
	rings_stop(p);
}

void io_pool_destroy(struct io_pool *p)
{
	if (!p)
		return;
	rings_stop(p);
	pool_free(p);
}
