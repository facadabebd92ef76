// SPDX-License-Identifier: MIT
/*
 * session_loop.c - rdfs-fuse's FUSE session loop: worker threads that read
 * requests from /dev/fuse and hand them to libfuse's dispatcher, as
 * fuse_session_loop_mt() does, with one difference: a WRITE's data may stay
 * where it was read.
 *
 * Each worker reads into a buffer of its own, which libfuse allocates when
 * the worker has none. A write op that can send the data as it is
 * (write-behind with a whole chunk: rdfs_pwrite_lend()) takes the buffer
 * over, and it is free()d once the chunk is on the I/O servers; the worker
 * reads its next request into a new buffer. That saves write-behind's copy
 * of every byte of large sequential writes.
 *
 * A worker is started whenever the last idle one takes a request, up to
 * max_threads, so a request that waits for another one (a write whose cache
 * drop writes a mapped page back through us) finds a worker to serve it.
 * Workers stay until the session ends; the main thread then cancels those
 * still waiting for a request (as libfuse's loop does) and joins them all.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_metrics.h"
#include "log.h"
#include "session_loop.h"

struct session_loop;

struct session_worker {
	struct session_loop *loop;
	pthread_t th;
	struct fuse_buf buf;		/* owned; mem NULL after it was given away */
	bool buffer_given;
	struct session_worker *next;
};

struct session_loop {
	struct fuse_session *se;
	unsigned int max_threads;
	pthread_mutex_t lock;		/* threads, idle, workers, error, stopping */
	bool stopping;			/* no more workers: the list is final */
	unsigned int threads;
	unsigned int idle;
	struct session_worker *workers;
	int error;
	sem_t ended;			/* posted by each worker that stops */
};

/*
 * The worker the calling thread is. Ops are called by libfuse with no
 * context of ours beyond the session's userdata, shared by all workers; this
 * is how a write op reaches its own request buffer.
 */
static __thread struct session_worker *current_worker;

void *session_loop_request_buffer(const void *data, size_t len)
{
	struct session_worker *w = current_worker;
	const char *mem, *p = data;

	if (!w || !w->buf.mem || (w->buf.flags & FUSE_BUF_IS_FD))
		return NULL;
	mem = w->buf.mem;
	if (p < mem || p + len > mem + w->buf.size)
		return NULL;
	return w->buf.mem;
}

void session_loop_buffer_given(void)
{
	if (current_worker)
		current_worker->buffer_given = true;
}

static void *worker_main(void *arg);

/* Under l->lock. */
static int worker_start(struct session_loop *l)
{
	struct session_worker *w;
	int err;

	if (l->stopping)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->loop = l;
	err = pthread_create(&w->th, NULL, worker_main, w);
	if (err) {
		free(w);
		return -err;
	}
	w->next = l->workers;
	l->workers = w;
	l->threads++;
	l->idle++;
	return 0;
}

static void loop_failed(struct session_loop *l, int err)
{
	pthread_mutex_lock(&l->lock);
	if (!l->error)
		l->error = err;
	pthread_mutex_unlock(&l->lock);
	fuse_session_exit(l->se);
}

static void *worker_main(void *arg)
{
	struct session_worker *w = arg;
	struct session_loop *l = w->loop;
	int res;

	current_worker = w;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	while (!fuse_session_exited(l->se)) {
		/* cancelled only while waiting for a request, never inside one */
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		res = fuse_session_receive_buf(l->se, &w->buf);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0) {
			if (res < 0)
				loop_failed(l, res);
			break;
		}
		pthread_mutex_lock(&l->lock);
		if (--l->idle == 0 && l->threads < l->max_threads) {
			int err = worker_start(l);

			if (err && l->threads == 1)
				log_warn(1300010,
					 "cannot start a second FUSE worker: %s", strerror(-err));
		}
		pthread_mutex_unlock(&l->lock);

		w->buffer_given = false;
		fuse_metrics_begin(&w->buf);
		fuse_session_process_buf(l->se, &w->buf);
		fuse_metrics_end();
		if (w->buffer_given)
			w->buf.mem = NULL;

		pthread_mutex_lock(&l->lock);
		l->idle++;
		pthread_mutex_unlock(&l->lock);
	}
	sem_post(&l->ended);
	return NULL;
}

int session_loop_run(struct fuse_session *se, unsigned int max_threads)
{
	struct session_loop l = { .se = se, .max_threads = max_threads ? max_threads : 1 };
	struct session_worker *w;
	int ret;

	pthread_mutex_init(&l.lock, NULL);
	sem_init(&l.ended, 0, 0);
	pthread_mutex_lock(&l.lock);
	ret = worker_start(&l);
	pthread_mutex_unlock(&l.lock);
	if (ret) {
		log_error(1300011, "cannot start a FUSE worker: %s", strerror(-ret));
		goto out;
	}
	/* a signal handler's fuse_session_exit() interrupts the wait */
	while (!fuse_session_exited(se))
		sem_wait(&l.ended);

	pthread_mutex_lock(&l.lock);
	l.stopping = true;
	for (w = l.workers; w; w = w->next)
		pthread_cancel(w->th);
	pthread_mutex_unlock(&l.lock);
	for (w = l.workers; w; w = w->next)
		pthread_join(w->th, NULL);
	ret = l.error;
out:
	while ((w = l.workers)) {
		l.workers = w->next;
		free(w->buf.mem);
		free(w);
	}
	sem_destroy(&l.ended);
	pthread_mutex_destroy(&l.lock);
	fuse_session_reset(se);
	return ret;
}
