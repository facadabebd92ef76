// SPDX-License-Identifier: GPL-2.0
/*
 * data_rdma.c - file data between the page cache and the I/O servers over
 * RDMA (transport=rdma): the client side of the verbs transport's wire
 * protocol (lib/xport_verbs_wire.h, lib/xport_verbs_credit.h,
 * lib/xport_verbs_rndv.h), spoken by the unchanged user-space I/O server.
 *
 * Per I/O server one RC queue pair set up with the kernel's rdma_cm, one CQ
 * polled from a workqueue (completions are events: every work request carries
 * an ib_cqe whose .done handles it), receives posted ahead with credit flow
 * control, and up to RR_MAX_REQS requests in flight, matched by tag.
 *
 * The Gfarm paper's two read modes, and writes (per request, per I/O server):
 *   rdma_mode=write (figure 2): the request's page-cache pages are DMA-mapped,
 *     registered by fast registration (IB_WR_REG_MR, remote access: write
 *     only, a fresh key each time) and sent as the READ's SINK; the server
 *     RDMA-WRITEs each unit into them and says PLACED; at the final reply
 *     IB_WR_LOCAL_INV kills the key, and only then are the pages handed back.
 *   rdma_mode=read (figure 3): the server answers each unit with an RNDV
 *     naming its own buffer; the module RDMA-READs it into the mapped pages
 *     (the PD's local DMA key: no registration, no remote access) and says
 *     DONE.
 *   writes: the WRITE goes as an RNDV naming the dirty bytes (a run that may
 *     start and end inside a page), registered remote-read only; the server
 *     RDMA-READs them, the reply invalidates.
 * No byte of file data is copied by the CPU on these paths; rdfs_stats
 * counts the bytes that are (an eager reply's inline data, which our 4 KiB
 * receive buffers make impossible for whole blocks) and the bytes RDMA moved.
 *
 * Authentication: the helper hands over an authenticator (rdfs_dev_abi.h)
 * instead of a socket; the module runs the rpc handshake on its own queue
 * pair and gets the HMAC proofs from it, so the cluster secret stays in user
 * space.
 *
 * Faults: a failed work request, a protocol error, DISCONNECTED or a request
 * unanswered for RR_IO_TIMEOUT fails the connection: its queue pair goes to
 * the error state and is drained (no DMA to or from any page after that),
 * every request on it completes with EIO, and the next request connects anew.
 *
 * Files: data_rdma.c (requests, the protocol, completions, failure),
 * data_rdma_conn.c (connection setup, the handshake, teardown), data_rdma.h.
 *
 * Locking: conn->lock (a spinlock: completion handlers run in the CQ's
 * workqueue) covers the credit window, the send slots, the request table and
 * the queues; rdma->lock[server] serializes connection setup per server;
 * conn->shutdown_lock the queue pair's drain. A connection is freed at its
 * last reference (the mount's and one per request), always in process context.
 */
#include <linux/highmem.h>
#include <linux/pagemap.h>
#include <linux/slab.h>
#include <asm/unaligned.h>

#include "data_rdma.h"

static void rr_req_maybe_done(struct rdfs_rdma_req *req);
static void rr_flush_locked(struct rr_conn *c);
static void rr_post_pulls_locked(struct rr_conn *c);

/* ---------------------------------------------------------------- failure */

/* Under c->lock: the connection is broken; its drain and EIOs follow in a work item. */
void rr_fail_locked(struct rr_conn *c, int err, const char *why)
{
	if (c->dead)
		return;
	c->dead = true;
	c->dead_err = err;
	if (why)
		pr_warn_ratelimited(RDFS_MSG(1500003) "RDMA connection to I/O server %u: %s (%d)\n",
				    c->server_id, why, err);
	schedule_work(&c->fail_work);
	wake_up_all(&c->wait);
}

void rr_fail(struct rr_conn *c, int err, const char *why)
{
	spin_lock_bh(&c->lock);
	rr_fail_locked(c, err, why);
	spin_unlock_bh(&c->lock);
}

/*
 * Stop all DMA: the queue pair to the error state, every posted work request
 * flushed (its handler has run). Idempotent; process context.
 */
void rr_shutdown_qp(struct rr_conn *c)
{
	mutex_lock(&c->shutdown_lock);
	if (c->qp && !c->drained) {
		if (c->cm_state == CM_ESTABLISHED)
			rdma_disconnect(c->id);
		ib_drain_qp(c->qp);
		c->drained = true;
	}
	mutex_unlock(&c->shutdown_lock);
}

