// SPDX-License-Identifier: MIT
/*
 * xport_tcp.c - the TCP module of lib/xport: epoll, non-blocking sockets.
 *
 * Send side (any thread, under the connection lock): a post is written at once
 * when nothing is queued before it; what the socket does not take is queued and
 * the progress thread flushes the queue on EPOLLOUT. Unowned posts (user == NULL)
 * copy their unsent remainder so the caller may reuse its buffers at once.
 * With a tx limit set (servers), a connection whose queue grows past it is not
 * read from until the queue drains: the queue is bounded by what the peer may
 * ask for, never by dropping what was asked.
 *
 * Receive side (progress thread only, no lock): a small staging buffer collects
 * headers; once a header is validated the body and data buffers are allocated and
 * read into directly, so bulk data is never copied and one readv() can move many
 * MiB. Each readv also offers the staging buffer, catching the next header in the
 * same system call.
 *
 * tls:// (xport_tls_ops) is this module with lib/xport_tls.h between the
 * queues and the socket: sends are staged into TLS instead of sendmsg(),
 * reads decrypt one record at a time into the same targets readv() fills.
 * An accepted tls:// connection is reported at once and runs its handshake
 * on the progress thread (sends posted meanwhile wait in the queue); a
 * connect does the handshake before it returns. Bytes OpenSSL has read
 * ahead are invisible to epoll: whenever reading stops with some of them
 * left, or becomes allowed again, the connection is kicked
 * (xport_conn_kick()) instead of waiting for the socket.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "xport_module.h"
#include "xport_tls.h"

/* Staging buffer for headers and small messages. */
#define TCP_RXBUF_LEN		(64 * 1024)
/* Socket buffers big enough for a 16 MiB transfer to stream without stalls. */
#ifndef TCP_SOCKBUF_LEN
#define TCP_SOCKBUF_LEN		(4 * 1024 * 1024)
#endif
/*
 * Reading per readiness event before other connections get a turn; also how far
 * a connection can run ahead of xport_conn_pause_rx().
 */
#define TCP_RX_BUDGET		16
/* TLS reads return one record (16 KiB) each: more turns, the same bytes. */
#define TLS_RX_BUDGET		256
#define TCP_RX_BYTES_BUDGET	(4u << 20)
#define TCP_ACCEPT_BUDGET	64
/* iovecs gathered per sendmsg from the queue (IOV_MAX is 1024). */
#define TCP_TX_IOV		256
#define TCP_LISTEN_BACKLOG	1024
/* Keepalive: a silent dead peer is found after IDLE + INTVL * CNT seconds (30). */
#define TCP_KEEPALIVE_IDLE_S	15
#define TCP_KEEPALIVE_INTVL_S	5
#define TCP_KEEPALIVE_CNT	3
/* Unsent remainders up to this size are copied into the queue entry itself. */
#define TCP_TX_INLINE		(64 * 1024)

struct tcp_tx {
	struct tcp_tx *next;
	void *user;			/* completion to report, NULL for copies */
	void *copy;			/* the copied bytes when large (xport_data_alloc) */
	size_t copy_len;
	int niov, cur;			/* iov[cur..niov) remain */
	struct iovec iov[XPORT_MAX_IOV + 2];
	uint8_t hdr[RDFS_FRAME_HDR_LEN];
};

enum tcp_rx_state { RX_HDR, RX_PAYLOAD };

struct tcp_conn {
	struct xport_conn base;
	struct xport_poll poll;
	struct xport_tls *tls;		/* tls:// only; its own lock */

	pthread_mutex_t lock;		/* the send side and the fd's life */
	struct tcp_tx *txq_head, *txq_tail;
	uint32_t poll_events;
	atomic_int close_when_sent;	/* read unlocked by tcp_rx() */
	int rx_paused;			/* xport_conn_pause_rx() */
	size_t tx_queued;		/* bytes in txq not yet written */
	size_t tx_limit;		/* xport_conn_set_tx_limit(); 0: none */
	int tx_throttled;		/* not reading: tx_queued went over tx_limit */
	int reaped;			/* fd closed, CLOSED reported */
	int close_status;

	/* Receive side: progress thread only. */
	uint8_t *rxbuf;
	size_t rx_start, rx_end;
	enum tcp_rx_state rx_state;
	struct xport_msg *rx_msg;
	size_t rx_got;			/* payload bytes (body, then data) received */
};

struct tcp_listener {
	struct xport_listener base;
	struct xport_poll poll;
	int spare_fd;			/* given up to accept (and drop) a peer at EMFILE */
};

static struct tcp_conn *tcp_conn_of(struct xport_conn *c)
{
	return (struct tcp_conn *)c;
}

/* Whether sends may go to the socket: plain TCP, or TLS after its handshake. */
static int tcp_open_for_data(struct tcp_conn *c)
{
	return !c->tls || xport_tls_is_open(c->tls);
}

