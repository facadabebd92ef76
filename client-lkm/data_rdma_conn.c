// SPDX-License-Identifier: GPL-2.0
/*
 * data_rdma_conn.c - an RDMA connection to one I/O server (data_rdma.c has
 * the design): rdma_cm address and route resolution, the queue pair with its
 * CQ, receives and registration MRs, the connect with the verbs protocol's
 * private data, the rpc handshake with the helper's authenticator, and the
 * teardown at the last reference.
 */
#include <linux/slab.h>
#include <crypto/algapi.h>
#include <net/sock.h>
#include <asm/unaligned.h>

#include "data_rdma.h"

/* ---------------------------------------------------------------- connection setup */

static int rr_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rr_conn *c = id->context;
	int err;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		err = rdma_resolve_route(id, RR_CM_TIMEOUT_MS);
		if (err) {
			c->cm_err = err;
			c->cm_state = CM_FAILED;
			wake_up_all(&c->wait);
		}
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		c->cm_state = CM_ROUTED;
		wake_up_all(&c->wait);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (ev->param.conn.private_data &&
		    ev->param.conn.private_data_len >= VERBS_PRIV_LEN)
			memcpy(c->peer_priv, ev->param.conn.private_data, VERBS_PRIV_LEN);
		c->cm_state = CM_ESTABLISHED;
		wake_up_all(&c->wait);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		c->cm_err = ev->event == RDMA_CM_EVENT_REJECTED ? -ECONNREFUSED : -EHOSTUNREACH;
		c->cm_state = CM_FAILED;
		wake_up_all(&c->wait);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rr_fail(c, -ECONNRESET, c->cm_state == CM_ESTABLISHED && c->authed ?
			"disconnected by the I/O server" : NULL);
		if (c->cm_state != CM_ESTABLISHED) {
			c->cm_err = -ECONNRESET;
			c->cm_state = CM_FAILED;
		}
		wake_up_all(&c->wait);
		break;
	default:
		break;
	}
	return 0;	/* never let the CM destroy the id: rr_conn_release does */
}

static void rr_conn_release(struct kref *ref)
{
	struct rr_conn *c = container_of(ref, struct rr_conn, ref);
	int i;

	rr_shutdown_qp(c);
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->id)
		rdma_destroy_id(c->id);	/* no CM event after this */
	cancel_work_sync(&c->fail_work);
	if (c->cq)
		ib_free_cq(c->cq);
	for (i = 0; i < RR_RECV_COUNT; i++) {
		if (c->recvs[i].dma)
			ib_dma_unmap_single(c->dev, c->recvs[i].dma, RR_RECV_SIZE,
					    DMA_FROM_DEVICE);
		kfree(c->recvs[i].buf);
	}
	for (i = 0; c->slots && i < c->nslots; i++) {
		if (c->slots[i].dma)
			ib_dma_unmap_single(c->dev, c->slots[i].dma, c->slot_size,
					    DMA_TO_DEVICE);
		kfree(c->slots[i].buf);
	}
	kfree(c->slots);
	for (i = 0; i < RR_MAX_REQS; i++)
		if (c->mrs[i])
			ib_dereg_mr(c->mrs[i]);
	if (c->pd)
		ib_dealloc_pd(c->pd);
	atomic64_dec(&rdfs_stats.rdma_conns);
	kfree(c);
}

void rr_conn_put(struct rr_conn *c)
{
	kref_put(&c->ref, rr_conn_release);
}

