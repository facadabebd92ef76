// SPDX-License-Identifier: MIT
/*
 * rpc.c - request/reply over lib/xport: the authentication handshake, tag
 * matching of replies to calls (client) and the authenticated request stream
 * (server).
 *
 * Handshake, one round trip after connect:
 *   1. server -> AUTH_CHALLENGE { nonce Ns }
 *   2. client -> AUTH_RESPONSE  { HMAC(secret, "rdfs-auth-client" Ns Nc role), Nc, role }
 *   3. server -> AUTH_RESULT    status 0 { HMAC(secret, "rdfs-auth-server" Nc Ns) }
 *      or status -EACCES with an Error body, and the server hangs up.
 * The client checks the server's proof too, so neither side talks to an impostor.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>
#include <stdatomic.h>

#include "log.h"
#include "rdfs.pb-c.h"
#include "rpc.h"

#define RPC_PROTOCOL_VERSION	1
/* An unauthenticated peer is dropped after this long. */
#define RPC_HANDSHAKE_MS	10000
#define RPC_ROLE_MAX		32
#define RPC_TAG_BUCKETS		256
#define RPC_EVENT_BATCH		32
#define RPC_URL_MAX		300
/* Bodies up to this size are packed on the stack. */
#define RPC_STACK_BODY		4096
/* What an unauthenticated peer may send: an AuthResponse, never bulk data. */
#define RPC_PREAUTH_BODY	4096

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void hdr_init(struct rdfs_frame_hdr *h, uint16_t op, uint8_t flags, int status,
		     uint32_t tag, size_t body_len, size_t data_len)
{
	h->magic = RDFS_FRAME_MAGIC;
	h->version = RDFS_FRAME_VERSION;
	h->flags = flags;
	h->opcode = op;
	h->status = status;
	h->tag = tag;
	h->body_len = (uint32_t)body_len;
	h->data_len = (uint32_t)data_len;
}

static int iov_sum(const struct iovec *iov, int niov, size_t *out)
{
	size_t t = 0;
	int i;

	for (i = 0; i < niov; i++) {
		t += iov[i].iov_len;
		if (t > RDFS_MAX_DATA)
			return -EMSGSIZE;
	}
	*out = t;
	return 0;
}

/*
 * Pack @m into @stackbuf when it fits, else into a malloc'ed buffer. *@buf is
 * set to the bytes; the caller frees *@buf when it is not @stackbuf.
 */
static int pack_body(const ProtobufCMessage *m, uint8_t *stackbuf, size_t stacklen,
		     uint8_t **buf, size_t *len)
{
	size_t n;

	*buf = NULL;
	*len = 0;
	if (!m)
		return 0;
	n = protobuf_c_message_get_packed_size(m);
	if (n > RDFS_MAX_BODY)
		return -EMSGSIZE;
	if (n == 0)
		return 0;
	*buf = n <= stacklen ? stackbuf : malloc(n);
	if (!*buf)
		return -ENOMEM;
	*len = protobuf_c_message_pack(m, *buf);
	return 0;
}

/* Send a message whose body is @m (copied if the socket cannot take it at once). */
static int send_msg(struct xport_conn *conn, uint16_t op, uint8_t flags, int status,
		    uint32_t tag, const ProtobufCMessage *m, const struct iovec *data, int niov)
{
	uint8_t stackbuf[RPC_STACK_BODY];
	struct rdfs_frame_hdr h;
	size_t blen, dlen;
	uint8_t *body;
	int err;

	err = iov_sum(data, niov, &dlen);
	if (err)
		return err;
	err = pack_body(m, stackbuf, sizeof(stackbuf), &body, &blen);
	if (err)
		return err;
	hdr_init(&h, op, flags, status, tag, blen, dlen);
	err = xport_post_send(conn, &h, body, data, niov, NULL);
	if (body != stackbuf)
		free(body);
	return err;
}

static int send_error(struct xport_conn *conn, uint16_t op, uint32_t tag, int status,
		      const char *message)
{
	Rdfs__Error e = RDFS__ERROR__INIT;

	e.message = (char *)(message ? message : strerror(-status));
	return send_msg(conn, op, RDFS_FRAME_REPLY, status, tag, &e.base, NULL, 0);
}

/* ================================================================== client */

struct rpc_pending {
	struct rpc_client *c;
	struct rpc_pending *hnext;	/* tag hash chain */
	uint32_t tag;
	int in_table;			/* waiting for its reply */
	int done;			/* reply or failure arrived */
	int status;			/* failure: -ENOTCONN */
	int sending;			/* transport still reads the caller's data */
	int waiter_gone;		/* rpc_call_wait() returned */
	struct xport_msg *msg;
	uint8_t *body;
	pthread_cond_t cond;
};