/* Under c->lock: nothing queued and nothing staged in TLS. */
static int tcp_tx_idle_locked(struct tcp_conn *c)
{
	return !c->txq_head && !(c->tls && xport_tls_tx_pending(c->tls));
}

/* ------------------------------------------------------------------ sockets */

static void sockaddr_to_url(const struct sockaddr *sa, const char *scheme, char *buf,
			    size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned int port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		port = ntohs(in->sin_port);
		snprintf(buf, len, "%s://%s:%u", scheme, ip, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		port = ntohs(in6->sin6_port);
		snprintf(buf, len, "%s://[%s]:%u", scheme, ip, port);
	} else {
		snprintf(buf, len, "%s://?", scheme);
	}
}

static int read_proc_int(const char *path)
{
	FILE *f = fopen(path, "re");
	int v = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static int sockbuf_ok;
static pthread_once_t sockbuf_once = PTHREAD_ONCE_INIT;

static void sockbuf_probe(void)
{
	/*
	 * Setting SO_*BUF turns off the kernel's autotuning, and the kernel caps it
	 * at net.core.[rw]mem_max; below our size autotuning does better.
	 */
	sockbuf_ok = read_proc_int("/proc/sys/net/core/rmem_max") >= TCP_SOCKBUF_LEN &&
		     read_proc_int("/proc/sys/net/core/wmem_max") >= TCP_SOCKBUF_LEN;
}

static void tcp_tune_socket(int fd)
{
	int one = 1, len = TCP_SOCKBUF_LEN;
	int idle = TCP_KEEPALIVE_IDLE_S, intvl = TCP_KEEPALIVE_INTVL_S, cnt = TCP_KEEPALIVE_CNT;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/*
	 * A peer whose host died or was cut off sends no FIN: without probes its
	 * connection would look alive for ever (an I/O server's registration
	 * would never go down, and its restarted process would be refused).
	 */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	pthread_once(&sockbuf_once, sockbuf_probe);
	if (sockbuf_ok) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &len, sizeof(len));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &len, sizeof(len));
	}
}