/* The connection failed: drain it, then every request on it ends with EIO. */
void rr_fail_work(struct work_struct *w)
{
	struct rr_conn *c = container_of(w, struct rr_conn, fail_work);
	struct rdfs_rdma_req *req, *tmp;
	int i;

	rr_shutdown_qp(c);
	spin_lock_bh(&c->lock);
	list_for_each_entry_safe(req, tmp, &c->txq, txlink)
		list_del_init(&req->txlink);
	while (!list_empty(&c->pulls)) {
		struct rr_pull *p = list_first_entry(&c->pulls, struct rr_pull, link);

		list_del(&p->link);
		if (!p->outstanding) {
			p->req->pulls--;
			kfree(p);
		} else {
			p->planned = true;	/* the drain completed its READs */
		}
	}
	for (i = 0; i < RR_MAX_REQS; i++) {
		req = c->reqs[i];
		if (!req || req->completed)
			continue;
		if (!req->status)
			req->status = -EIO;
		/*
		 * Drained: the queue pair is in the error state for good, so no
		 * key of it can be used again; its READs have all completed.
		 */
		req->final = true;
		req->inv_done = true;
		req->pulls = 0;
		rr_req_maybe_done(req);
	}
	spin_unlock_bh(&c->lock);
	wake_up_all(&c->wait);
}

/* ---------------------------------------------------------------- sending */

static u32 rr_take_credit_locked(struct rr_conn *c, bool explicit_credit)
{
	u32 n = min_t(u32, c->owed, U16_MAX);

	if (c->avail < (explicit_credit ? 1 : 2))
		return U32_MAX;
	c->avail--;
	c->owed -= n;
	return n;
}

static bool rr_may_send_locked(struct rr_conn *c, bool explicit_credit)
{
	return !c->dead && c->free_slots && c->avail >= (explicit_credit ? 1u : 2u);
}

void rr_hdr_encode(u8 *p, u8 type, u16 credits, u32 cookie, u16 ndesc)
{
	struct verbs_hdr vh = {
		.type = type, .credits = credits, .cookie = cookie, .ndesc = ndesc,
	};

	verbs_hdr_encode(&vh, p);
}

void rr_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rr_slot *s = container_of(wc->wr_cqe, struct rr_slot, cqe);
	struct rr_conn *c = s->conn;

	spin_lock_bh(&c->lock);
	s->next_free = c->free_slots;
	c->free_slots = s;
	if (wc->status != IB_WC_SUCCESS)
		rr_fail_locked(c, -EIO, wc->status == IB_WC_WR_FLUSH_ERR ? NULL : "SEND failed");
	else
		rr_flush_locked(c);
	spin_unlock_bh(&c->lock);
}

void rr_noop_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rr_conn *c = cq->cq_context;

	if (wc->status != IB_WC_SUCCESS)
		rr_fail(c, -EIO, wc->status == IB_WC_WR_FLUSH_ERR ? NULL : "registration failed");
}

/*
 * Under c->lock: SEND @len bytes of @s (its header's credits field filled
 * here), after @first (a chain ending in NULL, or NULL). 0 or the connection
 * is failed.
 */
static int rr_post_slot_locked(struct rr_conn *c, struct rr_slot *s, size_t len,
			       struct ib_send_wr *first, bool explicit_credit)
{
	struct ib_sge sge = { .addr = s->dma, .length = len, .lkey = c->pd->local_dma_lkey };
	struct ib_send_wr wr = {
		.wr_cqe = &s->cqe, .sg_list = &sge, .num_sge = 1, .opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	}, *w;
	u32 credits = rr_take_credit_locked(c, explicit_credit);
	int err;

	if (WARN_ON_ONCE(credits == U32_MAX))
		return -EAGAIN;
	c->free_slots = s->next_free;
	put_unaligned_le16(credits, (u8 *)s->buf + 6);
	rr_sync_for_device(c->dev, s->dma, len, DMA_TO_DEVICE);
	if (first) {
		for (w = first; w->next; w = w->next)
			;
		w->next = &wr;
	}
	err = ib_post_send(c->qp, first ? first : &wr, NULL);
	if (err) {
		s->next_free = c->free_slots;
		c->free_slots = s;
		rr_fail_locked(c, -EIO, "ib_post_send failed");
	}
	return err;
}

