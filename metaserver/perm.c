// SPDX-License-Identifier: MIT
/*
 * perm.c - POSIX permission checks with the caller's uid, gid and groups, as
 * Linux's generic_permission() does them: the owner class, else the group
 * class, else other; root passes read and write always and exec when any x bit
 * is set (or on a directory).
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