struct rpc_client {
	struct xport_ctx *ctx;
	struct xport_conn *conn;
	pthread_t thread;
	int thread_started;
	atomic_int broken;
	int stopping;			/* progress thread: exit at the next wake */

	pthread_mutex_t lock;		/* table, next_tag, every pending's state */
	struct rpc_pending *table[RPC_TAG_BUCKETS];
	uint32_t next_tag;
	char url[RPC_URL_MAX];
};

void rpc_reply_release(struct rpc_reply *r)
{
	if (!r)
		return;
	xport_msg_free(r->msg);
	r->msg = NULL;
}

static void pending_free(struct rpc_pending *p)
{
	free(p->body);
	xport_msg_free(p->msg);
	pthread_cond_destroy(&p->cond);
	free(p);
}

static struct rpc_pending **table_slot(struct rpc_client *c, uint32_t tag)
{
	struct rpc_pending **pp = &c->table[tag % RPC_TAG_BUCKETS];

	while (*pp && (*pp)->tag != tag)
		pp = &(*pp)->hnext;
	return pp;
}

/* Under c->lock. */
static struct rpc_pending *table_take(struct rpc_client *c, uint32_t tag)
{
	struct rpc_pending **pp = table_slot(c, tag), *p = *pp;

	if (p) {
		*pp = p->hnext;
		p->hnext = NULL;
		p->in_table = 0;
	}
	return p;
}

/* Under c->lock: every waiting call fails; the connection is gone. */
static void fail_all_locked(struct rpc_client *c)
{
	struct rpc_pending *p;
	int i;

	for (i = 0; i < RPC_TAG_BUCKETS; i++) {
		while ((p = c->table[i])) {
			c->table[i] = p->hnext;
			p->hnext = NULL;
			p->in_table = 0;
			p->done = 1;
			p->status = -ENOTCONN;
			pthread_cond_signal(&p->cond);
		}
	}
}

static void client_handle_event(struct rpc_client *c, struct xport_event *ev)
{
	struct rpc_pending *p;

	switch (ev->type) {
	case XPORT_EV_RECV:
		if (!(ev->msg->hdr.flags & RDFS_FRAME_REPLY)) {
			log_debug("%s: ignoring unsolicited %s", c->url,
				  frame_op_name(ev->msg->hdr.opcode));
			xport_msg_free(ev->msg);
			break;
		}
		pthread_mutex_lock(&c->lock);
		p = table_take(c, ev->msg->hdr.tag);
		if (p) {
			p->msg = ev->msg;
			p->done = 1;
			pthread_cond_signal(&p->cond);
		}
		pthread_mutex_unlock(&c->lock);
		if (!p)
			xport_msg_free(ev->msg);	/* the caller gave up on it */
		break;
	case XPORT_EV_SEND:
		p = ev->user;
		pthread_mutex_lock(&c->lock);
		p->sending = 0;
		if (p->waiter_gone) {
			pthread_mutex_unlock(&c->lock);
			pending_free(p);
			break;
		}
		pthread_mutex_unlock(&c->lock);
		break;
	case XPORT_EV_CLOSED:
		if (!atomic_exchange(&c->broken, 1) && !c->stopping)
			log_info("%s: connection lost%s%s", c->url, ev->status ? ": " : "",
				 ev->status ? strerror(-ev->status) : "");
		pthread_mutex_lock(&c->lock);
		fail_all_locked(c);
		pthread_mutex_unlock(&c->lock);
		break;
	default:
		break;
	}
}

static void *client_progress(void *arg)
{
	struct xport_event evs[RPC_EVENT_BATCH];
	struct rpc_client *c = arg;
	int i, n;

	while (!c->stopping) {
		n = xport_test(c->ctx, evs, RPC_EVENT_BATCH, -1);
		if (n < 0) {
			log_error("%s: transport failure: %s", c->url, strerror(-n));
			xport_conn_close(c->conn);
			continue;
		}
		for (i = 0; i < n; i++) {
			client_handle_event(c, &evs[i]);
			if (evs[i].type == XPORT_EV_WAKE && evs[i].user == c)
				c->stopping = 1;
		}
	}
	return NULL;
}