/* Under c->lock: a control or handshake message of @len bytes at @msg. */
int rr_send_msg_locked(struct rr_conn *c, const void *msg, size_t len, bool explicit_credit)
{
	struct rr_slot *s = c->free_slots;

	if (!rr_may_send_locked(c, explicit_credit) || len > c->slot_size)
		return -EAGAIN;
	memcpy(s->buf, msg, len);
	return rr_post_slot_locked(c, s, len, NULL, explicit_credit);
}

void rr_frame_put(u8 *p, u16 op, u8 flags, u32 tag, u32 body_len, u32 data_len)
{
	struct rdfs_frame_hdr f = {
		.magic = RDFS_FRAME_MAGIC, .version = RDFS_FRAME_VERSION, .flags = flags,
		.opcode = op, .tag = tag, .body_len = body_len, .data_len = data_len,
	};

	rdfs_frame_hdr_encode(&f, p);
}

/*
 * Under c->lock: put @req on the wire: its registration (REG_MR, a fresh key,
 * access for the server exactly as the op needs) chained before its SEND.
 */
static int rr_send_req_locked(struct rr_conn *c, struct rdfs_rdma_req *req)
{
	struct rr_slot *s = c->free_slots;
	struct ib_reg_wr reg = {};
	u8 *p = s->buf, type = VERBS_MSG_EAGER;
	u32 cookie = 0;
	u16 ndesc = 0;

	if (req->mr) {
		reg.wr.opcode = IB_WR_REG_MR;
		reg.wr.wr_cqe = &c->noop_cqe;
		reg.wr.send_flags = IB_SEND_SIGNALED;
		reg.mr = req->mr;
		reg.key = req->mr->rkey;
		/* Remote access: the server may write (a READ's sink) or read (a WRITE's data). */
		reg.access = req->op == RDFS_OP_READ ?
			     IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE :
			     IB_ACCESS_REMOTE_READ;
		ndesc = 1;
		type = req->op == RDFS_OP_READ ? VERBS_MSG_SINK : VERBS_MSG_RNDV;
		if (type == VERBS_MSG_RNDV)
			cookie = req->tag;
	}
	rr_hdr_encode(p, type, 0, cookie, ndesc);
	p += VERBS_HDR_LEN;
	if (ndesc) {
		struct verbs_desc d = {
			.addr = req->mr->iova, .len = req->len, .rkey = req->mr->rkey,
		};

		verbs_desc_put(p, &d);
		p += VERBS_DESC_LEN;
	}
	rr_frame_put(p, req->op, 0, req->tag, req->body_len,
		     req->op == RDFS_OP_WRITE ? req->len : 0);
	p += RDFS_FRAME_HDR_LEN;
	memcpy(p, req->body, req->body_len);
	p += req->body_len;
	return rr_post_slot_locked(c, s, p - (u8 *)s->buf, req->mr ? &reg.wr : NULL, false);
}

/* Under c->lock: DONEs owed, then queued requests, then a credit return if due. */
static void rr_flush_locked(struct rr_conn *c)
{
	struct rdfs_rdma_req *req;
	u8 msg[VERBS_HDR_LEN];

	if (c->dead || !c->slots)
		return;
	while (c->done_n && rr_may_send_locked(c, false)) {
		rr_hdr_encode(msg, VERBS_MSG_DONE, 0, c->done_q[c->done_head], 0);
		c->done_head = (c->done_head + 1) % RR_DONE_RING;
		c->done_n--;
		if (rr_send_msg_locked(c, msg, sizeof(msg), false))
			return;
	}
	while (!list_empty(&c->txq) && rr_may_send_locked(c, false)) {
		req = list_first_entry(&c->txq, struct rdfs_rdma_req, txlink);
		list_del_init(&req->txlink);
		if (rr_send_req_locked(c, req))
			return;
	}
	if (c->owed >= c->threshold && list_empty(&c->txq) && !c->done_n &&
	    rr_may_send_locked(c, true)) {
		rr_hdr_encode(msg, VERBS_MSG_CREDIT, 0, 0, 0);
		rr_send_msg_locked(c, msg, sizeof(msg), true);
	}
}

/* ---------------------------------------------------------------- requests ending */

