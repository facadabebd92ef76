// SPDX-License-Identifier: MIT
/*
 * ns_dir.c - directory operations: lookup, create (mknod, mkdir, symlink),
 * link, unlink, rmdir, readdir, readlink. Rename has its own file.
 *
 * Each mutation locks the parent and the entry's inode (see ms.h), checks
 * what Linux checks in the order Linux checks it (search permission, then
 * existence, then write permission, then sticky and type rules), and commits
 * one batch.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frame.h"
#include "log.h"
#include "ms_int.h"

/* Hard-link limit, as ext4's. */
#define MS_LINK_MAX	65000

int ns_lock_entry(struct ms *ms, uint64_t parent, const char *name, int parent_excl,
		  struct ms_lockset *ls, uint64_t *child)
{
	for (;;) {
		uint64_t c = 0, c2 = 0;
		uint32_t type = 0;
		int ret = ns_dirent_get(ms, parent, name, &c, &type);

		if (ret && ret != -ENOENT)
			return ret;
		lockset_init(ls);
		lockset_add_name(ls, parent, name);
		/* a directory entry's removal changes the parent's nlink */
		if (parent_excl || type == (S_IFDIR >> 12))
			lockset_add(ls, parent);
		else
			lockset_add_shared(ls, parent);
		lockset_add(ls, c);
		lockset_lock(&ms->locks, ls);
		ret = ns_dirent_get(ms, parent, name, &c2, &type);
		if (ret && ret != -ENOENT) {
			lockset_unlock(&ms->locks, ls);
			return ret;
		}
		if (c2 == c) {
			*child = c;
			return 0;
		}
		lockset_unlock(&ms->locks, ls);
	}
}

int ns_get_dir(struct ms *ms, uint64_t ino, struct ms_inode *dir)
{
	int ret = ns_inode_get(ms, ino, dir);

	if (ret)
		return ret;
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (dir->nlink == 0)
		return -ENOENT;
	return 0;
}

int ms_lookup(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name,
	      struct ms_attr *out)
{
	struct ms_inode dir, in;
	uint64_t ino;
	uint32_t type;
	int ret;

	if (strlen(name) > RDFS_NAME_MAX)
		return -ENAMETOOLONG;
	ret = ns_get_dir(ms, parent, &dir);
	if (ret)
		return ret;
	ret = perm_check(&dir, cr, MAY_EXEC);
	if (ret)
		return ret;
	if (strcmp(name, ".") == 0) {
		ino = parent;
	} else if (strcmp(name, "..") == 0) {
		ino = dir.parent ? dir.parent : MS_ROOT_INO;
	} else {
		ret = ns_check_name(name);
		if (ret)
			return ret;
		ret = ns_dirent_get(ms, parent, name, &ino, &type);
		if (ret)
			return ret;
	}
	ret = ns_inode_get(ms, ino, &in);
	if (ret)
		return ret;
	ns_attr_from_inode(&in, out);
	return 0;
}

static uint32_t pick_stripe_start(struct ms *ms, uint64_t ino)
{
	uint32_t ids[256];
	int n = registry_up_ids(&ms->reg, ids, 256);

	return n > 0 ? (uint32_t)(ino % (uint64_t)n) : 0;
}

/*
 * Load directory @parent into @dir and check that @cr may add @name to it.
 * -EEXIST, with the inode the name points to in *@existing, if it is taken.
 */
static int dir_may_add(struct ms *ms, const struct ms_cred *cr, uint64_t parent,
		       const char *name, struct ms_inode *dir, uint64_t *existing)
{
	uint64_t other;
	uint32_t type;
	int ret;

	ret = ns_get_dir(ms, parent, dir);
	if (ret)
		return ret;
	ret = perm_check(dir, cr, MAY_EXEC);
	if (ret)
		return ret;
	ret = ns_dirent_get(ms, parent, name, &other, &type);
	if (ret == 0) {
		*existing = other;
		return -EEXIST;
	}
	if (ret != -ENOENT)
		return ret;
	return perm_check(dir, cr, MAY_WRITE | MAY_EXEC);
}

