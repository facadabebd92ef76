// SPDX-License-Identifier: MIT
/*
 * ops.c - the FUSE low-level operations of rdfs-fuse: each one is a thin call
 * into the client core (lib/client) and ends in exactly one fuse_reply_*().
 *
 * Inode numbers are rdfs inode numbers (the root is 1 = FUSE_ROOT_ID) and the
 * metaserver owns every inode, so there is no inode table here: lookup counts
 * need no bookkeeping and forget is a no-op. An open file's fi->fh is its
 * struct rdfs_file (and FH_DIRECT_WRITES), an open directory's fi->fh its
 * struct rdfs_dir.
 *
 * The client core returns -errno; the reply carries errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "fuse_metrics.h"
#include "groups_cache.h"
#include "log.h"
#include "rdfs_fuse.h"
#include "session_loop.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE	(1 << 0)
#define RENAME_EXCHANGE		(1 << 1)
#endif

static struct rdfs_fuse *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/*
 * Set in an open file's fi->fh (a struct rdfs_file is aligned, so bit 0 is
 * free) when its writes bypass the page cache (FOPEN_DIRECT_IO): the kernel
 * then leaves clearing set-ID bits on write to us (see kill_setid_bits()).
 */
#define FH_DIRECT_WRITES	((uint64_t)1)

static struct rdfs_file *fi_file(const struct fuse_file_info *fi)
{
	return (struct rdfs_file *)(uintptr_t)(fi->fh & ~FH_DIRECT_WRITES);
}

static struct rdfs_dir *fi_dir(const struct fuse_file_info *fi)
{
	return (struct rdfs_dir *)(uintptr_t)fi->fh;
}

/*
 * The caller's credentials. FUSE requests carry only uid and gid; the
 * supplementary groups come from /proc (groups_cache.c, remembered for
 * groups_timeout), which fails when the caller has already exited - then it
 * gets no extra groups, which can only deny, never grant, access.
 */
static void req_cred(fuse_req_t req, struct rdfs_cred *cr)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int n;

	cr->uid = ctx->uid;
	cr->gid = ctx->gid;
	/*
	 * Set on MKNOD, MKDIR and CREATE (0 otherwise). With FUSE_POSIX_ACL the
	 * kernel leaves it to us (FUSE_DONT_MASK): the metaserver applies it
	 * unless the parent has a default ACL. Without, the mode comes masked
	 * already and applying it again changes nothing.
	 */
	cr->umask = ctx->umask;
	n = groups_cache_get(req, cr->groups, RDFS_MAX_GROUPS);
	cr->ngroups = n;
}

/*
 * A file this client has open for writing may have grown (or shrunk) past
 * what the metaserver knows until the next commit; report the client's view so
 * the kernel never trims its own cached size to a stale one.
 */
static void merge_pending_size(struct rdfs_fuse *fs, struct stat *st)
{
	uint64_t size;

	if (S_ISREG(st->st_mode) && rdfs_pending_size(fs->client, st->st_ino, &size) == 0)
		st->st_size = size;
	if (st->st_blksize == 0)
		st->st_blksize = fs->max_io;
}

/* Every error reply goes through here, to be counted by its errno (fuse_metrics.h). */
static int reply_err(fuse_req_t req, int err)
{
	fuse_metrics_error(err);
	return fuse_reply_err(req, err);
}

static void reply_status(fuse_req_t req, int ret)
{
	reply_err(req, ret < 0 ? -ret : 0);
}

static void reply_entry(fuse_req_t req, int ret, struct stat *st)
{
	struct rdfs_fuse *fs = req_fs(req);
	struct fuse_entry_param e;

	if (ret < 0) {
		reply_err(req, -ret);
		return;
	}
	merge_pending_size(fs, st);
	memset(&e, 0, sizeof(e));
	e.ino = st->st_ino;
	e.attr = *st;
	e.attr_timeout = fs->attr_timeout;
	e.entry_timeout = fs->entry_timeout;
	fuse_reply_entry(req, &e);
}

static void reply_attr(fuse_req_t req, int ret, struct stat *st)
{
	struct rdfs_fuse *fs = req_fs(req);

	if (ret < 0) {
		reply_err(req, -ret);
		return;
	}
	merge_pending_size(fs, st);
	fuse_reply_attr(req, st, fs->attr_timeout);
}

