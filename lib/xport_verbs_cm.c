// SPDX-License-Identifier: MIT
/*
 * xport_verbs_cm.c - connection management of the verbs module: devices,
 * settings, rdma_cm connect/listen/accept, queue pair setup and teardown, and
 * xport_mem_register().
 *
 * Connect (caller's thread, bounded by its timeout): resolve address, resolve
 * route, create the QP and post every receive, rdma_connect() with our
 * parameters (credits, receive size) as private data, ESTABLISHED carries the
 * peer's. Accept (progress thread): CONNECT_REQUEST -> the id moves to an event
 * channel of its own -> QP, receives, rdma_accept(); ESTABLISHED -> the
 * connection is registered with the context and XPORT_EV_ACCEPT reported.
 * Its completion channel joins the epoll set only then, so the application
 * sees ACCEPT before any message and can set its receive limits.
 *
 * Teardown never waits for the peer: rdma_disconnect() only starts the
 * handshake (with rxe, the side that calls it may never see DISCONNECTED),
 * then the QP is destroyed, which stops all DMA to and from our memory, and
 * only then is that memory freed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "xport_verbs.h"

#define VERBS_LISTEN_BACKLOG	1024
/* Each of address and route resolution may take this long, within the caller's timeout. */
#define VERBS_RESOLVE_MS	2000
/* Send queue: slots for SENDs plus READs plus window binds, checked before posting. */
#define VERBS_SQ_DEPTH		(VERBS_MAX_CREDITS + 4 + VERBS_MAX_READS + 2 * VERBS_MAX_DESC)

struct verbs_decl_set verbs_declared = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The devices this process uses: what the process is, never freed. */
static struct {
	pthread_mutex_t lock;
	struct verbs_dev *head;
} verbs_devs = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ------------------------------------------------------------------ devices, settings */

static int cache_reg(void *arg, uintptr_t start, size_t len, void **handle)
{
	struct verbs_dev *d = arg;
	struct ibv_mr *mr;

	/* No remote access of its own: peers only ever see windows bound per send. */
	mr = ibv_reg_mr(d->pd, (void *)start, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!mr)
		return errno ? -errno : -ENOMEM;
	atomic_fetch_add(&d->reg_mrs, 1);
	*handle = mr;
	return 0;
}

static void cache_dereg(void *arg, void *handle)
{
	ibv_dereg_mr(handle);
}

static const struct verbs_reg_ops cache_ops = { .reg = cache_reg, .dereg = cache_dereg };

static uint32_t env_u32(const char *name, uint32_t def, uint32_t lo, uint32_t hi)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return def;
	v = strtoul(s, &end, 0);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	if (*end || v < lo || v > hi) {
		log_warn(1000037, "%s=%s: not a number in %u..%u; using %u", name, s, lo, hi, def);
		return def;
	}
	return (uint32_t)v;
}

static void settings_read(struct verbs_settings *s)
{
	s->recv_size = env_u32("RDFS_VERBS_RECV_SIZE", VERBS_DEFAULT_RECV_SIZE,
			       VERBS_MIN_RECV_SIZE, VERBS_MAX_RECV_SIZE);
	s->credits = env_u32("RDFS_VERBS_CREDITS", VERBS_DEFAULT_CREDITS, VERBS_MIN_CREDITS,
			     VERBS_MAX_CREDITS);
}

static struct verbs_dev *dev_get(struct ibv_context *verbs)
{
	struct ibv_device_attr attr;
	struct verbs_dev *d;

