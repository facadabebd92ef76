// SPDX-License-Identifier: MIT
/*
 * ns_xattr.c - extended attributes with Linux's xattr_permission() rules:
 * user.* only on regular files and directories and by rwx permission (sticky
 * directories: owner only), trusted.* for root only (others see nothing),
 * security.* and system.* readable by all, writable by the owner or root.
 *
 * rdfs.copies is not stored as an xattr: it reads and sets the copies field
 * of the inode (the default for what is created in a directory), readable by
 * all, set by the owner or root, removed to fall back to the cluster default;
 * listxattr does not name it (as CephFS's layout xattrs).
 *
 * rdfs.stripe is the same kind of attribute for the layout: chunk size,
 * stripe count and first server (the chunk_size, stripe_count, stripe_start
 * fields and the MS_INO_STRIPE_ID flag), as "chunk_size=N stripe_count=N
 * stripe_index=N". A regular file takes a new one only while it has no
 * blocks (-EBUSY: its chunks are where they are); a directory's is what
 * files and directories created in it start with. Removing it goes back to
 * the cluster's chunk size, all servers and no fixed first server.
 *
 * rdfs.project is the inode's quota project id (as ext4's and XFS's, which
 * set it with an ioctl), readable by all, set or removed (0) by root only;
 * set on a directory, it also marks the directory so that what is created in
 * it takes the id. Its usage moves to the new project in the same batch.
 *
 * system.posix_acl_access and system.posix_acl_default are POSIX ACLs,
 * validated and enforced: ns_acl.c serves them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frame.h"
#include "ms_int.h"

enum xattr_ns { XNS_USER, XNS_TRUSTED, XNS_SECURITY, XNS_SYSTEM };

static int xattr_ns_of(const char *name, enum xattr_ns *ns)
{
	size_t len = strlen(name);

	if (len == 0 || len > RDFS_XATTR_NAME_MAX)
		return -ERANGE;
	if (!strncmp(name, "user.", 5) && len > 5)
		*ns = XNS_USER;
	else if (!strncmp(name, "trusted.", 8) && len > 8)
		*ns = XNS_TRUSTED;
	else if (!strncmp(name, "security.", 9) && len > 9)
		*ns = XNS_SECURITY;
	else if (!strncmp(name, "system.", 7) && len > 7)
		*ns = XNS_SYSTEM;
	else
		return -EOPNOTSUPP;
	return 0;
}

static int xattr_permission(const struct ms_inode *in, const struct ms_cred *cr,
			    enum xattr_ns ns, int write)
{
	switch (ns) {
	case XNS_TRUSTED:
		if (cr->uid != 0)
			return write ? -EPERM : -ENODATA;
		return 0;
	case XNS_SECURITY:
	case XNS_SYSTEM:
		if (write && !perm_is_owner(in, cr))
			return -EPERM;
		return 0;
	case XNS_USER:
		if (!S_ISREG(in->mode) && !S_ISDIR(in->mode))
			return write ? -EPERM : -ENODATA;
		if (S_ISDIR(in->mode) && (in->mode & S_ISVTX) && write && !perm_is_owner(in, cr))
			return -EPERM;
		break;
	}
	return perm_check(in, cr, write ? MAY_WRITE : MAY_READ);
}

/* rdfs.copies of @ino: its effective value in decimal. */
static int copies_get(struct ms *ms, uint64_t ino, void **value)
{
	struct ms_inode *in = malloc(sizeof(*in));
	int ret;

	if (!in)
		return -ENOMEM;
	ret = ns_inode_get(ms, ino, in);
	if (!ret && !S_ISREG(in->mode) && !S_ISDIR(in->mode))
		ret = -ENODATA;
	if (!ret) {
		*value = malloc(4);
		ret = *value ? snprintf(*value, 4, "%u", ms_copies(ms, in)) : -ENOMEM;
	}
	free(in);
	return ret;
}

/* Parse a copies value: "1".."8", an optional trailing newline (echo). */
static int copies_parse(const void *value, size_t len, uint32_t *out)
{
	const char *v = value;

	if (len > 0 && v[len - 1] == '\n')
		len--;
	if (len != 1 || v[0] < '1' || v[0] > '0' + RDFS_MAX_COPIES)
		return -EINVAL;
	*out = (uint32_t)(v[0] - '0');
	return 0;
}

/*
 * Set (@value, which @parse reads) or remove (0) a virtual attribute of @ino,
 * rdfs.copies or rdfs.project: it always exists, so there is nothing to
 * create; under the inode lock @apply checks @cr and sets it in the inode,
 * which one batch writes.
 */
