// SPDX-License-Identifier: GPL-2.0
/*
 * inode.c - inode and dentry operations: every namespace change goes through
 * the helper; attributes and names are cached for attr_timeout/entry_timeout.
 */
#include <linux/namei.h>
#include <linux/pagemap.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <linux/slab.h>
#include <linux/xattr.h>

#include "rdfs.h"

static struct timespec64 rdfs_ns_to_ts(s64 ns)
{
	return ns_to_timespec64(ns);
}

void rdfs_attr_apply(struct inode *inode, const struct rdfs_dev_attr *a)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct timespec64 ctime;
	bool dirty;

	inode->i_mode = a->mode;
	set_nlink(inode, a->nlink);
	inode->i_uid = make_kuid(&init_user_ns, a->uid);
	inode->i_gid = make_kgid(&init_user_ns, a->gid);
	inode->i_atime = rdfs_ns_to_ts(a->atime_ns);
	ctime = rdfs_ns_to_ts(a->ctime_ns);
	/* an ACL set elsewhere moved the ctime: ask again at the next check */
	if (!timespec64_equal(&ctime, &inode->i_ctime))
		forget_all_cached_acls(inode);
	inode->i_ctime = ctime;
	inode->i_blocks = a->blocks;
	spin_lock(&ri->lock);
	dirty = ri->dirty_end != 0 || !list_empty(&ri->wr_files);
	spin_unlock(&ri->lock);
	dirty |= mapping_tagged(inode->i_mapping, PAGECACHE_TAG_DIRTY) ||
		 mapping_tagged(inode->i_mapping, PAGECACHE_TAG_WRITEBACK);
	ri->ms_mtime = rdfs_ns_to_ts(a->mtime_ns);
	/* our uncommitted writes are newer than what the metaserver says */
	if (!dirty) {
		struct timespec64 mtime = ri->ms_mtime;

		/* changed elsewhere: drop what we cached (close-to-open) */
		if (S_ISREG(inode->i_mode) &&
		    (a->size != i_size_read(inode) || !timespec64_equal(&mtime, &inode->i_mtime))) {
			rdfs_layout_forget(inode);
			if (inode->i_mapping->nrpages)
				invalidate_inode_pages2(inode->i_mapping);
		}
		i_size_write(inode, a->size);
		inode->i_mtime = mtime;
	} else if (a->size > i_size_read(inode)) {
		i_size_write(inode, a->size);
	}
	ri->attr_time = jiffies;
}

static struct inode *rdfs_iget_cond(struct super_block *sb, const struct rdfs_dev_attr *a,
				    bool apply_cached)
{
	struct inode *inode = iget_locked(sb, a->ino);

	if (!inode)
		return ERR_PTR(-ENOMEM);
	if (!(inode->i_state & I_NEW)) {
		if (apply_cached)
			rdfs_attr_apply(inode, a);
		return inode;
	}
	inode->i_mode = a->mode;
	i_size_write(inode, a->size);
	inode->i_mtime = rdfs_ns_to_ts(a->mtime_ns);
	switch (a->mode & S_IFMT) {
	case S_IFREG:
		inode->i_op = &rdfs_file_iops;
		inode->i_fop = &rdfs_file_fops;
		inode->i_mapping->a_ops = &rdfs_aops;
		break;
	case S_IFDIR:
		inode->i_op = &rdfs_dir_iops;
		inode->i_fop = &rdfs_dir_fops;
		break;
	case S_IFLNK:
		inode->i_op = &rdfs_symlink_iops;
		inode_nohighmem(inode);
		break;
	default:
		inode->i_op = &rdfs_file_iops;
		init_special_inode(inode, a->mode, new_decode_dev(a->rdev));
		break;
	}
	rdfs_attr_apply(inode, a);
	unlock_new_inode(inode);
	return inode;
}

struct inode *rdfs_iget(struct super_block *sb, const struct rdfs_dev_attr *a)
{
	return rdfs_iget_cond(sb, a, true);
}