/*
 * Create @name in @parent from template @tmpl (mode, rdev, target). The mode
 * loses @umask unless @parent has a default ACL, which the new inode inherits
 * instead (ns_acl_inherit). On -EEXIST *@existing is the inode the name points
 * to. With @open a handle of @s is opened on the new inode before the locks
 * are dropped.
 */
static int create_entry(struct ms *ms, const struct ms_cred *cr, uint64_t parent,
			const char *name, struct ms_inode *tmpl, uint32_t umask,
			struct ms_session *s, int open, uint32_t open_flags, uint64_t *handle,
			struct ms_attr *out, uint64_t *existing)
{
	struct ms_lockset ls;
	struct ms_inode dir;
	struct ms_batch mb;
	struct ms_qids ids;
	uint64_t ino;
	int64_t now;
	int ret;

	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		*existing = 0;
		return -EEXIST;
	}
	ret = ns_check_name(name);
	if (ret)
		return ret;
	ret = ns_alloc_ino(ms, &ino);
	if (ret)
		return ret;

	lockset_init(&ls);
	lockset_add_name(&ls, parent, name);
	if (S_ISDIR(tmpl->mode))
		lockset_add(&ls, parent);		/* nlink changes */
	else
		lockset_add_shared(&ls, parent);	/* only its times change */
	lockset_add(&ls, ino);
	lockset_lock(&ms->locks, &ls);
	ret = dir_may_add(ms, cr, parent, name, &dir, existing);
	if (ret)
		goto out;
	if (S_ISDIR(tmpl->mode) && dir.nlink >= MS_LINK_MAX) {
		ret = -EMLINK;
		goto out;
	}

	now = ns_now();
	tmpl->ino = ino;
	tmpl->uid = cr->uid;
	tmpl->gid = cr->gid;
	if (dir.mode & S_ISGID) {
		tmpl->gid = dir.gid;
		if (S_ISDIR(tmpl->mode))
			tmpl->mode |= S_ISGID;
	}
	/* A set-gid file for a group the creator is not in loses the bit (mode_strip_sgid). */
	if (!S_ISDIR(tmpl->mode) && (tmpl->mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) &&
	    cr->uid != 0 && !perm_in_group(cr, tmpl->gid))
		tmpl->mode &= ~(uint32_t)S_ISGID;
	tmpl->nlink = S_ISDIR(tmpl->mode) ? 2 : 1;
	tmpl->parent = S_ISDIR(tmpl->mode) ? parent : 0;
	tmpl->chunk_size = dir.chunk_size ? dir.chunk_size : ms->chunk_size;
	tmpl->stripe_start = pick_stripe_start(ms, ino);
	tmpl->copies = dir.copies;
	tmpl->atime_ns = tmpl->mtime_ns = tmpl->ctime_ns = now;
	/* project quotas as ext4's: a directory marked to inherit passes its id on */
	if (dir.flags & MS_INO_PROJINHERIT)
		tmpl->project = dir.project;

	dir.mtime_ns = dir.ctime_ns = now;
	if (S_ISDIR(tmpl->mode))
		dir.nlink++;

	ms_batch_init(&mb);
	/* one inode more for its owner, group and project: within their limits? */
	quota_ids_of(tmpl, &ids);
	ret = quota_reserve(ms, &mb, cr, &ids, 0, 1, 0, NULL);
	if (!ret)
		ret = ns_acl_inherit(ms, &dir, tmpl, umask, mb.b);
	if (ret) {
		ms_batch_destroy(ms, &mb);
		goto out;
	}
	/* the directory's stripe defaults (rdfs setstripe), after the ACL's flags are set */
	if (S_ISREG(tmpl->mode) || S_ISDIR(tmpl->mode)) {
		tmpl->stripe_count = dir.stripe_count;
		if (dir.flags & MS_INO_STRIPE_ID) {
			tmpl->stripe_start = dir.stripe_start;
			tmpl->flags |= MS_INO_STRIPE_ID;
		}
	}
	/* after ns_acl_inherit(), which sets the flags: and so does a subdirectory */
	if ((dir.flags & MS_INO_PROJINHERIT) && S_ISDIR(tmpl->mode))
		tmpl->flags |= MS_INO_PROJINHERIT;
	ns_inode_put(&mb, tmpl);
	ns_dirent_put(mb.b, parent, name, ino, tmpl->mode >> 12);
	ns_inode_put(&mb, &dir);
	ret = ns_write(ms, &mb);
	ms_batch_destroy(ms, &mb);
	if (ret)
		goto out;
	atomic_fetch_add(&ms->nfiles, 1);
	if (open) {
		*handle = handle_add(ms, s, ino, open_flags);
		if (!*handle)
			ret = -ENOMEM;
	}
	ns_attr_from_inode(tmpl, out);
