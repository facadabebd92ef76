// SPDX-License-Identifier: MIT
/*
 * xport_verbs_data.c - the data path of the verbs module: posting frames,
 * completions, credits, the rendezvous, in-order delivery.
 *
 * Everything about a connection happens under its lock, from whichever thread:
 * xport_post_send() sends at once when credits allow; the completion channel
 * handler (progress thread) drains the CQ, handing each completion to the
 * done() its work request carries (struct verbs_cqe: recv, send, bind, WRITE,
 * READ), and then runs progress_locked() to start receives, post READs,
 * deliver, and send what waits.
 *
 * Receive side: a message stays in its receive buffer (RX_HELD) until it is
 * consumed: an EAGER one is copied out, an RNDV one gets its buffers allocated
 * and READs posted; only then is the receive buffer reposted and its credit
 * owed to the peer. A paused (or tx-throttled, or closing) connection consumes
 * nothing, so the peer's window closes: flow control by the network. DONE and
 * CREDIT messages are handled at arrival even when paused, or our own sends,
 * whose draining is what unpauses, could never finish.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "xport_verbs.h"

#define CQ_BATCH	32

static void progress_locked(struct verbs_conn *c);

/* ------------------------------------------------------------------ send-side memory */

static void reg_release(struct verbs_conn *c, struct verbs_reg *r)
{
	if (r->mw)
		ibv_dealloc_mw(r->mw);	/* the rkey dies with it */
	if (r->ce)
		verbs_regcache_put(&c->dev->cache, r->ce);
	if (r->mr)
		ibv_dereg_mr(r->mr);
	memset(r, 0, sizeof(*r));
}

static void tx_free(struct verbs_conn *c, struct verbs_tx *tx)
{
	int i;

	if (tx->sr)
		tx->sr->tx = NULL;
	for (i = 0; i < tx->nreg; i++)
		reg_release(c, &tx->reg[i]);
	xport_data_free(tx->copy, tx->copy_len);
	free(tx->sink);
	free(tx->wseg);
	free(tx);
}

/* Under c->lock: report @tx done with @status, release its memory. */
static void tx_complete(struct verbs_conn *c, struct verbs_tx *tx, int status)
{
	c->tx_queued -= tx->bytes;
	atomic_fetch_add(&c->base.tx_sent, (uint64_t)tx->bytes);
	if (tx->user) {
		struct xport_event ev = {
			.type = XPORT_EV_SEND, .status = status, .conn = &c->base, .user = tx->user,
		};

		xport_cq_push(c->base.ctx, &ev);
	}
	tx_free(c, tx);
}

/*
 * A window (not bound yet) over the cached registration of the declared
 * range holding [addr, addr+len), when the device has type 2 windows: 1, or
 * 0 when the bytes must be registered instead.
 */
static int reg_window(struct verbs_conn *c, struct verbs_reg *r, void *addr, size_t len)
{
	struct verbs_range range;

	r->addr = addr;
	r->len = (uint32_t)len;
	if (!c->dev->mw2 || verbs_decl_find(&verbs_declared, addr, len, &range) ||
	    verbs_regcache_get(&c->dev->cache, &range, &r->ce))
		return 0;
	r->mw = ibv_alloc_mw(c->dev->pd, IBV_MW_TYPE_2);
	if (r->mw) {
		atomic_fetch_add(&c->dev->windows, 1);
		return 1;
	}
	verbs_regcache_put(&c->dev->cache, r->ce);
	r->ce = NULL;
	return 0;
}

/* A registration of exactly [addr, addr+len) for one message, counted. */
static struct ibv_mr *reg_exact(struct verbs_conn *c, void *addr, size_t len, int access,
				atomic_ulong *kind)
{
	struct ibv_mr *mr = ibv_reg_mr(c->dev->pd, addr, len, access);

	if (mr) {
		atomic_fetch_add(kind, 1);
		atomic_fetch_add(&c->dev->reg_mrs, 1);
	}
	return mr;
}

/*
 * One piece of a rendezvous send: a window over a declared range's cached
 * registration when the device has type 2 windows, else a registration of
 * exactly these bytes. Either way REMOTE_READ only, for this send only.
 */
static int reg_piece(struct verbs_conn *c, struct verbs_reg *r, void *addr, size_t len)
{
	if (reg_window(c, r, addr, len))
		return 0;
	r->mr = reg_exact(c, addr, len, IBV_ACCESS_REMOTE_READ, &c->dev->send_mrs);
	if (!r->mr)
		return errno ? -errno : -ENOMEM;
	r->rkey = r->mr->rkey;
	return 0;
}

/*
 * The source of an RDMA WRITE: only our own key is needed (no remote access):
 * a declared range's cached registration, else one for this post.
 */
static int reg_local(struct verbs_conn *c, struct verbs_reg *r, void *addr, size_t len)
{
	struct verbs_range range;

	r->addr = addr;
	r->len = (uint32_t)len;
	if (verbs_decl_find(&verbs_declared, addr, len, &range) == 0 &&
	    verbs_regcache_get(&c->dev->cache, &range, &r->ce) == 0) {
		r->lkey = ((struct ibv_mr *)r->ce->handle)->lkey;
		return 0;
	}
	r->mr = reg_exact(c, addr, len, 0, &c->dev->send_mrs);
	if (!r->mr)
		return errno ? -errno : -ENOMEM;
	r->lkey = r->mr->lkey;
	return 0;
}

/*
 * Close a sink: deallocating a window or deregistering kills its rkey at
 * once, so late WRITEs fail. A request still queued goes out with keys that
 * were never bound (its reply can only be refused).
 */
static void sink_reg_free(struct verbs_conn *c, struct verbs_sink_reg *sr)
{
	int i;

	if (sr->tx)
		sr->tx->sr = NULL;
	for (i = 0; i < sr->n; i++)
		reg_release(c, &sr->reg[i]);
	free(sr);
}

