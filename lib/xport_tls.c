// SPDX-License-Identifier: MIT
/*
 * xport_tls.c - TLS 1.3 with external PSKs on a TCP socket (see xport_tls.h).
 *
 * One SSL_CTX per side, made once: TLS 1.3 only, TLS_AES_128_GCM_SHA256 (the
 * PSK's hash must be the suite's), no session tickets (a connection lives as
 * long as its process needs it; resumption would only add state), partial
 * writes (each SSL_write() returns after one record, so progress is visible),
 * read-ahead with a large read buffer (one recv() takes many records).
 * An unexpected EOF is an EOF: the rdfs framing above knows whether it cut a
 * message, as on plain TCP.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>

#include "log.h"
#include "xport_module.h"
#include "xport_tls.h"

/* What SSL_write() encrypts from; a bounded copy of the send queue's head. */
#define XPORT_TLS_OUT_LEN	(256 * 1024)
/* OpenSSL's read buffer with read-ahead: how much one recv() may take. */
#define XPORT_TLS_READ_BUF	(256 * 1024)

enum tls_state {
	TLS_HANDSHAKE,	/* -> TLS_OPEN, TLS_FAILED */
	TLS_OPEN,	/* -> TLS_FAILED */
	TLS_FAILED,	/* final: every call fails */
};

struct xport_tls {
	pthread_mutex_t lock;		/* the SSL object and everything below */
	SSL *ssl;
	/* changed under lock; read without it (an open connection stays open or fails) */
	_Atomic enum tls_state state;
	uint32_t want;			/* events the handshake waits for */
	char peer[XPORT_URL_MAX];	/* for messages */
	struct xport_tls_client client;	/* client side: what we prove */
	struct xport_tls_server srv;	/* server side: how to find a PSK */
	const char *why;		/* why the server refused the peer, for the log */
	int alert;			/* the last failure was an alert the peer sent */
	int not_tls;			/* ... or bytes that are no TLS at all */
	/*
	 * Staged plaintext [out_off, out_len): changed under lock by callers that
	 * hold the connection's lock too (xport_tls_sendv/_flush), so holders of
	 * that lock may read it without this one.
	 */
	uint8_t *out;
	size_t out_off, out_len;
	/* xport_tls_connect_ktls(): the traffic secrets, from the key log */
	int ktls;
	uint8_t secret[2][32];		/* [0] ours (client), [1] the server's */
	int have_secret[2];
};

static SSL_CTX *tls_ctx[2];
static BIO_METHOD *tls_wbio_method;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

/* TLS_AES_128_GCM_SHA256 */
static const unsigned char tls_psk_suite[2] = { 0x13, 0x01 };

static void tls_state_set(struct xport_tls *t, enum tls_state to)
{
	/* the transitions written in enum tls_state, and no other */
	if (!((t->state == TLS_HANDSHAKE && (to == TLS_OPEN || to == TLS_FAILED)) ||
	      (t->state == TLS_OPEN && to == TLS_FAILED) ||
	      (t->state == TLS_FAILED && to == TLS_FAILED)))
		abort();
	t->state = to;
}

static SSL_SESSION *psk_session(SSL *ssl, const uint8_t psk[XPORT_TLS_PSK_LEN])
{
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, tls_psk_suite);
	SSL_SESSION *sess;

	if (!cipher)
		return NULL;
	sess = SSL_SESSION_new();
	if (!sess)
		return NULL;
	if (!SSL_SESSION_set1_master_key(sess, psk, XPORT_TLS_PSK_LEN) ||
	    !SSL_SESSION_set_cipher(sess, cipher) ||
	    !SSL_SESSION_set_protocol_version(sess, TLS1_3_VERSION)) {
		SSL_SESSION_free(sess);
		return NULL;
	}
	return sess;
}

/* Client: offer our identity with its PSK. */
static int tls_use_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		       SSL_SESSION **sessp)
{
	struct xport_tls *t = SSL_get_app_data(ssl);
	SSL_SESSION *sess;

	*sessp = NULL;
	sess = psk_session(ssl, t->client.psk);
	if (!sess)
		return 0;
	if (md && md != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(sess))) {
		/* a HelloRetryRequest chose a suite our PSK cannot be used with */
		SSL_SESSION_free(sess);
		return 1;
	}
	*sessp = sess;
	*id = (const unsigned char *)t->client.identity;
	*idlen = strlen(t->client.identity);
	return 1;
}