/* Queue pair, receive buffers (all posted), registration MRs. */
static int rr_setup_qp(struct rr_conn *c)
{
	struct ib_qp_init_attr qa = {};
	int i, err;

	c->dev = c->id->device;
	c->max_sge = min3((u32)c->dev->attrs.max_send_sge, (u32)c->dev->attrs.max_sge_rd,
			  (u32)RR_MAX_SGE);
	if (!c->max_sge || c->dev->attrs.max_fast_reg_page_list_len < RR_MAX_PAGES ||
	    !(c->dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS))
		return -EOPNOTSUPP;
	c->pd = ib_alloc_pd(c->dev, 0);	/* no global rkey: only per-request registrations */
	if (IS_ERR(c->pd)) {
		err = PTR_ERR(c->pd);
		c->pd = NULL;
		return err;
	}
	c->cq = ib_alloc_cq(c->dev, c, RR_SQ_DEPTH + RR_RECV_COUNT + 2, 0, IB_POLL_WORKQUEUE);
	if (IS_ERR(c->cq)) {
		err = PTR_ERR(c->cq);
		c->cq = NULL;
		return err;
	}
	qa.event_handler = NULL;
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.sq_sig_type = IB_SIGNAL_REQ_WR;
	qa.qp_type = IB_QPT_RC;
	qa.cap.max_send_wr = RR_SQ_DEPTH + 1;	/* + ib_drain_qp's */
	qa.cap.max_recv_wr = RR_RECV_COUNT + 1;
	qa.cap.max_send_sge = c->max_sge;
	qa.cap.max_recv_sge = 1;
	err = rdma_create_qp(c->id, c->pd, &qa);
	if (err)
		return err;
	c->qp = c->id->qp;
	for (i = 0; i < RR_MAX_REQS; i++) {
		struct ib_mr *mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, RR_MAX_PAGES);

		if (IS_ERR(mr))
			return PTR_ERR(mr);
		c->mrs[i] = mr;
	}
	for (i = 0; i < RR_RECV_COUNT; i++) {
		struct rr_recv *r = &c->recvs[i];

		r->conn = c;
		r->cqe.done = rr_recv_done;
		r->buf = kmalloc(RR_RECV_SIZE, GFP_KERNEL);
		if (!r->buf)
			return -ENOMEM;
		r->dma = ib_dma_map_single(c->dev, r->buf, RR_RECV_SIZE, DMA_FROM_DEVICE);
		if (ib_dma_mapping_error(c->dev, r->dma)) {
			r->dma = 0;
			return -ENOMEM;
		}
		err = rr_post_recv(c, r);
		if (err)
			return err;
	}
	return 0;
}

/* Send slots sized for the server's receive buffers; the credit window. */
static int rr_setup_send(struct rr_conn *c)
{
	struct verbs_conn_params pp;
	u32 i, credits;

	if (verbs_params_decode(c->peer_priv, VERBS_PRIV_LEN, &pp))
		return -EPROTO;
	credits = pp.credits;
	c->peer_recv_size = pp.recv_size;
	c->slot_size = min(c->peer_recv_size, RR_SLOT_SIZE);
	c->nslots = min(credits + 4, RR_MAX_SLOTS);
	c->slots = kcalloc(c->nslots, sizeof(*c->slots), GFP_KERNEL);
	if (!c->slots)
		return -ENOMEM;
	for (i = 0; i < c->nslots; i++) {
		struct rr_slot *s = &c->slots[i];

		s->conn = c;
		s->cqe.done = rr_send_done;
		s->buf = kmalloc(c->slot_size, GFP_KERNEL);
		if (!s->buf)
			return -ENOMEM;
		s->dma = ib_dma_map_single(c->dev, s->buf, c->slot_size, DMA_TO_DEVICE);
		if (ib_dma_mapping_error(c->dev, s->dma)) {
			s->dma = 0;
			return -ENOMEM;
		}
	}
	spin_lock_bh(&c->lock);
	for (i = 0; i < c->nslots; i++) {
		c->slots[i].next_free = c->free_slots;
		c->free_slots = &c->slots[i];
	}
	c->peer_credits = credits;
	c->avail = credits;
	c->threshold = max(RR_RECV_COUNT / 2, 2);
	spin_unlock_bh(&c->lock);
	return 0;
}

/* ---------------------------------------------------------------- handshake */

/* Field @field (length-delimited) of protobuf @buf: its bytes, or NULL. */
static const u8 *rr_pb_bytes(const u8 *buf, size_t len, u32 field, u32 *out_len)
{
	const u8 *p = buf, *end = buf + len;

	while (p < end) {
		u64 key = 0, v = 0;
		int shift;

		for (shift = 0; p < end && shift < 64; shift += 7) {
			key |= (u64)(*p & 0x7f) << shift;
			if (!(*p++ & 0x80))
				break;
		}
		switch (key & 7) {
		case 0:
			while (p < end && (*p++ & 0x80))
				;
			break;
		case 2:
			for (shift = 0; p < end && shift < 64; shift += 7) {
				v |= (u64)(*p & 0x7f) << shift;
				if (!(*p++ & 0x80))
					break;
			}
			if (v > (u64)(end - p))
				return NULL;
			if ((key >> 3) == field) {
				*out_len = v;
				return p;
			}
			p += v;
			break;
		default:
			return NULL;
		}
	}
	return NULL;
}

static u8 *rr_pb_put_bytes(u8 *p, u32 field, const void *data, u8 len)
{
	*p++ = field << 3 | 2;
	*p++ = len;
	memcpy(p, data, len);
	return p + len;
}