/* ------------------------------------------------------------------ send side */

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	int i;

	for (i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* Drop @n written bytes from the front of iov[*cur..niov). */
static void iov_advance(struct iovec *iov, int niov, int *cur, size_t n)
{
	while (*cur < niov && n >= iov[*cur].iov_len) {
		n -= iov[*cur].iov_len;
		(*cur)++;
	}
	if (*cur < niov && n) {
		iov[*cur].iov_base = (uint8_t *)iov[*cur].iov_base + n;
		iov[*cur].iov_len -= n;
	}
	/* Skip empty iovecs so a finished post is recognized as finished. */
	while (*cur < niov && iov[*cur].iov_len == 0)
		(*cur)++;
}

/* Write what the socket takes. Returns bytes written, -EAGAIN if none, or -errno. */
static ssize_t tcp_sendv(int fd, struct iovec *iov, int niov)
{
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)niov };
	ssize_t n;

	do {
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

/* Under c->lock: tcp_sendv(), or staged into TLS on a tls:// connection. */
static ssize_t conn_sendv(struct tcp_conn *c, struct iovec *iov, int niov)
{
	if (c->tls)
		return xport_tls_sendv(c->tls, iov, niov);
	return tcp_sendv(c->poll.fd, iov, niov);
}

static void tx_free(struct tcp_tx *tx)
{
	xport_data_free(tx->copy, tx->copy_len);
	free(tx);
}

static void tx_complete(struct tcp_conn *c, struct tcp_tx *tx, int status)
{
	if (tx->user) {
		struct xport_event ev = {
			.type = XPORT_EV_SEND, .status = status, .conn = &c->base, .user = tx->user,
		};

		xport_cq_push(c->base.ctx, &ev);
	}
	tx_free(tx);
}

/* Under c->lock: complete every queued send with @status. */
static void tx_cancel_all_locked(struct tcp_conn *c, int status)
{
	struct tcp_tx *tx;

	while ((tx = c->txq_head)) {
		c->txq_head = tx->next;
		tx_complete(c, tx, status);
	}
	c->txq_tail = NULL;
	c->tx_queued = 0;
}

/*
 * Under c->lock: whether we may read. A peer that does not read our replies
 * holds back its own requests once tx_limit bytes are queued, and may send
 * again when the queue has drained to half of it.
 */
static int tcp_rx_allowed_locked(struct tcp_conn *c)
{
	xport_tx_throttle(&c->base, &c->tx_throttled, c->tx_queued, c->tx_limit);
	return !atomic_load(&c->base.closing) && !c->close_when_sent && !c->rx_paused &&
	       !c->tx_throttled && !atomic_load(&c->base.rx_starved);
}

static void tcp_update_poll_locked(struct tcp_conn *c)
{
	uint32_t want = 0;

	if (c->reaped)
		return;
	if (c->tls && !xport_tls_is_open(c->tls)) {
		/* the handshake's own wait (set by tcp_tls_handshake()), nothing else */
		want = c->poll_events;
	} else {
		if (tcp_rx_allowed_locked(c))
			want |= EPOLLIN;
		if (!tcp_tx_idle_locked(c))
			want |= EPOLLOUT;
		/* input TLS holds already: epoll will not say so when reading resumes */
		if (c->tls && (want & EPOLLIN) && !(c->poll_events & EPOLLIN) &&
		    xport_tls_rx_pending(c->tls))
			xport_conn_kick(&c->base);
	}
	if (want != c->poll_events) {
		c->poll_events = want;
		xport_poll_mod(c->base.ctx, &c->poll, want);
	}
}

/* Under c->lock: stop everything and have the progress thread report CLOSED. */
static void tcp_close_locked(struct tcp_conn *c, int status)
{
	if (atomic_exchange(&c->base.closing, 1))
		return;
	c->close_status = status;
	tx_cancel_all_locked(c, -ECANCELED);
	tcp_update_poll_locked(c);
	xport_conn_reap_later(&c->base);
}

/* Under c->lock: write queued posts until the socket is full. 0 or -errno. */
static int tcp_flush_locked(struct tcp_conn *c)
{
	struct iovec iov[TCP_TX_IOV];
	struct tcp_tx *tx;
	ssize_t n;
	int niov;

	if (c->tls) {
		if (!xport_tls_is_open(c->tls))
			return 0;	/* the handshake first */
		n = xport_tls_flush(c->tls);
		if (n == -EAGAIN)
			return 0;
		if (n < 0)
			return (int)n;
	}
	while (c->txq_head) {
		niov = 0;
		for (tx = c->txq_head; tx && niov < TCP_TX_IOV; tx = tx->next) {
			int i;

			for (i = tx->cur; i < tx->niov && niov < TCP_TX_IOV; i++)
				iov[niov++] = tx->iov[i];
		}
		n = conn_sendv(c, iov, niov);
		if (n == -EAGAIN)
			return 0;
		if (n < 0)
			return (int)n;
		c->tx_queued -= (size_t)n;
		atomic_fetch_add(&c->base.tx_sent, (uint64_t)n);
		while ((tx = c->txq_head)) {
			size_t left = iov_total(tx->iov + tx->cur, tx->niov - tx->cur);

			if ((size_t)n < left) {
				iov_advance(tx->iov, tx->niov, &tx->cur, (size_t)n);
				break;
			}
			n -= (ssize_t)left;
			c->txq_head = tx->next;
			if (!c->txq_head)
				c->txq_tail = NULL;
			tx_complete(c, tx, 0);
		}
	}
	return 0;
}

static void tcp_flush(struct tcp_conn *c)
{
	int err;

	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->base.closing) || c->reaped) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	err = tcp_flush_locked(c);
	if (err)
		tcp_close_locked(c, err);
	else if (c->close_when_sent && tcp_tx_idle_locked(c))
		tcp_close_locked(c, 0);
	else
		tcp_update_poll_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* Queue the unsent rest of a post: by reference for owned posts, else copied. */
static struct tcp_tx *tx_make(const struct iovec *iov, int niov, int cur, void *user)
{
	struct tcp_tx *tx;
	size_t left;
	uint8_t *p;
	int i;

