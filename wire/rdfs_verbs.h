/* SPDX-License-Identifier: MIT */
/*
 * rdfs_verbs.h - what the verbs transport puts in a SEND, and its validation,
 * defined once for both ends: lib/xport_verbs_*.c (user space: servers,
 * rdfs-fuse) and client-lkm/data_rdma*.c (the kernel client) compile this same
 * file. Pure functions: a receive path trusts nothing it has not passed
 * through verbs_msg_parse().
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
#ifndef RDFS_WIRE_VERBS_H
#define RDFS_WIRE_VERBS_H

#ifdef __KERNEL__
#include <linux/string.h>
#else
#include <stddef.h>
#include <string.h>
#endif

#include "rdfs_frame.h"

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

/*
 * Parse and validate @len received bytes: verbs_msg_parse(). Returns 0, or
 * -EPROTO (bad magic, version, type, frame header; length not what the header
 * announces; descriptors empty, overflowing, too many, not summing to the
 * frame's data), -EMSGSIZE (the frame's body or data exceeds @max_body /
 * @max_data: checked before the caller allocates anything).
 * verbs_params_decode(): -EPROTO for a peer that is not ours or asks for
 * impossible buffers.
 */

#ifdef __cplusplus
static_assert(VERBS_HDR_LEN == 20, "the header documented above is 20 bytes");
static_assert(VERBS_DESC_LEN == 16, "descriptors are addr, len, rkey");
#else
_Static_assert(VERBS_HDR_LEN == 20, "the header documented above is 20 bytes");
_Static_assert(VERBS_DESC_LEN == 16, "descriptors are addr, len, rkey");
#endif

static inline void verbs_hdr_encode(const struct verbs_hdr *vh, uint8_t *buf)
{
	rdfs_wire_put_le32(buf + 0, VERBS_MAGIC);
	buf[4] = VERBS_VERSION;
	buf[5] = vh->type;
	rdfs_wire_put_le16(buf + 6, vh->credits);
	rdfs_wire_put_le32(buf + 8, vh->cookie);
	rdfs_wire_put_le32(buf + 12, (uint32_t)vh->status);
	rdfs_wire_put_le16(buf + 16, vh->ndesc);
	buf[18] = vh->flags;
	buf[19] = 0;
}

static inline void verbs_desc_put(uint8_t *buf, const struct verbs_desc *d)
{
	rdfs_wire_put_le64(buf, d->addr);
	rdfs_wire_put_le32(buf + 8, d->len);
	rdfs_wire_put_le32(buf + 12, d->rkey);
}

static inline void verbs_desc_get(const uint8_t *buf, struct verbs_desc *d)
{
	d->addr = rdfs_wire_get_le64(buf);
	d->len = rdfs_wire_get_le32(buf + 8);
	d->rkey = rdfs_wire_get_le32(buf + 12);
}

static inline size_t verbs_eager_len(uint32_t body_len, uint32_t data_len)
{
	return VERBS_HDR_LEN + RDFS_FRAME_HDR_LEN + (size_t)body_len + data_len;
}

static inline size_t verbs_rndv_len(unsigned int ndesc, uint32_t inline_body_len)
{
	return VERBS_HDR_LEN + (size_t)ndesc * VERBS_DESC_LEN + RDFS_FRAME_HDR_LEN +
	       inline_body_len;
}

static inline size_t verbs_sink_len(unsigned int ndesc, uint32_t body_len,
				    uint32_t data_len)
{
	return verbs_eager_len(body_len, data_len) + (size_t)ndesc * VERBS_DESC_LEN;
}

/* Sink pieces: none empty, none wrapping, all together within what one reply carries. */
static inline int verbs_check_sink(const struct verbs_msg *m)
{
	uint64_t sum = 0;
	struct verbs_desc d;
	unsigned int i;

	for (i = 0; i < m->vh.ndesc; i++) {
		verbs_desc_get(m->desc + (size_t)i * VERBS_DESC_LEN, &d);
		if (!d.len || d.addr + d.len < d.addr)
			return -EPROTO;
		sum += d.len;
	}
	return sum > RDFS_MAX_DATA ? -EPROTO : 0;
}