/* Under c->lock: the reply to @tag is over (or given up): close its sink. */
static void sink_end_locked(struct verbs_conn *c, uint32_t tag)
{
	struct verbs_sink_reg **pp, *sr;

	for (pp = &c->sinks; (sr = *pp); pp = &sr->next) {
		if (sr->tag == tag) {
			*pp = sr->next;
			sink_reg_free(c, sr);
			return;
		}
	}
}

/* Register what the peer will read: the body (when remote) and each data iovec. */
static int tx_register(struct verbs_conn *c, struct verbs_tx *tx)
{
	int i, err;

	if (!tx->user) {
		/*
		 * Unowned: the caller may reuse its buffers at once, so the body
		 * (inline or not: the message may wait for credits) and the data
		 * go out from a copy, laid out body then data.
		 */
		size_t blen = tx->fh.body_len;
		uint8_t *p;

		tx->copy_len = blen + tx->fh.data_len;
		tx->copy = xport_data_alloc(tx->copy_len);
		if (!tx->copy)
			return -ENOMEM;
		p = tx->copy;
		if (blen) {
			memcpy(p, tx->body, blen);
			tx->body = p;
			p += blen;
		}
		for (i = 0; i < tx->niov; i++) {
			memcpy(p, tx->iov[i].iov_base, tx->iov[i].iov_len);
			p += tx->iov[i].iov_len;
		}
		tx->own_iov[0].iov_base = (uint8_t *)tx->copy + blen;
		tx->own_iov[0].iov_len = tx->fh.data_len;
		tx->niov = tx->fh.data_len ? 1 : 0;
	}
	if (tx->body_remote) {
		err = reg_piece(c, &tx->reg[tx->nreg], (void *)tx->body, tx->fh.body_len);
		if (err)
			return err;
		tx->nreg++;
	}
	for (i = 0; i < tx->niov; i++) {
		err = reg_piece(c, &tx->reg[tx->nreg], tx->iov[i].iov_base, tx->iov[i].iov_len);
		if (err)
			return err;
		tx->nreg++;
	}
	return 0;
}

/* ------------------------------------------------------------------ sending */

static int sq_room(struct verbs_conn *c, uint32_t n)
{
	return c->sq_out + n <= c->sq_depth;
}

/* Under c->lock: SEND @len bytes of @slot. 0 or -errno (the connection is then failed). */
static int post_slot(struct verbs_conn *c, struct verbs_send_slot *slot, size_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)slot->buf, .length = (uint32_t)len, .lkey = c->send_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = (uintptr_t)&slot->cqe, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int err;

	c->free_slots = slot->next_free;
	err = ibv_post_send(c->id->qp, &wr, &bad);
	if (err) {
		slot->next_free = c->free_slots;
		c->free_slots = slot;
		log_warn(1000046, "%s: ibv_post_send: %s", c->base.peer, strerror(err));
		verbs_fail_locked(c, -EIO);
		return -EIO;
	}
	c->sq_out++;
	return 0;
}

/* Under c->lock: whether a message may go now (credit, slot, send-queue room). */
static int may_send(struct verbs_conn *c, int explicit_credit, uint32_t wrs)
{
	return c->free_slots && sq_room(c, wrs) &&
	       verbs_credit_can_send(&c->cr, explicit_credit);
}

static int send_control(struct verbs_conn *c, uint8_t type, uint32_t cookie)
{
	struct verbs_send_slot *slot = c->free_slots;
	struct verbs_hdr vh = { .type = type, .cookie = cookie };

	verbs_credit_take(&c->cr, type == VERBS_MSG_CREDIT, &vh.credits);
	verbs_hdr_encode(&vh, slot->buf);
	return post_slot(c, slot, VERBS_HDR_LEN);
}

/*
 * Bind the windows among @n pieces @reg with @access (REMOTE_READ for a
 * rendezvous send, REMOTE_WRITE for a sink); their new rkeys go in the
 * descriptors. The bind is on this QP's send queue ahead of the message that
 * names the rkey, and a type 2 window only serves this QP.
 */
static int bind_windows(struct verbs_conn *c, struct verbs_reg *reg, int n, unsigned int access)
{
	struct ibv_send_wr wr, *bad;
	int i, err;

	for (i = 0; i < n; i++) {
		struct verbs_reg *r = &reg[i];

		if (!r->mw)
			continue;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uintptr_t)&c->bind_cqe;
		wr.opcode = IBV_WR_BIND_MW;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.bind_mw.mw = r->mw;
		wr.bind_mw.rkey = ibv_inc_rkey(r->mw->rkey);
		wr.bind_mw.bind_info.mr = r->ce->handle;
		wr.bind_mw.bind_info.addr = (uintptr_t)r->addr;
		wr.bind_mw.bind_info.length = r->len;
		wr.bind_mw.bind_info.mw_access_flags = access;
		err = ibv_post_send(c->id->qp, &wr, &bad);
		if (err) {
			log_warn(1000047,
				 "%s: binding a memory window: %s", c->base.peer, strerror(err));
			verbs_fail_locked(c, -EIO);
			return -EIO;
		}
		c->sq_out++;
		r->rkey = wr.bind_mw.rkey;
	}
	return 0;
}

static int reg_windows(const struct verbs_reg *reg, int n)
{
	int i, w = 0;

	for (i = 0; i < n; i++)
		w += reg[i].mw != NULL;
	return w;
}

/*
 * Under c->lock: post the WRITEs of a placed write, @tx committed off the
 * queue; it waits on the write list for their completions, which come in
 * order. The PLACED SEND posted next is only seen after them (RC ordering).
 */
