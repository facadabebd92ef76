// SPDX-License-Identifier: MIT
/*
 * ioconn.c - an authenticated TCP connection to an I/O server whose socket
 * is handed to the kernel module (RDFS_DEV_CONNECT), so the cluster secret
 * stays in user space while file data flows in the kernel.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "frame.h"
#include "helper.h"
#include "rdfs.pb-c.h"

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
	frame_hdr_encode(&h, buf);
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
	err = frame_hdr_decode(hb, &h);
	if (err)
		return err;
	if (h.status)
		return h.status < 0 ? h.status : -EPROTO;
	if (h.opcode != op || h.body_len > size || h.data_len)
		return -EPROTO;
	*len = h.body_len;
	return io_full(fd, body, h.body_len, 1, timeout_ms);
}

static int handshake(int fd, const struct auth_secret *secret, int timeout_ms)
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
	auth_client_proof(secret, snonce, cnonce, "client", mac);
	resp.mac.data = mac;
	resp.mac.len = sizeof(mac);
	resp.client_nonce.data = cnonce;
	resp.client_nonce.len = sizeof(cnonce);
	resp.role = "client";
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

int ioconn_connect(const char *url, const struct auth_secret *secret, int timeout_ms)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	char host[256], *port;
	int fd, err, one = 1;

	if (strncmp(url, "tcp://", 6) || strlen(url + 6) >= sizeof(host))
		return -EINVAL;
	strcpy(host, url + 6);
	port = strrchr(host, ':');
	if (!port)
		return -EINVAL;
	*port++ = '\0';
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	err = getaddrinfo(host, port, &hints, &ai);
	if (err)
		return -EHOSTUNREACH;
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
		err = handshake(fd, secret, timeout_ms);
	}
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}