static void rr_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rdfs_rdma_req *req = container_of(wc->wr_cqe, struct rdfs_rdma_req, inv_cqe);
	struct rr_conn *c = req->conn;

	spin_lock_bh(&c->lock);
	req->inv_done = true;
	if (wc->status != IB_WC_SUCCESS) {
		/* The queue pair is in error: its keys are unusable anyway. */
		rr_fail_locked(c, -EIO, wc->status == IB_WC_WR_FLUSH_ERR ? NULL :
			       "LOCAL_INV failed");
	}
	rr_req_maybe_done(req);
	spin_unlock_bh(&c->lock);
}

/* Under c->lock: the request's last frame came; kill its key before anything else. */
static void rr_req_final_locked(struct rdfs_rdma_req *req)
{
	struct rr_conn *c = req->conn;
	struct ib_send_wr wr = {
		.wr_cqe = &req->inv_cqe, .opcode = IB_WR_LOCAL_INV,
		.send_flags = IB_SEND_SIGNALED,
	};

	req->final = true;
	if (req->mr && !req->inv_posted && !c->dead) {
		req->inv_posted = true;
		wr.ex.invalidate_rkey = req->mr->rkey;
		if (ib_post_send(c->qp, &wr, NULL)) {
			req->inv_posted = false;
			rr_fail_locked(c, -EIO, "posting LOCAL_INV failed");
			return;		/* the drain ends it */
		}
		atomic64_inc(&rdfs_stats.mr_inv);
	}
	rr_req_maybe_done(req);
}

/* Under c->lock: complete @req once nothing of it is left on the wire. */
static void rr_req_maybe_done(struct rdfs_rdma_req *req)
{
	struct rr_conn *c = req->conn;

	if (req->completed || !req->final || req->pulls || (req->mr && !req->inv_done))
		return;
	if (req->mr && !req->inv_posted && !c->drained) {
		/* Failed before its invalidation could be posted: the drain ends it. */
		return;
	}
	req->completed = true;
	c->reqs[req->slot] = NULL;
	complete(&req->done);
	wake_up_all(&c->wait);
}

/* ---------------------------------------------------------------- rendezvous READs (figure 3) */

static void rr_pull_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rr_pull *p = container_of(wc->wr_cqe, struct rr_pull, cqe);
	struct rdfs_rdma_req *req = p->req;
	struct rr_conn *c = req->conn;

	spin_lock_bh(&c->lock);
	c->reads_out--;
	p->outstanding--;
	if (wc->status != IB_WC_SUCCESS) {
		rr_fail_locked(c, -EIO, wc->status == IB_WC_WR_FLUSH_ERR ? NULL :
			       "RDMA READ failed");
		if (!req->status)
			req->status = -EIO;
	}
	if (p->planned && !p->outstanding) {
		if (!c->dead) {
			if (c->done_n == RR_DONE_RING) {
				rr_fail_locked(c, -EPROTO, "too many rendezvous open");
			} else {
				c->done_q[(c->done_head + c->done_n) % RR_DONE_RING] = p->cookie;
				c->done_n++;
				atomic64_add(p->bytes, &rdfs_stats.rdma_read_bytes);
			}
		}
		if (req->pulls)
			req->pulls--;
		kfree(p);
		rr_req_maybe_done(req);
	}
	rr_post_pulls_locked(c);
	rr_flush_locked(c);
	spin_unlock_bh(&c->lock);
}

/*
 * Local pieces for request data [@off, @off + @len): at most RR_MAX_SGE
 * entries of the mapped pages; returns the bytes covered.
 */
static u32 rr_req_sges(struct rr_conn *c, struct rdfs_rdma_req *req, u32 off, u32 len,
		       struct ib_sge *sge, int *nsge)
{
	struct scatterlist *sg;
	u32 pos = 0, covered = 0;
	int i, n = 0;

	for_each_sg(req->sgl, sg, req->nents, i) {
		u32 l = sg_dma_len(sg), skip;

		if (pos + l <= off) {
			pos += l;
			continue;
		}
		skip = off > pos ? off - pos : 0;
		sge[n].addr = sg_dma_address(sg) + skip;
		sge[n].length = min(l - skip, len - covered);
		sge[n].lkey = c->pd->local_dma_lkey;
		covered += sge[n].length;
		pos += l;
		if (++n == c->max_sge || covered == len)
			break;
	}
	*nsge = n;
	return covered;
}

