// SPDX-License-Identifier: MIT
/*
 * quota.c - QUOTA_GET, QUOTA_SET and QUOTA_LIST for `rdfs quota` and tests:
 * thin calls, the metaserver decides who may (metaserver/quota.c).
 *
 * Threads: any; no state of its own beyond the client's connection.
 */
#include <errno.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"

static void quota_from_pb(const Rdfs__Quota *p, struct rdfs_quota *q)
{
	memset(q, 0, sizeof(*q));
	q->type = p->type;
	q->id = p->id;
	q->blocks = p->blocks;
	q->inodes = p->inodes;
	q->block_soft = p->block_soft;
	q->block_hard = p->block_hard;
	q->inode_soft = p->inode_soft;
	q->inode_hard = p->inode_hard;
	q->block_grace_ns = p->block_grace_ns;
	q->inode_grace_ns = p->inode_grace_ns;
}

static void grace_from_pb(const Rdfs__QuotaReply *rep, uint64_t grace_s[RDFS_QUOTA_TYPES])
{
	if (!grace_s)
		return;
	for (size_t t = 0; t < RDFS_QUOTA_TYPES; t++)
		grace_s[t] = t < rep->n_grace_s ? rep->grace_s[t] : 0;
}

/* The one quota of a QUOTA_GET or QUOTA_SET reply. */
static int reply_one(Rdfs__QuotaReply *rep, struct rdfs_quota *out,
		     uint64_t grace_s[RDFS_QUOTA_TYPES])
{
	int ret = 0;

	if (rep->n_quotas != 1 || !rep->quotas[0])
		ret = -EPROTO;
	else
		quota_from_pb(rep->quotas[0], out);
	grace_from_pb(rep, grace_s);
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return ret;
}

int rdfs_quota_get(struct rdfs_client *c, const struct rdfs_cred *cr, uint32_t type, uint32_t id,
		   struct rdfs_quota *out, uint64_t grace_s[RDFS_QUOTA_TYPES])
{
	Rdfs__QuotaReq req = RDFS__QUOTA_REQ__INIT;
	Rdfs__QuotaReply *rep = NULL;
	Rdfs__Cred cred;
	int ret;

	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.type = type;
	req.id = id;
	ret = ms_call(c, RDFS_OP_QUOTA_GET, &req.base, &rdfs__quota_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	return ret ? ret : reply_one(rep, out, grace_s);
}

int rdfs_quota_set(struct rdfs_client *c, const struct rdfs_cred *cr, const struct rdfs_quota *q,
		   uint32_t valid, uint64_t grace_s, struct rdfs_quota *out)
{
	Rdfs__QuotaSetReq req = RDFS__QUOTA_SET_REQ__INIT;
	Rdfs__QuotaReply *rep = NULL;
	Rdfs__Cred cred;
	int ret;

	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.type = q->type;
	req.id = q->id;
	req.valid = valid;
	req.block_soft = q->block_soft;
	req.block_hard = q->block_hard;
	req.inode_soft = q->inode_soft;
	req.inode_hard = q->inode_hard;
	req.grace_s = grace_s;
	/* setting limits twice is setting them once */
	ret = ms_call(c, RDFS_OP_QUOTA_SET, &req.base, &rdfs__quota_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	return ret ? ret : reply_one(rep, out, NULL);
}

int rdfs_quota_list(struct rdfs_client *c, const struct rdfs_cred *cr, uint32_t type,
		    uint32_t start, struct rdfs_quota *out, int max, int *more,
		    uint64_t grace_s[RDFS_QUOTA_TYPES])
{
	Rdfs__QuotaListReq req = RDFS__QUOTA_LIST_REQ__INIT;
	Rdfs__Cred cred;
	int n = 0, ret;

	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.type = type;
	*more = 1;
	while (*more && n < max) {
		Rdfs__QuotaReply *rep = NULL;
		uint32_t last = start;
		int got = 0;

		req.start_id = start;
		req.max = (uint32_t)(max - n);
		ret = ms_call(c, RDFS_OP_QUOTA_LIST, &req.base, &rdfs__quota_reply__descriptor,
			      &rep, MS_IDEMPOTENT);
		if (ret)
			return ret;
		for (size_t i = 0; i < rep->n_quotas && n < max; i++) {
			if (!rep->quotas[i])
				continue;
			quota_from_pb(rep->quotas[i], &out[n++]);
			last = rep->quotas[i]->id;
			got++;
		}
		*more = rep->more;
		grace_from_pb(rep, grace_s);
		protobuf_c_message_free_unpacked(&rep->base, NULL);
		/* the next page starts after the last id: a reply that names none ends it */
		if (*more && (!got || last == UINT32_MAX))
			return -EPROTO;
		start = last + 1;
	}
	return n;
}