/* Server: the PSK of the identity the client names, or none (the handshake fails). */
static int tls_find_psk(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sessp)
{
	struct xport_tls *t = SSL_get_app_data(ssl);
	uint8_t psk[XPORT_TLS_PSK_LEN];
	char name[XPORT_TLS_ID_MAX];

	*sessp = NULL;
	if (idlen == 0 || idlen >= sizeof(name) || memchr(id, '\0', idlen)) {
		t->why = "malformed PSK identity";
		return 1;
	}
	memcpy(name, id, idlen);
	name[idlen] = '\0';
	if (!t->srv.psk_of || t->srv.psk_of(t->srv.arg, name, psk)) {
		t->why = "no key for the PSK identity it named";
		return 1;
	}
	*sessp = psk_session(ssl, psk);
	OPENSSL_cleanse(psk, sizeof(psk));
	if (!*sessp)
		return 0;
	/* a wrong key fails the binder check, later in the handshake */
	t->why = "wrong key for the PSK identity it named";
	return 1;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/*
 * OpenSSL's key log ("LABEL client_random secret", hex): the only way it
 * gives out TLS 1.3 traffic secrets, which kernel TLS needs. Kept only for a
 * connection that asked (xport_tls_connect_ktls()).
 */
static void tls_keylog(const SSL *ssl, const char *line)
{
	struct xport_tls *t = SSL_get_app_data(ssl);
	const char *hex = strrchr(line, ' ');
	int dir, i;

	if (!t || !t->ktls || !hex)
		return;
	if (!strncmp(line, "CLIENT_TRAFFIC_SECRET_0 ", 24))
		dir = 0;
	else if (!strncmp(line, "SERVER_TRAFFIC_SECRET_0 ", 24))
		dir = 1;
	else
		return;
	hex++;
	if (strlen(hex) != 2 * sizeof(t->secret[dir]))
		return;
	for (i = 0; i < (int)sizeof(t->secret[dir]); i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return;
		t->secret[dir][i] = (uint8_t)(hi << 4 | lo);
	}
	t->have_secret[dir] = 1;
}

static SSL_CTX *tls_ctx_make(int server)
{
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());

	if (!ctx)
		return NULL;
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256")) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_default_read_buffer_len(ctx, XPORT_TLS_READ_BUF);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (server) {
		SSL_CTX_set_num_tickets(ctx, 0);
		SSL_CTX_set_psk_find_session_callback(ctx, tls_find_psk);
	} else {
		SSL_CTX_set_psk_use_session_callback(ctx, tls_use_psk);
		SSL_CTX_set_keylog_callback(ctx, tls_keylog);
	}
	return ctx;
}

/*
 * OpenSSL's socket BIO write()s, which raises SIGPIPE once the peer is gone
 * and kills a program that does not ignore it (the tools, rdfs-fuse before it
 * is up, tests). Writes go through send(MSG_NOSIGNAL) instead, as tcp://'s
 * do: a gone peer costs an EPIPE. Reads keep the socket BIO.
 */
static int tls_wbio_write(BIO *b, const char *buf, int len)
{
	ssize_t n;

	BIO_clear_retry_flags(b);
	do {
		n = send((int)(intptr_t)BIO_get_data(b), buf, (size_t)len,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_write(b);
	return (int)n;
}

static long tls_wbio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	int fd = (int)(intptr_t)BIO_get_data(b);

	(void)num;
	switch (cmd) {
	case BIO_CTRL_FLUSH:
		return 1;
	case BIO_C_GET_FD:
		if (ptr)
			*(int *)ptr = fd;
		return fd;
	default:
		return 0;
	}
}

static int tls_wbio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void tls_init(void)
{
	tls_wbio_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
				       "rdfs socket write");
	if (!tls_wbio_method || !BIO_meth_set_write(tls_wbio_method, tls_wbio_write) ||
	    !BIO_meth_set_ctrl(tls_wbio_method, tls_wbio_ctrl) ||
	    !BIO_meth_set_create(tls_wbio_method, tls_wbio_create))
		return;		/* no contexts: every tls:// connection fails -ENOMEM */
	tls_ctx[0] = tls_ctx_make(0);
	tls_ctx[1] = tls_ctx_make(1);
}

static int tls_new(int fd, int server, const char *peer, struct xport_tls **out)
{
	struct xport_tls *t;
	BIO *rbio, *wbio;

	pthread_once(&tls_once, tls_init);
	if (!tls_ctx[server])
		return -ENOMEM;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->out = malloc(XPORT_TLS_OUT_LEN);
	t->ssl = SSL_new(tls_ctx[server]);
	rbio = BIO_new_socket(fd, BIO_NOCLOSE);
	wbio = BIO_new(tls_wbio_method);
	if (!t->out || !t->ssl || !rbio || !wbio) {
		BIO_free(rbio);
		BIO_free(wbio);
		SSL_free(t->ssl);
		free(t->out);
		free(t);
		return -ENOMEM;
	}
	BIO_set_data(wbio, (void *)(intptr_t)fd);
	SSL_set_bio(t->ssl, rbio, wbio);
	pthread_mutex_init(&t->lock, NULL);
	SSL_set_app_data(t->ssl, t);
	t->state = TLS_HANDSHAKE;
	snprintf(t->peer, sizeof(t->peer), "%s", peer);
	*out = t;
	return 0;
}

