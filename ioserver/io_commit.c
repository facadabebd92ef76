// SPDX-License-Identifier: MIT
/*
 * io_commit.c - IO_COMMIT (see io_request.h): wait for every WRITE received
 * before it, then fdatasync the volume on the ring.
 *
 * WRITEs are counted in the epoch current when they arrive (struct epoch,
 * io_internal.h); a COMMIT that cannot run at once closes the current epoch,
 * waits in it in JOB_COMMIT_WAIT, and is posted by the WRITE that ends the
 * last older epoch still pending. Then JOB_COMMIT_SYNC until the fdatasync
 * completes.
 *
 * Threads: WRITEs and COMMITs enter their epochs on the main loop
 * (io_pool_submit()); WRITEs leave them on their ring threads (job_finish()).
 *
 * Locks: io_pool.epoch_mutex covers the epoch list and every epoch in it;
 * commits are posted after it is dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "log.h"

static void commit_fsync_done(struct ring *r, struct ring_op *op, int res)
{
	struct io_job *j = (struct io_job *)((uint8_t *)op - offsetof(struct io_job, fsync_op));

	if (res < 0) {
		log_error(1200003, "volume sync failed: %s", strerror(-res));
		rpc_server_reply_error(&j->req, res, "volume sync failed");
	} else {
		/* the verifier tells the client whether its unstable writes predate a restart */
		io_reply_length(j->pool, &j->req, 0);
	}
	job_finish(j);
}

/* Every WRITE received before this COMMIT has completed: flush. */
void commit_start(struct io_job *j)
{
	struct io_uring_sqe *sqe = ring_sqe(j->ring);

	job_set_state(j, JOB_COMMIT_SYNC);
	j->fsync_op.done = commit_fsync_done;
	io_uring_prep_fsync(sqe, j->pool->fd, IORING_FSYNC_DATASYNC);
	ring_queue(j->ring, sqe, &j->fsync_op);
}

int epochs_init(struct io_pool *p)
{
	pthread_mutex_init(&p->epoch_mutex, NULL);
	p->ep_head = p->ep_cur = calloc(1, sizeof(*p->ep_head));
	return p->ep_head ? 0 : -ENOMEM;
}

/* Once every request is answered: no WRITE is left in any epoch. */
void epochs_fini(struct io_pool *p)
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
	/*
	 * Commits parked in the open epoch (it could not be closed: no memory for
	 * the next one) run once it drains: every WRITE before them is done then.
	 */
	e = p->ep_cur;
	if (e == p->ep_head && e->pending == 0) {
		while ((c = e->commits)) {
			e->commits = c->cnext;
			c->cnext = ready;
			ready = c;
		}
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

void epoch_end(struct io_pool *p, struct epoch *e)
{
	struct io_job *ready;

	pthread_mutex_lock(&p->epoch_mutex);
	e->pending--;
	ready = epochs_collect(p);
	pthread_mutex_unlock(&p->epoch_mutex);
	commits_post(ready);
}

/* Main loop: a WRITE arrives. */
struct epoch *epoch_add_write(struct io_pool *p)
{
	struct epoch *e;

	pthread_mutex_lock(&p->epoch_mutex);
	e = p->ep_cur;
	e->pending++;
	pthread_mutex_unlock(&p->epoch_mutex);
	return e;
}

/* Main loop: a COMMIT arrives. True: run it now; else it is posted when its writes are done. */
bool epoch_add_commit(struct io_pool *p, struct io_job *j)
{
	struct epoch *next = calloc(1, sizeof(*next));
	bool now;

	pthread_mutex_lock(&p->epoch_mutex);
	now = p->ep_head == p->ep_cur && p->ep_cur->pending == 0;
	if (!now) {
		/*
		 * Without memory for the next epoch the current one stays open:
		 * the commit then also waits for the WRITEs after it, and runs
		 * when that epoch drains (epochs_collect()).
		 */
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