	pthread_mutex_lock(&verbs_devs.lock);
	for (d = verbs_devs.head; d; d = d->next)
		if (d->verbs == verbs)
			goto out;
	d = calloc(1, sizeof(*d));
	if (!d)
		goto out;
	d->verbs = verbs;
	d->pd = ibv_alloc_pd(verbs);
	if (!d->pd || ibv_query_device(verbs, &attr)) {
		log_warn(1000038,
			 "verbs: cannot set up device %s", ibv_get_device_name(verbs->device));
		if (d->pd)
			ibv_dealloc_pd(d->pd);
		free(d);
		d = NULL;
		goto out;
	}
	d->mw2 = (attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) &&
		 env_u32("RDFS_VERBS_WINDOWS", 1, 0, 1);
	d->max_rd_atom = (uint32_t)(attr.max_qp_rd_atom < attr.max_qp_init_rd_atom ?
				    attr.max_qp_rd_atom : attr.max_qp_init_rd_atom);
	if (d->max_rd_atom > VERBS_MAX_READS)
		d->max_rd_atom = VERBS_MAX_READS;
	if (d->max_rd_atom == 0)
		d->max_rd_atom = 1;
	verbs_regcache_init(&d->cache, &cache_ops, d, VERBS_REGCACHE_BYTES);
	d->next = verbs_devs.head;
	verbs_devs.head = d;
	log_debug(1000039, "verbs: device %s, memory windows %s, %u READs per QP",
		  ibv_get_device_name(verbs->device), d->mw2 ? "type 2" : "off", d->max_rd_atom);
out:
	pthread_mutex_unlock(&verbs_devs.lock);
	return d;
}

int xport_mem_register(void *addr, size_t len)
{
	return verbs_decl_add(&verbs_declared, addr, len);
}

int xport_mem_deregister(void *addr, size_t len)
{
	struct verbs_range r = { (uintptr_t)addr, len };
	struct verbs_dev *d;
	int err = verbs_decl_remove(&verbs_declared, addr, len);

	if (err)
		return err;
	pthread_mutex_lock(&verbs_devs.lock);
	for (d = verbs_devs.head; d; d = d->next)
		verbs_regcache_invalidate(&d->cache, &r);
	pthread_mutex_unlock(&verbs_devs.lock);
	return 0;
}

void verbs_stats_get(struct verbs_stats *out)
{
	struct verbs_dev *d;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&verbs_devs.lock);
	for (d = verbs_devs.head; d; d = d->next) {
		out->windows += atomic_load(&d->windows);
		out->send_mrs += atomic_load(&d->send_mrs);
		out->sinks += atomic_load(&d->sinks);
		out->sink_windows += atomic_load(&d->sink_windows);
		out->sink_mrs += atomic_load(&d->sink_mrs);
		out->recv_mrs += atomic_load(&d->recv_mrs);
		out->reg_mrs += atomic_load(&d->reg_mrs);
		pthread_mutex_lock(&d->cache.lock);
		out->cache_hits += d->cache.hits;
		out->cache_misses += d->cache.misses;
		out->cache_evictions += d->cache.evictions;
		pthread_mutex_unlock(&d->cache.lock);
	}
	pthread_mutex_unlock(&verbs_devs.lock);
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

static int neg_errno(int fallback)
{
	return errno > 0 ? -errno : fallback;
}

static void sockaddr_to_url(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "rdma://%s:%u", ip, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "rdma://[%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "rdma://?");
	}
}

/* ------------------------------------------------------------------ queue pairs */

static struct verbs_conn *conn_alloc(const struct verbs_settings *set)
{
	struct verbs_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	c->set = *set;
	c->cm_poll.fd = -1;
	c->cq_poll.fd = -1;
	c->bind_cqe.done = verbs_bind_done;
	c->write_cqe.done = verbs_write_done;
	snprintf(c->base.peer, sizeof(c->base.peer), "rdma://?");
	return c;
}

