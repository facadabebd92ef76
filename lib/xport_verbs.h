/* SPDX-License-Identifier: MIT */
/*
 * xport_verbs.h - the verbs module of lib/xport (internal to lib/): "rdma://host:port".
 *
 * One RC queue pair per connection, set up with librdmacm; each connection has
 * its own rdma_cm event channel and completion channel, both in the context's
 * epoll set, so the module is event-driven (ibv_req_notify_cq, then drain the
 * CQ): no thread of ours ever spins on a CQ.
 *
 * Messages (xport_verbs_wire.h): a frame that fits the peer's receive buffer
 * goes as one EAGER SEND, copied into a registered send slot (the post then
 * completes at once); a bigger one goes by rendezvous (xport_verbs_rndv.h): the
 * peer RDMA-READs the data straight from the poster's memory, registered for
 * that send only, and answers DONE. The other direction (Gfarm's figure 2):
 * a request may carry a SINK, the client's destination exposed REMOTE_WRITE
 * for that request only (until its reply's final frame, a cancel or the end
 * of the connection); the server RDMA-WRITEs reply units into it and sends a
 * data-less PLACED frame after each (xport_post_write()), which RC ordering
 * delivers after the data. Sends wait for credits
 * (xport_verbs_credit.h). Received frames are delivered in arrival order, so
 * partial replies (RDFS_FRAME_MORE) keep their order.
 *
 * Exposure (either direction): memory declared with xport_mem_register() -
 * the I/O server's pools, a client's read destinations, the transport's own
 * recycled bulk buffers - goes through a type 2B memory window bound on the
 * connection's QP over exactly that message's bytes and deallocated when it
 * ends (its rkey dies at once); its registration is cached (no access of its
 * own), so a message costs no ibv_reg_mr. Other memory is registered for the
 * message. A rendezvous READ destination needs only a local key: the cached
 * registration of a recycled bulk buffer, else one made for that message.
 *
 * Files: xport_verbs_cm.c (devices, connect, listen, accept, teardown),
 * xport_verbs_data.c (posting, completions, flow control), and the pure parts
 * xport_verbs_wire.c, _credit.c, _rndv.c, _regcache.c.
 *
 * Settings (environment, read at each listen/connect; both sides tell each
 * other theirs in the connection's private data):
 *   RDFS_VERBS_RECV_SIZE  bytes per receive buffer = the largest EAGER message
 *                         (default 32768, 4096..1048576)
 *   RDFS_VERBS_CREDITS    receive buffers posted per connection = the peer's
 *                         send window (default 64, 4..1024)
 *   RDFS_VERBS_WINDOWS    0: no memory windows, every exposure registered per
 *                         message (read once per device; default 1)
 */
#ifndef RDFS_XPORT_VERBS_H
#define RDFS_XPORT_VERBS_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "xport_module.h"
#include "xport_verbs_credit.h"
#include "xport_verbs_regcache.h"
#include "xport_verbs_rndv.h"
#include "xport_verbs_stats.h"
#include "xport_verbs_wire.h"

#define VERBS_DEFAULT_RECV_SIZE	(32u * 1024)
#define VERBS_DEFAULT_CREDITS	64u
#define VERBS_MAX_CREDITS	1024u
/* Bytes per RDMA READ work request: big enough to stream, small enough to interleave. */
#define VERBS_READ_CHUNK	(1u << 20)
/* Outstanding READs per connection, further bounded by the negotiated depth. */
#define VERBS_MAX_READS		16u
/* Rendezvous messages being read at once: bounds what a peer makes us allocate ahead. */
#define VERBS_MAX_READING	8u
/* Rendezvous sends open at once per connection (their memory stays registered). */
#define VERBS_MAX_RNDV		256u
/* Registered bytes of declared ranges kept per device. */
#define VERBS_REGCACHE_BYTES	(1ull << 30)

struct verbs_settings {
	uint32_t recv_size;
	uint32_t credits;
};

