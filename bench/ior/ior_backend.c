// SPDX-License-Identifier: MIT
/*
 * ior_backend.c - the two file interfaces a task can measure: POSIX system
 * calls on a mounted file system (-a POSIX), or rdfs's client library talking
 * to the servers itself (-a RDFS), so FUSE's share of the cost can be told
 * apart from the protocol's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ior.h"
#include "log.h"
#include "rdfs_client.h"

struct ior_backend {
	enum ior_api api;
	struct rdfs_client *client;
	struct rdfs_cred cred;
	char dir[IOR_PATH_MAX];		/* the directory last resolved (-a RDFS) ... */
	uint64_t dir_ino;		/* ... and its inode, 0: none */
};

struct ior_file {
	struct ior_backend *b;
	int fd;
	struct rdfs_file *rf;
};

int ior_backend_open(const struct ior_params *p, struct ior_backend **out, char *err,
		     size_t errsize)
{
	struct rdfs_client_opts o = { 0 };
	struct ior_backend *b = calloc(1, sizeof(*b));
	gid_t groups[RDFS_MAX_GROUPS];
	int n, i, ret;

	if (!b) {
		snprintf(err, errsize, "out of memory");
		return -ENOMEM;
	}
	b->api = p->api;
	if (p->api == IOR_API_POSIX) {
		*out = b;
		return 0;
	}
	log_init("rdfs-bench", LOG_LVL_WARN);
	ret = rdfs_client_opts_load_key(&o, p->cluster.secret_file);
	if (ret) {
		snprintf(err, errsize, "cannot load secret file %s: %s", p->cluster.secret_file,
			 strerror(-ret));
		free(b);
		return ret;
	}
	o.metaserver_url = p->cluster.metaserver;
	o.timeout_ms = p->cluster.timeout_ms;
	o.write_stable = 1;
	o.write_behind_kb = 16384;	/* NFS-like: errors at fsync/close */
	ret = rdfs_client_open(&o, &b->client);
	if (ret) {
		snprintf(err, errsize, "cannot connect to metaserver %s: %s%s", p->cluster.metaserver,
			 strerror(-ret), ret == -EACCES ? " (secret rejected)" : "");
		free(b);
		return ret;
	}
	b->cred.uid = getuid();
	b->cred.gid = getgid();
	n = getgroups(RDFS_MAX_GROUPS, groups);
	for (i = 0; i < n; i++)
		b->cred.groups[i] = groups[i];
	b->cred.ngroups = n > 0 ? (uint32_t)n : 0;
	*out = b;
	return 0;
}

void ior_backend_close(struct ior_backend *b)
{
	if (!b)
		return;
	if (b->client)
		rdfs_client_close(b->client);
	free(b);
}

/*
 * Resolve the directory part of @path to an inode and copy the last component
 * to @name. The last directory resolved is remembered (what a kernel's dentry
 * cache does for FUSE), so that mdtest's thousands of files in one directory
 * cost one request each, not one per path component; @fresh forgets it.
 */
static int rdfs_parent(struct ior_backend *b, const char *path, int fresh, uint64_t *parent,
		       char *name, size_t namesize)
{
	const char *p = path, *slash = strrchr(path, '/');
	uint64_t ino = RDFS_ROOT_INO;
	size_t dirlen;
	struct stat st;
	char comp[256];
	int ret;

	if (path[0] != '/' || !slash || !slash[1])
		return -EINVAL;
	if (strlen(slash + 1) >= namesize)
		return -ENAMETOOLONG;
	strcpy(name, slash + 1);
	dirlen = (size_t)(slash - path);
	if (!fresh && b->dir_ino && dirlen == strlen(b->dir) && memcmp(b->dir, path, dirlen) == 0) {
		*parent = b->dir_ino;
		return 0;
	}
	b->dir_ino = 0;
	while (p < slash) {
		size_t len;

		while (*p == '/')
			p++;
		if (p >= slash)
			break;
		len = strcspn(p, "/");
		if (len >= sizeof(comp))
			return -ENAMETOOLONG;
		memcpy(comp, p, len);
		comp[len] = '\0';
		p += len;
		if (strcmp(comp, ".") == 0)
			continue;
		ret = rdfs_lookup(b->client, &b->cred, ino, comp, &st);
		if (ret)
			return ret;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		ino = st.st_ino;
	}
	if (dirlen < sizeof(b->dir)) {
		memcpy(b->dir, path, dirlen);
		b->dir[dirlen] = '\0';
		b->dir_ino = ino;
	}
	*parent = ino;
	return 0;
}

enum rdfs_path_op { OP_OPEN_WRITE, OP_OPEN_READ, OP_UNLINK, OP_MKDIR, OP_RMDIR, OP_STAT };

/*
 * One namespace operation on @path through the library. If it fails in a way
 * a stale remembered directory explains (it was removed, or replaced), it is
 * tried once more with the path resolved afresh.
 */
