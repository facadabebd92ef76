// SPDX-License-Identifier: MIT
/*
 * xport.c - the module-independent half of the transport: contexts, the
 * completion queue, connection references, and dispatch by URL scheme.
 *
 * A context is one epoll set plus a completion queue. xport_test() runs the
 * handlers of ready file descriptors (module code, which pushes events) and then
 * hands out queued events. Events may also be pushed from other threads (a send
 * that completed inside xport_post_send(), xport_ctx_wake()); the pusher writes
 * the wake eventfd only when the progress thread is asleep in epoll_wait().
 *
 * Every event that names a connection holds a reference to it until the next
 * xport_test() call on the same context, so the caller may use event.conn while
 * handling the event without taking its own reference.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "log.h"
#include "xport_module.h"
#include "xport_tls.h"

#define XPORT_EPOLL_BATCH	64

struct xport_ctx {
	int epfd;
	struct xport_poll wake_poll;		/* eventfd */

	pthread_mutex_t lock;			/* everything below */
	struct xport_event *cq;			/* ring of queued events */
	size_t cq_head, cq_len, cq_cap;
	int sleeping;				/* progress thread is in epoll_wait */
	struct xport_conn *conns;		/* registered (not yet CLOSED) */
	struct xport_conn *reap_head;		/* closes for the progress thread */
	struct xport_conn *resume_head;		/* receive budgets with room again */
	struct xport_listener *listeners;
	/* tls:// credentials: set before connecting or listening, then read-only */
	struct xport_tls_client tls_client;
	struct xport_tls_server tls_server;

	/* Progress thread only: references held for the events last returned. */
	struct xport_conn **held;
	int nheld, held_cap;
};

static const struct xport_ops *const xport_modules[] = {
	&xport_tcp_ops,
	&xport_tls_ops,
	&xport_verbs_ops,
};

/*
 * Recycled bulk buffers. A fresh 16 MiB buffer costs 4096 page faults and as
 * many zeroed pages, more CPU than moving the data over loopback; the cache is
 * per process, like the allocator it sits on, and bounded.
 *
 * Each pooled buffer is declared long-lived (xport_mem_register()) from its
 * allocation to its free(), so an RDMA module keeps it registered while it is
 * recycled: a rendezvous READ into it costs no registration (BMI section 4.1).
 * The classes start just above the verbs module's eager size (32 KiB), where
 * the rendezvous starts.
 */
#define BUF_POOL_MIN		(32u * 1024)		/* up to half of it: plain malloc */
#define BUF_POOL_CLASSES	10			/* 32 KiB .. 16 MiB */
#define BUF_POOL_DEPTH		32
#define BUF_POOL_BYTES		(64u << 20)

static struct {
	pthread_mutex_t lock;
	void *bufs[BUF_POOL_CLASSES][BUF_POOL_DEPTH];
	int n[BUF_POOL_CLASSES];
	size_t bytes;
} buf_pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The pool class of @len and its capacity, or -1 for unpooled sizes. */
static int buf_class(size_t len, size_t *cap)
{
	size_t c = BUF_POOL_MIN;
	int i;

	if (len <= BUF_POOL_MIN / 2)
		return -1;
	for (i = 0; i < BUF_POOL_CLASSES; i++, c <<= 1) {
		if (len <= c) {
			*cap = c;
			return i;
		}
	}
	return -1;
}

void *xport_data_alloc(size_t len)
{
	size_t cap = len;
	void *p = NULL;
	int cls = buf_class(len, &cap);

	if (cls >= 0) {
		pthread_mutex_lock(&buf_pool.lock);
		if (buf_pool.n[cls]) {
			p = buf_pool.bufs[cls][--buf_pool.n[cls]];
			buf_pool.bytes -= cap;
		}
		pthread_mutex_unlock(&buf_pool.lock);
		if (p)
			return p;
	}
	if (posix_memalign(&p, RDFS_BLOCK_SIZE, cap ? cap : 1))
		return NULL;
	if (cls >= 0 && xport_mem_register(p, cap))
		log_warn(1000020, "xport: cannot declare a bulk buffer of %zu bytes", cap);
	return p;
}

