// SPDX-License-Identifier: MIT
/*
 * ops.c - one decoder per opcode, in the style of libfuse's do_<op> table:
 * unpack the protobuf body (undecodable: -EBADMSG), check the Cred is there
 * (-EINVAL), call the core, reply once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "cap.h"
#include "frame.h"
#include "log.h"
#include "ops.h"
#include "pb_strings.h"
#include "rdfs.pb-c.h"

struct op_call {
	const struct ms_ops_ctx *ctx;
	struct ms_session *s;
	struct rpc_request *req;
	struct ms_squash sq;		/* the session's id policy as the call began */
};

typedef void (*op_fn)(struct op_call *c);

static int reply(struct op_call *c, int status, const ProtobufCMessage *msg)
{
	return rpc_server_reply(c->req, status, status ? NULL : msg, NULL, 0);
}

static void reply_empty(struct op_call *c, int status)
{
	Rdfs__Empty e = RDFS__EMPTY__INIT;

	reply(c, status, &e.base);
}

static void reply_bad(struct op_call *c, const char *what)
{
	char msg[96];

	snprintf(msg, sizeof(msg), "undecodable %s body", what);
	rpc_server_reply_error(c->req, -EBADMSG, msg);
}

static int cred_of(struct op_call *c, const Rdfs__Cred *pc, struct ms_cred *cr)
{
	if (!pc) {
		rpc_server_reply_error(c->req, -EINVAL, "request without cred");
		return -EINVAL;
	}
	cr->uid = pc->uid;
	cr->gid = pc->gid;
	cr->ngroups = (uint32_t)pc->n_groups;
	cr->groups = pc->groups;
	/* the session's squash and id maps, from its key: whatever the request says */
	ms_squash_apply(&c->sq, &cr->uid, &cr->gid, pc->groups, &cr->ngroups);
	return 0;
}

/* @a as the caller's node sees it: owner and group mapped back (idmap.c). */
static void attr_to_pb(const struct op_call *c, const struct ms_attr *a, Rdfs__Attr *p)
{
	p->ino = a->ino;
	p->mode = a->mode;
	p->nlink = a->nlink;
	p->uid = ms_idmap_out(&c->sq, 0, a->uid);
	p->gid = ms_idmap_out(&c->sq, 1, a->gid);
	p->size = a->size;
	p->blocks = a->blocks;
	p->atime_ns = a->atime_ns;
	p->mtime_ns = a->mtime_ns;
	p->ctime_ns = a->ctime_ns;
	p->rdev = a->rdev;
	p->chunk_size = a->chunk_size;
	p->stripe_start = a->stripe_start;
}

static void reply_entry(struct op_call *c, int status, const struct ms_attr *a, uint64_t handle)
{
	Rdfs__EntryReply r = RDFS__ENTRY_REPLY__INIT;
	Rdfs__Attr pa = RDFS__ATTR__INIT;

	if (!status) {
		attr_to_pb(c, a, &pa);
		r.attr = &pa;
		r.handle = handle;
	}
	reply(c, status, &r.base);
}

/*
 * Inode @ino's attributes as they are now, for a reply about it: after a
 * change to a directory, read once the change's locks are gone, so they may
 * include a later change by someone else: never older than the change itself,
 * which is all a client relies on. NULL if it is gone meanwhile (the client
 * then just asks again).
 */
static Rdfs__Attr *attr_pb_of(struct op_call *c, uint64_t ino, Rdfs__Attr *p)
{
	struct ms_attr a;

	if (ms_getattr(c->ctx->ms, ino, &a))
		return NULL;
	rdfs__attr__init(p);
	attr_to_pb(c, &a, p);
	return p;
}

/* An entry reply for a name added to directory @parent: with its attributes. */
static void reply_new_entry(struct op_call *c, int status, const struct ms_attr *a,
			    uint64_t handle, uint64_t parent)
{
	Rdfs__EntryReply r = RDFS__ENTRY_REPLY__INIT;
	Rdfs__Attr pa = RDFS__ATTR__INIT, dir = RDFS__ATTR__INIT;

	if (!status) {
		attr_to_pb(c, a, &pa);
		r.attr = &pa;
		r.handle = handle;
		r.parent_attr = attr_pb_of(c, parent, &dir);
	}
	reply(c, status, &r.base);
}

/* The reply of UNLINK, RMDIR and RENAME: the directories they changed. */
static void reply_dir_change(struct op_call *c, int status, uint64_t parent, uint64_t newparent)
{
	Rdfs__DirChangeReply r = RDFS__DIR_CHANGE_REPLY__INIT;
	Rdfs__Attr a = RDFS__ATTR__INIT, b = RDFS__ATTR__INIT;

	if (!status) {
		r.parent_attr = attr_pb_of(c, parent, &a);
		if (newparent != parent)
			r.newparent_attr = attr_pb_of(c, newparent, &b);
	}
	reply(c, status, &r.base);
}

/* An AttrReply; @incarnation only in a COMMIT's (0: none). */
static void reply_attr_from(struct op_call *c, int status, const struct ms_attr *a,
			    uint64_t incarnation)
{
	Rdfs__AttrReply r = RDFS__ATTR_REPLY__INIT;
	Rdfs__Attr pa = RDFS__ATTR__INIT;

	if (!status) {
		attr_to_pb(c, a, &pa);
		r.attr = &pa;
		r.incarnation = incarnation;
	}
	reply(c, status, &r.base);
}

static void reply_attr(struct op_call *c, int status, const struct ms_attr *a)
{
	reply_attr_from(c, status, a, 0);
}

/*
 * Unpack into `m` of type T or reply and return: -EINVAL for a name (any string
 * field) with a NUL in it, which unpacking would silently cut; -EBADMSG for an
 * undecodable body.
 */
#define UNPACK(T, fn, what)							\
	T *m;									\
	if (pb_strings_check(&fn##__descriptor, c->req->msg->body,		\
			     c->req->msg->hdr.body_len) == -EINVAL) {		\
		rpc_server_reply_error(c->req, -EINVAL, "a name contains a NUL byte"); \
		return;								\
	}									\
	m = fn##__unpack(NULL, c->req->msg->hdr.body_len, c->req->msg->body);	\
	if (!m) {								\
		reply_bad(c, what);						\
		return;								\
	}