/* The descriptors of an RNDV message against its frame header. */
static inline int verbs_check_descs(const struct verbs_msg *m)
{
	uint64_t want = m->fh.data_len, sum = 0;
	struct verbs_desc d;
	unsigned int i;

	if (m->vh.ndesc == 0 || m->vh.ndesc > VERBS_MAX_DESC)
		return -EPROTO;
	if (m->vh.flags & VERBS_F_BODY_REMOTE) {
		if (m->fh.body_len == 0)
			return -EPROTO;
		want += m->fh.body_len;
		verbs_desc_get(m->desc, &d);
		if (d.len != m->fh.body_len)
			return -EPROTO;
	} else if (m->fh.data_len == 0) {
		return -EPROTO;		/* nothing remote: it had to be EAGER */
	}
	for (i = 0; i < m->vh.ndesc; i++) {
		verbs_desc_get(m->desc + (size_t)i * VERBS_DESC_LEN, &d);
		if (d.len == 0 || d.len > RDFS_MAX_DATA || d.addr + d.len < d.addr)
			return -EPROTO;
		sum += d.len;
		if (sum > want)
			return -EPROTO;
	}
	return sum == want ? 0 : -EPROTO;
}

/* The frame header at @p with @avail bytes left; limits first, before any allocation. */
static inline int verbs_parse_frame(const uint8_t *p, size_t avail, uint32_t max_body,
				    uint32_t max_data, struct verbs_msg *m)
{
	int err;

	if (avail < RDFS_FRAME_HDR_LEN)
		return -EPROTO;
	err = rdfs_frame_hdr_decode(p, &m->fh);
	if (err)
		return err;
	if (m->fh.body_len > max_body || m->fh.data_len > max_data)
		return -EMSGSIZE;
	return 0;
}

/*
 * RNDV, SINK, PLACED: the m->vh.ndesc descriptors after the header, then the
 * frame header (limits first); *@p is left at the frame header.
 */
static inline int verbs_parse_descs_frame(const uint8_t *buf, size_t len, uint32_t max_body,
					  uint32_t max_data, struct verbs_msg *m,
					  const uint8_t **p)
{
	size_t descs = (size_t)m->vh.ndesc * VERBS_DESC_LEN;

	if (len < VERBS_HDR_LEN + descs)
		return -EPROTO;
	m->desc = buf + VERBS_HDR_LEN;
	*p = m->desc + descs;
	return verbs_parse_frame(*p, len - VERBS_HDR_LEN - descs, max_body, max_data, m);
}

