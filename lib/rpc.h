/* SPDX-License-Identifier: MIT */
/*
 * rpc.h - request/reply on top of lib/xport: authentication, tags, protobuf bodies.
 *
 * Client side: struct rpc_client is one authenticated connection with a progress
 * thread; any number of threads may have calls outstanding on it at once, matched
 * by tag. rpc_call_start()/rpc_call_wait() let one thread keep many calls in
 * flight (striped I/O to several servers).
 *
 * Server side: struct rpc_server runs the accept + authentication handshake and
 * hands the application only requests from authenticated peers, one at a time
 * from rpc_server_next() (the program's main loop). Replies may be sent from any
 * thread with rpc_server_reply(). A connection whose requests the application
 * holds in large numbers (over 1024, or 64 MiB) is not read from until some are
 * rpc_request_done(): flow control, so one fast peer cannot exhaust memory.
 * Likewise a connection with more than RPC_SERVER_TX_QUEUE_MAX reply bytes
 * queued (its peer does not read them) is not read from until half have gone.
 */
#ifndef RDFS_RPC_H
#define RDFS_RPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <protobuf-c/protobuf-c.h>

#include "auth.h"
#include "xport.h"

/* ------------------------------------------------------------------ client */

struct rpc_client;
struct rpc_pending;

/*
 * A reply: header status, and the raw message (decode body with the generated
 * __unpack). A reply sent in parts (RDFS_FRAME_MORE) keeps the earlier frames in
 * @parts, in order; its data is the parts' data followed by @msg's. Read the
 * data with rpc_reply_data_len()/rpc_reply_data_iov()/rpc_reply_data_copy(),
 * never msg->data alone. When @status < 0 the parts are already freed (nparts
 * 0): data sent before a failure is never handed to the caller.
 */
struct rpc_reply {
	int status;			/* 0 or -errno from the server */
	struct xport_msg *msg;		/* owned; free with rpc_reply_release() */
	struct xport_msg **parts;	/* owned: earlier partial frames, in order */
	int nparts;
};

/* Free @r's message and parts; @r is left empty (a second call is harmless). */
void rpc_reply_release(struct rpc_reply *r);
/* Bytes of bulk data in @r over all its frames. */
size_t rpc_reply_data_len(const struct rpc_reply *r);
/*
 * Point @iov (room for @max) at @r's data in order, skipping empty frames.
 * Returns how many iovecs the whole data needs (at most nparts + 1); when that
 * is more than @max only the first @max are filled.
 */
int rpc_reply_data_iov(const struct rpc_reply *r, struct iovec *iov, int max);
/* Copy @len bytes of @r's data from offset @off to @dst; returns the bytes copied. */
size_t rpc_reply_data_copy(const struct rpc_reply *r, size_t off, void *dst, size_t len);

/*
 * Connect to @url and prove @role (a claim of auth.h: "server", "node:NAME:GEN",
 * or any other name for the shared client key) with @secret, its key. -EACCES
 * when the server rejects the proof (or the server's proof of the key is wrong),
 * -ECONNREFUSED / -ETIMEDOUT for network failures.
 */
int rpc_client_connect(const char *url, const struct auth_secret *secret, const char *role,
		       int timeout_ms, struct rpc_client **out);
/* Close @c; no call may be outstanding or started concurrently. */
void rpc_client_close(struct rpc_client *c);
/* True once the connection has failed; every call then returns -ENOTCONN. */
int rpc_client_broken(const struct rpc_client *c);
const char *rpc_client_url(const struct rpc_client *c);

/*
 * Start a call: send @op with body @req (may be NULL for an empty body) and data
 * @data/@niov (must stay valid until rpc_call_wait() returns). Returns 0 and a
 * pending handle, or -errno (-ENOTCONN when the connection is broken).
 */
int rpc_call_start(struct rpc_client *c, uint16_t op, const ProtobufCMessage *req,
		   const struct iovec *data, int niov, struct rpc_pending **out);

/*
 * Like rpc_call_start(), and let the server place the reply's data straight
 * into @dest (@ndest iovecs, one run of bytes) over RDMA (Gfarm's figure 2):
 * then those bytes are in @dest when rpc_call_wait() returns and
 * rpc_reply_placed_len() says how many. The memory is exposed to that server
 * for this call only, until its reply, timeout or the connection's end. Over
 * TCP (or @ndest 0) this is rpc_call_start(): the data comes in the reply.
 */
int rpc_call_start_into(struct rpc_client *c, uint16_t op, const ProtobufCMessage *req,
			const struct iovec *data, int niov, const struct iovec *dest, int ndest,
			struct rpc_pending **out);