struct inode *rdfs_iget_keep(struct super_block *sb, const struct rdfs_dev_attr *a)
{
	return rdfs_iget_cond(sb, a, false);
}

int rdfs_revalidate_attr(struct inode *inode, bool force)
{
	struct rdfs_sb_info *sbi = RDFS_SB(inode->i_sb);
	struct rdfs_dev_attr a;
	struct rdfs_dev_call c;
	int err;

	if (!force && time_before(jiffies, RDFS_I(inode)->attr_time + sbi->attr_timeout))
		return 0;
	rdfs_call_init(&c, RDFS_DEV_GETATTR, inode->i_ino, 0);
	c.out = &a;
	c.out_size = sizeof(a);
	err = rdfs_call(sbi->chan, &c);
	if (err)
		return err;
	if (c.out_len < sizeof(a))
		return -EIO;
	if ((a.mode ^ inode->i_mode) & S_IFMT)
		return -ESTALE;
	rdfs_attr_apply(inode, &a);
	return 0;
}

/* A call on @dir that names @dentry and answers with the new entry's attributes. */
static int rdfs_entry_call(struct inode *dir, struct dentry *dentry, struct rdfs_dev_call *c,
			   struct rdfs_dev_attr *a)
{
	c->out = a;
	c->out_size = sizeof(*a);
	return rdfs_call(RDFS_SB(dir->i_sb)->chan, c);
}

static int rdfs_instantiate(struct inode *dir, struct dentry *dentry,
			    const struct rdfs_dev_attr *a)
{
	struct inode *inode = rdfs_iget(dir->i_sb, a);

	if (IS_ERR(inode))
		return PTR_ERR(inode);
	d_instantiate(dentry, inode);
	dentry->d_time = jiffies;
	RDFS_I(dir)->attr_time = 0;	/* mtime and nlink changed */
	return 0;
}

static struct dentry *rdfs_lookup(struct inode *dir, struct dentry *dentry, unsigned int flags)
{
	struct rdfs_dev_attr a;
	struct rdfs_dev_call c;
	struct inode *inode = NULL;
	int err;

	if (dentry->d_name.len > NAME_MAX)
		return ERR_PTR(-ENAMETOOLONG);
	set_bit(RDFS_I_NAMES_USED, &RDFS_I(dir)->flags);
	atomic64_inc(&rdfs_stats.lookups);
	rdfs_call_init(&c, RDFS_DEV_LOOKUP, dir->i_ino, 0);
	rdfs_call_arg(&c, dentry->d_name.name, dentry->d_name.len + 1);
	err = rdfs_entry_call(dir, dentry, &c, &a);
	if (err && err != -ENOENT)
		return ERR_PTR(err);
	if (!err) {
		if (c.out_len < sizeof(a))
			return ERR_PTR(-EIO);
		inode = rdfs_iget(dir->i_sb, &a);
		if (IS_ERR(inode))
			return ERR_CAST(inode);
	}
	dentry->d_time = jiffies;
	return d_splice_alias(inode, dentry);
}

static int rdfs_mknod_call(struct inode *dir, struct dentry *dentry, u16 op, umode_t mode,
			   dev_t rdev, const char *target)
{
	struct rdfs_dev_mknod m = { .mode = mode, .rdev = new_encode_dev(rdev) };
	struct rdfs_dev_attr a;
	struct rdfs_dev_call c;
	int err;

	/* with ACLs the umask is the metaserver's to apply, or to ignore */
	if (op != RDFS_DEV_SYMLINK && IS_POSIXACL(dir))
		m.umask = current_umask();
	else if (op != RDFS_DEV_SYMLINK)
		m.mode &= ~current_umask();
	rdfs_call_init(&c, op, dir->i_ino, 0);
	if (op != RDFS_DEV_SYMLINK)
		rdfs_call_arg(&c, &m, sizeof(m));
	rdfs_call_arg(&c, dentry->d_name.name, dentry->d_name.len + 1);
	if (target)
		rdfs_call_arg(&c, target, strlen(target) + 1);
	err = rdfs_entry_call(dir, dentry, &c, &a);
	if (err)
		return err;
	if (c.out_len < sizeof(a))
		return -EIO;
	return rdfs_instantiate(dir, dentry, &a);
}

