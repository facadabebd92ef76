// SPDX-License-Identifier: MIT
/*
 * ioserver.c - the sweep proper: READs of one size straight to the I/O server
 * that holds the test file, with the capability from the file's layout, a fixed
 * number outstanding, each checked against the pattern.
 *
 * With --streams N, N threads each read their own slice of the pass's region
 * over their own connection at the same time (SuperNBD's many sequential
 * clients): the figure is all their bytes over the slowest one's time.
 *
 * The reply's data may come in several frames (an I/O server in overlap send
 * mode sends each unit as it comes off the disk: RDFS_FRAME_MORE); the copy out
 * of them is excluded from the time, like the pattern check.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "rpc.h"
#include "sweep.h"

struct inflight {
	struct rpc_pending *p;
	Rdfs__IoReq req;
	uint64_t file_offset;
	uint64_t len;
};

/* The reply's data over all its frames: its length; at most @cap bytes go to @buf. */
static size_t reply_data(const struct rpc_reply *r, void *buf, size_t cap)
{
	size_t len = rpc_reply_data_len(r);

	rpc_reply_data_copy(r, 0, buf, len < cap ? len : cap);
	return len;
}

static int read_start(struct rpc_client *c, struct inflight *f, const struct sweep_run *run,
		      uint64_t file_offset, uint64_t len)
{
	rdfs__io_req__init(&f->req);
	f->req.cap = (Rdfs__Capability *)run->cap;
	f->req.first_block = run->block + (file_offset - run->file_offset) / SWEEP_BLOCK;
	f->req.block_count = (uint32_t)(len / SWEEP_BLOCK);
	f->req.head = 0;
	f->req.length = (uint32_t)len;
	f->file_offset = file_offset;
	f->len = len;
	return rpc_call_start(c, RDFS_OP_READ, &f->req.base, NULL, 0, &f->p);
}

/* Wait for @f's reply; verify it (timing excluded, in *@verify_s). */
static int read_finish(struct inflight *f, const struct sweep_plan *p, int timeout_ms,
		       void *buf, double *verify_s)
{
	struct rpc_reply reply;
	size_t got;
	double t0;
	int ret;

	ret = rpc_call_wait(f->p, timeout_ms, &reply);
	f->p = NULL;
	if (ret) {
		fprintf(stderr, "rdfs-sweep: READ of %llu bytes at %llu: %s\n",
			(unsigned long long)f->len, (unsigned long long)f->file_offset,
			strerror(-ret));
		return ret;
	}
	if (reply.status) {
		ret = reply.status;
		fprintf(stderr, "rdfs-sweep: the I/O server failed a READ of %llu bytes at %llu: "
			"%s\n", (unsigned long long)f->len, (unsigned long long)f->file_offset,
			strerror(-ret));
		rpc_reply_release(&reply);
		return ret;
	}
	t0 = now_seconds();
	got = reply_data(&reply, buf, f->len);
	rpc_reply_release(&reply);
	if (got != f->len) {
		fprintf(stderr, "rdfs-sweep: DATA MISMATCH (READ): %zu bytes back for a READ of "
			"%llu at %llu\n", got, (unsigned long long)f->len,
			(unsigned long long)f->file_offset);
		return -EILSEQ;
	}
	if (p->verify)
		ret = pattern_check(buf, got, f->file_offset, p->seed, "READ from the I/O server");
	*verify_s += now_seconds() - t0;
	return ret;
}

static int sweep_one_size(struct rpc_client *c, struct sweep_walk *w, const struct sweep_plan *p,
			  uint64_t size, int timeout_ms, void *buf, struct sweep_result *r)
{
	uint64_t n = plan_stream_requests(p, size), started = 0, done = 0;
	struct inflight *fl = calloc(p->depth, sizeof(*fl));
	double t0, verify_s = 0;
	int ret = 0;

	if (!fl)
		return -ENOMEM;
	memset(r, 0, sizeof(*r));
	r->request_bytes = size;
	t0 = now_seconds();
	while (done < n && !ret) {
		/* keep depth requests outstanding; they complete in order of issue */
		while (started < n && started - done < (uint64_t)p->depth) {
			struct inflight *f = &fl[started % p->depth];
			const struct sweep_run *run;
			uint64_t off;

			run = walk_next(w, size, &off);
			if (!run) {
				ret = -ENOSPC;
				break;
			}
			ret = read_start(c, f, run, off, size);
			if (ret) {
				fprintf(stderr, "rdfs-sweep: sending a READ: %s\n", strerror(-ret));
				break;
			}
			started++;
		}
		if (ret || done == started)
			break;
		ret = read_finish(&fl[done % p->depth], p, timeout_ms, buf, &verify_s);
		done++;
		r->bytes += size;
	}
	r->seconds = now_seconds() - t0 - verify_s;
	r->requests = done;
	/* collect what is still outstanding after a failure */
	for (; done < started; done++) {
		struct rpc_reply reply;

		if (rpc_call_wait(fl[done % p->depth].p, timeout_ms, &reply) == 0)
			rpc_reply_release(&reply);
	}
	free(fl);
	result_finish(r);
	return ret;
}