/* ---------------------------------------------------------------- session */

static void rdfs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct rdfs_fuse *fs = userdata;

	/* Large requests: one FUSE READ/WRITE becomes one striped client call. */
	conn->max_write = fs->max_io;
	/* Must equal the max_read mount option main.c passes, or libfuse aborts. */
	conn->max_read = fs->max_read;

	/* Several reads of one file in flight: the client core serves them in parallel. */
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	/* Lookups and creates in one directory need not be serialized by the kernel. */
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* The page cache is dropped on open (close-to-open), not on every mtime change seen. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* O_TRUNC travels with OPEN (rdfs_open truncates), saving a SETATTR round trip. */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * Splice (-o splice, off by default): READ replies go out with
	 * vmsplice + splice instead of writev. The kernel still copies from the
	 * pipe into its page cache (it no longer steals spliced pages), so this
	 * saves no copy; it is kept as an option for measuring that. WRITE
	 * requests are never spliced: the data must be in our memory to be sent
	 * to the I/O servers, so splicing them would add the pipe, not save a copy.
	 */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	if (fs->splice && (conn->capable & FUSE_CAP_SPLICE_WRITE))
		conn->want |= FUSE_CAP_SPLICE_WRITE | (conn->capable & FUSE_CAP_SPLICE_MOVE);
	/*
	 * The kernel clears set-user-ID/set-group-ID bits on write with a SETATTR;
	 * the metaserver does not do it by itself on COMMIT.
	 */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/*
	 * The kernel's writeback cache only on request: with it the kernel
	 * trusts its own size over ours for as long as it caches the inode, so
	 * a truncate by another client would go unseen (see rdfs_op_open).
	 */
	if (fs->writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/*
	 * Readdirplus: a listing's pages come with every entry's attributes,
	 * so `ls -l` or find -type costs no LOOKUP per name. AUTO: the kernel
	 * asks for it on a directory's first page and then only where lookups
	 * followed the listing; the metaserver reads attributes only then.
	 */
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS |
			      (conn->capable & FUSE_CAP_READDIRPLUS_AUTO);
	fs->readdirplus = !!(conn->want & FUSE_CAP_READDIRPLUS);
	/*
	 * POSIX ACLs: the kernel checks them with default_permissions, caches
	 * them per inode (forgetting them on its own setxattr and chmod), and
	 * with FUSE_DONT_MASK sends a create's mode unmasked with the umask,
	 * because a default ACL replaces the umask and only the metaserver
	 * knows whether the parent has one. FUSE_POSIX_ACL turns
	 * default_permissions on in the kernel, so not with
	 * no_default_permissions: then the ACL xattrs pass through unchecked
	 * here and the metaserver alone enforces them.
	 */
	if (fs->acl && fs->default_permissions && (conn->capable & FUSE_CAP_POSIX_ACL))
		conn->want |= FUSE_CAP_POSIX_ACL | (conn->capable & FUSE_CAP_DONT_MASK);
	else
		conn->want &= ~(FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK);
	/* Enough background requests to keep both readahead and O_DIRECT pipelines full. */
	if (conn->max_background < 64)
		conn->max_background = 64;
	if (conn->congestion_threshold < 48)
		conn->congestion_threshold = 48;

	log_info(1300007,
		 "connected to the kernel: max_write %u, max_read %u, max_readahead %u, acl %s",
		 conn->max_write, conn->max_read, conn->max_readahead,
		 (conn->want & FUSE_CAP_POSIX_ACL) ? "on" : fs->acl ? "passed through" : "off");
}

/* ---------------------------------------------------------------- namespace */

static void rdfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rdfs_cred cr;
	struct stat st;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_lookup(req_fs(req)->client, &cr, parent, name, &st);
	if (ret == -ENOENT && req_fs(req)->entry_timeout > 0) {
		/*
		 * A negative entry, cached as long as a positive one: a name
		 * another client creates meanwhile is seen as late as a name it
		 * removes would be; our own creates replace it at once.
		 */
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		e.entry_timeout = req_fs(req)->entry_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry(req, ret, &st);
}

static void rdfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fuse_reply_none(req);
}

static void rdfs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	fuse_reply_none(req);
}