static inline int verbs_msg_parse(const uint8_t *buf, size_t len, uint32_t max_body,
				  uint32_t max_data, struct verbs_msg *out)
{
	struct verbs_msg m;
	const uint8_t *p;
	size_t inl;
	int err;

	memset(&m, 0, sizeof(m));
	if (len < VERBS_HDR_LEN || rdfs_wire_get_le32(buf) != VERBS_MAGIC || buf[4] != VERBS_VERSION ||
	    buf[19] != 0)
		return -EPROTO;
	m.vh.type = buf[5];
	m.vh.credits = rdfs_wire_get_le16(buf + 6);
	m.vh.cookie = rdfs_wire_get_le32(buf + 8);
	m.vh.status = (int32_t)rdfs_wire_get_le32(buf + 12);
	m.vh.ndesc = rdfs_wire_get_le16(buf + 16);
	m.vh.flags = buf[18];
	p = buf + VERBS_HDR_LEN;

	switch (m.vh.type) {
	case VERBS_MSG_DONE:
	case VERBS_MSG_CREDIT:
		if (len != VERBS_HDR_LEN || m.vh.ndesc || m.vh.flags)
			return -EPROTO;
		if (m.vh.type == VERBS_MSG_CREDIT && (m.vh.cookie || m.vh.status))
			return -EPROTO;
		if (m.vh.status > 0)
			return -EPROTO;
		break;
	case VERBS_MSG_EAGER:
		if (m.vh.ndesc || m.vh.flags || m.vh.cookie || m.vh.status)
			return -EPROTO;
		err = verbs_parse_frame(p, len - VERBS_HDR_LEN, max_body, max_data, &m);
		if (err)
			return err;
		if (len != verbs_eager_len(m.fh.body_len, m.fh.data_len))
			return -EPROTO;
		p += RDFS_FRAME_HDR_LEN;
		m.body = m.fh.body_len ? p : NULL;
		m.data = m.fh.data_len ? p + m.fh.body_len : NULL;
		break;
	case VERBS_MSG_RNDV:
		if ((m.vh.flags & ~VERBS_F_BODY_REMOTE) || m.vh.status ||
		    m.vh.ndesc > VERBS_MAX_DESC)
			return -EPROTO;
		err = verbs_parse_descs_frame(buf, len, max_body, max_data, &m, &p);
		if (err)
			return err;
		inl = (m.vh.flags & VERBS_F_BODY_REMOTE) ? 0 : m.fh.body_len;
		if (len != verbs_rndv_len(m.vh.ndesc, (uint32_t)inl))
			return -EPROTO;
		err = verbs_check_descs(&m);
		if (err)
			return err;
		p += RDFS_FRAME_HDR_LEN;
		m.body = inl ? p : NULL;
		break;
	case VERBS_MSG_SINK:
	case VERBS_MSG_PLACED:
		if (m.vh.flags || m.vh.status || m.vh.cookie || m.vh.ndesc == 0 ||
		    m.vh.ndesc > VERBS_MAX_DESC ||
		    (m.vh.type == VERBS_MSG_PLACED && m.vh.ndesc != 1))
			return -EPROTO;
		err = verbs_parse_descs_frame(buf, len, max_body, max_data, &m, &p);
		if (err)
			return err;
		if (len != verbs_sink_len(m.vh.ndesc, m.fh.body_len, m.fh.data_len))
			return -EPROTO;
		if (m.vh.type == VERBS_MSG_SINK) {
			err = verbs_check_sink(&m);
			if (err)
				return err;
		} else {
			struct verbs_desc d;

			verbs_desc_get(m.desc, &d);
			if (m.fh.data_len || !d.len || d.rkey || d.len > RDFS_MAX_DATA ||
			    d.addr > RDFS_MAX_DATA || d.addr + d.len > RDFS_MAX_DATA)
				return -EPROTO;
		}
		p += RDFS_FRAME_HDR_LEN;
		m.body = m.fh.body_len ? p : NULL;
		m.data = m.fh.data_len ? p + m.fh.body_len : NULL;
		break;
	default:
		return -EPROTO;
	}
	*out = m;
	return 0;
}

static inline void verbs_params_encode(const struct verbs_conn_params *p, uint8_t *buf)
{
	rdfs_wire_put_le32(buf, VERBS_MAGIC);
	buf[4] = VERBS_VERSION;
	buf[5] = 0;
	rdfs_wire_put_le16(buf + 6, p->credits);
	rdfs_wire_put_le32(buf + 8, p->recv_size);
}

static inline int verbs_params_decode(const void *data, size_t len, struct verbs_conn_params *p)
{
	const uint8_t *buf = (const uint8_t *)data;

	if (!buf || len < VERBS_PRIV_LEN || rdfs_wire_get_le32(buf) != VERBS_MAGIC ||
	    buf[4] != VERBS_VERSION)
		return -EPROTO;
	p->credits = rdfs_wire_get_le16(buf + 6);
	p->recv_size = rdfs_wire_get_le32(buf + 8);
	if (p->credits < VERBS_MIN_CREDITS || p->recv_size < VERBS_MIN_RECV_SIZE ||
	    p->recv_size > VERBS_MAX_RECV_SIZE)
		return -EPROTO;
	return 0;
}

#endif
