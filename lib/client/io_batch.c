// SPDX-License-Identifier: MIT
/*
 * io_batch.c - one call's READs or WRITEs to the I/O servers, in flight at
 * once over every server involved (up to a window), then waited for together:
 * a striped read moves data from all servers in parallel. The start and the
 * wait are separate calls, so read-ahead and write-behind can leave a batch in
 * flight while the caller goes on.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"
#include "frame.h"
#include "log.h"

int io_cap_error(int err)
{
	return err == -EKEYEXPIRED || err == -EACCES || err == -EBADMSG || err == -ESTALE;
}

void layout_refused(struct rdfs_inode *in, int err, uint64_t start, uint64_t end)
{
	if (err == -ESTALE) {
		start = 0;
		end = UINT64_MAX;
	}
	pthread_mutex_lock(&in->lock);
	layout_cache_forget(&in->layout, start, end);
	pthread_mutex_unlock(&in->lock);
}

int io_reply_verifier(const struct rpc_reply *reply, uint64_t *verifier)
{
	Rdfs__IoReply *rep;

	/* an empty body is a server without verifiers: 0, as an unset field */
	*verifier = 0;
	if (!reply->msg->hdr.body_len)
		return 0;
	rep = rdfs__io_reply__unpack(NULL, reply->msg->hdr.body_len, reply->msg->body);
	if (!rep)
		return -EIO;
	*verifier = rep->verifier;
	rdfs__io_reply__free_unpacked(rep, NULL);
	return 0;
}

static int io_start(struct rdfs_client *c, uint16_t op, struct io_req *r)
{
	const struct iovec *iov = op == RDFS_OP_WRITE ? r->iov : NULL;
	int niov = op == RDFS_OP_WRITE ? r->niov : 0;
	int ret, attempt;

	r->peer = ios_peer(c, io_req_server(r), NULL);
	if (!r->peer)
		return -ENOMEM;
	rdfs__io_req__init(&r->msg);
	r->msg.cap = (Rdfs__Capability *)r->seg->copy[r->copy].cap;
	r->msg.first_block = r->first_block;
	r->msg.block_count = r->block_count;
	r->msg.head = r->head;
	r->msg.length = r->length;
	r->msg.stable = r->stable;

	/* a connection that broke since its last use is replaced once */
	for (attempt = 0; attempt < 2; attempt++) {
		ret = peer_get(c, r->peer, RDFS_IOS_CONNECT_MS, 0, &r->conn);
		if (ret)
			return ret == -EACCES ? ret : -EIO;
		r->placing = op == RDFS_OP_READ && r->buf && r->length &&
			     c->opts.rdma_mode == RDFS_RDMA_WRITE &&
			     rpc_client_can_place(r->conn->rpc);
		if (r->placing) {
			/* the server writes the data straight into r->buf */
			struct iovec dest = { r->buf, r->length };

			ret = rpc_call_start_into(r->conn->rpc, op, &r->msg.base, NULL, 0,
						  &dest, 1, &r->pending);
		} else if (op == RDFS_OP_COPY) {
			rdfs__copy_req__init(&r->copy_msg);
			r->copy_msg.dst = &r->msg;
			r->copy_msg.src = (Rdfs__CopySrc *)r->copy_src;
			ret = rpc_call_start(r->conn->rpc, op, &r->copy_msg.base, NULL, 0,
					     &r->pending);
		} else {
			ret = rpc_call_start(r->conn->rpc, op, &r->msg.base, iov, niov,
					     &r->pending);
		}
		if (ret == 0)
			return 0;
		peer_put(r->peer, r->conn);
		r->conn = NULL;
		if (ret != -ENOTCONN)
			break;
	}
	return rpc_errno(ret);
}

