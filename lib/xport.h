/* SPDX-License-Identifier: MIT */
/*
 * xport.h - the transport layer, after BMI (papers/bmi-network-abstraction-layer.txt).
 *
 * One non-blocking interface over several networks. A caller *posts* operations
 * on connections and *tests* a context for the completions of any of them. Every
 * message is one rdfs frame (lib/frame.h): the module delimits messages by the
 * frame header, so callers never see partial messages. Messages that arrive
 * unbidden (requests on a server, replies on a client) are delivered as
 * XPORT_EV_RECV events; the caller matches replies to requests by frame tag.
 *
 * Modules are selected by URL scheme: "tcp://host:port", "tls://host:port"
 * (TCP inside TLS 1.3, below), "rdma://host:port"
 * (lib/xport_verbs.h: RC queue pairs over librdmacm/libibverbs). The module table (struct xport_ops in xport_module.h) is the only place a
 * new network plugs in; callers never change.
 *
 * Threading: xport_post_send(), xport_conn_get()/put(), xport_conn_close() and
 * xport_ctx_wake() may be called from any thread. xport_test() is called by one
 * thread per context (its progress thread or main loop).
 *
 * References: a connection from xport_connect() or an XPORT_EV_ACCEPT event holds
 * one reference for the caller (drop it with xport_conn_put()). Every event that
 * names a connection keeps it valid until the next xport_test() call on that
 * context, so handling an event needs no reference of its own. After
 * XPORT_EV_CLOSED the connection sends nothing more; it is freed at the last put.
 */
#ifndef RDFS_XPORT_H
#define RDFS_XPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "frame.h"

struct xport_ctx;
struct xport_conn;
struct xport_listener;
struct xport_sink;

/*
 * A received message. Owned by whoever got it from xport_test(); free with
 * xport_msg_free() (any thread), leaving hdr.data_len as received: bulk buffers
 * are recycled by size, and stay declared (xport_mem_register()) while they
 * are, so the data buffer is the message's: never free() it yourself.
 */
struct xport_msg {
	struct rdfs_frame_hdr hdr;
	uint8_t *body;			/* hdr.body_len bytes (NULL when 0) */
	uint8_t *data;			/* hdr.data_len bytes, 4096-aligned (NULL when 0) */
	/*
	 * A request posted with xport_post_send_sink() over RDMA: where its
	 * reply's data may be written (xport_post_write()). Freed with the
	 * message; take it (set to NULL) to keep it, then free() it.
	 */
	struct xport_sink *sink;
	/*
	 * A placed frame (placed_len > 0): the peer wrote placed_len bytes of
	 * this reply's data into our sink at offset placed_off before sending
	 * this data-less frame (xport_post_write()).
	 */
	uint64_t placed_off;
	uint32_t placed_len;
	/* set by the module: the connection whose receive budget this counts against */
	struct xport_conn *budget_conn;
	uint64_t budget_bytes;
};

/* Free @msg; if it counted against a connection's receive budget, release that. Any thread. */
void xport_msg_free(struct xport_msg *msg);

enum xport_event_type {
	XPORT_EV_RECV = 1,	/* msg holds a message from conn */
	XPORT_EV_SEND,		/* a posted send completed (status 0 or -errno); user is its pointer */
	XPORT_EV_ACCEPT,	/* a listener accepted conn (the event holds a reference for the caller) */
	XPORT_EV_CLOSED,	/* conn is closed (peer gone, protocol error: status) and holds no more sends */
	XPORT_EV_WAKE,		/* xport_ctx_wake() was called */
};

struct xport_event {
	enum xport_event_type type;
	int status;
	struct xport_conn *conn;
	struct xport_msg *msg;		/* XPORT_EV_RECV only */
	void *user;			/* XPORT_EV_SEND: the post's user pointer; XPORT_EV_WAKE: wake's */
};

int xport_ctx_create(struct xport_ctx **out);
/* Closes every connection and listener of the context. No thread may be in xport_test(). */
void xport_ctx_destroy(struct xport_ctx *ctx);

/* Wake the thread blocked in xport_test() with an XPORT_EV_WAKE event carrying @user. */
int xport_ctx_wake(struct xport_ctx *ctx, void *user);