static int rdfs_create(struct user_namespace *ns, struct inode *dir, struct dentry *dentry,
		       umode_t mode, bool excl)
{
	return rdfs_mknod_call(dir, dentry, RDFS_DEV_CREATE, mode | S_IFREG, 0, NULL);
}

/*
 * open(O_CREAT) of a name not known to exist: one call creates and opens it
 * (the metaserver's MKNOD with open), where lookup, create and open would be
 * three. Without O_EXCL, a create that fails because the name exists (another
 * client made it) or may not be made here (opening an existing file needs no
 * write access to the directory) is looked up, and an existing file is left
 * to the usual open.
 */
static int rdfs_atomic_open(struct inode *dir, struct dentry *dentry, struct file *file,
			    unsigned int open_flags, umode_t mode)
{
	struct rdfs_dev_mknod m = {
		.mode = (mode & ~S_IFMT) | S_IFREG,
		.flags = open_flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC),
	};
	struct rdfs_dev_open_reply rep;
	struct rdfs_open_file *of;
	struct dentry *found = NULL;
	struct rdfs_dev_call c;
	struct inode *inode;
	int err = 0;

	if (dentry->d_name.len > NAME_MAX)
		return -ENAMETOOLONG;
	if (!(open_flags & O_CREAT) || d_really_is_positive(dentry))
		goto lookup;
	if (IS_POSIXACL(dir))
		m.umask = current_umask();
	else
		m.mode &= ~current_umask();
	of = rdfs_open_file_new();
	if (!of)
		return -ENOMEM;
	rdfs_call_init(&c, RDFS_DEV_CREATE_OPEN, dir->i_ino, 0);
	rdfs_call_arg(&c, &m, sizeof(m));
	rdfs_call_arg(&c, dentry->d_name.name, dentry->d_name.len + 1);
	c.out = &rep;
	c.out_size = sizeof(rep);
	err = rdfs_call(RDFS_SB(dir->i_sb)->chan, &c);
	if (!err && c.out_len < sizeof(rep))
		err = -EIO;
	if (err) {
		rdfs_open_file_free(of);
		if (open_flags & O_EXCL || err == -ENAMETOOLONG)
			return err;
		goto lookup;
	}
	RDFS_I(dir)->attr_time = 0;	/* mtime and nlink changed */
	inode = rdfs_iget(dir->i_sb, &rep.attr);
	if (IS_ERR(inode)) {
		err = PTR_ERR(inode);
		goto release;
	}
	dentry->d_time = jiffies;
	if (d_in_lookup(dentry)) {
		found = d_splice_alias(inode, dentry);
		if (IS_ERR(found)) {
			err = PTR_ERR(found);
			goto release;
		}
		if (found)
			dentry = found;
	} else {
		d_instantiate(dentry, inode);
	}
	file->f_mode |= FMODE_CREATED;
	err = finish_open(file, dentry, generic_file_open);
	dput(found);
	if (err)
		goto release;
	rdfs_file_attach(d_inode(dentry), file, of, rep.handle);
	return 0;

release:
	rdfs_open_file_free(of);
	rdfs_call_init(&c, RDFS_DEV_RELEASE, rep.attr.ino, rep.handle);
	rdfs_call(RDFS_SB(dir->i_sb)->chan, &c);
	return err;

lookup:
	if (d_in_lookup(dentry)) {
		found = rdfs_lookup(dir, dentry, 0);
		if (IS_ERR(found))
			return PTR_ERR(found);
		if (found)
			dentry = found;
	}
	if ((open_flags & O_CREAT) && d_really_is_negative(dentry)) {
		/* the create failed and nothing is there: its error stands */
		dput(found);
		return err ? err : -ENOENT;
	}
	return finish_no_open(file, found);
}

