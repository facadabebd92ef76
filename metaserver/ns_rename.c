// SPDX-License-Identifier: MIT
/*
 * ns_rename.c - rename(2) with RENAME_NOREPLACE and RENAME_EXCHANGE, in the
 * order Linux's do_renameat2()/vfs_rename() check things.
 *
 * A rename across directories first takes the rename mutex (as Linux's
 * s_vfs_rename_mutex): it keeps every directory's parent pointer still while
 * we walk up from the destination to refuse moving a directory into its own
 * subtree. Then the two parents and the two entries' inodes are locked as one
 * lock set.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "ms_int.h"

/* Directory nesting deeper than this is treated as a corrupt parent chain. */
#define MS_MAX_DEPTH	65536

/* Is directory @a @x or an ancestor of @x? 1, 0 or -errno. Needs the rename mutex. */
static int is_ancestor(struct ms *ms, uint64_t a, uint64_t x)
{
	struct ms_inode *in = malloc(sizeof(*in));
	int ret = 0;

	if (!in)
		return -ENOMEM;
	for (int depth = 0; depth < MS_MAX_DEPTH; depth++) {
		if (x == a) {
			ret = 1;
			break;
		}
		if (x == MS_ROOT_INO)
			break;
		ret = ns_inode_get(ms, x, in);
		if (ret)
			break;
		x = in->parent;
	}
	free(in);
	return ret;
}

/* may_delete() of Linux: removing (or replacing) @victim from @dir. */
static int may_delete(const struct ms_inode *dir, const struct ms_inode *victim, int isdir,
		      const struct ms_cred *cr)
{
	int ret = perm_check(dir, cr, MAY_WRITE | MAY_EXEC);

	if (ret)
		return ret;
	ret = perm_sticky(dir, victim, cr);
	if (ret)
		return ret;
	if (isdir) {
		if (!S_ISDIR(victim->mode))
			return -ENOTDIR;
		if (victim->ino == MS_ROOT_INO)
			return -EBUSY;
	} else if (S_ISDIR(victim->mode)) {
		return -EISDIR;
	}
	return 0;
}

struct rename_state {
	struct ms_inode od, nd;		/* old and new parent (same inode when equal) */
	struct ms_inode src, dst;
};