static int post_writes(struct verbs_conn *c, struct verbs_tx *tx)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	int i, err;

	tx->next = NULL;
	if (c->wtx_tail)
		c->wtx_tail->next = tx;
	else
		c->wtx_head = tx;
	c->wtx_tail = tx;
	for (i = 0; i < tx->nwseg; i++) {
		const struct verbs_wseg *w = &tx->wseg[i];

		sge.addr = (uintptr_t)w->laddr;
		sge.length = w->len;
		sge.lkey = w->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uintptr_t)&c->write_cqe;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = w->raddr;
		wr.wr.rdma.rkey = w->rkey;
		err = ibv_post_send(c->id->qp, &wr, &bad);
		if (err) {
			log_warn(1000048, "%s: RDMA WRITE: %s", c->base.peer, strerror(err));
			verbs_fail_locked(c, -EIO);
			return -EIO;
		}
		c->sq_out++;
		tx->writes_out++;
	}
	return 0;
}

/*
 * Under c->lock: put @tx, the head of the queue, on the wire. 1 sent, 0 must
 * wait (credits, slots, cookies), <0 the connection failed.
 */
static int send_frame(struct verbs_conn *c, struct verbs_tx *tx)
{
	struct verbs_send_slot *slot;
	struct verbs_hdr vh = { 0 };
	uint8_t *p;
	int i, err, rndv, wrs = tx->rndv ? 1 + reg_windows(tx->reg, tx->nreg) : 1;

	if (tx->kind == TX_WRITE)
		wrs = 1 + tx->nwseg;
	else if (tx->kind == TX_SINK && tx->sr)
		wrs = 1 + reg_windows(tx->sr->reg, tx->sr->n);
	if (!may_send(c, 0, (uint32_t)wrs))
		return 0;
	if (tx->rndv && verbs_rndv_alloc(&c->rndv, tx, &tx->cookie))
		return 0;
	/* Committed: off the queue; an RNDV one belongs to the rendezvous table now. */
	c->txq_head = tx->next;
	if (!c->txq_head)
		c->txq_tail = NULL;
	if (tx->rndv) {
		err = bind_windows(c, tx->reg, tx->nreg, IBV_ACCESS_REMOTE_READ);
		if (err)
			return err;
	}
	if (tx->kind == TX_SINK && tx->sr) {
		struct verbs_sink_reg *sr = tx->sr;

		/* Writable by this peer, for this request: the narrowest access. */
		err = bind_windows(c, sr->reg, sr->n, IBV_ACCESS_REMOTE_WRITE);
		if (err)
			return err;
		for (i = 0; i < sr->n; i++)
			tx->sink[i].rkey = sr->reg[i].rkey;
		/* On the wire now: the sink lives on alone until the reply ends it. */
		sr->tx = NULL;
		tx->sr = NULL;
	}
	if (tx->kind == TX_WRITE) {
		err = post_writes(c, tx);
		if (err)
			return err;
	}
	slot = c->free_slots;
	p = slot->buf + VERBS_HDR_LEN;
	vh.type = tx->rndv ? VERBS_MSG_RNDV : VERBS_MSG_EAGER;
	if (tx->rndv) {
		struct verbs_desc d;

		vh.cookie = tx->cookie;
		vh.ndesc = (uint16_t)tx->nreg;
		vh.flags = tx->body_remote ? VERBS_F_BODY_REMOTE : 0;
		for (i = 0; i < tx->nreg; i++) {
			d.addr = (uintptr_t)tx->reg[i].addr;
			d.len = tx->reg[i].len;
			d.rkey = tx->reg[i].rkey;
			verbs_desc_put(p, &d);
			p += VERBS_DESC_LEN;
		}
	} else if (tx->kind == TX_SINK) {
		vh.type = VERBS_MSG_SINK;
		vh.ndesc = (uint16_t)tx->nsink;
		for (i = 0; i < (int)tx->nsink; i++) {
			verbs_desc_put(p, &tx->sink[i]);
			p += VERBS_DESC_LEN;
		}
	} else if (tx->kind == TX_WRITE) {
		struct verbs_desc d = { .addr = tx->placed_off, .len = tx->placed_len };

		vh.type = VERBS_MSG_PLACED;
		vh.ndesc = 1;
		verbs_desc_put(p, &d);
		p += VERBS_DESC_LEN;
	}
	verbs_credit_take(&c->cr, 0, &vh.credits);
	verbs_hdr_encode(&vh, slot->buf);
	rdfs_frame_hdr_encode(&tx->fh, p);
	p += RDFS_FRAME_HDR_LEN;
	if (tx->fh.body_len && !tx->body_remote) {
		memcpy(p, tx->body, tx->fh.body_len);
		p += tx->fh.body_len;
	}
	if (!tx->rndv && tx->kind != TX_WRITE) {
		for (i = 0; i < tx->niov; i++) {
			memcpy(p, tx->iov[i].iov_base, tx->iov[i].iov_len);
			p += tx->iov[i].iov_len;
		}
	}
	rndv = tx->rndv;
	err = post_slot(c, slot, (size_t)(p - slot->buf));
	/* On failure an RNDV @tx was cancelled with the table: do not touch it. */
	if (rndv) {
		if (!err)
			verbs_rndv_announce(&c->rndv, tx->cookie);
	} else if (tx->kind == TX_WRITE) {
		/* On the write list: completed by its WRITEs (or the failure). */
	} else {
		/* Copied into the slot: the poster's memory is free again. */
		tx_complete(c, tx, err ? -ECANCELED : 0);
	}
	return err ? err : 1;
}

/* Under c->lock: send DONEs, then queued frames, then a credit return if due. */
static void flush_locked(struct verbs_conn *c)
{
	struct verbs_tx *tx;
	int r = 0;

	if (c->reaped || atomic_load(&c->base.closing))
		return;
	while (c->done_n && may_send(c, 0, 1)) {
		uint32_t cookie = c->done_q[c->done_head];

		c->done_head = (c->done_head + 1) % c->done_cap;
		c->done_n--;
		if (send_control(c, VERBS_MSG_DONE, cookie))
			return;
	}
	while ((tx = c->txq_head) && (r = send_frame(c, tx)) > 0)
		;
	if (r < 0)
		return;
	if (c->free_slots && sq_room(c, 1) && verbs_credit_explicit_due(&c->cr) &&
	    !atomic_load(&c->base.closing))
		send_control(c, VERBS_MSG_CREDIT, 0);
}

