// SPDX-License-Identifier: MIT
/*
 * zero.c - the metaserver's calls to its I/O servers: ZERO the recycled blocks
 * a LAYOUT allocates, and FENCE the capabilities of a file whose blocks leave
 * it (fence.c says why).
 *
 * Why: a freed block keeps the bytes of the file it belonged to. Clients used
 * to hide them by padding a partial write into a fresh block with zeros to a
 * whole block, but padding writes bytes the client does not own: when two
 * clients write different bytes of one new block, the second one's padding
 * wipes the first one's bytes, against DESIGN's promise that partial writes
 * of one block from two clients both land (the I/O server serializes the
 * read-modify-write per block). So the metaserver guarantees instead that
 * every block it allocates reads as zeros before any client can name it:
 * blocks below the server's high-water mark (high_water.c) are zeroed here,
 * durably, before the allocation is committed and the LAYOUT answered, and
 * clients send partial writes as they are.
 *
 * One connection per I/O server, made on first use and shared by all worker
 * threads (an rpc_client carries concurrent calls); the ZEROs of one LAYOUT go
 * out at once and are then waited for. I/O servers restart, so a broken
 * connection is replaced and a call that found its connection broken is tried
 * once more on a new one. The table mutex is never held across a connect or a
 * call: entries are reference-counted and closed by whoever drops the last
 * reference.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "frame.h"
#include "log.h"
#include "rdfs.pb-c.h"
#include "rpc.h"
#include "zero.h"

#define ZERO_CONNECT_MS		5000
/* Zeroing falls back to writing zeros where the volume cannot do better. */
#define ZERO_CALL_MS		60000
#define ZERO_CAP_LIFETIME_NS	(120ll * 1000000000)
/* A FENCE is a table insert at the I/O server: an answer this late means trouble. */
#define FENCE_CALL_MS		10000

struct zero_conn {
	uint32_t server_id;
	char url[256];
	struct rpc_client *rpc;
	int refs;			/* the table's while listed, plus one per user */
	struct zero_conn *next;
};

struct ms_zeroer {
	struct ms *ms;
	struct auth_secret secret;	/* the server key */
	struct auth_secret cap_key;
	int64_t cap_lifetime_ns;	/* of the capabilities LAYOUT grants: how long a fence lasts */
	pthread_mutex_t mu;		/* conns and every refs */
	struct zero_conn *conns;
};

/* One ZERO in flight. */
struct zero_call {
	const struct ms_zero_range *r;
	struct zero_conn *conn;
	struct rpc_pending *pending;
	Rdfs__Capability cap;
	Rdfs__BlockRange range;
	Rdfs__BlockRange *rangep;
	char why[128];			/* the server's error message */
};

int ms_zeroer_create(struct ms *ms, const struct auth_secret *cap_key, int64_t cap_lifetime_ns,
		     struct ms_zeroer **out)
{
	struct ms_zeroer *z = calloc(1, sizeof(*z));

	if (!z)
		return -ENOMEM;
	z->ms = ms;
	z->cap_lifetime_ns = cap_lifetime_ns;
	auth_server_key(cap_key, &z->secret);
	z->cap_key = *cap_key;
	pthread_mutex_init(&z->mu, NULL);
	*out = z;
	return 0;
}

static void conn_close(struct zero_conn *c)
{
	if (c) {
		rpc_client_close(c->rpc);
		free(c);
	}
}

void ms_zeroer_destroy(struct ms_zeroer *z)
{
	if (!z)
		return;
	while (z->conns) {
		struct zero_conn *c = z->conns;

		z->conns = c->next;
		conn_close(c);
	}
	pthread_mutex_destroy(&z->mu);
	memset(&z->secret, 0, sizeof(z->secret));
	memset(&z->cap_key, 0, sizeof(z->cap_key));
	free(z);
}

static void conn_put(struct ms_zeroer *z, struct zero_conn *c)
{
	int last;

	pthread_mutex_lock(&z->mu);
	last = --c->refs == 0;
	pthread_mutex_unlock(&z->mu);
	if (last)
		conn_close(c);
}

/* The listed connection to @id if it is usable for @url (referenced), else NULL. Under mu. */
static struct zero_conn *conn_find_locked(struct ms_zeroer *z, uint32_t id, const char *url,
					  struct zero_conn **listed)
{
	struct zero_conn *c;