void xport_tls_free(struct xport_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	OPENSSL_cleanse(&t->client, sizeof(t->client));
	pthread_mutex_destroy(&t->lock);
	free(t->out);
	free(t);
}

/*
 * The first OpenSSL error reason queued on this thread, clearing the queue;
 * t->alert: it is an alert the peer sent (a refusal, not noise); t->not_tls:
 * the peer's bytes are not TLS records at all (rdfs in clear, HTTP, ...).
 */
static const char *tls_reason(struct xport_tls *t)
{
	unsigned long e = ERR_peek_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	int reason = e && ERR_GET_LIB(e) == ERR_LIB_SSL ? ERR_GET_REASON(e) : 0;

	t->alert = reason >= SSL_AD_REASON_OFFSET;
	t->not_tls = reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_HTTP_REQUEST ||
		     reason == SSL_R_HTTPS_PROXY_REQUEST || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
		     reason == SSL_R_UNEXPECTED_RECORD;
	ERR_clear_error();
	return r ? r : "connection closed";
}

/*
 * Under t->lock: what an SSL call's result @ret means. 1: done; -EAGAIN with
 * t->want set; 0: the peer closed; else -errno (state FAILED).
 */
static int tls_result(struct xport_tls *t, int ret, const char **why)
{
	int e = SSL_get_error(t->ssl, ret);

	*why = NULL;
	switch (e) {
	case SSL_ERROR_NONE:
		return 1;
	case SSL_ERROR_WANT_READ:
		t->want = EPOLLIN;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		t->want = EPOLLOUT;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		tls_state_set(t, TLS_FAILED);
		if (errno == 0 || errno == EPIPE || errno == ECONNRESET) {
			ERR_clear_error();
			return errno == 0 ? 0 : -ECONNRESET;
		}
		*why = strerror(errno);
		ERR_clear_error();
		return -errno;
	default:
		tls_state_set(t, TLS_FAILED);
		*why = tls_reason(t);
		return -EPROTO;
	}
}

static int tls_client_handshake(int fd, const struct xport_tls_client *cred,
				int64_t deadline_ms, const char *peer, int ktls,
				struct xport_tls **out)
{
	struct xport_tls *t;
	const char *why;
	int err, ret;

	if (!cred || !cred->identity[0])
		return -EACCES;
	err = tls_new(fd, 0, peer, &t);
	if (err)
		return err;
	t->client = *cred;
	if (ktls) {
		/* record by record: nothing past the handshake may stay inside OpenSSL */
		t->ktls = 1;
		SSL_set_read_ahead(t->ssl, 0);
	}
	for (;;) {
		struct pollfd pfd = { .fd = fd };
		struct timespec ts;
		int left = -1;

		ERR_clear_error();
		ret = SSL_connect(t->ssl);
		err = tls_result(t, ret, &why);
		if (err == 1)
			break;
		if (err != -EAGAIN) {
			if ((err == 0 || err == -ECONNRESET) &&
			    BIO_number_read(SSL_get_rbio(t->ssl)) == 0) {
				/* no word from it: no refusal, and worth another try */
				err = -ECONNRESET;
				log_warn(1000026,
					 "%s: TLS handshake failed: the server hung up without "
					 "answering (is it listening on tcp:// rather than "
					 "tls://?)", peer);
			} else if (err == 0 || err == -ECONNRESET || (err == -EPROTO && t->alert)) {
				/* a server refuses a key with an alert, or hangs up after */
				err = -EACCES;
				log_warn(1000027,
					 "%s: TLS handshake failed: the server refused our key "
					 "(identity %s): %s", peer, cred->identity,
					 why ? why : "connection closed");
			} else if (err == -EPROTO) {
				log_warn(1000028,
					 "%s: TLS handshake failed: %s (is the server listening "
					 "on tcp:// rather than tls://?)", peer, why);
			} else {
				log_warn(1000029, "%s: TLS handshake failed: %s", peer,
					 why ? why : strerror(-err));
			}
			goto fail;
		}
		if (deadline_ms) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			left = (int)(deadline_ms - (ts.tv_sec * 1000 + ts.tv_nsec / 1000000));
			if (left <= 0) {
				err = -ETIMEDOUT;
				goto fail;
			}
		}
		pfd.events = t->want == EPOLLOUT ? POLLOUT : POLLIN;
		if (poll(&pfd, 1, left) < 0 && errno != EINTR) {
			err = -errno;
			goto fail;
		}
	}
	tls_state_set(t, TLS_OPEN);
	*out = t;
	return 0;