static void rdfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rdfs_cred cr;
	struct stat st;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_getattr(req_fs(req)->client, &cr, ino, &st);
	reply_attr(req, ret, &st);
}

/*
 * Writing to, truncating or chowning a set-user-ID or set-group-ID file makes
 * the kernel clear those bits with a SETATTR of the mode, on behalf of whoever
 * wrote: someone who needs write permission, not ownership, so the metaserver's
 * chmod rule (owner or root) refuses it. With default_permissions the kernel
 * has already refused every chmod(2) by a non-owner, so a mode change that
 * reaches us from a non-owner and only clears those bits is that privilege
 * drop; it is done with root's credentials. Returns 1 when it did it (with
 * *@st the new attributes), 0 when @attr is not such a drop, or -errno.
 */
static int drop_privileges_as_root(struct rdfs_fuse *fs, const struct rdfs_cred *cr,
				   fuse_ino_t ino, const struct stat *attr,
				   struct rdfs_file *f, struct stat *st)
{
	const mode_t kill = S_ISUID | S_ISGID;
	struct rdfs_cred root;
	struct stat cur;
	int ret;

	if (!fs->default_permissions || cr->uid == 0)
		return 0;
	ret = rdfs_getattr(fs->client, cr, ino, &cur);
	if (ret < 0)
		return ret;
	if (cur.st_uid == cr->uid)
		return 0;		/* the owner's own chmod: the normal rules apply */
	if ((attr->st_mode & 07777 & ~kill) != (cur.st_mode & 07777 & ~kill) ||
	    (attr->st_mode & kill & ~cur.st_mode) ||
	    (attr->st_mode & kill) == (cur.st_mode & kill))
		return 0;		/* not only clearing set-ID bits */
	memset(&root, 0, sizeof(root));
	ret = rdfs_setattr(fs->client, &root, ino, attr, RDFS_SET_MODE, f, st);
	return ret < 0 ? ret : 1;
}

static void rdfs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			    struct fuse_file_info *fi)
{
	static const struct {
		int fuse;
		unsigned int rdfs;
	} bits[] = {
		{ FUSE_SET_ATTR_MODE, RDFS_SET_MODE },
		{ FUSE_SET_ATTR_UID, RDFS_SET_UID },
		{ FUSE_SET_ATTR_GID, RDFS_SET_GID },
		{ FUSE_SET_ATTR_SIZE, RDFS_SET_SIZE },
		{ FUSE_SET_ATTR_ATIME, RDFS_SET_ATIME },
		{ FUSE_SET_ATTR_MTIME, RDFS_SET_MTIME },
		{ FUSE_SET_ATTR_ATIME_NOW, RDFS_SET_ATIME_NOW },
		{ FUSE_SET_ATTR_MTIME_NOW, RDFS_SET_MTIME_NOW },
		{ FUSE_SET_ATTR_CTIME, RDFS_SET_CTIME },
	};
	struct rdfs_fuse *fs = req_fs(req);
	struct rdfs_file *f = fi ? fi_file(fi) : NULL;
	struct rdfs_cred cr;
	struct stat st;
	unsigned int valid = 0;
	int ret;

	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
		if (to_set & bits[i].fuse)
			valid |= bits[i].rdfs;
	req_cred(req, &cr);
	if (valid & RDFS_SET_MODE) {
		ret = drop_privileges_as_root(fs, &cr, ino, attr, f, &st);
		if (ret != 0)
			valid &= ~RDFS_SET_MODE;
		if (ret < 0 || !(valid & ~RDFS_SET_CTIME)) {
			reply_attr(req, ret, &st);
			return;
		}
	}
	/*
	 * Under the writeback cache the kernel publishes the mtime of the writes
	 * it cached with an explicit-time SETATTR on the writer's handle, with
	 * the writer's credentials; explicit times are the owner's to set, but a
	 * handle open for writing may move them as its writes would.
	 */
	if (fs->writeback_cache && f && (valid & RDFS_SET_MTIME) &&
	    !(valid & ~(RDFS_SET_MTIME | RDFS_SET_CTIME)) &&
	    (rdfs_file_flags(f) & O_ACCMODE) != O_RDONLY)
		memset(&cr, 0, sizeof(cr));
	ret = rdfs_setattr(fs->client, &cr, ino, attr, valid, f, &st);
	reply_attr(req, ret, &st);
}