static int rdfs_mknod(struct user_namespace *ns, struct inode *dir, struct dentry *dentry,
		      umode_t mode, dev_t rdev)
{
	return rdfs_mknod_call(dir, dentry, RDFS_DEV_MKNOD, mode, rdev, NULL);
}

static int rdfs_mkdir(struct user_namespace *ns, struct inode *dir, struct dentry *dentry,
		      umode_t mode)
{
	return rdfs_mknod_call(dir, dentry, RDFS_DEV_MKDIR, mode | S_IFDIR, 0, NULL);
}

static int rdfs_symlink(struct user_namespace *ns, struct inode *dir, struct dentry *dentry,
			const char *target)
{
	return rdfs_mknod_call(dir, dentry, RDFS_DEV_SYMLINK, S_IFLNK | 0777, 0, target);
}

static int rdfs_remove(struct inode *dir, struct dentry *dentry, u16 op)
{
	struct inode *inode = d_inode(dentry);
	struct rdfs_dev_call c;
	int err;

	rdfs_call_init(&c, op, dir->i_ino, 0);
	rdfs_call_arg(&c, dentry->d_name.name, dentry->d_name.len + 1);
	err = rdfs_call(RDFS_SB(dir->i_sb)->chan, &c);
	if (err)
		return err;
	if (op == RDFS_DEV_RMDIR)
		clear_nlink(inode);
	else
		drop_nlink(inode);
	RDFS_I(inode)->attr_time = 0;
	RDFS_I(dir)->attr_time = 0;
	return 0;
}

static int rdfs_unlink(struct inode *dir, struct dentry *dentry)
{
	return rdfs_remove(dir, dentry, RDFS_DEV_UNLINK);
}

static int rdfs_rmdir(struct inode *dir, struct dentry *dentry)
{
	return rdfs_remove(dir, dentry, RDFS_DEV_RMDIR);
}

static int rdfs_rename(struct user_namespace *ns, struct inode *olddir, struct dentry *old,
		       struct inode *newdir, struct dentry *new, unsigned int flags)
{
	struct rdfs_dev_rename r = { .newparent = newdir->i_ino, .flags = flags };
	struct rdfs_dev_call c;
	int err;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	rdfs_call_init(&c, RDFS_DEV_RENAME, olddir->i_ino, 0);
	rdfs_call_arg(&c, &r, sizeof(r));
	rdfs_call_arg(&c, old->d_name.name, old->d_name.len + 1);
	rdfs_call_arg(&c, new->d_name.name, new->d_name.len + 1);
	err = rdfs_call(RDFS_SB(olddir->i_sb)->chan, &c);
	if (err)
		return err;
	if (d_really_is_positive(new) && !(flags & RENAME_EXCHANGE)) {
		if (S_ISDIR(d_inode(new)->i_mode))
			clear_nlink(d_inode(new));
		else
			drop_nlink(d_inode(new));
	}
	RDFS_I(olddir)->attr_time = 0;
	RDFS_I(newdir)->attr_time = 0;
	RDFS_I(d_inode(old))->attr_time = 0;
	return 0;
}

static int rdfs_link(struct dentry *old, struct inode *dir, struct dentry *new)
{
	struct rdfs_dev_rename r = { .newparent = dir->i_ino };
	struct inode *inode = d_inode(old);
	struct rdfs_dev_attr a;
	struct rdfs_dev_call c;
	int err;

	rdfs_call_init(&c, RDFS_DEV_LINK, inode->i_ino, 0);
	rdfs_call_arg(&c, &r, sizeof(r));
	rdfs_call_arg(&c, new->d_name.name, new->d_name.len + 1);
	err = rdfs_entry_call(dir, new, &c, &a);
	if (err)
		return err;
	if (c.out_len < sizeof(a))
		return -EIO;
	rdfs_attr_apply(inode, &a);
	ihold(inode);
	d_instantiate(new, inode);
	new->d_time = jiffies;
	RDFS_I(dir)->attr_time = 0;
	return 0;
}

/*
 * This client wrote the file since the metaserver last described it: its
 * size is ours, but blocks (and the mtime the commit set) are the
 * metaserver's, so ask again rather than trust the cache (as FUSE drops its
 * attributes after a write).
 */
