/* SPDX-License-Identifier: MIT */
/*
 * xport_module.h - what a network module plugs into lib/xport (internal to lib/).
 *
 * The generic layer (xport.c) owns the context: one epoll set, a wake eventfd and
 * the completion queue that xport_test() drains. A module owns its connections
 * and listeners. It registers file descriptors (sockets, a verbs completion
 * channel, an rdma_cm event channel) in the context's epoll set with a handler,
 * and reports what happens by pushing events with xport_cq_push(). The table
 * struct xport_ops is the only entry point from the generic layer into a module;
 * modules are found by URL scheme.
 *
 * Connection lifetime: a module creates a connection with xport_conn_init() (one
 * reference for the context's registration, one for the caller). When it is done
 * with a connection (peer gone, error, xport_conn_close()) the module calls
 * xport_conn_closed() exactly once from the progress thread, after cancelling its
 * sends; that reports XPORT_EV_CLOSED and drops the registration reference. The
 * last xport_conn_put() calls ops->conn_free().
 */
#ifndef RDFS_XPORT_MODULE_H
#define RDFS_XPORT_MODULE_H

#include <pthread.h>
#include <stdatomic.h>

#include "xport.h"

/* Most data iovecs one post may carry. */
#define XPORT_MAX_IOV		64
#define XPORT_URL_MAX		300

/* An fd in the context's epoll set; epoll's data.ptr points at this. */
struct xport_poll {
	int fd;
	void (*handler)(struct xport_poll *p, uint32_t events);
};

struct xport_ops {
	const char *scheme;	/* "tcp" for "tcp://host:port" */
	/* @hostport is the URL after "scheme://". */
	int (*listen)(struct xport_ctx *ctx, const char *hostport, struct xport_listener **out);
	void (*listener_free)(struct xport_listener *l);
	int (*connect)(struct xport_ctx *ctx, const char *hostport, int timeout_ms,
		       struct xport_conn **out);
	int (*post_send)(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
			 const void *body, const struct iovec *data, int niov, void *user);
	/* Any thread: stop all I/O, cancel sends, arrange for xport_conn_closed(). */
	void (*conn_close)(struct xport_conn *conn, int flush);
	/* Any thread: stop or resume delivering this connection's messages. */
	void (*conn_pause_rx)(struct xport_conn *conn, int paused);
	/* Any thread: see xport_conn_set_tx_limit() and xport_conn_queued_bytes(). */
	void (*conn_set_tx_limit)(struct xport_conn *conn, size_t max);
	size_t (*conn_queued_bytes)(struct xport_conn *conn);
	/*
	 * Optional. Progress thread: the receive budget has room again after the
	 * module stopped for it (xport_rx_budget_ok() returned 0): deliver what is
	 * buffered and read on.
	 */
	void (*conn_rx_resume)(struct xport_conn *conn);
	/* Progress thread (or ctx destroy): run the close arranged by conn_close now. */
	void (*conn_reap)(struct xport_conn *conn);
	void (*conn_free)(struct xport_conn *conn);
	/* Optional (NULL: plain sends, no capabilities): see xport.h. */
	unsigned int caps;
	int (*post_send_sink)(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
			      const void *body, const struct iovec *data, int niov,
			      const struct iovec *sink, int nsink, void *user);
	void (*sink_cancel)(struct xport_conn *conn, uint32_t tag);
	int (*post_write)(struct xport_conn *conn, const struct xport_sink *sink, uint64_t off,
			  const struct iovec *iov, int niov, const struct rdfs_frame_hdr *hdr,
			  const void *body, void *user);
};