static void rdfs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char target[PATH_MAX + 1];
	struct rdfs_cred cr;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_readlink(req_fs(req)->client, &cr, ino, target, sizeof(target));
	if (ret < 0)
		reply_err(req, -ret);
	else
		fuse_reply_readlink(req, target);
}

static void rdfs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			  dev_t rdev)
{
	struct rdfs_cred cr;
	struct stat st;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_mknod(req_fs(req)->client, &cr, parent, name, mode, rdev, &st);
	reply_entry(req, ret, &st);
}

static void rdfs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct rdfs_cred cr;
	struct stat st;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_mkdir(req_fs(req)->client, &cr, parent, name, (mode & 07777) | S_IFDIR, &st);
	reply_entry(req, ret, &st);
}

static void rdfs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rdfs_cred cr;

	req_cred(req, &cr);
	reply_status(req, rdfs_unlink(req_fs(req)->client, &cr, parent, name));
}

static void rdfs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rdfs_cred cr;

	req_cred(req, &cr);
	reply_status(req, rdfs_rmdir(req_fs(req)->client, &cr, parent, name));
}

static void rdfs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
			    const char *name)
{
	struct rdfs_cred cr;
	struct stat st;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_symlink(req_fs(req)->client, &cr, parent, name, target, &st);
	reply_entry(req, ret, &st);
}

static void rdfs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			   fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct rdfs_cred cr;

	/* RENAME_WHITEOUT is for overlay file systems' upper layers only. */
	if (flags & ~(unsigned int)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		reply_err(req, EINVAL);
		return;
	}
	req_cred(req, &cr);
	reply_status(req, rdfs_rename(req_fs(req)->client, &cr, parent, name, newparent,
				      newname, flags));
}

static void rdfs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
			 const char *newname)
{
	struct rdfs_cred cr;
	struct stat st;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_link(req_fs(req)->client, &cr, ino, newparent, newname, &st);
	reply_entry(req, ret, &st);
}

static void rdfs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct rdfs_cred cr;
	struct statvfs st;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_statfs(req_fs(req)->client, &cr, &st);
	if (ret < 0)
		reply_err(req, -ret);
	else
		fuse_reply_statfs(req, &st);
}

/* ---------------------------------------------------------------- xattrs */

/*
 * Only the user. and trusted. namespaces are stored, and the POSIX ACLs
 * (system.posix_acl_access, system.posix_acl_default), which the metaserver
 * enforces, unless the mount says noacl. Other security.* and system.* names
 * (file capabilities, SELinux labels) mean something the kernel would enforce
 * and rdfs does not implement, so storing them would pretend otherwise.
 * Refusing them here also spares a metaserver round trip per write(2): before
 * every write the kernel asks for security.capability to decide whether to
 * clear privileges. rdfs.copies and rdfs.project are the metaserver's own
 * (the copies of a file's chunks, its quota project id), not stored as xattrs.
 */
static int xattr_supported(const struct rdfs_fuse *fs, const char *name)
{
	if (strcmp(name, "system.posix_acl_access") == 0 ||
	    strcmp(name, "system.posix_acl_default") == 0)
		return fs->acl;
	return strncmp(name, "user.", 5) == 0 || strncmp(name, "trusted.", 8) == 0 ||
	       strcmp(name, RDFS_COPIES_XATTR) == 0 || strcmp(name, RDFS_PROJECT_XATTR) == 0;
}

static void rdfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			     const char *value, size_t size, int flags)
{
	struct rdfs_cred cr;

	if (!xattr_supported(req_fs(req), name)) {
		reply_err(req, EOPNOTSUPP);
		return;
	}

	req_cred(req, &cr);
	reply_status(req, rdfs_setxattr(req_fs(req)->client, &cr, ino, name, value, size, flags));
}

/* getxattr and listxattr: size 0 asks for the needed size, else for the bytes. */
static void reply_xattr(fuse_req_t req, int ret, const void *buf, size_t size)
{
	if (ret < 0)
		reply_err(req, -ret);
	else if (size == 0)
		fuse_reply_xattr(req, ret);
	else
		fuse_reply_buf(req, buf, ret);
}

