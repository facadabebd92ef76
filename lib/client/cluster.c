// SPDX-License-Identifier: MIT
/*
 * cluster.c - the I/O-server registry, client nodes and raw layouts, for `rdfs`
 * and tests.
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
		out[i].draining = s->draining;
		snprintf(out[i].domain, sizeof(out[i].domain), "%s", s->domain ? s->domain : "");
		snprintf(out[i].label, sizeof(out[i].label), "%s", s->label ? s->label : "");
		out[i].read_only = s->read_only;
	}
	ret = (int)rep->n_servers;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return ret;
}

int rdfs_drain(struct rdfs_client *c, uint32_t server_id, int on)
{
	Rdfs__DrainReq req = RDFS__DRAIN_REQ__INIT;

	req.server_id = server_id;
	req.cancel = !on;
	/* setting it twice is setting it once */
	return ms_call(c, RDFS_OP_DRAIN, &req.base, NULL, NULL, MS_IDEMPOTENT);
}

int rdfs_rebalance(struct rdfs_client *c, int on, uint32_t threshold_pct)
{
	Rdfs__RebalanceReq req = RDFS__REBALANCE_REQ__INIT;

	req.cancel = !on;
	req.threshold_pct = threshold_pct;
	/* asking twice is asking once (a second start keeps the bytes moved so far) */
	return ms_call(c, RDFS_OP_REBALANCE, &req.base, NULL, NULL, MS_IDEMPOTENT);
}

int rdfs_server_set(struct rdfs_client *c, uint32_t server_id, const char *label, int read_only)
{
	Rdfs__ServerSetReq req = RDFS__SERVER_SET_REQ__INIT;

	req.server_id = server_id;
	req.set_label = label != NULL;
	req.label = (char *)(label ? label : "");
	req.set_read_only = read_only >= 0;
	req.read_only = read_only > 0;
	/* setting it twice is setting it once */
	return ms_call(c, RDFS_OP_SERVER_SET, &req.base, NULL, NULL, MS_IDEMPOTENT);
}