/* CQ, completion channel, QP, and every receive buffer posted. */
static int setup_qp(struct verbs_conn *c)
{
	struct ibv_context *verbs = c->id->verbs;
	struct ibv_qp_init_attr qa;
	struct ibv_device_attr attr;
	uint32_t i, cqe;
	int err;

	c->dev = dev_get(verbs);
	if (!c->dev || ibv_query_device(verbs, &attr))
		return -ENODEV;
	c->sq_depth = VERBS_SQ_DEPTH;
	if ((int)c->sq_depth > attr.max_qp_wr)
		c->sq_depth = (uint32_t)attr.max_qp_wr;
	cqe = c->sq_depth + c->set.credits;
	if ((int)cqe > attr.max_cqe)
		return -ENOMEM;
	c->cch = ibv_create_comp_channel(verbs);
	if (!c->cch)
		return neg_errno(-ENOMEM);
	err = set_nonblock(c->cch->fd);
	if (err)
		return err;
	c->cq = ibv_create_cq(verbs, (int)cqe, c, c->cch, 0);
	if (!c->cq)
		return neg_errno(-ENOMEM);
	if (ibv_req_notify_cq(c->cq, 0))
		return -EIO;

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = c->sq_depth;
	qa.cap.max_recv_wr = c->set.credits;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->dev->pd, &qa))
		return neg_errno(-ENOMEM);

	if (posix_memalign((void **)&c->recv_mem, RDFS_BLOCK_SIZE,
			   (size_t)c->set.credits * c->set.recv_size))
		return -ENOMEM;
	c->recv_mr = ibv_reg_mr(c->dev->pd, c->recv_mem,
				(size_t)c->set.credits * c->set.recv_size, IBV_ACCESS_LOCAL_WRITE);
	if (!c->recv_mr)
		return neg_errno(-ENOMEM);
	c->recvs = calloc(c->set.credits, sizeof(*c->recvs));
	if (!c->recvs)
		return -ENOMEM;
	for (i = 0; i < c->set.credits; i++) {
		struct verbs_recv *r = &c->recvs[i];
		struct ibv_sge sge = {
			.addr = (uintptr_t)(c->recv_mem + (size_t)i * c->set.recv_size),
			.length = c->set.recv_size, .lkey = c->recv_mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = (uintptr_t)&r->cqe, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;

		r->cqe.done = verbs_recv_done;
		r->buf = c->recv_mem + (size_t)i * c->set.recv_size;
		err = ibv_post_recv(c->id->qp, &wr, &bad);
		if (err)
			return -err;
	}
	return 0;
}

/* Send slots sized for the peer's receive buffers, credits, rendezvous table. */
static int setup_send(struct verbs_conn *c, uint32_t reads)
{
	size_t size = c->peer.recv_size;
	uint32_t i;
	int err;

	c->nslots = c->peer.credits + 4u;
	if (posix_memalign((void **)&c->send_mem, RDFS_BLOCK_SIZE, (size_t)c->nslots * size))
		return -ENOMEM;
	c->send_mr = ibv_reg_mr(c->dev->pd, c->send_mem, (size_t)c->nslots * size, 0);
	if (!c->send_mr)
		return neg_errno(-ENOMEM);
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	if (!c->slots)
		return -ENOMEM;
	for (i = 0; i < c->nslots; i++) {
		c->slots[i].cqe.done = verbs_send_done;
		c->slots[i].buf = c->send_mem + (size_t)i * size;
		c->slots[i].next_free = c->free_slots;
		c->free_slots = &c->slots[i];
	}
	err = verbs_rndv_table_init(&c->rndv, VERBS_MAX_RNDV);
	if (err)
		return err;
	verbs_credit_init(&c->cr, c->peer.credits, c->set.credits);
	c->reads_max = reads ? reads : 1;
	return 0;
}

static void conn_param_fill(struct verbs_conn *c, struct rdma_conn_param *cp, uint8_t *priv)
{
	struct verbs_conn_params ours = {
		.credits = (uint16_t)c->set.credits, .recv_size = c->set.recv_size,
	};

	verbs_params_encode(&ours, priv);
	memset(cp, 0, sizeof(*cp));
	cp->private_data = priv;
	cp->private_data_len = VERBS_PRIV_LEN;
	cp->responder_resources = (uint8_t)c->dev->max_rd_atom;
	cp->initiator_depth = (uint8_t)c->dev->max_rd_atom;
	cp->retry_count = 7;
	/* Credits keep receives posted ahead of every SEND; RNR retries are a safety net. */
	cp->rnr_retry_count = 7;
}