static void rdfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct rdfs_cred cr;
	void *buf = NULL;
	int ret;

	if (!xattr_supported(req_fs(req), name)) {
		reply_err(req, EOPNOTSUPP);
		return;
	}
	if (size && !(buf = malloc(size))) {
		reply_err(req, ENOMEM);
		return;
	}
	req_cred(req, &cr);
	ret = rdfs_getxattr(req_fs(req)->client, &cr, ino, name, buf, size);
	reply_xattr(req, ret, buf, size);
	free(buf);
}

static void rdfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct rdfs_cred cr;
	char *buf = NULL;
	int ret;

	if (size && !(buf = malloc(size))) {
		reply_err(req, ENOMEM);
		return;
	}
	req_cred(req, &cr);
	ret = rdfs_listxattr(req_fs(req)->client, &cr, ino, buf, size);
	reply_xattr(req, ret, buf, size);
	free(buf);
}

static void rdfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct rdfs_cred cr;

	if (!xattr_supported(req_fs(req), name)) {
		reply_err(req, EOPNOTSUPP);
		return;
	}

	req_cred(req, &cr);
	reply_status(req, rdfs_removexattr(req_fs(req)->client, &cr, ino, name));
}

/* ---------------------------------------------------------------- directories */

static void rdfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rdfs_dir *d;
	struct rdfs_cred cr;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_opendir_flags(req_fs(req)->client, &cr, ino,
				 req_fs(req)->readdirplus ? RDFS_DIR_PLUS : 0, &d);
	if (ret < 0) {
		reply_err(req, -ret);
		return;
	}
	fi->fh = (uintptr_t)d;
	if (fuse_reply_open(req, fi) < 0)
		rdfs_closedir(d);	/* opendir(3) was interrupted: no releasedir follows */
}

/*
 * The stream the kernel sees is ".", "..", then the entries of the rdfs_dir:
 * position p holds "." (0), ".." (1) or rdfs entry p - 2, and each dirent
 * carries the position after it as its offset. These are stable indexes into
 * the rdfs_dir, so telldir/seekdir work across calls. READDIRPLUS entries
 * also carry the attributes the page came with, as a LOOKUP would.
 */
static void dir_list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi, int plus)
{
	struct rdfs_fuse *fs = req_fs(req);
	struct rdfs_dir *d = fi_dir(fi);
	struct rdfs_dirent ent;
	size_t used = 0;
	char *buf;
	int ret = 0;

	buf = malloc(size);
	if (!buf) {
		reply_err(req, ENOMEM);
		return;
	}
	rdfs_dir_set_plus(d, plus);
	for (uint64_t pos = off < 0 ? 0 : off;; pos++) {
		struct fuse_entry_param e;
		const char *name;
		size_t len;

		memset(&e, 0, sizeof(e));
		if (pos < 2) {
			name = pos == 0 ? "." : "..";
			e.attr.st_ino = ino;
			e.attr.st_mode = S_IFDIR;
		} else {
			ret = rdfs_readdir_at(d, pos - 2, &ent);
			if (ret <= 0)
				break;
			name = ent.name;
			e.attr.st_ino = ent.ino;
			e.attr.st_mode = ent.type;
			if (plus && ent.has_attr) {
				/* as a LOOKUP would answer it; e.ino 0: the kernel looks up */
				e.attr = ent.st;
				merge_pending_size(fs, &e.attr);
				e.ino = ent.ino;
				e.attr_timeout = fs->attr_timeout;
				e.entry_timeout = fs->entry_timeout;
			}
		}
		if (plus)
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, pos + 1);
		else
			len = fuse_add_direntry(req, buf + used, size - used, name, &e.attr,
						pos + 1);
		if (len > size - used)
			break;		/* full: the kernel asks again from pos */
		used += len;
	}
	/* An error after some entries: return those; the next call meets it again. */
	if (ret < 0 && used == 0)
		reply_err(req, -ret);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void rdfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			    struct fuse_file_info *fi)
{
	dir_list(req, ino, size, off, fi, 0);
}

static void rdfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
				struct fuse_file_info *fi)
{
	dir_list(req, ino, size, off, fi, 1);
}

static void rdfs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	rdfs_closedir(fi_dir(fi));
	reply_err(req, 0);
}

/* Every metaserver mutation is durable before it is acknowledged. */
static void rdfs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			     struct fuse_file_info *fi)
{
	reply_err(req, 0);
}

