// SPDX-License-Identifier: MIT
/*
 * rpc.c - the message helpers both halves of lib/rpc use: frame headers and
 * protobuf bodies (rpc_client.c and rpc_server.c hold the two halves).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdfs.pb-c.h"
#include "rpc_internal.h"

/* Bodies up to this size are packed on the stack. */
#define RPC_STACK_BODY		4096

int64_t rpc_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rpc_hdr_init(struct rdfs_frame_hdr *h, uint16_t op, uint8_t flags, int status,
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

int rpc_iov_sum(const struct iovec *iov, int niov, size_t *out)
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

int rpc_send_msg(struct xport_conn *conn, uint16_t op, uint8_t flags, int status,
		 uint32_t tag, const ProtobufCMessage *m, const struct iovec *data, int niov)
{
	uint8_t stackbuf[RPC_STACK_BODY];
	struct rdfs_frame_hdr h;
	size_t blen, dlen;
	uint8_t *body;
	int err;

	err = rpc_iov_sum(data, niov, &dlen);
	if (err)
		return err;
	err = pack_body(m, stackbuf, sizeof(stackbuf), &body, &blen);
	if (err)
		return err;
	rpc_hdr_init(&h, op, flags, status, tag, blen, dlen);
	err = xport_post_send(conn, &h, body, data, niov, NULL);
	if (body != stackbuf)
		free(body);
	return err;
}

int rpc_send_error(struct xport_conn *conn, uint16_t op, uint32_t tag, int status,
		   const char *message)
{
	Rdfs__Error e = RDFS__ERROR__INIT;

	e.message = (char *)(message ? message : strerror(-status));
	return rpc_send_msg(conn, op, RDFS_FRAME_REPLY, status, tag, &e.base, NULL, 0);
}