#define FREE(fn) fn##__free_unpacked(m, NULL)

static void op_lookup(struct op_call *c)
{
	UNPACK(Rdfs__LookupReq, rdfs__lookup_req, "LookupReq");
	struct ms_cred cr;
	struct ms_attr a;

	if (!cred_of(c, m->cred, &cr))
		reply_entry(c, ms_lookup(c->ctx->ms, &cr, m->parent, m->name, &a), &a, 0);
	FREE(rdfs__lookup_req);
}

static void op_getattr(struct op_call *c)
{
	UNPACK(Rdfs__GetattrReq, rdfs__getattr_req, "GetattrReq");
	struct ms_cred cr;
	struct ms_attr a;

	if (!cred_of(c, m->cred, &cr))
		reply_attr(c, ms_getattr(c->ctx->ms, m->ino, &a), &a);
	FREE(rdfs__getattr_req);
}

static void op_setattr(struct op_call *c)
{
	UNPACK(Rdfs__SetattrReq, rdfs__setattr_req, "SetattrReq");
	struct ms_setattr sa = {
		.valid = m->valid, .mode = m->mode, .uid = m->uid, .gid = m->gid,
		.size = m->size, .atime_ns = m->atime_ns, .mtime_ns = m->mtime_ns,
		.ctime_ns = m->ctime_ns, .handle = m->handle,
	};
	struct ms_cred cr;
	struct ms_attr a;

	/* a chown names the new owner in the node's ids */
	if (sa.valid & MS_SET_UID)
		sa.uid = ms_idmap_in(&c->sq, 0, sa.uid);
	if (sa.valid & MS_SET_GID)
		sa.gid = ms_idmap_in(&c->sq, 1, sa.gid);
	if (!cred_of(c, m->cred, &cr))
		reply_attr(c, ms_setattr(c->ctx->ms, c->s, &cr, m->ino, &sa, &a), &a);
	FREE(rdfs__setattr_req);
}

static void op_mknod(struct op_call *c)
{
	UNPACK(Rdfs__MknodReq, rdfs__mknod_req, "MknodReq");
	struct ms_cred cr;
	struct ms_attr a;
	uint64_t h = 0;

	if (!cred_of(c, m->cred, &cr)) {
		int ret = ms_mknod(c->ctx->ms, c->s, &cr, m->parent, m->name, m->mode, m->umask,
				   m->rdev, m->exclusive, m->open, m->open_flags, &a, &h);

		reply_new_entry(c, ret, &a, h, m->parent);
	}
	FREE(rdfs__mknod_req);
}

static void op_mkdir(struct op_call *c)
{
	UNPACK(Rdfs__MkdirReq, rdfs__mkdir_req, "MkdirReq");
	struct ms_cred cr;
	struct ms_attr a;

	if (!cred_of(c, m->cred, &cr))
		reply_new_entry(c, ms_mkdir(c->ctx->ms, &cr, m->parent, m->name, m->mode, m->umask,
					    &a),
				&a, 0, m->parent);
	FREE(rdfs__mkdir_req);
}

static void op_unlink_rmdir(struct op_call *c)
{
	UNPACK(Rdfs__UnlinkReq, rdfs__unlink_req, "UnlinkReq");
	struct ms_cred cr;

	if (!cred_of(c, m->cred, &cr)) {
		int ret = c->req->msg->hdr.opcode == RDFS_OP_RMDIR ?
			  ms_rmdir(c->ctx->ms, &cr, m->parent, m->name) :
			  ms_unlink(c->ctx->ms, &cr, m->parent, m->name);

		reply_dir_change(c, ret, m->parent, m->parent);
	}
	FREE(rdfs__unlink_req);
}

static void op_rename(struct op_call *c)
{
	UNPACK(Rdfs__RenameReq, rdfs__rename_req, "RenameReq");
	struct ms_cred cr;

	if (!cred_of(c, m->cred, &cr))
		reply_dir_change(c, ms_rename(c->ctx->ms, &cr, m->parent, m->name, m->newparent,
					      m->newname, m->flags), m->parent, m->newparent);
	FREE(rdfs__rename_req);
}

static void op_link(struct op_call *c)
{
	UNPACK(Rdfs__LinkReq, rdfs__link_req, "LinkReq");
	struct ms_cred cr;
	struct ms_attr a;

	if (!cred_of(c, m->cred, &cr))
		reply_new_entry(c, ms_link(c->ctx->ms, &cr, m->ino, m->newparent, m->newname, &a),
				&a, 0, m->newparent);
	FREE(rdfs__link_req);
}

static void op_symlink(struct op_call *c)
{
	UNPACK(Rdfs__SymlinkReq, rdfs__symlink_req, "SymlinkReq");
	struct ms_cred cr;
	struct ms_attr a;

	if (!cred_of(c, m->cred, &cr))
		reply_new_entry(c, ms_symlink(c->ctx->ms, &cr, m->parent, m->name, m->target, &a),
				&a, 0, m->parent);
	FREE(rdfs__symlink_req);
}

static void op_readlink(struct op_call *c)
{
	UNPACK(Rdfs__ReadlinkReq, rdfs__readlink_req, "ReadlinkReq");
	Rdfs__ReadlinkReply r = RDFS__READLINK_REPLY__INIT;
	struct ms_cred cr;
	char buf[4096];
	int ret;

	if (!cred_of(c, m->cred, &cr)) {
		ret = ms_readlink(c->ctx->ms, &cr, m->ino, buf);
		r.target = buf;
		reply(c, ret < 0 ? ret : 0, &r.base);
	}
	FREE(rdfs__readlink_req);
}

