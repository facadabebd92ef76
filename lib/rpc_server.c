// SPDX-License-Identifier: MIT
/*
 * rpc_server.c - the server half of lib/rpc: accept, authenticate, and hand the
 * application requests from authenticated peers only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "log.h"
#include "rdfs.pb-c.h"
#include "rpc_internal.h"
#include "rpc_metrics.h"

/* An unauthenticated peer is dropped after this long. */
#define RPC_HANDSHAKE_MS	10000
/* What an unauthenticated peer may send: an AuthResponse, never bulk data. */
#define RPC_PREAUTH_BODY	4096
/*
 * Requests of one connection the application holds (handed out, not yet
 * rpc_request_done()) before we stop reading from it; reading resumes below
 * half. Far above what a well-behaved client has in flight, low enough that one
 * peer cannot fill our memory.
 */
#define RPC_INFLIGHT_REQS	1024
#define RPC_INFLIGHT_BYTES	(64ull << 20)
/* What an unauthenticated peer may have delivered at once: its AuthResponse. */
#define RPC_PREAUTH_REQS	2
/*
 * A peer that, with replies queued for it, takes less than RPC_STALL_MIN_RATE
 * bytes a second of them over the stall time (RPC_STALL_CLOSE_DEFAULT_MS,
 * rpc.h; rpc_server_set_stall_close()) is not reading them, or reads a trickle
 * to look alive while it holds the server's buffers: closed, its memory and
 * whatever it holds of the server's (buffers, range locks) returned. 64 KiB/s
 * is half a megabit: a client that reads at all takes far more. Checked this
 * often, or twice per stall time when that is shorter.
 */
#define RPC_STALL_CHECK_MS	1000
#define RPC_STALL_MIN_RATE	(64u << 10)
/*
 * How often idle timeouts (rpc_conn_set_idle_timeout) are checked, and how
 * long the application may keep the main loop away (between two
 * rpc_server_next() calls) before we assume frames wait unread: a peer cannot
 * be called silent for a time nobody read its socket, so then every peer
 * counts as heard when the loop returns.
 */
#define RPC_IDLE_CHECK_MS	200
#define RPC_IDLE_AWAY_MS	1000

struct rpc_session {
	struct xport_conn *conn;	/* holds the accept reference until CLOSED */
	struct rpc_server *srv;
	int authed;
	int rejected;			/* error sent, closing */
	struct auth_peer peer;
	uint8_t nonce[AUTH_NONCE_LEN];
	int64_t deadline_ms;		/* of the handshake */
	void *app;
	struct rpc_session *prev, *next;		/* all sessions */
	struct rpc_session *hs_prev, *hs_next;		/* handshakes, by deadline */
	int on_hs_list;

	/* main loop: a peer not reading its replies (see close_stalled()) */
	uint64_t stall_sent;		/* bytes it had taken when the window began */
	int64_t stall_since_ms;		/* 0: nothing queued for it */
	int64_t last_rx_ms;		/* main loop: the last frame from the peer */
	atomic_int idle_timeout_ms;	/* 0: none (rpc_conn_set_idle_timeout) */
	atomic_llong app_counter;	/* rpc_conn_counter_add() */

	pthread_mutex_t inflight_lock;	/* main loop and workers: the three below */
	uint64_t inflight_bytes;
	unsigned int inflight_reqs;
	int rx_paused;
};

/* A zero-copy reply in flight: its body and the application's completion. */
struct rpc_zc_reply {
	void (*sent)(void *arg, int status);
	void *arg;
	uint8_t body[];
};

struct rpc_server {
	struct xport_ctx *ctx;
	struct auth_keys keys;
	int (*admit)(void *arg, const struct auth_peer *peer, const char **why);
	void *admit_arg;
	int handshake_ms;
	int stall_close_ms;		/* rpc_server_set_stall_close() */
	struct xport_listener **listeners;
	int nlisteners;

	/* Main loop only. */
	struct xport_event evs[RPC_EVENT_BATCH];
	int nev, evpos;
	struct rpc_session *sessions;
	struct rpc_session *hs_head, *hs_tail;
	unsigned int budget_reqs;	/* per authenticated connection */
	uint64_t budget_bytes;
	int64_t next_stall_check_ms;
	int64_t next_idle_check_ms;
	int64_t returned_ms;		/* when rpc_server_next() last returned */
	atomic_int idle_used;		/* some connection has an idle timeout */
	const struct rpc_metrics *metrics;	/* rpc_server_set_metrics(); NULL: none */
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
	struct rpc_session *ss = arg;

