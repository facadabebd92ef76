// SPDX-License-Identifier: MIT
/*
 * meta.c - namespace operations: thin wrappers of the metaserver's RPCs that
 * turn Attr into struct stat and keep this client's view of open files'
 * sizes in step.
 */
#include <errno.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"

static const struct rdfs_cred root_cred;

void cred_to_pb(const struct rdfs_cred *cr, Rdfs__Cred *pb)
{
	rdfs__cred__init(pb);
	if (!cr)
		cr = &root_cred;
	pb->uid = cr->uid;
	pb->gid = cr->gid;
	pb->n_groups = cr->ngroups > RDFS_MAX_GROUPS ? RDFS_MAX_GROUPS : cr->ngroups;
	pb->groups = (uint32_t *)cr->groups;
}

static void ns_to_timespec(int64_t ns, struct timespec *ts)
{
	int64_t s = ns / 1000000000LL, rem = ns % 1000000000LL;

	if (rem < 0) {
		rem += 1000000000LL;
		s--;
	}
	ts->tv_sec = s;
	ts->tv_nsec = rem;
}

void attr_to_stat(const Rdfs__Attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	if (!a)
		return;
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = a->size;
	st->st_blocks = a->blocks * (RDFS_BLOCK_SIZE / 512);
	st->st_blksize = a->chunk_size ? a->chunk_size : RDFS_BLOCK_SIZE;
	st->st_rdev = a->rdev;
	ns_to_timespec(a->atime_ns, &st->st_atim);
	ns_to_timespec(a->mtime_ns, &st->st_mtim);
	ns_to_timespec(a->ctime_ns, &st->st_ctim);
}

void attr_note(struct rdfs_client *c, const Rdfs__Attr *a, uint64_t then, struct stat *st)
{
	struct rdfs_inode *in;
	struct stat tmp;

	if (!st)
		st = &tmp;
	attr_to_stat(a, st);
	if (!a || !S_ISREG(a->mode))
		return;
	in = inode_find(&c->itab, a->ino);
	if (!in)
		return;
	pthread_mutex_lock(&in->lock);
	/* answered before a size this client settled since: ours is newer */
	if (!inode_note_ms_size(in, a->size, then))
		st->st_size = in->ms_size;
	if (a->chunk_size)
		in->chunk_size = a->chunk_size;
	/* our own uncommitted writes count, as they would on a local file system */
	if (in->dirty && in->pending_size > (uint64_t)st->st_size)
		st->st_size = in->pending_size;
	if (in->wb_end > (uint64_t)st->st_size)
		st->st_size = in->wb_end;
	if (in->dirty && in->mtime_ns) {
		ns_to_timespec(in->mtime_ns, &st->st_mtim);
		st->st_ctim = st->st_mtim;
	}
	pthread_mutex_unlock(&in->lock);
	inode_put(&c->itab, in);
}

static int entry_call(struct rdfs_client *c, uint16_t op, const ProtobufCMessage *req,
		      unsigned int flags, struct stat *st)
{
	Rdfs__EntryReply *rep = NULL;
	uint64_t then = size_clock_now(c);
	int ret;

	ret = ms_call(c, op, req, &rdfs__entry_reply__descriptor, &rep, flags);
	if (ret)
		return ret;
	if (!rep->attr) {
		ret = -EPROTO;
	} else {
		attr_note(c, rep->attr, then, st);
		dir_attr_note(c, rep->parent_attr);
	}
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return ret;
}

/* UNLINK, RMDIR, RENAME: the reply names the directories as they are now. */
static int dir_change_call(struct rdfs_client *c, uint16_t op, const ProtobufCMessage *req)
{
	Rdfs__DirChangeReply *rep = NULL;
	int ret;

	ret = ms_call(c, op, req, &rdfs__dir_change_reply__descriptor, &rep, 0);
	if (ret)
		return ret;
	dir_attr_note(c, rep->parent_attr);
	dir_attr_note(c, rep->newparent_attr);
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return 0;
}