static int tx_queue(struct verbs_conn *c, struct verbs_tx *tx, const void *body,
		    struct verbs_sink_reg *sr);

/* The frame @tx sends: header, body, the non-empty pieces of @data. Returns their count. */
static int tx_set_frame(struct verbs_tx *tx, const struct rdfs_frame_hdr *hdr, const void *body,
			const struct iovec *data, int niov, void *user)
{
	int i, n = 0;

	tx->user = user;
	tx->fh = *hdr;
	tx->body = body;
	for (i = 0; i < niov; i++)
		if (data[i].iov_len)
			tx->own_iov[n++] = data[i];
	tx->iov = tx->own_iov;
	tx->niov = n;
	tx->bytes = RDFS_FRAME_HDR_LEN + (size_t)hdr->body_len + hdr->data_len;
	return n;
}

int verbs_post_send(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
		    const void *body, const struct iovec *data, int niov, void *user)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;
	struct verbs_tx *tx;
	size_t peer_size;
	int err = 0, n;

	tx = calloc(1, sizeof(*tx));
	if (!tx)
		return -ENOMEM;
	n = tx_set_frame(tx, hdr, body, data, niov, user);

	/* The peer's buffer size is fixed once connected; register outside the lock. */
	peer_size = c->peer.recv_size;
	if (verbs_eager_len(hdr->body_len, hdr->data_len) > peer_size) {
		tx->rndv = 1;
		tx->body_remote = verbs_rndv_len((unsigned int)n, hdr->body_len) > peer_size ||
				  !hdr->data_len;
		err = tx_register(c, tx);
		if (err) {
			tx_free(c, tx);
			return err;
		}
	}
	return tx_queue(c, tx, body, NULL);
}

/*
 * Queue @tx (and list @sr, the sink it exposes, in the same step so its reply
 * cannot come first). On error @tx is freed, @sr is the caller's.
 */
static int tx_queue(struct verbs_conn *c, struct verbs_tx *tx, const void *body,
		    struct verbs_sink_reg *sr)
{
	const struct rdfs_frame_hdr *hdr = &tx->fh;
	void *user = tx->user;
	int i, err = 0;

	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->base.closing) || c->close_when_sent || c->reaped) {
		err = -EPIPE;
		goto err;
	}
	if (!tx->rndv && !user && (c->txq_head || c->done_n || !may_send(c, 0, 1))) {
		/* Unowned and must wait: keep a copy, the caller's buffers are its own again. */
		size_t blen = hdr->body_len;
		uint8_t *p;

		tx->copy_len = blen + hdr->data_len;
		tx->copy = xport_data_alloc(tx->copy_len ? tx->copy_len : 1);
		if (!tx->copy) {
			err = -ENOMEM;
			goto err;
		}
		if (blen)
			memcpy(tx->copy, body, blen);
		tx->body = tx->copy;
		p = (uint8_t *)tx->copy + blen;
		for (i = 0; i < tx->niov; i++) {
			memcpy(p, tx->own_iov[i].iov_base, tx->own_iov[i].iov_len);
			p += tx->own_iov[i].iov_len;
		}
		tx->own_iov[0].iov_base = (uint8_t *)tx->copy + blen;
		tx->own_iov[0].iov_len = hdr->data_len;
		tx->niov = hdr->data_len ? 1 : 0;
	}
	if (sr) {
		sr->next = c->sinks;
		c->sinks = sr;
	}
	c->tx_queued += tx->bytes;
	if (c->txq_tail)
		c->txq_tail->next = tx;
	else
		c->txq_head = tx;
	c->txq_tail = tx;
	flush_locked(c);
	progress_locked(c);	/* throttling may have changed */
	pthread_mutex_unlock(&c->lock);
	return 0;
err:
	pthread_mutex_unlock(&c->lock);
	tx_free(c, tx);
	return err;
}

/*
 * A request that exposes @sink for its reply's data (xport_post_send_sink()):
 * declared memory through windows bound when the request goes on the wire (no
 * registration per request), other memory registered for this request.
 */
int verbs_post_send_sink(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
			 const void *body, const struct iovec *data, int niov,
			 const struct iovec *sink, int nsink, void *user)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;
	struct verbs_sink_reg *sr;
	struct verbs_tx *tx;
	uint64_t total = 0;
	int i, err;

	if (nsink > XPORT_MAX_IOV)
		return -EINVAL;
	if (verbs_sink_len((unsigned int)nsink, hdr->body_len, hdr->data_len) >
	    c->peer.recv_size)
		return -EMSGSIZE;
	for (i = 0; i < nsink; i++)
		total += sink[i].iov_len;
	if (total > RDFS_MAX_DATA)
		return -EMSGSIZE;
	sr = calloc(1, sizeof(*sr));
	tx = calloc(1, sizeof(*tx));
	if (tx)
		tx->sink = calloc((size_t)nsink ? (size_t)nsink : 1, sizeof(*tx->sink));
	if (!sr || !tx || !tx->sink) {
		err = -ENOMEM;
		goto err;
	}
	sr->tag = hdr->tag;
	sr->tx = tx;
	tx->sr = sr;
	/* The narrowest access: this peer may write these bytes, nothing else. */
	for (i = 0; i < nsink; i++) {
		struct verbs_reg *r = &sr->reg[i];

		tx->sink[i].addr = (uintptr_t)sink[i].iov_base;
		tx->sink[i].len = (uint32_t)sink[i].iov_len;
		if (reg_window(c, r, sink[i].iov_base, sink[i].iov_len)) {
			sr->n = i + 1;
			atomic_fetch_add(&c->dev->sink_windows, 1);
			continue;	/* its rkey comes with the bind */
		}
		r->mr = reg_exact(c, sink[i].iov_base, sink[i].iov_len,
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
				  &c->dev->sink_mrs);
		if (!r->mr) {
			err = errno ? -errno : -ENOMEM;
			goto err;
		}
		sr->n = i + 1;
		r->rkey = r->mr->rkey;
		tx->sink[i].rkey = r->rkey;
	}
	atomic_fetch_add(&c->dev->sinks, 1);
	tx->kind = TX_SINK;
	tx->nsink = (uint32_t)nsink;
	tx_set_frame(tx, hdr, body, data, niov, user);
	/* tx_queue() frees @tx on error (which unlinks it from @sr). */
	err = tx_queue(c, tx, body, sr);
	if (err)
		sink_reg_free(c, sr);
	return err;
