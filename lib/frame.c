// SPDX-License-Identifier: MIT
/*
 * frame.c - what user space adds to wire/rdfs_frame.h: opcode names for logs.
 */
#include <errno.h>
#include <string.h>

#include "frame.h"

_Static_assert(RDFS_FRAME_HDR_LEN == 24, "frame.h documents a 24-byte header");

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
	[RDFS_OP_SHIFT]			= "shift",
	[RDFS_OP_STALE]			= "stale",
	[RDFS_OP_DRAIN]			= "drain",
	[RDFS_OP_REBALANCE]		= "rebalance",
	[RDFS_OP_WALK]			= "walk",
	[RDFS_OP_SERVER_SET]		= "server_set",
	[RDFS_OP_QUOTA_GET]		= "quota_get",
	[RDFS_OP_QUOTA_SET]		= "quota_set",
	[RDFS_OP_QUOTA_LIST]		= "quota_list",
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