/*
 * tls:// is tcp:// inside TLS 1.3 with an external pre-shared key
 * (lib/xport_tls.h). Before connecting to a tls:// URL, set the identity and
 * PSK this context proves; before accepting on one, how to find the PSK of
 * the identity a peer names (called on the progress thread during handshakes:
 * 0, or -EACCES for an identity it has no key for). Without them, tls://
 * connects fail with -EACCES and handshakes of accepted peers fail.
 */
#define XPORT_TLS_PSK_LEN	32
#define XPORT_TLS_ID_MAX	64
int xport_ctx_set_tls_client(struct xport_ctx *ctx, const char *identity,
			     const uint8_t psk[XPORT_TLS_PSK_LEN]);
void xport_ctx_set_tls_server(struct xport_ctx *ctx,
			      int (*psk_of)(void *arg, const char *identity,
					    uint8_t psk[XPORT_TLS_PSK_LEN]),
			      void *arg);

/*
 * Listen on @url ("tcp://0.0.0.0:7000"; port 0 picks one, see xport_listener_url()).
 * -EINVAL for a malformed URL, -EPROTONOSUPPORT for a scheme without a module,
 * -EADDRINUSE, -EADDRNOTAVAIL, ...
 */
int xport_listen(struct xport_ctx *ctx, const char *url, struct xport_listener **out);
const char *xport_listener_url(const struct xport_listener *l);

/*
 * Connect to @url, waiting at most @timeout_ms for the connection to be
 * established. Returns a connection holding one reference for the caller.
 * -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH (also: name does not resolve),
 * -EINVAL (bad URL), -EPROTONOSUPPORT (unknown scheme), ...
 */
int xport_connect(struct xport_ctx *ctx, const char *url, int timeout_ms,
		  struct xport_conn **out);

/*
 * Queue one message: the frame header @hdr (its body_len and data_len must match
 * the iovecs), the body, and @niov data iovecs. The memory must stay valid until
 * the XPORT_EV_SEND completion for @user arrives, unless @user is NULL: then the
 * module copies what it cannot send at once and no completion is reported.
 * Returns 0 or -EPIPE if the connection is closed, -EMSGSIZE over the limits.
 */
int xport_post_send(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
		    const void *body, const struct iovec *data, int niov, void *user);

/*
 * Wait up to @timeout_ms (-1: forever, 0: poll) for completions; fill at most @max
 * events. Returns the number of events (0 on timeout) or -errno.
 */
int xport_test(struct xport_ctx *ctx, struct xport_event *ev, int max, int timeout_ms);

/* Close @conn: pending sends complete with -ECANCELED, then XPORT_EV_CLOSED is reported. */
void xport_conn_close(struct xport_conn *conn);
/*
 * Stop receiving on @conn and close it once every send posted so far has been
 * written (an error reply before hanging up on a peer). Any thread.
 */
void xport_conn_close_when_sent(struct xport_conn *conn);

void xport_conn_get(struct xport_conn *conn);
void xport_conn_put(struct xport_conn *conn);

/* Caller-owned pointer stored on the connection (e.g. its session state). */
void xport_conn_set_user(struct xport_conn *conn, void *user);
void *xport_conn_user(const struct xport_conn *conn);
/* Called with the user pointer when the last reference to @conn is dropped. */
void xport_conn_set_user_free(struct xport_conn *conn, void (*user_free)(void *user));
/*
 * Refuse (close with -EMSGSIZE) incoming messages larger than these, e.g. from a
 * peer that has not authenticated yet. Defaults: RDFS_MAX_BODY, RDFS_MAX_DATA.
 * Call from the context's progress thread.
 */
void xport_conn_set_rx_limits(struct xport_conn *conn, uint32_t max_body, uint32_t max_data);
/*
 * Bound what @conn delivers ahead of the application: at most @max_msgs
 * messages and @max_bytes bytes (header, body and data) received and not yet
 * freed with xport_msg_free() (0: no bound, the default). Checked before each
 * message is taken from what was already read off the socket, and no more is
 * read while the budget is used up, so a peer that sends faster than it is
 * served costs at most this plus one read's worth of bytes; delivery resumes
 * when half is freed. Set it before the first message is delivered (progress
 * thread). Only the TCP module honours it so far: over RDMA, rpc_server's own
 * pause (1024 requests / 64 MiB handed out and not done) is the bound.
 */