/* Under c->lock: post READs of the open rendezvous, in order, within the budget. */
static void rr_post_pulls_locked(struct rr_conn *c)
{
	struct ib_sge sge[RR_MAX_SGE];
	struct ib_rdma_wr wr;
	struct rr_pull *p;
	u32 want, got;
	int nsge;

	while (!c->dead && (p = list_first_entry_or_null(&c->pulls, struct rr_pull, link))) {
		while (c->reads_out < RR_MAX_READS && p->idx < p->ndesc) {
			struct verbs_desc *d = &p->desc[p->idx];

			want = min(d->len - p->idx_done, RR_READ_CHUNK);
			got = rr_req_sges(c, p->req, p->dst, want, sge, &nsge);
			if (!got) {
				rr_fail_locked(c, -EPROTO, "rendezvous past the request's pages");
				return;
			}
			memset(&wr, 0, sizeof(wr));
			wr.wr.wr_cqe = &p->cqe;
			wr.wr.opcode = IB_WR_RDMA_READ;
			wr.wr.send_flags = IB_SEND_SIGNALED;
			wr.wr.sg_list = sge;
			wr.wr.num_sge = nsge;
			wr.remote_addr = d->addr + p->idx_done;
			wr.rkey = d->rkey;
			if (ib_post_send(c->qp, &wr.wr, NULL)) {
				rr_fail_locked(c, -EIO, "posting an RDMA READ failed");
				return;
			}
			c->reads_out++;
			p->outstanding++;
			p->dst += got;
			p->idx_done += got;
			if (p->idx_done == d->len) {
				p->idx++;
				p->idx_done = 0;
			}
		}
		if (p->idx < p->ndesc)
			return;		/* out of budget: later completions continue */
		p->planned = true;
		list_del(&p->link);
	}
}

/* ---------------------------------------------------------------- receiving */