void xport_data_free(void *buf, size_t len)
{
	size_t cap = 0;
	int cls = buf_class(len, &cap);

	if (!buf)
		return;
	if (cls >= 0) {
		pthread_mutex_lock(&buf_pool.lock);
		if (buf_pool.n[cls] < BUF_POOL_DEPTH && buf_pool.bytes + cap <= BUF_POOL_BYTES) {
			buf_pool.bufs[cls][buf_pool.n[cls]++] = buf;
			buf_pool.bytes += cap;
			buf = NULL;
		}
		pthread_mutex_unlock(&buf_pool.lock);
		/* Its registrations go before its pages do. */
		if (buf)
			xport_mem_deregister(buf, cap);
	}
	free(buf);
}

static void rx_budget_release(struct xport_conn *conn, uint64_t bytes);

void xport_msg_free(struct xport_msg *msg)
{
	if (!msg)
		return;
	if (msg->budget_conn) {
		rx_budget_release(msg->budget_conn, msg->budget_bytes);
		xport_conn_put(msg->budget_conn);
	}
	free(msg->body);
	xport_data_free(msg->data, msg->hdr.data_len);
	free(msg->sink);
	free(msg);
}

static void wake_handler(struct xport_poll *p, uint32_t events)
{
	uint64_t v;

	if (read(p->fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: someone else drained it; nothing to do. */
	}
}

static void wake_fd_kick(struct xport_ctx *ctx)
{
	uint64_t one = 1;

	if (write(ctx->wake_poll.fd, &one, sizeof(one)) < 0) {
		/* EAGAIN means the counter is already non-zero: the wakeup is pending. */
	}
}

int xport_ctx_create(struct xport_ctx **out)
{
	struct xport_ctx *ctx = calloc(1, sizeof(*ctx));
	int err;

	if (!ctx)
		return -ENOMEM;
	ctx->cq_cap = 256;
	ctx->cq = calloc(ctx->cq_cap, sizeof(*ctx->cq));
	if (!ctx->cq) {
		err = -ENOMEM;
		goto err_free;
	}
	pthread_mutex_init(&ctx->lock, NULL);
	ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ctx->epfd < 0) {
		err = -errno;
		goto err_cq;
	}
	ctx->wake_poll.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ctx->wake_poll.fd < 0) {
		err = -errno;
		goto err_ep;
	}
	ctx->wake_poll.handler = wake_handler;
	err = xport_poll_add(ctx, &ctx->wake_poll, EPOLLIN);
	if (err)
		goto err_wake;
	*out = ctx;
	return 0;

err_wake:
	close(ctx->wake_poll.fd);
err_ep:
	close(ctx->epfd);
err_cq:
	pthread_mutex_destroy(&ctx->lock);
	free(ctx->cq);
err_free:
	free(ctx);
	return err;
}

static void held_release(struct xport_ctx *ctx)
{
	int i;

	for (i = 0; i < ctx->nheld; i++)
		xport_conn_put(ctx->held[i]);
	ctx->nheld = 0;
}

/* Run the closes other threads asked for. */
/* ------------------------------------------------------------ receive budget */

void xport_conn_set_rx_budget(struct xport_conn *conn, unsigned int max_msgs,
			      uint64_t max_bytes)
{
	conn->rx_max_msgs = max_msgs;
	conn->rx_max_bytes = max_bytes;
}

/* Whether fewer than @msgs messages and @bytes bytes are held (a 0 bound is no bound). */
static int rx_budget_below(const struct xport_conn *conn, unsigned int msgs, uint64_t bytes)
{
	return (!conn->rx_max_msgs || atomic_load(&conn->rx_msgs) < msgs) &&
	       (!conn->rx_max_bytes || atomic_load(&conn->rx_bytes) < bytes);
}

/* Room for one more message. */
static int rx_budget_room(const struct xport_conn *conn)
{
	return rx_budget_below(conn, conn->rx_max_msgs, conn->rx_max_bytes);
}

/* Down to half: time to resume a starved connection (hysteresis, as pause_rx users do). */
static int rx_budget_half(const struct xport_conn *conn)
{
	return rx_budget_below(conn, conn->rx_max_msgs / 2 + 1, conn->rx_max_bytes / 2 + 1);
}

