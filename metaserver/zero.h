/* SPDX-License-Identifier: MIT */
/*
 * zero.h - the metaserver's calls to its I/O servers: ZERO for the recycled
 * blocks a LAYOUT allocates, FENCE, and COPY for the rebuilder (ms.h, zero.c).
 */
#ifndef RDFS_MS_ZERO_H
#define RDFS_MS_ZERO_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "ms.h"

struct ms_zeroer;

/*
 * A zeroer for @ms's I/O servers: it connects to each (the URL it registered,
 * looked up at use) as "server", with the server key of @cap_key, and signs its
 * own capabilities (holder "server") with @cap_key. Connections are made
 * lazily and kept.
 */
int ms_zeroer_create(struct ms *ms, const struct auth_secret *cap_key, int64_t cap_lifetime_ns,
		     struct ms_zeroer **out);
/* No zeroing may be in progress (clear it from @ms first). */
void ms_zeroer_destroy(struct ms_zeroer *z);
/* The ms_zero_fn: @arg is the struct ms_zeroer. */
int ms_zeroer_zero(void *arg, const struct ms_zero_range *r, size_t n);
/*
 * The ms_fence_fn: FENCE @ino below @gen on each of @servers, for as long as a
 * capability granted until now (@cap_lifetime_ns of ms_zeroer_create) lives.
 */
void ms_zeroer_fence(void *arg, const uint32_t *servers, size_t n, uint64_t ino, uint32_t gen,
		     int *status);
/*
 * The ms_copy_fn: COPY to I/O server @dst from @src, in pieces of at most
 * 4 MiB, each with capabilities of ours (holder "server") for that piece.
 */
int ms_zeroer_copy(void *arg, uint64_t ino, uint32_t gen, uint32_t dst, uint64_t dst_block,
		   uint32_t src, uint64_t src_block, uint64_t count);

#endif