	pthread_mutex_destroy(&ss->inflight_lock);
	free(ss);
}

static uint64_t msg_bytes(const struct xport_msg *m)
{
	return RDFS_FRAME_HDR_LEN + (uint64_t)m->hdr.body_len + m->hdr.data_len;
}

/* Count a request of @bytes handed out (@sign 1) or done (-1); pause or resume reading. */
static void session_account(struct rpc_session *ss, uint64_t bytes, int sign)
{
	pthread_mutex_lock(&ss->inflight_lock);
	if (sign > 0) {
		ss->inflight_bytes += bytes;
		ss->inflight_reqs++;
	} else {
		ss->inflight_bytes -= bytes;
		ss->inflight_reqs--;
	}
	if (!ss->rx_paused && (ss->inflight_reqs > RPC_INFLIGHT_REQS ||
			       ss->inflight_bytes > RPC_INFLIGHT_BYTES)) {
		ss->rx_paused = 1;
		xport_conn_pause_rx(ss->conn, 1);
		log_debug(1000010, "%s: %u requests in progress; pausing its input",
			  xport_conn_peer(ss->conn), ss->inflight_reqs);
	} else if (ss->rx_paused && ss->inflight_reqs <= RPC_INFLIGHT_REQS / 2 &&
		   ss->inflight_bytes <= RPC_INFLIGHT_BYTES / 2) {
		ss->rx_paused = 0;
		xport_conn_pause_rx(ss->conn, 0);
	}
	pthread_mutex_unlock(&ss->inflight_lock);
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

/*
 * tls:// handshakes (progress thread): the PSK of the claim a peer names,
 * from the same keys its AuthResponse is checked with.
 */
static int server_tls_psk(void *arg, const char *identity, uint8_t psk[XPORT_TLS_PSK_LEN])
{
	struct rpc_server *s = arg;
	struct auth_secret key;
	struct auth_peer peer;
	int err;

	err = auth_claim_key(&s->keys, identity, &key, &peer);
	if (err)
		return err;
	auth_tls_psk(&key, psk);
	OPENSSL_cleanse(&key, sizeof(key));
	return 0;
}

int rpc_server_create(const char *const *urls, const struct auth_keys *keys,
		      struct rpc_server **out)
{
	struct rpc_server *s;
	int i, n, err;

	if (!urls || !keys)
		return -EINVAL;
	for (n = 0; urls[n]; n++)
		;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->keys = *keys;
	s->budget_reqs = RPC_INFLIGHT_REQS;
	s->budget_bytes = RPC_INFLIGHT_BYTES;
	s->handshake_ms = RPC_HANDSHAKE_MS;
	s->stall_close_ms = RPC_STALL_CLOSE_DEFAULT_MS;
	s->listeners = calloc((size_t)n + 1, sizeof(*s->listeners));
	if (!s->listeners) {
		free(s);
		return -ENOMEM;
	}
	err = xport_ctx_create(&s->ctx);
	if (err)
		goto err_free;
	xport_ctx_set_tls_server(s->ctx, server_tls_psk, s);
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
	auth_keys_clear(&s->keys);
	free(s->listeners);
	free(s);
}

void rpc_server_set_admit(struct rpc_server *s,
			  int (*admit)(void *arg, const struct auth_peer *peer, const char **why),
			  void *arg)
{
	s->admit = admit;
	s->admit_arg = arg;
}

int rpc_server_readmit(struct rpc_server *s)
{
	struct rpc_session *ss;
	const char *why = NULL;
	int n = 0;

	if (!s->admit)
		return 0;
	for (ss = s->sessions; ss; ss = ss->next)
		if (ss->authed && !ss->rejected && s->admit(s->admit_arg, &ss->peer, &why)) {
			log_info(1000011,
				 "%s: %s no longer admitted; closing", xport_conn_peer(ss->conn),
				 ss->peer.id);
			ss->rejected = 1;
			xport_conn_close(ss->conn);
			n++;
		}
	return n;
}

void rpc_server_set_conn_budget(struct rpc_server *s, unsigned int max_reqs, uint64_t max_bytes)
{
	s->budget_reqs = max_reqs ? max_reqs : RPC_INFLIGHT_REQS;
	s->budget_bytes = max_bytes ? max_bytes : RPC_INFLIGHT_BYTES;
}

void rpc_server_set_stall_close(struct rpc_server *s, int ms)
{
	s->stall_close_ms = ms > 0 ? ms : RPC_STALL_CLOSE_DEFAULT_MS;
}

/* Close peers that stopped reading their replies (stall_close_ms). Main loop. */
static void close_stalled(struct rpc_server *s, int64_t now)
{
	int check_ms = s->stall_close_ms / 2 < RPC_STALL_CHECK_MS ? s->stall_close_ms / 2
								  : RPC_STALL_CHECK_MS;
	struct rpc_session *ss;

	if (now < s->next_stall_check_ms)
		return;
	s->next_stall_check_ms = now + check_ms;
	uint64_t min_drain = (uint64_t)RPC_STALL_MIN_RATE * (uint64_t)s->stall_close_ms / 1000;

	for (ss = s->sessions; ss; ss = ss->next) {
		uint64_t sent;
		size_t q;

		if (!ss->authed || ss->rejected)
			continue;
		q = xport_conn_queued_bytes(ss->conn);
		sent = xport_conn_sent_bytes(ss->conn);
		if (q == 0) {
			ss->stall_since_ms = 0;	/* nothing waits for it: nothing to hold against it */
		} else if (!ss->stall_since_ms || sent - ss->stall_sent >= min_drain) {
			/* a new window: it took its fill of the last one (or had none) */
			ss->stall_since_ms = now;
			ss->stall_sent = sent;
		} else if (now - ss->stall_since_ms >= s->stall_close_ms) {
			log_warn(1000012, "%s: %s took %llu bytes of its replies in %d ms (%zu bytes queued); "
				 "closing", xport_conn_peer(ss->conn), ss->peer.id,
				 (unsigned long long)(sent - ss->stall_sent), s->stall_close_ms, q);
			ss->rejected = 1;
			xport_conn_close(ss->conn);
		}
	}
}

/* Close peers silent for longer than their idle timeout. Main loop. */
static void close_idle(struct rpc_server *s, int64_t now)
{
	struct rpc_session *ss;

	if (now < s->next_idle_check_ms || !atomic_load(&s->idle_used))
		return;
	s->next_idle_check_ms = now + RPC_IDLE_CHECK_MS;
	for (ss = s->sessions; ss; ss = ss->next) {
		int limit = atomic_load(&ss->idle_timeout_ms);

		if (!ss->authed || ss->rejected || !limit)
			continue;
		if (now - ss->last_rx_ms > limit) {
			log_warn(1000013,
				 "%s: %s sent nothing for %lld ms (timeout %d ms); closing",
				 xport_conn_peer(ss->conn), ss->peer.id,
				 (long long)(now - ss->last_rx_ms), limit);
			ss->rejected = 1;
			xport_conn_close(ss->conn);
		}
	}
}

void rpc_conn_set_idle_timeout(struct xport_conn *conn, int ms)
{
	struct rpc_session *ss = xport_conn_user(conn);

	if (!ss)
		return;
	atomic_store(&ss->idle_timeout_ms, ms > 0 ? ms : 0);
	if (ms > 0 && !atomic_exchange(&ss->srv->idle_used, 1))
		rpc_server_wake(ss->srv);	/* a loop waiting without end must look again */
}

long long rpc_conn_counter_add(struct xport_conn *conn, long long delta)
{
	struct rpc_session *ss = xport_conn_user(conn);

	return ss ? atomic_fetch_add(&ss->app_counter, delta) + delta : 0;
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
		log_warn(1000014,
			 "%s: cannot start a session: out of memory", xport_conn_peer(conn));
		free(ss);
		xport_conn_close(conn);
		xport_conn_put(conn);
		return;
	}
	ss->conn = conn;
	ss->srv = s;
	pthread_mutex_init(&ss->inflight_lock, NULL);
	ss->deadline_ms = rpc_mono_ms() + s->handshake_ms;
	xport_conn_set_rx_limits(conn, RPC_PREAUTH_BODY, 0);
	xport_conn_set_rx_budget(conn, RPC_PREAUTH_REQS, 0);
	xport_conn_set_tx_limit(conn, RPC_SERVER_TX_QUEUE_MAX);
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
	if (rpc_send_msg(conn, RDFS_OP_AUTH_CHALLENGE, 0, 0, 0, &chal.base, NULL, 0))
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
	log_warn(1000015, "%s: %s", xport_conn_peer(conn), why);
	rpc_send_error(conn, op, tag, -EACCES, why);
	ss->rejected = 1;
	xport_conn_close_when_sent(conn);
}