err:
	if (tx)
		tx_free(c, tx);
	if (sr)
		sink_reg_free(c, sr);
	return err;
}

/* Sinks are only ever made by this module (received SINK messages). */
uint64_t xport_sink_len(const struct xport_sink *sink)
{
	return sink->len;
}

void verbs_sink_cancel(struct xport_conn *conn, uint32_t tag)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;

	pthread_mutex_lock(&c->lock);
	sink_end_locked(c, tag);
	pthread_mutex_unlock(&c->lock);
}

/* Split [@off, + the iovecs' length) of @sink into WRITE segments of @tx. */
static int plan_writes(struct verbs_tx *tx, const struct xport_sink *sink, uint64_t off)
{
	uint32_t d = 0, doff;
	int i, max = tx->nreg + (int)sink->n;
	uint64_t skip = off;

	tx->wseg = calloc((size_t)max, sizeof(*tx->wseg));
	if (!tx->wseg)
		return -ENOMEM;
	while (d < sink->n && skip >= sink->d[d].len)
		skip -= sink->d[d++].len;
	doff = (uint32_t)skip;
	for (i = 0; i < tx->nreg; i++) {
		uint32_t loff = 0;

		while (loff < tx->reg[i].len) {
			struct verbs_wseg *w;
			uint32_t len;

			if (d >= sink->n || tx->nwseg >= max)
				return -EINVAL;
			len = tx->reg[i].len - loff;
			if (len > sink->d[d].len - doff)
				len = sink->d[d].len - doff;
			w = &tx->wseg[tx->nwseg++];
			w->laddr = (uint8_t *)tx->reg[i].addr + loff;
			w->lkey = tx->reg[i].lkey;
			w->raddr = sink->d[d].addr + doff;
			w->rkey = sink->d[d].rkey;
			w->len = len;
			loff += len;
			doff += len;
			if (doff == sink->d[d].len) {
				d++;
				doff = 0;
			}
		}
	}
	return 0;
}

/* RDMA-WRITE the iovecs into the peer's sink at @off, then say so (xport_post_write()). */
int verbs_post_write(struct xport_conn *conn, const struct xport_sink *sink, uint64_t off,
		     const struct iovec *iov, int niov, const struct rdfs_frame_hdr *hdr,
		     const void *body, void *user)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;
	struct verbs_tx *tx;
	uint64_t total = 0;
	int i, err;

	for (i = 0; i < niov; i++)
		total += iov[i].iov_len;
	if (!total || total > RDFS_MAX_DATA || off > sink->len || total > sink->len - off)
		return -EINVAL;
	if (verbs_sink_len(1, hdr->body_len, 0) > c->peer.recv_size)
		return -EMSGSIZE;
	tx = calloc(1, sizeof(*tx));
	if (!tx)
		return -ENOMEM;
	tx->kind = TX_WRITE;
	tx->user = user;
	tx->fh = *hdr;
	tx->body = body;
	tx->placed_off = off;
	tx->placed_len = (uint32_t)total;
	tx->bytes = RDFS_FRAME_HDR_LEN + (size_t)hdr->body_len + total;
	for (i = 0; i < niov; i++) {
		if (!iov[i].iov_len)
			continue;
		err = reg_local(c, &tx->reg[tx->nreg], iov[i].iov_base, iov[i].iov_len);
		if (err)
			goto err;
		tx->nreg++;
	}
	err = plan_writes(tx, sink, off);
	if (err)
		goto err;
	/* More WRITEs than the send queue holds could never go. */
	if ((uint32_t)tx->nwseg + 1 > c->sq_depth) {
		err = -EMSGSIZE;
		goto err;
	}
	return tx_queue(c, tx, body, NULL);
err:
	tx_free(c, tx);
	return err;
}

/* ------------------------------------------------------------------ receiving */

static void repost_recv(struct verbs_conn *c, struct verbs_recv *r)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)r->buf, .length = c->set.recv_size, .lkey = c->recv_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)&r->cqe, .sg_list = &sge, .num_sge = 1 }, *bad;
	int err = ibv_post_recv(c->id->qp, &wr, &bad);

	if (err) {
		log_warn(1000049, "%s: ibv_post_recv: %s", c->base.peer, strerror(err));
		verbs_fail_locked(c, -EIO);
		return;
	}
	verbs_credit_reposted(&c->cr, 1);
}

/* Drop the registrations of @rx's READ destinations (read, or given up). */
static void rx_unregister(struct verbs_conn *c, struct verbs_rx *rx)
{
	if (rx->mr_body)
		ibv_dereg_mr(rx->mr_body);
	if (rx->mr_data)
		ibv_dereg_mr(rx->mr_data);
	if (rx->ce_data)
		verbs_regcache_put(&c->dev->cache, rx->ce_data);
	rx->mr_body = rx->mr_data = NULL;
	rx->ce_data = NULL;
}

static void rx_free(struct verbs_conn *c, struct verbs_rx *rx)
{
	rx_unregister(c, rx);
	xport_msg_free(rx->msg);
	free(rx);
}

static const char *err_name(int err)
{
	switch (err) {
	case -EMSGSIZE:	return "oversized frame";
	case -ENOMEM:	return "out of memory";
	default:	return "malformed message";
	}
}

