// SPDX-License-Identifier: MIT
/*
 * xattr.c - extended attributes, with getxattr(2)/listxattr(2)'s size rules
 * applied here so that every caller (FUSE, the tool) gets them right.
 */
#include <errno.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"

static int xattr_name_check(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len > RDFS_XATTR_NAME_MAX)
		return -ERANGE;
	return 0;
}

static void xattr_req_init(Rdfs__XattrReq *req, Rdfs__Cred *cred, const struct rdfs_cred *cr,
			   uint64_t ino, const char *name)
{
	rdfs__xattr_req__init(req);
	cred_to_pb(cr, cred);
	req->cred = cred;
	req->ino = ino;
	req->name = (char *)(name ? name : "");
}

int rdfs_getxattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		  const char *name, void *buf, size_t size)
{
	Rdfs__XattrReq req;
	Rdfs__XattrReply *rep = NULL;
	Rdfs__Cred cred;
	int ret = xattr_name_check(name);

	if (ret)
		return ret;
	xattr_req_init(&req, &cred, cr, ino, name);
	ret = ms_call(c, RDFS_OP_GETXATTR, &req.base, &rdfs__xattr_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	if (ret)
		return ret;
	ret = (int)rep->value.len;
	if (size > 0) {
		if (rep->value.len > size)
			ret = -ERANGE;
		else if (rep->value.len)
			memcpy(buf, rep->value.data, rep->value.len);
	}
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return ret;
}

int rdfs_setxattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		  const char *name, const void *value, size_t size, int flags)
{
	Rdfs__XattrReq req;
	Rdfs__Cred cred;
	int ret = xattr_name_check(name);

	if (ret)
		return ret;
	if (size > RDFS_XATTR_SIZE_MAX)
		return -E2BIG;
	dir_attr_forget(c, ino);	/* its ctime changes */
	xattr_req_init(&req, &cred, cr, ino, name);
	req.value.data = (uint8_t *)value;
	req.value.len = size;
	req.flags = flags;
	return ms_call(c, RDFS_OP_SETXATTR, &req.base, NULL, NULL, 0);
}

int rdfs_listxattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		   char *buf, size_t size)
{
	Rdfs__XattrReq req;
	Rdfs__XattrReply *rep = NULL;
	Rdfs__Cred cred;
	size_t i, need = 0, off = 0;
	int ret;

	xattr_req_init(&req, &cred, cr, ino, NULL);
	ret = ms_call(c, RDFS_OP_LISTXATTR, &req.base, &rdfs__xattr_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	if (ret)
		return ret;
	for (i = 0; i < rep->n_names; i++)
		need += strlen(rep->names[i]) + 1;
	ret = (int)need;
	if (size > 0) {
		if (need > size) {
			ret = -ERANGE;
		} else {
			for (i = 0; i < rep->n_names; i++) {
				size_t len = strlen(rep->names[i]) + 1;

				memcpy(buf + off, rep->names[i], len);
				off += len;
			}
		}
	}
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return ret;
}

int rdfs_removexattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		     const char *name)
{
	Rdfs__XattrReq req;
	Rdfs__Cred cred;
	int ret = xattr_name_check(name);

	if (ret)
		return ret;
	dir_attr_forget(c, ino);
	xattr_req_init(&req, &cred, cr, ino, name);
	return ms_call(c, RDFS_OP_REMOVEXATTR, &req.base, NULL, NULL, 0);
}