out:
	lockset_unlock(&ms->locks, &ls);
	return ret;
}

int ms_mknod(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t parent,
	     const char *name, uint32_t mode, uint32_t umask, uint32_t rdev, int exclusive,
	     int open, uint32_t open_flags, struct ms_attr *out, uint64_t *handle)
{
	struct ms_inode *tmpl;
	uint32_t type = mode & S_IFMT;
	int ret;

	if (type == 0)
		type = S_IFREG;
	switch (type) {
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
		break;
	case S_IFCHR:
	case S_IFBLK:
		if (cr->uid != 0)
			return -EPERM;
		break;
	case S_IFDIR:
		return -EPERM;
	default:
		return -EINVAL;
	}
	if (open && (!s || !handle))
		return -EINVAL;
	tmpl = malloc(sizeof(*tmpl));
	if (!tmpl)
		return -ENOMEM;
	for (int attempt = 0; attempt < 16; attempt++) {
		uint64_t existing = 0;
		struct ms_attr a;

		memset(tmpl, 0, sizeof(*tmpl));
		tmpl->mode = type | (mode & 07777);
		tmpl->rdev = (type == S_IFCHR || type == S_IFBLK) ? rdev : 0;
		ret = create_entry(ms, cr, parent, name, tmpl, umask, s, open, open_flags, handle,
				   out, &existing);
		if (ret != -EEXIST || !open || exclusive || existing == 0)
			break;
		/* open(O_CREAT) of an existing name opens it */
		ret = ms_getattr(ms, existing, &a);
		if (ret == 0 && S_ISDIR(a.mode)) {
			ret = -EISDIR;
			break;
		}
		if (ret == 0)
			ret = ms_open_file(ms, s, cr, existing, open_flags, out, handle);
		if (ret != -ENOENT)
			break;
		/* unlinked meanwhile: create again */
	}
	free(tmpl);
	return ret;
}

int ms_mkdir(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name,
	     uint32_t mode, uint32_t umask, struct ms_attr *out)
{
	struct ms_inode *tmpl = calloc(1, sizeof(*tmpl));
	uint64_t existing;
	int ret;

	if (!tmpl)
		return -ENOMEM;
	tmpl->mode = S_IFDIR | (mode & 01777);
	ret = create_entry(ms, cr, parent, name, tmpl, umask, NULL, 0, 0, NULL, out, &existing);
	free(tmpl);
	return ret;
}

int ms_symlink(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name,
	       const char *target, struct ms_attr *out)
{
	size_t len = strlen(target);
	struct ms_inode *tmpl;
	uint64_t existing;
	int ret;

	if (len == 0)
		return -ENOENT;
	if (len > RDFS_SYMLINK_MAX)
		return -ENAMETOOLONG;
	tmpl = calloc(1, sizeof(*tmpl));
	if (!tmpl)
		return -ENOMEM;
	tmpl->mode = S_IFLNK | 0777;
	tmpl->size = len;
	tmpl->target_len = (uint32_t)len;
	memcpy(tmpl->target, target, len);
	ret = create_entry(ms, cr, parent, name, tmpl, 0, NULL, 0, 0, NULL, out, &existing);
	free(tmpl);
	return ret;
}

