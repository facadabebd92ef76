// SPDX-License-Identifier: MIT
/*
 * ioserver.c - the sweep proper: READs of one size straight to the I/O server
 * that holds the test file, with the capability from the file's layout, a fixed
 * number outstanding, each checked against the pattern.
 *
 * The reply's data may come in several frames (an I/O server in overlap send
 * mode sends each unit as it comes off the disk: RDFS_FRAME_MORE); the copy out
 * of them is excluded from the time, like the pattern check.
 */
#include <errno.h>
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
	uint64_t n = plan_requests(p, size), started = 0, done = 0;
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

int sweep_ioserver(struct sweep_env *env, const struct sweep_plan *p)
{
	struct sweep_target t;
	struct rpc_client *c = NULL;
	struct sweep_walk w;
	uint64_t start;
	void *buf = NULL;
	int i, ret;

	ret = target_open(env, &t);
	if (ret)
		return SWEEP_FAIL;
	ret = rpc_client_connect(t.server_url, &env->secret, "client", env->timeout_ms, &c);
	if (ret) {
		fprintf(stderr, "rdfs-sweep: cannot connect to the I/O server %s: %s\n",
			t.server_url, strerror(-ret));
		target_free(&t);
		return SWEEP_FAIL;
	}
	if (posix_memalign(&buf, SWEEP_BLOCK, p->sizes[p->nsizes - 1])) {
		ret = -ENOMEM;
		goto out;
	}
	start = (uint64_t)p->pass * plan_pass_bytes(p);
	walk_init(&w, &t, start, start + plan_pass_bytes(p));
	target_drop_volume_cache(env);
	for (i = 0; i < p->nsizes && !ret; i++) {
		struct sweep_result r;

		ret = sweep_one_size(c, &w, p, p->sizes[i], env->timeout_ms, buf, &r);
		if (!ret) {
			char extra[320];

			snprintf(extra, sizeof(extra), "\"server\": \"%s\", \"pass\": %d",
				 t.server_url, p->pass);
			result_emit(env, p, &r, extra);
		}
	}
out:
	free(buf);
	rpc_client_close(c);
	target_free(&t);
	return ret ? SWEEP_FAIL : SWEEP_OK;
}