/* One sequential reader: its connection and its slice of the pass's region. */
struct stream {
	const struct sweep_plan *p;
	const struct sweep_env *env;
	const char *url;
	struct rpc_client *c;
	struct sweep_walk w;
	void *buf;
	pthread_mutex_t *gate;		/* held until size_start counts the started */
	pthread_barrier_t *size_start;	/* all streams start each size together */
	int *failed;			/* shared: the others stop working, not waiting */
	struct sweep_result res[SWEEP_MAX_SIZES];
	int err;
	pthread_t th;
};

static void *stream_main(void *arg)
{
	struct stream *st = arg;
	const struct sweep_plan *p = st->p;
	int i;

	pthread_mutex_lock(st->gate);
	pthread_mutex_unlock(st->gate);
	for (i = 0; i < p->nsizes; i++) {
		pthread_barrier_wait(st->size_start);
		if (st->err || __atomic_load_n(st->failed, __ATOMIC_RELAXED))
			continue;	/* keep meeting the barrier, so no one waits forever */
		st->err = sweep_one_size(st->c, &st->w, p, p->sizes[i], st->env->timeout_ms,
					 st->buf, &st->res[i]);
		if (st->err)
			__atomic_store_n(st->failed, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int stream_open(struct stream *st, const struct sweep_target *t, uint64_t start,
		       uint64_t end, struct rpc_client *shared)
{
	int ret = 0;

	if (shared)
		st->c = shared;
	else
		ret = rpc_client_connect(st->url, &st->env->secret, "client",
					 st->env->timeout_ms, &st->c);
	if (ret) {
		fprintf(stderr, "rdfs-sweep: cannot connect to the I/O server %s: %s\n", st->url,
			strerror(-ret));
		return ret;
	}
	if (posix_memalign(&st->buf, SWEEP_BLOCK, st->p->sizes[st->p->nsizes - 1]))
		return -ENOMEM;
	walk_init(&st->w, t, start, end);
	return 0;
}

int sweep_ioserver(struct sweep_env *env, const struct sweep_plan *p)
{
	int nstreams = p->streams > 1 ? p->streams : 1, failed = 0, started = 0, i, k, ret;
	struct stream *sts = calloc(nstreams, sizeof(*sts));
	pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
	pthread_barrier_t size_start;
	struct sweep_target t;
	uint64_t start, slice;

	if (!sts)
		return SWEEP_FAIL;
	ret = target_open(env, &t);
	if (ret) {
		free(sts);
		return SWEEP_FAIL;
	}
	start = (uint64_t)p->pass * plan_pass_bytes(p);
	/* whole blocks; each slice still holds one stream's budget (plan_pass_bytes) */
	slice = plan_pass_bytes(p) / nstreams / SWEEP_BLOCK * SWEEP_BLOCK;
	for (k = 0; k < nstreams && !ret; k++) {
		sts[k].p = p;
		sts[k].env = env;
		sts[k].url = t.server_url;
		sts[k].gate = &gate;
		sts[k].size_start = &size_start;
		sts[k].failed = &failed;
		/* one connection for all, as a FUSE client carries all its readers */
		ret = stream_open(&sts[k], &t, start + k * slice, start + (k + 1) * slice,
				  p->shared_connection && k ? sts[0].c : NULL);
	}
	target_drop_volume_cache(env);
	pthread_mutex_lock(&gate);
	for (k = 0; k < nstreams && !ret; k++) {
		if (pthread_create(&sts[k].th, NULL, stream_main, &sts[k])) {
			fprintf(stderr, "rdfs-sweep: cannot start %d streams\n", nstreams);
			ret = -EAGAIN;
			failed = 1;	/* the started ones only meet the barrier */
		} else {
			started++;
		}
	}
	pthread_barrier_init(&size_start, NULL, started ? started : 1);
	pthread_mutex_unlock(&gate);
	for (k = 0; k < started; k++) {
		pthread_join(sts[k].th, NULL);
		if (sts[k].err && !ret)
			ret = sts[k].err;
	}
	for (i = 0; i < p->nsizes && !ret; i++) {
		struct sweep_result r = { .request_bytes = p->sizes[i] };
		char extra[320];

		/* all streams read at once: the slowest one's time is the size's */
		for (k = 0; k < nstreams; k++) {
			r.bytes += sts[k].res[i].bytes;
			r.requests += sts[k].res[i].requests;
			if (sts[k].res[i].seconds > r.seconds)
				r.seconds = sts[k].res[i].seconds;
		}
		result_finish(&r);
		snprintf(extra, sizeof(extra), "\"server\": \"%s\", \"pass\": %d, \"streams\": %d",
			 t.server_url, p->pass, nstreams);
		result_emit(env, p, &r, extra);
	}
	for (k = 0; k < nstreams; k++) {
		free(sts[k].buf);
		if (sts[k].c && (k == 0 || !p->shared_connection))
			rpc_client_close(sts[k].c);
	}
	pthread_barrier_destroy(&size_start);
	free(sts);
	target_free(&t);
	return ret ? SWEEP_FAIL : SWEEP_OK;
}