static int inode_attr_change(struct ms *ms, const struct ms_cred *cr, uint64_t ino,
			     const void *value, size_t len, uint32_t flags,
			     int (*parse)(const void *value, size_t len, uint32_t *out),
			     int (*apply)(struct ms_inode *in, const struct ms_cred *cr,
					  uint32_t v))
{
	struct ms_lockset ls;
	struct ms_inode *in;
	struct ms_batch mb;
	uint32_t v = 0;
	int ret;

	if (flags & ~(MS_XATTR_CREATE | MS_XATTR_REPLACE))
		return -EINVAL;
	if (value && (flags & MS_XATTR_CREATE))
		return -EEXIST;
	if (value && parse(value, len, &v))
		return -EINVAL;
	in = malloc(sizeof(*in));
	if (!in)
		return -ENOMEM;
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (!ret)
		ret = apply(in, cr, v);
	if (ret)
		goto out;
	in->ctime_ns = ns_now();
	ms_batch_init(&mb);
	ns_inode_put(&mb, in);
	ret = ns_write(ms, &mb);
	ms_batch_destroy(ms, &mb);
out:
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret;
}

/* rdfs.copies: the owner's (or root's), of files and directories. */
static int copies_apply(struct ms_inode *in, const struct ms_cred *cr, uint32_t copies)
{
	if ((!S_ISREG(in->mode) && !S_ISDIR(in->mode)) || !perm_is_owner(in, cr))
		return -EPERM;
	in->copies = (uint8_t)copies;
	return 0;
}

/* rdfs.stripe of @ino as text. */
static int stripe_get(struct ms *ms, uint64_t ino, void **value)
{
	struct ms_inode *in = malloc(sizeof(*in));
	int ret;

	if (!in)
		return -ENOMEM;
	ret = ns_inode_get(ms, ino, in);
	if (!ret && !S_ISREG(in->mode) && !S_ISDIR(in->mode))
		ret = -ENODATA;
	if (!ret) {
		*value = malloc(96);
		ret = *value ? snprintf(*value, 96, "chunk_size=%u stripe_count=%d stripe_index=%lld",
					in->chunk_size ? in->chunk_size : ms->chunk_size,
					in->stripe_count ? (int)in->stripe_count : -1,
					in->flags & MS_INO_STRIPE_ID ? (long long)in->stripe_start
								     : -1ll)
			     : -ENOMEM;
	}
	free(in);
	return ret;
}

/* A layout as rdfs.stripe says it; a field given as -2 was not given. */
struct stripe_val {
	int64_t chunk_size, count, index;
};

/* Parse "key=N ..." (space, tab or newline apart) into @v: 0 or -EINVAL. */
static int stripe_parse(const void *value, size_t len, struct stripe_val *v)
{
	char buf[128], *p, *save = NULL;

	v->chunk_size = v->count = v->index = -2;
	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, value, len);
	buf[len] = '\0';
	for (p = strtok_r(buf, " \t\n", &save); p; p = strtok_r(NULL, " \t\n", &save)) {
		char *eq = strchr(p, '='), *end;
		long long n;

		if (!eq || !eq[1])
			return -EINVAL;
		*eq = '\0';
		errno = 0;
		n = strtoll(eq + 1, &end, 10);
		if (errno || *end)
			return -EINVAL;
		if (!strcmp(p, "chunk_size") && n >= RDFS_BLOCK_SIZE && n <= RDFS_MAX_CHUNK &&
		    n % RDFS_BLOCK_SIZE == 0)
			v->chunk_size = n;
		else if (!strcmp(p, "stripe_count") && n >= -1 && n <= RDFS_MAX_STRIPE_COUNT)
			v->count = n < 0 ? 0 : n;
		else if (!strcmp(p, "stripe_index") && n >= -1 && n <= UINT32_MAX)
			v->index = n;
		else
			return -EINVAL;
	}
	return 0;
}

/* 1 if I/O server @id is known to the registry. */
static int server_known(struct ms *ms, uint32_t id)
{
	char url[8];

	return ms_server_url(ms, id, url, sizeof(url)) == 0;
}

