// SPDX-License-Identifier: MIT
/*
 * io_request.c - READ/WRITE/IO_COMMIT/ZERO on a pool of disk threads (see io_request.h).
 *
 * A request's life: the main loop queues it (io_pool_submit); a disk thread
 * takes it, checks it in the order registration -> capability -> bounds, moves
 * the bytes between the transport's 4096-aligned buffer and the volume, replies
 * and releases the message. READ replies point their data iovec into the
 * thread's aligned read buffer, so block data is never copied in user space.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "frame.h"
#include "io_request.h"
#include "log.h"
#include "rdfs.pb-c.h"
#include "volume.h"

/*
 * Queued requests each hold up to RDFS_MAX_DATA of WRITE data, so the queue is
 * kept short: enough that a thread finishing one request finds the next
 * waiting, not so long that a flood pins gigabytes.
 */
#define IO_QUEUE_PER_THREAD	2

struct io_item {
	struct rpc_request req;
	struct io_item *next;
};

struct io_worker {
	struct io_pool *pool;
	pthread_t thread;
	void *buf;			/* aligned READ buffer, grown on demand */
	size_t buf_len;
};

struct io_pool {
	struct volume *vol;
	const struct auth_secret *cap_key;
	const struct server_id *id;
	uint64_t verifier;

	pthread_mutex_t mutex;
	pthread_cond_t not_empty;	/* workers wait for items */
	pthread_cond_t not_full;	/* submitters wait for room */
	pthread_cond_t idle;		/* drainers wait for busy == 0 */
	struct io_item *head, *tail;
	int queued, queue_max;
	int busy;			/* queued + being handled */
	bool stopping;

	int nworkers;
	struct io_worker *workers;
};

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
	ret = cap_check(p->cap_key, io->cap, server_id, rights, io->first_block,
			io->block_count, cap_now_ns());
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

static int worker_buf_reserve(struct io_worker *w, size_t len)
{
	void *buf;

	if (w->buf_len >= len)
		return 0;
	if (posix_memalign(&buf, RDFS_BLOCK_SIZE, len))
		return -ENOMEM;
	free(w->buf);
	w->buf = buf;
	w->buf_len = len;
	return 0;
}

static void io_reply_length(struct io_pool *p, struct rpc_request *req, uint32_t length,
			    const struct iovec *data, int niov)
{
	Rdfs__IoReply reply = RDFS__IO_REPLY__INIT;

	reply.length = length;
	reply.verifier = p->verifier;
	rpc_server_reply(req, 0, &reply.base, data, niov);
}

static void io_read(struct io_worker *w, struct rpc_request *req, const Rdfs__IoReq *io)
{
	uint64_t n = volume_blocks_touched(io->head, io->length);
	struct iovec iov;
	int ret;

	if (!io->length) {
		io_reply_length(w->pool, req, 0, NULL, 0);
		return;
	}
	ret = worker_buf_reserve(w, n * RDFS_BLOCK_SIZE);
	if (ret) {
		rpc_server_reply_error(req, ret, "out of memory");
		return;
	}
	ret = volume_read_blocks(w->pool->vol, io->first_block, n, w->buf);
	if (ret) {
		log_error("volume read of blocks %llu+%llu failed: %s",
			  (unsigned long long)io->first_block, (unsigned long long)n,
			  strerror(-ret));
		rpc_server_reply_error(req, ret, "volume read failed");
		return;
	}
	iov.iov_base = (uint8_t *)w->buf + io->head;
	iov.iov_len = io->length;
	io_reply_length(w->pool, req, io->length, &iov, 1);
}

static void io_write(struct io_worker *w, struct rpc_request *req, const Rdfs__IoReq *io)
{
	int ret;

	if (req->msg->hdr.data_len != io->length) {
		rpc_server_reply_error(req, -EINVAL, "WRITE data length differs from its length field");
		return;
	}
	ret = volume_write(w->pool->vol, io->first_block, io->head, req->msg->data, io->length,
			   io->stable);
	if (ret) {
		log_error("volume write of %u bytes at block %llu+%u failed: %s", io->length,
			  (unsigned long long)io->first_block, io->head, strerror(-ret));
		rpc_server_reply_error(req, ret, ret == -ENOSPC ? "volume is full"
							       : "volume write failed");
		return;
	}
	io_reply_length(w->pool, req, io->length, NULL, 0);
}

/*
 * ZERO: the metaserver's request, before it hands newly allocated blocks to a
 * file, that they read as zeros (they may hold a freed file's data). A
 * capability with WRITE rights, as for WRITE, so nobody else can wipe blocks.
 */
static void io_zero(struct io_worker *w, struct rpc_request *req, const Rdfs__IoReq *io)
{
	int ret = volume_zero(w->pool->vol, io->first_block, io->block_count);

	if (ret) {
		log_error("zeroing blocks %llu+%u failed: %s", (unsigned long long)io->first_block,
			  io->block_count, strerror(-ret));
		rpc_server_reply_error(req, ret, ret == -ENOSPC ? "volume is full"
							       : "zeroing blocks failed");
		return;
	}
	io_reply_length(w->pool, req, 0, NULL, 0);
}

static void io_commit(struct io_worker *w, struct rpc_request *req)
{
	int ret = volume_sync(w->pool->vol);

	if (ret) {
		log_error("volume sync failed: %s", strerror(-ret));
		rpc_server_reply_error(req, ret, "volume sync failed");
		return;
	}
	/* the verifier tells the client whether its unstable writes predate a restart */
	io_reply_length(w->pool, req, 0, NULL, 0);
}