int ms_link(struct ms *ms, const struct ms_cred *cr, uint64_t ino, uint64_t newparent,
	    const char *newname, struct ms_attr *out)
{
	struct ms_lockset ls;
	struct ms_inode *in = NULL, dir;
	struct ms_batch mb;
	uint64_t other;
	int64_t now;
	int ret;

	if (strcmp(newname, ".") == 0 || strcmp(newname, "..") == 0)
		return -EEXIST;
	ret = ns_check_name(newname);
	if (ret)
		return ret;
	in = malloc(sizeof(*in));
	if (!in)
		return -ENOMEM;
	lockset_init(&ls);
	lockset_add_name(&ls, newparent, newname);
	lockset_add_shared(&ls, newparent);
	lockset_add(&ls, ino);
	lockset_lock(&ms->locks, &ls);
	ret = ns_inode_get(ms, ino, in);
	if (ret)
		goto out;
	ret = dir_may_add(ms, cr, newparent, newname, &dir, &other);
	if (ret)
		goto out;
	if (S_ISDIR(in->mode)) {
		ret = -EPERM;
		goto out;
	}
	if (in->nlink == 0) {
		ret = -ENOENT;
		goto out;
	}
	if (in->nlink >= MS_LINK_MAX) {
		ret = -EMLINK;
		goto out;
	}
	/* as ext4: no link into a project tree from outside its project */
	if ((dir.flags & MS_INO_PROJINHERIT) && dir.project != in->project) {
		ret = -EXDEV;
		goto out;
	}
	now = ns_now();
	in->nlink++;
	in->ctime_ns = now;
	dir.mtime_ns = dir.ctime_ns = now;
	ms_batch_init(&mb);
	ns_inode_put(&mb, in);
	ns_inode_put(&mb, &dir);
	ns_dirent_put(mb.b, newparent, newname, ino, in->mode >> 12);
	ret = ns_write(ms, &mb);
	ms_batch_destroy(ms, &mb);
	if (!ret)
		ns_attr_from_inode(in, out);
out:
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret;
}

static int remove_entry(struct ms *ms, const struct ms_cred *cr, uint64_t parent,
			const char *name, int rmdir)
{
	struct ms_lockset ls;
	struct ms_inode dir, *in;
	struct ms_freelist f = { 0 };
	struct ms_batch mb;
	uint64_t child;
	int64_t now;
	int ret;

	if (strcmp(name, ".") == 0)
		return rmdir ? -EINVAL : -EISDIR;
	if (strcmp(name, "..") == 0)
		return rmdir ? -ENOTEMPTY : -EISDIR;
	ret = ns_check_name(name);
	if (ret)
		return ret;
	in = malloc(sizeof(*in));
	if (!in)
		return -ENOMEM;
	ret = ns_lock_entry(ms, parent, name, rmdir, &ls, &child);
	if (ret)
		goto out_free;
	ret = ns_get_dir(ms, parent, &dir);
	if (ret)
		goto out;
	ret = perm_check(&dir, cr, MAY_EXEC);
	if (ret)
		goto out;
	if (child == 0) {
		ret = -ENOENT;
		goto out;
	}
	ret = perm_check(&dir, cr, MAY_WRITE | MAY_EXEC);
	if (ret)
		goto out;
	ret = ns_inode_get(ms, child, in);
	if (ret)
		goto out;
	ret = perm_sticky(&dir, in, cr);
	if (ret)
		goto out;
	if (rmdir && !S_ISDIR(in->mode)) {
		ret = -ENOTDIR;
		goto out;
	}
	if (!rmdir && S_ISDIR(in->mode)) {
		ret = -EISDIR;
		goto out;
	}
	if (rmdir) {
		ret = ns_dir_has_entries(ms, child);
		if (ret) {
			ret = ret > 0 ? -ENOTEMPTY : ret;
			goto out;
		}
	}

	now = ns_now();
	ms_batch_init(&mb);
	ns_dirent_del(mb.b, parent, name);
	dir.mtime_ns = dir.ctime_ns = now;
	if (rmdir) {
		dir.nlink--;
		in->nlink = 0;
		ret = ns_inode_purge(ms, &mb, child, in, 0, &f);
	} else {
		in->nlink--;
		in->ctime_ns = now;
		if (in->nlink == 0)
			ret = ns_inode_unlinked(ms, &mb, in, &f);
		else
			ns_inode_put(&mb, in);
	}
	ns_inode_put(&mb, &dir);
	if (!ret)
		ret = ns_write_freeing(ms, &mb, &f);
	ms_batch_destroy(ms, &mb);
	freelist_release(ms, &f, ret == 0);
out:
	lockset_unlock(&ms->locks, &ls);
out_free:
	free(in);
	return ret;
}

