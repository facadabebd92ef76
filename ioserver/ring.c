// SPDX-License-Identifier: MIT
/*
 * ring.c - the ring threads of the I/O pool (see io_internal.h): each owns an
 * io_uring, runs the jobs posted to it and the completions of what it put on
 * its ring.
 *
 * Threads: ring_post() and ring_kick() are called from any thread, and the
 * pool starts and stops the rings from its own; everything else here runs on
 * the ring's own thread. A posted job waits on the ring's queue (ring.mutex)
 * until the ring thread wakes: the eventfd's write ends the eventfd read it
 * keeps on the ring, so one io_uring_submit_and_wait() sleeps for both disk
 * completions and posts.
 *
 * Completions: one idiom. Every sqe carries a struct ring_op whose done() the
 * ring thread calls with the result, the eventfd read's among them; a ranged
 * read or write (struct rw_op) resubmits itself until whole and then calls
 * its finish().
 *
 * Ownership: the posted queue and the buffer-wait list each hold a reference
 * on the jobs in them, dropped once the job has run.
 */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "io_internal.h"
#include "log.h"
#include "volume.h"

/* Submission queue entries per ring; the kernel keeps completions beyond it. */
#define RING_ENTRIES		256

struct io_uring_sqe *ring_sqe(struct ring *r)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&r->uring)))
		io_uring_submit(&r->uring);
	return sqe;
}

void ring_queue(struct ring *r, struct io_uring_sqe *sqe, struct ring_op *op)
{
	io_uring_sqe_set_data(sqe, op);
	r->inflight++;
}

void ring_flush(struct ring *r)
{
	io_uring_submit(&r->uring);
}

void ring_kick(struct ring *r)
{
	uint64_t one = 1;

	if (write(r->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_error(1200029, "cannot wake a ring thread: %s", strerror(errno));
}

/* Have @j stepped on its ring; consumes one reference the caller holds. */
void ring_post(struct ring *r, struct io_job *j)
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
void ring_wait_buffer(struct ring *r, struct io_job *j)
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
int ring_rw_advance(int res, uint32_t *done, uint32_t len)
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

void rw_start(struct ring *r, struct rw_op *op, struct io_job *j, bool write, void *buf,
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
int ring_start(struct io_pool *p, struct ring *r)
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

void ring_fini(struct ring *r)
{
	if (r->efd < 0)
		return;
	io_uring_queue_exit(&r->uring);
	close(r->efd);
	pthread_mutex_destroy(&r->mutex);
	r->efd = -1;
}

void rings_stop(struct io_pool *p)
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
