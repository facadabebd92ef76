/* SPDX-License-Identifier: MIT */
/*
 * readahead.h - set the kernel's read-ahead window of a FUSE mount.
 */
#ifndef RDFS_FUSE_READAHEAD_H
#define RDFS_FUSE_READAHEAD_H

/*
 * Set @mountpoint's read-ahead to @kib KiB from a detached thread, once the
 * session loop answers (call right before entering the loop). Failure (not
 * root, no sysfs) is logged and leaves the kernel default. 0 or -errno if the
 * thread cannot be started.
 */
int readahead_set_async(const char *mountpoint, unsigned int kib);

#endif