/* ---------------------------------------------------------------- files */

/*
 * direct_writes: nothing reads a write-only open's pages, so caching them only
 * costs the writer a copy per byte into the page cache (and its page
 * allocation); with FOPEN_DIRECT_IO the kernel hands us the writer's own
 * buffer instead. Not under the writeback cache, whose point is gathering
 * writes in pages, nor for a file with set-ID bits: the kernel clears those
 * itself only on cached writes.
 */
static int direct_write_open(const struct rdfs_fuse *fs, int flags, const struct stat *st)
{
	return fs->direct_writes && !fs->writeback_cache && (flags & O_ACCMODE) == O_WRONLY &&
	       S_ISREG(st->st_mode) && !(st->st_mode & (S_ISUID | S_ISGID));
}

/*
 * Settings of a newly opened file (@st: its attributes). keep_cache stays 0:
 * the kernel drops the file's cached pages at every open, which is what
 * close-to-open needs.
 */
static void set_open_flags(struct rdfs_fuse *fs, struct fuse_file_info *fi,
			   struct rdfs_file *f, const struct stat *st)
{
	fi->fh = (uintptr_t)f;
	fi->keep_cache = 0;
	if (fs->direct_io || direct_write_open(fs, fi->flags, st))
		fi->direct_io = 1;
	if (fi->direct_io && (fi->flags & O_ACCMODE) != O_RDONLY)
		fi->fh |= FH_DIRECT_WRITES;
}

/*
 * Under the writeback cache the kernel appends by itself (at the size it
 * knows) and reads pages to fill partly written ones even for files opened
 * write-only: O_APPEND must not move its writes again, and a write-only open
 * is made read-write where the caller may read.
 */
static int open_flags(const struct rdfs_fuse *fs, int flags)
{
	if (!fs->writeback_cache)
		return flags;
	flags &= ~O_APPEND;
	if ((flags & O_ACCMODE) == O_WRONLY)
		flags = (flags & ~O_ACCMODE) | O_RDWR;
	return flags;
}

static void rdfs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			   struct fuse_file_info *fi)
{
	struct rdfs_fuse *fs = req_fs(req);
	struct fuse_entry_param e;
	struct rdfs_file *f;
	struct rdfs_cred cr;
	struct stat st;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_create(fs->client, &cr, parent, name, mode, open_flags(fs, fi->flags), &st, &f);
	if (ret == -EACCES && open_flags(fs, fi->flags) != fi->flags)
		ret = rdfs_create(fs->client, &cr, parent, name, mode, fi->flags & ~O_APPEND,
				  &st, &f);
	if (ret < 0) {
		reply_err(req, -ret);
		return;
	}
	set_open_flags(fs, fi, f, &st);
	merge_pending_size(fs, &st);
	memset(&e, 0, sizeof(e));
	e.ino = st.st_ino;
	e.attr = st;
	e.attr_timeout = fs->attr_timeout;
	e.entry_timeout = fs->entry_timeout;
	if (fuse_reply_create(req, &e, fi) < 0)
		rdfs_release(f);	/* open(2) was interrupted: no release follows */
}

static void rdfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rdfs_fuse *fs = req_fs(req);
	struct rdfs_file *f;
	struct rdfs_cred cr;
	struct stat st;
	int ret;

	req_cred(req, &cr);
	ret = rdfs_open(fs->client, &cr, ino, open_flags(fs, fi->flags), &st, &f);
	if (ret == -EACCES && open_flags(fs, fi->flags) != fi->flags)
		ret = rdfs_open(fs->client, &cr, ino, fi->flags & ~O_APPEND, &st, &f);
	if (ret < 0) {
		reply_err(req, -ret);
		return;
	}
	set_open_flags(fs, fi, f, &st);
	/*
	 * Close-to-open: the kernel keeps serving the size it cached at lookup
	 * for up to attr_timeout, so data another client committed before this
	 * open would be cut off at the old end of file. Expire the cached
	 * attributes; the first read past that end or stat() then asks again.
	 */
	fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	/*
	 * With the writeback cache the kernel ignores the size in attributes
	 * while it caches the inode; storing the file's last byte into its page
	 * cache raises its size to what another client committed (it never
	 * lowers it: a truncate elsewhere stays unseen, see --help).
	 */
	if (fs->writeback_cache && S_ISREG(st.st_mode) && st.st_size > 0) {
		struct fuse_bufvec last = FUSE_BUFVEC_INIT(1);
		uint8_t byte;

		last.buf[0].mem = &byte;
		if (rdfs_pread(f, &byte, 1, st.st_size - 1) == 1)
			fuse_lowlevel_notify_store(fs->se, ino, st.st_size - 1, &last, 0);
	}
	if (fuse_reply_open(req, fi) < 0)
		rdfs_release(f);
}