int rdfs_copies_status(struct rdfs_client *c, struct rdfs_copies_status *out)
{
	Rdfs__ServerListReply *rep = NULL;
	int ret;

	ret = ms_call(c, RDFS_OP_SERVER_LIST, NULL, &rdfs__server_list_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	if (ret)
		return ret;
	out->chunks_under = rep->chunks_under;
	out->chunks_building = rep->chunks_building;
	out->chunks_lost = rep->chunks_lost;
	out->bytes_rebuilt = rep->bytes_rebuilt;
	out->passes = rep->rebuild_passes;
	out->rebalancing = rep->rebalancing;
	out->rebalance_threshold_pct = rep->rebalance_threshold_pct;
	out->rebalance_bytes_moved = rep->rebalance_bytes_moved;
	out->rebalance_outside = rep->rebalance_outside;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return 0;
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
	req.with_stale = 1;
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
				out[count].stale = e->stale;
				out[count].building = e->building;
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

static void node_from_pb(const Rdfs__NodeInfo *p, struct rdfs_node_info *n)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", p->name ? p->name : "");
	n->generation = p->generation;
	n->revoked = p->revoked;
	n->squash = (int)p->squash;
	n->anonuid = p->anonuid;
	n->anongid = p->anongid;
	n->unmapped_squash = p->unmapped_squash;
	for (size_t i = 0; i < p->n_maps && n->nmaps < RDFS_IDMAP_MAX; i++) {
		const Rdfs__IdMap *m = p->maps[i];

		n->maps[n->nmaps++] = (struct rdfs_idmap){ m->gid, m->client, m->fs, m->count };
	}
}

/* One NODE_* call; fills at most @max of @out and returns the node count. */
static int node_call(struct rdfs_client *c, uint16_t op, const Rdfs__NodeReq *req,
		     struct rdfs_node_info *out, int max)
{
	Rdfs__NodeReply *rep = NULL;
	int ret;

	/* NODE_SET with a new key is not idempotent: never sent twice */
	ret = ms_call(c, op, req ? &req->base : NULL, &rdfs__node_reply__descriptor,
		      (ProtobufCMessage **)&rep, op == RDFS_OP_NODE_LIST ? MS_IDEMPOTENT : 0);
	if (ret)
		return ret;
	for (size_t i = 0; i < rep->n_nodes && (int)i < max; i++)
		node_from_pb(rep->nodes[i], &out[i]);
	ret = (int)rep->n_nodes;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return ret;
}

int rdfs_node_set(struct rdfs_client *c, const char *name, int new_key,
		  const struct rdfs_node_info *policy, struct rdfs_node_info *out)
{
	Rdfs__NodeReq req = RDFS__NODE_REQ__INIT;
	Rdfs__IdMap maps[RDFS_IDMAP_MAX], *pmaps[RDFS_IDMAP_MAX];
	int ret;

	req.name = (char *)name;
	req.new_key = new_key;
	if (policy) {
		if (policy->nmaps < 0 || policy->nmaps > RDFS_IDMAP_MAX)
			return -EINVAL;
		req.set_policy = 1;
		req.squash = (uint32_t)policy->squash;
		req.anonuid = policy->anonuid;
		req.anongid = policy->anongid;
		req.unmapped_squash = policy->unmapped_squash;
		for (int i = 0; i < policy->nmaps; i++) {
			rdfs__id_map__init(&maps[i]);
			maps[i].gid = policy->maps[i].gid;
			maps[i].client = policy->maps[i].client;
			maps[i].fs = policy->maps[i].fs;
			maps[i].count = policy->maps[i].count;
			pmaps[i] = &maps[i];
		}
		req.maps = pmaps;
		req.n_maps = (size_t)policy->nmaps;
	}
	ret = node_call(c, RDFS_OP_NODE_SET, &req, out, 1);
	return ret < 0 ? ret : ret == 1 ? 0 : -EPROTO;
}

int rdfs_node_revoke(struct rdfs_client *c, const char *name, struct rdfs_node_info *out)
{
	Rdfs__NodeReq req = RDFS__NODE_REQ__INIT;
	int ret;

	req.name = (char *)name;
	ret = node_call(c, RDFS_OP_NODE_REVOKE, &req, out, 1);
	return ret < 0 ? ret : ret == 1 ? 0 : -EPROTO;
}

int rdfs_node_list(struct rdfs_client *c, struct rdfs_node_info *out, int max)
{
	return node_call(c, RDFS_OP_NODE_LIST, NULL, out, max);
}

int rdfs_fsck(struct rdfs_client *c, int repair, uint32_t max_problems, int timeout_ms,
	      struct rdfs_fsck_report *out)
{
	Rdfs__FsckReq req = RDFS__FSCK_REQ__INIT;
	Rdfs__FsckReply *rep = NULL;
	int ret;

	memset(out, 0, sizeof(*out));
	req.repair = repair;
	req.max_problems = max_problems;
	/* a check alone may be resent; a repair's second run finds nothing to repair */
	ret = ms_call_timeout(c, RDFS_OP_FSCK, &req.base, &rdfs__fsck_reply__descriptor,
			      (ProtobufCMessage **)&rep, MS_IDEMPOTENT, timeout_ms);
	if (ret)
		return ret;
	out->list = calloc(rep->n_list ? rep->n_list : 1, sizeof(*out->list));
	if (!out->list) {
		protobuf_c_message_free_unpacked(&rep->base, NULL);
		return -ENOMEM;
	}
	out->inodes = rep->inodes;
	out->files = rep->files;
	out->dirs = rep->dirs;
	out->extents = rep->extents;
	out->orphans_open = rep->orphans_open;
	out->blocks_owned = rep->blocks_owned;
	out->blocks_mapped = rep->blocks_mapped;
	out->blocks_held = rep->blocks_held;
	out->blocks_quarantined = rep->blocks_quarantined;
	out->problems = rep->problems;
	out->repaired = rep->repaired;
	for (size_t i = 0; i < rep->n_counts && i < RDFS_FSCK_KINDS; i++)
		out->counts[i] = rep->counts[i];
	for (size_t i = 0; i < rep->n_list; i++) {
		const Rdfs__FsckProblem *p = rep->list[i];

		out->list[i] = (struct rdfs_fsck_problem){ .kind = p->kind, .ino = p->ino,
							   .other_ino = p->other_ino,
							   .server_id = p->server_id,
							   .block = p->block, .count = p->count,
							   .repaired = p->repaired };
	}
	out->n = rep->n_list;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return 0;
}

void rdfs_fsck_report_free(struct rdfs_fsck_report *r)
{
	free(r->list);
	r->list = NULL;
	r->n = 0;
}
