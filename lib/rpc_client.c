// SPDX-License-Identifier: MIT
/*
 * rpc_client.c - the client half of lib/rpc: connect and authenticate, then
 * match replies to calls by tag. A progress thread per connection runs the
 * transport; callers wait on their own condition variable.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>
#include <stdatomic.h>

#include <openssl/crypto.h>

#include "log.h"
#include "rdfs.pb-c.h"
#include "rpc_internal.h"

#define RPC_TAG_BUCKETS		256
/*
 * Most partial frames one reply may have: one per 4 KiB block of the largest
 * reply. A bound on the count, not only the bytes, so empty parts cannot grow
 * the array without limit.
 */
#define RPC_REPLY_PARTS_MAX	((int)(RDFS_MAX_DATA / RDFS_BLOCK_SIZE))

struct rpc_pending {
	struct rpc_client *c;
	struct rpc_pending *hnext;	/* tag hash chain */
	uint32_t tag;
	int in_table;			/* waiting for its reply */
	int done;			/* reply or failure arrived */
	int status;			/* failure: -ENOTCONN */
	int sending;			/* transport still reads the caller's data */
	int sink;			/* the reply's data may be placed (rpc_call_start_into) */
	int waiter_gone;		/* rpc_call_wait() returned */
	struct xport_msg *msg;
	struct xport_msg **parts;	/* RDFS_FRAME_MORE frames so far, in order */
	int nparts, parts_cap;
	size_t parts_bytes;		/* their data */
	uint8_t *body;
	pthread_cond_t cond;
};

struct rpc_client {
	struct xport_ctx *ctx;
	struct xport_conn *conn;
	pthread_t thread;
	int thread_started;
	atomic_int broken;
	atomic_int failed;		/* a protocol error: closing, CLOSED not seen yet */
	int stopping;			/* progress thread: exit at the next wake */

	pthread_mutex_t lock;		/* table, next_tag, every pending's state */
	struct rpc_pending *table[RPC_TAG_BUCKETS];
	uint32_t next_tag;
	char url[RPC_URL_MAX];
};

static void parts_free(struct xport_msg **parts, int nparts)
{
	int i;

	for (i = 0; i < nparts; i++)
		xport_msg_free(parts[i]);
	free(parts);
}

void rpc_reply_release(struct rpc_reply *r)
{
	if (!r)
		return;
	xport_msg_free(r->msg);
	r->msg = NULL;
	parts_free(r->parts, r->nparts);
	r->parts = NULL;
	r->nparts = 0;
}

size_t rpc_reply_data_len(const struct rpc_reply *r)
{
	size_t n = r->msg ? r->msg->hdr.data_len : 0;
	int i;

	for (i = 0; i < r->nparts; i++)
		n += r->parts[i]->hdr.data_len;
	return n;
}

long long rpc_reply_placed_len(const struct rpc_reply *r)
{
	const struct xport_msg *m;
	uint64_t n = 0;
	int i;

	for (i = 0; i <= r->nparts; i++) {
		m = i < r->nparts ? r->parts[i] : r->msg;
		if (!m || !m->placed_len)
			continue;
		if (m->placed_off != n)
			return -EPROTO;
		n += m->placed_len;
	}
	return (long long)n;
}

int rpc_reply_data_iov(const struct rpc_reply *r, struct iovec *iov, int max)
{
	const struct xport_msg *m;
	int i, n = 0;

	for (i = 0; i <= r->nparts; i++) {
		m = i < r->nparts ? r->parts[i] : r->msg;
		if (!m || !m->hdr.data_len)
			continue;
		if (n < max) {
			iov[n].iov_base = m->data;
			iov[n].iov_len = m->hdr.data_len;
		}
		n++;
	}
	return n;
}

size_t rpc_reply_data_copy(const struct rpc_reply *r, size_t off, void *dst, size_t len)
{
	const struct xport_msg *m;
	size_t done = 0, n;
	int i;

	for (i = 0; i <= r->nparts && done < len; i++) {
		m = i < r->nparts ? r->parts[i] : r->msg;
		if (!m)
			continue;
		if (off >= m->hdr.data_len) {
			off -= m->hdr.data_len;
			continue;
		}
		n = m->hdr.data_len - off;
		if (n > len - done)
			n = len - done;
		memcpy((uint8_t *)dst + done, m->data + off, n);
		done += n;
		off = 0;
	}
	return done;
}

