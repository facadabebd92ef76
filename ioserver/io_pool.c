// SPDX-License-Identifier: MIT
/*
 * io_pool.c - the I/O pool (see io_request.h): its life cycle, the hand-over
 * of each request to a ring thread, the READ buffers' shares and the counters.
 *
 * Threads: io_pool_submit() runs on the main loop; the getters anywhere;
 * job_buf_get() on ring threads, job_buf_put() and pool_buffers_returned()
 * on any thread.
 *
 * Ownership: a submitted job holds a reference on its request's connection
 * until it is freed (io_internal.h). The buffer pool and the read-ahead cache
 * live as long as the pool: io_pool_destroy() comes after the rpc server's,
 * whose send completions still give buffers back.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "bufpool.h"
#include "io_internal.h"
#include "volume.h"
#include "xport.h"

/*
 * A pool buffer for @j within its connection's share (the rpc connection
 * counter holds the bytes each connection has), or NULL when either is spent.
 * Two rings may both pass the check: the share is exceeded by at most a
 * buffer a ring.
 */
void *job_buf_get(struct io_job *j, size_t len)
{
	void *buf;

	if ((size_t)rpc_conn_counter_add(j->conn, 0) + len > j->pool->conn_share)
		return NULL;
	buf = bufpool_get(j->pool->bufs, len);
	if (buf)
		rpc_conn_counter_add(j->conn, (long long)len);
	return buf;
}

void job_buf_put(struct io_job *j, void *buf, size_t len)
{
	bufpool_put(j->pool->bufs, buf, len);
	rpc_conn_counter_add(j->conn, -(long long)len);
}

/* A pool buffer came back: wake the jobs of any ring that wait for one. */
void pool_buffers_returned(struct io_pool *p)
{
	int i;

	if (atomic_load(&p->buf_waiters) > 0)
		for (i = 0; i < p->nrings; i++) {
			atomic_store(&p->rings[i].buf_kick, true);
			ring_kick(&p->rings[i]);
		}
}

static struct ring *pick_ring(struct io_pool *p)
{
	return &p->rings[atomic_fetch_add(&p->next_ring, 1) % (unsigned int)p->nrings];
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

uint64_t io_pool_default_buffers(const struct io_pool_opts *o)
{
	uint64_t b = (uint64_t)o->threads * (uint64_t)o->pipeline_depth * o->unit_size *
		     HELD_PER_DEPTH * 8;

	return b < 2ull * RDFS_MAX_DATA ? 2ull * RDFS_MAX_DATA : b;
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