void xport_conn_set_rx_budget(struct xport_conn *conn, unsigned int max_msgs,
			      uint64_t max_bytes);
/*
 * Stop (@paused 1) or resume (0) reading from @conn, so a peer that sends faster
 * than the application consumes is held back by the network's flow control
 * instead of by our memory. Any thread.
 */
void xport_conn_pause_rx(struct xport_conn *conn, int paused);
/*
 * Stop reading from @conn while more than @max bytes posted on it wait to be
 * sent, and read again once they drain to @max / 2 (0, the default: no bound).
 * What is queued is always sent; the bound is on intake, so a peer that sends
 * requests but never reads the replies cannot make us queue without limit.
 * Any thread.
 */
void xport_conn_set_tx_limit(struct xport_conn *conn, size_t max);
/* Bytes posted on @conn that the network has not taken yet. Any thread. */
size_t xport_conn_queued_bytes(struct xport_conn *conn);
/* Bytes posted on @conn that the network took, since it opened. Any thread. */
uint64_t xport_conn_sent_bytes(struct xport_conn *conn);
/* "tcp://1.2.3.4:5678" of the peer, for logs. */
const char *xport_conn_peer(const struct xport_conn *conn);

/* What a connection can do beyond xport_post_send() (xport_conn_caps()). */
#define XPORT_CAP_RDMA	0x1	/* sinks and placed writes work (Gfarm's figure 2) */

unsigned int xport_conn_caps(const struct xport_conn *conn);

/*
 * Like xport_post_send() for a request, and expose @nsink iovecs of the
 * caller's memory (the sink, offsets counted across the iovecs in order) so
 * the peer can RDMA-WRITE its reply's data straight into them with
 * xport_post_write(). The sink is writable by that peer only, only until the
 * reply's final frame (same tag, without RDFS_FRAME_MORE) is received,
 * xport_sink_cancel() or the connection closes: then its keys are dead and a
 * late WRITE fails (and takes the connection down) instead of reaching the
 * memory. The request itself must fit one eager message (-EMSGSIZE).
 * Without XPORT_CAP_RDMA this is xport_post_send(): the reply's data comes
 * in the frames as usual.
 */
int xport_post_send_sink(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
			 const void *body, const struct iovec *data, int niov,
			 const struct iovec *sink, int nsink, void *user);
/* Give up the sink of request @tag now (its call timed out or was cancelled). Any thread. */
void xport_sink_cancel(struct xport_conn *conn, uint32_t tag);
/* Bytes a received sink covers. */
uint64_t xport_sink_len(const struct xport_sink *sink);

/*
 * RDMA-WRITE @niov iovecs into @sink (from the request's message) at @off,
 * then send the data-less frame @hdr (+ body) telling the peer where the data
 * is: it arrives as a placed message, after the data (RC ordering). @user is
 * required: the memory must stay valid until its XPORT_EV_SEND completion.
 * -EOPNOTSUPP without XPORT_CAP_RDMA, -EINVAL (range outside the sink,
 * hdr->data_len not 0), -EMSGSIZE, -EPIPE.
 */
int xport_post_write(struct xport_conn *conn, const struct xport_sink *sink, uint64_t off,
		     const struct iovec *iov, int niov, const struct rdfs_frame_hdr *hdr,
		     const void *body, void *user);

/*
 * Declare [@addr, @addr+@len) long-lived: it stays mapped until
 * xport_mem_deregister() of exactly that range. RDMA modules may then keep it
 * registered across sends (the I/O server's pipeline buffers: declared once)
 * instead of registering and deregistering it for every send, which is what
 * happens to memory nobody declared. Peers still only ever get access to the
 * bytes of one send at a time, for the time of that send. Declaring costs
 * nothing on TCP. Any thread.
 * Returns 0, -EINVAL (empty range), -EEXIST (overlaps a declared range).
 */
int xport_mem_register(void *addr, size_t len);
/*
 * End a declaration (before freeing the memory): registrations of it are
 * dropped, at once or when the last send using them completes. No send from
 * the range may be posted after this. 0 or -ENOENT (not a declared range).
 */
int xport_mem_deregister(void *addr, size_t len);

#endif