/* Whether rpc_call_start_into() can place data on this connection (RDMA). */
int rpc_client_can_place(const struct rpc_client *c);
/*
 * Bytes of @r's data placed into the call's destination, in order from 0, or
 * -EPROTO when the placed pieces are not one run from 0. 0 for an ordinary reply.
 */
long long rpc_reply_placed_len(const struct rpc_reply *r);

/*
 * Wait for the reply of @p (at most @timeout_ms, -1 forever) and free @p.
 * Returns 0 with @reply filled (reply->status may be a server error), or -ETIMEDOUT,
 * -ENOTCONN (connection lost: the call's fate is unknown). On error no reply is held.
 * A late reply to a timed-out call is discarded. If a call with data times out
 * before its data was sent, the connection is closed (the caller may free the
 * data now), so it and every other call on it fail with -ENOTCONN.
 */
int rpc_call_wait(struct rpc_pending *p, int timeout_ms, struct rpc_reply *reply);

/*
 * Synchronous call: start + wait. Decodes the reply body with @resp_desc into
 * *@resp (the caller frees it with protobuf_c_message_free_unpacked) when the
 * server's status is 0 and @resp is not NULL. Returns the server's status (0 or
 * -errno) or a local -errno (-ETIMEDOUT, -ENOTCONN, -EBADMSG for an undecodable
 * body). The reply's bulk data is discarded; use the start/wait pair for data.
 */
int rpc_call(struct rpc_client *c, uint16_t op, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
	     int timeout_ms);

/* ------------------------------------------------------------------ server */

struct rpc_server;

/*
 * Reply bytes queued for one peer before we stop reading its requests (reading
 * resumes at half). Replies are never dropped, so this bounds intake instead: a
 * peer that never reads costs us this plus the replies to requests already read.
 * Four maximal (16 MiB) replies, so a peer that does read streams at full speed.
 */
#define RPC_SERVER_TX_QUEUE_MAX	(64ull << 20)
/* How long a peer's queued replies may stay unshrunk before it is closed (default). */
#define RPC_STALL_CLOSE_DEFAULT_MS	60000

struct rpc_request {
	struct xport_conn *conn;	/* holds a reference until rpc_request_done() */
	struct xport_msg *msg;		/* the request, owned */
	const struct auth_peer *peer;	/* who the peer proved to be (valid with conn) */
	/* what it counts against its connection: a message rewritten in place (an I/O
	 * server's COPY becomes a WRITE) is uncounted by what it was counted with */
	uint64_t counted_bytes;
	/* rpc_server_set_metrics(): where and since when this request is counted */
	const struct rpc_metrics *metrics;	/* NULL: not counted */
	uint64_t start_ns;
	uint16_t metered_op;		/* the opcode it arrived as (a COPY stays a COPY) */
	int replied;			/* its final reply is counted */
};

/*
 * After RPC_SRV_REQUEST and RPC_SRV_CLOSED, req.conn holds a reference: call
 * rpc_request_done() once the request is answered (any thread) or the closed
 * connection's application state is freed. rpc_request_done() clears req, so a
 * second call is harmless. PING is answered by this layer; a reply-flagged or
 * unknown opcode gets an -EPROTO/-ENOSYS error reply and never reaches the caller.
 */
enum rpc_server_event {
	RPC_SRV_REQUEST = 1,		/* req filled */
	RPC_SRV_CLOSED,			/* req.conn (authenticated) went away; req.msg is NULL */
	RPC_SRV_WAKE,			/* rpc_server_wake() */
	RPC_SRV_TIMEOUT,
};

/* Listen on each of @urls (NULL-terminated) and authenticate peers with @keys. */
int rpc_server_create(const char *const *urls, const struct auth_keys *keys,
		      struct rpc_server **out);
/*
 * Ask @admit (on the main loop, after a peer's proof checked out) whether a
 * peer may stay: 0 admits it; a negative errno refuses it with @why (a static
 * message). The metaserver refuses revoked nodes here.
 */
void rpc_server_set_admit(struct rpc_server *s,
			  int (*admit)(void *arg, const struct auth_peer *peer, const char **why),
			  void *arg);
/*
 * Ask the admit callback again about every authenticated peer and close the
 * connections it now refuses (a revoked node); returns how many. Main loop only.
 */
int rpc_server_readmit(struct rpc_server *s);
void rpc_server_destroy(struct rpc_server *s);
/* The bound URL of listener @i (after port 0). */
const char *rpc_server_url(const struct rpc_server *s, int i);

/*
 * The main loop's call: run the transport and the handshakes until an event for
 * the application happens or @timeout_ms passes.
 */
enum rpc_server_event rpc_server_next(struct rpc_server *s, struct rpc_request *req,
				      int timeout_ms);
int rpc_server_wake(struct rpc_server *s);

