/* SPDX-License-Identifier: MIT */
/*
 * acl.h - POSIX.1e access control lists as Linux keeps them: the xattr format
 * of system.posix_acl_access and system.posix_acl_default (a little-endian
 * u32 version 2, then entries of u16 tag, u16 perm, u32 id) and the algebra
 * between an ACL and a mode (Linux's fs/posix_acl.c: posix_acl_valid,
 * posix_acl_equiv_mode, posix_acl_chmod, posix_acl_create_masq).
 *
 * Pure functions over caller-owned memory: no locks, no allocation, no
 * database; any thread. Storing ACLs is ns_acl.c's, checking access with them
 * perm.c's.
 */
#ifndef RDFS_MS_ACL_H
#define RDFS_MS_ACL_H

#include <stddef.h>
#include <stdint.h>

#define MS_ACL_XATTR_ACCESS  "system.posix_acl_access"
#define MS_ACL_XATTR_DEFAULT "system.posix_acl_default"
#define MS_ACL_XATTR_VERSION 2u

/*
 * Most entries of one ACL. The kernel's FUSE client sends at most a page
 * (511 entries); ext4 fits about as many in a block. 128 keeps an inode
 * record in memory small and is far more than setfacl users write; more is
 * -ENOSPC, as a file system whose xattr space is full answers.
 */
#define MS_ACL_MAX 128

/* Entry tags (Linux's ACL_USER_OBJ...). */
#define MS_ACL_USER_OBJ	 0x01
#define MS_ACL_USER	 0x02
#define MS_ACL_GROUP_OBJ 0x04
#define MS_ACL_GROUP	 0x08
#define MS_ACL_MASK	 0x10
#define MS_ACL_OTHER	 0x20
/* The id of the entries that name no one (what posix_acl_to_xattr writes). */
#define MS_ACL_UNDEFINED_ID 0xffffffffu

struct ms_acl_entry {
	uint16_t tag;
	uint16_t perm; /* r 4, w 2, x 1 */
	uint32_t id;   /* MS_ACL_USER, MS_ACL_GROUP only */
};

/* n == 0: no ACL. A valid ACL has at least 3 entries. */
struct ms_acl {
	uint32_t n;
	struct ms_acl_entry e[MS_ACL_MAX];
};

/*
 * Parse an xattr value into @out (n == 0 for a bare header: "no ACL", as
 * Linux reads it). -EINVAL for a size that is not a header plus whole
 * entries, -EOPNOTSUPP for another version (as Linux), -ENOSPC past
 * MS_ACL_MAX. Does not check the entries: acl_valid() does.
 */
int acl_from_xattr(const void *value, size_t len, struct ms_acl *out);
/* Bytes acl_to_xattr() writes for @a. */
size_t acl_xattr_size(const struct ms_acl *a);
/* Write @a in the xattr format, ids of unnamed entries as MS_ACL_UNDEFINED_ID. */
size_t acl_to_xattr(const struct ms_acl *a, uint8_t *buf);
/*
 * 0 if @a is well formed, else -EINVAL: one USER_OBJ first, named users by
 * strictly increasing id (no duplicates), one GROUP_OBJ, named groups the
 * same, a MASK when there are named entries (at most one), OTHER last; perms
 * within rwx; no named entry without an id.
 */
int acl_valid(const struct ms_acl *a);
/*
 * The permission bits of mode @*mode replaced by what @a grants the owner,
 * the group class (MASK, else GROUP_OBJ) and others. Returns 0 when @a says
 * no more than those bits (it can be dropped), 1 otherwise.
 */
int acl_equiv_mode(const struct ms_acl *a, uint32_t *mode);
/* chmod with an access ACL: USER_OBJ, MASK (else GROUP_OBJ) and OTHER take @mode's bits. */
void acl_chmod(struct ms_acl *a, uint32_t mode);
/*
 * A new object's access ACL from its parent's default ACL @a (modified in
 * place) and the create mode @*mode (its permission bits narrowed in place):
 * each class gets what both allow. Returns 0 when the result is equivalent to
 * the mode (no ACL needed), 1 otherwise.
 */
int acl_create_masq(struct ms_acl *a, uint32_t *mode);

#endif
