// SPDX-License-Identifier: MIT
/*
 * pb_strings.c - walk a protobuf encoding by its descriptor and look inside
 * every length-delimited string field for a NUL (see pb_strings.h).
 */
#include <errno.h>
#include <string.h>

#include "pb_strings.h"

/* Nesting deeper than this is not something our schema has: refuse it. */
#define PB_MAX_DEPTH	8

static int read_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
{
	uint64_t r = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		uint8_t b;

		if (*off >= len)
			return -EBADMSG;
		b = p[(*off)++];
		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -EBADMSG;
}

static int check(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len, int depth)
{
	size_t off = 0;

	if (depth > PB_MAX_DEPTH)
		return -EBADMSG;
	while (off < len) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key, v;
		int err = read_varint(p, len, &off, &key);

		if (err)
			return err;
		switch (key & 7) {
		case 0:		/* varint */
			err = read_varint(p, len, &off, &v);
			break;
		case 1:		/* 64-bit */
			err = len - off < 8 ? -EBADMSG : 0;
			off += 8;
			break;
		case 5:		/* 32-bit */
			err = len - off < 4 ? -EBADMSG : 0;
			off += 4;
			break;
		case 2:		/* length-delimited */
			err = read_varint(p, len, &off, &v);
			if (err || v > len - off)
				return -EBADMSG;
			f = key >> 3 <= UINT32_MAX ?
				protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3)) :
				NULL;
			if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p + off, 0, v))
				return -EINVAL;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE)
				err = check(f->descriptor, p + off, v, depth + 1);
			off += v;
			break;
		default:	/* groups: not in proto3 */
			return -EBADMSG;
		}
		if (err)
			return err;
	}
	return 0;
}

int pb_strings_check(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len)
{
	return check(desc, buf, len, 0);
}