	for (c = z->conns; c && c->server_id != id; c = c->next)
		;
	*listed = c;
	if (c && !rpc_client_broken(c->rpc) && strcmp(c->url, url) == 0) {
		c->refs++;
		return c;
	}
	return NULL;
}

/* Take @c off the list; returns it when that dropped its last reference. Under mu. */
static struct zero_conn *conn_unlist_locked(struct ms_zeroer *z, struct zero_conn *c)
{
	struct zero_conn **p;

	for (p = &z->conns; *p && *p != c; p = &(*p)->next)
		;
	if (*p)
		*p = c->next;
	return --c->refs == 0 ? c : NULL;
}

/* A referenced, working connection to server @id (conn_put() it). */
static int conn_get(struct ms_zeroer *z, uint32_t id, struct zero_conn **out)
{
	struct zero_conn *c, *listed, *fresh, *stale = NULL;
	char url[256];
	int ret;

	if (ms_server_url(z->ms, id, url, sizeof(url)) || !url[0])
		return -ENOENT;
	pthread_mutex_lock(&z->mu);
	c = conn_find_locked(z, id, url, &listed);
	pthread_mutex_unlock(&z->mu);
	if (c) {
		*out = c;
		return 0;
	}

	fresh = calloc(1, sizeof(*fresh));
	if (!fresh)
		return -ENOMEM;
	ret = rpc_client_connect(url, &z->secret, "server", ZERO_CONNECT_MS, &fresh->rpc);
	if (ret) {
		free(fresh);
		return ret;
	}
	fresh->server_id = id;
	snprintf(fresh->url, sizeof(fresh->url), "%s", url);
	fresh->refs = 2;		/* the table's and ours */

	pthread_mutex_lock(&z->mu);
	c = conn_find_locked(z, id, url, &listed);
	if (!c) {
		/* a broken or outdated connection makes way for ours */
		if (listed)
			stale = conn_unlist_locked(z, listed);
		fresh->next = z->conns;
		z->conns = fresh;
		c = fresh;
		fresh = NULL;
	}
	pthread_mutex_unlock(&z->mu);
	/* another thread connected meanwhile: use its connection, drop ours */
	conn_close(fresh);
	conn_close(stale);
	*out = c;
	return 0;
}

/* A capability of ours (holder "server") for @count blocks at @block of server @id. */
static int server_cap(struct ms_zeroer *z, Rdfs__Capability *cap, Rdfs__BlockRange *range,
		    Rdfs__BlockRange **rangep, uint32_t id, uint64_t ino, uint32_t gen,
		    uint32_t rights, uint64_t block, uint64_t count)
{
	rdfs__capability__init(cap);
	rdfs__block_range__init(range);
	range->first = block;
	range->count = count;
	*rangep = range;
	cap->server_id = id;
	cap->ino = ino;
	cap->gen = gen;
	cap->rights = rights;
	cap->holder = (char *)"server";
	cap->epoch = ms_server_epoch(z->ms, id);
	cap->expiry_ns = cap_now_ns() + ZERO_CAP_LIFETIME_NS;
	cap->n_ranges = 1;
	cap->ranges = rangep;
	return cap_sign(&z->cap_key, cap);
}

static int zero_start(struct ms_zeroer *z, struct zero_call *zc)
{
	Rdfs__IoReq req = RDFS__IO_REQ__INIT;
	int ret;

	if (zc->r->count == 0 || zc->r->count > UINT32_MAX)
		return -EINVAL;
	ret = conn_get(z, zc->r->server_id, &zc->conn);
	if (ret)
		return ret;
	/* of no file: ZERO is for blocks no file holds yet */
	ret = server_cap(z, &zc->cap, &zc->range, &zc->rangep, zc->r->server_id, 0, 0,
			 RDFS_CAP_WRITE, zc->r->block, zc->r->count);
	if (ret)
		return ret;
	req.cap = &zc->cap;
	req.first_block = zc->r->block;
	req.block_count = (uint32_t)zc->r->count;
	req.stable = 1;
	return rpc_call_start(zc->conn->rpc, RDFS_OP_ZERO, &req.base, NULL, 0, &zc->pending);
}