/* Free everything; the connection was never registered or is reaped. Progress thread. */
static void conn_teardown(struct verbs_conn *c)
{
	if (c->cm_polled)
		xport_poll_del(c->base.ctx, &c->cm_poll);
	if (c->cq_polled)
		xport_poll_del(c->base.ctx, &c->cq_poll);
	c->cm_polled = c->cq_polled = 0;
	if (c->id && c->connected)
		rdma_disconnect(c->id);		/* starts the handshake; never waited for */
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);		/* no DMA into our memory after this */
	pthread_mutex_lock(&c->lock);
	verbs_drop_all_locked(c, -ECANCELED);
	verbs_free_rx_all(c);
	pthread_mutex_unlock(&c->lock);
	if (c->recv_mr)
		ibv_dereg_mr(c->recv_mr);
	if (c->send_mr)
		ibv_dereg_mr(c->send_mr);
	c->recv_mr = c->send_mr = NULL;
	free(c->recv_mem);
	free(c->send_mem);
	free(c->recvs);
	free(c->slots);
	c->recv_mem = c->send_mem = NULL;
	c->recvs = NULL;
	c->slots = NULL;
	c->free_slots = NULL;
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cch)
		ibv_destroy_comp_channel(c->cch);
	c->cq = NULL;
	c->cch = NULL;
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ech)
		rdma_destroy_event_channel(c->ech);
	c->id = NULL;
	c->ech = NULL;
	verbs_rndv_table_fini(&c->rndv);
	free(c->done_q);
	c->done_q = NULL;
}

