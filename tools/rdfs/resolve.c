// SPDX-License-Identifier: MIT
/*
 * resolve.c - rdfs paths to inodes, by one LOOKUP per component from the root.
 */
#include <errno.h>
#include <string.h>

#include "tool.h"

int tool_resolve(struct tool *t, const char *path, struct stat *st)
{
	uint64_t ino = RDFS_ROOT_INO;
	const char *p = path;
	char name[RDFS_NAME_MAX + 2];
	int ret;

	if (path[0] != '/')
		return -EINVAL;
	ret = rdfs_getattr(t->client, &t->cred, ino, st);
	while (ret == 0) {
		size_t len;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		len = strcspn(p, "/");
		if (len > RDFS_NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(name, p, len);
		name[len] = '\0';
		p += len;
		if (!S_ISDIR(st->st_mode))
			return -ENOTDIR;
		if (strcmp(name, ".") == 0)
			continue;
		/* ".." from the root is the root, as in any namespace */
		ret = rdfs_lookup(t->client, &t->cred, ino, name, st);
		if (ret == 0)
			ino = st->st_ino;
	}
	return ret;
}