static int zero_finish(struct zero_call *zc)
{
	struct rpc_reply rep;
	int ret = rpc_call_wait(zc->pending, ZERO_CALL_MS, &rep);

	zc->pending = NULL;
	if (ret)
		return ret;
	ret = rep.status;
	if (ret) {
		Rdfs__Error *e = rdfs__error__unpack(NULL, rep.msg->hdr.body_len, rep.msg->body);

		if (e && e->message)
			snprintf(zc->why, sizeof(zc->why), "%s", e->message);
		if (e)
			rdfs__error__free_unpacked(e, NULL);
	}
	rpc_reply_release(&rep);
	return ret;
}

/* Drop what the attempt of @zc holds, so that it can be tried again. */
static void zero_release(struct ms_zeroer *z, struct zero_call *zc)
{
	if (zc->conn)
		conn_put(z, zc->conn);
	zc->conn = NULL;
	cap_free_mac(&zc->cap);
}

int ms_zeroer_zero(void *arg, const struct ms_zero_range *r, size_t n)
{
	struct ms_zeroer *z = arg;
	struct zero_call *calls = calloc(n ? n : 1, sizeof(*calls));
	int *status = calloc(n ? n : 1, sizeof(*status));
	int ret = 0;

	if (!calls || !status) {
		free(calls);
		free(status);
		return -ENOMEM;
	}
	/* all at once: one LAYOUT's ranges are usually on several servers */
	for (size_t i = 0; i < n; i++) {
		calls[i].r = &r[i];
		status[i] = zero_start(z, &calls[i]);
	}
	for (size_t i = 0; i < n; i++)
		if (status[i] == 0)
			status[i] = zero_finish(&calls[i]);
	for (size_t i = 0; i < n; i++) {
		zero_release(z, &calls[i]);
		/* the server restarted since this connection was made: once more */
		if (status[i] == -ENOTCONN) {
			status[i] = zero_start(z, &calls[i]);
			if (status[i] == 0)
				status[i] = zero_finish(&calls[i]);
			zero_release(z, &calls[i]);
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (status[i] == 0)
			continue;
		log_error(1100067,
			  "cannot zero blocks %llu+%llu on I/O server %u for an allocation: %s%s%s",
			  (unsigned long long)r[i].block, (unsigned long long)r[i].count,
			  r[i].server_id, strerror(-status[i]), calls[i].why[0] ? ": " : "",
			  calls[i].why);
		if (!ret)
			ret = status[i];
	}
	free(calls);
	free(status);
	return ret;
}

/* One FENCE: start it on server @id's connection. */
static int fence_start(struct ms_zeroer *z, uint32_t id, const Rdfs__FenceReq *req,
		       struct zero_conn **conn, struct rpc_pending **pending)
{
	int ret = conn_get(z, id, conn);

	if (ret)
		return ret;
	ret = rpc_call_start((*conn)->rpc, RDFS_OP_FENCE, &req->base, NULL, 0, pending);
	if (ret) {
		conn_put(z, *conn);
		*conn = NULL;
	}
	return ret;
}

static int fence_finish(struct ms_zeroer *z, struct zero_conn **conn, struct rpc_pending *p)
{
	struct rpc_reply rep;
	int ret = rpc_call_wait(p, FENCE_CALL_MS, &rep);

	if (!ret) {
		ret = rep.status;
		rpc_reply_release(&rep);
	}
	conn_put(z, *conn);
	*conn = NULL;
	return ret;
}

void ms_zeroer_fence(void *arg, const uint32_t *servers, size_t n, uint64_t ino, uint32_t gen,
		     int *status)
{
	struct ms_zeroer *z = arg;
	Rdfs__FenceReq req = RDFS__FENCE_REQ__INIT;
	Rdfs__FenceEntry e = RDFS__FENCE_ENTRY__INIT, *ep = &e;
	struct zero_conn **conns = calloc(n ? n : 1, sizeof(*conns));
	struct rpc_pending **pend = calloc(n ? n : 1, sizeof(*pend));

	if (!conns || !pend) {
		for (size_t i = 0; i < n; i++)
			status[i] = -ENOMEM;
		goto out;
	}
	e.ino = ino;
	e.gen = gen;
	req.fences = &ep;
	req.n_fences = 1;
	/* every capability granted so far has expired by then (a second of slack) */
	req.until_ns = cap_now_ns() + z->cap_lifetime_ns + 1000000000ll;
	/* all at once, then waited for: a file's blocks are usually on several servers */
	for (size_t i = 0; i < n; i++) {
		/* packed at the start: each server's request has its own epoch */
		req.epoch = ms_server_epoch(z->ms, servers[i]);
		status[i] = fence_start(z, servers[i], &req, &conns[i], &pend[i]);
	}
	for (size_t i = 0; i < n; i++) {
		if (status[i] == 0)
			status[i] = fence_finish(z, &conns[i], pend[i]);
		/* the server restarted since this connection was made: once more */
		if (status[i] == -ENOTCONN) {
			req.epoch = ms_server_epoch(z->ms, servers[i]);
			status[i] = fence_start(z, servers[i], &req, &conns[i], &pend[i]);
			if (status[i] == 0)
				status[i] = fence_finish(z, &conns[i], pend[i]);
		}
	}
out:
	free(conns);
	free(pend);
}

/* COPY pieces: what one COPY may carry at an I/O server (ioserver/copy.h). */
#define COPY_PIECE_BLOCKS	1024
/* A COPY is a READ there and a stable WRITE here: give it the time of both. */
#define COPY_CALL_MS		60000

/* One COPY of at most COPY_PIECE_BLOCKS blocks, on @dst's connection. */
static int copy_piece(struct ms_zeroer *z, uint64_t ino, uint32_t gen, uint32_t dst,
		      uint64_t dst_block, uint32_t src, uint64_t src_block, uint32_t count)
{
	Rdfs__Capability dcap, scap;
	Rdfs__BlockRange drange, srange, *drp, *srp;
	Rdfs__IoReq io = RDFS__IO_REQ__INIT;
	Rdfs__CopySrc from = RDFS__COPY_SRC__INIT;
	Rdfs__CopyReq req = RDFS__COPY_REQ__INIT;
	struct zero_conn *conn = NULL;
	int ret, attempt;

	rdfs__capability__init(&dcap);
	rdfs__capability__init(&scap);
	ret = server_cap(z, &dcap, &drange, &drp, dst, ino, gen, RDFS_CAP_WRITE, dst_block, count);
	if (!ret)
		ret = server_cap(z, &scap, &srange, &srp, src, ino, gen, RDFS_CAP_READ, src_block,
			       count);
	if (ret)
		goto out;
	io.cap = &dcap;
	io.first_block = dst_block;
	io.block_count = count;
	io.length = count * (uint32_t)RDFS_BLOCK_SIZE;
	io.stable = 1;
	from.cap = &scap;
	from.first_block = src_block;
	from.block_count = count;
	req.dst = &io;
	req.src = &from;
	/* the server restarted since this connection was made: once more */
	for (attempt = 0; attempt < 2; attempt++) {
		struct rpc_reply rep;
		struct rpc_pending *p = NULL;

		ret = conn_get(z, dst, &conn);
		if (ret)
			break;
		ret = rpc_call_start(conn->rpc, RDFS_OP_COPY, &req.base, NULL, 0, &p);
		if (!ret)
			ret = rpc_call_wait(p, COPY_CALL_MS, &rep);
		if (!ret) {
			ret = rep.status;
			rpc_reply_release(&rep);
		}
		conn_put(z, conn);
		conn = NULL;
		if (ret != -ENOTCONN)
			break;
	}
out:
	cap_free_mac(&dcap);
	cap_free_mac(&scap);
	return ret;
}

int ms_zeroer_copy(void *arg, uint64_t ino, uint32_t gen, uint32_t dst, uint64_t dst_block,
		   uint32_t src, uint64_t src_block, uint64_t count)
{
	struct ms_zeroer *z = arg;
	int ret = 0;

	while (count && !ret) {
		uint32_t n = count < COPY_PIECE_BLOCKS ? (uint32_t)count : COPY_PIECE_BLOCKS;

		ret = copy_piece(z, ino, gen, dst, dst_block, src, src_block, n);
		dst_block += n;
		src_block += n;
		count -= n;
	}
	return ret;
}
