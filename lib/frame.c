// SPDX-License-Identifier: MIT
/*
 * frame.c - encode and validate the fixed rdfs frame header (layout in frame.h).
 */
#include <errno.h>
#include <string.h>

#include "frame.h"

_Static_assert(RDFS_FRAME_HDR_LEN == 24, "frame.h documents a 24-byte header");

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

void frame_hdr_encode(const struct rdfs_frame_hdr *h, uint8_t *buf)
{
	put_le32(buf + 0, h->magic);
	buf[4] = h->version;
	buf[5] = h->flags;
	put_le16(buf + 6, h->opcode);
	put_le32(buf + 8, (uint32_t)h->status);
	put_le32(buf + 12, h->tag);
	put_le32(buf + 16, h->body_len);
	put_le32(buf + 20, h->data_len);
}

int frame_hdr_decode(const uint8_t *buf, struct rdfs_frame_hdr *h)
{
	h->magic = get_le32(buf + 0);
	h->version = buf[4];
	h->flags = buf[5];
	h->opcode = get_le16(buf + 6);
	h->status = (int32_t)get_le32(buf + 8);
	h->tag = get_le32(buf + 12);
	h->body_len = get_le32(buf + 16);
	h->data_len = get_le32(buf + 20);

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

static const char *const op_names[RDFS_OP_MAX] = {
	[RDFS_OP_AUTH_CHALLENGE]	= "auth_challenge",
	[RDFS_OP_AUTH_RESPONSE]		= "auth_response",
	[RDFS_OP_AUTH_RESULT]		= "auth_result",
	[RDFS_OP_PING]			= "ping",
	[RDFS_OP_LOOKUP]		= "lookup",
	[RDFS_OP_GETATTR]		= "getattr",
	[RDFS_OP_SETATTR]		= "setattr",
	[RDFS_OP_MKNOD]			= "mknod",
	[RDFS_OP_MKDIR]			= "mkdir",
	[RDFS_OP_UNLINK]		= "unlink",
	[RDFS_OP_RMDIR]			= "rmdir",
	[RDFS_OP_RENAME]		= "rename",
	[RDFS_OP_LINK]			= "link",
	[RDFS_OP_SYMLINK]		= "symlink",
	[RDFS_OP_READLINK]		= "readlink",
	[RDFS_OP_READDIR]		= "readdir",
	[RDFS_OP_STATFS]		= "statfs",
	[RDFS_OP_GETXATTR]		= "getxattr",
	[RDFS_OP_SETXATTR]		= "setxattr",
	[RDFS_OP_LISTXATTR]		= "listxattr",
	[RDFS_OP_REMOVEXATTR]		= "removexattr",
	[RDFS_OP_OPEN]			= "open",
	[RDFS_OP_RELEASE]		= "release",
	[RDFS_OP_LAYOUT]		= "layout",
	[RDFS_OP_COMMIT]		= "commit",
	[RDFS_OP_REGISTER]		= "register",
	[RDFS_OP_SERVER_LIST]		= "server_list",
	[RDFS_OP_NODE_SET]		= "node_set",
	[RDFS_OP_NODE_REVOKE]		= "node_revoke",
	[RDFS_OP_NODE_LIST]		= "node_list",
	[RDFS_OP_PUNCH]			= "punch",
	[RDFS_OP_FSCK]			= "fsck",
	[RDFS_OP_READ]			= "read",
	[RDFS_OP_WRITE]			= "write",
	[RDFS_OP_IO_COMMIT]		= "io_commit",
	[RDFS_OP_VOLUME_INFO]		= "volume_info",
	[RDFS_OP_ZERO]			= "zero",
	[RDFS_OP_FENCE]			= "fence",
	[RDFS_OP_COPY]			= "copy",
};

const char *frame_op_name(unsigned int op)
{
	if (op >= RDFS_OP_MAX || !op_names[op])
		return "unknown";
	return op_names[op];
}