int64_t io_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int io_finish(uint16_t op, struct io_req *r)
{
	struct rpc_reply reply;
	int64_t left = r->deadline_ms - io_mono_ms();
	int ret;

	ret = rpc_call_wait(r->pending, left > 0 ? (int)left : 0, &reply);
	r->pending = NULL;
	peer_put(r->peer, r->conn);
	r->conn = NULL;
	if (ret)
		return rpc_errno(ret);
	ret = reply.status;
	if (ret == 0 && op == RDFS_OP_READ && r->placing && rpc_reply_placed_len(&reply)) {
		/* placed into r->buf already: all of it, in order, or nothing counts */
		if (rpc_reply_placed_len(&reply) != (long long)r->length)
			ret = -EIO;
	} else if (ret == 0 && op == RDFS_OP_READ) {
		/* the data may come in several frames (RDFS_FRAME_MORE parts) */
		if (rpc_reply_data_len(&reply) < r->length) {
			ret = -EIO;
		} else if (!r->buf) {
			/* the caller takes the received buffers themselves */
			r->reply = reply;
			return 0;
		} else {
			rpc_reply_data_copy(&reply, 0, r->buf, r->length);
		}
	} else if (ret == 0) {
		ret = io_reply_verifier(&reply, &r->verifier);
	}
	rpc_reply_release(&reply);
	return ret;
}

/* An I/O server refused a request's capability (rdfs_client_stats). */
static void cap_refused_count(struct rdfs_client *c, int err)
{
	uint64_t *n = err == -ESTALE	  ? &c->stats.cap_refused_fenced :
		      err == -EKEYEXPIRED ? &c->stats.cap_refused_expired :
					    &c->stats.cap_refused_other;

	__atomic_add_fetch(n, 1, __ATOMIC_RELAXED);
}

/* Start requests while the window has room; at least one is always in flight. */
static void io_batch_fill(struct io_batch *b)
{
	while (b->started < b->n) {
		struct io_req *r = &b->reqs[b->started];

		if (b->started > b->done &&
		    (b->started - b->done >= IO_WINDOW_REQS ||
		     b->inflight_bytes + r->length > IO_WINDOW_BYTES))
			break;
		r->pending = NULL;
		r->conn = NULL;
		/*
		 * The calls run in parallel, so each gets one timeout from its start:
		 * waiting a full timeout for each in turn after the others would
		 * stall n times as long on a hung server.
		 */
		r->deadline_ms = io_mono_ms() + b->c->opts.timeout_ms;
		r->status = io_start(b->c, b->op, r);
		if (r->pending) {
			b->inflight_bytes += r->length;
			__atomic_add_fetch(&r->peer->inflight, 1, __ATOMIC_RELAXED);
		}
		b->started++;
	}
}

void io_batch_begin(struct io_batch *b, struct rdfs_client *c, uint16_t op, struct io_req *reqs,
		    size_t n)
{
	b->c = c;
	b->op = op;
	b->reqs = reqs;
	b->n = n;
	b->started = 0;
	b->done = 0;
	b->inflight_bytes = 0;
	io_batch_fill(b);
}

int io_batch_end(struct io_batch *b)
{
	int first_err = 0;
	size_t i;

	while (b->done < b->n) {
		struct io_req *r = &b->reqs[b->done];

		if (r->pending) {
			struct rdfs_peer *p = r->peer;

			b->inflight_bytes -= r->length;
			r->status = io_finish(b->op, r);
			__atomic_sub_fetch(&p->inflight, 1, __ATOMIC_RELAXED);
			if (io_cap_error(r->status))
				cap_refused_count(b->c, r->status);
		}
		/* a server that failed is passed over by reads while another copy has the blocks */
		if (r->status && !io_cap_error(r->status) && r->peer)
			peer_suspect(r->peer);
		b->done++;
		if (r->status && !first_err) {
			first_err = r->status;
			log_debug(1600011,
				  "%s of blocks %llu+%u on server %u: %s", frame_op_name(b->op),
				  (unsigned long long)r->first_block, r->block_count,
				  io_req_server(r), strerror(-r->status));
		}
		io_batch_fill(b);
	}
	/* a capability error wins: the caller can cure it by refetching the layout */
	for (i = 0; i < b->n; i++)
		if (io_cap_error(b->reqs[i].status))
			return b->reqs[i].status;
	if (first_err && first_err != -ENOMEM && first_err != -ENOSPC && first_err != -EACCES)
		first_err = -EIO;
	return first_err;
}

int io_batch_run(struct rdfs_client *c, uint16_t op, struct io_req *reqs, size_t n)
{
	struct io_batch b;

	io_batch_begin(&b, c, op, reqs, n);
	return io_batch_end(&b);
}