int xport_rx_budget_ok(struct xport_conn *conn)
{
	if (!conn->rx_max_msgs && !conn->rx_max_bytes)
		return 1;
	if (rx_budget_room(conn))
		return 1;
	/*
	 * Starved first, then look again: a release on another thread either
	 * sees the flag or has already made the room this second look finds.
	 */
	atomic_store(&conn->rx_starved, 1);
	if (rx_budget_room(conn) && atomic_exchange(&conn->rx_starved, 0))
		return 1;
	return 0;
}

void xport_rx_delivered(struct xport_conn *conn, struct xport_msg *m, uint64_t bytes)
{
	if (!conn->rx_max_msgs && !conn->rx_max_bytes)
		return;
	atomic_fetch_add(&conn->rx_msgs, 1);
	atomic_fetch_add(&conn->rx_bytes, bytes);
	xport_conn_get(conn);
	m->budget_conn = conn;
	m->budget_bytes = bytes;
}

/* Any thread: a budgeted message was freed; resume a starved connection at half. */
static void rx_budget_release(struct xport_conn *conn, uint64_t bytes)
{
	atomic_fetch_sub(&conn->rx_msgs, 1);
	atomic_fetch_sub(&conn->rx_bytes, bytes);
	/* a closed connection reads nothing more; its context may be gone already */
	if (atomic_load(&conn->closing))
		return;
	if (!atomic_load(&conn->rx_starved) || !rx_budget_half(conn) ||
	    !atomic_exchange(&conn->rx_starved, 0))
		return;
	xport_conn_kick(conn);
}

int xport_tx_throttle(struct xport_conn *conn, int *throttled, size_t queued, size_t limit)
{
	if (limit && !*throttled && queued > limit) {
		*throttled = 1;
		log_debug(1000021, "%s: %zu bytes unsent; pausing its input", conn->peer, queued);
	} else if (*throttled && (!limit || queued <= limit / 2)) {
		*throttled = 0;
	}
	return *throttled;
}

void xport_conn_kick(struct xport_conn *conn)
{
	struct xport_ctx *ctx = conn->ctx;
	int kick = 0;

	pthread_mutex_lock(&ctx->lock);
	if (!conn->on_resume_list && !conn->reported) {
		xport_conn_get(conn);
		conn->on_resume_list = 1;
		conn->resume_next = ctx->resume_head;
		ctx->resume_head = conn;
		kick = ctx->sleeping;
		ctx->sleeping = 0;
	}
	pthread_mutex_unlock(&ctx->lock);
	if (kick)
		wake_fd_kick(ctx);
}

static void resume_run(struct xport_ctx *ctx)
{
	struct xport_conn *list, *c;

	pthread_mutex_lock(&ctx->lock);
	list = ctx->resume_head;
	ctx->resume_head = NULL;
	for (c = list; c; c = c->resume_next)
		c->on_resume_list = 0;
	pthread_mutex_unlock(&ctx->lock);

	while (list) {
		c = list;
		list = c->resume_next;
		if (c->ops->conn_rx_resume && !atomic_load(&c->closing))
			c->ops->conn_rx_resume(c);
		xport_conn_put(c);
	}
}

static void reap_run(struct xport_ctx *ctx)
{
	struct xport_conn *list, *c;

	pthread_mutex_lock(&ctx->lock);
	list = ctx->reap_head;
	ctx->reap_head = NULL;
	for (c = list; c; c = c->reap_next)
		c->on_reap_list = 0;
	pthread_mutex_unlock(&ctx->lock);

	while (list) {
		c = list;
		list = c->reap_next;
		c->ops->conn_reap(c);
		xport_conn_put(c);
	}
}