	if (user) {
		tx = malloc(sizeof(*tx));
		if (!tx)
			return NULL;
		tx->user = user;
		tx->copy = NULL;
		tx->copy_len = 0;
		tx->cur = 0;
		tx->niov = 0;
		for (i = cur; i < niov; i++)
			tx->iov[tx->niov++] = iov[i];
		/* The header lives on the poster's stack: keep a copy. */
		if (cur == 0) {
			memcpy(tx->hdr, iov[0].iov_base, iov[0].iov_len);
			tx->iov[0].iov_base = tx->hdr;
		}
		return tx;
	}
	left = iov_total(iov + cur, niov - cur);
	/* Small remainders ride in the same allocation; bulk goes to a recycled buffer. */
	if (left <= TCP_TX_INLINE) {
		tx = malloc(sizeof(*tx) + left);
		if (!tx)
			return NULL;
		tx->copy = NULL;
		tx->copy_len = 0;
		p = (uint8_t *)(tx + 1);
	} else {
		tx = malloc(sizeof(*tx));
		if (!tx)
			return NULL;
		tx->copy = xport_data_alloc(left);
		if (!tx->copy) {
			free(tx);
			return NULL;
		}
		tx->copy_len = left;
		p = tx->copy;
	}
	tx->user = NULL;
	tx->cur = 0;
	tx->niov = 1;
	tx->iov[0].iov_base = p;
	tx->iov[0].iov_len = left;
	for (i = cur; i < niov; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	return tx;
}

static int tcp_post_send(struct xport_conn *conn, const struct rdfs_frame_hdr *hdr,
			 const void *body, const struct iovec *data, int niov, void *user)
{
	struct tcp_conn *c = tcp_conn_of(conn);
	struct iovec iov[XPORT_MAX_IOV + 2];
	uint8_t hdrbuf[RDFS_FRAME_HDR_LEN];
	struct tcp_tx *tx;
	int n = 0, cur = 0, i, err = 0, started = 0;
	ssize_t w;

	rdfs_frame_hdr_encode(hdr, hdrbuf);
	iov[n].iov_base = hdrbuf;
	iov[n++].iov_len = RDFS_FRAME_HDR_LEN;
	if (hdr->body_len) {
		iov[n].iov_base = (void *)body;
		iov[n++].iov_len = hdr->body_len;
	}
	for (i = 0; i < niov; i++)
		if (data[i].iov_len)
			iov[n++] = data[i];

	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->base.closing) || c->close_when_sent || c->reaped) {
		err = -EPIPE;
		goto out;
	}
	if (!c->txq_head && tcp_open_for_data(c)) {
		while (cur < n) {
			w = conn_sendv(c, iov + cur, n - cur);
			if (w == -EAGAIN)
				break;
			if (w < 0) {
				tcp_close_locked(c, (int)w);
				err = -EPIPE;
				goto out;
			}
			iov_advance(iov, n, &cur, (size_t)w);
			started = 1;
		}
		if (cur == n) {
			if (c->tls)
				tcp_update_poll_locked(c);	/* EPOLLOUT while TLS holds some */
			if (user) {
				struct xport_event ev = {
					.type = XPORT_EV_SEND, .conn = conn, .user = user,
				};

				xport_cq_push(conn->ctx, &ev);
			}
			goto out;
		}
	}
	tx = tx_make(iov, n, cur, user);
	if (!tx) {
		/* Part of the frame may be on the wire: the stream is lost. */
		if (started)
			tcp_close_locked(c, -ENOMEM);
		err = -ENOMEM;
		goto out;
	}
	tx->next = NULL;
	if (c->txq_tail)
		c->txq_tail->next = tx;
	else
		c->txq_head = tx;
	c->txq_tail = tx;
	c->tx_queued += iov_total(tx->iov + tx->cur, tx->niov - tx->cur);
	tcp_update_poll_locked(c);
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* ------------------------------------------------------------------ receive side */

/* Start a message for a validated header: allocate exactly what it announces. */
static int rx_begin(struct tcp_conn *c, const struct rdfs_frame_hdr *h)
{
	struct xport_msg *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->hdr = *h;
	if (h->body_len) {
		m->body = malloc(h->body_len);
		if (!m->body)
			goto nomem;
	}
	if (h->data_len) {
		m->data = xport_data_alloc(h->data_len);
		if (!m->data)
			goto nomem;
	}
	c->rx_msg = m;
	c->rx_got = 0;
	c->rx_state = RX_PAYLOAD;
	return 0;
nomem:
	xport_msg_free(m);
	return -ENOMEM;
}

/* Where the next payload bytes go, and how many the current part still needs. */
static uint8_t *rx_target(struct tcp_conn *c, size_t *len)
{
	struct xport_msg *m = c->rx_msg;

	if (c->rx_got < m->hdr.body_len) {
		*len = m->hdr.body_len - c->rx_got;
		return m->body + c->rx_got;
	}
	*len = m->hdr.body_len + m->hdr.data_len - c->rx_got;
	return m->data + (c->rx_got - m->hdr.body_len);
}

static void rx_deliver_if_complete(struct tcp_conn *c)
{
	struct xport_msg *m = c->rx_msg;
	struct xport_event ev = { .type = XPORT_EV_RECV, .conn = &c->base };

	if (c->rx_got < (size_t)m->hdr.body_len + m->hdr.data_len)
		return;
	ev.msg = m;
	c->rx_msg = NULL;
	c->rx_state = RX_HDR;
	xport_rx_delivered(&c->base, m, RDFS_FRAME_HDR_LEN + (uint64_t)m->hdr.body_len +
			   m->hdr.data_len);
	xport_cq_push(c->base.ctx, &ev);
}

/* Consume the staging buffer. 0, or -EPROTO/-EMSGSIZE/-ENOMEM to drop the peer. */
static int rx_parse(struct tcp_conn *c)
{
	struct rdfs_frame_hdr h;
	uint8_t *dst;
	size_t len, avail;
	int err;

	for (;;) {
		avail = c->rx_end - c->rx_start;
		if (c->rx_state == RX_HDR) {
			if (avail < RDFS_FRAME_HDR_LEN)
				return 0;
			/* the budget is checked here, before a message leaves the buffer */
			if (!xport_rx_budget_ok(&c->base))
				return 0;
			err = rdfs_frame_hdr_decode(c->rxbuf + c->rx_start, &h);
			if (err)
				return err;
			if (h.body_len > c->base.max_body || h.data_len > c->base.max_data)
				return -EMSGSIZE;
			c->rx_start += RDFS_FRAME_HDR_LEN;
			err = rx_begin(c, &h);
			if (err)
				return err;
			rx_deliver_if_complete(c);
			continue;
		}
		if (!avail)
			return 0;
		dst = rx_target(c, &len);
		if (len > avail)
			len = avail;
		memcpy(dst, c->rxbuf + c->rx_start, len);
		c->rx_start += len;
		c->rx_got += len;
		rx_deliver_if_complete(c);
	}
}

