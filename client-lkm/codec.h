/* SPDX-License-Identifier: GPL-2.0 */
/*
 * codec.h - the in-kernel codec of the I/O-server messages: rdfs.proto's IoReq
 * and IoReply (the frame header is wire/rdfs_frame.h's), encoded by hand exactly
 * as protobuf-c does (proto3: zero scalars omitted, fields in number order),
 * checked against protobuf-c by the vectors in client-lkm/vectors/.
 */
#ifndef RDFS_CODEC_H
#define RDFS_CODEC_H

#include <linux/types.h>

/* The frame header, opcodes and limits: one definition with user space. */
#include "rdfs_frame.h"

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
