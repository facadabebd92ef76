// SPDX-License-Identifier: MIT
/*
 * ioconn.c - what RDFS_DEV_CONNECT hands the kernel module for an I/O server:
 * for tcp:// an authenticated TCP socket; for tls:// the same inside kernel
 * TLS (the handshake here, the records in the kernel); for rdma:// an authenticator, one
 * end of a socket pair whose other end answers the one challenge of the
 * module's own RDMA connection (rdfs_dev_abi.h). Either way the cluster secret
 * stays in user space while file data flows in the kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "auth.h"
#include "frame.h"
#include "helper.h"
#include "log.h"
#include "rdfs_dev_abi.h"
#include "rdfs.pb-c.h"
#include "xport_tls.h"

static int io_full(int fd, void *buf, size_t len, int rd, int timeout_ms)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = rd ? POLLIN : POLLOUT };
		ssize_t n;

		if (poll(&pfd, 1, timeout_ms) <= 0)
			return -ETIMEDOUT;
		n = rd ? read(fd, p, len) : write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= n;
	}
	return 0;
}

static int send_msg(int fd, uint16_t op, const ProtobufCMessage *m, int timeout_ms)
{
	struct rdfs_frame_hdr h = { .magic = RDFS_FRAME_MAGIC, .version = RDFS_FRAME_VERSION,
				    .opcode = op };
	uint8_t buf[RDFS_FRAME_HDR_LEN + 256];
	size_t len = protobuf_c_message_get_packed_size(m);

	if (len > sizeof(buf) - RDFS_FRAME_HDR_LEN)
		return -EMSGSIZE;
	h.body_len = protobuf_c_message_pack(m, buf + RDFS_FRAME_HDR_LEN);
	rdfs_frame_hdr_encode(&h, buf);
	return io_full(fd, buf, RDFS_FRAME_HDR_LEN + h.body_len, 0, timeout_ms);
}

/* Receive one frame of opcode @op with a body into @body (at most @size). */
static int recv_msg(int fd, uint16_t op, uint8_t *body, size_t size, size_t *len, int timeout_ms)
{
	uint8_t hb[RDFS_FRAME_HDR_LEN];
	struct rdfs_frame_hdr h;
	int err;

	err = io_full(fd, hb, sizeof(hb), 1, timeout_ms);
	if (err)
		return err;
	err = rdfs_frame_hdr_decode(hb, &h);
	if (err)
		return err;
	if (h.status)
		return h.status < 0 ? h.status : -EPROTO;
	if (h.opcode != op || h.body_len > size || h.data_len)
		return -EPROTO;
	*len = h.body_len;
	return io_full(fd, body, h.body_len, 1, timeout_ms);
}

static int handshake(int fd, const struct auth_secret *secret, const char *claim, int timeout_ms)
{
	Rdfs__AuthResponse resp = RDFS__AUTH_RESPONSE__INIT;
	uint8_t snonce[AUTH_NONCE_LEN], cnonce[AUTH_NONCE_LEN], mac[AUTH_MAC_LEN];
	uint8_t expect[AUTH_MAC_LEN], body[512];
	Rdfs__AuthChallenge *chal;
	Rdfs__AuthResult *res;
	size_t len;
	int err;

	err = recv_msg(fd, RDFS_OP_AUTH_CHALLENGE, body, sizeof(body), &len, timeout_ms);
	if (err)
		return err;
	chal = rdfs__auth_challenge__unpack(NULL, len, body);
	if (!chal || chal->nonce.len != AUTH_NONCE_LEN) {
		if (chal)
			rdfs__auth_challenge__free_unpacked(chal, NULL);
		return -EPROTO;
	}
	memcpy(snonce, chal->nonce.data, AUTH_NONCE_LEN);
	rdfs__auth_challenge__free_unpacked(chal, NULL);
	err = auth_random(cnonce, sizeof(cnonce));
	if (err)
		return err;
	auth_client_proof(secret, snonce, cnonce, claim, mac);
	resp.mac.data = mac;
	resp.mac.len = sizeof(mac);
	resp.client_nonce.data = cnonce;
	resp.client_nonce.len = sizeof(cnonce);
	resp.role = (char *)claim;
	err = send_msg(fd, RDFS_OP_AUTH_RESPONSE, &resp.base, timeout_ms);
	if (err)
		return err;
	err = recv_msg(fd, RDFS_OP_AUTH_RESULT, body, sizeof(body), &len, timeout_ms);
	if (err)
		return err == -EPROTO ? -EACCES : err;
	res = rdfs__auth_result__unpack(NULL, len, body);
	if (!res)
		return -EPROTO;
	auth_server_proof(secret, snonce, cnonce, expect);
	err = res->mac.len == AUTH_MAC_LEN && auth_mac_equal(res->mac.data, expect, AUTH_MAC_LEN)
		? 0 : -EACCES;
	rdfs__auth_result__free_unpacked(res, NULL);
	return err;
}

/* "SCHEME://HOST:PORT" (HOST may be [v6]) resolved; the caller frees *ai. */
static int resolve_url(const char *url, size_t scheme_len, struct addrinfo **ai)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	char host[256], *port;

	if (strlen(url + scheme_len) >= sizeof(host))
		return -EINVAL;
	strcpy(host, url + scheme_len);
	port = strrchr(host, ':');
	if (!port)
		return -EINVAL;
	*port++ = '\0';
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	return getaddrinfo(host, port, &hints, ai) ? -EHOSTUNREACH : 0;
}