static void tcp_fail(struct tcp_conn *c, int status)
{
	pthread_mutex_lock(&c->lock);
	tcp_close_locked(c, status);
	pthread_mutex_unlock(&c->lock);
}

/* What rx_parse() refused: drop the peer, saying why. */
static void rx_failed(struct tcp_conn *c, int err)
{
	log_warn(1000022, "%s: dropping connection: %s", c->base.peer,
		 err == -EMSGSIZE ? "oversized frame" :
		 err == -ENOMEM ? "out of memory" : "malformed frame header");
	tcp_fail(c, err);
}

static void tcp_rx(struct tcp_conn *c)
{
	struct iovec iov[2];
	size_t want, len, got, total = 0;
	ssize_t n;
	int niov, budget, err, may_read, drained = 0;
	int turns = c->tls ? TLS_RX_BUDGET : TCP_RX_BUDGET;

	if (!tcp_open_for_data(c))
		return;
	for (budget = 0; budget < turns && total < TCP_RX_BYTES_BUDGET; budget++) {
		/* A reply to what we just read may have paused us from another thread. */
		pthread_mutex_lock(&c->lock);
		tcp_update_poll_locked(c);
		may_read = !c->reaped && (c->poll_events & EPOLLIN);
		pthread_mutex_unlock(&c->lock);
		if (!may_read)
			return;
		/* What is left after parsing is a partial header: move it to the front. */
		if (c->rx_start) {
			memmove(c->rxbuf, c->rxbuf + c->rx_start, c->rx_end - c->rx_start);
			c->rx_end -= c->rx_start;
			c->rx_start = 0;
		}
		niov = 0;
		if (c->rx_state == RX_PAYLOAD) {
			iov[niov].iov_base = rx_target(c, &len);
			iov[niov++].iov_len = len;
		}
		iov[niov].iov_base = c->rxbuf + c->rx_end;
		iov[niov++].iov_len = TCP_RXBUF_LEN - c->rx_end;
		want = iov_total(iov, niov);

		if (c->tls) {
			/* one record into the first target; the staging buffer waits its turn */
			n = xport_tls_read(c->tls, iov[0].iov_base, iov[0].iov_len);
			if (n == -EAGAIN)
				return;
			if (n < 0) {
				tcp_fail(c, (int)n);
				return;
			}
			/*
			 * Nothing left inside OpenSSL: its last recv() asked for far more
			 * than it got, so the socket is drained (TCP's short read). If
			 * not, epoll (level-triggered) says so.
			 */
			drained = !xport_tls_rx_pending(c->tls);
		} else {
			do {
				n = readv(c->poll.fd, iov, niov);
			} while (n < 0 && errno == EINTR);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					return;
				tcp_fail(c, -errno);
				return;
			}
		}
		if (n == 0) {
			/* EOF between messages is a clean close; inside one, a broken stream. */
			int mid = c->rx_state == RX_PAYLOAD || c->rx_end > c->rx_start;

			tcp_fail(c, mid ? -ECONNRESET : 0);
			return;
		}
		got = (size_t)n;
		total += got;
		if (c->rx_state == RX_PAYLOAD) {
			size_t k = (size_t)n < iov[0].iov_len ? (size_t)n : iov[0].iov_len;

			c->rx_got += k;
			n -= (ssize_t)k;
			rx_deliver_if_complete(c);
		}
		c->rx_end += (size_t)n;
		err = rx_parse(c);
		if (err) {
			rx_failed(c, err);
			return;
		}
		if (c->tls ? drained : got < want)
			return;	/* short read: the socket is drained */
	}
	/* stopped for the budget while TLS holds input epoll cannot see: come back */
	if (c->tls && xport_tls_rx_pending(c->tls))
		xport_conn_kick(&c->base);
}

/*
 * EPOLLHUP or EPOLLERR on a connection we are not reading from (paused, or
 * closing once sent): epoll reports these whether asked or not, and reading
 * would hand the application requests it asked not to get. After a hangup
 * (reset, or both directions shut) nothing we queue can arrive, so close now,
 * or the level-triggered hangup would spin the progress thread.
 */