/* Handshake helper: the next message, or the reason there is none. */
static int wait_msg(struct rpc_client *c, int64_t deadline, struct xport_msg **out)
{
	struct xport_event ev;
	int n, left;

	for (;;) {
		left = -1;
		if (deadline) {
			int64_t l = deadline - mono_ms();

			if (l <= 0)
				return -ETIMEDOUT;
			left = (int)(l > 0x7fffffff ? 0x7fffffff : l);
		}
		n = xport_test(c->ctx, &ev, 1, left);
		if (n < 0)
			return n;
		if (n == 0)
			continue;
		if (ev.type == XPORT_EV_RECV) {
			*out = ev.msg;
			return 0;
		}
		if (ev.type == XPORT_EV_CLOSED)
			return ev.status ? ev.status : -ECONNRESET;
	}
}

static int client_handshake(struct rpc_client *c, const struct auth_secret *secret,
			    const char *role, int64_t deadline)
{
	Rdfs__AuthResponse resp = RDFS__AUTH_RESPONSE__INIT;
	uint8_t client_nonce[AUTH_NONCE_LEN], mac[AUTH_MAC_LEN], expect[AUTH_MAC_LEN];
	uint8_t server_nonce[AUTH_NONCE_LEN];
	Rdfs__AuthChallenge *chal;
	Rdfs__AuthResult *res;
	struct xport_msg *m;
	int err;

	err = wait_msg(c, deadline, &m);
	if (err)
		return err;
	if (m->hdr.opcode != RDFS_OP_AUTH_CHALLENGE) {
		xport_msg_free(m);
		return -EPROTO;
	}
	chal = rdfs__auth_challenge__unpack(NULL, m->hdr.body_len, m->body);
	xport_msg_free(m);
	if (!chal)
		return -EPROTO;
	if (chal->nonce.len != AUTH_NONCE_LEN) {
		rdfs__auth_challenge__free_unpacked(chal, NULL);
		return -EPROTO;
	}
	memcpy(server_nonce, chal->nonce.data, AUTH_NONCE_LEN);
	rdfs__auth_challenge__free_unpacked(chal, NULL);

	err = auth_random(client_nonce, sizeof(client_nonce));
	if (err)
		return err;
	auth_client_proof(secret, server_nonce, client_nonce, role, mac);
	resp.mac.data = mac;
	resp.mac.len = sizeof(mac);
	resp.client_nonce.data = client_nonce;
	resp.client_nonce.len = sizeof(client_nonce);
	resp.role = (char *)role;
	err = send_msg(c->conn, RDFS_OP_AUTH_RESPONSE, 0, 0, 0, &resp.base, NULL, 0);
	if (err)
		return err == -EPIPE ? -ECONNRESET : err;

	err = wait_msg(c, deadline, &m);
	if (err)
		return err;
	if (m->hdr.opcode != RDFS_OP_AUTH_RESULT || !(m->hdr.flags & RDFS_FRAME_REPLY)) {
		xport_msg_free(m);
		return -EPROTO;
	}
	if (m->hdr.status) {
		err = m->hdr.status;
		xport_msg_free(m);
		return err;
	}
	res = rdfs__auth_result__unpack(NULL, m->hdr.body_len, m->body);
	xport_msg_free(m);
	if (!res)
		return -EPROTO;
	auth_server_proof(secret, server_nonce, client_nonce, expect);
	err = res->mac.len == AUTH_MAC_LEN && auth_mac_equal(res->mac.data, expect, AUTH_MAC_LEN)
		? 0 : -EACCES;
	rdfs__auth_result__free_unpacked(res, NULL);
	return err;
}

int rpc_client_connect(const char *url, const struct auth_secret *secret, const char *role,
		       int timeout_ms, struct rpc_client **out)
{
	int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : 0;
	struct rpc_client *c;
	int err;

	if (!url || !secret || !role || !*role || strlen(role) >= RPC_ROLE_MAX)
		return -EINVAL;
	if (strlen(url) >= sizeof(c->url))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	strcpy(c->url, url);
	pthread_mutex_init(&c->lock, NULL);
	c->next_tag = 1;
	err = xport_ctx_create(&c->ctx);
	if (err)
		goto err_free;
	err = xport_connect(c->ctx, url, timeout_ms, &c->conn);
	if (err)
		goto err_ctx;
	err = client_handshake(c, secret, role, deadline ? deadline : 0);
	if (err)
		goto err_conn;
	err = -pthread_create(&c->thread, NULL, client_progress, c);
	if (err)
		goto err_conn;
	c->thread_started = 1;
	*out = c;
	return 0;

err_conn:
	xport_conn_put(c->conn);
err_ctx:
	xport_ctx_destroy(c->ctx);
err_free:
	pthread_mutex_destroy(&c->lock);
	free(c);
	return err;
}