static void op_readdir(struct op_call *c)
{
	UNPACK(Rdfs__ReaddirReq, rdfs__readdir_req, "ReaddirReq");
	Rdfs__ReaddirReply r = RDFS__READDIR_REPLY__INIT;
	struct ms_dirent *ents = NULL;
	Rdfs__Dirent *pd = NULL, **pp = NULL;
	Rdfs__Attr *pa = NULL;
	struct ms_cred cr;
	int eof = 0, n;

	if (cred_of(c, m->cred, &cr))
		goto out;
	ents = malloc(MS_READDIR_MAX * sizeof(*ents));
	pd = malloc(MS_READDIR_MAX * sizeof(*pd));
	pp = malloc(MS_READDIR_MAX * sizeof(*pp));
	if (m->plus)
		pa = malloc(MS_READDIR_MAX * sizeof(*pa));
	if (!ents || !pd || !pp || (m->plus && !pa)) {
		reply(c, -ENOMEM, NULL);
		goto out;
	}
	n = ms_readdir(c->ctx->ms, &cr, m->ino, m->after.len ? m->after.data : NULL, m->after.len,
		       m->max_entries, ents, &eof);
	for (int i = 0; i < n; i++) {
		rdfs__dirent__init(&pd[i]);
		pd[i].name.data = (uint8_t *)ents[i].name;
		pd[i].name.len = ents[i].namelen;
		pd[i].ino = ents[i].ino;
		pd[i].type = ents[i].type;
		pp[i] = &pd[i];
		/* read after the listing: an entry removed meanwhile just has none */
		if (m->plus)
			pd[i].attr = attr_pb_of(c, ents[i].ino, &pa[i]);
	}
	r.n_entries = n > 0 ? (size_t)n : 0;
	r.entries = pp;
	r.eof = eof;
	reply(c, n < 0 ? n : 0, &r.base);
out:
	free(ents);
	free(pd);
	free(pp);
	free(pa);
	FREE(rdfs__readdir_req);
}

static void op_statfs(struct op_call *c)
{
	UNPACK(Rdfs__StatfsReq, rdfs__statfs_req, "StatfsReq");
	Rdfs__StatfsReply r = RDFS__STATFS_REPLY__INIT;
	struct ms_statfs st;
	struct ms_cred cr;

	if (!cred_of(c, m->cred, &cr)) {
		ms_statfs(c->ctx->ms, &st);
		r.total_blocks = st.total_blocks;
		r.free_blocks = st.free_blocks;
		r.files = st.files;
		r.free_files = st.free_files;
		r.block_size = RDFS_BLOCK_SIZE;
		r.name_max = RDFS_NAME_MAX;
		reply(c, 0, &r.base);
	}
	FREE(rdfs__statfs_req);
}

static int is_acl_xattr(const char *name)
{
	return name && (!strcmp(name, MS_ACL_XATTR_ACCESS) || !strcmp(name, MS_ACL_XATTR_DEFAULT));
}

static void op_xattr(struct op_call *c)
{
	UNPACK(Rdfs__XattrReq, rdfs__xattr_req, "XattrReq");
	Rdfs__XattrReply r = RDFS__XATTR_REPLY__INIT;
	struct ms *ms = c->ctx->ms;
	struct ms_cred cr;
	void *val = NULL;
	char **names = NULL;
	int ret;

	if (cred_of(c, m->cred, &cr))
		goto out;
	switch (c->req->msg->hdr.opcode) {
	case RDFS_OP_GETXATTR:
		ret = ms_getxattr(ms, &cr, m->ino, m->name, &val);
		if (ret > 0 && is_acl_xattr(m->name))
			ms_idmap_acl_xattr(&c->sq, 0, val, (size_t)ret);
		if (ret >= 0) {
			r.value.data = val;
			r.value.len = (size_t)ret;
			ret = 0;
		}
		break;
	case RDFS_OP_SETXATTR:
		if (is_acl_xattr(m->name))
			ms_idmap_acl_xattr(&c->sq, 1, m->value.data, m->value.len);
		ret = ms_setxattr(ms, &cr, m->ino, m->name, m->value.data, m->value.len, m->flags);
		break;
	case RDFS_OP_LISTXATTR:
		ret = ms_listxattr(ms, &cr, m->ino, &names);
		if (ret >= 0) {
			r.names = names;
			r.n_names = (size_t)ret;
			ret = 0;
		}
		break;
	default:
		ret = ms_removexattr(ms, &cr, m->ino, m->name);
		break;
	}
	reply(c, ret, &r.base);
	free(val);
	if (names)
		ms_names_free(names, (int)r.n_names);
out:
	FREE(rdfs__xattr_req);
}

static void op_open(struct op_call *c)
{
	UNPACK(Rdfs__OpenReq, rdfs__open_req, "OpenReq");
	Rdfs__OpenReply r = RDFS__OPEN_REPLY__INIT;
	Rdfs__Attr pa = RDFS__ATTR__INIT;
	struct ms_cred cr;
	struct ms_attr a;
	uint64_t h = 0;
	int ret;

	if (!cred_of(c, m->cred, &cr)) {
		ret = ms_open_file(c->ctx->ms, c->s, &cr, m->ino, m->flags, &a, &h);
		if (!ret) {
			attr_to_pb(c, &a, &pa);
			r.attr = &pa;
			r.handle = h;
		}
		reply(c, ret, &r.base);
	}
	FREE(rdfs__open_req);
}

static void op_release(struct op_call *c)
{
	UNPACK(Rdfs__ReleaseReq, rdfs__release_req, "ReleaseReq");

	reply_empty(c, ms_release(c->ctx->ms, c->s, m->handle));
	FREE(rdfs__release_req);
}