static enum rpc_metrics_role peer_role(const struct auth_peer *peer)
{
	if (peer->cls == AUTH_CLASS_SERVER)
		return RPC_ROLE_SERVER;
	return strncmp(peer->id, "node:", 5) ? RPC_ROLE_CLIENT : RPC_ROLE_NODE;
}

static void server_auth(struct rpc_server *s, struct rpc_session *ss, struct xport_msg *m)
{
	Rdfs__AuthResult result = RDFS__AUTH_RESULT__INIT;
	uint8_t expect[AUTH_MAC_LEN], proof[AUTH_MAC_LEN];
	struct auth_secret key;
	struct auth_peer peer;
	Rdfs__AuthResponse *resp;
	const char *why = "authentication failed: wrong key";
	int ok, err;

	if (m->hdr.opcode != RDFS_OP_AUTH_RESPONSE || (m->hdr.flags & RDFS_FRAME_REPLY)) {
		server_reject(ss->conn, ss, m->hdr.opcode, m->hdr.tag,
			      "request before authentication");
		return;
	}
	resp = rdfs__auth_response__unpack(NULL, m->hdr.body_len, m->body);
	ok = resp && resp->mac.len == AUTH_MAC_LEN &&
	     resp->client_nonce.len == AUTH_NONCE_LEN && resp->role && valid_role(resp->role);
	/* the claim only picks the key; proving that key is what makes the peer */
	if (ok && (err = auth_claim_key(&s->keys, resp->role, &key, &peer)) != 0) {
		ok = 0;
		why = err == -EINVAL ? "authentication failed: malformed node claim"
				     : "authentication failed: no such key here";
	}
	if (ok) {
		auth_client_proof(&key, ss->nonce, resp->client_nonce.data, resp->role, expect);
		ok = auth_mac_equal(expect, resp->mac.data, AUTH_MAC_LEN);
	}
	if (ok && s->admit && s->admit(s->admit_arg, &peer, &why) != 0)
		ok = 0;
	if (!ok) {
		if (resp)
			rdfs__auth_response__free_unpacked(resp, NULL);
		memset(&key, 0, sizeof(key));
		server_reject(ss->conn, ss, RDFS_OP_AUTH_RESULT, m->hdr.tag, why);
		return;
	}
	ss->authed = 1;
	ss->peer = peer;
	metrics_gauge_add(s->metrics ? s->metrics->connections : NULL, peer_role(&ss->peer), 1);
	xport_conn_set_rx_limits(ss->conn, RDFS_MAX_BODY, RDFS_MAX_DATA);
	/* the transport stops taking this peer's frames once this many are unanswered */
	xport_conn_set_rx_budget(ss->conn, s->budget_reqs, s->budget_bytes);
	hs_unlink(s, ss);
	auth_server_proof(&key, ss->nonce, resp->client_nonce.data, proof);
	memset(&key, 0, sizeof(key));
	rdfs__auth_response__free_unpacked(resp, NULL);
	result.mac.data = proof;
	result.mac.len = sizeof(proof);
	if (rpc_send_msg(ss->conn, RDFS_OP_AUTH_RESULT, RDFS_FRAME_REPLY, 0, m->hdr.tag,
			 &result.base, NULL, 0))
		xport_conn_close(ss->conn);
	else
		log_debug(1000016,
			  "%s: authenticated as %s", xport_conn_peer(ss->conn), ss->peer.id);
}