fail:
	ERR_clear_error();
	xport_tls_free(t);
	return err;
}

int xport_tls_connect(int fd, const struct xport_tls_client *cred, int64_t deadline_ms,
		      const char *peer, struct xport_tls **out)
{
	return tls_client_handshake(fd, cred, deadline_ms, peer, 0, out);
}

/* RFC 8446 7.1 HKDF-Expand-Label(secret, label, "", len) for len <= 32: one HMAC. */
static void tls13_expand_label(const uint8_t secret[32], const char *label, uint8_t *out,
			       size_t len)
{
	uint8_t info[2 + 1 + 6 + 16 + 1 + 1], mac[32];
	size_t n = 0, l = strlen(label);
	unsigned int maclen = sizeof(mac);

	info[n++] = 0;
	info[n++] = (uint8_t)len;
	info[n++] = (uint8_t)(6 + l);
	memcpy(info + n, "tls13 ", 6);
	n += 6;
	memcpy(info + n, label, l);
	n += l;
	info[n++] = 0;		/* empty context */
	info[n++] = 1;		/* T(1) */
	HMAC(EVP_sha256(), secret, 32, info, n, mac, &maclen);
	memcpy(out, mac, len);
	OPENSSL_cleanse(mac, sizeof(mac));
}

#ifndef SOL_TLS
#define SOL_TLS 282
#endif

static int ktls_set(int fd, int dir_opt, const uint8_t secret[32])
{
	struct tls12_crypto_info_aes_gcm_128 ci;
	uint8_t iv[12];
	int err = 0;

	memset(&ci, 0, sizeof(ci));
	ci.info.version = TLS_1_3_VERSION;
	ci.info.cipher_type = TLS_CIPHER_AES_GCM_128;
	tls13_expand_label(secret, "key", ci.key, sizeof(ci.key));
	tls13_expand_label(secret, "iv", iv, sizeof(iv));
	memcpy(ci.salt, iv, sizeof(ci.salt));
	memcpy(ci.iv, iv + sizeof(ci.salt), sizeof(ci.iv));
	/* rec_seq 0: nothing was sent or received under the traffic keys yet */
	if (setsockopt(fd, SOL_TLS, dir_opt, &ci, sizeof(ci)) < 0)
		err = -errno;
	OPENSSL_cleanse(&ci, sizeof(ci));
	OPENSSL_cleanse(iv, sizeof(iv));
	return err;
}

int xport_tls_connect_ktls(int fd, const struct xport_tls_client *cred, int64_t deadline_ms,
			   const char *peer)
{
	struct xport_tls *t;
	int err;

	err = tls_client_handshake(fd, cred, deadline_ms, peer, 1, &t);
	if (err)
		return err;
	if (!t->have_secret[0] || !t->have_secret[1] || SSL_has_pending(t->ssl)) {
		log_warn(1000030, "%s: TLS: no traffic keys for kernel TLS", peer);
		err = -EPROTO;
		goto out;
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) < 0) {
		err = errno == ENOENT || errno == ENOPROTOOPT ? -EPROTONOSUPPORT : -errno;
		log_warn(1000031, "%s: kernel TLS: %s", peer, err == -EPROTONOSUPPORT ?
			 "this kernel has no tls module" : strerror(-err));
		goto out;
	}
	err = ktls_set(fd, TLS_TX, t->secret[0]);
	if (!err)
		err = ktls_set(fd, TLS_RX, t->secret[1]);
	if (err)
		log_warn(1000032, "%s: kernel TLS keys refused: %s", peer, strerror(-err));
out:
	OPENSSL_cleanse(t->secret, sizeof(t->secret));
	xport_tls_free(t);	/* SSL_free() sends nothing: the socket is the kernel's now */
	return err;
}

int xport_tls_accept(int fd, const struct xport_tls_server *cred, const char *peer,
		     struct xport_tls **out)
{
	struct xport_tls *t;
	int err;

	err = tls_new(fd, 1, peer, &t);
	if (err)
		return err;
	if (cred)
		t->srv = *cred;
	t->want = EPOLLIN;
	*out = t;
	return 0;
}

