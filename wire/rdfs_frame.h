/* SPDX-License-Identifier: MIT */
/*
 * rdfs_frame.h - the fixed header in front of every rdfs message, defined once
 * for every side of the wire: lib/ (user space: servers, rdfs-fuse, tools) and
 * client-lkm/ (the kernel client, which gets this file beside its own sources)
 * compile this same file. Only C that both accept: fixed-width integer types,
 * static inline functions, no library calls.
 *
 * Wire layout, all integers little-endian:
 *
 *   0  u32 magic      RDFS_FRAME_MAGIC
 *   4  u8  version    RDFS_FRAME_VERSION
 *   5  u8  flags      RDFS_FRAME_REPLY for replies, | RDFS_FRAME_MORE for parts
 *   6  u16 opcode     enum rdfs_op
 *   8  i32 status     0 or -errno (replies)
 *  12  u32 tag        chosen by the requester, echoed in the reply
 *  16  u32 body_len   length of the protobuf body that follows
 *  20  u32 data_len   length of raw bulk data after the body
 *
 * The hard limits below are checked before any allocation, so a peer cannot make
 * us allocate more than RDFS_MAX_BODY + RDFS_MAX_DATA for one message.
 */
#ifndef RDFS_WIRE_FRAME_H
#define RDFS_WIRE_FRAME_H

#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/types.h>
#else
#include <errno.h>
#include <stdint.h>
#endif

#define RDFS_FRAME_MAGIC	0x53464452u	/* "RDFS" */
#define RDFS_FRAME_VERSION	1
#define RDFS_FRAME_HDR_LEN	24
#define RDFS_FRAME_REPLY	0x01
/*
 * A partial reply (only with RDFS_FRAME_REPLY): it carries bulk data only
 * (body_len 0, status 0) and more frames with the same tag follow; the frame
 * without this flag ends the reply and carries its status and body. This is how
 * an I/O server puts each unit of a READ on the wire the moment the disk has
 * it (gmblock's synchronized send), and how a failure after some units were
 * sent still reaches the client as a status. Partial frames of one reply are in
 * order; frames of different replies may interleave. The data of all frames of
 * one reply together is bounded by RDFS_MAX_DATA.
 */
#define RDFS_FRAME_MORE		0x02

/* Largest protobuf body: a readdir page or a 64 KiB xattr value, with margin. */
#define RDFS_MAX_BODY		(1u << 20)
/* Largest bulk payload of one READ/WRITE. */
#define RDFS_MAX_DATA		(16u << 20)

#define RDFS_BLOCK_SIZE		4096u
/*
 * CommitReq.incarnation when the writes were made under layouts of more than
 * one metaserver incarnation (LayoutReply.incarnation): never a real one.
 */
#define RDFS_INCARNATION_MIXED	0xffffffffffffffffull
#define RDFS_NAME_MAX		255u
#define RDFS_SYMLINK_MAX	4095u
#define RDFS_XATTR_NAME_MAX	255u
#define RDFS_XATTR_SIZE_MAX	65536u
/* Copies of a chunk a file may ask for (rdfs.copies), each on its own I/O server. */
#define RDFS_MAX_COPIES		8
#define RDFS_MAX_COPIES_STR	"8"
#define RDFS_COPIES_XATTR	"rdfs.copies"
/*
 * A file's layout as text, "chunk_size=N stripe_count=N stripe_index=N"
 * (rdfs getstripe/setstripe): bytes per chunk (a multiple of 4 KiB up to
 * RDFS_MAX_CHUNK), how many I/O servers its chunks spread over (-1: all) and
 * the id of the server chunk 0 goes to (-1: the metaserver's choice). Set
 * with any of the three; a regular file takes it only while it has no blocks.
 */
#define RDFS_STRIPE_XATTR	"rdfs.stripe"
#define RDFS_MAX_CHUNK		(64u << 20)
#define RDFS_MAX_STRIPE_COUNT	256
/* A file's quota project id; set on a directory, what is created in it inherits it. */
#define RDFS_PROJECT_XATTR	"rdfs.project"

#define RDFS_CAP_READ		1u
#define RDFS_CAP_WRITE		2u

enum rdfs_op {
	RDFS_OP_AUTH_CHALLENGE	= 1,
	RDFS_OP_AUTH_RESPONSE	= 2,
	RDFS_OP_AUTH_RESULT	= 3,
	RDFS_OP_PING		= 4,