static bool rdfs_written_since_attr(struct inode *inode)
{
	return S_ISREG(inode->i_mode) &&
	       !timespec64_equal(&inode->i_mtime, &RDFS_I(inode)->ms_mtime);
}

static int rdfs_getattr(struct user_namespace *ns, const struct path *path,
			struct kstat *stat, u32 mask, unsigned int flags)
{
	struct inode *inode = d_inode(path->dentry);
	int err;

	if ((flags & AT_STATX_FORCE_SYNC) || rdfs_written_since_attr(inode))
		err = rdfs_revalidate_attr(inode, true);
	else if (flags & AT_STATX_DONT_SYNC)
		err = 0;
	else
		err = rdfs_revalidate_attr(inode, false);
	if (err)
		return err;
	generic_fillattr(ns, inode, stat);
	return 0;
}

static int rdfs_setattr(struct user_namespace *ns, struct dentry *dentry, struct iattr *ia)
{
	struct inode *inode = d_inode(dentry);
	struct rdfs_dev_setattr s = {};
	struct rdfs_dev_attr a;
	struct rdfs_dev_call c;
	u64 handle = 0;
	int err;

	err = setattr_prepare(ns, dentry, ia);
	if (err)
		return err;
	if (ia->ia_valid & ATTR_MODE) {
		s.valid |= 1;
		s.mode = ia->ia_mode;
	}
	if (ia->ia_valid & ATTR_UID) {
		s.valid |= 2;
		s.uid = from_kuid(&init_user_ns, ia->ia_uid);
	}
	if (ia->ia_valid & ATTR_GID) {
		s.valid |= 4;
		s.gid = from_kgid(&init_user_ns, ia->ia_gid);
	}
	if (ia->ia_valid & ATTR_SIZE) {
		/* our dirty pages must reach the servers and the metaserver first */
		err = filemap_write_and_wait(inode->i_mapping);
		if (err)
			return err;
		handle = rdfs_wb_handle(inode);
		if (handle) {
			err = rdfs_commit(inode, handle);
			if (err)
				return err;
		}
		s.valid |= 8;
		s.size = ia->ia_size;
	}
	if (ia->ia_valid & ATTR_ATIME) {
		s.valid |= (ia->ia_valid & ATTR_ATIME_SET) ? 16 : 64;
		s.atime_ns = timespec64_to_ns(&ia->ia_atime);
	}
	if (ia->ia_valid & ATTR_MTIME) {
		s.valid |= (ia->ia_valid & ATTR_MTIME_SET) ? 32 : 128;
		s.mtime_ns = timespec64_to_ns(&ia->ia_mtime);
	}
	if (!s.valid)
		return 0;
	rdfs_call_init(&c, RDFS_DEV_SETATTR, inode->i_ino, handle);
	/*
	 * A write or truncate by someone who is not the owner clears the set-ID
	 * bits (ATTR_FORCE: the VFS checked the caller may write), which the
	 * metaserver lets only the owner or root do: ask as root, as rdfs-fuse does.
	 */
	if ((ia->ia_valid & ATTR_FORCE) && (ia->ia_valid & ATTR_MODE) &&
	    (ia->ia_valid & (ATTR_KILL_SUID | ATTR_KILL_SGID))) {
		c.req.uid = 0;
		c.req.gid = 0;
		c.req.ngroups = 0;
	}
	rdfs_call_arg(&c, &s, sizeof(s));
	c.out = &a;
	c.out_size = sizeof(a);
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (err)
		return err;
	if (c.out_len < sizeof(a))
		return -EIO;
	/* the metaserver rewrote the access ACL's mask, owner and other entries */
	if (ia->ia_valid & ATTR_MODE)
		forget_all_cached_acls(inode);
	if (ia->ia_valid & ATTR_SIZE) {
		rdfs_layout_forget(inode);
		truncate_setsize(inode, ia->ia_size);
		i_size_write(inode, a.size);
	}
	rdfs_attr_apply(inode, &a);
	/* the helper may still report this client's last write time */
	if (ia->ia_valid & ATTR_MTIME_SET)
		inode->i_mtime = ia->ia_mtime;
	if (ia->ia_valid & ATTR_ATIME_SET)
		inode->i_atime = ia->ia_atime;
	return 0;
}