int xport_tls_handshake(struct xport_tls *t, uint32_t *events)
{
	const char *why;
	int err;

	pthread_mutex_lock(&t->lock);
	if (t->state != TLS_HANDSHAKE) {
		err = t->state == TLS_OPEN ? 0 : -EPROTO;
		goto out;
	}
	ERR_clear_error();
	err = tls_result(t, SSL_accept(t->ssl), &why);
	if (err == 1) {
		tls_state_set(t, TLS_OPEN);
		err = 0;
	} else if (err == -EAGAIN) {
		*events = t->want;
	} else {
		int silent = err == 0 && !t->why;	/* connected, sent nothing, left */

		tls_state_set(t, TLS_FAILED);
		if (!silent && t->not_tls)
			log_warn(1000033,
				 "%s: refused: it does not speak TLS on this tls:// listener",
				 t->peer);
		else if (!silent)
			log_warn(1000034, "%s: refused in the TLS handshake: %s", t->peer,
				 t->why ? t->why : why ? why : "connection closed");
		err = err ? err : -ECONNRESET;
		if (err == -EPROTO && t->why)
			err = -EACCES;
	}
out:
	pthread_mutex_unlock(&t->lock);
	return err;
}

int xport_tls_is_open(struct xport_tls *t)
{
	return atomic_load(&t->state) == TLS_OPEN;
}

ssize_t xport_tls_read(struct xport_tls *t, void *buf, size_t len)
{
	const char *why;
	size_t got = 0;
	int err;

	pthread_mutex_lock(&t->lock);
	if (t->state != TLS_OPEN) {
		pthread_mutex_unlock(&t->lock);
		return -EPROTO;
	}
	ERR_clear_error();
	err = tls_result(t, SSL_read_ex(t->ssl, buf, len, &got), &why);
	if (err < 0 && err != -EAGAIN && why)
		log_warn(1000035, "%s: TLS stream broken: %s", t->peer, why);
	pthread_mutex_unlock(&t->lock);
	return err == 1 ? (ssize_t)got : err;
}

int xport_tls_rx_pending(struct xport_tls *t)
{
	int n;

	pthread_mutex_lock(&t->lock);
	n = t->state == TLS_OPEN && SSL_has_pending(t->ssl);
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* Under t->lock: write staged bytes until none are left or the socket is full. */
static int tls_flush_locked(struct xport_tls *t)
{
	const char *why;
	size_t n;
	int err;

	while (t->out_off < t->out_len) {
		if (t->state != TLS_OPEN)
			return -EPIPE;
		ERR_clear_error();
		n = 0;
		err = tls_result(t, SSL_write_ex(t->ssl, t->out + t->out_off,
						  t->out_len - t->out_off, &n), &why);
		if (err == -EAGAIN)
			return -EAGAIN;
		if (err != 1) {
			if (why)
				log_warn(1000036, "%s: TLS stream broken: %s", t->peer, why);
			if (t->state != TLS_FAILED)
				tls_state_set(t, TLS_FAILED);
			return err ? err : -EPIPE;
		}
		t->out_off += n;
	}
	t->out_off = t->out_len = 0;
	return 0;
}

int xport_tls_flush(struct xport_tls *t)
{
	int err;

	pthread_mutex_lock(&t->lock);
	err = tls_flush_locked(t);
	pthread_mutex_unlock(&t->lock);
	return err;
}

ssize_t xport_tls_sendv(struct xport_tls *t, const struct iovec *iov, int niov)
{
	size_t staged = 0, room, k;
	int i, err;

	pthread_mutex_lock(&t->lock);
	if (t->state != TLS_OPEN) {
		pthread_mutex_unlock(&t->lock);
		return -EPIPE;
	}
	/*
	 * Bytes already handed to SSL_write() may move (ACCEPT_MOVING_WRITE_BUFFER):
	 * a write it must retry is retried with the same bytes at a new address.
	 */
	if (t->out_off) {
		memmove(t->out, t->out + t->out_off, t->out_len - t->out_off);
		t->out_len -= t->out_off;
		t->out_off = 0;
	}
	for (i = 0; i < niov && t->out_len < XPORT_TLS_OUT_LEN; i++) {
		room = XPORT_TLS_OUT_LEN - t->out_len;
		k = iov[i].iov_len < room ? iov[i].iov_len : room;
		memcpy(t->out + t->out_len, iov[i].iov_base, k);
		t->out_len += k;
		staged += k;
	}
	err = tls_flush_locked(t);
	pthread_mutex_unlock(&t->lock);
	if (err && err != -EAGAIN)
		return err;
	return staged ? (ssize_t)staged : -EAGAIN;
}

size_t xport_tls_tx_pending(struct xport_tls *t)
{
	return t->out_len - t->out_off;
}