/* One RDMA device as this process uses it; lives as long as the process. */
struct verbs_dev {
	struct verbs_dev *next;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	int mw2;			/* memory windows type 2 */
	uint32_t max_rd_atom;		/* READs one QP may have outstanding */
	struct verbs_regcache cache;
	/* xport_verbs_stats.h */
	atomic_ulong windows, send_mrs, sinks, sink_windows, sink_mrs, recv_mrs, reg_mrs;
};

struct verbs_conn;

/*
 * Every work request's context embeds one, and the request's wr_id points at
 * it: the CQ poller calls its done() and knows nothing of the kinds of work
 * (nvmet's struct ib_cqe, as the kernel client's data path does). done() runs
 * under c->lock for every completion, failed and flushed ones too, so it is
 * where the request's resources come back.
 */
struct verbs_cqe {
	void (*done)(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc);
};

struct verbs_recv {
	struct verbs_cqe cqe;		/* verbs_recv_done */
	uint8_t *buf;
};

struct verbs_send_slot {
	struct verbs_cqe cqe;		/* verbs_send_done */
	uint8_t *buf;
	struct verbs_send_slot *next_free;
};

/* One registered piece of a rendezvous send. */
struct verbs_reg {
	struct ibv_mr *mr;		/* per-send registration, or */
	struct ibv_mw *mw;		/* a window bound over a cached one */
	struct verbs_reg_entry *ce;
	void *addr;
	uint32_t len;
	uint32_t rkey;
	uint32_t lkey;			/* WRITE sources: the local key */
};

/* A received request's sink (xport.h): the peer's memory we may WRITE into. */
struct xport_sink {
	uint64_t len;
	uint32_t n;
	struct verbs_desc d[];
};

/* One RDMA WRITE work request of a placed write: local piece -> remote piece. */
struct verbs_wseg {
	uint64_t raddr;
	uint32_t rkey, lkey, len;
	void *laddr;
};

/*
 * A sink we exposed with a request, alive until its reply's final frame:
 * per piece a window over a declared range's cached registration (bound when
 * the request goes on the wire) or a registration of exactly those bytes.
 */
struct verbs_sink_reg {
	struct verbs_sink_reg *next;
	uint32_t tag;
	int n;
	struct verbs_tx *tx;		/* its request, until that is on the wire */
	struct verbs_reg reg[XPORT_MAX_IOV];
};

enum verbs_tx_kind { TX_FRAME = 0, TX_SINK, TX_WRITE };

struct verbs_tx {
	struct verbs_tx *next;
	void *user;			/* XPORT_EV_SEND to report; NULL: copied, none */
	struct rdfs_frame_hdr fh;
	const uint8_t *body;
	const struct iovec *iov;	/* iov[0..niov) */
	int niov;
	struct iovec own_iov[XPORT_MAX_IOV];
	void *copy;			/* unowned: body and data copied here */
	size_t copy_len;
	size_t bytes;			/* counted in tx_queued */
	int rndv, body_remote;
	uint32_t cookie;
	int nreg;
	struct verbs_reg reg[VERBS_MAX_DESC];
	enum verbs_tx_kind kind;
	uint32_t nsink;			/* TX_SINK: descriptors of the sink */
	struct verbs_desc *sink;
	struct verbs_sink_reg *sr;	/* TX_SINK: its windows to bind; NULL once cancelled */
	uint64_t placed_off;		/* TX_WRITE: where, and the WRITEs to post */
	uint32_t placed_len;
	int nwseg, writes_out;
	struct verbs_wseg *wseg;
};

enum verbs_rx_state { RX_HELD, RX_READING, RX_READY };

struct verbs_rx {
	struct verbs_rx *next;
	enum verbs_rx_state state;
	struct verbs_cqe cqe;		/* read_done: each of its READs */
	struct verbs_recv *slot;	/* RX_HELD: the receive buffer holding the message */
	uint32_t len;			/* received bytes in slot */
	struct xport_msg *msg;
	uint32_t cookie;
	uint32_t ndesc, body_remote;
	struct verbs_desc desc[VERBS_MAX_DESC];
	struct verbs_read_iter it;
	uint32_t reads_out;
	struct ibv_mr *mr_body, *mr_data;	/* per-message registrations, or */
	struct verbs_reg_entry *ce_data;	/* the data buffer's cached one (declared) */
};

