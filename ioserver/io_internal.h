/* SPDX-License-Identifier: MIT */
/*
 * io_internal.h - what the files of the I/O pool share; io_request.h is the
 * pool's interface to the rest of the server.
 *
 * One idea a file:
 *   ring.c       the ring threads: posting jobs, the buffer-wait list, and
 *                every completion of the io_uring (struct ring_op)
 *   io_job.c     a job's life: its state (enum job_state), its first step
 *                (decode and checks), its replies, its range lock
 *   io_read.c    READ: the unit pipeline, its sends and read-ahead loads
 *   io_write.c   WRITE (range lock, bounce block) and ZERO
 *   io_commit.c  IO_COMMIT and the WRITE epochs it waits for
 *   io_pool.c    the pool: its life cycle, submission, buffer shares, counters
 *
 * Threads: the main loop (rpc_server_next) creates a job per request and
 * posts it to a ring thread, chosen round robin. A ring thread owns its jobs:
 * only it reads or changes one, apart from the atomics (state, refs, returned,
 * ra_ready), which other threads touch as their comments say. Other threads
 * never step a job: they post it to its ring (ring_post()), and the ring reads
 * what the posting means from the job's state. A ring thread sleeps in
 * io_uring_submit_and_wait(); a read of its eventfd on the same ring wakes it
 * for posted jobs and for buffers given back to the pool. Nothing in a ring
 * thread blocks on another request, except ZERO (io_write.c).
 *
 * Ownership: a job lives until its final reply is posted and every send
 * holding one of its buffers has completed: refs counts the ring's hold, each
 * posting, each wait another thread ends (range lock, read-ahead load, buffer
 * list) and each send in flight.
 *
 * Locks: ring.mutex (the posted queue, stop) and io_pool.epoch_mutex (the
 * epochs) are leaves: nothing is called under them but list work. The range
 * lock (range_lock.h) is taken asynchronously, never waited for.
 */
#ifndef RDFS_IOS_IO_INTERNAL_H
#define RDFS_IOS_IO_INTERNAL_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io_request.h"
#include "range_lock.h"
#include "rdfs.pb-c.h"
#include "readahead.h"
#include "rpc.h"

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
struct epoch;

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

/* ring.c */
int ring_start(struct io_pool *p, struct ring *r);
void rings_stop(struct io_pool *p);
void ring_fini(struct ring *r);
struct io_uring_sqe *ring_sqe(struct ring *r);
/* @sqe goes on the ring; its completion calls @op->done. */
void ring_queue(struct ring *r, struct io_uring_sqe *sqe, struct ring_op *op);
/* Submit what is queued now rather than when the ring thread next waits. */
void ring_flush(struct ring *r);
void ring_kick(struct ring *r);
void ring_post(struct ring *r, struct io_job *j);
void ring_wait_buffer(struct ring *r, struct io_job *j);
int ring_rw_advance(int res, uint32_t *done, uint32_t len);
void rw_start(struct ring *r, struct rw_op *op, struct io_job *j, bool write, void *buf,
	      uint64_t block, uint32_t len, int rw_flags,
	      void (*finish)(struct ring *, struct rw_op *, int));

/* io_job.c */
static inline enum job_state job_state(struct io_job *j)
{
	return atomic_load(&j->state);
}

void job_set_state(struct io_job *j, enum job_state to);
bool job_claim_state(struct io_job *j, enum job_state from, enum job_state to);
void job_step(struct io_job *j);
void job_finish(struct io_job *j);
void job_put(struct io_job *j);
bool job_fenced(struct io_job *j);
bool job_lock_blocks(struct io_job *j, uint64_t count, bool shared);
void io_reply_length(struct io_pool *p, struct rpc_request *req, uint32_t length);

/* io_read.c */
void read_start(struct io_job *j);
void read_locked(struct io_job *j);
void read_step(struct io_job *j);
void read_buffers_back(struct io_job *j);

/* io_write.c */
void write_start(struct io_job *j);
void write_locked(struct io_job *j);
void zero_start(struct io_job *j);
void zero_locked(struct io_job *j);

/* io_commit.c */
int epochs_init(struct io_pool *p);
void epochs_fini(struct io_pool *p);
struct epoch *epoch_add_write(struct io_pool *p);
bool epoch_add_commit(struct io_pool *p, struct io_job *j);
void epoch_end(struct io_pool *p, struct epoch *e);
void commit_start(struct io_job *j);

/* io_pool.c */
void *job_buf_get(struct io_job *j, size_t len);
void job_buf_put(struct io_job *j, void *buf, size_t len);
void pool_buffers_returned(struct io_pool *p);

#endif