static int rdfs_path_op(struct ior_backend *b, enum rdfs_path_op op, const char *path,
			mode_t mode, struct stat *st, struct rdfs_file **file)
{
	uint64_t parent;
	struct stat tmp;
	char name[256];
	int fresh, ret = 0;

	if (!st)
		st = &tmp;
	for (fresh = 0; fresh < 2; fresh++) {
		ret = rdfs_parent(b, path, fresh, &parent, name, sizeof(name));
		if (ret == 0) {
			switch (op) {
			case OP_OPEN_WRITE:
				ret = rdfs_create(b->client, &b->cred, parent, name, mode,
						  O_WRONLY | O_CREAT, st, file);
				break;
			case OP_OPEN_READ:
				ret = rdfs_lookup(b->client, &b->cred, parent, name, st);
				if (ret == 0)
					ret = rdfs_open(b->client, &b->cred, st->st_ino, O_RDONLY, st,
							file);
				break;
			case OP_UNLINK:
				ret = rdfs_unlink(b->client, &b->cred, parent, name);
				break;
			case OP_MKDIR:
				ret = rdfs_mkdir(b->client, &b->cred, parent, name, mode, st);
				break;
			case OP_RMDIR:
				ret = rdfs_rmdir(b->client, &b->cred, parent, name);
				break;
			case OP_STAT:
				ret = rdfs_lookup(b->client, &b->cred, parent, name, st);
				break;
			}
		}
		if (ret != -ENOENT && ret != -ESTALE)
			break;
	}
	return ret;
}

int ior_file_open(struct ior_backend *b, const char *path, int write, int direct,
		  struct ior_file **out)
{
	struct ior_file *f = calloc(1, sizeof(*f));
	int ret;

	if (!f)
		return -ENOMEM;
	f->b = b;
	f->fd = -1;
	if (b->api == IOR_API_POSIX) {
		int flags = write ? O_WRONLY | O_CREAT : O_RDONLY;

		if (direct)
			flags |= O_DIRECT;
		f->fd = open(path, flags, 0644);
		if (f->fd < 0) {
			ret = -errno;
			free(f);
			return ret;
		}
		*out = f;
		return 0;
	}
	ret = rdfs_path_op(b, write ? OP_OPEN_WRITE : OP_OPEN_READ, path, 0644, NULL, &f->rf);
	if (ret) {
		free(f);
		return ret;
	}
	*out = f;
	return 0;
}

ssize_t ior_file_pwrite(struct ior_file *f, const void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	if (f->rf)
		return rdfs_pwrite(f->rf, buf, len, (off_t)off);
	n = pwrite(f->fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

ssize_t ior_file_pread(struct ior_file *f, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	if (f->rf)
		return rdfs_pread(f->rf, buf, len, (off_t)off);
	n = pread(f->fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

int ior_file_fsync(struct ior_file *f)
{
	if (f->rf)
		return rdfs_fsync(f->rf, 0);
	return fsync(f->fd) < 0 ? -errno : 0;
}

int ior_file_close(struct ior_file *f)
{
	int ret;

	if (f->rf)
		ret = rdfs_release(f->rf);
	else
		ret = close(f->fd) < 0 ? -errno : 0;
	free(f);
	return ret;
}

int ior_path_unlink(struct ior_backend *b, const char *path)
{
	if (b->api == IOR_API_POSIX)
		return unlink(path) < 0 ? -errno : 0;
	return rdfs_path_op(b, OP_UNLINK, path, 0, NULL, NULL);
}

int ior_path_mkdir(struct ior_backend *b, const char *path, mode_t mode)
{
	if (b->api == IOR_API_POSIX)
		return mkdir(path, mode) < 0 ? -errno : 0;
	return rdfs_path_op(b, OP_MKDIR, path, mode, NULL, NULL);
}

int ior_path_rmdir(struct ior_backend *b, const char *path)
{
	if (b->api == IOR_API_POSIX)
		return rmdir(path) < 0 ? -errno : 0;
	return rdfs_path_op(b, OP_RMDIR, path, 0, NULL, NULL);
}

int ior_path_stat(struct ior_backend *b, const char *path, struct stat *st)
{
	if (b->api == IOR_API_POSIX)
		return stat(path, st) < 0 ? -errno : 0;
	return rdfs_path_op(b, OP_STAT, path, 0, st, NULL);
}

int ior_drop_cache(struct ior_backend *b, const char *path, char *note, size_t size)
{
	int fd, ret = 0;

	if (b->api == IOR_API_RDFS) {
		snprintf(note, size, "%s", IOR_RDFS_CACHE_NOTE);
		return 0;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	/* DONTNEED drops clean pages only, so write back dirty ones first. */
	if (fdatasync(fd) < 0)
		ret = -errno;
	if (ret == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
		ret = -EINVAL;
	close(fd);
	snprintf(note, size, "fdatasync + posix_fadvise(POSIX_FADV_DONTNEED) after write and before read");
	return ret;
}