void rpc_client_close(struct rpc_client *c)
{
	struct xport_event ev;
	int n;

	if (!c)
		return;
	if (c->thread_started) {
		xport_ctx_wake(c->ctx, c);
		pthread_join(c->thread, NULL);
	}
	/* Run the close here so cancelled sends free their pendings. */
	c->stopping = 1;
	xport_conn_close(c->conn);
	while (!c->broken) {
		n = xport_test(c->ctx, &ev, 1, 1000);
		if (n <= 0)
			break;
		client_handle_event(c, &ev);
	}
	pthread_mutex_lock(&c->lock);
	atomic_store(&c->broken, 1);
	fail_all_locked(c);
	pthread_mutex_unlock(&c->lock);
	xport_conn_put(c->conn);
	xport_ctx_destroy(c->ctx);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int rpc_client_broken(const struct rpc_client *c)
{
	return atomic_load(&((struct rpc_client *)c)->broken);
}

const char *rpc_client_url(const struct rpc_client *c)
{
	return c->url;
}

int rpc_call_start(struct rpc_client *c, uint16_t op, const ProtobufCMessage *req,
		   const struct iovec *data, int niov, struct rpc_pending **out)
{
	struct rdfs_frame_hdr h;
	struct rpc_pending *p;
	size_t blen = 0, dlen;
	int err;

	if (atomic_load(&c->broken))
		return -ENOTCONN;
	if (op == 0 || op >= RDFS_OP_MAX || niov < 0)
		return -EINVAL;
	err = iov_sum(data, niov, &dlen);
	if (err)
		return err;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->c = c;
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&p->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (req) {
		blen = protobuf_c_message_get_packed_size(req);
		if (blen > RDFS_MAX_BODY) {
			err = -EMSGSIZE;
			goto err_free;
		}
		if (blen) {
			p->body = malloc(blen);
			if (!p->body) {
				err = -ENOMEM;
				goto err_free;
			}
			blen = protobuf_c_message_pack(req, p->body);
		}
	}

	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->broken)) {
		pthread_mutex_unlock(&c->lock);
		err = -ENOTCONN;
		goto err_free;
	}
	/* Tags wrap after 2^32 calls; skip 0 (the handshake's) and any still in use. */
	do {
		p->tag = c->next_tag++;
	} while (p->tag == 0 || *table_slot(c, p->tag));
	p->hnext = c->table[p->tag % RPC_TAG_BUCKETS];
	c->table[p->tag % RPC_TAG_BUCKETS] = p;
	p->in_table = 1;
	/* Data is sent by reference (no copy), so the transport reports when it is done. */
	p->sending = niov > 0;
	pthread_mutex_unlock(&c->lock);

	hdr_init(&h, op, 0, 0, p->tag, blen, dlen);
	err = xport_post_send(c->conn, &h, p->body, data, niov, niov > 0 ? p : NULL);
	if (err) {
		pthread_mutex_lock(&c->lock);
		if (p->in_table)
			table_take(c, p->tag);
		pthread_mutex_unlock(&c->lock);
		if (err == -EPIPE)
			err = -ENOTCONN;
		goto err_free;
	}
	*out = p;
	return 0;

err_free:
	pending_free(p);
	return err;
}

int rpc_call_wait(struct rpc_pending *p, int timeout_ms, struct rpc_reply *reply)
{
	struct rpc_client *c = p->c;
	struct timespec ts;
	int err = 0, close_conn = 0, free_now;

	reply->status = 0;
	reply->msg = NULL;
	if (timeout_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&c->lock);
	while (!p->done) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&p->cond, &c->lock);
		} else if (pthread_cond_timedwait(&p->cond, &c->lock, &ts) == ETIMEDOUT) {
			if (!p->done)
				break;
		}
	}
	if (p->done) {
		if (p->msg) {
			reply->status = p->msg->hdr.status;
			reply->msg = p->msg;
			p->msg = NULL;
		} else {
			err = p->status ? p->status : -ENOTCONN;
		}
	} else {
		if (p->in_table)
			table_take(c, p->tag);
		err = -ETIMEDOUT;
		/*
		 * The caller frees its data when we return, but the transport may still
		 * be reading it: only closing the connection takes it back.
		 */
		close_conn = p->sending;
	}
	p->waiter_gone = 1;
	free_now = !p->sending;
	pthread_mutex_unlock(&c->lock);

	if (close_conn) {
		log_warn("%s: call timed out with data unsent; closing the connection", c->url);
		xport_conn_close(c->conn);
	}
	if (free_now)
		pending_free(p);
	return err;
}