static int rename_locked(struct ms *ms, const struct ms_cred *cr, uint64_t parent,
			 const char *name, uint64_t newparent, const char *newname,
			 uint32_t flags, uint64_t s_ino, uint64_t d_ino, struct rename_state *st)
{
	struct ms_inode *od = &st->od, *nd = &st->nd, *src = &st->src, *dst = &st->dst;
	struct ms_freelist f = { 0 };
	struct ms_batch mb;
	leveldb_writebatch_t *b;
	int same_dir = parent == newparent;
	int src_dir, dst_dir = 0;
	int od_delta = 0, nd_delta = 0;	/* nlink changes of the parents */
	int64_t now;
	int ret;

	ret = ns_get_dir(ms, parent, od);
	if (ret)
		return ret;
	if (same_dir)
		*nd = *od;
	else if ((ret = ns_get_dir(ms, newparent, nd)))
		return ret;
	ret = perm_check(od, cr, MAY_EXEC);
	if (!ret)
		ret = perm_check(nd, cr, MAY_EXEC);
	if (ret)
		return ret;
	if (s_ino == 0)
		return -ENOENT;
	if ((flags & MS_RENAME_NOREPLACE) && d_ino)
		return -EEXIST;
	if ((flags & MS_RENAME_EXCHANGE) && !d_ino)
		return -ENOENT;
	ret = ns_inode_get(ms, s_ino, src);
	if (ret)
		return ret;
	if (d_ino && (ret = ns_inode_get(ms, d_ino, dst)))
		return ret;
	src_dir = S_ISDIR(src->mode);
	dst_dir = d_ino && S_ISDIR(dst->mode);

	if (!same_dir) {
		if (src_dir) {
			ret = is_ancestor(ms, s_ino, newparent);
			if (ret)
				return ret > 0 ? -EINVAL : ret;
		}
		if (d_ino && dst_dir) {
			ret = is_ancestor(ms, d_ino, parent);
			if (ret)
				return ret > 0 ? ((flags & MS_RENAME_EXCHANGE) ? -EINVAL : -ENOTEMPTY) : ret;
		}
	}
	if (s_ino == d_ino)
		return 0;

	ret = may_delete(od, src, src_dir, cr);
	if (ret)
		return ret;
	if (!d_ino)
		ret = perm_check(nd, cr, MAY_WRITE | MAY_EXEC);
	else
		ret = may_delete(nd, dst, (flags & MS_RENAME_EXCHANGE) ? dst_dir : src_dir, cr);
	if (ret)
		return ret;
	if (!same_dir) {
		if (src_dir && (ret = perm_check(src, cr, MAY_WRITE)))
			return ret;
		if ((flags & MS_RENAME_EXCHANGE) && dst_dir && (ret = perm_check(dst, cr, MAY_WRITE)))
			return ret;
	}
	/*
	 * As ext4: nothing moves into a project tree but from its project, so
	 * usage never changes projects by a rename (mv copies instead); what
	 * leaves a tree keeps its id.
	 */
	if (((nd->flags & MS_INO_PROJINHERIT) && nd->project != src->project) ||
	    ((flags & MS_RENAME_EXCHANGE) && (od->flags & MS_INO_PROJINHERIT) &&
	     od->project != dst->project))
		return -EXDEV;
	if (dst_dir && !(flags & MS_RENAME_EXCHANGE)) {
		ret = ns_dir_has_entries(ms, d_ino);
		if (ret)
			return ret > 0 ? -ENOTEMPTY : ret;
	}

	now = ns_now();
	ms_batch_init(&mb);
	b = mb.b;
	src->ctime_ns = now;
	od->mtime_ns = od->ctime_ns = now;
	nd->mtime_ns = nd->ctime_ns = now;
	if (flags & MS_RENAME_EXCHANGE) {
		dst->ctime_ns = now;
		ns_dirent_put(b, parent, name, d_ino, dst->mode >> 12);
		ns_dirent_put(b, newparent, newname, s_ino, src->mode >> 12);
		if (!same_dir) {
			if (src_dir) {
				src->parent = newparent;
				od_delta--;
				nd_delta++;
			}
			if (dst_dir) {
				dst->parent = parent;
				nd_delta--;
				od_delta++;
			}
		}
		ns_inode_put(&mb, dst);
	} else {
		ns_dirent_del(b, parent, name);
		ns_dirent_put(b, newparent, newname, s_ino, src->mode >> 12);
		if (src_dir) {
			src->parent = newparent;
			od_delta--;
			nd_delta++;
		}
		if (d_ino) {
			dst->ctime_ns = now;
			if (dst_dir) {
				nd_delta--;
				dst->nlink = 0;
				ret = ns_inode_purge(ms, &mb, d_ino, dst, 0, &f);
			} else {
				dst->nlink--;
				if (dst->nlink == 0)
					ret = ns_inode_unlinked(ms, &mb, dst, &f);
				else
					ns_inode_put(&mb, dst);
			}
		}
	}
	ns_inode_put(&mb, src);
	if (same_dir) {
		od->nlink += od_delta + nd_delta;
		ns_inode_put(&mb, od);
	} else {
		od->nlink += od_delta;
		nd->nlink += nd_delta;
		ns_inode_put(&mb, od);
		ns_inode_put(&mb, nd);
	}
	if (!ret)
		ret = ns_write_freeing(ms, &mb, &f);
	ms_batch_destroy(ms, &mb);
	freelist_release(ms, &f, ret == 0);
	return ret;
}

int ms_rename(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, uint32_t flags)
{
	struct rename_state *st;
	int cross = parent != newparent;
	int ret;

	if ((flags & ~(MS_RENAME_NOREPLACE | MS_RENAME_EXCHANGE)) ||
	    flags == (MS_RENAME_NOREPLACE | MS_RENAME_EXCHANGE))
		return -EINVAL;
	if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(newname, ".") ||
	    !strcmp(newname, ".."))
		return -EBUSY;
	if ((ret = ns_check_name(name)) || (ret = ns_check_name(newname)))
		return ret;
	st = malloc(sizeof(*st));
	if (!st)
		return -ENOMEM;
	if (cross)
		pthread_mutex_lock(&ms->rename_mu);
	for (;;) {
		struct ms_lockset ls;
		uint64_t s1 = 0, d1 = 0, s2 = 0, d2 = 0;
		uint32_t t;
		int r;

		r = ns_dirent_get(ms, parent, name, &s1, &t);
		if (r && r != -ENOENT) {
			ret = r;
			break;
		}
		r = ns_dirent_get(ms, newparent, newname, &d1, &t);
		if (r && r != -ENOENT) {
			ret = r;
			break;
		}
		lockset_init(&ls);
		lockset_add(&ls, parent);
		lockset_add(&ls, newparent);
		lockset_add(&ls, s1);
		lockset_add(&ls, d1);
		lockset_lock(&ms->locks, &ls);
		if (ns_dirent_get(ms, parent, name, &s2, &t))
			s2 = 0;
		if (ns_dirent_get(ms, newparent, newname, &d2, &t))
			d2 = 0;
		if (s1 != s2 || d1 != d2) {
			lockset_unlock(&ms->locks, &ls);
			continue;
		}
		ret = rename_locked(ms, cr, parent, name, newparent, newname, flags, s1, d1, st);
		lockset_unlock(&ms->locks, &ls);
		break;
	}
	if (cross)
		pthread_mutex_unlock(&ms->rename_mu);
	free(st);
	return ret;
}