static void conn_destroy(struct verbs_conn *c)
{
	conn_teardown(c);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void conn_cm_handler(struct xport_poll *p, uint32_t events);

/* Join the context: register, and put both channels in its epoll set. */
static int conn_register(struct verbs_conn *c, struct xport_ctx *ctx)
{
	int err;

	xport_conn_init(&c->base, &xport_verbs_ops, ctx);
	c->registered = 1;
	if (!c->cm_polled) {
		c->cm_poll.fd = c->ech->fd;
		c->cm_poll.handler = conn_cm_handler;
		err = xport_poll_add(ctx, &c->cm_poll, EPOLLIN);
		if (err)
			goto fail;
		c->cm_polled = 1;
	}
	c->cq_poll.fd = c->cch->fd;
	c->cq_poll.handler = verbs_cq_handler;
	err = xport_poll_add(ctx, &c->cq_poll, EPOLLIN);
	if (err)
		goto fail;
	/* Level-triggered: completions that came before this are reported now. */
	c->cq_polled = 1;
	return 0;
fail:
	/* Not pollable: report it closed right away; the caller still gets it. */
	verbs_fail(c, -EIO);
	return 0;
}

/* ------------------------------------------------------------------ events */

static void conn_cm_event(struct verbs_conn *c, enum rdma_cm_event_type type, int status)
{
	switch (type) {
	case RDMA_CM_EVENT_DISCONNECTED:
		verbs_fail(c, 0);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		verbs_fail(c, -ENODEV);
		break;
	default:
		log_debug(1000040, "%s: %s", c->base.peer, rdma_event_str(type));
		break;
	}
}

/* An accepted connection's handshake ended: report it, or drop it silently. */
static void pending_event(struct verbs_conn *c, enum rdma_cm_event_type type)
{
	struct verbs_listener *l = c->pending;
	struct verbs_conn **pp;
	struct xport_event ev = { .type = XPORT_EV_ACCEPT, .conn = &c->base };

	for (pp = &l->pending; *pp; pp = &(*pp)->pend_next) {
		if (*pp == c) {
			*pp = c->pend_next;
			break;
		}
	}
	c->pending = NULL;
	if (type != RDMA_CM_EVENT_ESTABLISHED) {
		log_debug(1000041, "%s: connection not established: %s", c->base.peer,
			  rdma_event_str(type));
		conn_destroy(c);
		return;
	}
	c->connected = 1;
	conn_register(c, l->base.ctx);
	xport_cq_push(l->base.ctx, &ev);
}

static void conn_cm_handler(struct xport_poll *p, uint32_t events)
{
	struct verbs_conn *c = (struct verbs_conn *)((uint8_t *)p -
						     offsetof(struct verbs_conn, cm_poll));
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;
	int status;

	while (c->ech && rdma_get_cm_event(c->ech, &ev) == 0) {
		type = ev->event;
		status = ev->status;
		rdma_ack_cm_event(ev);
		if (c->pending) {
			if (type == RDMA_CM_EVENT_ESTABLISHED || type == RDMA_CM_EVENT_REJECTED ||
			    type == RDMA_CM_EVENT_CONNECT_ERROR || type == RDMA_CM_EVENT_UNREACHABLE ||
			    type == RDMA_CM_EVENT_DISCONNECTED ||
			    type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
				pending_event(c, type);
				return;		/* @c may be gone */
			}
			continue;
		}
		conn_cm_event(c, type, status);
	}
}

/* A connection request on @l: set up everything, then rdma_accept(). */
static void accept_one(struct verbs_listener *l, struct rdma_cm_id *id,
		       const struct rdma_conn_param *req, const uint8_t *priv, size_t priv_len)
{
	struct verbs_conn *c = conn_alloc(&l->set);
	struct rdma_conn_param cp;
	uint8_t mine[VERBS_PRIV_LEN];
	uint32_t reads;
	int err = -ENOMEM;

	if (!c)
		goto reject_raw;
	c->base.ctx = l->base.ctx;
	sockaddr_to_url(rdma_get_peer_addr(id), c->base.peer, sizeof(c->base.peer));
	err = verbs_params_decode(priv, priv_len, &c->peer);
	if (err) {
		log_warn(1000042, "%s: refusing a connection that is not rdfs's", c->base.peer);
		goto reject_raw;
	}
	c->ech = rdma_create_event_channel();
	if (!c->ech || set_nonblock(c->ech->fd) || rdma_migrate_id(id, c->ech)) {
		err = neg_errno(-ENOMEM);
		goto reject_raw;
	}
	c->id = id;
	id->context = c;
	err = setup_qp(c);
	if (err)
		goto reject;
	reads = c->dev->max_rd_atom < req->responder_resources ?
		c->dev->max_rd_atom : req->responder_resources;
	err = setup_send(c, reads);
	if (err)
		goto reject;
	c->cm_poll.fd = c->ech->fd;
	c->cm_poll.handler = conn_cm_handler;
	err = xport_poll_add(l->base.ctx, &c->cm_poll, EPOLLIN);
	if (err)
		goto reject;
	c->cm_polled = 1;
	conn_param_fill(c, &cp, mine);
	cp.initiator_depth = (uint8_t)reads;
	cp.responder_resources = (uint8_t)(c->dev->max_rd_atom < req->initiator_depth ?
					   c->dev->max_rd_atom : req->initiator_depth);
	if (rdma_accept(id, &cp)) {
		err = neg_errno(-EIO);
		goto reject;
	}
	c->pending = l;
	c->pend_next = l->pending;
	l->pending = c;
	return;

reject:
	rdma_reject(id, NULL, 0);
	log_warn(1000043, "%s: cannot accept: %s", c->base.peer, strerror(-err));
	conn_destroy(c);	/* destroys @id with it */
	return;
reject_raw:
	rdma_reject(id, NULL, 0);
	if (c && c->id != id)
		rdma_destroy_id(id);
	if (c)
		conn_destroy(c);
	else
		rdma_destroy_id(id);
}

static void listen_handler(struct xport_poll *p, uint32_t events)
{
	struct verbs_listener *l =
		(struct verbs_listener *)((uint8_t *)p - offsetof(struct verbs_listener, poll));
	struct rdma_cm_event *ev;
	struct rdma_conn_param req;
	uint8_t priv[256];
	size_t priv_len;
	struct rdma_cm_id *id;

	while (rdma_get_cm_event(l->ech, &ev) == 0) {
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			log_debug(1000044, "%s: %s", l->base.url, rdma_event_str(ev->event));
			rdma_ack_cm_event(ev);
			continue;
		}
		id = ev->id;
		req = ev->param.conn;
		priv_len = req.private_data_len;	/* a u8: fits priv */
		if (req.private_data)
			memcpy(priv, req.private_data, priv_len);
		else
			priv_len = 0;
		rdma_ack_cm_event(ev);
		accept_one(l, id, &req, priv, priv_len);
	}
}

/* ------------------------------------------------------------------ connect, listen */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The next CM event of @c's channel by @deadline (0: none). Copies what we need. */
static int wait_event(struct verbs_conn *c, int64_t deadline, enum rdma_cm_event_type *type,
		      int *status, struct rdma_conn_param *param, uint8_t *priv, size_t *priv_len)
{
	struct rdma_cm_event *ev;
	struct pollfd pfd = { .fd = c->ech->fd, .events = POLLIN };
	int left, n;

	for (;;) {
		if (rdma_get_cm_event(c->ech, &ev) == 0)
			break;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return neg_errno(-EIO);
		left = -1;
		if (deadline) {
			int64_t l = deadline - mono_ms();

			if (l <= 0)
				return -ETIMEDOUT;
			left = l > 0x7fffffff ? 0x7fffffff : (int)l;
		}
		n = poll(&pfd, 1, left);
		if (n < 0 && errno != EINTR)
			return -errno;
	}
	*type = ev->event;
	*status = ev->status;
	*param = ev->param.conn;
	*priv_len = 0;
	if (ev->param.conn.private_data && ev->param.conn.private_data_len) {
		*priv_len = ev->param.conn.private_data_len;	/* a u8: fits priv[256] */
		memcpy(priv, ev->param.conn.private_data, *priv_len);
	}
	rdma_ack_cm_event(ev);
	return 0;
}