/* fuse_reply_data() of memory buffers: vmsplice + splice when the kernel took SPLICE_WRITE. */
static void reply_spliced(fuse_req_t req, const struct iovec *iov, int niov)
{
	struct fuse_bufvec *bv = calloc(1, sizeof(*bv) + niov * sizeof(bv->buf[0]));

	if (!bv) {
		fuse_reply_iov(req, iov, niov);
		return;
	}
	bv->count = niov;
	for (int i = 0; i < niov; i++) {
		bv->buf[i].mem = iov[i].iov_base;
		bv->buf[i].size = iov[i].iov_len;
	}
	fuse_reply_data(req, bv, FUSE_BUF_SPLICE_MOVE);
	free(bv);
}

/*
 * The reply is gathered straight from the buffers the I/O servers' replies
 * were received in (and a zero buffer for holes): one copy fewer than
 * rdfs_pread() into a buffer of our own.
 */
static void rdfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	struct rdfs_read_buf *rb = NULL;
	const struct iovec *iov;
	int niov;
	ssize_t n;

	n = rdfs_pread_iov(fi_file(fi), size, off, &rb, &iov, &niov);
	if (n > 0)
		fuse_metrics_read_bytes((uint64_t)n);
	if (n < 0)
		reply_err(req, (int)-n);
	else if (n == 0)
		fuse_reply_buf(req, NULL, 0);
	else if (req_fs(req)->splice)
		reply_spliced(req, iov, niov);
	else
		fuse_reply_iov(req, iov, niov);
	rdfs_read_buf_free(rb);
}

/*
 * The request's buffer is lent to write-behind when it can send it as it is
 * (a whole chunk), instead of copying it; the session loop then reads the
 * next request into a new buffer.
 */
static ssize_t write_from_request(struct rdfs_file *f, const char *buf, size_t size, off_t off)
{
	struct rdfs_lend lend = { .release = free };
	ssize_t n;

	lend.arg = session_loop_request_buffer(buf, size);
	if (!lend.arg)
		return rdfs_pwrite(f, buf, size, off);
	n = rdfs_pwrite_lend(f, buf, size, off, &lend);
	if (lend.kept)
		session_loop_buffer_given();
	return n;
}

static void rdfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
			  off_t off, struct fuse_file_info *fi)
{
	ssize_t n;

	/*
	 * A write that bypasses the page cache leaves pages other opens of the
	 * file cache here stale: drop them first. First, not after: a page
	 * dirtied through a shared mapping is written back by the drop, and it
	 * must land before these bytes, not over them. That write-back comes to
	 * us as a write of its own (writepage, through any writable open): it
	 * must not drop pages, its own page is locked until we answer.
	 */
	if ((fi->fh & FH_DIRECT_WRITES) && !fi->writepage)
		fuse_lowlevel_notify_inval_inode(req_fs(req)->se, ino, off, (off_t)size);
	n = write_from_request(fi_file(fi), buf, size, off);
	if (n < 0) {
		reply_err(req, (int)-n);
	} else {
		fuse_metrics_write_bytes((uint64_t)n);
		fuse_reply_write(req, n);
	}
}

/*
 * A write by an unprivileged process clears the file's set-user-ID bit, and
 * its set-group-ID bit if it is group-executable (the kernel's
 * should_remove_suid()). For writes that bypass the page cache the kernel
 * asks the server to do it with a WRITE flag that libfuse 3.14 does not pass
 * on, so it is done here when the writer closes. A direct_writes open only
 * starts on a file without those bits, so that finds bits set while it was
 * open; with direct_io, any.
 */
static int kill_setid_bits(struct rdfs_fuse *fs, fuse_req_t req, fuse_ino_t ino,
			   struct rdfs_file *f)
{
	struct rdfs_cred cr, root;
	struct stat cur, attr, st;
	mode_t kill;
	int ret;