int rpc_call(struct rpc_client *c, uint16_t op, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
	     int timeout_ms)
{
	static const uint8_t empty[1];
	struct rpc_pending *p;
	struct rpc_reply r;
	int err;

	if (resp)
		*resp = NULL;
	err = rpc_call_start(c, op, req, NULL, 0, &p);
	if (err)
		return err;
	err = rpc_call_wait(p, timeout_ms, &r);
	if (err)
		return err;
	err = r.status;
	if (err == 0 && resp && resp_desc) {
		const uint8_t *body = r.msg->body ? r.msg->body : empty;

		*resp = protobuf_c_message_unpack(resp_desc, NULL, r.msg->hdr.body_len, body);
		if (!*resp)
			err = -EBADMSG;
	}
	rpc_reply_release(&r);
	return err;
}

/* ================================================================== server */

struct rpc_session {
	struct xport_conn *conn;	/* holds the accept reference until CLOSED */
	int authed;
	int rejected;			/* error sent, closing */
	char role[RPC_ROLE_MAX];
	uint8_t nonce[AUTH_NONCE_LEN];
	int64_t deadline_ms;		/* of the handshake */
	void *app;
	struct rpc_session *prev, *next;		/* all sessions */
	struct rpc_session *hs_prev, *hs_next;		/* handshakes, by deadline */
	int on_hs_list;
};

/* A zero-copy reply in flight: its body and the application's completion. */
struct rpc_zc_reply {
	void (*sent)(void *arg, int status);
	void *arg;
	uint8_t body[];
};

struct rpc_server {
	struct xport_ctx *ctx;
	struct auth_secret secret;
	int handshake_ms;
	struct xport_listener **listeners;
	int nlisteners;

	/* Main loop only. */
	struct xport_event evs[RPC_EVENT_BATCH];
	int nev, evpos;
	struct rpc_session *sessions;
	struct rpc_session *hs_head, *hs_tail;
};

/* Only zero-copy replies are posted with a completion on the server. */
static void zc_sent(struct xport_event *ev)
{
	struct rpc_zc_reply *z = ev->user;

	if (!z)
		return;
	z->sent(z->arg, ev->status);
	free(z);
}

static void session_free(void *arg)
{
	free(arg);
}

static void hs_unlink(struct rpc_server *s, struct rpc_session *ss)
{
	if (!ss->on_hs_list)
		return;
	if (ss->hs_prev)
		ss->hs_prev->hs_next = ss->hs_next;
	else
		s->hs_head = ss->hs_next;
	if (ss->hs_next)
		ss->hs_next->hs_prev = ss->hs_prev;
	else
		s->hs_tail = ss->hs_prev;
	ss->hs_prev = ss->hs_next = NULL;
	ss->on_hs_list = 0;
}

static void session_unlink(struct rpc_server *s, struct rpc_session *ss)
{
	hs_unlink(s, ss);
	if (ss->prev)
		ss->prev->next = ss->next;
	else
		s->sessions = ss->next;
	if (ss->next)
		ss->next->prev = ss->prev;
	ss->prev = ss->next = NULL;
}

int rpc_server_create(const char *const *urls, const struct auth_secret *secret,
		      struct rpc_server **out)
{
	struct rpc_server *s;
	int i, n, err;

	if (!urls || !secret)
		return -EINVAL;
	for (n = 0; urls[n]; n++)
		;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->secret = *secret;
	s->handshake_ms = RPC_HANDSHAKE_MS;
	s->listeners = calloc((size_t)n + 1, sizeof(*s->listeners));
	if (!s->listeners) {
		free(s);
		return -ENOMEM;
	}
	err = xport_ctx_create(&s->ctx);
	if (err)
		goto err_free;
	for (i = 0; i < n; i++) {
		err = xport_listen(s->ctx, urls[i], &s->listeners[i]);
		if (err)
			goto err_ctx;
		s->nlisteners++;
	}
	*out = s;
	return 0;
err_ctx:
	xport_ctx_destroy(s->ctx);
err_free:
	free(s->listeners);
	free(s);
	return err;
}

