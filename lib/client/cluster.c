// SPDX-License-Identifier: MIT
/*
 * cluster.c - the I/O-server registry and raw layouts, for `rdfs` and tests.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"

int rdfs_server_list(struct rdfs_client *c, struct rdfs_server_info *out, int max)
{
	Rdfs__ServerListReply *rep = NULL;
	size_t i;
	int ret;

	ret = ms_call(c, RDFS_OP_SERVER_LIST, NULL, &rdfs__server_list_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	if (ret)
		return ret;
	for (i = 0; i < rep->n_servers && (int)i < max; i++) {
		const Rdfs__ServerInfo *s = rep->servers[i];

		memset(&out[i], 0, sizeof(out[i]));
		out[i].id = s->server_id;
		snprintf(out[i].url, sizeof(out[i].url), "%s", s->url ? s->url : "");
		snprintf(out[i].name, sizeof(out[i].name), "%s", s->name ? s->name : "");
		out[i].capacity_blocks = s->capacity_blocks;
		out[i].free_blocks = s->free_blocks;
		out[i].up = s->up;
	}
	ret = (int)rep->n_servers;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return ret;
}

int rdfs_layout(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino, uint64_t off,
		uint64_t len, struct rdfs_extent_info *out, int max)
{
	Rdfs__LayoutReq req = RDFS__LAYOUT_REQ__INIT;
	Rdfs__Cred cred;
	uint64_t pos = off - off % RDFS_BLOCK_SIZE, end = off + len;
	int count = 0, ret;

	if (len == 0)
		return 0;
	if (end < off)
		end = UINT64_MAX - RDFS_BLOCK_SIZE;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.ino = ino;
	/* the metaserver caps one reply; ask again from where it stopped */
	while (pos < end) {
		Rdfs__LayoutReply *rep = NULL;
		uint64_t rep_end;
		size_t i;

		req.offset = pos;
		req.length = end - pos;
		ret = ms_call(c, RDFS_OP_LAYOUT, &req.base, &rdfs__layout_reply__descriptor, &rep,
			      MS_IDEMPOTENT);
		if (ret)
			return ret;
		for (i = 0; i < rep->n_extents; i++) {
			const Rdfs__Extent *e = rep->extents[i];

			if (count < max) {
				out[count].file_offset = e->file_offset;
				out[count].length = e->length;
				out[count].server_id = e->server_id;
				out[count].block = e->block;
				out[count].unwritten = e->unwritten;
			}
			count++;
		}
		rep_end = rep->offset + rep->length;
		if (rep_end <= pos) {
			protobuf_c_message_free_unpacked(&rep->base, NULL);
			break;
		}
		pos = rep_end;
		protobuf_c_message_free_unpacked(&rep->base, NULL);
	}
	return count;
}