	req_cred(req, &cr);
	if (cr.uid == 0 || !rdfs_file_written(f))
		return 0;
	ret = rdfs_getattr(fs->client, &cr, ino, &cur);
	if (ret < 0)
		return ret;
	kill = cur.st_mode & S_ISUID;
	if ((cur.st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		kill |= S_ISGID;
	if (!kill)
		return 0;
	memset(&attr, 0, sizeof(attr));
	attr.st_mode = cur.st_mode & ~kill;
	memset(&root, 0, sizeof(root));
	ret = rdfs_setattr(fs->client, &root, ino, &attr, RDFS_SET_MODE, f, &st);
	return ret < 0 ? ret : 0;
}

static void rdfs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int ret = rdfs_flush(fi_file(fi));

	if (ret == 0 && (fi->fh & FH_DIRECT_WRITES))
		ret = kill_setid_bits(req_fs(req), req, ino, fi_file(fi));
	reply_status(req, ret);
}

static void rdfs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
			  struct fuse_file_info *fi)
{
	reply_status(req, rdfs_fsync(fi_file(fi), datasync));
}

static void rdfs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
			      off_t length, struct fuse_file_info *fi)
{
	if (offset < 0 || length <= 0) {
		reply_status(req, -EINVAL);
		return;
	}
	reply_status(req, rdfs_fallocate(fi_file(fi), mode, (uint64_t)offset, (uint64_t)length));
}

static void rdfs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
				    struct fuse_file_info *fi_in, fuse_ino_t ino_out,
				    off_t off_out, struct fuse_file_info *fi_out, size_t len,
				    int flags)
{
	int64_t n;

	if (flags) {
		reply_status(req, -EINVAL);
		return;
	}
	if (off_in < 0 || off_out < 0) {
		reply_status(req, -EINVAL);
		return;
	}
	n = rdfs_copy_range(fi_file(fi_in), (uint64_t)off_in, fi_file(fi_out), (uint64_t)off_out,
			    len);
	if (n < 0)
		reply_status(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void rdfs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
			  struct fuse_file_info *fi)
{
	int64_t ret;

	if (off < 0) {
		reply_status(req, -ENXIO);
		return;
	}
	ret = rdfs_seek_data(fi_file(fi), (uint64_t)off, whence);
	if (ret < 0)
		reply_status(req, (int)ret);
	else
		fuse_reply_lseek(req, (off_t)ret);
}

static void rdfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	reply_status(req, rdfs_release(fi_file(fi)));
}

const struct fuse_lowlevel_ops rdfs_fuse_ops = {
	.init		= rdfs_op_init,
	.lookup		= rdfs_op_lookup,
	.forget		= rdfs_op_forget,
	.forget_multi	= rdfs_op_forget_multi,
	.getattr	= rdfs_op_getattr,
	.setattr	= rdfs_op_setattr,
	.readlink	= rdfs_op_readlink,
	.mknod		= rdfs_op_mknod,
	.mkdir		= rdfs_op_mkdir,
	.unlink		= rdfs_op_unlink,
	.rmdir		= rdfs_op_rmdir,
	.symlink	= rdfs_op_symlink,
	.rename		= rdfs_op_rename,
	.link		= rdfs_op_link,
	.open		= rdfs_op_open,
	.read		= rdfs_op_read,
	.write		= rdfs_op_write,
	.flush		= rdfs_op_flush,
	.release	= rdfs_op_release,
	.fsync		= rdfs_op_fsync,
	.fallocate	= rdfs_op_fallocate,
	.copy_file_range = rdfs_op_copy_file_range,
	.lseek		= rdfs_op_lseek,
	.opendir	= rdfs_op_opendir,
	.readdir	= rdfs_op_readdir,
	.readdirplus	= rdfs_op_readdirplus,
	.releasedir	= rdfs_op_releasedir,
	.fsyncdir	= rdfs_op_fsyncdir,
	.statfs		= rdfs_op_statfs,
	.setxattr	= rdfs_op_setxattr,
	.getxattr	= rdfs_op_getxattr,
	.listxattr	= rdfs_op_listxattr,
	.removexattr	= rdfs_op_removexattr,
	.create		= rdfs_op_create,
};