/* Take a message out of its receive buffer. 0 or -errno (drop the peer). */
static int rx_start(struct verbs_conn *c, struct verbs_rx *rx)
{
	struct verbs_msg m;
	struct xport_msg *msg;
	int err;

	err = verbs_msg_parse(rx->slot->buf, rx->len, c->base.max_body, c->base.max_data, &m);
	if (err)
		return err;
	msg = calloc(1, sizeof(*msg));
	if (!msg)
		return -ENOMEM;
	rx->msg = msg;
	msg->hdr = m.fh;
	/* counted from here: a message being read (RDMA READ) is memory held too */
	xport_rx_delivered(&c->base, msg, RDFS_FRAME_HDR_LEN + (uint64_t)m.fh.body_len +
			   m.fh.data_len);
	if (m.fh.body_len && !(msg->body = malloc(m.fh.body_len)))
		return -ENOMEM;
	if (m.fh.data_len && !(msg->data = xport_data_alloc(m.fh.data_len)))
		return -ENOMEM;
	if (m.body)
		memcpy(msg->body, m.body, m.fh.body_len);
	/* The final frame of a reply: the sink of its request is closed now. */
	if ((m.fh.flags & RDFS_FRAME_REPLY) && !(m.fh.flags & RDFS_FRAME_MORE) && c->sinks)
		sink_end_locked(c, m.fh.tag);
	if (m.vh.type == VERBS_MSG_SINK) {
		uint32_t i;

		msg->sink = malloc(sizeof(*msg->sink) + m.vh.ndesc * sizeof(msg->sink->d[0]));
		if (!msg->sink)
			return -ENOMEM;
		msg->sink->n = m.vh.ndesc;
		msg->sink->len = 0;
		for (i = 0; i < m.vh.ndesc; i++) {
			verbs_desc_get(m.desc + (size_t)i * VERBS_DESC_LEN, &msg->sink->d[i]);
			msg->sink->len += msg->sink->d[i].len;
		}
	} else if (m.vh.type == VERBS_MSG_PLACED) {
		struct verbs_desc d;

		verbs_desc_get(m.desc, &d);
		msg->placed_off = d.addr;
		msg->placed_len = d.len;
	}
	if (m.vh.type != VERBS_MSG_RNDV) {
		if (m.data)
			memcpy(msg->data, m.data, m.fh.data_len);
		rx->state = RX_READY;
	} else {
		uint32_t i;

		rx->cookie = m.vh.cookie;
		rx->ndesc = m.vh.ndesc;
		rx->body_remote = (m.vh.flags & VERBS_F_BODY_REMOTE) ? m.fh.body_len : 0;
		for (i = 0; i < rx->ndesc; i++)
			verbs_desc_get(m.desc + (size_t)i * VERBS_DESC_LEN, &rx->desc[i]);
		/*
		 * Our buffers, writable by our own READs only (no remote access):
		 * a recycled bulk buffer is declared (xport_data_alloc()), so its
		 * cached registration serves; anything else is registered now.
		 */
		if (rx->body_remote) {
			rx->mr_body = reg_exact(c, msg->body, m.fh.body_len,
						IBV_ACCESS_LOCAL_WRITE, &c->dev->recv_mrs);
			if (!rx->mr_body)
				return -ENOMEM;
		}
		if (m.fh.data_len) {
			struct verbs_range range;

			if (verbs_decl_find(&verbs_declared, msg->data, m.fh.data_len, &range) ||
			    verbs_regcache_get(&c->dev->cache, &range, &rx->ce_data))
				rx->mr_data = reg_exact(c, msg->data, m.fh.data_len,
							IBV_ACCESS_LOCAL_WRITE,
							&c->dev->recv_mrs);
			if (!rx->ce_data && !rx->mr_data)
				return -ENOMEM;
		}
		rx->state = RX_READING;
		c->reading++;
	}
	repost_recv(c, rx->slot);
	rx->slot = NULL;
	return 0;
}

/* Post READs for messages being read, in order, within the READ budget. */
static void post_reads(struct verbs_conn *c)
{
	struct verbs_rx *rx;
	struct verbs_read r;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int err;

	for (rx = c->rxq_head; rx; rx = rx->next) {
		if (rx->state != RX_READING)
			continue;
		while (c->reads_out < c->reads_max && sq_room(c, 1)) {
			if (!verbs_read_next(rx->desc, rx->ndesc, rx->body_remote, VERBS_READ_CHUNK,
					     &rx->it, &r))
				break;
			sge.addr = (uintptr_t)(r.to_body ? rx->msg->body : rx->msg->data) + r.off;
			sge.length = r.len;
			if (r.to_body)
				sge.lkey = rx->mr_body->lkey;
			else if (rx->ce_data)
				sge.lkey = ((struct ibv_mr *)rx->ce_data->handle)->lkey;
			else
				sge.lkey = rx->mr_data->lkey;
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = (uintptr_t)&rx->cqe;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_RDMA_READ;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = r.raddr;
			wr.wr.rdma.rkey = r.rkey;
			err = ibv_post_send(c->id->qp, &wr, &bad);
			if (err) {
				log_warn(1000050, "%s: posting an RDMA READ: %s", c->base.peer, strerror(err));
				verbs_fail_locked(c, -EIO);
				return;
			}
			c->sq_out++;
			c->reads_out++;
			rx->reads_out++;
		}
		if (c->reads_out >= c->reads_max)
			return;
	}
}

static int done_push(struct verbs_conn *c, uint32_t cookie)
{
	if (c->done_n == c->done_cap) {
		uint32_t ncap = c->done_cap ? c->done_cap * 2 : 16, i;
		uint32_t *nq = malloc(ncap * sizeof(*nq));

		if (!nq)
			return -ENOMEM;
		for (i = 0; i < c->done_n; i++)
			nq[i] = c->done_q[(c->done_head + i) % c->done_cap];
		free(c->done_q);
		c->done_q = nq;
		c->done_cap = ncap;
		c->done_head = 0;
	}
	c->done_q[(c->done_head + c->done_n) % c->done_cap] = cookie;
	c->done_n++;
	return 0;
}