/* Common head of every module's connection. */
struct xport_conn {
	const struct xport_ops *ops;
	struct xport_ctx *ctx;
	atomic_int refcnt;
	atomic_int closing;		/* xport_conn_close() was called */
	int reported;			/* XPORT_EV_CLOSED pushed; under the ctx lock */
	void *user;
	void (*user_free)(void *user);
	uint32_t max_body, max_data;	/* receive limits; progress thread */
	char peer[XPORT_URL_MAX];
	struct xport_conn *ctx_prev, *ctx_next;	/* the context's list, under its lock */
	struct xport_conn *reap_next;		/* closes for the progress thread */
	int on_reap_list;
	/* receive budget (xport_conn_set_rx_budget): delivered, not yet freed */
	unsigned int rx_max_msgs;
	uint64_t rx_max_bytes;
	atomic_uint rx_msgs;
	atomic_uint_fast64_t rx_bytes;
	atomic_int rx_starved;			/* the module stopped for the budget */
	struct xport_conn *resume_next;		/* under the ctx lock */
	int on_resume_list;
	/* bytes of posted sends the network took: the module adds, anyone reads */
	atomic_uint_fast64_t tx_sent;
};

/* Common head of every module's listener. */
struct xport_listener {
	const struct xport_ops *ops;
	struct xport_ctx *ctx;
	char url[XPORT_URL_MAX];
	struct xport_listener *next;
};

/* Register a module's new connection with @ctx; it starts with two references. */
void xport_conn_init(struct xport_conn *conn, const struct xport_ops *ops,
		     struct xport_ctx *ctx);
/* Report XPORT_EV_CLOSED with @status and drop the registration reference. */
void xport_conn_closed(struct xport_conn *conn, int status);
/* Ask the progress thread to call ops->conn_reap(conn) (from any thread). */
void xport_conn_reap_later(struct xport_conn *conn);

/*
 * Receive budget, for modules. Before taking a message from its buffer: may
 * it? 0 marks the connection starved: conn_rx_resume() runs once messages
 * are freed. xport_rx_delivered() counts @m (of @bytes) against the budget.
 */
int xport_rx_budget_ok(struct xport_conn *conn);
void xport_rx_delivered(struct xport_conn *conn, struct xport_msg *m, uint64_t bytes);

/*
 * Any thread: have the progress thread call ops->conn_rx_resume(conn) soon,
 * for input the module holds that epoll cannot see (bytes TLS buffered).
 */
void xport_conn_kick(struct xport_conn *conn);

/*
 * A connection whose peer does not read our replies (xport_conn_set_tx_limit()):
 * once @queued unsent bytes exceed @limit it stops reading the peer's requests,
 * and reads again when the queue has drained to half (hysteresis: no flapping
 * at the bound). Updates *@throttled; returns it. Under the connection's lock.
 */
int xport_tx_throttle(struct xport_conn *conn, int *throttled, size_t queued, size_t limit);

/* Queue an event for xport_test(); takes a reference on ev->conn when set. */
void xport_cq_push(struct xport_ctx *ctx, const struct xport_event *ev);

int xport_poll_add(struct xport_ctx *ctx, struct xport_poll *p, uint32_t events);
int xport_poll_mod(struct xport_ctx *ctx, struct xport_poll *p, uint32_t events);
void xport_poll_del(struct xport_ctx *ctx, struct xport_poll *p);

/* A context's tls:// credentials (xport_ctx_set_tls_client/_server). */
struct xport_tls_client;
struct xport_tls_server;
const struct xport_tls_client *xport_ctx_tls_client(const struct xport_ctx *ctx);
const struct xport_tls_server *xport_ctx_tls_server(const struct xport_ctx *ctx);

/* Split "host:port" / "[v6]:port" into its parts. 0 or -EINVAL. */
int xport_split_hostport(const char *hostport, char *host, size_t hostlen, char *port,
			 size_t portlen);

/*
 * Bulk buffers, 4096-aligned: what a module receives message data into (and
 * copies unsent data to). Large ones are recycled; free with the same @len.
 */
void *xport_data_alloc(size_t len);
void xport_data_free(void *buf, size_t len);

extern const struct xport_ops xport_tcp_ops;
extern const struct xport_ops xport_tls_ops;	/* "tls": xport_tcp.c with lib/xport_tls.h */
extern const struct xport_ops xport_verbs_ops;	/* "rdma": lib/xport_verbs.h */

#endif