int ms_unlink(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name)
{
	return remove_entry(ms, cr, parent, name, 0);
}

int ms_rmdir(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name)
{
	return remove_entry(ms, cr, parent, name, 1);
}

int ms_readdir(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const void *after,
	       size_t afterlen, uint32_t max, struct ms_dirent *out, int *eof)
{
	struct ms_inode dir;
	uint8_t k[MS_KEY_MAX];
	size_t plen;
	leveldb_iterator_t *it;
	int n = 0, ret;

	*eof = 0;
	ret = ns_inode_get(ms, ino, &dir);
	if (ret)
		return ret;
	if (!S_ISDIR(dir.mode))
		return -ENOTDIR;
	ret = perm_check(&dir, cr, MAY_READ);
	if (ret)
		return ret;
	if (max == 0 || max > MS_READDIR_MAX)
		max = MS_READDIR_MAX;
	if (afterlen > 255)
		afterlen = 255;

	plen = key_prefix(k, MS_TAG_DIRENT, ino);
	it = leveldb_create_iterator(ms->db, ms->ropts);
	leveldb_iter_seek(it, (char *)k, key_dirent(k, ino, after ? after : "", after ? afterlen : 0));
	for (; leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const char *key = leveldb_iter_key(it, &kl);
		const char *val;
		uint32_t type;

		if (kl < plen || memcmp(key, k, plen) != 0) {
			*eof = 1;
			break;
		}
		/* resume strictly after `after` */
		if (after && kl - plen == afterlen && memcmp(key + plen, after, afterlen) == 0)
			continue;
		if ((uint32_t)n == max)
			break;
		if (kl - plen > 255)
			continue;
		val = leveldb_iter_value(it, &vl);
		if (dirent_decode(val, vl, &out[n].ino, &type))
			continue;
		out[n].type = type;
		out[n].namelen = (uint8_t)(kl - plen);
		memcpy(out[n].name, key + plen, kl - plen);
		out[n].name[kl - plen] = '\0';
		n++;
	}
	if (!leveldb_iter_valid(it))
		*eof = 1;
	leveldb_iter_destroy(it);
	return n;
}

int ms_readlink(struct ms *ms, const struct ms_cred *cr, uint64_t ino, char *buf)
{
	struct ms_inode *in = malloc(sizeof(*in));
	int ret;

	if (!in)
		return -ENOMEM;
	ret = ns_inode_get(ms, ino, in);
	if (!ret && !S_ISLNK(in->mode))
		ret = -EINVAL;
	if (!ret) {
		memcpy(buf, in->target, in->target_len);
		buf[in->target_len] = '\0';
		ret = (int)in->target_len;
	}
	free(in);
	return ret;
}