static void tcp_hangup(struct tcp_conn *c, uint32_t events)
{
	socklen_t sl = sizeof(int);
	int err = 0;

	if (getsockopt(c->poll.fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
		err = errno;
	if (err)
		tcp_fail(c, -err);
	else if (events & EPOLLHUP)
		tcp_fail(c, -ECONNRESET);
}

/*
 * Progress thread: advance an accepted tls:// connection's handshake; once it
 * is done, send what was posted meanwhile and read. 0 when open, -EAGAIN
 * while it waits, -errno when it failed (the connection is closed).
 */
static int tcp_tls_handshake(struct tcp_conn *c)
{
	uint32_t ev = 0;
	int err = xport_tls_handshake(c->tls, &ev);

	if (err == -EAGAIN) {
		pthread_mutex_lock(&c->lock);
		if (!c->reaped && ev != c->poll_events) {
			c->poll_events = ev;
			xport_poll_mod(c->base.ctx, &c->poll, ev);
		}
		pthread_mutex_unlock(&c->lock);
		return err;
	}
	if (err) {
		tcp_fail(c, err);
		return err;
	}
	tcp_flush(c);
	tcp_rx(c);
	return 0;
}

static void tcp_conn_handler(struct xport_poll *p, uint32_t events)
{
	struct tcp_conn *c = (struct tcp_conn *)((uint8_t *)p - offsetof(struct tcp_conn, poll));

	if (c->reaped)
		return;
	if (c->tls && !xport_tls_is_open(c->tls)) {
		tcp_tls_handshake(c);
		return;
	}
	/* EPOLLIN is only reported while we asked for it, i.e. may read. */
	if (events & EPOLLIN)
		tcp_rx(c);
	else if (events & (EPOLLHUP | EPOLLERR))
		tcp_hangup(c, events);
	if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
		tcp_flush(c);
}

/* ------------------------------------------------------------------ connections */

/* A connection on @fd; @tls (taken) for tls://, @ops the module it belongs to. */
static struct tcp_conn *tcp_conn_new(struct xport_ctx *ctx, int fd, struct xport_tls *tls,
				     const struct xport_ops *ops)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (!c)
		return NULL;
	c->rxbuf = malloc(TCP_RXBUF_LEN);
	if (!c->rxbuf) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->poll.fd = fd;
	c->poll.handler = tcp_conn_handler;
	c->rx_state = RX_HDR;
	c->tls = tls;
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
		sockaddr_to_url((struct sockaddr *)&ss, ops->scheme, c->base.peer,
				sizeof(c->base.peer));
	else
		snprintf(c->base.peer, sizeof(c->base.peer), "%s://?", ops->scheme);
	tcp_tune_socket(fd);
	xport_conn_init(&c->base, ops, ctx);
	c->poll_events = EPOLLIN;
	if (xport_poll_add(ctx, &c->poll, EPOLLIN)) {
		/* Not pollable: report it closed right away; the caller still gets it. */
		pthread_mutex_lock(&c->lock);
		tcp_close_locked(c, -EIO);
		pthread_mutex_unlock(&c->lock);
	}
	return c;
}

static void tcp_conn_close(struct xport_conn *conn, int flush)
{
	struct tcp_conn *c = tcp_conn_of(conn);

	pthread_mutex_lock(&c->lock);
	if (flush && !atomic_load(&c->base.closing))
		c->close_when_sent = 1;
	/*
	 * Only a flushing close waits for the queue: a hard close after an
	 * earlier close_when_sent must not wait on a peer that stopped reading.
	 */
	if (flush && c->close_when_sent && !tcp_tx_idle_locked(c))
		tcp_update_poll_locked(c);	/* tcp_flush() closes when done */
	else
		tcp_close_locked(c, 0);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Closing a socket with unread input sends a reset, which can destroy the error
 * reply we just sent before the peer reads it; swallow what has arrived first.
 */
static void rx_discard(int fd)
{
	char buf[16384];
	int i;

	for (i = 0; i < 64; i++)
		if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			break;
}

/* The receive budget has room again: deliver what is buffered, then read on. */
static void tcp_conn_rx_resume(struct xport_conn *conn)
{
	struct tcp_conn *c = tcp_conn_of(conn);
	int err;

	pthread_mutex_lock(&c->lock);
	if (c->reaped) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	tcp_update_poll_locked(c);
	pthread_mutex_unlock(&c->lock);
	err = rx_parse(c);
	if (err) {
		rx_failed(c, err);
		return;
	}
	if (c->tls)
		tcp_rx(c);	/* a kick: input TLS holds */
}

static void tcp_conn_pause_rx(struct xport_conn *conn, int paused)
{
	struct tcp_conn *c = tcp_conn_of(conn);

	pthread_mutex_lock(&c->lock);
	c->rx_paused = paused;
	tcp_update_poll_locked(c);
	pthread_mutex_unlock(&c->lock);
}

static void tcp_conn_set_tx_limit(struct xport_conn *conn, size_t max)
{
	struct tcp_conn *c = tcp_conn_of(conn);

	pthread_mutex_lock(&c->lock);
	c->tx_limit = max;
	tcp_update_poll_locked(c);
	pthread_mutex_unlock(&c->lock);
}

static size_t tcp_conn_queued_bytes(struct xport_conn *conn)
{
	struct tcp_conn *c = tcp_conn_of(conn);
	size_t n;

	pthread_mutex_lock(&c->lock);
	n = c->tx_queued + (c->tls ? xport_tls_tx_pending(c->tls) : 0);
	pthread_mutex_unlock(&c->lock);
	return n;
}

static void tcp_conn_reap(struct xport_conn *conn)
{
	struct tcp_conn *c = tcp_conn_of(conn);
	int status;

	pthread_mutex_lock(&c->lock);
	if (c->reaped) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	atomic_store(&c->base.closing, 1);
	tx_cancel_all_locked(c, -ECANCELED);
	xport_poll_del(conn->ctx, &c->poll);
	if (c->close_when_sent)
		rx_discard(c->poll.fd);
	close(c->poll.fd);
	c->poll.fd = -1;
	c->reaped = 1;
	status = c->close_status;
	pthread_mutex_unlock(&c->lock);

	xport_msg_free(c->rx_msg);
	c->rx_msg = NULL;
	xport_conn_closed(conn, status);
}

static void tcp_conn_free(struct xport_conn *conn)
{
	struct tcp_conn *c = tcp_conn_of(conn);

	/* Only a connection never reaped (context gone first) still has an fd. */
	if (c->poll.fd >= 0)
		close(c->poll.fd);
	xport_msg_free(c->rx_msg);
	xport_tls_free(c->tls);
	pthread_mutex_destroy(&c->lock);
	free(c->rxbuf);
	free(c);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connect one address, waiting until @deadline (ms, monotonic; 0 = forever). */
static int connect_one(const struct addrinfo *ai, int64_t deadline, int *out_fd)
{
	struct pollfd pfd;
	socklen_t sl;
	int fd, err, left;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		goto ok;
	if (errno != EINPROGRESS) {
		err = -errno;
		goto err;
	}
	for (;;) {
		left = -1;
		if (deadline) {
			int64_t l = deadline - mono_ms();

			if (l <= 0) {
				err = -ETIMEDOUT;
				goto err;
			}
			left = l > 0x7fffffff ? 0x7fffffff : (int)l;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		pfd.revents = 0;
		err = poll(&pfd, 1, left);
		if (err < 0 && errno == EINTR)
			continue;
		if (err < 0) {
			err = -errno;
			goto err;
		}
		if (err > 0)
			break;
	}
	sl = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0) {
		err = -errno;
		goto err;
	}
	if (err) {
		err = -err;
		goto err;
	}
ok:
	*out_fd = fd;
	return 0;
err:
	close(fd);
	return err;
}

static int stream_connect(struct xport_ctx *ctx, const struct xport_ops *ops,
			  const char *hostport, int timeout_ms, struct xport_conn **out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	char host[256], port[16];
	int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : 0;
	struct xport_tls *tls = NULL;
	struct tcp_conn *c;
	int err, fd = -1;

	if (xport_split_hostport(hostport, host, sizeof(host), port, sizeof(port)))
		return -EINVAL;
	err = getaddrinfo(host, port, &hints, &res);
	if (err)
		return err == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	err = -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		err = connect_one(ai, deadline ? deadline : 0, &fd);
		if (!err || err == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (err)
		return err;
	if (ops == &xport_tls_ops) {
		char peer[XPORT_URL_MAX];

		snprintf(peer, sizeof(peer), "tls://%s", hostport);
		err = xport_tls_connect(fd, xport_ctx_tls_client(ctx), deadline, peer, &tls);
		if (err) {
			close(fd);
			return err;
		}
	}
	c = tcp_conn_new(ctx, fd, tls, ops);
	if (!c) {
		xport_tls_free(tls);
		close(fd);
		return -ENOMEM;
	}
	*out = &c->base;
	return 0;
}

static int tcp_connect(struct xport_ctx *ctx, const char *hostport, int timeout_ms,
		       struct xport_conn **out)
{
	return stream_connect(ctx, &xport_tcp_ops, hostport, timeout_ms, out);
}

static int tls_connect(struct xport_ctx *ctx, const char *hostport, int timeout_ms,
		       struct xport_conn **out)
{
	return stream_connect(ctx, &xport_tls_ops, hostport, timeout_ms, out);
}

/* ------------------------------------------------------------------ listeners */

static void tcp_accept_handler(struct xport_poll *p, uint32_t events)
{
	struct tcp_listener *l =
		(struct tcp_listener *)((uint8_t *)p - offsetof(struct tcp_listener, poll));
	struct xport_event ev = { .type = XPORT_EV_ACCEPT };
	struct tcp_conn *c;
	int i, fd;

	for (i = 0; i < TCP_ACCEPT_BUDGET; i++) {
		fd = accept4(p->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && l->spare_fd >= 0) {
				/*
				 * The peer would wait in the backlog, and the level-triggered
				 * listener spin, until an fd frees up: hang up on it instead.
				 */
				int err = errno;

				close(l->spare_fd);
				fd = accept4(p->fd, NULL, NULL, SOCK_CLOEXEC);
				if (fd >= 0)
					close(fd);
				l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				if (fd < 0)
					return;	/* nobody was waiting after all */
				log_warn(1000023,
					 "%s: accept: %s; dropped a connection", l->base.url,
					 strerror(err));
				continue;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn(1000024, "%s: accept: %s", l->base.url, strerror(errno));
			return;
		}
		c = tcp_conn_new(l->base.ctx, fd, NULL, l->base.ops);
		if (!c) {
			log_warn(1000025, "%s: out of memory for a new connection", l->base.url);
			close(fd);
			continue;
		}
		/* Nobody else knows c yet: its TLS state can still be attached. */
		if (l->base.ops == &xport_tls_ops &&
		    xport_tls_accept(fd, xport_ctx_tls_server(l->base.ctx), c->base.peer, &c->tls))
			tcp_fail(c, -ENOMEM);	/* the caller gets it closed */
		/* The connection's caller reference goes to whoever handles the event. */
		ev.conn = &c->base;
		xport_cq_push(l->base.ctx, &ev);
	}
}

static int stream_listen(struct xport_ctx *ctx, const struct xport_ops *ops,
			 const char *hostport, struct xport_listener **out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[256], port[16];
	struct tcp_listener *l;
	const char *node;
	unsigned int bound_port;
	int err, fd = -1, one = 1;

	if (xport_split_hostport(hostport, host, sizeof(host), port, sizeof(port)))
		return -EINVAL;
	node = host[0] && strcmp(host, "*") != 0 ? host : NULL;
	err = getaddrinfo(node, port, &hints, &res);
	if (err)
		return err == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	err = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, TCP_LISTEN_BACKLOG) == 0) {
			err = 0;
			break;
		}
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (err)
		return err;

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		err = -errno;
		goto err_close;
	}
	bound_port = ss.ss_family == AF_INET6 ?
		ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
		ntohs(((struct sockaddr_in *)&ss)->sin_port);

	l = calloc(1, sizeof(*l));
	if (!l) {
		err = -ENOMEM;
		goto err_close;
	}
	l->base.ops = ops;
	l->base.ctx = ctx;
	if (strchr(host, ':'))
		snprintf(l->base.url, sizeof(l->base.url), "%s://[%s]:%u", ops->scheme, host,
			 bound_port);
	else
		snprintf(l->base.url, sizeof(l->base.url), "%s://%s:%u", ops->scheme,
			 node ? host : "0.0.0.0", bound_port);
	l->poll.fd = fd;
	l->poll.handler = tcp_accept_handler;
	l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	err = xport_poll_add(ctx, &l->poll, EPOLLIN);
	if (err) {
		if (l->spare_fd >= 0)
			close(l->spare_fd);
		free(l);
		goto err_close;
	}
	*out = &l->base;
	return 0;
err_close:
	close(fd);
	return err;
}

static int tcp_listen(struct xport_ctx *ctx, const char *hostport, struct xport_listener **out)
{
	return stream_listen(ctx, &xport_tcp_ops, hostport, out);
}

static int tls_listen(struct xport_ctx *ctx, const char *hostport, struct xport_listener **out)
{
	return stream_listen(ctx, &xport_tls_ops, hostport, out);
}

static void tcp_listener_free(struct xport_listener *base)
{
	struct tcp_listener *l = (struct tcp_listener *)base;

	xport_poll_del(base->ctx, &l->poll);
	close(l->poll.fd);
	if (l->spare_fd >= 0)
		close(l->spare_fd);
	free(l);
}

/* What tcp:// and tls:// share: everything but making connections. */
#define STREAM_CONN_OPS						\
	.listener_free	= tcp_listener_free,			\
	.post_send	= tcp_post_send,			\
	.conn_close	= tcp_conn_close,			\
	.conn_pause_rx	= tcp_conn_pause_rx,			\
	.conn_rx_resume	= tcp_conn_rx_resume,			\
	.conn_set_tx_limit = tcp_conn_set_tx_limit,		\
	.conn_queued_bytes = tcp_conn_queued_bytes,		\
	.conn_reap	= tcp_conn_reap,			\
	.conn_free	= tcp_conn_free

const struct xport_ops xport_tcp_ops = {
	.scheme		= "tcp",
	.listen		= tcp_listen,
	.connect	= tcp_connect,
	STREAM_CONN_OPS,
};

/* tls://: the same connections with TLS 1.3 between the queues and the socket. */
const struct xport_ops xport_tls_ops = {
	.scheme		= "tls",
	.listen		= tls_listen,
	.connect	= tls_connect,
	STREAM_CONN_OPS,
};