/*
 * A reply's status as the caller may use it: 0 or -errno. Anything else from
 * the wire would pass for a count or a success in callers that test ret < 0.
 */
static int wire_status(int32_t status)
{
	return status <= 0 && status >= -4095 ? status : -EPROTO;
}

static void pending_free(struct rpc_pending *p)
{
	free(p->body);
	xport_msg_free(p->msg);
	parts_free(p->parts, p->nparts);
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

/*
 * Under c->lock: keep partial frame @m with @p's earlier ones. -EMSGSIZE when
 * the reply grows past what one reply may carry (a broken or hostile server).
 */
static int pending_add_part(struct rpc_pending *p, struct xport_msg *m)
{
	struct xport_msg **np;
	int cap;

	if (p->parts_bytes + m->hdr.data_len > RDFS_MAX_DATA ||
	    p->nparts >= RPC_REPLY_PARTS_MAX)
		return -EMSGSIZE;
	if (p->nparts == p->parts_cap) {
		cap = p->parts_cap ? p->parts_cap * 2 : 16;
		np = realloc(p->parts, (size_t)cap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		p->parts = np;
		p->parts_cap = cap;
	}
	p->parts[p->nparts++] = m;
	p->parts_bytes += m->hdr.data_len;
	return 0;
}

/*
 * A reply frame: a part is kept with its call, a final frame completes it.
 * Frames for a tag nobody waits for (the call timed out) are dropped. Returns
 * -EMSGSIZE/-ENOMEM when @m was not taken and the connection must go.
 */
static int client_take_reply(struct rpc_client *c, struct xport_msg *m)
{
	struct rpc_pending *p;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	p = *table_slot(c, m->hdr.tag);
	if (!p) {
		xport_msg_free(m);	/* the caller gave up on it */
	} else if (m->hdr.flags & RDFS_FRAME_MORE) {
		err = pending_add_part(p, m);
	} else if (p->parts_bytes + m->hdr.data_len > RDFS_MAX_DATA) {
		err = -EMSGSIZE;
	} else {
		table_take(c, m->hdr.tag);
		p->msg = m;
		p->done = 1;
		pthread_cond_signal(&p->cond);
	}
	if (err) {
		/*
		 * The call fails as on a lost connection, now: a later frame of the
		 * same batch must not complete it with data missing.
		 */
		atomic_store(&c->failed, 1);
		table_take(c, m->hdr.tag);
		p->done = 1;
		p->status = -ENOTCONN;
		pthread_cond_signal(&p->cond);
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

static void client_handle_event(struct rpc_client *c, struct xport_event *ev)
{
	struct rpc_pending *p;
	int err;

	switch (ev->type) {
	case XPORT_EV_RECV:
		if (!(ev->msg->hdr.flags & RDFS_FRAME_REPLY)) {
			log_debug(1000004, "%s: ignoring unsolicited %s", c->url,
				  frame_op_name(ev->msg->hdr.opcode));
			xport_msg_free(ev->msg);
			break;
		}
		err = client_take_reply(c, ev->msg);
		if (err) {
			log_error(1000005, "%s: %s reply (tag=%u) over %u bytes of data; closing",
				  c->url, frame_op_name(ev->msg->hdr.opcode), ev->msg->hdr.tag,
				  RDFS_MAX_DATA);
			xport_msg_free(ev->msg);
			xport_conn_close(c->conn);
		}
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
			log_info(1000006, "%s: connection lost%s%s", c->url, ev->status ? ": " : "",
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
			log_error(1000007, "%s: transport failure: %s", c->url, strerror(-n));
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
			int64_t l = deadline - rpc_mono_ms();

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
	err = rpc_send_msg(c->conn, RDFS_OP_AUTH_RESPONSE, 0, 0, 0, &resp.base, NULL, 0);
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
		err = wire_status(m->hdr.status);
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
	int64_t deadline = timeout_ms >= 0 ? rpc_mono_ms() + timeout_ms : 0;
	uint8_t psk[XPORT_TLS_PSK_LEN];
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
	/* tls:// proves the same claim with the same key inside TLS (lib/xport_tls.h) */
	auth_tls_psk(secret, psk);
	err = xport_ctx_set_tls_client(c->ctx, role, psk);
	OPENSSL_cleanse(psk, sizeof(psk));
	if (err)
		goto err_ctx;
	err = xport_connect(c->ctx, url, timeout_ms, &c->conn);
	if (err)
		goto err_ctx;
	err = client_handshake(c, secret, role, deadline ? deadline : 0);
	if ((err == -ECONNRESET || err == -ETIMEDOUT) && !strncmp(url, "tcp://", 6))
		/* a tls:// server waits for a ClientHello and hangs up at its handshake timeout */
		log_warn(1000008,
			 "%s: closed before its challenge (a server that went away, or one "
			 "that listens on tls:// only)", url);
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
	return atomic_load(&((struct rpc_client *)c)->broken) ||
	       atomic_load(&((struct rpc_client *)c)->failed);
}

const char *rpc_client_url(const struct rpc_client *c)
{
	return c->url;
}

static int call_start(struct rpc_client *c, uint16_t op, const ProtobufCMessage *req,
		      const struct iovec *data, int niov, const struct iovec *dest, int ndest,
		      struct rpc_pending **out);

int rpc_call_start(struct rpc_client *c, uint16_t op, const ProtobufCMessage *req,
		   const struct iovec *data, int niov, struct rpc_pending **out)
{
	return call_start(c, op, req, data, niov, NULL, 0, out);
}

int rpc_call_start_into(struct rpc_client *c, uint16_t op, const ProtobufCMessage *req,
			const struct iovec *data, int niov, const struct iovec *dest, int ndest,
			struct rpc_pending **out)
{
	if (ndest <= 0 || !(xport_conn_caps(c->conn) & XPORT_CAP_RDMA))
		return call_start(c, op, req, data, niov, NULL, 0, out);
	return call_start(c, op, req, data, niov, dest, ndest, out);
}

int rpc_client_can_place(const struct rpc_client *c)
{
	return (xport_conn_caps(c->conn) & XPORT_CAP_RDMA) != 0;
}

static int call_start(struct rpc_client *c, uint16_t op, const ProtobufCMessage *req,
		      const struct iovec *data, int niov, const struct iovec *dest, int ndest,
		      struct rpc_pending **out)
{
	struct rdfs_frame_hdr h;
	struct rpc_pending *p;
	size_t blen = 0, dlen;
	int err;

	if (rpc_client_broken(c))
		return -ENOTCONN;
	if (op == 0 || op >= RDFS_OP_MAX || niov < 0)
		return -EINVAL;
	err = rpc_iov_sum(data, niov, &dlen);
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

	rpc_hdr_init(&h, op, 0, 0, p->tag, blen, dlen);
	p->sink = ndest > 0;
	if (p->sink)
		err = xport_post_send_sink(c->conn, &h, p->body, data, niov, dest, ndest,
					   niov > 0 ? p : NULL);
	else
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
	int err = 0, close_conn = 0, free_now, cancel_sink;
	uint32_t tag;

	reply->status = 0;
	reply->msg = NULL;
	reply->parts = NULL;
	reply->nparts = 0;
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
			reply->status = wire_status(p->msg->hdr.status);
			reply->msg = p->msg;
			p->msg = NULL;
			/* Data sent before a failure is not the answer: pending_free() drops it. */
			if (reply->status == 0) {
				reply->parts = p->parts;
				reply->nparts = p->nparts;
				p->parts = NULL;
				p->nparts = 0;
			}
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
	cancel_sink = err && p->sink;
	tag = p->tag;
	pthread_mutex_unlock(&c->lock);
	/* The caller's buffer is its own again: no late WRITE may reach it. */
	if (cancel_sink)
		xport_sink_cancel(c->conn, tag);

	if (close_conn) {
		log_warn(1000009,
			 "%s: tag=%u: call timed out with data unsent; closing the connection",
			 c->url, tag);
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
