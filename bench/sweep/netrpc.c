// SPDX-License-Identifier: MIT
/*
 * netrpc.c - the network limit once more, through rdfs's own stack: an
 * rpc_server in a thread of this program answers READ requests with N bytes
 * from memory (zero-copy reply, no disk) over lib/xport's TCP module, and the
 * sweep calls it with rpc_call_start()/rpc_call_wait() like the I/O server.
 * Beside "net" (plain sockets) it shows what the protocol stack costs; beside
 * "whole"/"overlap" what the disk path costs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "rpc.h"
#include "sweep.h"

struct rpc_responder {
	struct rpc_server *srv;
	uint8_t *data;
	uint32_t max;
	int stop;			/* set before rpc_server_wake() */
};

static void reply_sent(void *arg, int status)
{
}

static void rpc_respond(struct rpc_responder *r, struct rpc_request *req)
{
	Rdfs__IoReq *io = rdfs__io_req__unpack(NULL, req->msg->hdr.body_len, req->msg->body);
	Rdfs__IoReply rep = RDFS__IO_REPLY__INIT;
	struct iovec iov;

	if (!io || io->length > r->max) {
		rpc_server_reply_error(req, -EINVAL, "bad request");
	} else {
		rep.length = io->length;
		iov.iov_base = r->data;
		iov.iov_len = io->length;
		/* the data is static for the responder's life: nothing to do when sent */
		if (rpc_server_reply_zc(req, 0, &rep.base, &iov, 1, reply_sent, NULL))
			rpc_server_reply_error(req, -EIO, "reply failed");
	}
	if (io)
		rdfs__io_req__free_unpacked(io, NULL);
	rpc_request_done(req);
}

static void *rpc_responder_main(void *arg)
{
	struct rpc_responder *r = arg;
	struct rpc_request req;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		switch (rpc_server_next(r->srv, &req, 1000)) {
		case RPC_SRV_REQUEST:
			rpc_respond(r, &req);
			break;
		case RPC_SRV_CLOSED:
			rpc_request_done(&req);
			break;
		default:
			break;
		}
	}
	return NULL;
}

static int netrpc_one_size(struct rpc_client *c, const struct sweep_plan *p, uint64_t size,
			   int timeout_ms, struct sweep_result *r)
{
	uint64_t n = plan_requests(p, size), started = 0, done = 0;
	struct rpc_pending **pend = calloc(p->depth, sizeof(*pend));
	Rdfs__IoReq req = RDFS__IO_REQ__INIT;
	double t0;
	int ret = 0;

	if (!pend)
		return -ENOMEM;
	memset(r, 0, sizeof(*r));
	r->request_bytes = size;
	req.length = (uint32_t)size;
	req.block_count = (uint32_t)(size / SWEEP_BLOCK);
	t0 = now_seconds();
	while (done < n && !ret) {
		struct rpc_reply reply;

		while (!ret && started < n && started - done < (uint64_t)p->depth) {
			ret = rpc_call_start(c, RDFS_OP_READ, &req.base, NULL, 0,
					     &pend[started % p->depth]);
			if (!ret)
				started++;
		}
		if (ret || done == started)
			break;
		ret = rpc_call_wait(pend[done % p->depth], timeout_ms, &reply);
		done++;
		if (ret)
			break;
		if (reply.status || rpc_reply_data_len(&reply) != size)
			ret = reply.status ? reply.status : -EPROTO;
		rpc_reply_release(&reply);
	}
	r->seconds = now_seconds() - t0;
	for (; done < started; done++) {
		struct rpc_reply reply;

		if (rpc_call_wait(pend[done % p->depth], timeout_ms, &reply) == 0)
			rpc_reply_release(&reply);
	}
	r->requests = n;
	r->bytes = n * size;
	result_finish(r);
	free(pend);
	return ret;
}

int sweep_netrpc(struct sweep_env *env, const struct sweep_plan *p)
{
	const char *urls[] = { "tcp://127.0.0.1:0", NULL };
	struct rpc_responder rs = { 0 };
	struct rpc_client *c = NULL;
	struct auth_secret secret;
	uint8_t key[32];
	pthread_t th;
	int i, ret, started = 0;

	/* a private secret: this server is ours alone */
	ret = auth_random(key, sizeof(key));
	if (ret)
		goto out;
	auth_secret_from_bytes(&secret, key, sizeof(key));
	rs.max = (uint32_t)p->sizes[p->nsizes - 1];
	if (posix_memalign((void **)&rs.data, SWEEP_BLOCK, rs.max)) {
		ret = -ENOMEM;
		goto out;
	}
	memset(rs.data, 0x5a, rs.max);
	{
		struct auth_keys keys;

		auth_keys_derive(&keys, &secret, NULL);
		ret = rpc_server_create(urls, &keys, &rs.srv);
		auth_keys_clear(&keys);
	}
	if (ret)
		goto out;
	if (pthread_create(&th, NULL, rpc_responder_main, &rs)) {
		ret = -EAGAIN;
		goto out;
	}
	started = 1;
	ret = rpc_client_connect(rpc_server_url(rs.srv, 0), &secret, "client", env->timeout_ms,
				 &c);
	for (i = 0; i < p->nsizes && !ret; i++) {
		struct sweep_result r;

		ret = netrpc_one_size(c, p, p->sizes[i], env->timeout_ms, &r);
		if (!ret)
			result_emit(env, p, &r,
				    "\"io\": \"loopback, rdfs rpc/xport tcp, reply from memory\"");
	}
out:
	if (ret)
		fprintf(stderr, "rdfs-sweep: net-rpc: %s\n", strerror(-ret));
	if (c)
		rpc_client_close(c);
	if (started) {
		__atomic_store_n(&rs.stop, 1, __ATOMIC_RELEASE);
		rpc_server_wake(rs.srv);
		pthread_join(th, NULL);
	}
	if (rs.srv)
		rpc_server_destroy(rs.srv);
	free(rs.data);
	return ret ? SWEEP_FAIL : SWEEP_OK;
}