int rr_post_recv(struct rr_conn *c, struct rr_recv *r)
{
	struct ib_sge sge = { .addr = r->dma, .length = RR_RECV_SIZE,
			      .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr wr = { .wr_cqe = &r->cqe, .sg_list = &sge, .num_sge = 1 };

	rr_sync_for_device(c->dev, r->dma, RR_RECV_SIZE, DMA_FROM_DEVICE);
	return ib_post_recv(c->qp, &wr, NULL);
}

static struct rdfs_rdma_req *rr_req_by_tag(struct rr_conn *c, u32 tag)
{
	int i;

	for (i = 0; i < RR_MAX_REQS; i++)
		if (c->reqs[i] && c->reqs[i]->tag == tag && !c->reqs[i]->completed)
			return c->reqs[i];
	return NULL;
}

/* Inline data of an eager reply: the one path that copies, counted. */
static int rr_copy_to_req(struct rdfs_rdma_req *req, const u8 *data, u32 len)
{
	u32 done = 0;

	if (req->op != RDFS_OP_READ || req->got + len > req->len)
		return -EPROTO;
	while (done < len) {
		u32 pos = req->got + done, n = min_t(u32, len - done, PAGE_SIZE - pos % PAGE_SIZE);

		memcpy_to_page(req->pages[pos / PAGE_SIZE], pos % PAGE_SIZE, data + done, n);
		done += n;
	}
	req->got += len;
	atomic64_add(len, &rdfs_stats.copy_read_bytes);
	return 0;
}

/* The final frame of @req: its status, and for a good one the IoReply. */
static int rr_req_reply(struct rdfs_rdma_req *req, const struct rdfs_frame_hdr *f, const u8 *body)
{
	struct rdfs_ioreply rep;

	if (f->status) {
		req->status = f->status < 0 && f->status > -4096 ? f->status : -EIO;
		pr_warn_ratelimited(RDFS_MSG(1500004) "%s on I/O server %u: %d\n",
				    req->op == RDFS_OP_READ ? "READ" : "WRITE",
				    req->conn->server_id, f->status);
		return 0;
	}
	if (!body || rdfs_ioreply_decode(body, f->body_len, &rep))
		return -EPROTO;
	req->verifier = rep.verifier;
	return 0;
}

/*
 * Under c->lock: one received message of @len bytes at @buf. 0 or -EPROTO
 * (the caller fails the connection). Mirrors verbs_msg_parse()'s checks.
 */
static int rr_handle_msg(struct rr_conn *c, const u8 *buf, u32 len)
{
	struct verbs_msg m;
	struct rdfs_frame_hdr f;
	struct rdfs_rdma_req *req;
	const u8 *body;
	u32 i;
	int err;

	/* The layout, lengths and descriptors: wire/rdfs_verbs.h, as user space checks them. */
	if (verbs_msg_parse(buf, len, RDFS_MAX_BODY, RDFS_MAX_DATA, &m))
		return -EPROTO;
	if (m.vh.credits > c->peer_credits - c->avail)
		return -EPROTO;		/* more returned than we spent */
	c->avail += m.vh.credits;

	switch (m.vh.type) {
	case VERBS_MSG_CREDIT:
		return 0;
	case VERBS_MSG_DONE:
		/*
		 * The server has read a WRITE's pages (cookie = its tag). Nothing
		 * to do: their key dies at the reply, which comes after.
		 */
		return 0;
	case VERBS_MSG_EAGER:
	case VERBS_MSG_PLACED:
		break;
	case VERBS_MSG_RNDV:
		/* Only data is ever remote in a reply to us (VERBS_F_BODY_REMOTE: never). */
		if (m.vh.flags)
			return -EPROTO;
		break;
	default:
		return -EPROTO;		/* SINK: the server never sends us requests */
	}
	f = m.fh;
	body = m.body;

	if (!c->authed) {
		/* The handshake: one frame at a time, no data. */
		if (m.vh.type != VERBS_MSG_EAGER || f.data_len || f.body_len > sizeof(c->hs_body) ||
		    (f.flags & RDFS_FRAME_MORE) || c->hs_ready)
			return -EPROTO;
		c->hs_frame = f;
		if (f.body_len)
			memcpy(c->hs_body, body, f.body_len);
		c->hs_ready = true;
		wake_up_all(&c->wait);
		return 0;
	}
	/* The server never sends us requests (but its challenge, above). */
	req = f.flags & RDFS_FRAME_REPLY ? rr_req_by_tag(c, f.tag) : NULL;
	if (!req || req->final)
		return -EPROTO;

	if (m.vh.type == VERBS_MSG_PLACED) {
		struct verbs_desc d;

		/* RC ordering: the server's WRITEs of these bytes landed before this SEND. */
		verbs_desc_get(m.desc, &d);
		if (!req->sink || d.addr != req->got || d.len > req->len - req->got)
			return -EPROTO;
		req->got += d.len;
		atomic64_add(d.len, &rdfs_stats.rdma_read_bytes);
	} else if (m.vh.type == VERBS_MSG_RNDV) {
		struct rr_pull *pl;

		if (req->op != RDFS_OP_READ || f.data_len > req->len - req->got)
			return -EPROTO;
		pl = kzalloc(struct_size(pl, desc, m.vh.ndesc), GFP_ATOMIC);
		if (!pl)
			return -ENOMEM;
		/* verbs_msg_parse() checked them: none empty, summing to f.data_len */
		for (i = 0; i < m.vh.ndesc; i++)
			verbs_desc_get(m.desc + i * VERBS_DESC_LEN, &pl->desc[i]);
		pl->cqe.done = rr_pull_done;
		pl->req = req;
		pl->cookie = m.vh.cookie;
		pl->ndesc = m.vh.ndesc;
		pl->dst = req->got;
		pl->bytes = f.data_len;
		req->got += f.data_len;
		req->pulls++;
		list_add_tail(&pl->link, &c->pulls);
	} else if (f.data_len) {
		err = rr_copy_to_req(req, m.data, f.data_len);
		if (err)
			return err;
	}
	if (f.flags & RDFS_FRAME_MORE)
		return 0;
	err = rr_req_reply(req, &f, body);
	if (err)
		return err;
	if (!req->status && req->op == RDFS_OP_READ && req->got != req->len)
		return -EPROTO;
	rr_req_final_locked(req);
	return 0;
}

void rr_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rr_recv *r = container_of(wc->wr_cqe, struct rr_recv, cqe);
	struct rr_conn *c = r->conn;
	int err;

	spin_lock_bh(&c->lock);
	if (wc->status != IB_WC_SUCCESS) {
		rr_fail_locked(c, -EIO, wc->status == IB_WC_WR_FLUSH_ERR ? NULL : "receive failed");
		goto out;
	}
	if (c->dead)
		goto out;
	rr_sync_for_cpu(c->dev, r->dma, RR_RECV_SIZE, DMA_FROM_DEVICE);
	err = rr_handle_msg(c, r->buf, wc->byte_len);
	if (err) {
		rr_fail_locked(c, err, err == -ENOMEM ? "out of memory" : "protocol error");
		goto out;
	}
	/* Consumed (nothing points into the buffer any more): it is the server's again. */
	if (rr_post_recv(c, r)) {
		rr_fail_locked(c, -EIO, "ib_post_recv failed");
		goto out;
	}
	c->owed++;
	rr_post_pulls_locked(c);
	rr_flush_locked(c);
out:
	spin_unlock_bh(&c->lock);
}