static const char *rdfs_get_link(struct dentry *dentry, struct inode *inode,
				 struct delayed_call *done)
{
	struct rdfs_dev_call c;
	char *target;
	int err;

	if (!dentry)
		return ERR_PTR(-ECHILD);
	target = kmalloc(PATH_MAX, GFP_KERNEL);
	if (!target)
		return ERR_PTR(-ENOMEM);
	rdfs_call_init(&c, RDFS_DEV_READLINK, inode->i_ino, 0);
	c.out = target;
	c.out_size = PATH_MAX - 1;
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (err) {
		kfree(target);
		return ERR_PTR(err);
	}
	target[c.out_len] = '\0';
	set_delayed_call(done, kfree_link, target);
	return target;
}

/* A name is trusted for entry_timeout, then looked up again. */
static int rdfs_d_revalidate(struct dentry *dentry, unsigned int flags)
{
	struct rdfs_sb_info *sbi = RDFS_SB(dentry->d_sb);
	struct inode *dir, *inode;
	struct rdfs_dev_attr a;
	struct rdfs_dev_call c;
	struct dentry *parent;
	int err;

	if (time_before(jiffies, dentry->d_time + sbi->entry_timeout)) {
		/* dentries and inodes are freed after a grace period */
		rcu_read_lock();
		dir = d_inode_rcu(READ_ONCE(dentry->d_parent));
		if (dir && !test_bit(RDFS_I_NAMES_USED, &RDFS_I(dir)->flags))
			set_bit(RDFS_I_NAMES_USED, &RDFS_I(dir)->flags);
		rcu_read_unlock();
		return 1;
	}
	if (flags & LOOKUP_RCU)
		return -ECHILD;
	parent = dget_parent(dentry);
	dir = d_inode(parent);
	inode = d_inode(dentry);
	set_bit(RDFS_I_NAMES_USED, &RDFS_I(dir)->flags);
	atomic64_inc(&rdfs_stats.lookups);
	rdfs_call_init(&c, RDFS_DEV_LOOKUP, dir->i_ino, 0);
	rdfs_call_arg(&c, dentry->d_name.name, dentry->d_name.len + 1);
	c.out = &a;
	c.out_size = sizeof(a);
	err = rdfs_call(sbi->chan, &c);
	dput(parent);
	if (err == -ENOENT)
		return !inode ? 1 : 0;
	if (err)
		return err;
	if (!inode || a.ino != inode->i_ino || ((a.mode ^ inode->i_mode) & S_IFMT))
		return 0;
	rdfs_attr_apply(inode, &a);
	dentry->d_time = jiffies;
	return 1;
}

const struct dentry_operations rdfs_dentry_ops = {
	.d_revalidate	= rdfs_d_revalidate,
};

static int rdfs_xattr_get(const struct xattr_handler *h, struct dentry *dentry,
			  struct inode *inode, const char *name, void *buf, size_t size)
{
	struct rdfs_dev_xattr x = { .size = size };
	struct rdfs_dev_call c;
	int err;

	name = xattr_full_name(h, name);
	rdfs_call_init(&c, RDFS_DEV_GETXATTR, inode->i_ino, 0);
	rdfs_call_arg(&c, &x, sizeof(x));
	rdfs_call_arg(&c, name, strlen(name) + 1);
	c.out = buf;
	c.out_size = size;
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (err)
		return err;
	return size ? c.out_len : c.val;
}

