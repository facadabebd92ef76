// SPDX-License-Identifier: MIT
/*
 * ns_acl.c - POSIX ACLs in the database: system.posix_acl_access and
 * system.posix_acl_default are 'X' records like any xattr (so listxattr names
 * them and purging an inode drops them), but only ever written here, always
 * valid, and in the same batch as the inode record whose MS_INO_ACL /
 * MS_INO_DEFACL flag says they exist (ms_keys.h): a permission check on an
 * inode without an ACL reads nothing more than the inode.
 *
 * Setting and removing them follow Linux's set_posix_acl() and
 * posix_acl_update_mode() (an access ACL that says no more than the mode
 * becomes the mode); creating in a directory with a default ACL follows
 * posix_acl_create(); chmod rewrites the access ACL (posix_acl_chmod, from
 * ns_attr.c). Every change runs under the inode's exclusive lock, so a
 * reader under the shared lock sees the flag and the record agree.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "ms_int.h"

int ns_acl_is_name(const char *name)
{
	return !strcmp(name, MS_ACL_XATTR_ACCESS) || !strcmp(name, MS_ACL_XATTR_DEFAULT);
}

int ns_acl_load(struct ms *ms, uint64_t ino, const char *name, struct ms_acl *a)
{
	uint8_t k[MS_KEY_MAX];
	char *v;
	size_t vl;
	int ret;

	a->n = 0;
	ret = ns_get(ms, k, key_xattr(k, ino, name), &v, &vl);
	if (ret == -ENOENT) {
		log_error(1100033, "ino=%llu: %s flagged but not stored", (unsigned long long)ino,
			  name);
		return 0;
	}
	if (ret)
		return ret;
	ret = acl_from_xattr(v, vl, a);
	if (!ret)
		ret = acl_valid(a);
	leveldb_free(v);
	if (ret) {
		/* falling back to the mode could grant what the ACL denies */
		log_error(1100034, "ino=%llu: corrupt %s", (unsigned long long)ino, name);
		a->n = 0;
		return -EIO;
	}
	return 0;
}

void ns_acl_put(leveldb_writebatch_t *b, uint64_t ino, const char *name, const struct ms_acl *a)
{
	uint8_t k[MS_KEY_MAX], v[4 + 8 * MS_ACL_MAX];
	size_t kl = key_xattr(k, ino, name);

	if (a->n)
		leveldb_writebatch_put(b, (char *)k, kl, (char *)v, acl_to_xattr(a, v));
	else
		leveldb_writebatch_delete(b, (char *)k, kl);
}

int ns_acl_getxattr(struct ms *ms, uint64_t ino, const char *name, void **value)
{
	int def = !strcmp(name, MS_ACL_XATTR_DEFAULT);
	struct ms_inode *in = malloc(sizeof(*in));
	struct ms_acl *a = malloc(sizeof(*a));
	int ret;

	if (!in || !a) {
		ret = -ENOMEM;
		goto out;
	}
	/* readable by anyone, as the mode is */
	ret = ns_inode_get(ms, ino, in);
	if (ret)
		goto out;
	if (S_ISLNK(in->mode)) {
		ret = -EOPNOTSUPP; /* as Linux: symlinks have no ACLs */
		goto out;
	}
	if (!(in->flags & (def ? MS_INO_DEFACL : MS_INO_ACL))) {
		ret = -ENODATA;
		goto out;
	}
	if (def)
		ret = ns_acl_load(ms, ino, name, a);
	else
		*a = in->acl;
	if (!ret && a->n == 0)
		ret = -ENODATA;
	if (ret)
		goto out;
	*value = malloc(acl_xattr_size(a));
	ret = *value ? (int)acl_to_xattr(a, *value) : -ENOMEM;
out:
	free(a);
	free(in);
	return ret;
}

/*
 * Give @in the access ACL @a (n == 0: none) with the mode it implies, as
 * posix_acl_update_mode(): an ACL equivalent to the mode is dropped, and the
 * set-group-ID bit goes unless the caller is in the file's group or root.
 */
static void acl_set_access(struct ms_inode *in, const struct ms_cred *cr, struct ms_acl *a)
{
	if (a->n) {
		uint32_t mode = in->mode;

		if (!acl_equiv_mode(a, &mode))
			a->n = 0;
		if (cr->uid != 0 && !perm_in_group(cr, in->gid))
			mode &= ~(uint32_t)S_ISGID;
		in->mode = mode;
	}
	in->acl = *a;
	if (a->n)
		in->flags |= MS_INO_ACL;
	else
		in->flags &= ~MS_INO_ACL;
}