static void read_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc);

/* One READ of @rx's is over: once they all are, it is ready and the peer is owed a DONE. */
static void read_finished(struct verbs_conn *c, struct verbs_rx *rx)
{
	struct verbs_read_iter probe = rx->it;
	struct verbs_read r;

	c->reads_out--;
	rx->reads_out--;
	if (rx->reads_out ||
	    verbs_read_next(rx->desc, rx->ndesc, rx->body_remote, VERBS_READ_CHUNK, &probe, &r))
		return;
	/* All read: our buffers are the application's now, the peer's may go. */
	rx_unregister(c, rx);
	rx->state = RX_READY;
	c->reading--;
	if (done_push(c, rx->cookie))
		verbs_fail_locked(c, -ENOMEM);
}

static int rx_allowed(struct verbs_conn *c)
{
	xport_tx_throttle(&c->base, &c->tx_throttled, c->tx_queued, c->tx_limit);
	return !atomic_load(&c->base.closing) && !c->close_when_sent && !c->rx_paused &&
	       !c->tx_throttled && !c->reaped;
}

/* Under c->lock: consume what we may, read, deliver in order, send what waits. */
static void progress_locked(struct verbs_conn *c)
{
	struct verbs_rx *rx;
	int err;

	if (c->reaped || atomic_load(&c->base.closing))
		return;
	if (rx_allowed(c)) {
		for (rx = c->rxq_head; rx; rx = rx->next) {
			if (rx->state != RX_HELD)
				continue;
			if (c->reading >= VERBS_MAX_READING)
				break;
			/*
			 * The receive budget, before the message leaves its receive
			 * buffer: a held buffer returns no credit, so the peer stops.
			 * verbs_conn_rx_resume() goes on once the application frees.
			 */
			if (!xport_rx_budget_ok(&c->base))
				break;
			err = rx_start(c, rx);
			if (err) {
				log_warn(1000051, "%s: dropping connection: %s", c->base.peer, err_name(err));
				verbs_fail_locked(c, err);
				return;
			}
		}
	}
	post_reads(c);
	while ((rx = c->rxq_head) && rx->state == RX_READY &&
	       !atomic_load(&c->base.closing)) {
		struct xport_event ev = { .type = XPORT_EV_RECV, .conn = &c->base, .msg = rx->msg };

		c->rxq_head = rx->next;
		if (!c->rxq_head)
			c->rxq_tail = NULL;
		rx->msg = NULL;
		rx_free(c, rx);
		xport_cq_push(c->base.ctx, &ev);
	}
	flush_locked(c);
	if (c->close_when_sent && !c->txq_head && !c->done_n && !c->rndv.used &&
	    !c->wtx_head && c->sq_out == 0)
		verbs_fail_locked(c, 0);
}

/* A receive completed with @len bytes in @r. */
static void on_recv(struct verbs_conn *c, struct verbs_recv *r, uint32_t len)
{
	struct verbs_msg m;
	struct verbs_tx *tx;
	struct verbs_rx *rx;
	int err;

	/* Structure and credits now; the application's limits when it is consumed. */
	err = verbs_msg_parse(r->buf, len, RDFS_MAX_BODY, RDFS_MAX_DATA, &m);
	if (err) {
		log_warn(1000052, "%s: dropping connection: %s (%u bytes, type %u)", c->base.peer,
			 err_name(err), len, len > 5 ? r->buf[5] : 0);
		verbs_fail_locked(c, err);
		return;
	}
	if (verbs_credit_grant(&c->cr, m.vh.credits)) {
		log_warn(1000053, "%s: dropping connection: %u credits returned, more than we used",
			 c->base.peer, m.vh.credits);
		verbs_fail_locked(c, -EPROTO);
		return;
	}
	switch (m.vh.type) {
	case VERBS_MSG_CREDIT:
		repost_recv(c, r);
		return;
	case VERBS_MSG_DONE:
		tx = verbs_rndv_finish(&c->rndv, m.vh.cookie);
		if (!tx) {
			log_warn(1000054,
				 "%s: dropping connection: completion of an unknown transfer",
				 c->base.peer);
			verbs_fail_locked(c, -EPROTO);
			return;
		}
		tx_complete(c, tx, m.vh.status);
		repost_recv(c, r);
		return;
	default:
		break;
	}
	rx = calloc(1, sizeof(*rx));
	if (!rx) {
		verbs_fail_locked(c, -ENOMEM);
		return;
	}
	rx->state = RX_HELD;
	rx->cqe.done = read_done;
	rx->slot = r;
	rx->len = len;
	if (c->rxq_tail)
		c->rxq_tail->next = rx;
	else
		c->rxq_head = rx;
	c->rxq_tail = rx;
}

/* ------------------------------------------------------------------ completions */

/*
 * Whether @wc reports a failure of @what; if so the connection is failed. A
 * flushed request only says the QP went to error, which was logged when it
 * did (or we are closing), so it fails the connection quietly.
 */
static int wc_failed(struct verbs_conn *c, const struct ibv_wc *wc, const char *what)
{
	if (wc->status == IBV_WC_SUCCESS)
		return 0;
	if (!atomic_load(&c->base.closing) && wc->status != IBV_WC_WR_FLUSH_ERR)
		log_warn(1000055,
			 "%s: %s failed: %s", c->base.peer, what, ibv_wc_status_str(wc->status));
	verbs_fail_locked(c, wc->status == IBV_WC_WR_FLUSH_ERR ? -ECONNRESET : -EIO);
	return 1;
}

/* A receive buffer was filled: the message stays in it until consumed (on_recv()). */
void verbs_recv_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc)
{
	struct verbs_recv *r = (struct verbs_recv *)((uint8_t *)cqe -
						     offsetof(struct verbs_recv, cqe));

	if (wc_failed(c, wc, "receive") || atomic_load(&c->base.closing))
		return;
	on_recv(c, r, wc->byte_len);
}