static int rdfs_xattr_set(const struct xattr_handler *h, struct user_namespace *ns,
			  struct dentry *dentry, struct inode *inode, const char *name,
			  const void *value, size_t size, int flags)
{
	struct rdfs_dev_xattr x = { .size = size, .flags = flags };
	struct rdfs_dev_call c;

	name = xattr_full_name(h, name);
	if (!value) {
		rdfs_call_init(&c, RDFS_DEV_REMOVEXATTR, inode->i_ino, 0);
		rdfs_call_arg(&c, name, strlen(name) + 1);
	} else {
		rdfs_call_init(&c, RDFS_DEV_SETXATTR, inode->i_ino, 0);
		rdfs_call_arg(&c, &x, sizeof(x));
		rdfs_call_arg(&c, name, strlen(name) + 1);
		rdfs_call_arg(&c, value, size);
	}
	return rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
}

static ssize_t rdfs_listxattr(struct dentry *dentry, char *buf, size_t size)
{
	struct inode *inode = d_inode(dentry);
	struct rdfs_dev_xattr x = { .size = size };
	struct rdfs_dev_call c;
	int err;

	rdfs_call_init(&c, RDFS_DEV_LISTXATTR, inode->i_ino, 0);
	rdfs_call_arg(&c, &x, sizeof(x));
	c.out = buf;
	c.out_size = size;
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (err)
		return err;
	return size ? c.out_len : c.val;
}

/*
 * user.* and trusted.* names go to the metaserver whole, and so do
 * rdfs.copies (the number of copies of a file, a directory's default) and
 * rdfs.project (its quota project id; the metaserver checks who may set them). system.posix_acl_* go through the VFS's
 * handlers to acl.c. Other security.* and system.* names get EOPNOTSUPP as
 * in rdfs-fuse (no labels), which also spares every write(2) a helper round
 * trip for security.capability.
 */
static const struct xattr_handler rdfs_xattr_user_handler = {
	.prefix	= XATTR_USER_PREFIX,
	.get	= rdfs_xattr_get,
	.set	= rdfs_xattr_set,
};

static const struct xattr_handler rdfs_xattr_trusted_handler = {
	.prefix	= XATTR_TRUSTED_PREFIX,
	.get	= rdfs_xattr_get,
	.set	= rdfs_xattr_set,
};

static const struct xattr_handler rdfs_xattr_copies_handler = {
	.name	= RDFS_COPIES_XATTR,
	.get	= rdfs_xattr_get,
	.set	= rdfs_xattr_set,
};

static const struct xattr_handler rdfs_xattr_project_handler = {
	.name	= RDFS_PROJECT_XATTR,
	.get	= rdfs_xattr_get,
	.set	= rdfs_xattr_set,
};

const struct xattr_handler *rdfs_xattr_handlers[] = {
#ifdef CONFIG_FS_POSIX_ACL
	&posix_acl_access_xattr_handler,
	&posix_acl_default_xattr_handler,
#endif
	&rdfs_xattr_user_handler,
	&rdfs_xattr_trusted_handler,
	&rdfs_xattr_copies_handler,
	&rdfs_xattr_project_handler,
	NULL
};

const struct inode_operations rdfs_dir_iops = {
	.lookup		= rdfs_lookup,
	.create		= rdfs_create,
	.atomic_open	= rdfs_atomic_open,
	.mknod		= rdfs_mknod,
	.mkdir		= rdfs_mkdir,
	.symlink	= rdfs_symlink,
	.unlink		= rdfs_unlink,
	.rmdir		= rdfs_rmdir,
	.rename		= rdfs_rename,
	.link		= rdfs_link,
	.getattr	= rdfs_getattr,
	.setattr	= rdfs_setattr,
	.listxattr	= rdfs_listxattr,
	.get_acl	= rdfs_get_acl,
	.set_acl	= rdfs_set_acl,
};

const struct inode_operations rdfs_file_iops = {
	.getattr	= rdfs_getattr,
	.setattr	= rdfs_setattr,
	.listxattr	= rdfs_listxattr,
	.get_acl	= rdfs_get_acl,
	.set_acl	= rdfs_set_acl,
};

const struct inode_operations rdfs_symlink_iops = {
	.get_link	= rdfs_get_link,
	.getattr	= rdfs_getattr,
	.setattr	= rdfs_setattr,
	.listxattr	= rdfs_listxattr,
};