/* Handle one request and reply to it (exactly once). */
static void io_handle(struct io_worker *w, struct rpc_request *req)
{
	struct io_pool *p = w->pool;
	uint16_t op = req->msg->hdr.opcode;
	uint32_t rights = op == RDFS_OP_READ ? RDFS_CAP_READ : RDFS_CAP_WRITE;
	uint32_t server_id;
	Rdfs__IoReq *io;

	if (op == RDFS_OP_IO_COMMIT) {
		io_commit(w, req);
		return;
	}
	io = rdfs__io_req__unpack(NULL, req->msg->hdr.body_len, req->msg->body);
	if (!io) {
		rpc_server_reply_error(req, -EBADMSG, "undecodable IoReq");
		return;
	}
	if (server_id_get(p->id, &server_id)) {
		rpc_server_reply_error(req, -EAGAIN, "not registered yet");
		goto out;
	}
	if (io_check_cap(p, req, io, server_id, rights))
		goto out;
	if (op == RDFS_OP_ZERO) {
		/* whole blocks: head and length do not apply */
		if (!io_check_zero_bounds(p, req, io))
			io_zero(w, req, io);
		goto out;
	}
	if (io_check_bounds(p, req, io))
		goto out;
	if (op == RDFS_OP_WRITE)
		io_write(w, req, io);
	else
		io_read(w, req, io);
out:
	rdfs__io_req__free_unpacked(io, NULL);
}

static void *io_worker_main(void *arg)
{
	struct io_worker *w = arg;
	struct io_pool *p = w->pool;
	struct io_item *item;

	for (;;) {
		pthread_mutex_lock(&p->mutex);
		while (!p->head && !p->stopping)
			pthread_cond_wait(&p->not_empty, &p->mutex);
		item = p->head;
		if (!item) {
			pthread_mutex_unlock(&p->mutex);
			break;
		}
		p->head = item->next;
		if (!p->head)
			p->tail = NULL;
		p->queued--;
		pthread_cond_signal(&p->not_full);
		pthread_mutex_unlock(&p->mutex);

		io_handle(w, &item->req);
		rpc_request_done(&item->req);
		free(item);

		pthread_mutex_lock(&p->mutex);
		if (--p->busy == 0)
			pthread_cond_broadcast(&p->idle);
		pthread_mutex_unlock(&p->mutex);
	}
	free(w->buf);
	return NULL;
}

void io_pool_submit(struct io_pool *p, const struct rpc_request *req)
{
	struct io_item *item = malloc(sizeof(*item));

	if (!item) {
		struct rpc_request r = *req;

		rpc_server_reply_error(&r, -ENOMEM, "out of memory");
		rpc_request_done(&r);
		return;
	}
	item->req = *req;
	item->next = NULL;

	pthread_mutex_lock(&p->mutex);
	while (p->queued >= p->queue_max)
		pthread_cond_wait(&p->not_full, &p->mutex);
	if (p->tail)
		p->tail->next = item;
	else
		p->head = item;
	p->tail = item;
	p->queued++;
	p->busy++;
	pthread_cond_signal(&p->not_empty);
	pthread_mutex_unlock(&p->mutex);
}

void io_pool_drain(struct io_pool *p)
{
	pthread_mutex_lock(&p->mutex);
	while (p->busy)
		pthread_cond_wait(&p->idle, &p->mutex);
	pthread_mutex_unlock(&p->mutex);
}

int io_pool_busy(struct io_pool *p)
{
	int busy;

	pthread_mutex_lock(&p->mutex);
	busy = p->busy;
	pthread_mutex_unlock(&p->mutex);
	return busy;
}

static void io_pool_stop_workers(struct io_pool *p, int started)
{
	pthread_mutex_lock(&p->mutex);
	p->stopping = true;
	pthread_cond_broadcast(&p->not_empty);
	pthread_mutex_unlock(&p->mutex);
	for (int i = 0; i < started; i++)
		pthread_join(p->workers[i].thread, NULL);
}

static void io_pool_free(struct io_pool *p)
{
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->not_full);
	pthread_cond_destroy(&p->not_empty);
	pthread_mutex_destroy(&p->mutex);
	free(p->workers);
	free(p);
}

int io_pool_create(const struct io_pool_opts *o, struct io_pool **out)
{
	struct io_pool *p;
	int i, ret;

	if (o->threads < 1)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->workers = calloc((size_t)o->threads, sizeof(*p->workers));
	if (!p->workers) {
		free(p);
		return -ENOMEM;
	}
	p->vol = o->vol;
	p->cap_key = o->cap_key;
	p->id = o->id;
	p->verifier = o->verifier;
	p->nworkers = o->threads;
	p->queue_max = o->threads * IO_QUEUE_PER_THREAD;
	pthread_mutex_init(&p->mutex, NULL);
	pthread_cond_init(&p->not_empty, NULL);
	pthread_cond_init(&p->not_full, NULL);
	pthread_cond_init(&p->idle, NULL);

	for (i = 0; i < p->nworkers; i++) {
		p->workers[i].pool = p;
		ret = pthread_create(&p->workers[i].thread, NULL, io_worker_main, &p->workers[i]);
		if (ret) {
			io_pool_stop_workers(p, i);
			io_pool_free(p);
			return -ret;
		}
	}
	*out = p;
	return 0;
}

void io_pool_destroy(struct io_pool *p)
{
	if (!p)
		return;
	io_pool_drain(p);
	io_pool_stop_workers(p, p->nworkers);
	io_pool_free(p);
}
