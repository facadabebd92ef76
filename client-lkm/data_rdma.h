/* SPDX-License-Identifier: GPL-2.0 */
/*
 * data_rdma.h - the RDMA data path's private interfaces: the verbs wire
 * layout (wire/rdfs_verbs.h), the limits, the connection and request
 * structures, shared by data_rdma.c (requests, completions, the protocol)
 * and data_rdma_conn.c (connection setup, the handshake, teardown).
 */
#ifndef RDFS_DATA_RDMA_H
#define RDFS_DATA_RDMA_H

#include <linux/net.h>
#include <linux/scatterlist.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "rdfs.h"

/* ---------------------------------------------------------------- wire */

/* The SEND layout and its parser: one definition with user space. */
#include "rdfs_verbs.h"

/* ---------------------------------------------------------------- limits */

/*
 * Our receive buffers: the smallest the protocol allows. The server sends a
 * frame eager only when it fits the peer's buffer, so every reply carrying
 * whole blocks comes by rendezvous or placement: never copied.
 */
#define RR_RECV_SIZE		VERBS_MIN_RECV_SIZE
#define RR_RECV_COUNT		32		/* our window: the server's credits */
#define RR_MAX_REQS		16		/* requests in flight per connection */
#define RR_MAX_PAGES		256		/* pages per request (1 MiB): MR size */
#define RR_SLOT_SIZE		4096u		/* a request's message: header, desc, IoReq */
#define RR_MAX_SLOTS		132u
#define RR_MAX_READS		128		/* RDMA READs of rendezvous posted at once */
#define RR_READ_CHUNK		(1u << 20)
#define RR_MAX_SGE		16
/* Per request REG_MR + SEND + LOCAL_INV; control SENDs; READs; the drain. */
#define RR_SQ_DEPTH		(3 * RR_MAX_REQS + RR_MAX_SLOTS + RR_MAX_READS + 4)
#define RR_CM_TIMEOUT_MS	2000
#define RR_CONNECT_TIMEOUT	(10 * HZ)
#define RR_AUTH_TIMEOUT		(10 * HZ)
#define RR_DONE_RING		256
/* An I/O server silent this long is dead: its readers get EIO. */
#define RR_IO_TIMEOUT		(30 * HZ)

struct rr_conn;

struct rr_recv {
	struct ib_cqe cqe;
	struct rr_conn *conn;
	void *buf;
	u64 dma;
};

struct rr_slot {
	struct ib_cqe cqe;
	struct rr_conn *conn;
	void *buf;
	u64 dma;
	struct rr_slot *next_free;
};

/* One rendezvous message of the server being RDMA-READ into a request's pages. */
struct rr_pull {
	struct ib_cqe cqe;
	struct list_head link;		/* on conn->pulls until every READ is posted */
	struct rdfs_rdma_req *req;
	u32 cookie;
	u32 dst;			/* request data offset of the next READ */
	u32 bytes;
	u32 ndesc, idx, idx_done;	/* planning: descriptor, bytes of it posted */
	u32 outstanding;
	bool planned;
	struct verbs_desc desc[];
};

struct rdfs_rdma_req {
	struct rr_conn *conn;
	struct list_head txlink;	/* on conn->txq until sent */
	u16 op;
	u32 tag;
	int slot;			/* index in conn->reqs and conn->mrs */
	bool sink;			/* figure 2: the pages are the READ's sink */
	bool final, inv_posted, inv_done, completed, mr_counted;
	int status;
	u64 verifier;			/* the IoReply's */
	u8 body[RR_SLOT_SIZE / 2];	/* IoReq */
	u32 body_len;
	struct page **pages;
	u32 len;
	u32 got;			/* data bytes placed, read or planned so far */
	unsigned int pulls;		/* rendezvous READs not yet finished */
	struct scatterlist *sgl;
	int npages, nents;
	enum dma_data_direction dir;
	struct ib_mr *mr;		/* registered for this request, or NULL */
	struct ib_cqe inv_cqe;
	struct completion done;
};

enum rr_cm_state { CM_RESOLVING, CM_ROUTED, CM_CONNECTING, CM_ESTABLISHED, CM_FAILED };

struct rr_conn {
	struct kref ref;
	u32 server_id;
	struct rdma_cm_id *id;
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	wait_queue_head_t wait;		/* CM progress, handshake, free request slots */
	enum rr_cm_state cm_state;
	int cm_err;
	u8 peer_priv[VERBS_PRIV_LEN];
	u32 max_sge;
	struct work_struct fail_work;
	struct mutex shutdown_lock;
	bool drained;
	struct ib_cqe noop_cqe;		/* REG_MR: completes nothing of its own */

	spinlock_t lock;		/* everything below */
	bool dead, authed;
	int dead_err;
	u32 peer_credits, peer_recv_size;
	u32 avail, owed, threshold;	/* the credit window (xport_verbs_credit.h) */
	struct rr_recv recvs[RR_RECV_COUNT];
	struct rr_slot *slots;
	u32 nslots, slot_size;
	struct rr_slot *free_slots;
	struct rdfs_rdma_req *reqs[RR_MAX_REQS];
	struct ib_mr *mrs[RR_MAX_REQS];
	u32 next_tag;
	struct list_head txq;		/* requests waiting for credits or a slot */
	struct list_head pulls;		/* rendezvous with READs still to post */
	u32 reads_out;
	u32 done_q[RR_DONE_RING];	/* DONE cookies owed to the server */
	u32 done_head, done_n;
	/* handshake: the one frame the connection is waiting for */
	bool hs_ready;
	struct rdfs_frame_hdr hs_frame;
	u8 hs_body[256];
};

/* One mount's RDMA data path. */
struct rdfs_rdma {
	bool read_mode;			/* figure 3 instead of figure 2 */
	struct mutex lock[RDFS_MAX_SERVERS];	/* connection setup */
	struct rr_conn *conns[RDFS_MAX_SERVERS];
};

/* ---------------------------------------------------------------- DMA helpers */

static inline void rr_sync_for_cpu(struct ib_device *dev, u64 addr, size_t len,
			    enum dma_data_direction dir)
{
	if (!ib_uses_virt_dma(dev))
		dma_sync_single_for_cpu(dev->dma_device, addr, len, dir);
}

static inline void rr_sync_for_device(struct ib_device *dev, u64 addr, size_t len,
			       enum dma_data_direction dir)
{
	if (!ib_uses_virt_dma(dev))
		dma_sync_single_for_device(dev->dma_device, addr, len, dir);
}

/* data_rdma.c */
void rr_fail_locked(struct rr_conn *c, int err, const char *why);
void rr_fail(struct rr_conn *c, int err, const char *why);
void rr_shutdown_qp(struct rr_conn *c);
void rr_fail_work(struct work_struct *w);
void rr_send_done(struct ib_cq *cq, struct ib_wc *wc);
void rr_noop_done(struct ib_cq *cq, struct ib_wc *wc);
void rr_hdr_encode(u8 *p, u8 type, u16 credits, u32 cookie, u16 ndesc);
int rr_send_msg_locked(struct rr_conn *c, const void *msg, size_t len, bool explicit_credit);
void rr_frame_put(u8 *p, u16 op, u8 flags, u32 tag, u32 body_len, u32 data_len);
int rr_post_recv(struct rr_conn *c, struct rr_recv *r);
void rr_recv_done(struct ib_cq *cq, struct ib_wc *wc);

/* data_rdma_conn.c */
void rr_conn_put(struct rr_conn *c);
struct rr_conn *rr_conn_get(struct rdfs_sb_info *sbi, u32 server_id);

#endif