/* A message from an authenticated peer: 1 if it is for the application. */
static int server_screen(struct rpc_session *ss, struct xport_msg *m)
{
	uint16_t op = m->hdr.opcode;

	if (m->hdr.flags & RDFS_FRAME_REPLY) {
		rpc_send_error(ss->conn, op, m->hdr.tag, -EPROTO, "unexpected reply");
		return 0;
	}
	if (op == RDFS_OP_AUTH_CHALLENGE || op == RDFS_OP_AUTH_RESPONSE ||
	    op == RDFS_OP_AUTH_RESULT) {
		rpc_send_error(ss->conn, op, m->hdr.tag, -EPROTO, "already authenticated");
		return 0;
	}
	if (op == RDFS_OP_PING) {
		rpc_send_msg(ss->conn, op, RDFS_FRAME_REPLY, 0, m->hdr.tag, NULL, NULL, 0);
		return 0;
	}
	if (strcmp(frame_op_name(op), "unknown") == 0) {
		rpc_send_error(ss->conn, op, m->hdr.tag, -ENOSYS, "unknown operation");
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
			ss->last_rx_ms = rpc_mono_ms();
			return 0;
		}
		/* any frame, PING or not, shows the peer alive (close_idle) */
		ss->last_rx_ms = rpc_mono_ms();
		if (!server_screen(ss, ev->msg)) {
			xport_msg_free(ev->msg);
			return 0;
		}
		xport_conn_get(ev->conn);
		req->conn = ev->conn;
		req->msg = ev->msg;
		req->peer = &ss->peer;
		req->counted_bytes = msg_bytes(ev->msg);
		session_account(ss, req->counted_bytes, 1);
		if (s->metrics) {
			req->metrics = s->metrics;
			req->start_ns = metrics_now_ns();
			req->metered_op = ev->msg->hdr.opcode;
			metrics_add(s->metrics->requests, req->metered_op, 0, 1);
			metrics_add(s->metrics->bytes_in, req->metered_op, 0, ev->msg->hdr.data_len);
			metrics_gauge_add(s->metrics->in_flight, 0, 1);
		}
		return RPC_SRV_REQUEST;
	case XPORT_EV_CLOSED:
		ss = xport_conn_user(ev->conn);
		if (!ss)
			return 0;
		session_unlink(s, ss);
		if (ss->authed) {
			log_debug(1000017,
				  "%s: %s disconnected", xport_conn_peer(ev->conn), ss->peer.id);
			metrics_gauge_add(s->metrics ? s->metrics->connections : NULL,
					  peer_role(&ss->peer), -1);
			xport_conn_get(ev->conn);
			req->conn = ev->conn;
			req->msg = NULL;
			req->peer = &ss->peer;
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
			log_info(1000018, "%s: no authentication within %d ms; closing",
				 xport_conn_peer(ss->conn), s->handshake_ms);
		ss->rejected = 1;
		xport_conn_close(ss->conn);
	}
	return s->hs_head ? s->hs_head->deadline_ms - now : -1;
}