struct authenticator {
	int fd;
	int timeout_ms;
	struct auth_secret secret;
	char claim[64];
};

/* One challenge of one RDMA connection: the proofs, then the pair is closed. */
static void *authenticator_run(void *arg)
{
	struct authenticator *a = arg;
	struct rdfs_dev_rdma_challenge ch;
	struct rdfs_dev_rdma_proof pr;
	struct pollfd pfd = { .fd = a->fd, .events = POLLIN };
	ssize_t n = -1;

	memset(&pr, 0, sizeof(pr));
	pr.magic = RDFS_DEV_RDMA_MAGIC;
	if (poll(&pfd, 1, a->timeout_ms) == 1)
		n = recv(a->fd, &ch, sizeof(ch), 0);
	if (n == (ssize_t)sizeof(ch) && ch.magic == RDFS_DEV_RDMA_MAGIC) {
		pr.error = auth_random(pr.client_nonce, sizeof(pr.client_nonce));
		if (!pr.error) {
			auth_client_proof(&a->secret, ch.server_nonce, pr.client_nonce, a->claim,
					  pr.client_mac);
			auth_server_proof(&a->secret, ch.server_nonce, pr.client_nonce,
					  pr.server_mac);
			snprintf(pr.role, sizeof(pr.role), "%s", a->claim);
		}
		if (send(a->fd, &pr, sizeof(pr), MSG_NOSIGNAL) < 0)
			log_info(1400001, "RDMA authenticator: %s", strerror(errno));
	} else if (n != 0) {
		/* 0: the module gave up before its challenge came (its connect failed). */
		log_info(1400002, "RDMA authenticator: no challenge within %d ms",
			a->timeout_ms);
	}
	OPENSSL_cleanse(&pr, sizeof(pr));
	OPENSSL_cleanse(&a->secret, sizeof(a->secret));
	close(a->fd);
	free(a);
	return NULL;
}

/*
 * rdma://HOST:PORT: the module's end of an authenticator pair, the address
 * already in it; a detached thread answers the challenge (bounded by
 * @timeout_ms, so a module that never asks costs a thread only that long).
 */
static int rdma_authenticator(const char *url, const struct auth_secret *secret, const char *claim,
			      int timeout_ms)
{
	struct rdfs_dev_rdma_peer peer = { .magic = RDFS_DEV_RDMA_MAGIC };
	struct authenticator *a;
	struct addrinfo *ai;
	pthread_attr_t attr;
	pthread_t thr;
	int sv[2], err;

	err = resolve_url(url, 7, &ai);
	if (err)
		return err;
	if (ai->ai_addrlen > sizeof(peer.addr)) {
		freeaddrinfo(ai);
		return -EAFNOSUPPORT;
	}
	peer.addr_len = ai->ai_addrlen;
	memcpy(peer.addr, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	a = calloc(1, sizeof(*a));
	if (!a) {
		err = -ENOMEM;
		goto fail;
	}
	if (send(sv[1], &peer, sizeof(peer), MSG_NOSIGNAL) < 0) {
		err = -errno;
		goto fail;
	}
	a->fd = sv[1];
	a->timeout_ms = timeout_ms;
	a->secret = *secret;
	snprintf(a->claim, sizeof(a->claim), "%s", claim);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = -pthread_create(&thr, &attr, authenticator_run, a);
	pthread_attr_destroy(&attr);
	if (err) {
		OPENSSL_cleanse(&a->secret, sizeof(a->secret));
		goto fail;
	}
	return sv[0];
fail:
	free(a);
	close(sv[0]);
	close(sv[1]);
	return err;
}

/*
 * tls://: TLS 1.3 with the claim's PSK, then the traffic keys go to kernel TLS
 * (lib/xport_tls.h), so the module's sendmsg()/recvmsg() on the socket are
 * TLS records and the key stays here; the rdfs handshake then runs inside.
 */
static int ktls_handshake(int fd, const char *url, const struct auth_secret *secret,
			  const char *claim, int timeout_ms)
{
	struct xport_tls_client cred;
	struct timespec ts;
	int64_t deadline;
	int flags, err;

	memset(&cred, 0, sizeof(cred));
	if (snprintf(cred.identity, sizeof(cred.identity), "%s", claim) >=
	    (int)sizeof(cred.identity))
		return -EINVAL;
	auth_tls_psk(secret, cred.psk);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	deadline = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + timeout_ms;
	flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	err = xport_tls_connect_ktls(fd, &cred, deadline, url);
	fcntl(fd, F_SETFL, flags);
	OPENSSL_cleanse(&cred, sizeof(cred));
	return err;
}

int ioconn_connect(const char *url, const struct auth_secret *secret, const char *claim,
		   int timeout_ms)
{
	struct addrinfo *ai;
	int fd, err, one = 1, tls;

	if (!strncmp(url, "rdma://", 7))
		return rdma_authenticator(url, secret, claim, timeout_ms);
	tls = !strncmp(url, "tls://", 6);
	if (strncmp(url, "tcp://", 6) && !tls)
		return -EINVAL;
	err = resolve_url(url, 6, &ai);
	if (err)
		return err;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		freeaddrinfo(ai);
		return err;
	}
	err = connect(fd, ai->ai_addr, ai->ai_addrlen) ? -errno : 0;
	freeaddrinfo(ai);
	if (!err) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (tls)
			err = ktls_handshake(fd, url, secret, claim, timeout_ms);
		if (!err)
			err = handshake(fd, secret, claim, timeout_ms);
	}
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}
