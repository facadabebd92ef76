// SPDX-License-Identifier: GPL-2.0
/*
 * acl.c - POSIX ACLs of the kernel client: the get_acl and set_acl inode
 * operations (kernel 6.1's) over the helper's GETXATTR, SETXATTR and
 * REMOVEXATTR of system.posix_acl_access and system.posix_acl_default.
 *
 * The metaserver validates, enforces and turns an ACL into the mode; this side
 * only lets generic_permission() check with the VFS's per-inode ACL cache,
 * which it fills from get_acl and empties whenever the ACL may have changed:
 * after set_acl and chmod here, and when the metaserver reports a new ctime
 * (rdfs_attr_apply: another client's setfacl).
 *
 * Process context (each call waits for the helper); no locks of its own:
 * set_acl runs under the inode's i_rwsem, the ACL cache has its own.
 */
#include <linux/fs.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <linux/slab.h>
#include <linux/xattr.h>

#include "rdfs.h"

/* Largest ACL value read or sent: a page (511 entries), as FUSE. */
#define RDFS_ACL_MAX_SIZE	PAGE_SIZE

static const char *rdfs_acl_name(int type)
{
	switch (type) {
	case ACL_TYPE_ACCESS:
		return XATTR_NAME_POSIX_ACL_ACCESS;
	case ACL_TYPE_DEFAULT:
		return XATTR_NAME_POSIX_ACL_DEFAULT;
	}
	return NULL;
}

struct posix_acl *rdfs_get_acl(struct inode *inode, int type, bool rcu)
{
	struct rdfs_dev_xattr x = { .size = RDFS_ACL_MAX_SIZE };
	const char *name = rdfs_acl_name(type);
	struct rdfs_dev_call c;
	struct posix_acl *acl;
	void *buf;
	int err;

	if (rcu)
		return ERR_PTR(-ECHILD);	/* the helper cannot be asked without sleeping */
	if (!name)
		return ERR_PTR(-EINVAL);
	buf = kmalloc(RDFS_ACL_MAX_SIZE, GFP_KERNEL);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	rdfs_call_init(&c, RDFS_DEV_GETXATTR, inode->i_ino, 0);
	rdfs_call_arg(&c, &x, sizeof(x));
	rdfs_call_arg(&c, name, strlen(name) + 1);
	c.out = buf;
	c.out_size = RDFS_ACL_MAX_SIZE;
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (err == -ENODATA)
		acl = NULL;
	else if (err == -ERANGE)
		acl = ERR_PTR(-E2BIG);
	else if (err)
		acl = ERR_PTR(err);
	else
		acl = posix_acl_from_xattr(&init_user_ns, buf, c.out_len);
	kfree(buf);
	return acl;
}

int rdfs_set_acl(struct user_namespace *ns, struct inode *inode, struct posix_acl *acl, int type)
{
	const char *name = rdfs_acl_name(type);
	struct rdfs_dev_xattr x = {};
	struct rdfs_dev_call c;
	void *buf = NULL;
	int err;

	if (!name)
		return -EINVAL;
	if (acl) {
		x.size = posix_acl_xattr_size(acl->a_count);
		if (x.size > RDFS_ACL_MAX_SIZE)
			return -E2BIG;
		buf = kmalloc(x.size, GFP_KERNEL);
		if (!buf)
			return -ENOMEM;
		err = posix_acl_to_xattr(&init_user_ns, acl, buf, x.size);
		if (err < 0)
			goto out;
		rdfs_call_init(&c, RDFS_DEV_SETXATTR, inode->i_ino, 0);
		rdfs_call_arg(&c, &x, sizeof(x));
		rdfs_call_arg(&c, name, strlen(name) + 1);
		rdfs_call_arg(&c, buf, x.size);
	} else {
		rdfs_call_init(&c, RDFS_DEV_REMOVEXATTR, inode->i_ino, 0);
		rdfs_call_arg(&c, name, strlen(name) + 1);
	}
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	/*
	 * Whatever came of it, ask again: the metaserver drops an ACL the mode
	 * says as well, and an access ACL changes the mode.
	 */
	forget_cached_acl(inode, type);
	if (!err && type == ACL_TYPE_ACCESS)
		err = rdfs_revalidate_attr(inode, true);
out:
	kfree(buf);
	return err;
}