/* Set (@value) or remove (NULL: back to the defaults) rdfs.stripe of @ino. */
static int stripe_change(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const void *value,
			 size_t len, uint32_t flags)
{
	struct stripe_val v = { ms->chunk_size, 0, -1 };
	struct ms_lockset ls;
	struct ms_inode *in;
	struct ms_batch mb;
	uint32_t chunk, count, start;
	uint8_t iflags;
	int ret;

	if (flags & ~(MS_XATTR_CREATE | MS_XATTR_REPLACE))
		return -EINVAL;
	if (value && (flags & MS_XATTR_CREATE))
		return -EEXIST;
	if (value && stripe_parse(value, len, &v))
		return -EINVAL;
	/* checked before the lock: the registry's mutex is a leaf, taken alone */
	if (v.index >= 0 && !server_known(ms, (uint32_t)v.index))
		return -EINVAL;
	in = malloc(sizeof(*in));
	if (!in)
		return -ENOMEM;
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (ret)
		goto out;
	if (!S_ISREG(in->mode) && !S_ISDIR(in->mode))
		ret = -EPERM;
	else if (!perm_is_owner(in, cr))
		ret = -EPERM;
	if (ret)
		goto out;
	chunk = v.chunk_size >= 0 ? (uint32_t)v.chunk_size : in->chunk_size;
	count = v.count >= 0 ? (uint32_t)v.count : in->stripe_count;
	iflags = in->flags;
	start = in->stripe_start;
	if (v.index >= 0) {
		iflags |= MS_INO_STRIPE_ID;
		start = (uint32_t)v.index;
	} else if (v.index == -1 && (iflags & MS_INO_STRIPE_ID)) {
		uint32_t ids[256];
		int n = registry_up_ids(&ms->reg, ids, 256);

		/* the metaserver's choice again, as at the file's creation */
		iflags &= ~MS_INO_STRIPE_ID;
		start = n > 0 ? (uint32_t)(ino % (uint64_t)n) : 0;
	}
	if (chunk == in->chunk_size && count == in->stripe_count && iflags == in->flags &&
	    start == in->stripe_start)
		goto out;	/* as it is: nothing to write, not even for a file with data */
	/* a file's chunks are where its layout put them: a new one only while it has none */
	if (S_ISREG(in->mode) && in->blocks) {
		ret = -EBUSY;
		goto out;
	}
	in->chunk_size = chunk;
	in->stripe_count = count;
	in->stripe_start = start;
	in->flags = iflags;
	in->ctime_ns = ns_now();
	ms_batch_init(&mb);
	ns_inode_put(&mb, in);
	ret = ns_write(ms, &mb);
	ms_batch_destroy(ms, &mb);
out:
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret;
}

/* rdfs.project of @ino in decimal. */
static int project_get(struct ms *ms, uint64_t ino, void **value)
{
	struct ms_inode *in = malloc(sizeof(*in));
	int ret;

	if (!in)
		return -ENOMEM;
	ret = ns_inode_get(ms, ino, in);
	if (!ret) {
		*value = malloc(12);
		ret = *value ? snprintf(*value, 12, "%u", in->project) : -ENOMEM;
	}
	free(in);
	return ret;
}

/* Parse a project id: decimal, 0 to 2^32 - 2, an optional trailing newline. */
static int project_parse(const void *value, size_t len, uint32_t *out)
{
	const char *v = value;
	uint64_t n = 0;

	if (len > 0 && v[len - 1] == '\n')
		len--;
	if (len == 0 || len > 10)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -EINVAL;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	if (n >= UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)n;
	return 0;
}

/* rdfs.project: root's alone; a directory's is also what is created in it. */
static int project_apply(struct ms_inode *in, const struct ms_cred *cr, uint32_t project)
{
	/* the project decides whose limits bind: not the owner's to choose */
	if (cr->uid != 0)
		return -EPERM;
	in->project = project;
	if (S_ISDIR(in->mode) && project)
		in->flags |= MS_INO_PROJINHERIT;
	else
		in->flags &= ~MS_INO_PROJINHERIT;
	return 0;
}

int ms_getxattr(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name,
		void **value)
{
	struct ms_inode *in = malloc(sizeof(*in));
	uint8_t k[MS_KEY_MAX];
	enum xattr_ns ns;
	char *v;
	size_t vl;
	int ret;

	if (!in)
		return -ENOMEM;
	if (!strcmp(name, RDFS_COPIES_XATTR)) {
		free(in);
		return copies_get(ms, ino, value);
	}
	if (!strcmp(name, RDFS_STRIPE_XATTR)) {
		free(in);
		return stripe_get(ms, ino, value);
	}
	if (!strcmp(name, RDFS_PROJECT_XATTR)) {
		free(in);
		return project_get(ms, ino, value);
	}
	if (ns_acl_is_name(name)) {
		free(in);
		return ns_acl_getxattr(ms, ino, name, value);
	}
	ret = xattr_ns_of(name, &ns);
	if (!ret)
		ret = ns_inode_get(ms, ino, in);
	if (!ret)
		ret = xattr_permission(in, cr, ns, 0);
	if (!ret)
		ret = ns_get(ms, k, key_xattr(k, ino, name), &v, &vl);
	if (ret == -ENOENT && ns_inode_get(ms, ino, in) == 0)
		ret = -ENODATA;
	if (!ret) {
		*value = malloc(vl ? vl : 1);
		if (*value) {
			memcpy(*value, v, vl);
			ret = (int)vl;
		} else {
			ret = -ENOMEM;
		}
		leveldb_free(v);
	}
	free(in);
	return ret;
}

