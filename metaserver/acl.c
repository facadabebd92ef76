// SPDX-License-Identifier: MIT
/*
 * acl.c - the POSIX ACL xattr format and the mode algebra of acl.h, after
 * Linux's fs/posix_acl.c so that what a FUSE or kernel client computes from
 * its cached ACL and what the metaserver enforces agree.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "acl.h"
#include "ms_keys.h"

#define ACL_HDR	  4
#define ACL_ENTRY 8

int acl_from_xattr(const void *value, size_t len, struct ms_acl *out)
{
	const uint8_t *p = value;
	size_t count;

	out->n = 0;
	if (!value || len < ACL_HDR || (len - ACL_HDR) % ACL_ENTRY)
		return -EINVAL;
	if (get_le32(p) != MS_ACL_XATTR_VERSION)
		return -EOPNOTSUPP;
	count = (len - ACL_HDR) / ACL_ENTRY;
	if (count > MS_ACL_MAX)
		return -ENOSPC;
	for (size_t i = 0; i < count; i++) {
		const uint8_t *e = p + ACL_HDR + i * ACL_ENTRY;
		struct ms_acl_entry *x = &out->e[i];

		x->tag = (uint16_t)(e[0] | e[1] << 8);
		x->perm = (uint16_t)(e[2] | e[3] << 8);
		x->id = get_le32(e + 4);
		/* only named entries carry an id; Linux ignores it elsewhere */
		if (x->tag != MS_ACL_USER && x->tag != MS_ACL_GROUP)
			x->id = MS_ACL_UNDEFINED_ID;
	}
	out->n = (uint32_t)count;
	return 0;
}

size_t acl_xattr_size(const struct ms_acl *a)
{
	return ACL_HDR + (size_t)a->n * ACL_ENTRY;
}

size_t acl_to_xattr(const struct ms_acl *a, uint8_t *buf)
{
	put_le32(buf, MS_ACL_XATTR_VERSION);
	for (uint32_t i = 0; i < a->n; i++) {
		uint8_t *e = buf + ACL_HDR + i * ACL_ENTRY;

		e[0] = (uint8_t)a->e[i].tag;
		e[1] = (uint8_t)(a->e[i].tag >> 8);
		e[2] = (uint8_t)a->e[i].perm;
		e[3] = (uint8_t)(a->e[i].perm >> 8);
		put_le32(e + 4, a->e[i].id);
	}
	return acl_xattr_size(a);
}

int acl_valid(const struct ms_acl *a)
{
	/* the tag each position may hold next, in the order Linux requires */
	enum {
		S_USER_OBJ,
		S_USER,
		S_GROUP,
		S_OTHER,
		S_DONE
	} state = S_USER_OBJ;
	int named = 0, have_prev = 0;
	uint32_t prev = 0;

	for (uint32_t i = 0; i < a->n; i++) {
		const struct ms_acl_entry *x = &a->e[i];

		if (x->perm & ~7u)
			return -EINVAL;
		switch (x->tag) {
		case MS_ACL_USER_OBJ:
			if (state != S_USER_OBJ)
				return -EINVAL;
			state = S_USER;
			have_prev = 0;
			break;
		case MS_ACL_GROUP_OBJ:
			if (state != S_USER)
				return -EINVAL;
			state = S_GROUP;
			have_prev = 0;
			break;
		case MS_ACL_USER:
		case MS_ACL_GROUP:
			if (state != (x->tag == MS_ACL_USER ? S_USER : S_GROUP))
				return -EINVAL;
			/* sorted and unique: the first match is the only match */
			if (x->id == MS_ACL_UNDEFINED_ID || (have_prev && x->id <= prev))
				return -EINVAL;
			prev = x->id;
			have_prev = 1;
			named = 1;
			break;
		case MS_ACL_MASK:
			if (state != S_GROUP)
				return -EINVAL;
			state = S_OTHER;
			break;
		case MS_ACL_OTHER:
			if (state != S_OTHER && !(state == S_GROUP && !named))
				return -EINVAL;
			state = S_DONE;
			break;
		default:
			return -EINVAL;
		}
	}
	return state == S_DONE ? 0 : -EINVAL;
}

int acl_equiv_mode(const struct ms_acl *a, uint32_t *mode)
{
	uint32_t m = 0;
	int not_equiv = 0;

	for (uint32_t i = 0; i < a->n; i++) {
		uint32_t perm = a->e[i].perm & 7u;

		switch (a->e[i].tag) {
		case MS_ACL_USER_OBJ:
			m |= perm << 6;
			break;
		case MS_ACL_GROUP_OBJ:
			m |= perm << 3;
			break;
		case MS_ACL_OTHER:
			m |= perm;
			break;
		case MS_ACL_MASK:
			/* a mask is the group class: it overrides GROUP_OBJ's bits */
			m = (m & ~(uint32_t)S_IRWXG) | perm << 3;
			not_equiv = 1;
			break;
		default:
			not_equiv = 1;
			break;
		}
	}
	*mode = (*mode & ~(uint32_t)(S_IRWXU | S_IRWXG | S_IRWXO)) | m;
	return not_equiv;
}

static struct ms_acl_entry *acl_find(struct ms_acl *a, uint16_t tag)
{
	for (uint32_t i = 0; i < a->n; i++)
		if (a->e[i].tag == tag)
			return &a->e[i];
	return NULL;
}

void acl_chmod(struct ms_acl *a, uint32_t mode)
{
	struct ms_acl_entry *u = acl_find(a, MS_ACL_USER_OBJ);
	struct ms_acl_entry *g = acl_find(a, MS_ACL_MASK);
	struct ms_acl_entry *o = acl_find(a, MS_ACL_OTHER);

	if (!g)
		g = acl_find(a, MS_ACL_GROUP_OBJ);
	if (u)
		u->perm = (mode >> 6) & 7;
	if (g)
		g->perm = (mode >> 3) & 7;
	if (o)
		o->perm = mode & 7;
}

int acl_create_masq(struct ms_acl *a, uint32_t *mode)
{
	struct ms_acl_entry *group_obj = NULL, *mask = NULL, *g;
	uint32_t m = *mode & 0777;
	int not_equiv = 0;

	for (uint32_t i = 0; i < a->n; i++) {
		struct ms_acl_entry *x = &a->e[i];

		switch (x->tag) {
		case MS_ACL_USER_OBJ:
			x->perm &= (m >> 6) & 7;
			m &= (uint32_t)x->perm << 6 | ~(uint32_t)S_IRWXU;
			break;
		case MS_ACL_OTHER:
			x->perm &= m & 7;
			m &= x->perm | ~(uint32_t)S_IRWXO;
			break;
		case MS_ACL_GROUP_OBJ:
			group_obj = x;
			break;
		case MS_ACL_MASK:
			mask = x;
			not_equiv = 1;
			break;
		default:
			not_equiv = 1;
			break;
		}
	}
	/* the group class is the mask when there is one (named entries stay as set) */
	g = mask ? mask : group_obj;
	if (g) {
		g->perm &= (m >> 3) & 7;
		m &= (uint32_t)g->perm << 3 | ~(uint32_t)S_IRWXG;
	}
	*mode = (*mode & ~0777u) | (m & 0777);
	return not_equiv;
}
