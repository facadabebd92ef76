// SPDX-License-Identifier: MIT
/*
 * ns_attr.c - SETATTR: chmod, chown, truncate and utimes with the rules of
 * Linux's setattr_prepare()/notify_change() and do_truncate()/do_utimes();
 * chmod also rewrites an access ACL (ns_acl_chmod) in the same batch.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ms_int.h"

static int setattr_check(const struct ms_inode *in, struct ms_session *s,
			 const struct ms_cred *cr, const struct ms_setattr *sa)
{
	uint32_t v = sa->valid;
	int owner = perm_is_owner(in, cr);

	if (v & MS_SET_SIZE) {
		uint32_t hflags;

		if (S_ISDIR(in->mode))
			return -EISDIR;
		if (!S_ISREG(in->mode))
			return -EINVAL;
		if (sa->size > MS_MAX_FILE_BYTES)
			return -EFBIG;
		if (!(sa->handle && handle_flags(s, sa->handle, in->ino, &hflags) == 0 &&
		      (hflags & O_ACCMODE) != O_RDONLY) &&
		    perm_check(in, cr, MAY_WRITE))
			return -EACCES;
	}
	/* utimensat(UTIME_NOW) needs ownership or write access; explicit times ownership */
	if ((v & (MS_SET_ATIME_NOW | MS_SET_MTIME_NOW)) && !owner && perm_check(in, cr, MAY_WRITE))
		return -EACCES;
	if (v & MS_SET_UID) {
		if (cr->uid != 0 && !(cr->uid == in->uid && sa->uid == in->uid))
			return -EPERM;
	}
	if (v & MS_SET_GID) {
		if (cr->uid != 0 &&
		    !(cr->uid == in->uid && (sa->gid == in->gid || perm_in_group(cr, sa->gid))))
			return -EPERM;
	}
	if ((v & MS_SET_MODE) && !owner)
		return -EPERM;
	if ((v & MS_SET_ATIME) && !(v & MS_SET_ATIME_NOW) && !owner)
		return -EPERM;
	if ((v & MS_SET_MTIME) && !(v & MS_SET_MTIME_NOW) && !owner)
		return -EPERM;
	if ((v & MS_SET_CTIME) && !owner)
		return -EPERM;
	return 0;
}

/*
 * A chown or chgrp moves the inode's usage to its new owner or group: within
 * their limits (EDQUOT), unless root asks (as Linux's dquot_transfer()).
 */
static int chown_reserve(struct ms *ms, struct ms_batch *mb, const struct ms_cred *cr,
			 const struct ms_inode *in, const struct ms_setattr *sa)
{
	struct ms_qids ids = { .mask = 0 };

	if ((sa->valid & MS_SET_UID) && sa->uid != in->uid) {
		ids.id[MS_QUOTA_USER] = sa->uid;
		ids.mask |= 1u << MS_QUOTA_USER;
	}
	if ((sa->valid & MS_SET_GID) && sa->gid != in->gid) {
		ids.id[MS_QUOTA_GROUP] = sa->gid;
		ids.mask |= 1u << MS_QUOTA_GROUP;
	}
	if (!ids.mask)
		return 0;
	return quota_reserve(ms, mb, cr, &ids, in->blocks, 1, 0, NULL);
}

int ms_setattr(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	       const struct ms_setattr *sa, struct ms_attr *out)
{
	struct ms_freelist f = { 0 };
	struct ms_lockset ls;
	struct ms_inode *in = malloc(sizeof(*in));
	struct ms_batch mb;
	uint32_t v = sa->valid, old_mode = 0, old_uid = 0, old_gid = 0;
	int64_t now = ns_now();
	int ret;

	ms_batch_init(&mb);
	if (!in) {
		ms_batch_destroy(ms, &mb);
		return -ENOMEM;
	}
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (ret)
		goto out;
	ret = setattr_check(in, s, cr, sa);
	if (ret)
		goto out;
	old_mode = in->mode;
	old_uid = in->uid;
	old_gid = in->gid;
	ret = chown_reserve(ms, &mb, cr, in, sa);
	if (ret)
		goto out;

	if (v & MS_SET_SIZE) {
		if (sa->size < in->size || in->blocks) {
			ret = layout_truncate(ms, mb.b, in, sa->size, &f);
			if (ret)
				goto out;
		}
		in->size = sa->size;
		if (!(v & (MS_SET_MTIME | MS_SET_MTIME_NOW)))
			in->mtime_ns = now;
		if (cr->uid != 0) {
			in->mode &= ~(uint32_t)S_ISUID;
			if (in->mode & S_IXGRP)
				in->mode &= ~(uint32_t)S_ISGID;
		}
	}
	if (v & MS_SET_UID)
		in->uid = sa->uid;
	if (v & MS_SET_GID)
		in->gid = sa->gid;
	if ((v & (MS_SET_UID | MS_SET_GID)) && !S_ISDIR(in->mode)) {
		in->mode &= ~(uint32_t)S_ISUID;
		if ((in->mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
			in->mode &= ~(uint32_t)S_ISGID;
	}
	if (v & MS_SET_MODE) {
		in->mode = (in->mode & S_IFMT) | (sa->mode & 07777);
		if (cr->uid != 0 && !perm_in_group(cr, in->gid))
			in->mode &= ~(uint32_t)S_ISGID;
		/* the ACL's owner, group class and other entries follow the mode */
		ns_acl_chmod(mb.b, in);
	}
	if (v & MS_SET_ATIME_NOW)
		in->atime_ns = now;
	else if (v & MS_SET_ATIME)
		in->atime_ns = sa->atime_ns;
	if (v & MS_SET_MTIME_NOW)
		in->mtime_ns = now;
	else if (v & MS_SET_MTIME)
		in->mtime_ns = sa->mtime_ns;
	in->ctime_ns = (v & MS_SET_CTIME) ? sa->ctime_ns : now;
	ns_inode_put(&mb, in);
	ret = ns_write_freeing(ms, &mb, &f);
	if (!ret)
		ns_attr_from_inode(in, out);
out:
	ms_batch_destroy(ms, &mb);
	freelist_release(ms, &f, ret == 0);
	/*
	 * Rights may have been taken away: capabilities granted under the old
	 * owner or mode stop working; a client with an open handle gets new ones.
	 */
	if (ret == 0 && S_ISREG(in->mode) && in->blocks &&
	    ((old_mode & ~in->mode & 07777) || old_uid != in->uid || old_gid != in->gid))
		fence_file(ms, ino);
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret;
}