int name_check(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return -ENOENT;
	if (len > RDFS_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

int rdfs_lookup(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
		const char *name, struct stat *st)
{
	Rdfs__LookupReq req = RDFS__LOOKUP_REQ__INIT;
	Rdfs__Cred cred;
	int ret = name_check(name);

	if (ret)
		return ret;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.parent = parent;
	req.name = (char *)name;
	return entry_call(c, RDFS_OP_LOOKUP, &req.base, MS_IDEMPOTENT, st);
}

int rdfs_getattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino, struct stat *st)
{
	Rdfs__GetattrReq req = RDFS__GETATTR_REQ__INIT;
	Rdfs__AttrReply *rep = NULL;
	Rdfs__Cred cred;
	uint64_t then;
	int ret;

	if (dir_attr_take(c, ino, st))
		return 0;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.ino = ino;
	then = size_clock_now(c);
	ret = ms_call(c, RDFS_OP_GETATTR, &req.base, &rdfs__attr_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	if (ret)
		return ret;
	if (!rep->attr)
		ret = -EPROTO;
	else
		attr_note(c, rep->attr, then, st);
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return ret;
}

int rdfs_mknod(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
	       const char *name, mode_t mode, dev_t rdev, struct stat *st)
{
	Rdfs__MknodReq req = RDFS__MKNOD_REQ__INIT;
	Rdfs__Cred cred;
	int ret = name_check(name);

	if (ret)
		return ret;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.parent = parent;
	req.name = (char *)name;
	req.mode = mode;
	req.umask = cr ? cr->umask : 0;
	req.rdev = rdev;
	req.exclusive = 1;
	return entry_call(c, RDFS_OP_MKNOD, &req.base, 0, st);
}

int rdfs_mkdir(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
	       const char *name, mode_t mode, struct stat *st)
{
	Rdfs__MkdirReq req = RDFS__MKDIR_REQ__INIT;
	Rdfs__Cred cred;
	int ret = name_check(name);

	if (ret)
		return ret;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.parent = parent;
	req.name = (char *)name;
	req.mode = mode;
	req.umask = cr ? cr->umask : 0;
	return entry_call(c, RDFS_OP_MKDIR, &req.base, 0, st);
}

static int unlink_call(struct rdfs_client *c, uint16_t op, const struct rdfs_cred *cr,
		       uint64_t parent, const char *name)
{
	Rdfs__UnlinkReq req = RDFS__UNLINK_REQ__INIT;
	Rdfs__Cred cred;
	int ret = name_check(name);

	if (ret)
		return ret;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.parent = parent;
	req.name = (char *)name;
	return dir_change_call(c, op, &req.base);
}

int rdfs_unlink(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
		const char *name)
{
	return unlink_call(c, RDFS_OP_UNLINK, cr, parent, name);
}

int rdfs_rmdir(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
	       const char *name)
{
	return unlink_call(c, RDFS_OP_RMDIR, cr, parent, name);
}

int rdfs_rename(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
		const char *name, uint64_t newparent, const char *newname, unsigned int flags)
{
	Rdfs__RenameReq req = RDFS__RENAME_REQ__INIT;
	Rdfs__Cred cred;
	int ret = name_check(name);

	if (!ret)
		ret = name_check(newname);
	if (ret)
		return ret;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.parent = parent;
	req.name = (char *)name;
	req.newparent = newparent;
	req.newname = (char *)newname;
	req.flags = flags;
	/* a directory that moved has a new ctime: what is kept of it is old now */
	dir_attr_forget(c, 0);
	return dir_change_call(c, RDFS_OP_RENAME, &req.base);
}

int rdfs_link(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
	      uint64_t newparent, const char *newname, struct stat *st)
{
	Rdfs__LinkReq req = RDFS__LINK_REQ__INIT;
	Rdfs__Cred cred;
	int ret = name_check(newname);

	if (ret)
		return ret;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.ino = ino;
	req.newparent = newparent;
	req.newname = (char *)newname;
	return entry_call(c, RDFS_OP_LINK, &req.base, 0, st);
}

int rdfs_symlink(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
		 const char *name, const char *target, struct stat *st)
{
	Rdfs__SymlinkReq req = RDFS__SYMLINK_REQ__INIT;
	Rdfs__Cred cred;
	int ret = name_check(name);

	if (ret)
		return ret;
	if (strlen(target) > RDFS_SYMLINK_MAX)
		return -ENAMETOOLONG;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.parent = parent;
	req.name = (char *)name;
	req.target = (char *)target;
	return entry_call(c, RDFS_OP_SYMLINK, &req.base, 0, st);
}

int rdfs_readlink(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		  char *buf, size_t size)
{
	Rdfs__ReadlinkReq req = RDFS__READLINK_REQ__INIT;
	Rdfs__ReadlinkReply *rep = NULL;
	Rdfs__Cred cred;
	size_t len;
	int ret;

	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.ino = ino;
	ret = ms_call(c, RDFS_OP_READLINK, &req.base, &rdfs__readlink_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	if (ret)
		return ret;
	len = strlen(rep->target);
	if (size > 0) {
		size_t n = len < size - 1 ? len : size - 1;

		memcpy(buf, rep->target, n);
		buf[n] = '\0';
	}
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return (int)len;
}

int rdfs_statfs(struct rdfs_client *c, const struct rdfs_cred *cr, struct statvfs *st)
{
	Rdfs__StatfsReq req = RDFS__STATFS_REQ__INIT;
	Rdfs__StatfsReply *rep = NULL;
	Rdfs__Cred cred;
	int ret;

	cred_to_pb(cr, &cred);
	req.cred = &cred;
	ret = ms_call(c, RDFS_OP_STATFS, &req.base, &rdfs__statfs_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	if (ret)
		return ret;
	memset(st, 0, sizeof(*st));
	st->f_bsize = rep->block_size ? rep->block_size : RDFS_BLOCK_SIZE;
	st->f_frsize = st->f_bsize;
	st->f_blocks = rep->total_blocks;
	st->f_bfree = rep->free_blocks;
	st->f_bavail = rep->free_blocks;
	/* StatfsReply.files counts the inodes in use; statvfs wants the total */
	st->f_files = rep->files + rep->free_files;
	st->f_ffree = rep->free_files;
	st->f_favail = rep->free_files;
	st->f_namemax = rep->name_max ? rep->name_max : RDFS_NAME_MAX;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return 0;
}