/* A SEND from a slot is over, either way: the slot may carry the next one. */
void verbs_send_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc)
{
	struct verbs_send_slot *s = (struct verbs_send_slot *)((uint8_t *)cqe -
							       offsetof(struct verbs_send_slot, cqe));

	c->sq_out--;
	s->next_free = c->free_slots;
	c->free_slots = s;
	wc_failed(c, wc, "send");
}

/* A window bind: nothing to give back but its place in the send queue. */
void verbs_bind_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc)
{
	(void)cqe;
	c->sq_out--;
	wc_failed(c, wc, "memory window bind");
}

/*
 * One WRITE of a placed write: they complete in posting order (one send
 * queue), so it belongs to the head of the write list, which is done with its
 * last. A failure fails the connection, which completes the list.
 */
void verbs_write_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc)
{
	struct verbs_tx *tx = c->wtx_head;

	(void)cqe;
	c->sq_out--;
	if (wc_failed(c, wc, "RDMA WRITE") || !tx || --tx->writes_out)
		return;
	c->wtx_head = tx->next;
	if (!c->wtx_head)
		c->wtx_tail = NULL;
	tx_complete(c, tx, 0);
}

/* One READ of a rendezvous message being received. */
static void read_done(struct verbs_conn *c, struct verbs_cqe *cqe, const struct ibv_wc *wc)
{
	struct verbs_rx *rx = (struct verbs_rx *)((uint8_t *)cqe - offsetof(struct verbs_rx, cqe));

	c->sq_out--;
	if (wc_failed(c, wc, "RDMA READ"))
		return;
	read_finished(c, rx);
}

void verbs_cq_handler(struct xport_poll *p, uint32_t events)
{
	struct verbs_conn *c = (struct verbs_conn *)((uint8_t *)p -
						     offsetof(struct verbs_conn, cq_poll));
	struct ibv_wc wc[CQ_BATCH];
	struct ibv_cq *cq;
	void *cq_ctx;
	unsigned int got = 0;
	int n, i;

	while (ibv_get_cq_event(c->cch, &cq, &cq_ctx) == 0)
		got++;
	if (got)
		ibv_ack_cq_events(c->cq, got);
	pthread_mutex_lock(&c->lock);
	if (c->reaped) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	/* Re-arm first, then drain: a completion after the drain raises a new event. */
	ibv_req_notify_cq(c->cq, 0);
	while ((n = ibv_poll_cq(c->cq, CQ_BATCH, wc)) > 0) {
		for (i = 0; i < n; i++) {
			struct verbs_cqe *cqe = (struct verbs_cqe *)(uintptr_t)wc[i].wr_id;

			cqe->done(c, cqe, &wc[i]);
		}
	}
	progress_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------------ closing, limits */

void verbs_drop_all_locked(struct verbs_conn *c, int status)
{
	struct verbs_tx *tx;

	while ((tx = c->txq_head)) {
		c->txq_head = tx->next;
		tx_complete(c, tx, status);
	}
	c->txq_tail = NULL;
	while ((tx = verbs_rndv_take_any(&c->rndv)))
		tx_complete(c, tx, status);
	/* Their local keys die with them: WRITEs still queued fail, reading nothing. */
	while ((tx = c->wtx_head)) {
		c->wtx_head = tx->next;
		tx_complete(c, tx, status);
	}
	c->wtx_tail = NULL;
	/* The caller's memory is its own again: no late WRITE may reach it. */
	while (c->sinks) {
		struct verbs_sink_reg *sr = c->sinks;

		c->sinks = sr->next;
		sink_reg_free(c, sr);
	}
	c->done_n = 0;
}

void verbs_free_rx_all(struct verbs_conn *c)
{
	struct verbs_rx *rx;

	while ((rx = c->rxq_head)) {
		c->rxq_head = rx->next;
		rx_free(c, rx);
	}
	c->rxq_tail = NULL;
}

void verbs_fail_locked(struct verbs_conn *c, int status)
{
	if (atomic_exchange(&c->base.closing, 1))
		return;
	c->close_status = status;
	/*
	 * Sends are cancelled now: deregistering kills their rkeys at once, so the
	 * poster may reuse its memory even if the peer was still reading it.
	 */
	verbs_drop_all_locked(c, -ECANCELED);
	if (c->registered)
		xport_conn_reap_later(&c->base);
}

void verbs_fail(struct verbs_conn *c, int status)
{
	pthread_mutex_lock(&c->lock);
	verbs_fail_locked(c, status);
	pthread_mutex_unlock(&c->lock);
}

void verbs_conn_close(struct xport_conn *conn, int flush)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;

	pthread_mutex_lock(&c->lock);
	if (flush && !atomic_load(&c->base.closing)) {
		c->close_when_sent = 1;
		progress_locked(c);	/* closes now if nothing is queued */
	} else {
		verbs_fail_locked(c, 0);
	}
	pthread_mutex_unlock(&c->lock);
}

void verbs_conn_rx_resume(struct xport_conn *conn)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;

	pthread_mutex_lock(&c->lock);
	progress_locked(c);
	pthread_mutex_unlock(&c->lock);
}

void verbs_conn_pause_rx(struct xport_conn *conn, int paused)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;

	pthread_mutex_lock(&c->lock);
	c->rx_paused = paused;
	progress_locked(c);
	pthread_mutex_unlock(&c->lock);
}

void verbs_conn_set_tx_limit(struct xport_conn *conn, size_t max)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;

	pthread_mutex_lock(&c->lock);
	c->tx_limit = max;
	progress_locked(c);
	pthread_mutex_unlock(&c->lock);
}

size_t verbs_conn_queued_bytes(struct xport_conn *conn)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;
	size_t n;

	pthread_mutex_lock(&c->lock);
	n = c->tx_queued;
	pthread_mutex_unlock(&c->lock);
	return n;
}