	/* metaserver */
	RDFS_OP_LOOKUP		= 16,
	RDFS_OP_GETATTR		= 17,
	RDFS_OP_SETATTR		= 18,
	RDFS_OP_MKNOD		= 19,
	RDFS_OP_MKDIR		= 20,
	RDFS_OP_UNLINK		= 21,
	RDFS_OP_RMDIR		= 22,
	RDFS_OP_RENAME		= 23,
	RDFS_OP_LINK		= 24,
	RDFS_OP_SYMLINK		= 25,
	RDFS_OP_READLINK	= 26,
	RDFS_OP_READDIR		= 27,
	RDFS_OP_STATFS		= 28,
	RDFS_OP_GETXATTR	= 29,
	RDFS_OP_SETXATTR	= 30,
	RDFS_OP_LISTXATTR	= 31,
	RDFS_OP_REMOVEXATTR	= 32,
	RDFS_OP_OPEN		= 33,
	RDFS_OP_RELEASE		= 34,
	RDFS_OP_LAYOUT		= 35,
	RDFS_OP_COMMIT		= 36,
	RDFS_OP_REGISTER	= 37,
	RDFS_OP_SERVER_LIST	= 38,
	RDFS_OP_NODE_SET	= 39,	/* servers only: add a client node or change its policy */
	RDFS_OP_NODE_REVOKE	= 40,	/* servers only: refuse a node's key from now on */
	RDFS_OP_NODE_LIST	= 41,	/* servers only */
	RDFS_OP_PUNCH		= 42,	/* fallocate PUNCH_HOLE: whole blocks leave a file */
	RDFS_OP_FSCK		= 43,	/* servers only: check (and repair) layouts vs maps */
	RDFS_OP_STALE		= 44,	/* a copy missed writes: never serve it again */
	RDFS_OP_DRAIN		= 45,	/* servers only: move every copy off an I/O server */
	RDFS_OP_REBALANCE	= 46,	/* servers only: even out the I/O servers' usage */
	RDFS_OP_WALK		= 47,	/* one batch of a subtree walk (rdfs du, find) */
	RDFS_OP_SERVER_SET	= 48,	/* servers only: an I/O server's label, read-only */
	RDFS_OP_SHIFT		= 49,	/* fallocate COLLAPSE_RANGE / INSERT_RANGE */
	RDFS_OP_QUOTA_GET	= 50,	/* usage and limits of a user, group or project */
	RDFS_OP_QUOTA_SET	= 51,	/* root or servers: set limits, grace periods */
	RDFS_OP_QUOTA_LIST	= 52,	/* root or servers: every usage record of a type */

	/* I/O server */
	RDFS_OP_READ		= 64,
	RDFS_OP_WRITE		= 65,
	RDFS_OP_IO_COMMIT	= 66,	/* make every earlier unstable WRITE durable */
	RDFS_OP_VOLUME_INFO	= 67,
	RDFS_OP_ZERO		= 68,	/* metaserver: make newly allocated blocks read as zeros */
	RDFS_OP_FENCE		= 69,	/* metaserver: refuse older capabilities of a file */
	RDFS_OP_COPY		= 70,	/* copy_file_range: fetch source bytes, then WRITE */

	RDFS_OP_MAX		= 128,
};

struct rdfs_frame_hdr {
	uint32_t magic;
	uint8_t  version;
	uint8_t  flags;
	uint16_t opcode;
	int32_t  status;
	uint32_t tag;
	uint32_t body_len;
	uint32_t data_len;
};

/* Little-endian access to wire bytes at any alignment. */
static inline uint16_t rdfs_wire_get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t rdfs_wire_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t rdfs_wire_get_le64(const uint8_t *p)
{
	return rdfs_wire_get_le32(p) | (uint64_t)rdfs_wire_get_le32(p + 4) << 32;
}

static inline void rdfs_wire_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void rdfs_wire_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void rdfs_wire_put_le64(uint8_t *p, uint64_t v)
{
	rdfs_wire_put_le32(p, (uint32_t)v);
	rdfs_wire_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* Encode @h into exactly RDFS_FRAME_HDR_LEN bytes at @buf. */
static inline void rdfs_frame_hdr_encode(const struct rdfs_frame_hdr *h, uint8_t *buf)
{
	rdfs_wire_put_le32(buf + 0, h->magic);
	buf[4] = h->version;
	buf[5] = h->flags;
	rdfs_wire_put_le16(buf + 6, h->opcode);
	rdfs_wire_put_le32(buf + 8, (uint32_t)h->status);
	rdfs_wire_put_le32(buf + 12, h->tag);
	rdfs_wire_put_le32(buf + 16, h->body_len);
	rdfs_wire_put_le32(buf + 20, h->data_len);
}

/*
 * Decode and validate RDFS_FRAME_HDR_LEN bytes at @buf.
 * Returns 0, -EPROTO for a bad magic/version/opcode/flags (RDFS_FRAME_MORE is
 * valid only with RDFS_FRAME_REPLY, status 0 and no body), -EMSGSIZE for a body
 * or data length over the limits.
 */
static inline int rdfs_frame_hdr_decode(const uint8_t *buf, struct rdfs_frame_hdr *h)
{
	h->magic = rdfs_wire_get_le32(buf + 0);
	h->version = buf[4];
	h->flags = buf[5];
	h->opcode = rdfs_wire_get_le16(buf + 6);
	h->status = (int32_t)rdfs_wire_get_le32(buf + 8);
	h->tag = rdfs_wire_get_le32(buf + 12);
	h->body_len = rdfs_wire_get_le32(buf + 16);
	h->data_len = rdfs_wire_get_le32(buf + 20);

	if (h->magic != RDFS_FRAME_MAGIC || h->version != RDFS_FRAME_VERSION)
		return -EPROTO;
	if (h->opcode == 0 || h->opcode >= RDFS_OP_MAX)
		return -EPROTO;
	if (h->flags & ~(RDFS_FRAME_REPLY | RDFS_FRAME_MORE))
		return -EPROTO;
	/* A partial reply is data only: its status and body come in the last frame. */
	if ((h->flags & RDFS_FRAME_MORE) &&
	    (!(h->flags & RDFS_FRAME_REPLY) || h->status != 0 || h->body_len != 0))
		return -EPROTO;
	if (h->body_len > RDFS_MAX_BODY || h->data_len > RDFS_MAX_DATA)
		return -EMSGSIZE;
	return 0;
}

#endif
