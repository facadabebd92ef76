// SPDX-License-Identifier: MIT
/*
 * xport_verbs_wire.c - encode and validate the verbs module's SEND messages and
 * connection parameters (layout in xport_verbs_wire.h). Pure functions: the
 * receive path trusts nothing it has not passed through verbs_msg_parse().
 */
#include <errno.h>
#include <string.h>

#include "xport_verbs_wire.h"

_Static_assert(VERBS_HDR_LEN == 20, "xport_verbs_wire.h documents a 20-byte header");
_Static_assert(VERBS_DESC_LEN == 16, "descriptors are addr, len, rkey");

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	put_le16(p, (uint16_t)v);
	put_le16(p + 2, (uint16_t)(v >> 16));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)get_le16(p) | (uint32_t)get_le16(p + 2) << 16;
}

static uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

void verbs_hdr_encode(const struct verbs_hdr *vh, uint8_t *buf)
{
	put_le32(buf + 0, VERBS_MAGIC);
	buf[4] = VERBS_VERSION;
	buf[5] = vh->type;
	put_le16(buf + 6, vh->credits);
	put_le32(buf + 8, vh->cookie);
	put_le32(buf + 12, (uint32_t)vh->status);
	put_le16(buf + 16, vh->ndesc);
	buf[18] = vh->flags;
	buf[19] = 0;
}

void verbs_desc_put(uint8_t *buf, const struct verbs_desc *d)
{
	put_le64(buf, d->addr);
	put_le32(buf + 8, d->len);
	put_le32(buf + 12, d->rkey);
}

void verbs_desc_get(const uint8_t *buf, struct verbs_desc *d)
{
	d->addr = get_le64(buf);
	d->len = get_le32(buf + 8);
	d->rkey = get_le32(buf + 12);
}

size_t verbs_eager_len(uint32_t body_len, uint32_t data_len)
{
	return VERBS_HDR_LEN + RDFS_FRAME_HDR_LEN + (size_t)body_len + data_len;
}

size_t verbs_rndv_len(unsigned int ndesc, uint32_t inline_body_len)
{
	return VERBS_HDR_LEN + (size_t)ndesc * VERBS_DESC_LEN + RDFS_FRAME_HDR_LEN +
	       inline_body_len;
}

size_t verbs_sink_len(unsigned int ndesc, uint32_t body_len, uint32_t data_len)
{
	return verbs_eager_len(body_len, data_len) + (size_t)ndesc * VERBS_DESC_LEN;
}

/* Sink pieces: none empty, none wrapping, all together within what one reply carries. */
static int check_sink(const struct verbs_msg *m)
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
static int check_descs(const struct verbs_msg *m)
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
static int parse_frame(const uint8_t *p, size_t avail, uint32_t max_body, uint32_t max_data,
		       struct verbs_msg *m)
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

int verbs_msg_parse(const uint8_t *buf, size_t len, uint32_t max_body, uint32_t max_data,
		    struct verbs_msg *out)
{
	struct verbs_msg m;
	const uint8_t *p;
	size_t descs, inl;
	int err;

	memset(&m, 0, sizeof(m));
	if (len < VERBS_HDR_LEN || get_le32(buf) != VERBS_MAGIC || buf[4] != VERBS_VERSION ||
	    buf[19] != 0)
		return -EPROTO;
	m.vh.type = buf[5];
	m.vh.credits = get_le16(buf + 6);
	m.vh.cookie = get_le32(buf + 8);
	m.vh.status = (int32_t)get_le32(buf + 12);
	m.vh.ndesc = get_le16(buf + 16);
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
		err = parse_frame(p, len - VERBS_HDR_LEN, max_body, max_data, &m);
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
		descs = (size_t)m.vh.ndesc * VERBS_DESC_LEN;
		if (len < VERBS_HDR_LEN + descs)
			return -EPROTO;
		m.desc = p;
		p += descs;
		err = parse_frame(p, len - VERBS_HDR_LEN - descs, max_body, max_data, &m);
		if (err)
			return err;
		inl = (m.vh.flags & VERBS_F_BODY_REMOTE) ? 0 : m.fh.body_len;
		if (len != verbs_rndv_len(m.vh.ndesc, (uint32_t)inl))
			return -EPROTO;
		err = check_descs(&m);
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
		descs = (size_t)m.vh.ndesc * VERBS_DESC_LEN;
		if (len < VERBS_HDR_LEN + descs)
			return -EPROTO;
		m.desc = p;
		p += descs;
		err = parse_frame(p, len - VERBS_HDR_LEN - descs, max_body, max_data, &m);
		if (err)
			return err;
		if (len != verbs_sink_len(m.vh.ndesc, m.fh.body_len, m.fh.data_len))
			return -EPROTO;
		if (m.vh.type == VERBS_MSG_SINK) {
			err = check_sink(&m);
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

void verbs_params_encode(const struct verbs_conn_params *p, uint8_t *buf)
{
	put_le32(buf, VERBS_MAGIC);
	buf[4] = VERBS_VERSION;
	buf[5] = 0;
	put_le16(buf + 6, p->credits);
	put_le32(buf + 8, p->recv_size);
}

int verbs_params_decode(const void *data, size_t len, struct verbs_conn_params *p)
{
	const uint8_t *buf = data;

	if (!buf || len < VERBS_PRIV_LEN || get_le32(buf) != VERBS_MAGIC ||
	    buf[4] != VERBS_VERSION)
		return -EPROTO;
	p->credits = get_le16(buf + 6);
	p->recv_size = get_le32(buf + 8);
	if (p->credits < VERBS_MIN_CREDITS || p->recv_size < VERBS_MIN_RECV_SIZE ||
	    p->recv_size > VERBS_MAX_RECV_SIZE)
		return -EPROTO;
	return 0;
}