/* ---------------------------------------------------------------- requests */

static bool rr_slot_free_peek(struct rr_conn *c)
{
	int i;

	for (i = 0; i < RR_MAX_REQS; i++)
		if (!READ_ONCE(c->reqs[i]))
			return true;
	return false;
}

/* Under c->lock: whether another request in flight has @req's tag. */
static bool rr_req_tag_used(struct rr_conn *c, struct rdfs_rdma_req *req)
{
	int i;

	for (i = 0; i < RR_MAX_REQS; i++)
		if (c->reqs[i] && c->reqs[i] != req && c->reqs[i]->tag == req->tag)
			return true;
	return false;
}

/* Under c->lock: a free request slot, or -1. */
static int rr_slot_take_locked(struct rr_conn *c, struct rdfs_rdma_req *req)
{
	int i;

	for (i = 0; i < RR_MAX_REQS; i++) {
		if (!c->reqs[i]) {
			c->reqs[i] = req;
			return i;
		}
	}
	return -1;
}

static void rr_req_free(struct rdfs_rdma_req *req)
{
	struct rr_conn *c = req->conn;

	/* A registration never invalidated died with its drained queue pair. */
	if (req->mr_counted && !req->inv_posted)
		atomic64_inc(&rdfs_stats.mr_inv);
	if (req->nents)
		ib_dma_unmap_sg(c->dev, req->sgl, req->npages, req->dir);
	kfree(req->sgl);
	kfree(req);
	atomic64_dec(&rdfs_stats.rdma_reqs);
	rr_conn_put(c);
}