/* One capability per server of @l's extents, signed; servers' URLs alongside. */
static int layout_to_pb(const struct ms_ops_ctx *ctx, uint64_t ino, const struct ms_layout *l,
			const char *holder, Rdfs__LayoutReply *r)
{
	size_t n = l->n, nsrv = 0;
	uint32_t *ids = calloc(n ? n : 1, sizeof(*ids));
	int64_t now = cap_now_ns(), expiry = now + ctx->cap_lifetime_ns;
	int ret = 0;

	r->issued_ns = now;
	r->incarnation = l->incarnation;
	r->offset = l->offset;
	r->length = l->length;
	r->size = l->size;
	r->chunk_size = l->chunk_size;
	r->extents = calloc(n ? n : 1, sizeof(*r->extents));
	if (!ids || !r->extents) {
		free(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		Rdfs__Extent *e = malloc(sizeof(*e));
		size_t j;

		if (!e) {
			ret = -ENOMEM;
			break;
		}
		rdfs__extent__init(e);
		e->file_offset = l->ext[i].file_offset;
		e->length = l->ext[i].length;
		e->server_id = l->ext[i].server_id;
		e->block = l->ext[i].block;
		e->unwritten = l->ext[i].unwritten;
		e->stale = l->ext[i].stale;
		e->building = l->ext[i].building;
		r->extents[r->n_extents++] = e;
		for (j = 0; j < nsrv && ids[j] != e->server_id; j++)
			;
		if (j == nsrv)
			ids[nsrv++] = e->server_id;
	}
	r->caps = calloc(nsrv ? nsrv : 1, sizeof(*r->caps));
	r->servers = calloc(nsrv ? nsrv : 1, sizeof(*r->servers));
	if (ret || !r->caps || !r->servers) {
		free(ids);
		return -ENOMEM;
	}
	for (size_t j = 0; j < nsrv && !ret; j++) {
		Rdfs__Capability *cap = calloc(1, sizeof(*cap));
		Rdfs__ServerAddr *sa = calloc(1, sizeof(*sa));
		char url[256];

		if (!cap || !sa) {
			free(cap);
			free(sa);
			ret = -ENOMEM;
			break;
		}
		rdfs__capability__init(cap);
		rdfs__server_addr__init(sa);
		r->caps[r->n_caps++] = cap;
		r->servers[r->n_servers++] = sa;
		cap->server_id = ids[j];
		cap->ino = ino;
		cap->rights = l->rights;
		cap->holder = (char *)holder;
		cap->gen = l->gen;
		cap->epoch = ms_server_epoch(ctx->ms, ids[j]);
		cap->expiry_ns = expiry;
		cap->ranges = calloc(n, sizeof(*cap->ranges));
		if (!cap->ranges) {
			ret = -ENOMEM;
			break;
		}
		for (size_t i = 0; i < n; i++) {
			Rdfs__BlockRange *br;

			/* a stale copy is shown (rdfs layout), never readable */
			if (l->ext[i].server_id != ids[j] || l->ext[i].stale)
				continue;
			br = malloc(sizeof(*br));
			if (!br) {
				ret = -ENOMEM;
				break;
			}
			rdfs__block_range__init(br);
			br->first = l->ext[i].block;
			br->count = l->ext[i].length / RDFS_BLOCK_SIZE;
			cap->ranges[cap->n_ranges++] = br;
		}
		if (!ret)
			ret = cap_sign(ctx->cap_key, cap);
		if (ms_server_url(ctx->ms, ids[j], url, sizeof(url)))
			url[0] = '\0';
		sa->server_id = ids[j];
		sa->url = strdup(url);
		if (!sa->url)
			ret = -ENOMEM;
	}
	free(ids);
	return ret;
}

static void layout_pb_free(Rdfs__LayoutReply *r)
{
	for (size_t i = 0; i < r->n_extents; i++)
		free(r->extents[i]);
	free(r->extents);
	for (size_t i = 0; i < r->n_caps; i++) {
		Rdfs__Capability *cap = r->caps[i];

		for (size_t k = 0; k < cap->n_ranges; k++)
			free(cap->ranges[k]);
		free(cap->ranges);
		cap_free_mac(cap);
		free(cap);
	}
	free(r->caps);
	for (size_t i = 0; i < r->n_servers; i++) {
		free(r->servers[i]->url);
		free(r->servers[i]);
	}
	free(r->servers);
}

static void op_layout(struct op_call *c)
{
	UNPACK(Rdfs__LayoutReq, rdfs__layout_req, "LayoutReq");
	Rdfs__LayoutReply r = RDFS__LAYOUT_REPLY__INIT;
	struct ms_layout l;
	struct ms_cred cr;
	int ret;

	if (cred_of(c, m->cred, &cr))
		goto out;
	ret = ms_layout(c->ctx->ms, c->s, &cr, m->ino, m->offset, m->length,
			(m->allocate ? (m->prealloc ? MS_ALLOC_KEEP : 1) : 0) |
				(m->with_stale ? MS_LAYOUT_WITH_STALE : 0),
			m->handle, &l);
	if (!ret) {
		ret = layout_to_pb(c->ctx, m->ino, &l, ms_session_identity(c->s), &r);
		ms_layout_free(&l);
	}
	if (ret == -EAGAIN)
		rpc_server_reply_error(c->req, ret, "not now: the metaserver waits for its I/O "
				       "servers to register again after a start, or the copies "
				       "of this range are being rebuilt; retry");
	else
		reply(c, ret, &r.base);
	layout_pb_free(&r);
out:
	FREE(rdfs__layout_req);
}

static void op_commit(struct op_call *c)
{
	UNPACK(Rdfs__CommitReq, rdfs__commit_req, "CommitReq");
	struct ms_range *rs = NULL;
	struct ms_cred cr;
	struct ms_attr a;

	if (cred_of(c, m->cred, &cr))
		goto out;
	if (m->n_written > MS_COMMIT_MAX_RANGES) {
		rpc_server_reply_error(c->req, -EINVAL, "too many ranges in one COMMIT");
		goto out;
	}
	rs = calloc(m->n_written ? m->n_written : 1, sizeof(*rs));
	if (!rs) {
		reply(c, -ENOMEM, NULL);
		goto out;
	}
	/* CommitReq.written ranges are file byte ranges (first = offset, count = length) */
	for (size_t i = 0; i < m->n_written; i++) {
		rs[i].offset = m->written[i] ? m->written[i]->first : 0;
		rs[i].length = m->written[i] ? m->written[i]->count : 0;
	}
	reply_attr_from(c, ms_commit_from(c->ctx->ms, c->s, &cr, m->ino, m->size, m->mtime_ns, rs,
					  m->n_written, m->handle, m->incarnation, &a),
			&a, ms_incarnation(c->ctx->ms));
out:
	free(rs);
	FREE(rdfs__commit_req);
}

static void op_punch(struct op_call *c)
{
	UNPACK(Rdfs__PunchReq, rdfs__punch_req, "PunchReq");
	struct ms_cred cr;
	struct ms_attr a;

	if (!cred_of(c, m->cred, &cr))
		reply_attr(c, ms_punch(c->ctx->ms, c->s, &cr, m->ino, m->offset, m->length,
				       m->handle, &a), &a);
	FREE(rdfs__punch_req);
}

static void op_shift(struct op_call *c)
{
	UNPACK(Rdfs__ShiftReq, rdfs__shift_req, "ShiftReq");
	struct ms_cred cr;
	struct ms_attr a;

	if (!cred_of(c, m->cred, &cr))
		reply_attr(c, ms_shift(c->ctx->ms, c->s, &cr, m->ino, m->offset, m->length,
				       m->insert, m->handle, &a), &a);
	FREE(rdfs__shift_req);
}

static void op_stale(struct op_call *c)
{
	UNPACK(Rdfs__StaleReq, rdfs__stale_req, "StaleReq");
	struct ms_range *rs = NULL;
	struct ms_cred cr;

	if (cred_of(c, m->cred, &cr))
		goto out;
	if (m->n_ranges == 0 || m->n_ranges > MS_COMMIT_MAX_RANGES) {
		rpc_server_reply_error(c->req, -EINVAL, "a STALE names 1 to 4096 ranges");
		goto out;
	}
	rs = calloc(m->n_ranges, sizeof(*rs));
	if (!rs) {
		reply(c, -ENOMEM, NULL);
		goto out;
	}
	for (size_t i = 0; i < m->n_ranges; i++) {
		rs[i].offset = m->ranges[i] ? m->ranges[i]->first : 0;
		rs[i].length = m->ranges[i] ? m->ranges[i]->count : 0;
	}
	reply_empty(c, ms_stale(c->ctx->ms, c->s, &cr, m->ino, m->handle, m->server_id, rs,
				m->n_ranges));
out:
	free(rs);
	FREE(rdfs__stale_req);
}

static void op_drain(struct op_call *c)
{
	UNPACK(Rdfs__DrainReq, rdfs__drain_req, "DrainReq");
	int ret = ms_drain(c->ctx->ms, c->s, m->server_id, !m->cancel);

	if (ret == -EPERM)
		rpc_server_reply_error(c->req, ret, "drain needs the server key");
	else if (ret == -ENOENT)
		rpc_server_reply_error(c->req, ret, "no I/O server has that id");
	else
		reply_empty(c, ret);
	FREE(rdfs__drain_req);
}

static void op_rebalance(struct op_call *c)
{
	UNPACK(Rdfs__RebalanceReq, rdfs__rebalance_req, "RebalanceReq");
	int ret = ms_rebalance(c->ctx->ms, c->s, !m->cancel, m->threshold_pct);

	if (ret == -EPERM)
		rpc_server_reply_error(c->req, ret, "rebalance needs the server key");
	else if (ret == -EINVAL)
		rpc_server_reply_error(c->req, ret, "the threshold is 1 to 100 percentage points");
	else
		reply_empty(c, ret);
	FREE(rdfs__rebalance_req);
}

/* A QuotaReply of @n records, with every type's grace period. */
/* A quota id of a request as the file system numbers it: users and groups are mapped. */
static uint32_t quota_id_in(const struct op_call *c, uint32_t type, uint32_t id)
{
	return type == MS_QUOTA_USER || type == MS_QUOTA_GROUP
		       ? ms_idmap_in(&c->sq, type == MS_QUOTA_GROUP, id)
		       : id;
}

/* ... and back as the caller's node numbers it. */
static uint32_t quota_id_out(const struct op_call *c, uint32_t type, uint32_t id)
{
	return type == MS_QUOTA_USER || type == MS_QUOTA_GROUP
		       ? ms_idmap_out(&c->sq, type == MS_QUOTA_GROUP, id)
		       : id;
}

static void reply_quotas(struct op_call *c, int status, const struct ms_quota *q, size_t n,
			 int more)
{
	Rdfs__QuotaReply r = RDFS__QUOTA_REPLY__INIT;
	Rdfs__Quota *pq = NULL, **pp = NULL;
	uint64_t grace[MS_QUOTA_TYPES];

	if (status) {
		if (status == -EPERM)
			rpc_server_reply_error(c->req, status,
					       "only root or the server key may see or set that "
					       "quota");
		else
			reply(c, status, NULL);
		return;
	}
	pq = calloc(n ? n : 1, sizeof(*pq));
	pp = calloc(n ? n : 1, sizeof(*pp));
	if (!pq || !pp) {
		reply(c, -ENOMEM, NULL);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		rdfs__quota__init(&pq[i]);
		pq[i].type = q[i].type;
		pq[i].id = quota_id_out(c, q[i].type, q[i].id);
		pq[i].blocks = q[i].blocks;
		pq[i].inodes = q[i].inodes;
		pq[i].block_soft = q[i].block_soft;
		pq[i].block_hard = q[i].block_hard;
		pq[i].inode_soft = q[i].inode_soft;
		pq[i].inode_hard = q[i].inode_hard;
		pq[i].block_grace_ns = q[i].block_grace_ns;
		pq[i].inode_grace_ns = q[i].inode_grace_ns;
		pp[i] = &pq[i];
	}
	for (uint32_t t = 0; t < MS_QUOTA_TYPES; t++)
		grace[t] = ms_quota_grace(c->ctx->ms, t);
	r.quotas = pp;
	r.n_quotas = n;
	r.grace_s = grace;
	r.n_grace_s = MS_QUOTA_TYPES;
	r.more = more;
	reply(c, 0, &r.base);
out:
	free(pq);
	free(pp);
}

static void op_quota_get(struct op_call *c)
{
	UNPACK(Rdfs__QuotaReq, rdfs__quota_req, "QuotaReq");
	struct ms_cred cr;
	struct ms_quota q;

	if (!cred_of(c, m->cred, &cr))
		reply_quotas(c, ms_quota_get(c->ctx->ms, c->s, &cr, m->type,
					     quota_id_in(c, m->type, m->id), &q),
			     &q, 1, 0);
	FREE(rdfs__quota_req);
}

static void op_quota_set(struct op_call *c)
{
	UNPACK(Rdfs__QuotaSetReq, rdfs__quota_set_req, "QuotaSetReq");
	struct ms_quota q = { .type = m->type, .id = quota_id_in(c, m->type, m->id),
			      .block_soft = m->block_soft,
			      .block_hard = m->block_hard, .inode_soft = m->inode_soft,
			      .inode_hard = m->inode_hard };
	struct ms_cred cr;

	if (!cred_of(c, m->cred, &cr))
		reply_quotas(c, ms_quota_set(c->ctx->ms, c->s, &cr, &q, m->valid, m->grace_s), &q,
			     1, 0);
	FREE(rdfs__quota_set_req);
}

static void op_quota_list(struct op_call *c)
{
	UNPACK(Rdfs__QuotaListReq, rdfs__quota_list_req, "QuotaListReq");
	struct ms_quota *q = NULL;
	struct ms_cred cr;
	int n, more = 0;

	if (!cred_of(c, m->cred, &cr)) {
		n = ms_quota_list(c->ctx->ms, c->s, &cr, m->type, m->start_id, m->max, &q, &more);
		reply_quotas(c, n < 0 ? n : 0, q, n < 0 ? 0 : (size_t)n, more);
		free(q);
	}
	FREE(rdfs__quota_list_req);
}

#define FSCK_MAX_PROBLEMS	100000u

static void op_fsck(struct op_call *c)
{
	UNPACK(Rdfs__FsckReq, rdfs__fsck_req, "FsckReq");
	Rdfs__FsckReply r = RDFS__FSCK_REPLY__INIT;
	Rdfs__FsckProblem *pi = NULL, **pp = NULL;
	struct ms_fsck_report rep;
	uint64_t counts[MS_FSCK_KINDS];
	size_t max = m->max_problems ? m->max_problems : 1000;
	int ret;

	if (max > FSCK_MAX_PROBLEMS)
		max = FSCK_MAX_PROBLEMS;
	/* quarantined blocks wait until every capability granted so far has expired */
	ret = ms_fsck(c->ctx->ms, c->s, m->repair, c->ctx->cap_lifetime_ns + 1000000000ll, max,
		      &rep);
	if (ret == -EPERM) {
		rpc_server_reply_error(c->req, ret, "fsck needs the server key");
		goto out;
	}
	if (ret) {
		reply(c, ret, NULL);
		goto out;
	}
	pi = calloc(rep.n ? rep.n : 1, sizeof(*pi));
	pp = calloc(rep.n ? rep.n : 1, sizeof(*pp));
	if (!pi || !pp) {
		reply(c, -ENOMEM, NULL);
		goto out_rep;
	}
	for (size_t i = 0; i < rep.n; i++) {
		rdfs__fsck_problem__init(&pi[i]);
		pi[i].kind = rep.p[i].kind;
		pi[i].ino = rep.p[i].ino;
		pi[i].other_ino = rep.p[i].other_ino;
		pi[i].server_id = rep.p[i].server_id;
		pi[i].block = rep.p[i].block;
		pi[i].count = rep.p[i].count;
		pi[i].repaired = rep.p[i].repaired;
		pp[i] = &pi[i];
	}
	r.inodes = rep.inodes;
	r.files = rep.files;
	r.dirs = rep.dirs;
	r.extents = rep.extents;
	r.orphans_open = rep.orphans_open;
	r.blocks_owned = rep.blocks_owned;
	r.blocks_mapped = rep.blocks_mapped;
	r.blocks_held = rep.blocks_held;
	r.blocks_quarantined = rep.blocks_quarantined;
	r.problems = rep.problems;
	r.repaired = rep.repaired;
	r.list = pp;
	r.n_list = rep.n;
	memcpy(counts, rep.counts, sizeof(counts));
	r.counts = counts;
	r.n_counts = MS_FSCK_KINDS;
	reply(c, 0, &r.base);
out_rep:
	ms_fsck_report_free(&rep);
out:
	free(pi);
	free(pp);
	FREE(rdfs__fsck_req);
}

static void op_register(struct op_call *c)
{
	UNPACK(Rdfs__RegisterReq, rdfs__register_req, "RegisterReq");
	Rdfs__RegisterReply r = RDFS__REGISTER_REPLY__INIT;
	int ret;

	ret = ms_register(c->ctx->ms, c->s, m->url, m->volume_uuid.data, m->volume_uuid.len,
			  m->capacity_blocks, m->name, m->domain ? m->domain : "", m->pristine,
			  &r.server_id, &r.epoch);
	if (!ret && c->ctx->ioserver_timeout_ms > 0) {
		/*
		 * A partitioned or stopped server keeps its connection open (the kernel
		 * answers TCP keepalives of a stopped process): silence, not a close,
		 * is what marks it down. The close then takes the path of any other.
		 */
		rpc_conn_set_idle_timeout(c->req->conn, c->ctx->ioserver_timeout_ms);
		r.ioserver_timeout_ms = (uint32_t)c->ctx->ioserver_timeout_ms;
		r.realtime_ns = cap_now_ns();
	}
	if (ret == -EPERM)
		rpc_server_reply_error(c->req, ret,
				       "REGISTER needs a connection that proved the server key");
	else if (ret == -EBUSY)
		rpc_server_reply_error(c->req, ret,
				       "the I/O server of this volume is registered and up");
	else
		reply(c, ret, &r.base);
	FREE(rdfs__register_req);
}

static void op_server_list(struct op_call *c)
{
	Rdfs__ServerListReply r = RDFS__SERVER_LIST_REPLY__INIT;
	struct ms_server_info *si = NULL;
	Rdfs__ServerInfo *pi = NULL, **pp = NULL;
	int n = ms_server_list(c->ctx->ms, &si);

	if (n < 0) {
		reply(c, n, NULL);
		return;
	}
	pi = calloc(n ? n : 1, sizeof(*pi));
	pp = calloc(n ? n : 1, sizeof(*pp));
	if (!pi || !pp) {
		reply(c, -ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		rdfs__server_info__init(&pi[i]);
		pi[i].server_id = si[i].id;
		pi[i].url = si[i].url;
		pi[i].name = si[i].name;
		pi[i].capacity_blocks = si[i].capacity_blocks;
		pi[i].free_blocks = si[i].free_blocks;
		pi[i].up = si[i].up;
		pi[i].draining = si[i].draining;
		pi[i].domain = si[i].domain;
		pi[i].label = si[i].label;
		pi[i].read_only = si[i].read_only;
		pi[i].volume_uuid.data = si[i].uuid;
		pi[i].volume_uuid.len = si[i].uuid_len;
		pp[i] = &pi[i];
	}
	r.servers = pp;
	r.n_servers = (size_t)n;
	{
		struct ms_rebuild_stats st;

		ms_rebuild_status(c->ctx->ms, &st);
		r.chunks_under = st.chunks_under;
		r.chunks_building = st.chunks_building;
		r.chunks_lost = st.chunks_lost;
		r.bytes_rebuilt = st.bytes_copied;
		r.rebuild_passes = st.passes;
	}
	{
		struct ms_rebalance_status rb;

		ms_rebalance_status(c->ctx->ms, &rb);
		r.rebalancing = rb.active;
		r.rebalance_threshold_pct = rb.threshold_pct;
		r.rebalance_bytes_moved = rb.bytes_moved;
		r.rebalance_outside = rb.outside;
	}
	reply(c, 0, &r.base);
out:
	free(pi);
	free(pp);
	free(si);
}

/* @maps: room for the node's maps, pointed to by @p. */
static void node_to_pb(const struct ms_node *n, Rdfs__NodeInfo *p, Rdfs__IdMap *maps,
		       Rdfs__IdMap **pmaps)
{
	rdfs__node_info__init(p);
	p->name = (char *)n->name;
	p->generation = n->generation;
	p->revoked = n->revoked;
	p->squash = n->squash.mode;
	p->anonuid = n->squash.anonuid;
	p->anongid = n->squash.anongid;
	p->unmapped_squash = n->squash.unmapped_squash;
	for (int i = 0; i < n->squash.nmaps; i++) {
		rdfs__id_map__init(&maps[i]);
		maps[i].gid = n->squash.maps[i].gid;
		maps[i].client = n->squash.maps[i].client;
		maps[i].fs = n->squash.maps[i].fs;
		maps[i].count = n->squash.maps[i].count;
		pmaps[i] = &maps[i];
	}
	p->maps = pmaps;
	p->n_maps = n->squash.nmaps;
}

static void reply_nodes(struct op_call *c, int status, const struct ms_node *nodes, int n)
{
	Rdfs__NodeReply r = RDFS__NODE_REPLY__INIT;
	Rdfs__NodeInfo *pi = NULL, **pp = NULL;
	Rdfs__IdMap *mi = NULL, **mp = NULL;

	if (status) {
		if (status == -EPERM)
			rpc_server_reply_error(c->req, status,
					       "node administration needs the server key");
		else if (status == -EINVAL)
			rpc_server_reply_error(c->req, status,
					       "bad node name or policy (id maps overlap, an "
					       "empty range or one past 2^32)");
		else
			reply(c, status, NULL);
		return;
	}
	pi = calloc(n ? n : 1, sizeof(*pi));
	pp = calloc(n ? n : 1, sizeof(*pp));
	mi = calloc((n ? n : 1) * MS_IDMAP_MAX, sizeof(*mi));
	mp = calloc((n ? n : 1) * MS_IDMAP_MAX, sizeof(*mp));
	if (!pi || !pp || !mi || !mp) {
		reply(c, -ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		node_to_pb(&nodes[i], &pi[i], mi + i * MS_IDMAP_MAX, mp + i * MS_IDMAP_MAX);
		pp[i] = &pi[i];
	}
	r.nodes = pp;
	r.n_nodes = (size_t)n;
	reply(c, 0, &r.base);
out:
	free(pi);
	free(pp);
	free(mi);
	free(mp);
}

static void op_node_set(struct op_call *c)
{
	UNPACK(Rdfs__NodeReq, rdfs__node_req, "NodeReq");
	struct ms_squash sq = { (enum ms_squash_mode)m->squash, m->anonuid, m->anongid,
				m->unmapped_squash, 0, { { 0 } } };
	struct ms_node n;
	int ret = 0;

	if (m->squash > MS_SQUASH_ALL || m->n_maps > MS_IDMAP_MAX)
		ret = -EINVAL;
	for (size_t i = 0; !ret && i < m->n_maps; i++) {
		sq.maps[i] = (struct ms_idmap){ m->maps[i]->gid, m->maps[i]->client,
						m->maps[i]->fs, m->maps[i]->count };
		sq.nmaps++;
	}
	ret = ret ? ret :
	      ms_node_set(c->ctx->ms, c->s, m->name, m->new_key, m->set_policy ? &sq : NULL, &n);
	reply_nodes(c, ret, &n, 1);
	FREE(rdfs__node_req);
}

static void op_node_revoke(struct op_call *c)
{
	UNPACK(Rdfs__NodeReq, rdfs__node_req, "NodeReq");
	struct ms_node n;

	reply_nodes(c, ms_node_revoke(c->ctx->ms, c->s, m->name, &n), &n, 1);
	FREE(rdfs__node_req);
}

static void op_node_list(struct op_call *c)
{
	struct ms_node *nodes = NULL;
	int n = ms_node_list(c->ctx->ms, c->s, &nodes);

	reply_nodes(c, n < 0 ? n : 0, nodes, n < 0 ? 0 : n);
	free(nodes);
}

static void op_server_set(struct op_call *c)
{
	UNPACK(Rdfs__ServerSetReq, rdfs__server_set_req, "ServerSetReq");
	int ret = ms_server_set(c->ctx->ms, c->s, m->server_id, m->set_label ? m->label : NULL,
				m->set_read_only ? m->read_only : -1);

	if (ret == -EPERM)
		rpc_server_reply_error(c->req, ret, "changing an I/O server needs the server key");
	else if (ret == -ENOENT)
		rpc_server_reply_error(c->req, ret, "no I/O server has that id");
	else if (ret == -EINVAL)
		rpc_server_reply_error(c->req, ret,
				       "a label is at most 127 bytes, without control characters");
	else
		reply_empty(c, ret);
	FREE(rdfs__server_set_req);
}

static void op_walk(struct op_call *c)
{
	UNPACK(Rdfs__WalkReq, rdfs__walk_req, "WalkReq");
	Rdfs__WalkReply r = RDFS__WALK_REPLY__INIT;
	Rdfs__WalkEntry *pe = NULL, **pp = NULL;
	Rdfs__Attr *pa = NULL;
	struct ms_walk w = { 0 };
	struct ms_cred cr;
	int ret;

	if (cred_of(c, m->cred, &cr))
		goto out;
	ret = ms_walk(c->ctx->ms, &cr, m->ino, m->cursor.data, m->cursor.len, m->max_entries,
		      m->summary, &w);
	if (ret) {
		reply(c, ret, NULL);
		goto out;
	}
	pe = calloc(w.n ? w.n : 1, sizeof(*pe));
	pp = calloc(w.n ? w.n : 1, sizeof(*pp));
	pa = calloc(w.n ? w.n : 1, sizeof(*pa));
	if (!pe || !pp || !pa) {
		reply(c, -ENOMEM, NULL);
		goto out;
	}
	for (size_t i = 0; i < w.n; i++) {
		rdfs__walk_entry__init(&pe[i]);
		rdfs__attr__init(&pa[i]);
		pe[i].path.data = (uint8_t *)w.paths + w.e[i].path_off;
		pe[i].path.len = w.e[i].path_len;
		attr_to_pb(c, &w.e[i].attr, &pa[i]);
		pe[i].attr = &pa[i];
		pe[i].denied = w.e[i].denied;
		pp[i] = &pe[i];
	}
	r.entries = pp;
	r.n_entries = w.n;
	r.cursor.data = (uint8_t *)w.cursor;
	r.cursor.len = w.cursor_len;
	r.eof = w.eof;
	r.files = w.files;
	r.dirs = w.dirs;
	r.others = w.others;
	r.bytes = w.bytes;
	r.blocks = w.blocks;
	r.denied = w.denied;
	reply(c, 0, &r.base);
out:
	free(pe);
	free(pp);
	free(pa);
	ms_walk_free(&w);
	FREE(rdfs__walk_req);
}

static void op_ping(struct op_call *c)
{
	reply_empty(c, 0);
}

static const op_fn op_table[RDFS_OP_MAX] = {
	[RDFS_OP_PING] = op_ping,
	[RDFS_OP_LOOKUP] = op_lookup,
	[RDFS_OP_GETATTR] = op_getattr,
	[RDFS_OP_SETATTR] = op_setattr,
	[RDFS_OP_MKNOD] = op_mknod,
	[RDFS_OP_MKDIR] = op_mkdir,
	[RDFS_OP_UNLINK] = op_unlink_rmdir,
	[RDFS_OP_RMDIR] = op_unlink_rmdir,
	[RDFS_OP_RENAME] = op_rename,
	[RDFS_OP_LINK] = op_link,
	[RDFS_OP_SYMLINK] = op_symlink,
	[RDFS_OP_READLINK] = op_readlink,
	[RDFS_OP_READDIR] = op_readdir,
	[RDFS_OP_STATFS] = op_statfs,
	[RDFS_OP_GETXATTR] = op_xattr,
	[RDFS_OP_SETXATTR] = op_xattr,
	[RDFS_OP_LISTXATTR] = op_xattr,
	[RDFS_OP_REMOVEXATTR] = op_xattr,
	[RDFS_OP_OPEN] = op_open,
	[RDFS_OP_RELEASE] = op_release,
	[RDFS_OP_LAYOUT] = op_layout,
	[RDFS_OP_COMMIT] = op_commit,
	[RDFS_OP_REGISTER] = op_register,
	[RDFS_OP_SERVER_LIST] = op_server_list,
	[RDFS_OP_NODE_SET] = op_node_set,
	[RDFS_OP_NODE_REVOKE] = op_node_revoke,
	[RDFS_OP_NODE_LIST] = op_node_list,
	[RDFS_OP_PUNCH] = op_punch,
	[RDFS_OP_SHIFT] = op_shift,
	[RDFS_OP_FSCK] = op_fsck,
	[RDFS_OP_STALE] = op_stale,
	[RDFS_OP_DRAIN] = op_drain,
	[RDFS_OP_REBALANCE] = op_rebalance,
	[RDFS_OP_WALK] = op_walk,
	[RDFS_OP_SERVER_SET] = op_server_set,
	[RDFS_OP_QUOTA_GET] = op_quota_get,
	[RDFS_OP_QUOTA_SET] = op_quota_set,
	[RDFS_OP_QUOTA_LIST] = op_quota_list,
};

int ops_is_admin(uint16_t op)
{
	return op == RDFS_OP_NODE_SET || op == RDFS_OP_NODE_REVOKE || op == RDFS_OP_NODE_LIST;
}

int ops_is_quick_read(uint16_t op)
{
	switch (op) {
	case RDFS_OP_PING:
	case RDFS_OP_LOOKUP:
	case RDFS_OP_GETATTR:
	case RDFS_OP_READLINK:
	case RDFS_OP_GETXATTR:
	case RDFS_OP_STATFS:
	case RDFS_OP_SERVER_LIST:
	case RDFS_OP_QUOTA_GET:
		return 1;
	default:
		return 0;
	}
}

int ops_is_served(uint16_t op)
{
	return op < RDFS_OP_MAX && op_table[op] != NULL;
}

void ops_dispatch(const struct ms_ops_ctx *ctx, struct ms_session *s, struct rpc_request *req)
{
	struct op_call c = { .ctx = ctx, .s = s, .req = req };
	unsigned int op = req->msg->hdr.opcode;
	op_fn fn = op < RDFS_OP_MAX ? op_table[op] : NULL;

	if (!fn) {
		rpc_server_reply_error(req, -ENOSYS, "not a metaserver operation");
		return;
	}
	if (req->msg->hdr.data_len) {
		rpc_server_reply_error(req, -EPROTO, "metaserver requests carry no bulk data");
		return;
	}
	ms_session_squash(s, &c.sq);
	fn(&c);
}
