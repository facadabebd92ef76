// SPDX-License-Identifier: MIT
/*
 * perm.c - POSIX permission checks with the caller's uid, gid and groups, as
 * Linux's generic_permission() does them: the owner class, else the group
 * class, else other; root passes read and write always and exec when any x bit
 * is set (or on a directory).
 *
 * An inode with an access ACL (MS_INO_ACL; ns_inode_get() loaded it into
 * in->acl, so the check reads nothing) is checked as Linux's
 * posix_acl_permission() does for everyone but the owner: a named user's
 * entry, else the owning group's and named groups' entries (any that grants
 * all asked for), each masked by MASK, else other. As in Linux's
 * acl_permission_check(), the ACL is not consulted when the mode's group bits
 * (the mask) are all clear: the group and other bits decide then, so that
 * this check and a kernel client's agree.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "ms_int.h"

int perm_in_group(const struct ms_cred *cr, uint32_t gid)
{
	if (cr->gid == gid)
		return 1;
	for (uint32_t i = 0; i < cr->ngroups; i++)
		if (cr->groups[i] == gid)
			return 1;
	return 0;
}

/* The perms of entry @x as masked by the ACL's MASK entry, if it has one. */
static unsigned int acl_masked(const struct ms_acl *a, const struct ms_acl_entry *x)
{
	for (uint32_t i = 0; i < a->n; i++)
		if (a->e[i].tag == MS_ACL_MASK)
			return x->perm & a->e[i].perm;
	return x->perm;
}

/* posix_acl_permission() for a caller who is not the owner: 0 or -EACCES. */
static int acl_check(const struct ms_inode *in, const struct ms_cred *cr, unsigned int want)
{
	const struct ms_acl *a = &in->acl;
	int found = 0;

	for (uint32_t i = 0; i < a->n; i++) {
		const struct ms_acl_entry *x = &a->e[i];

		switch (x->tag) {
		case MS_ACL_USER:
			if (x->id == cr->uid)
				return (want & ~acl_masked(a, x)) ? -EACCES : 0;
			break;
		case MS_ACL_GROUP_OBJ:
		case MS_ACL_GROUP:
			if (perm_in_group(cr, x->tag == MS_ACL_GROUP ? x->id : in->gid)) {
				found = 1;
				if (!(want & ~x->perm))
					return (want & ~acl_masked(a, x)) ? -EACCES : 0;
			}
			break;
		case MS_ACL_OTHER:
			if (found)
				return -EACCES;
			return (want & ~x->perm) ? -EACCES : 0;
		default:
			break;
		}
	}
	return -EACCES;		/* acl_valid() let no ACL without OTHER in */
}

int perm_check(const struct ms_inode *in, const struct ms_cred *cr, int mask)
{
	unsigned int bits;

	if (cr->uid == 0) {
		if (!(mask & MAY_EXEC) || S_ISDIR(in->mode) || (in->mode & 0111))
			return 0;
		return -EACCES;
	}
	if (cr->uid == in->uid)
		bits = (in->mode >> 6) & 7;
	else if (in->acl.n && (in->mode & S_IRWXG))
		return acl_check(in, cr, (unsigned int)mask & 7);
	else if (perm_in_group(cr, in->gid))
		bits = (in->mode >> 3) & 7;
	else
		bits = in->mode & 7;
	return ((unsigned int)mask & ~bits) ? -EACCES : 0;
}

int perm_is_owner(const struct ms_inode *in, const struct ms_cred *cr)
{
	return cr->uid == 0 || cr->uid == in->uid;
}

int perm_sticky(const struct ms_inode *dir, const struct ms_inode *victim,
		const struct ms_cred *cr)
{
	if (!(dir->mode & S_ISVTX) || cr->uid == 0)
		return 0;
	if (cr->uid == victim->uid || cr->uid == dir->uid)
		return 0;
	return -EPERM;
}

int perm_open(const struct ms_inode *in, const struct ms_cred *cr, uint32_t flags)
{
	int mask = 0;

	if (S_ISLNK(in->mode))
		return -ELOOP;
	switch (flags & O_ACCMODE) {
	case O_RDONLY:
		mask = MAY_READ;
		break;
	case O_WRONLY:
		mask = MAY_WRITE;
		break;
	default:
		mask = MAY_READ | MAY_WRITE;
		break;
	}
	if (flags & O_TRUNC)
		mask |= MAY_WRITE;
	if (S_ISDIR(in->mode) && (mask & MAY_WRITE))
		return -EISDIR;
	return perm_check(in, cr, mask);
}