int ns_acl_change(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name,
		  const void *value, size_t len, uint32_t flags)
{
	int def = !strcmp(name, MS_ACL_XATTR_DEFAULT);
	uint8_t bit = def ? MS_INO_DEFACL : MS_INO_ACL;
	struct ms_lockset ls;
	struct ms_inode *in = NULL;
	struct ms_acl *a;
	struct ms_batch mb;
	int ret, had;

	/* XATTR_CREATE / REPLACE mean nothing to an ACL (Linux ignores them) */
	if (flags & ~(MS_XATTR_CREATE | MS_XATTR_REPLACE))
		return -EINVAL;
	a = malloc(sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->n = 0;
	ret = value ? acl_from_xattr(value, len, a) : 0;
	if (ret)
		goto out_free;
	in = malloc(sizeof(*in));
	if (!in) {
		ret = -ENOMEM;
		goto out_free;
	}
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (ret)
		goto out;
	/* in the order of Linux's set_posix_acl() */
	if (S_ISLNK(in->mode)) {
		ret = -EOPNOTSUPP;
		goto out;
	}
	if (def && !S_ISDIR(in->mode)) {
		ret = a->n ? -EACCES : 0;
		goto out;
	}
	if (!perm_is_owner(in, cr)) {
		ret = -EPERM;
		goto out;
	}
	if (a->n && (ret = acl_valid(a)))
		goto out;
	had = in->flags & bit;
	/* removing what is not there (setfacl -b on a plain file) succeeds */
	if (!a->n && !had)
		goto out;

	if (def) {
		if (a->n)
			in->flags |= MS_INO_DEFACL;
		else
			in->flags &= ~MS_INO_DEFACL;
	} else {
		acl_set_access(in, cr, a);
	}
	in->ctime_ns = ns_now();
	ms_batch_init(&mb);
	/* an ACL equivalent to the mode where none was: only the mode changes */
	if (a->n || had)
		ns_acl_put(mb.b, ino, name, a);
	ns_inode_put(&mb, in);
	ret = ns_write(ms, &mb);
	ms_batch_destroy(ms, &mb);
	/* named users may have lost rights their capabilities still carry */
	if (!ret && !def && S_ISREG(in->mode) && in->blocks)
		fence_file(ms, ino);
out:
	lockset_unlock(&ms->locks, &ls);
out_free:
	free(in);
	free(a);
	return ret;
}

void ns_acl_chmod(leveldb_writebatch_t *b, struct ms_inode *in)
{
	if (!(in->flags & MS_INO_ACL) || S_ISLNK(in->mode))
		return;
	acl_chmod(&in->acl, in->mode);
	ns_acl_put(b, in->ino, MS_ACL_XATTR_ACCESS, &in->acl);
}

int ns_acl_inherit(struct ms *ms, const struct ms_inode *dir, struct ms_inode *tmpl, uint32_t umask,
		   leveldb_writebatch_t *b)
{
	struct ms_acl *def;
	int ret;

	tmpl->flags = 0;
	tmpl->acl.n = 0;
	if (S_ISLNK(tmpl->mode))
		return 0;
	if (!(dir->flags & MS_INO_DEFACL)) {
		tmpl->mode &= ~(umask & 0777);
		return 0;
	}
	def = malloc(sizeof(*def));
	if (!def)
		return -ENOMEM;
	/* a default ACL replaces the umask (POSIX.1e) */
	ret = ns_acl_load(ms, dir->ino, MS_ACL_XATTR_DEFAULT, def);
	if (ret || def->n == 0) {
		tmpl->mode &= ~(umask & 0777);
		goto out;
	}
	tmpl->acl = *def;
	if (acl_create_masq(&tmpl->acl, &tmpl->mode)) {
		tmpl->flags |= MS_INO_ACL;
		ns_acl_put(b, tmpl->ino, MS_ACL_XATTR_ACCESS, &tmpl->acl);
	} else {
		tmpl->acl.n = 0;
	}
	if (S_ISDIR(tmpl->mode)) {
		tmpl->flags |= MS_INO_DEFACL;
		ns_acl_put(b, tmpl->ino, MS_ACL_XATTR_DEFAULT, def);
	}
out:
	free(def);
	return ret;
}