/*
 * Reply to @req with @status and body @resp (NULL: empty; with status < 0 an
 * Error message carrying @errmsg is sent when @resp is NULL) and data. Thread-safe.
 * @data must stay valid until rpc_server_reply returns (it is sent or copied).
 */
int rpc_server_reply(struct rpc_request *req, int status, const ProtobufCMessage *resp,
		     const struct iovec *data, int niov);
int rpc_server_reply_error(struct rpc_request *req, int status, const char *errmsg);
/*
 * Zero-copy reply for bulk data (I/O server READ): like rpc_server_reply(), but
 * @data is sent by reference and must stay valid until @sent(@arg, status) runs.
 * @sent runs exactly once, on the thread inside rpc_server_next() (or
 * rpc_server_destroy()), with 0 or -ECANCELED if the connection closed first;
 * it never runs when this returns an error. Thread-safe.
 */
int rpc_server_reply_zc(struct rpc_request *req, int status, const ProtobufCMessage *resp,
			const struct iovec *data, int niov,
			void (*sent)(void *arg, int status), void *arg);
/*
 * Send part of the reply to @req now: a RDFS_FRAME_MORE frame carrying @data by
 * reference (valid until @sent(@arg, status) runs, as for rpc_server_reply_zc).
 * Any number of parts may precede the final rpc_server_reply*() for @req, which
 * carries the status (a failure after parts were sent is still reported there;
 * the client then discards the parts). Parts of one request must be posted in
 * order from one thread at a time. Thread-safe otherwise. With @sent NULL
 * there is no completion: the transport copies whatever it cannot send at once
 * (xport_post_send() without a cookie), so @data may be reused on return.
 */
int rpc_server_reply_part(struct rpc_request *req, const struct iovec *data, int niov,
			  void (*sent)(void *arg, int status), void *arg);
/*
 * Whether @req came with a sink (rpc_call_start_into() over RDMA): its reply's
 * data may then be written straight into the client's buffer.
 */
int rpc_request_has_sink(const struct rpc_request *req);
/*
 * Like rpc_server_reply_part(), but the data is RDMA-WRITTEN into the
 * request's sink at @off (bytes from the start of the reply's data) and a
 * data-less RDFS_FRAME_MORE frame tells the client (Gfarm's figure 2). Only
 * when rpc_request_has_sink(); the final reply then carries no data.
 */
int rpc_server_reply_part_write(struct rpc_request *req, uint64_t off, const struct iovec *data,
				int niov, void (*sent)(void *arg, int status), void *arg);

/*
 * Per authenticated connection: how many requests (and bytes of them) may be
 * received and not yet rpc_request_done() before the transport stops taking
 * its frames (0: the default, 1024 requests / 64 MiB). Call before serving.
 */
void rpc_server_set_conn_budget(struct rpc_server *s, unsigned int max_reqs, uint64_t max_bytes);
/*
 * A counter per connection for the application's fair shares (e.g. bytes of
 * a shared buffer pool held for it), starting at 0: add @delta (0 to read it)
 * and return the new value. Any thread, while a reference on @conn is held
 * (a request's); 0 for a connection rpc does not know.
 */
long long rpc_conn_counter_add(struct xport_conn *conn, long long delta);

/*
 * Close @conn when nothing (no request, no PING) came from its peer for @ms
 * (0: never, the default), as if the peer had closed it: the application gets
 * RPC_SRV_CLOSED. For peers that promise to send at least every @ms/3 (an I/O
 * server's registration). Any thread, while a reference on @conn is held.
 */
void rpc_conn_set_idle_timeout(struct xport_conn *conn, int ms);
/* Drop peers that have not authenticated within @ms (default 10000). */
void rpc_server_set_handshake_timeout(struct rpc_server *s, int ms);
/*
 * Close an authenticated peer that, with replies queued for it, took less than
 * 64 KiB/s of them over @ms (it does not read them, or reads a trickle): its
 * memory and whatever it holds of the server's are returned. 0:
 * RPC_STALL_CLOSE_DEFAULT_MS. Call before serving.
 */
void rpc_server_set_stall_close(struct rpc_server *s, int ms);
/*
 * Count requests, replies and connections of @s in @m (rpc_metrics.h) from
 * now on; NULL: stop. Call before serving; @m must outlive @s.
 */
struct rpc_metrics;
void rpc_server_set_metrics(struct rpc_server *s, const struct rpc_metrics *m);
/* Release the request's message and connection reference. */
void rpc_request_done(struct rpc_request *req);

/* Per-connection state of the application (e.g. metaserver open handles). */
void rpc_conn_set_app(struct xport_conn *conn, void *app);
void *rpc_conn_app(struct xport_conn *conn);

#endif