void xport_ctx_destroy(struct xport_ctx *ctx)
{
	struct xport_listener *l;
	struct xport_conn *c;

	if (!ctx)
		return;
	held_release(ctx);

	while ((l = ctx->listeners)) {
		ctx->listeners = l->next;
		l->ops->listener_free(l);
	}

	for (;;) {
		pthread_mutex_lock(&ctx->lock);
		c = ctx->conns;
		if (c)
			xport_conn_get(c);
		pthread_mutex_unlock(&ctx->lock);
		if (!c)
			break;
		c->ops->conn_close(c, 0);
		c->ops->conn_reap(c);
		xport_conn_put(c);
	}
	reap_run(ctx);
	resume_run(ctx);	/* every connection is closed: this only drops references */

	while (ctx->cq_len) {
		struct xport_event *ev = &ctx->cq[ctx->cq_head];

		if (ev->type == XPORT_EV_RECV)
			xport_msg_free(ev->msg);
		if (ev->type == XPORT_EV_ACCEPT)
			xport_conn_put(ev->conn);	/* the caller's reference */
		if (ev->conn)
			xport_conn_put(ev->conn);
		ctx->cq_head = (ctx->cq_head + 1) % ctx->cq_cap;
		ctx->cq_len--;
	}

	close(ctx->wake_poll.fd);
	close(ctx->epfd);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx->held);
	free(ctx->cq);
	OPENSSL_cleanse(&ctx->tls_client, sizeof(ctx->tls_client));
	free(ctx);
}

static int cq_grow_locked(struct xport_ctx *ctx)
{
	size_t ncap = ctx->cq_cap * 2, i;
	struct xport_event *ncq = malloc(ncap * sizeof(*ncq));

	if (!ncq)
		return -ENOMEM;
	for (i = 0; i < ctx->cq_len; i++)
		ncq[i] = ctx->cq[(ctx->cq_head + i) % ctx->cq_cap];
	free(ctx->cq);
	ctx->cq = ncq;
	ctx->cq_cap = ncap;
	ctx->cq_head = 0;
	return 0;
}

void xport_cq_push(struct xport_ctx *ctx, const struct xport_event *ev)
{
	int kick;

	if (ev->conn)
		xport_conn_get(ev->conn);
	pthread_mutex_lock(&ctx->lock);
	while (ctx->cq_len == ctx->cq_cap && cq_grow_locked(ctx)) {
		/* An event is a promise to the caller; wait for memory rather than drop it. */
		pthread_mutex_unlock(&ctx->lock);
		usleep(1000);
		pthread_mutex_lock(&ctx->lock);
	}
	ctx->cq[(ctx->cq_head + ctx->cq_len) % ctx->cq_cap] = *ev;
	ctx->cq_len++;
	kick = ctx->sleeping;
	ctx->sleeping = 0;
	pthread_mutex_unlock(&ctx->lock);
	if (kick)
		wake_fd_kick(ctx);
}

int xport_ctx_wake(struct xport_ctx *ctx, void *user)
{
	struct xport_event ev = { .type = XPORT_EV_WAKE, .user = user };

	xport_cq_push(ctx, &ev);
	return 0;
}