/* set (@value != NULL) or remove an xattr under the inode lock */
static int xattr_change(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name,
			const void *value, size_t len, uint32_t flags)
{
	struct ms_lockset ls;
	struct ms_inode *in;
	uint8_t k[MS_KEY_MAX];
	size_t kl;
	enum xattr_ns ns;
	struct ms_batch mb;
	char *v;
	size_t vl;
	int ret, exists;

	if (flags & ~(MS_XATTR_CREATE | MS_XATTR_REPLACE))
		return -EINVAL;
	if (!strcmp(name, RDFS_COPIES_XATTR))
		return inode_attr_change(ms, cr, ino, value, len, flags, copies_parse, copies_apply);
	if (!strcmp(name, RDFS_STRIPE_XATTR))
		return stripe_change(ms, cr, ino, value, len, flags);
	if (!strcmp(name, RDFS_PROJECT_XATTR))
		return inode_attr_change(ms, cr, ino, value, len, flags, project_parse,
					 project_apply);
	if (ns_acl_is_name(name))
		return ns_acl_change(ms, cr, ino, name, value, len, flags);
	ret = xattr_ns_of(name, &ns);
	if (ret)
		return ret;
	if (value && len > RDFS_XATTR_SIZE_MAX)
		return -E2BIG;
	in = malloc(sizeof(*in));
	if (!in)
		return -ENOMEM;
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (ret)
		goto out;
	ret = xattr_permission(in, cr, ns, 1);
	if (ret)
		goto out;
	kl = key_xattr(k, ino, name);
	ret = ns_get(ms, k, kl, &v, &vl);
	if (ret && ret != -ENOENT)
		goto out;
	exists = ret == 0;
	if (exists)
		leveldb_free(v);
	if (value && exists && (flags & MS_XATTR_CREATE)) {
		ret = -EEXIST;
		goto out;
	}
	if ((!value || (flags & MS_XATTR_REPLACE)) && !exists) {
		ret = -ENODATA;
		goto out;
	}
	in->ctime_ns = ns_now();
	ms_batch_init(&mb);
	if (value)
		leveldb_writebatch_put(mb.b, (char *)k, kl, value, len);
	else
		leveldb_writebatch_delete(mb.b, (char *)k, kl);
	ns_inode_put(&mb, in);
	ret = ns_write(ms, &mb);
	ms_batch_destroy(ms, &mb);
out:
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret;
}

int ms_setxattr(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name,
		const void *value, size_t len, uint32_t flags)
{
	return xattr_change(ms, cr, ino, name, value ? value : "", len, flags);
}

int ms_removexattr(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name)
{
	return xattr_change(ms, cr, ino, name, NULL, 0, 0);
}

void ms_names_free(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int ms_listxattr(struct ms *ms, const struct ms_cred *cr, uint64_t ino, char ***names)
{
	struct ms_inode *in = malloc(sizeof(*in));
	uint8_t k[MS_KEY_MAX];
	size_t plen = key_prefix(k, MS_TAG_XATTR, ino);
	leveldb_iterator_t *it;
	char **a = NULL;
	int n = 0, cap = 0, ret;

	if (!in)
		return -ENOMEM;
	ret = ns_inode_get(ms, ino, in);
	free(in);
	if (ret)
		return ret;
	it = leveldb_create_iterator(ms->db, ms->ropts);
	for (leveldb_iter_seek(it, (char *)k, plen); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl;
		const char *key = leveldb_iter_key(it, &kl);

		if (kl < plen || memcmp(key, k, plen))
			break;
		/* listxattr(2) hides trusted.* from unprivileged callers */
		if (cr->uid != 0 && kl - plen >= 8 && !memcmp(key + plen, "trusted.", 8))
			continue;
		if (n == cap) {
			char **na = realloc(a, (cap ? cap * 2 : 8) * sizeof(*na));

			if (!na) {
				ret = -ENOMEM;
				break;
			}
			a = na;
			cap = cap ? cap * 2 : 8;
		}
		a[n] = strndup(key + plen, kl - plen);
		if (!a[n]) {
			ret = -ENOMEM;
			break;
		}
		n++;
	}
	leveldb_iter_destroy(it);
	if (ret) {
		ms_names_free(a, n);
		return ret;
	}
	*names = a;
	return n;
}
