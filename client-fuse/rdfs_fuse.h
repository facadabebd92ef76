/* SPDX-License-Identifier: MIT */
/*
 * rdfs_fuse.h - what rdfs-fuse's startup code (main.c) hands to its FUSE
 * operations (ops.c): the client core connection and the mount's settings.
 */
#ifndef RDFS_FUSE_H
#define RDFS_FUSE_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "rdfs_client.h"

/*
 * Largest READ/WRITE the kernel sends us. libfuse 3.14 cannot take more than
 * 256 pages per request (FUSE_MAX_MAX_PAGES sizes its receive buffer, and it
 * clamps max_write to that), and the kernel's fs.fuse.max_pages_limit (6.x)
 * defaults to 256 too, so 1 MiB is the ceiling; it is also the default chunk
 * size, so one FUSE request maps onto one I/O server request. Larger write(2)s
 * are split by the kernel; with write-behind (or the writeback cache) the
 * pieces are in flight together.
 */
#define RDFS_FUSE_MAX_IO	(1u << 20)

/* The userdata of the FUSE session: read-only once the session runs. */
struct rdfs_fuse {
	struct rdfs_client *client;
	struct fuse_session *se;	/* for notifications to the kernel */
	double attr_timeout;		/* seconds the kernel may cache attributes */
	int readdirplus;		/* the kernel takes listings with attributes */
	double entry_timeout;		/* seconds the kernel may cache name -> inode */
	int direct_io;			/* bypass the page cache for every open file */
	int direct_writes;		/* write-only opens bypass the page cache */
	int writeback_cache;		/* the kernel gathers writes in its page cache */
	int splice;			/* READ replies by vmsplice + splice */
	int default_permissions;	/* the kernel checks mode bits before we see a request */
	int acl;			/* POSIX ACLs pass (no noacl option) */
	unsigned int max_io;		/* max_write asked for at init */
	unsigned int max_read;		/* max_read, the same as the mount option */
};

extern const struct fuse_lowlevel_ops rdfs_fuse_ops;

#endif
