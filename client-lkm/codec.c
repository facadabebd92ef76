// SPDX-License-Identifier: GPL-2.0
/*
 * codec.c - hand-written protobuf encoding of the I/O-server messages, so the
 * kernel needs no protobuf library; see codec.h.
 */
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <asm/unaligned.h>

#include "codec.h"

static size_t varint_size(u64 v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static u8 *put_varint(u8 *p, u64 v)
{
	while (v >= 0x80) {
		*p++ = (u8)v | 0x80;
		v >>= 7;
	}
	*p++ = (u8)v;
	return p;
}

static int get_varint(const u8 **p, const u8 *end, u64 *v)
{
	unsigned int shift = 0;

	*v = 0;
	while (*p < end && shift < 64) {
		u8 b = *(*p)++;

		*v |= (u64)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
		shift += 7;
	}
	return -EBADMSG;
}

/*
 * A field's key: at most 5 bytes, field number 1..2^29-1, as protobuf (and
 * protobuf-c, which the servers use) defines it; 0 or -EBADMSG.
 */
static int get_key(const u8 **p, const u8 *end, u64 *key)
{
	const u8 *start = *p;

	if (get_varint(p, end, key) || *p - start > 5 || !(*key >> 3) ||
	    (*key >> 3) > 0x1fffffff)
		return -EBADMSG;
	return 0;
}

/* Skip a field of wire type @wt; 0 or -EBADMSG. */
static int skip_field(const u8 **p, const u8 *end, unsigned int wt)
{
	u64 v;

	switch (wt) {
	case 0:
		return get_varint(p, end, &v);
	case 1:
		if (end - *p < 8)
			return -EBADMSG;
		*p += 8;
		return 0;
	case 2:
		if (get_varint(p, end, &v) || v > (u64)(end - *p))
			return -EBADMSG;
		*p += v;
		return 0;
	case 5:
		if (end - *p < 4)
			return -EBADMSG;
		*p += 4;
		return 0;
	}
	return -EBADMSG;
}

#define KEY(field, wt)	(((field) << 3) | (wt))

size_t rdfs_ioreq_size(const struct rdfs_ioreq *r)
{
	size_t n = 0;

	if (r->cap)
		n += 1 + varint_size(r->cap_len) + r->cap_len;
	if (r->first_block)
		n += 1 + varint_size(r->first_block);
	if (r->block_count)
		n += 1 + varint_size(r->block_count);
	if (r->head)
		n += 1 + varint_size(r->head);
	if (r->length)
		n += 1 + varint_size(r->length);
	if (r->stable)
		n += 2;
	return n;
}

size_t rdfs_ioreq_encode(const struct rdfs_ioreq *r, u8 *buf)
{
	u8 *p = buf;

	if (r->cap) {
		*p++ = KEY(1, 2);
		p = put_varint(p, r->cap_len);
		memcpy(p, r->cap, r->cap_len);
		p += r->cap_len;
	}
	if (r->first_block) {
		*p++ = KEY(2, 0);
		p = put_varint(p, r->first_block);
	}
	if (r->block_count) {
		*p++ = KEY(3, 0);
		p = put_varint(p, r->block_count);
	}
	if (r->head) {
		*p++ = KEY(4, 0);
		p = put_varint(p, r->head);
	}
	if (r->length) {
		*p++ = KEY(5, 0);
		p = put_varint(p, r->length);
	}
	if (r->stable) {
		*p++ = KEY(6, 0);
		*p++ = 1;
	}
	return p - buf;
}

int rdfs_ioreq_decode(const u8 *buf, size_t len, struct rdfs_ioreq *r)
{
	const u8 *p = buf, *end = buf + len;
	u64 key, v;

	memset(r, 0, sizeof(*r));
	while (p < end) {
		if (get_key(&p, end, &key))
			return -EBADMSG;
		if (key == KEY(1, 2)) {
			if (get_varint(&p, end, &v) || v > (u64)(end - p))
				return -EBADMSG;
			r->cap = p;
			r->cap_len = v;
			p += v;
			continue;
		}
		/* one of ours with another wire type is malformed, as protobuf-c says */
		if ((key >> 3) <= 6 && (key & 7) != 0)
			return -EBADMSG;
		if ((key >> 3) > 6) {
			if (skip_field(&p, end, key & 7))
				return -EBADMSG;
			continue;
		}
		if (get_varint(&p, end, &v))
			return -EBADMSG;
		switch (key >> 3) {
		case 2:
			r->first_block = v;
			break;
		case 3:
			r->block_count = v;
			break;
		case 4:
			r->head = v;
			break;
		case 5:
			r->length = v;
			break;
		case 6:
			r->stable = v != 0;
			break;
		}
	}
	return 0;
}

size_t rdfs_ioreply_encode(const struct rdfs_ioreply *r, u8 *buf)
{
	u8 *p = buf;

	if (r->length) {
		*p++ = KEY(1, 0);
		p = put_varint(p, r->length);
	}
	if (r->verifier) {
		*p++ = KEY(2, 1);
		put_unaligned_le64(r->verifier, p);
		p += 8;
	}
	return p - buf;
}

int rdfs_ioreply_decode(const u8 *buf, size_t len, struct rdfs_ioreply *r)
{
	const u8 *p = buf, *end = buf + len;
	u64 key, v;

	memset(r, 0, sizeof(*r));
	while (p < end) {
		if (get_key(&p, end, &key))
			return -EBADMSG;
		if (key == KEY(1, 0)) {
			if (get_varint(&p, end, &v))
				return -EBADMSG;
			r->length = v;
		} else if (key == KEY(2, 1)) {
			if (end - p < 8)
				return -EBADMSG;
			r->verifier = get_unaligned_le64(p);
			p += 8;
		} else if ((key >> 3) <= 2 || skip_field(&p, end, key & 7)) {
			return -EBADMSG;	/* ours with another wire type, or malformed */
		}
	}
	return 0;
}