/* The next handshake frame, by the deadline. */
static int rr_hs_wait(struct rr_conn *c, u16 op)
{
	long left = wait_event_timeout(c->wait, READ_ONCE(c->hs_ready) || READ_ONCE(c->dead),
				       RR_AUTH_TIMEOUT);

	if (READ_ONCE(c->dead))
		return -ECONNRESET;
	if (!left)
		return -ETIMEDOUT;
	if (c->hs_frame.opcode != op)
		return -EPROTO;
	return 0;
}

static int rr_sock_xfer(struct socket *sock, void *buf, size_t len, bool rd)
{
	struct kvec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = {};
	int n;

	n = rd ? kernel_recvmsg(sock, &msg, &iov, 1, len, 0) :
		 kernel_sendmsg(sock, &msg, &iov, 1, len);
	return n == len ? 0 : n < 0 ? n : -EPROTO;
}

/*
 * The rpc handshake (lib/rpc_client.c's) on the connection's own queue pair,
 * the proofs from the helper's authenticator: challenge in, response out,
 * the server's proof checked.
 */
static int rr_authenticate(struct rr_conn *c, struct socket *auth)
{
	struct rdfs_dev_rdma_challenge ch = { .magic = RDFS_DEV_RDMA_MAGIC };
	struct rdfs_dev_rdma_proof pr;
	u8 msg[VERBS_HDR_LEN + RDFS_FRAME_HDR_LEN + 192], *p;
	const u8 *v;
	u32 vlen;
	int err;

	err = rr_hs_wait(c, RDFS_OP_AUTH_CHALLENGE);
	if (err)
		return err;
	v = rr_pb_bytes(c->hs_body, c->hs_frame.body_len, 1, &vlen);
	if (!v || vlen != RDFS_DEV_NONCE_LEN)
		return -EPROTO;
	memcpy(ch.server_nonce, v, RDFS_DEV_NONCE_LEN);
	WRITE_ONCE(c->hs_ready, false);
	err = rr_sock_xfer(auth, &ch, sizeof(ch), false);
	if (!err)
		err = rr_sock_xfer(auth, &pr, sizeof(pr), true);
	if (err)
		return err;
	if (pr.magic != RDFS_DEV_RDMA_MAGIC || pr.error)
		return pr.error ? pr.error : -EPROTO;
	pr.role[sizeof(pr.role) - 1] = '\0';

	p = msg + VERBS_HDR_LEN + RDFS_FRAME_HDR_LEN;
	p = rr_pb_put_bytes(p, 1, pr.client_mac, RDFS_DEV_MAC_LEN);
	p = rr_pb_put_bytes(p, 2, pr.client_nonce, RDFS_DEV_NONCE_LEN);
	p = rr_pb_put_bytes(p, 3, pr.role, strlen(pr.role));
	rr_hdr_encode(msg, VERBS_MSG_EAGER, 0, 0, 0);
	rr_frame_put(msg + VERBS_HDR_LEN, RDFS_OP_AUTH_RESPONSE, 0, 0,
		     p - msg - VERBS_HDR_LEN - RDFS_FRAME_HDR_LEN, 0);
	spin_lock_bh(&c->lock);
	err = c->dead ? -ECONNRESET : rr_send_msg_locked(c, msg, p - msg, false);
	spin_unlock_bh(&c->lock);
	if (err)
		goto out;
	err = rr_hs_wait(c, RDFS_OP_AUTH_RESULT);
	if (err)
		goto out;
	if (c->hs_frame.status) {
		err = -EACCES;
		goto out;
	}
	v = rr_pb_bytes(c->hs_body, c->hs_frame.body_len, 1, &vlen);
	err = v && vlen == RDFS_DEV_MAC_LEN && !crypto_memneq(v, pr.server_mac, vlen) ?
	      0 : -EACCES;
out:
	memzero_explicit(&pr, sizeof(pr));
	return err;
}

/* A new authenticated connection to @server_id, from the helper's authenticator. */
static struct rr_conn *rr_connect(struct rdfs_sb_info *sbi, u32 server_id)
{
	struct rdfs_dev_connect req = { .server_id = server_id };
	struct rdfs_dev_rdma_peer peer;
	struct rdma_conn_param cp = {};
	u8 priv[VERBS_PRIV_LEN];
	struct rdfs_dev_call call;
	struct socket *auth = NULL;
	struct rr_conn *c;
	long left;
	int err;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return ERR_PTR(-ENOMEM);
	kref_init(&c->ref);
	atomic64_inc(&rdfs_stats.rdma_conns);
	c->server_id = server_id;
	init_waitqueue_head(&c->wait);
	spin_lock_init(&c->lock);
	mutex_init(&c->shutdown_lock);
	INIT_WORK(&c->fail_work, rr_fail_work);
	INIT_LIST_HEAD(&c->txq);
	INIT_LIST_HEAD(&c->pulls);
	c->noop_cqe.done = rr_noop_done;
	c->cm_state = CM_RESOLVING;