enum rpc_server_event rpc_server_next(struct rpc_server *s, struct rpc_request *req,
				      int timeout_ms)
{
	int64_t deadline = timeout_ms > 0 ? rpc_mono_ms() + timeout_ms : 0;
	enum rpc_server_event e;
	int64_t now, hs_left, left;
	int n, wait_ms;

	memset(req, 0, sizeof(*req));
	now = rpc_mono_ms();
	if (s->returned_ms && now - s->returned_ms > RPC_IDLE_AWAY_MS &&
	    atomic_load(&s->idle_used)) {
		struct rpc_session *ss;

		for (ss = s->sessions; ss; ss = ss->next)
			ss->last_rx_ms = now;
	}
	for (;;) {
		while (s->evpos < s->nev) {
			e = server_event(s, &s->evs[s->evpos++], req);
			if (e) {
				s->returned_ms = rpc_mono_ms();
				return e;
			}
		}
		now = rpc_mono_ms();
		hs_left = expire_handshakes(s, now);
		close_stalled(s, now);
		close_idle(s, now);
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
		if (atomic_load(&s->idle_used) && (wait_ms < 0 || wait_ms > RPC_IDLE_CHECK_MS))
			wait_ms = RPC_IDLE_CHECK_MS;
		n = xport_test(s->ctx, s->evs, RPC_EVENT_BATCH, wait_ms);
		if (n < 0) {
			log_error(1000019, "transport failure: %s", strerror(-n));
			s->returned_ms = rpc_mono_ms();
			return RPC_SRV_TIMEOUT;
		}
		s->nev = n;
		s->evpos = 0;
		if (n == 0 && timeout_ms >= 0 && (timeout_ms == 0 || rpc_mono_ms() >= deadline)) {
			s->returned_ms = rpc_mono_ms();
			return RPC_SRV_TIMEOUT;
		}
	}
}

void rpc_server_set_metrics(struct rpc_server *s, const struct rpc_metrics *m)
{
	s->metrics = m;
}

/* The final reply to @req, with @status and @data_bytes of data: its duration and errors. */
static void count_reply(struct rpc_request *req, int status, uint64_t data_bytes)
{
	const struct rpc_metrics *m = req->metrics;

	if (!m || req->replied)
		return;
	req->replied = 1;
	metrics_observe(m->duration, req->metered_op, metrics_now_ns() - req->start_ns);
	metrics_add(m->bytes_out, req->metered_op, 0, data_bytes);
	if (status < 0)
		metrics_add(m->errors, req->metered_op, (unsigned int)-status, 1);
}