static int held_reserve(struct xport_ctx *ctx, int n)
{
	struct xport_conn **nh;

	if (n <= ctx->held_cap)
		return 0;
	nh = realloc(ctx->held, (size_t)n * sizeof(*nh));
	if (!nh)
		return -ENOMEM;
	ctx->held = nh;
	ctx->held_cap = n;
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int xport_test(struct xport_ctx *ctx, struct xport_event *ev, int max, int timeout_ms)
{
	struct epoll_event eps[XPORT_EPOLL_BATCH];
	int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
	int i, n, wait_ms;

	if (max <= 0)
		return -EINVAL;
	held_release(ctx);
	if (held_reserve(ctx, max))
		return -ENOMEM;

	for (;;) {
		reap_run(ctx);
		resume_run(ctx);

		pthread_mutex_lock(&ctx->lock);
		if (ctx->cq_len) {
			for (n = 0; n < max && ctx->cq_len; n++) {
				ev[n] = ctx->cq[ctx->cq_head];
				ctx->cq_head = (ctx->cq_head + 1) % ctx->cq_cap;
				ctx->cq_len--;
				if (ev[n].conn)
					ctx->held[ctx->nheld++] = ev[n].conn;
			}
			pthread_mutex_unlock(&ctx->lock);
			return n;
		}
		if (ctx->reap_head || ctx->resume_head) {
			wait_ms = 0;
		} else if (timeout_ms < 0) {
			wait_ms = -1;
		} else if (timeout_ms == 0) {
			wait_ms = 0;
		} else {
			int64_t left = deadline - now_ms();

			wait_ms = left > 0 ? (int)left : 0;
		}
		ctx->sleeping = wait_ms != 0;
		pthread_mutex_unlock(&ctx->lock);

		n = epoll_wait(ctx->epfd, eps, XPORT_EPOLL_BATCH, wait_ms);

		pthread_mutex_lock(&ctx->lock);
		ctx->sleeping = 0;
		pthread_mutex_unlock(&ctx->lock);

		if (n < 0) {
			if (errno != EINTR)
				return -errno;
			n = 0;
		}
		for (i = 0; i < n; i++) {
			struct xport_poll *p = eps[i].data.ptr;

			p->handler(p, eps[i].events);
		}
		if (timeout_ms >= 0 && (timeout_ms == 0 || now_ms() >= deadline)) {
			/*
			 * Out of time: one last look at what the handlers or others
			 * queued. Checked even when fds were ready, so a peer that keeps
			 * an fd ready without producing events cannot hold us past the
			 * deadline.
			 */
			reap_run(ctx);
			resume_run(ctx);
			pthread_mutex_lock(&ctx->lock);
			n = ctx->cq_len || ctx->reap_head;
			pthread_mutex_unlock(&ctx->lock);
			if (!n && (timeout_ms == 0 || now_ms() >= deadline))
				return 0;
		}
	}
}

int xport_ctx_set_tls_client(struct xport_ctx *ctx, const char *identity,
			     const uint8_t psk[XPORT_TLS_PSK_LEN])
{
	if (!identity || !identity[0] || strlen(identity) >= XPORT_TLS_ID_MAX)
		return -EINVAL;
	snprintf(ctx->tls_client.identity, sizeof(ctx->tls_client.identity), "%s", identity);
	memcpy(ctx->tls_client.psk, psk, XPORT_TLS_PSK_LEN);
	return 0;
}

void xport_ctx_set_tls_server(struct xport_ctx *ctx,
			      int (*psk_of)(void *arg, const char *identity,
					    uint8_t psk[XPORT_TLS_PSK_LEN]),
			      void *arg)
{
	ctx->tls_server.psk_of = psk_of;
	ctx->tls_server.arg = arg;
}

const struct xport_tls_client *xport_ctx_tls_client(const struct xport_ctx *ctx)
{
	return &ctx->tls_client;
}

const struct xport_tls_server *xport_ctx_tls_server(const struct xport_ctx *ctx)
{
	return &ctx->tls_server;
}

/* The module for @url's scheme; NULL with *@err -EINVAL (no scheme) or -EPROTONOSUPPORT. */
static const struct xport_ops *module_for(const char *url, const char **rest, int *err)
{
	const char *sep = url ? strstr(url, "://") : NULL;
	size_t i, len;

	*err = -EINVAL;
	if (!sep || sep == url)
		return NULL;
	*err = -EPROTONOSUPPORT;
	len = (size_t)(sep - url);
	for (i = 0; i < sizeof(xport_modules) / sizeof(xport_modules[0]); i++) {
		if (strlen(xport_modules[i]->scheme) == len &&
		    strncmp(xport_modules[i]->scheme, url, len) == 0) {
			*rest = sep + 3;
			return xport_modules[i];
		}
	}
	return NULL;
}

int xport_listen(struct xport_ctx *ctx, const char *url, struct xport_listener **out)
{
	const struct xport_ops *ops;
	const char *rest;
	struct xport_listener *l;
	int err;

	ops = module_for(url, &rest, &err);
	if (!ops)
		return err;
	err = ops->listen(ctx, rest, &l);
	if (err)
		return err;
	pthread_mutex_lock(&ctx->lock);
	l->next = ctx->listeners;
	ctx->listeners = l;
	pthread_mutex_unlock(&ctx->lock);
	if (out)
		*out = l;
	return 0;
}

const char *xport_listener_url(const struct xport_listener *l)
{
	return l->url;
}

int xport_connect(struct xport_ctx *ctx, const char *url, int timeout_ms,
		  struct xport_conn **out)
{
	const struct xport_ops *ops;
	const char *rest;
	int err;

	ops = module_for(url, &rest, &err);
	if (!ops)
		return err;
	return ops->connect(ctx, rest, timeout_ms, out);
}

int xport_post_send(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
		    const void *body, const struct iovec *data, int niov, void *user)
{
	uint64_t total = 0;
	int i;

	if (hdr->body_len > RDFS_MAX_BODY || hdr->data_len > RDFS_MAX_DATA)
		return -EMSGSIZE;
	if (niov < 0 || niov > XPORT_MAX_IOV || (niov && !data) || (hdr->body_len && !body))
		return -EINVAL;
	for (i = 0; i < niov; i++)
		total += data[i].iov_len;
	if (total != hdr->data_len)
		return -EINVAL;
	return conn->ops->post_send(conn, hdr, body, data, niov, user);
}

unsigned int xport_conn_caps(const struct xport_conn *conn)
{
	return conn->ops->caps;
}

int xport_post_send_sink(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
			 const void *body, const struct iovec *data, int niov,
			 const struct iovec *sink, int nsink, void *user)
{
	uint64_t total = 0;
	int i;

	if (!conn->ops->post_send_sink || nsink == 0)
		return xport_post_send(conn, hdr, body, data, niov, user);
	if (hdr->body_len > RDFS_MAX_BODY || hdr->data_len > RDFS_MAX_DATA)
		return -EMSGSIZE;
	if (niov < 0 || niov > XPORT_MAX_IOV || (niov && !data) || (hdr->body_len && !body) ||
	    nsink < 0 || nsink > XPORT_MAX_IOV || !sink)
		return -EINVAL;
	for (i = 0; i < niov; i++)
		total += data[i].iov_len;
	if (total != hdr->data_len)
		return -EINVAL;
	for (i = 0; i < nsink; i++)
		if (!sink[i].iov_len)
			return -EINVAL;
	return conn->ops->post_send_sink(conn, hdr, body, data, niov, sink, nsink, user);
}

void xport_sink_cancel(struct xport_conn *conn, uint32_t tag)
{
	if (conn->ops->sink_cancel)
		conn->ops->sink_cancel(conn, tag);
}

int xport_post_write(struct xport_conn *conn, const struct xport_sink *sink, uint64_t off,
		     const struct iovec *iov, int niov, const struct rdfs_frame_hdr *hdr,
		     const void *body, void *user)
{
	if (!conn->ops->post_write)
		return -EOPNOTSUPP;
	if (!sink || !user || niov <= 0 || niov > XPORT_MAX_IOV || !iov || hdr->data_len ||
	    (hdr->body_len && !body))
		return -EINVAL;
	if (hdr->body_len > RDFS_MAX_BODY)
		return -EMSGSIZE;
	return conn->ops->post_write(conn, sink, off, iov, niov, hdr, body, user);
}

void xport_conn_close(struct xport_conn *conn)
{
	conn->ops->conn_close(conn, 0);
}

void xport_conn_close_when_sent(struct xport_conn *conn)
{
	conn->ops->conn_close(conn, 1);
}

void xport_conn_pause_rx(struct xport_conn *conn, int paused)
{
	conn->ops->conn_pause_rx(conn, paused);
}

void xport_conn_set_tx_limit(struct xport_conn *conn, size_t max)
{
	conn->ops->conn_set_tx_limit(conn, max);
}

size_t xport_conn_queued_bytes(struct xport_conn *conn)
{
	return conn->ops->conn_queued_bytes(conn);
}

uint64_t xport_conn_sent_bytes(struct xport_conn *conn)
{
	return atomic_load(&conn->tx_sent);
}

void xport_conn_get(struct xport_conn *conn)
{
	atomic_fetch_add(&conn->refcnt, 1);
}

void xport_conn_put(struct xport_conn *conn)
{
	if (!conn)
		return;
	if (atomic_fetch_sub(&conn->refcnt, 1) != 1)
		return;
	if (conn->user_free)
		conn->user_free(conn->user);
	conn->ops->conn_free(conn);
}

void xport_conn_set_user(struct xport_conn *conn, void *user)
{
	conn->user = user;
}

void xport_conn_set_user_free(struct xport_conn *conn, void (*user_free)(void *user))
{
	conn->user_free = user_free;
}

void xport_conn_set_rx_limits(struct xport_conn *conn, uint32_t max_body, uint32_t max_data)
{
	conn->max_body = max_body < RDFS_MAX_BODY ? max_body : RDFS_MAX_BODY;
	conn->max_data = max_data < RDFS_MAX_DATA ? max_data : RDFS_MAX_DATA;
}

void *xport_conn_user(const struct xport_conn *conn)
{
	return conn->user;
}

const char *xport_conn_peer(const struct xport_conn *conn)
{
	return conn->peer;
}

void xport_conn_init(struct xport_conn *conn, const struct xport_ops *ops,
		     struct xport_ctx *ctx)
{
	conn->ops = ops;
	conn->ctx = ctx;
	conn->max_body = RDFS_MAX_BODY;
	conn->max_data = RDFS_MAX_DATA;
	atomic_init(&conn->refcnt, 2);
	atomic_init(&conn->closing, 0);
	pthread_mutex_lock(&ctx->lock);
	conn->ctx_prev = NULL;
	conn->ctx_next = ctx->conns;
	if (ctx->conns)
		ctx->conns->ctx_prev = conn;
	ctx->conns = conn;
	pthread_mutex_unlock(&ctx->lock);
}

void xport_conn_closed(struct xport_conn *conn, int status)
{
	struct xport_ctx *ctx = conn->ctx;
	struct xport_event ev = { .type = XPORT_EV_CLOSED, .status = status, .conn = conn };

	pthread_mutex_lock(&ctx->lock);
	if (conn->reported) {
		pthread_mutex_unlock(&ctx->lock);
		return;
	}
	conn->reported = 1;
	if (conn->ctx_prev)
		conn->ctx_prev->ctx_next = conn->ctx_next;
	else
		ctx->conns = conn->ctx_next;
	if (conn->ctx_next)
		conn->ctx_next->ctx_prev = conn->ctx_prev;
	pthread_mutex_unlock(&ctx->lock);

	xport_cq_push(ctx, &ev);
	xport_conn_put(conn);
}

void xport_conn_reap_later(struct xport_conn *conn)
{
	struct xport_ctx *ctx = conn->ctx;
	int kick = 0;

	pthread_mutex_lock(&ctx->lock);
	if (!conn->on_reap_list && !conn->reported) {
		xport_conn_get(conn);
		conn->on_reap_list = 1;
		conn->reap_next = ctx->reap_head;
		ctx->reap_head = conn;
		kick = ctx->sleeping;
		ctx->sleeping = 0;
	}
	pthread_mutex_unlock(&ctx->lock);
	if (kick)
		wake_fd_kick(ctx);
}

int xport_poll_add(struct xport_ctx *ctx, struct xport_poll *p, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = p };

	return epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, p->fd, &ev) ? -errno : 0;
}

int xport_poll_mod(struct xport_ctx *ctx, struct xport_poll *p, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = p };

	return epoll_ctl(ctx->epfd, EPOLL_CTL_MOD, p->fd, &ev) ? -errno : 0;
}

void xport_poll_del(struct xport_ctx *ctx, struct xport_poll *p)
{
	epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, p->fd, NULL);
}

int xport_split_hostport(const char *hostport, char *host, size_t hostlen, char *port,
			 size_t portlen)
{
	const char *colon, *h = hostport;
	size_t hl;

	if (!hostport)
		return -EINVAL;
	if (*h == '[') {
		const char *close = strchr(h, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		h++;
		hl = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(h, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - h);
	}
	if (hl >= hostlen || strlen(colon + 1) >= portlen || colon[1] == '\0')
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	strcpy(port, colon + 1);
	for (h = port; *h; h++)
		if (*h < '0' || *h > '9')
			return -EINVAL;
	if (strlen(port) > 5 || atoi(port) > 65535)
		return -EINVAL;
	return 0;
}