	rdfs_call_init(&call, RDFS_DEV_CONNECT, 0, 0);
	rdfs_call_arg(&call, &req, sizeof(req));
	err = rdfs_call(sbi->chan, &call);
	if (err)
		goto fail;
	auth = call.sock;
	if (auth->sk->sk_family != AF_UNIX) {
		pr_warn_ratelimited(RDFS_MSG(1500005)
				    "I/O server %u is not advertised on rdma:// (transport=rdma needs an RDMA cluster)\n",
				    server_id);
		err = -EPROTONOSUPPORT;
		goto fail;
	}
	auth->sk->sk_rcvtimeo = RR_AUTH_TIMEOUT;
	auth->sk->sk_sndtimeo = RR_AUTH_TIMEOUT;
	err = rr_sock_xfer(auth, &peer, sizeof(peer), true);
	if (err || peer.magic != RDFS_DEV_RDMA_MAGIC || peer.addr_len > sizeof(peer.addr) ||
	    peer.addr_len < sizeof(struct sockaddr_in)) {
		err = err ? err : -EPROTO;
		goto fail;
	}

	c->id = rdma_create_id(&init_net, rr_cm_handler, c, RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(c->id)) {
		err = PTR_ERR(c->id);
		c->id = NULL;
		goto fail;
	}
	err = rdma_resolve_addr(c->id, NULL, (struct sockaddr *)peer.addr, RR_CM_TIMEOUT_MS);
	if (err)
		goto fail;
	left = wait_event_timeout(c->wait, READ_ONCE(c->cm_state) != CM_RESOLVING,
				  RR_CONNECT_TIMEOUT);
	if (READ_ONCE(c->cm_state) != CM_ROUTED) {
		err = left ? c->cm_err : -ETIMEDOUT;
		goto fail;
	}
	err = rr_setup_qp(c);
	if (err)
		goto fail;
	verbs_params_encode(&(struct verbs_conn_params){ .credits = RR_RECV_COUNT,
						       .recv_size = RR_RECV_SIZE }, priv);
	cp.private_data = priv;
	cp.private_data_len = sizeof(priv);
	/* READs we issue (figure 3) and the server issues on us (writes). */
	cp.initiator_depth = min_t(int, c->dev->attrs.max_qp_init_rd_atom, 16);
	cp.responder_resources = min_t(int, c->dev->attrs.max_qp_rd_atom, 16);
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	c->cm_state = CM_CONNECTING;
	err = rdma_connect(c->id, &cp);
	if (err)
		goto fail;
	left = wait_event_timeout(c->wait, READ_ONCE(c->cm_state) != CM_CONNECTING,
				  RR_CONNECT_TIMEOUT);
	if (READ_ONCE(c->cm_state) != CM_ESTABLISHED) {
		err = left ? c->cm_err : -ETIMEDOUT;
		goto fail;
	}
	err = rr_setup_send(c);
	if (err)
		goto fail;
	err = rr_authenticate(c, auth);
	if (err)
		goto fail;
	spin_lock_bh(&c->lock);
	c->authed = true;
	err = c->dead ? -ECONNRESET : 0;
	spin_unlock_bh(&c->lock);
	if (err)
		goto fail;
	sockfd_put(auth);
	return c;
fail:
	pr_warn_ratelimited(RDFS_MSG(1500006) "RDMA connection to I/O server %u failed: %d\n",
			    server_id, err);
	if (auth)
		sockfd_put(auth);
	spin_lock_bh(&c->lock);
	c->dead = true;
	spin_unlock_bh(&c->lock);
	rr_conn_put(c);
	return ERR_PTR(err);
}

/* A live connection to @server_id (a reference), connecting if need be. */
struct rr_conn *rr_conn_get(struct rdfs_sb_info *sbi, u32 server_id)
{
	struct rdfs_rdma *r = sbi->rdma;
	struct rr_conn *c, *old = NULL;

	mutex_lock(&r->lock[server_id]);
	c = r->conns[server_id];
	if (c && READ_ONCE(c->dead)) {
		old = c;
		r->conns[server_id] = c = NULL;
	}
	if (!c) {
		c = rr_connect(sbi, server_id);
		if (!IS_ERR(c))
			r->conns[server_id] = c;
	}
	if (!IS_ERR(c))
		kref_get(&c->ref);
	mutex_unlock(&r->lock[server_id]);
	if (old)
		rr_conn_put(old);
	return c;
}
