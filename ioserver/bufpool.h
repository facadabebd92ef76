/* SPDX-License-Identifier: MIT */
/*
 * bufpool.h - the I/O server's bounded pool of 4096-aligned data buffers.
 *
 * Every byte a READ holds between the disk and the wire lives in a buffer from
 * here, so the pool's budget is the bound on that memory however many clients
 * ask at once: a request that finds the budget spent waits for buffers to come
 * back (from a send completion) instead of allocating. Buffers of the unit size,
 * the common case, are allocated up front and recycled; other sizes (whole-mode
 * replies, a request smaller than a unit) are allocated on demand inside the
 * same budget. Thread-safe.
 */
#ifndef RDFS_IOS_BUFPOOL_H
#define RDFS_IOS_BUFPOOL_H

#include <stddef.h>

struct bufpool;

/*
 * A pool of at most @budget bytes; @prealloc buffers of @unit bytes are
 * allocated now. -EINVAL when @budget cannot hold one RDFS_MAX_DATA request.
 */
int bufpool_create(size_t budget, size_t unit, int prealloc, struct bufpool **out);
void bufpool_destroy(struct bufpool *p);
/* A buffer of @len bytes (rounded up to 4096), or NULL while the budget is spent. */
void *bufpool_get(struct bufpool *p, size_t len);
/* Give back a buffer of bufpool_get(@len). */
void bufpool_put(struct bufpool *p, void *buf, size_t len);
size_t bufpool_budget(const struct bufpool *p);

#endif