static int step_ms(int64_t deadline)
{
	int64_t l = deadline ? deadline - mono_ms() : VERBS_RESOLVE_MS;

	if (l > VERBS_RESOLVE_MS)
		l = VERBS_RESOLVE_MS;
	return l > 0 ? (int)l : 1;
}

static int resolve(const char *hostport, int passive, struct sockaddr_storage *ss, char *host,
		   size_t hostlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	char port[16];
	const char *node;
	int err;

	if (xport_split_hostport(hostport, host, hostlen, port, sizeof(port)))
		return -EINVAL;
	if (passive)
		hints.ai_flags = AI_PASSIVE;
	node = host[0] && strcmp(host, "*") != 0 ? host : NULL;
	if (!passive && !node)
		return -EINVAL;
	err = getaddrinfo(node, port, &hints, &res);
	if (err)
		return err == EAI_SYSTEM ? -errno : (passive ? -EADDRNOTAVAIL : -EHOSTUNREACH);
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

static int verbs_connect(struct xport_ctx *ctx, const char *hostport, int timeout_ms,
			 struct xport_conn **out)
{
	int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : 0;
	struct sockaddr_storage ss;
	struct verbs_settings set;
	struct rdma_conn_param cp, param = { 0 };
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	uint8_t mine[VERBS_PRIV_LEN], priv[256];
	size_t priv_len = 0;
	struct verbs_conn *c;
	char host[256];
	uint32_t reads;
	int err, status = 0;

	if (deadline == 0 && timeout_ms >= 0)
		deadline = 1;
	err = resolve(hostport, 0, &ss, host, sizeof(host));
	if (err)
		return err;
	settings_read(&set);
	c = conn_alloc(&set);
	if (!c)
		return -ENOMEM;
	c->base.ctx = ctx;
	sockaddr_to_url((struct sockaddr *)&ss, c->base.peer, sizeof(c->base.peer));
	c->ech = rdma_create_event_channel();
	if (!c->ech) {
		err = neg_errno(-ENODEV);
		goto fail;
	}
	err = set_nonblock(c->ech->fd);
	if (err)
		goto fail;
	if (rdma_create_id(c->ech, &c->id, c, RDMA_PS_TCP)) {
		err = neg_errno(-ENODEV);
		goto fail;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&ss, step_ms(deadline))) {
		err = neg_errno(-EHOSTUNREACH);
		goto fail;
	}
	for (;;) {
		err = wait_event(c, deadline, &type, &status, &param, priv, &priv_len);
		if (err)
			goto fail;
		switch (type) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(c->id, step_ms(deadline))) {
				err = neg_errno(-EHOSTUNREACH);
				goto fail;
			}
			continue;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			err = setup_qp(c);
			if (err)
				goto fail;
			conn_param_fill(c, &cp, mine);
			if (rdma_connect(c->id, &cp)) {
				err = neg_errno(-ECONNREFUSED);
				goto fail;
			}
			continue;
		case RDMA_CM_EVENT_ESTABLISHED:
			c->connected = 1;
			err = verbs_params_decode(priv, priv_len, &c->peer);
			if (err)
				goto fail;
			reads = c->dev->max_rd_atom < param.responder_resources ?
				c->dev->max_rd_atom : param.responder_resources;
			err = setup_send(c, reads);
			if (err)
				goto fail;
			break;
		case RDMA_CM_EVENT_REJECTED:
			err = -ECONNREFUSED;
			goto fail;
		case RDMA_CM_EVENT_ADDR_ERROR:
		case RDMA_CM_EVENT_ROUTE_ERROR:
			err = -EHOSTUNREACH;
			goto fail;
		case RDMA_CM_EVENT_UNREACHABLE:
			err = status == -ETIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH;
			goto fail;
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			err = -ECONNRESET;
			goto fail;
		default:
			continue;
		}
		break;
	}
	conn_register(c, ctx);
	*out = &c->base;
	return 0;