void rpc_server_destroy(struct rpc_server *s)
{
	struct rpc_session *ss, *next;
	struct xport_event *ev;
	int n;

	if (!s)
		return;
	/*
	 * Close every connection, then run the resulting events here: cancelled
	 * zero-copy replies must still reach their completion.
	 */
	for (ss = s->sessions; ss; ss = ss->next)
		xport_conn_close(ss->conn);
	do {
		while (s->evpos < s->nev) {
			ev = &s->evs[s->evpos++];
			switch (ev->type) {
			case XPORT_EV_RECV:
				xport_msg_free(ev->msg);
				break;
			case XPORT_EV_ACCEPT:
				xport_conn_close(ev->conn);
				xport_conn_put(ev->conn);
				break;
			case XPORT_EV_SEND:
				zc_sent(ev);
				break;
			case XPORT_EV_CLOSED:
				ss = xport_conn_user(ev->conn);
				if (ss) {
					session_unlink(s, ss);
					xport_conn_put(ss->conn);
				}
				break;
			default:
				break;
			}
		}
		n = xport_test(s->ctx, s->evs, RPC_EVENT_BATCH, 0);
		s->nev = n > 0 ? n : 0;
		s->evpos = 0;
	} while (n > 0);
	xport_ctx_destroy(s->ctx);
	for (ss = s->sessions; ss; ss = next) {
		next = ss->next;
		session_unlink(s, ss);
		xport_conn_put(ss->conn);
	}
	memset(&s->secret, 0, sizeof(s->secret));
	free(s->listeners);
	free(s);
}

void rpc_server_set_handshake_timeout(struct rpc_server *s, int ms)
{
	s->handshake_ms = ms > 0 ? ms : RPC_HANDSHAKE_MS;
}

const char *rpc_server_url(const struct rpc_server *s, int i)
{
	if (i < 0 || i >= s->nlisteners)
		return NULL;
	return xport_listener_url(s->listeners[i]);
}

int rpc_server_wake(struct rpc_server *s)
{
	return xport_ctx_wake(s->ctx, s);
}

static void server_accept(struct rpc_server *s, struct xport_conn *conn)
{
	Rdfs__AuthChallenge chal = RDFS__AUTH_CHALLENGE__INIT;
	struct rpc_session *ss = calloc(1, sizeof(*ss));

	if (!ss || auth_random(ss->nonce, sizeof(ss->nonce))) {
		log_warn("%s: cannot start a session: out of memory", xport_conn_peer(conn));
		free(ss);
		xport_conn_close(conn);
		xport_conn_put(conn);
		return;
	}
	ss->conn = conn;
	ss->deadline_ms = mono_ms() + s->handshake_ms;
	xport_conn_set_rx_limits(conn, RPC_PREAUTH_BODY, 0);
	xport_conn_set_user(conn, ss);
	xport_conn_set_user_free(conn, session_free);

	ss->next = s->sessions;
	if (s->sessions)
		s->sessions->prev = ss;
	s->sessions = ss;
	ss->hs_prev = s->hs_tail;
	if (s->hs_tail)
		s->hs_tail->hs_next = ss;
	else
		s->hs_head = ss;
	s->hs_tail = ss;
	ss->on_hs_list = 1;

	chal.nonce.data = ss->nonce;
	chal.nonce.len = sizeof(ss->nonce);
	chal.protocol_version = RPC_PROTOCOL_VERSION;
	if (send_msg(conn, RDFS_OP_AUTH_CHALLENGE, 0, 0, 0, &chal.base, NULL, 0))
		xport_conn_close(conn);
}

