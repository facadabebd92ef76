/* SPDX-License-Identifier: MIT */
/*
 * xport_tls.h - TLS 1.3 on one TCP connection, for the tls:// scheme of
 * xport_tcp.c (internal to lib/, and the kernel client's helper, which hands
 * its tls:// sockets to kernel TLS: xport_tls_connect_ktls()).
 *
 * Peers authenticate with external pre-shared keys, not certificates: the PSK
 * identity is the rdfs claim ("server", "node:NAME:GEN", "client", ...) and the
 * PSK is derived from the key that proves it (lib/auth.h, auth_tls_psk()), so a
 * site that has rdfs keys needs nothing more, and each side proves the key to
 * the other before a byte of rdfs flows. The handshake uses (EC)DHE with the
 * PSK (psk_dhe_ke), so a key that leaks later does not decrypt recorded traffic.
 *
 * This file is a byte pipe: xport_tcp.c keeps framing, queues and polling, and
 * calls these instead of readv()/sendmsg() on a tls:// connection.
 *
 * Threads: an SSL object is not safe for concurrent use, so every call here
 * takes the connection's own TLS lock (a leaf lock: nothing is called under
 * it but OpenSSL). Sending threads call with the connection lock held, the
 * progress thread reads without it, as on plain TCP.
 *
 * Copies: sends are copied into a staging buffer (XPORT_TLS_OUT_LEN) that
 * SSL_write() encrypts from: a queued post's buffers are free again once
 * staged, and a write OpenSSL must retry is retried from bytes that do not
 * move. Received records are decrypted straight into the caller's buffer.
 */
#ifndef RDFS_XPORT_TLS_H
#define RDFS_XPORT_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "xport.h"

struct xport_tls;

/* A client's credentials (connect side): copied into the connection. */
struct xport_tls_client {
	char identity[XPORT_TLS_ID_MAX];
	uint8_t psk[XPORT_TLS_PSK_LEN];
};

/* A server's: the PSK of an identity, as xport_ctx_set_tls_server() gives it. */
struct xport_tls_server {
	int (*psk_of)(void *arg, const char *identity, uint8_t psk[XPORT_TLS_PSK_LEN]);
	void *arg;
};

/*
 * Client side: run the whole handshake on the connected non-blocking socket
 * @fd, waiting until @deadline_ms (monotonic ms; 0: no deadline). 0 with *@out
 * set; -ETIMEDOUT; -EACCES when the server refused our key or proved another;
 * -EPROTO when the server does not speak TLS; -ECONNRESET when it hung up
 * without a word (as a tcp:// server does, or one at its fd limit); -ENOMEM.
 */
int xport_tls_connect(int fd, const struct xport_tls_client *cred, int64_t deadline_ms,
		      const char *peer, struct xport_tls **out);

/*
 * Client side, for a socket the kernel will own (the kernel client's tls://
 * data path): run the handshake as xport_tls_connect() does, then hand the
 * traffic keys to kernel TLS (TCP_ULP "tls", TLS_TX and TLS_RX), so plain
 * read()/write() and the kernel's own sendmsg()/recvmsg() on @fd are TLS
 * records from then on; no OpenSSL state is left. Errors as
 * xport_tls_connect(), and -EPROTONOSUPPORT when this kernel has no kTLS.
 */
int xport_tls_connect_ktls(int fd, const struct xport_tls_client *cred, int64_t deadline_ms,
			   const char *peer);

/* Server side: a new connection on @fd whose handshake xport_tls_handshake() runs. */
int xport_tls_accept(int fd, const struct xport_tls_server *cred, const char *peer,
		     struct xport_tls **out);
/*
 * Advance the server handshake: 0 when it is done, -EAGAIN with *@events the
 * epoll events to wait for, -errno when it failed (logged once, here).
 */
int xport_tls_handshake(struct xport_tls *t, uint32_t *events);
int xport_tls_is_open(struct xport_tls *t);

/*
 * Decrypt into @buf: bytes (> 0), 0 at the end of the stream, -EAGAIN when
 * nothing is ready, -errno when the stream is broken (logged here).
 */
ssize_t xport_tls_read(struct xport_tls *t, void *buf, size_t len);
/* Whether decrypted or undecrypted bytes wait inside OpenSSL (epoll cannot tell). */
int xport_tls_rx_pending(struct xport_tls *t);

/*
 * Stage what fits of @iov[0..niov) and write what the socket takes. Returns
 * the bytes staged (they are the connection's now: the caller advances past
 * them), -EAGAIN when the staging buffer is full, -errno when broken.
 */
ssize_t xport_tls_sendv(struct xport_tls *t, const struct iovec *iov, int niov);
/* Write staged bytes: 0 when none are left, -EAGAIN, or -errno. */
int xport_tls_flush(struct xport_tls *t);
/* Staged bytes not yet written to the socket (call with the connection's lock held). */
size_t xport_tls_tx_pending(struct xport_tls *t);

void xport_tls_free(struct xport_tls *t);

#endif