fail:
	log_debug(1000045, "%s: connect: %s", c->base.peer, strerror(-err));
	conn_destroy(c);
	return err;
}

static int verbs_listen(struct xport_ctx *ctx, const char *hostport, struct xport_listener **out)
{
	struct sockaddr_storage ss;
	struct verbs_listener *l;
	char host[256];
	int err;

	err = resolve(hostport, 1, &ss, host, sizeof(host));
	if (err)
		return err;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->base.ops = &xport_verbs_ops;
	l->base.ctx = ctx;
	settings_read(&l->set);
	l->ech = rdma_create_event_channel();
	if (!l->ech) {
		err = neg_errno(-ENODEV);
		goto fail;
	}
	err = set_nonblock(l->ech->fd);
	if (err)
		goto fail;
	if (rdma_create_id(l->ech, &l->id, l, RDMA_PS_TCP)) {
		err = neg_errno(-ENODEV);
		goto fail;
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)&ss) ||
	    rdma_listen(l->id, VERBS_LISTEN_BACKLOG)) {
		err = neg_errno(-EADDRNOTAVAIL);
		goto fail;
	}
	if (strchr(host, ':'))
		snprintf(l->base.url, sizeof(l->base.url), "rdma://[%s]:%u", host,
			 ntohs(rdma_get_src_port(l->id)));
	else
		snprintf(l->base.url, sizeof(l->base.url), "rdma://%s:%u",
			 host[0] && strcmp(host, "*") ? host : "0.0.0.0",
			 ntohs(rdma_get_src_port(l->id)));
	l->poll.fd = l->ech->fd;
	l->poll.handler = listen_handler;
	err = xport_poll_add(ctx, &l->poll, EPOLLIN);
	if (err)
		goto fail;
	*out = &l->base;
	return 0;
fail:
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ech)
		rdma_destroy_event_channel(l->ech);
	free(l);
	return err;
}

static void verbs_listener_free(struct xport_listener *base)
{
	struct verbs_listener *l = (struct verbs_listener *)base;
	struct verbs_conn *c;

	xport_poll_del(base->ctx, &l->poll);
	while ((c = l->pending)) {
		l->pending = c->pend_next;
		conn_destroy(c);
	}
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ech);
	free(l);
}

/* ------------------------------------------------------------------ lifetime */

static void verbs_conn_reap(struct xport_conn *conn)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;
	int status, first;

	pthread_mutex_lock(&c->lock);
	first = !c->reaped;
	if (first && !atomic_exchange(&c->base.closing, 1))
		verbs_drop_all_locked(c, -ECANCELED);
	c->reaped = 1;
	status = c->close_status;
	pthread_mutex_unlock(&c->lock);
	if (!first)
		return;
	conn_teardown(c);
	xport_conn_closed(conn, status);
}

static void verbs_conn_free(struct xport_conn *conn)
{
	struct verbs_conn *c = (struct verbs_conn *)conn;

	conn_teardown(c);	/* only a connection never reaped still has resources */
	pthread_mutex_destroy(&c->lock);
	free(c);
}

const struct xport_ops xport_verbs_ops = {
	.scheme		= "rdma",
	.listen		= verbs_listen,
	.listener_free	= verbs_listener_free,
	.connect	= verbs_connect,
	.post_send	= verbs_post_send,
	.conn_close	= verbs_conn_close,
	.conn_pause_rx	= verbs_conn_pause_rx,
	.conn_rx_resume	= verbs_conn_rx_resume,
	.conn_set_tx_limit = verbs_conn_set_tx_limit,
	.conn_queued_bytes = verbs_conn_queued_bytes,
	.conn_reap	= verbs_conn_reap,
	.conn_free	= verbs_conn_free,
	.caps		= XPORT_CAP_RDMA,
	.post_send_sink	= verbs_post_send_sink,
	.sink_cancel	= verbs_sink_cancel,
	.post_write	= verbs_post_write,
};
