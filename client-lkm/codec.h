/* SPDX-License-Identifier: GPL-2.0 */
/*
 * codec.h - the in-kernel codec of the I/O-server messages: the frame header
 * of lib/frame.h and rdfs.proto's IoReq and IoReply, encoded by hand exactly
 * as protobuf-c does (proto3: zero scalars omitted, fields in number order),
 * checked against protobuf-c by the vectors in client-lkm/vectors/.
 */
#ifndef RDFS_CODEC_H
#define RDFS_CODEC_H

#include <linux/types.h>

#define RDFS_FRAME_MAGIC	0x53464452u
#define RDFS_FRAME_VERSION	1
#define RDFS_FRAME_HDR_LEN	24
#define RDFS_FRAME_REPLY	0x01
#define RDFS_FRAME_MORE		0x02
#define RDFS_MAX_BODY		(1u << 20)
#define RDFS_MAX_DATA		(16u << 20)
#define RDFS_BLOCK_SIZE		4096u

#define RDFS_OP_READ		64
#define RDFS_OP_WRITE		65
#define RDFS_OP_IO_COMMIT	66

struct rdfs_frame {
	u32 magic;
	u8 version;
	u8 flags;
	u16 opcode;
	s32 status;
	u32 tag;
	u32 body_len;
	u32 data_len;
};

struct rdfs_ioreq {
	const u8 *cap;		/* encoded Capability */
	u32 cap_len;
	u64 first_block;
	u32 block_count;
	u32 head;
	u32 length;
	bool stable;
};

struct rdfs_ioreply {
	u32 length;
	u64 verifier;
};

void rdfs_frame_encode(const struct rdfs_frame *f, u8 *buf);
/* 0, -EPROTO for a bad header, -EMSGSIZE for lengths over the limits. */
int rdfs_frame_decode(const u8 *buf, struct rdfs_frame *f);
/* Bytes IoReq @r encodes to. */
size_t rdfs_ioreq_size(const struct rdfs_ioreq *r);
/* Encode @r into @buf (rdfs_ioreq_size() bytes); returns the length. */
size_t rdfs_ioreq_encode(const struct rdfs_ioreq *r, u8 *buf);
/* 0 or -EBADMSG; @r->cap points into @buf. */
int rdfs_ioreq_decode(const u8 *buf, size_t len, struct rdfs_ioreq *r);
size_t rdfs_ioreply_encode(const struct rdfs_ioreply *r, u8 *buf);
int rdfs_ioreply_decode(const u8 *buf, size_t len, struct rdfs_ioreply *r);
/* Check the codec against the built-in vectors: 0 or -EINVAL. */
int rdfs_codec_selftest(void);

#endif