int rdfs_rdma_start(struct rdfs_sb_info *sbi, u16 op, u32 server_id, const u8 *cap,
		    u32 cap_len, u64 first_block, struct page **pages, u32 head, u32 len,
		    bool stable, struct rdfs_rdma_req **out)
{
	struct rdfs_ioreq r = {
		.cap = cap, .cap_len = cap_len, .first_block = first_block,
		.block_count = DIV_ROUND_UP(head + len, RDFS_BLOCK_SIZE), .head = head,
		.length = len, .stable = op == RDFS_OP_WRITE && stable,
	};
	struct rdfs_rdma_req *req;
	struct rr_conn *c;
	int i, n, err;
	long left;

	/* Only a WRITE may be a byte range: a partial page's dirty bytes. */
	if (server_id >= RDFS_MAX_SERVERS || !len || head >= PAGE_SIZE ||
	    (op == RDFS_OP_READ && (head || len % PAGE_SIZE)) ||
	    head + len > RR_MAX_PAGES * PAGE_SIZE || rdfs_ioreq_size(&r) > sizeof(req->body) ||
	    VERBS_HDR_LEN + VERBS_DESC_LEN + RDFS_FRAME_HDR_LEN + rdfs_ioreq_size(&r) >
	    VERBS_MIN_RECV_SIZE)
		return -EIO;
	c = rr_conn_get(sbi, server_id);
	if (IS_ERR(c))
		return -EIO;
	req = kzalloc(sizeof(*req), GFP_NOFS);
	if (!req) {
		rr_conn_put(c);
		return -ENOMEM;
	}
	atomic64_inc(&rdfs_stats.rdma_reqs);
	req->conn = c;
	req->op = op;
	req->pages = pages;
	req->len = len;
	req->npages = DIV_ROUND_UP(head + len, PAGE_SIZE);
	req->sink = op == RDFS_OP_READ && !sbi->rdma->read_mode;
	req->dir = op == RDFS_OP_READ ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	req->inv_cqe.done = rr_inv_done;
	req->body_len = rdfs_ioreq_encode(&r, req->body);
	INIT_LIST_HEAD(&req->txlink);
	init_completion(&req->done);

	/*
	 * The bytes, mapped for the device for this request only: the first
	 * page from @head, the last up to the end of the range (a registration
	 * may start and end inside a page; the pages between are whole).
	 */
	req->sgl = kmalloc_array(req->npages, sizeof(*req->sgl), GFP_NOFS);
	if (!req->sgl) {
		err = -ENOMEM;
		goto fail;
	}
	sg_init_table(req->sgl, req->npages);
	for (i = 0; i < req->npages; i++) {
		u32 s = i ? 0 : head;
		u32 e = min_t(u32, PAGE_SIZE, head + len - i * PAGE_SIZE);

		sg_set_page(&req->sgl[i], pages[i], e - s, s);
	}
	req->nents = ib_dma_map_sg(c->dev, req->sgl, req->npages, req->dir);
	if (!req->nents) {
		err = -EIO;
		goto fail;
	}

	/* A request slot (and with it an MR), waiting for one at most RR_IO_TIMEOUT. */
	spin_lock_bh(&c->lock);
	left = RR_IO_TIMEOUT;
	while (!c->dead && (req->slot = rr_slot_take_locked(c, req)) < 0 && left) {
		spin_unlock_bh(&c->lock);
		left = wait_event_timeout(c->wait, READ_ONCE(c->dead) ||
					  rr_slot_free_peek(c), left);
		spin_lock_bh(&c->lock);
	}
	if (c->dead || req->slot < 0) {
		spin_unlock_bh(&c->lock);
		req->slot = -1;
		err = -EIO;
		goto fail;
	}
	do {
		req->tag = ++c->next_tag;
	} while (!req->tag || rr_req_tag_used(c, req));
	if (req->sink || op == RDFS_OP_WRITE)
		req->mr = c->mrs[req->slot];
	spin_unlock_bh(&c->lock);

	if (req->mr) {
		/* A fresh key: no earlier request's key can reach these pages. */
		ib_update_fast_reg_key(req->mr, ib_inc_rkey(req->mr->rkey) & 0xff);
		n = ib_map_mr_sg(req->mr, req->sgl, req->nents, NULL, PAGE_SIZE);
		if (n != req->nents) {
			err = -EIO;
			goto fail_slot;
		}
		atomic64_inc(&rdfs_stats.mr_reg);
		req->mr_counted = true;
	}

	spin_lock_bh(&c->lock);
	if (c->dead) {
		spin_unlock_bh(&c->lock);
		err = -EIO;
		goto fail_slot;
	}
	list_add_tail(&req->txlink, &c->txq);
	rr_flush_locked(c);
	spin_unlock_bh(&c->lock);
	if (op == RDFS_OP_WRITE)
		atomic64_add(len, &rdfs_stats.rdma_write_bytes);
	*out = req;
	return 0;

fail_slot:
	spin_lock_bh(&c->lock);
	if (c->reqs[req->slot] == req)	/* the failure may have ended it already */
		c->reqs[req->slot] = NULL;
	spin_unlock_bh(&c->lock);
	wake_up_all(&c->wait);
fail:
	rr_req_free(req);
	return err;
}

int rdfs_rdma_finish(struct rdfs_rdma_req *req, u64 *verifier)
{
	struct rr_conn *c = req->conn;
	int err;

	if (!wait_for_completion_timeout(&req->done, RR_IO_TIMEOUT)) {
		rr_fail(c, -ETIMEDOUT, "no reply in time");
		/* The drain completes it, its pages out of the device's reach. */
		wait_for_completion(&req->done);
	}
	err = req->status;
	if (err == -ECONNRESET || err == -ETIMEDOUT)
		err = -EIO;
	*verifier = req->verifier;
	rr_req_free(req);
	return err;
}

int rdfs_rdma_init(struct rdfs_sb_info *sbi, bool read_mode)
{
	struct rdfs_rdma *r;
	int i;

	if (PAGE_SIZE != RDFS_BLOCK_SIZE)
		return -EOPNOTSUPP;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	r->read_mode = read_mode;
	for (i = 0; i < RDFS_MAX_SERVERS; i++)
		mutex_init(&r->lock[i]);
	sbi->rdma = r;
	return 0;
}

void rdfs_rdma_exit(struct rdfs_sb_info *sbi)
{
	struct rdfs_rdma *r = sbi->rdma;
	int i;

	if (!r)
		return;
	for (i = 0; i < RDFS_MAX_SERVERS; i++) {
		mutex_lock(&r->lock[i]);
		if (r->conns[i]) {
			rr_fail(r->conns[i], -ESHUTDOWN, NULL);
			rr_conn_put(r->conns[i]);
			r->conns[i] = NULL;
		}
		mutex_unlock(&r->lock[i]);
	}
	kfree(r);
	sbi->rdma = NULL;
}
