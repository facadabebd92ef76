/* SPDX-License-Identifier: MIT */
/*
 * groups_cache.h - the supplementary groups of a FUSE request's caller,
 * remembered per thread for a short while.
 */
#ifndef RDFS_FUSE_GROUPS_CACHE_H
#define RDFS_FUSE_GROUPS_CACHE_H

#include <sys/types.h>

#include "rdfs_fuse.h"

/*
 * Set how long (seconds; 0: never remember, read them for every request) a
 * caller's groups stay remembered. Call once before the session loop starts.
 */
void groups_cache_set_timeout(double seconds);

/*
 * The supplementary groups of @req's caller into @groups (at most @max);
 * their count, or 0 when they cannot be read (the caller has exited).
 */
int groups_cache_get(fuse_req_t req, gid_t *groups, int max);

#endif