static int valid_role(const char *role)
{
	size_t i, n = strlen(role);

	if (n == 0 || n >= RPC_ROLE_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (role[i] <= ' ' || role[i] > '~')
			return 0;
	return 1;
}

static void server_reject(struct xport_conn *conn, struct rpc_session *ss, uint16_t op,
			  uint32_t tag, const char *why)
{
	log_warn("%s: %s", xport_conn_peer(conn), why);
	send_error(conn, op, tag, -EACCES, why);
	ss->rejected = 1;
	xport_conn_close_when_sent(conn);
}

static void server_auth(struct rpc_server *s, struct rpc_session *ss, struct xport_msg *m)
{
	Rdfs__AuthResult result = RDFS__AUTH_RESULT__INIT;
	uint8_t expect[AUTH_MAC_LEN], proof[AUTH_MAC_LEN];
	Rdfs__AuthResponse *resp;
	int ok;

	if (m->hdr.opcode != RDFS_OP_AUTH_RESPONSE || (m->hdr.flags & RDFS_FRAME_REPLY)) {
		server_reject(ss->conn, ss, m->hdr.opcode, m->hdr.tag,
			      "request before authentication");
		return;
	}
	resp = rdfs__auth_response__unpack(NULL, m->hdr.body_len, m->body);
	ok = resp && resp->mac.len == AUTH_MAC_LEN &&
	     resp->client_nonce.len == AUTH_NONCE_LEN && resp->role && valid_role(resp->role);
	if (ok) {
		auth_client_proof(&s->secret, ss->nonce, resp->client_nonce.data, resp->role,
				  expect);
		ok = auth_mac_equal(expect, resp->mac.data, AUTH_MAC_LEN);
	}
	if (!ok) {
		if (resp)
			rdfs__auth_response__free_unpacked(resp, NULL);
		server_reject(ss->conn, ss, RDFS_OP_AUTH_RESULT, m->hdr.tag,
			      "authentication failed: wrong cluster secret");
		return;
	}
	ss->authed = 1;
	strcpy(ss->role, resp->role);
	xport_conn_set_rx_limits(ss->conn, RDFS_MAX_BODY, RDFS_MAX_DATA);
	hs_unlink(s, ss);
	auth_server_proof(&s->secret, ss->nonce, resp->client_nonce.data, proof);
	rdfs__auth_response__free_unpacked(resp, NULL);
	result.mac.data = proof;
	result.mac.len = sizeof(proof);
	if (send_msg(ss->conn, RDFS_OP_AUTH_RESULT, RDFS_FRAME_REPLY, 0, m->hdr.tag,
		     &result.base, NULL, 0))
		xport_conn_close(ss->conn);
	else
		log_debug("%s: authenticated as %s", xport_conn_peer(ss->conn), ss->role);
}

/* A message from an authenticated peer: 1 if it is for the application. */
static int server_screen(struct rpc_session *ss, struct xport_msg *m)
{
	uint16_t op = m->hdr.opcode;

	if (m->hdr.flags & RDFS_FRAME_REPLY) {
		send_error(ss->conn, op, m->hdr.tag, -EPROTO, "unexpected reply");
		return 0;
	}
	if (op == RDFS_OP_AUTH_CHALLENGE || op == RDFS_OP_AUTH_RESPONSE ||
	    op == RDFS_OP_AUTH_RESULT) {
		send_error(ss->conn, op, m->hdr.tag, -EPROTO, "already authenticated");
		return 0;
	}
	if (op == RDFS_OP_PING) {
		send_msg(ss->conn, op, RDFS_FRAME_REPLY, 0, m->hdr.tag, NULL, NULL, 0);
		return 0;
	}
	if (strcmp(frame_op_name(op), "unknown") == 0) {
		send_error(ss->conn, op, m->hdr.tag, -ENOSYS, "unknown operation");
		return 0;
	}
	return 1;
}

/* Handle one transport event; returns the application event it makes, or 0. */
static enum rpc_server_event server_event(struct rpc_server *s, struct xport_event *ev,
					  struct rpc_request *req)
{
	struct rpc_session *ss;

	switch (ev->type) {
	case XPORT_EV_ACCEPT:
		server_accept(s, ev->conn);
		return 0;
	case XPORT_EV_RECV:
		ss = xport_conn_user(ev->conn);
		if (!ss || ss->rejected) {
			xport_msg_free(ev->msg);
			return 0;
		}
		if (!ss->authed) {
			server_auth(s, ss, ev->msg);
			xport_msg_free(ev->msg);
			return 0;
		}
		if (!server_screen(ss, ev->msg)) {
			xport_msg_free(ev->msg);
			return 0;
		}
		xport_conn_get(ev->conn);
		req->conn = ev->conn;
		req->msg = ev->msg;
		req->role = ss->role;
		return RPC_SRV_REQUEST;
	case XPORT_EV_CLOSED:
		ss = xport_conn_user(ev->conn);
		if (!ss)
			return 0;
		session_unlink(s, ss);
		if (ss->authed) {
			log_debug("%s: %s disconnected", xport_conn_peer(ev->conn), ss->role);
			xport_conn_get(ev->conn);
			req->conn = ev->conn;
			req->msg = NULL;
			req->role = ss->role;
		}
		xport_conn_put(ss->conn);	/* the event keeps it alive for now */
		return req->conn ? RPC_SRV_CLOSED : 0;
	case XPORT_EV_WAKE:
		return ev->user == s ? RPC_SRV_WAKE : 0;
	case XPORT_EV_SEND:
		zc_sent(ev);
		return 0;
	default:
		return 0;
	}
}

/* Drop peers that have not authenticated in time. Returns ms to the next deadline. */
static int64_t expire_handshakes(struct rpc_server *s, int64_t now)
{
	struct rpc_session *ss;

	while ((ss = s->hs_head) && ss->deadline_ms <= now) {
		hs_unlink(s, ss);
		if (!ss->rejected)
			log_info("%s: no authentication within %d ms; closing",
				 xport_conn_peer(ss->conn), s->handshake_ms);
		ss->rejected = 1;
		xport_conn_close(ss->conn);
	}
	return s->hs_head ? s->hs_head->deadline_ms - now : -1;
}

enum rpc_server_event rpc_server_next(struct rpc_server *s, struct rpc_request *req,
				      int timeout_ms)
{
	int64_t deadline = timeout_ms > 0 ? mono_ms() + timeout_ms : 0;
	enum rpc_server_event e;
	int64_t now, hs_left, left;
	int n, wait_ms;

	memset(req, 0, sizeof(*req));
	for (;;) {
		while (s->evpos < s->nev) {
			e = server_event(s, &s->evs[s->evpos++], req);
			if (e)
				return e;
		}
		now = mono_ms();
		hs_left = expire_handshakes(s, now);
		if (timeout_ms < 0) {
			left = -1;
		} else if (timeout_ms == 0) {
			left = 0;
		} else {
			left = deadline - now;
			if (left < 0)
				left = 0;
		}
		wait_ms = (int)(left < 0 ? hs_left : hs_left < 0 ? left :
				hs_left < left ? hs_left : left);
		n = xport_test(s->ctx, s->evs, RPC_EVENT_BATCH, wait_ms);
		if (n < 0) {
			log_error("transport failure: %s", strerror(-n));
			return RPC_SRV_TIMEOUT;
		}
		s->nev = n;
		s->evpos = 0;
		if (n == 0 && timeout_ms >= 0 && (timeout_ms == 0 || mono_ms() >= deadline))
			return RPC_SRV_TIMEOUT;
	}
}

int rpc_server_reply(struct rpc_request *req, int status, const ProtobufCMessage *resp,
		     const struct iovec *data, int niov)
{
	Rdfs__Error e = RDFS__ERROR__INIT;

	if (!req || !req->conn || !req->msg)
		return -EINVAL;
	if (status > 0)
		status = -status;	/* a positive errno is a caller slip; send what they meant */
	if (!resp && status < 0) {
		e.message = strerror(-status);
		resp = &e.base;
	}
	return send_msg(req->conn, req->msg->hdr.opcode, RDFS_FRAME_REPLY, status,
			req->msg->hdr.tag, resp, data, niov);
}

int rpc_server_reply_error(struct rpc_request *req, int status, const char *errmsg)
{
	if (!req || !req->conn || !req->msg)
		return -EINVAL;
	if (status > 0)
		status = -status;
	return send_error(req->conn, req->msg->hdr.opcode, req->msg->hdr.tag, status, errmsg);
}

int rpc_server_reply_zc(struct rpc_request *req, int status, const ProtobufCMessage *resp,
			const struct iovec *data, int niov,
			void (*sent)(void *arg, int status), void *arg)
{
	Rdfs__Error e = RDFS__ERROR__INIT;
	struct rdfs_frame_hdr h;
	struct rpc_zc_reply *z;
	size_t blen = 0, dlen;
	int err;

	if (!req || !req->conn || !req->msg || !sent)
		return -EINVAL;
	err = iov_sum(data, niov, &dlen);
	if (err)
		return err;
	if (status > 0)
		status = -status;
	if (!resp && status < 0) {
		e.message = strerror(-status);
		resp = &e.base;
	}
	if (resp) {
		blen = protobuf_c_message_get_packed_size(resp);
		if (blen > RDFS_MAX_BODY)
			return -EMSGSIZE;
	}
	/* The body goes by reference too, so it lives with the completion. */
	z = malloc(sizeof(*z) + blen);
	if (!z)
		return -ENOMEM;
	z->sent = sent;
	z->arg = arg;
	if (blen)
		blen = protobuf_c_message_pack(resp, z->body);
	hdr_init(&h, req->msg->hdr.opcode, RDFS_FRAME_REPLY, status, req->msg->hdr.tag, blen, dlen);
	err = xport_post_send(req->conn, &h, z->body, data, niov, z);
	if (err)
		free(z);
	return err;
}

void rpc_request_done(struct rpc_request *req)
{
	if (!req)
		return;
	xport_msg_free(req->msg);
	req->msg = NULL;
	xport_conn_put(req->conn);
	req->conn = NULL;
}

void rpc_conn_set_app(struct xport_conn *conn, void *app)
{
	struct rpc_session *ss = xport_conn_user(conn);

	if (ss)
		ss->app = app;
}

void *rpc_conn_app(struct xport_conn *conn)
{
	struct rpc_session *ss = xport_conn_user(conn);

	return ss ? ss->app : NULL;
}