struct verbs_listener;

struct verbs_conn {
	struct xport_conn base;
	struct xport_poll cm_poll;	/* the connection's rdma_cm event channel */
	struct xport_poll cq_poll;	/* its completion channel */
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct verbs_dev *dev;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct verbs_settings set;	/* ours */
	struct verbs_conn_params peer;
	struct verbs_listener *pending;	/* accepted, not yet ESTABLISHED */
	struct verbs_conn *pend_next;
	int registered;			/* xport_conn_init() done */
	int cm_polled, cq_polled;	/* fds in the context's epoll set */
	int connected;			/* ESTABLISHED seen: rdma_disconnect() at the end */

	pthread_mutex_t lock;		/* everything below */
	struct verbs_credits cr;
	uint8_t *recv_mem;
	struct ibv_mr *recv_mr;
	struct verbs_recv *recvs;
	uint8_t *send_mem;
	struct ibv_mr *send_mr;
	struct verbs_send_slot *slots, *free_slots;
	uint32_t nslots;
	uint32_t sq_depth, sq_out;	/* send queue size and work requests in it */
	uint32_t reads_max, reads_out, reading;
	struct verbs_tx *txq_head, *txq_tail;
	uint32_t *done_q;		/* DONE cookies to send */
	uint32_t done_head, done_n, done_cap;
	struct verbs_rndv_table rndv;
	struct verbs_rx *rxq_head, *rxq_tail;
	struct verbs_cqe bind_cqe;	/* verbs_bind_done: every window bind */
	struct verbs_cqe write_cqe;	/* verbs_write_done: each WRITE, wtx in order */
	struct verbs_tx *wtx_head, *wtx_tail;	/* placed writes on the wire */
	struct verbs_sink_reg *sinks;	/* exposed sinks of our requests */
	size_t tx_queued, tx_limit;
	int tx_throttled, rx_paused, close_when_sent;
	int reaped, close_status;
};

struct verbs_listener {
	struct xport_listener base;
	struct xport_poll poll;
	struct verbs_settings set;
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct verbs_conn *pending;
};

extern struct verbs_decl_set verbs_declared;


/* xport_verbs_data.c */
void verbs_cq_handler(struct xport_poll *p, uint32_t events);
/* The completion handler of each kind of work request (struct verbs_cqe). */
void verbs_recv_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc);
void verbs_send_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc);
void verbs_bind_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc);
void verbs_write_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc);
/* Under c->lock: cancel everything, arrange the reap. */
void verbs_fail_locked(struct verbs_conn *c, int status);
void verbs_fail(struct verbs_conn *c, int status);
/* Under c->lock: complete every send with @status, forget DONEs owed. */
void verbs_drop_all_locked(struct verbs_conn *c, int status);
/* Teardown, once the QP is gone (READs may target them until then): free received messages. */
void verbs_free_rx_all(struct verbs_conn *c);
int verbs_post_send(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
		    const void *body, const struct iovec *data, int niov, void *user);
int verbs_post_send_sink(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
			 const void *body, const struct iovec *data, int niov,
			 const struct iovec *sink, int nsink, void *user);
void verbs_sink_cancel(struct xport_conn *conn, uint32_t tag);
int verbs_post_write(struct xport_conn *conn, const struct xport_sink *sink, uint64_t off,
		     const struct iovec *iov, int niov, const struct rdfs_frame_hdr *hdr,
		     const void *body, void *user);
void verbs_conn_close(struct xport_conn *conn, int flush);
void verbs_conn_pause_rx(struct xport_conn *conn, int paused);
void verbs_conn_rx_resume(struct xport_conn *conn);
void verbs_conn_set_tx_limit(struct xport_conn *conn, size_t max);
size_t verbs_conn_queued_bytes(struct xport_conn *conn);

#endif