/* Bytes of a reply's part, counted as it is posted. */
static void count_part(const struct rpc_request *req, uint64_t data_bytes)
{
	if (req->metrics)
		metrics_add(req->metrics->bytes_out, req->metered_op, 0, data_bytes);
}

int rpc_server_reply(struct rpc_request *req, int status, const ProtobufCMessage *resp,
		     const struct iovec *data, int niov)
{
	size_t dlen = 0;

	Rdfs__Error e = RDFS__ERROR__INIT;

	if (!req || !req->conn || !req->msg)
		return -EINVAL;
	if (status > 0)
		status = -status;	/* a positive errno is a caller slip; send what they meant */
	if (!resp && status < 0) {
		e.message = strerror(-status);
		resp = &e.base;
	}
	if (rpc_iov_sum(data, niov, &dlen))
		dlen = 0;
	count_reply(req, status, dlen);
	return rpc_send_msg(req->conn, req->msg->hdr.opcode, RDFS_FRAME_REPLY, status,
			    req->msg->hdr.tag, resp, data, niov);
}

int rpc_server_reply_error(struct rpc_request *req, int status, const char *errmsg)
{
	if (!req || !req->conn || !req->msg)
		return -EINVAL;
	if (status > 0)
		status = -status;
	count_reply(req, status, 0);
	return rpc_send_error(req->conn, req->msg->hdr.opcode, req->msg->hdr.tag, status, errmsg);
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
	err = rpc_iov_sum(data, niov, &dlen);
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
	rpc_hdr_init(&h, req->msg->hdr.opcode, RDFS_FRAME_REPLY, status, req->msg->hdr.tag,
		     blen, dlen);
	err = xport_post_send(req->conn, &h, z->body, data, niov, z);
	if (err)
		free(z);
	else
		count_reply(req, status, dlen);
	return err;
}

int rpc_server_reply_part(struct rpc_request *req, const struct iovec *data, int niov,
			  void (*sent)(void *arg, int status), void *arg)
{
	struct rdfs_frame_hdr h;
	struct rpc_zc_reply *z;
	size_t dlen;
	int err;

	if (!req || !req->conn || !req->msg)
		return -EINVAL;
	err = rpc_iov_sum(data, niov, &dlen);
	if (err)
		return err;
	rpc_hdr_init(&h, req->msg->hdr.opcode, RDFS_FRAME_REPLY | RDFS_FRAME_MORE, 0,
		     req->msg->hdr.tag, 0, dlen);
	count_part(req, dlen);
	if (!sent)
		return xport_post_send(req->conn, &h, NULL, data, niov, NULL);
	z = malloc(sizeof(*z));
	if (!z)
		return -ENOMEM;
	z->sent = sent;
	z->arg = arg;
	err = xport_post_send(req->conn, &h, NULL, data, niov, z);
	if (err)
		free(z);
	return err;
}

int rpc_request_has_sink(const struct rpc_request *req)
{
	return req && req->msg && req->msg->sink;
}

int rpc_server_reply_part_write(struct rpc_request *req, uint64_t off, const struct iovec *data,
				int niov, void (*sent)(void *arg, int status), void *arg)
{
	struct rdfs_frame_hdr h;
	struct rpc_zc_reply *z;
	int err;

	if (!req || !req->conn || !req->msg || !req->msg->sink || !sent)
		return -EINVAL;
	z = malloc(sizeof(*z));
	if (!z)
		return -ENOMEM;
	z->sent = sent;
	z->arg = arg;
	rpc_hdr_init(&h, req->msg->hdr.opcode, RDFS_FRAME_REPLY | RDFS_FRAME_MORE, 0,
		     req->msg->hdr.tag, 0, 0);
	err = xport_post_write(req->conn, req->msg->sink, off, data, niov, &h, NULL, z);
	if (err) {
		free(z);
	} else if (req->metrics) {
		size_t dlen;

		if (rpc_iov_sum(data, niov, &dlen) == 0)
			count_part(req, dlen);
	}
	return err;
}

void rpc_request_done(struct rpc_request *req)
{
	struct rpc_session *ss;

	if (!req)
		return;
	if (req->msg && req->conn) {
		ss = xport_conn_user(req->conn);
		if (ss)
			session_account(ss, req->counted_bytes, -1);
		if (req->metrics)
			metrics_gauge_add(req->metrics->in_flight, 0, -1);
	}
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
