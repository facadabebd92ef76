/* SPDX-License-Identifier: MIT */
/*
 * xport_verbs_wire.h - what the verbs module puts in a SEND, and its validation.
 *
 * Every SEND carries one receive buffer's worth at most (the receiver's buffer
 * size, told in the connection's private data). Wire layout, little-endian:
 *
 *   0  u32 magic    VERBS_MAGIC ("RDVB")
 *   4  u8  version  VERBS_VERSION
 *   5  u8  type     enum verbs_msg_type
 *   6  u16 credits  receive buffers the sender reposted since it last said so
 *   8  u32 cookie   RNDV, DONE: the sender's name for one rendezvous
 *  12  i32 status   DONE: 0 or -errno of the receiver's RDMA READ; else 0
 *  16  u16 ndesc    RNDV: descriptors that follow; else 0
 *  18  u8  flags    RNDV: VERBS_F_BODY_REMOTE
 *  19  u8  reserved 0
 *
 * then, by type:
 *   EAGER   rdfs frame header (24) | body | data           (the whole frame)
 *   RNDV    ndesc x { u64 addr, u32 len, u32 rkey } | frame header | body
 *           The descriptors name the sender's memory holding the frame's data
 *           (and its body first, as descriptor 0 of exactly body_len bytes,
 *           when VERBS_F_BODY_REMOTE: a body too big for a receive buffer), in
 *           order; the receiver RDMA-READs them and answers DONE.
 *   SINK    ndesc x { u64 addr, u32 len, u32 rkey } | frame header | body | data
 *           A request (otherwise an EAGER message) that exposes the sender's
 *           memory for the reply's data: the receiver may RDMA-WRITE it, in
 *           descriptor order as one run of bytes, until the reply's final frame.
 *   PLACED  1 x { u64 off, u32 len, u32 0 } | frame header | body
 *           A frame with no data of its own (data_len 0): len bytes of the
 *           reply were RDMA-WRITten into the request's sink at off first.
 *   DONE    nothing: the rendezvous @cookie is finished, its rkeys are dead.
 *   CREDIT  nothing: only returns credits, when no other traffic carries them.
 *
 * The received length must be exactly what the header announces: anything else
 * is a protocol error that closes the connection.
 *
 * Connection private data (rdma_connect / rdma_accept), little-endian:
 *   0 u32 magic, 4 u8 version, 5 u8 0, 6 u16 credits (receives posted),
 *   8 u32 recv_size (bytes per receive buffer)
 */
#ifndef RDFS_XPORT_VERBS_WIRE_H
#define RDFS_XPORT_VERBS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"

#define VERBS_MAGIC		0x42564452u	/* "RDVB" */
#define VERBS_VERSION		1
#define VERBS_HDR_LEN		20
#define VERBS_DESC_LEN		16
#define VERBS_PRIV_LEN		12
#define VERBS_F_BODY_REMOTE	0x01
/* One per data iovec of a post (XPORT_MAX_IOV) plus a remote body. */
#define VERBS_MAX_DESC		65
/* A receive buffer must hold a full descriptor list with a frame header. */
#define VERBS_MIN_RECV_SIZE	4096u
#define VERBS_MAX_RECV_SIZE	(1u << 20)
/*
 * Fewer receives cannot work: a message may not spend the last credit, and a
 * CREDIT message is only due at 2 owed (xport_verbs_credit.h).
 */
#define VERBS_MIN_CREDITS	4

enum verbs_msg_type {
	VERBS_MSG_EAGER = 1,
	VERBS_MSG_RNDV = 2,
	VERBS_MSG_DONE = 3,
	VERBS_MSG_CREDIT = 4,
	VERBS_MSG_SINK = 5,
	VERBS_MSG_PLACED = 6,
};

struct verbs_hdr {
	uint8_t type;
	uint8_t flags;
	uint16_t credits;
	uint32_t cookie;
	int32_t status;
	uint16_t ndesc;
};

struct verbs_desc {
	uint64_t addr;
	uint32_t len;
	uint32_t rkey;
};

/* A parsed, validated receive buffer; pointers point into it. */
struct verbs_msg {
	struct verbs_hdr vh;
	const uint8_t *desc;		/* RNDV, SINK, PLACED: ndesc encoded descriptors */
	struct rdfs_frame_hdr fh;	/* EAGER, RNDV */
	const uint8_t *body;		/* inline body (NULL when remote or empty) */
	const uint8_t *data;		/* EAGER, SINK: inline data (NULL when empty) */
};

struct verbs_conn_params {
	uint16_t credits;
	uint32_t recv_size;
};

void verbs_hdr_encode(const struct verbs_hdr *vh, uint8_t *buf);
void verbs_desc_put(uint8_t *buf, const struct verbs_desc *d);
void verbs_desc_get(const uint8_t *buf, struct verbs_desc *d);

/*
 * Parse and validate @len received bytes. Returns 0, or -EPROTO (bad magic,
 * version, type, frame header; length not what the header announces;
 * descriptors empty, overflowing, too many, not summing to the frame's data),
 * -EMSGSIZE (the frame's body or data exceeds @max_body / @max_data: checked
 * before the caller allocates anything).
 */
int verbs_msg_parse(const uint8_t *buf, size_t len, uint32_t max_body, uint32_t max_data,
		    struct verbs_msg *out);

/* Bytes of an EAGER message for a frame, and of an RNDV one (body inline or not). */
size_t verbs_eager_len(uint32_t body_len, uint32_t data_len);
size_t verbs_rndv_len(unsigned int ndesc, uint32_t inline_body_len);
size_t verbs_sink_len(unsigned int ndesc, uint32_t body_len, uint32_t data_len);

void verbs_params_encode(const struct verbs_conn_params *p, uint8_t *buf);
/* -EPROTO for a peer that is not ours or asks for impossible buffers. */
int verbs_params_decode(const void *buf, size_t len, struct verbs_conn_params *p);

#endif
