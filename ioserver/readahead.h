/* SPDX-License-Identifier: MIT */
/*
 * readahead.h - SuperNBD's adaptive read-ahead: a bounded per-volume cache of
 * blocks read ahead of sequential streams.
 *
 * Streams: a READ that starts within RA_WINDOW_BLOCKS of where an earlier READ
 * of the volume ended continues that stream, whichever client or connection
 * sent either; up to RA_STREAMS streams are followed at once (the least
 * recently continued is forgotten first). A stream's first READ only starts
 * it; each READ that continues it doubles how far ahead of it we read (from
 * RA_INIT_BLOCKS up to a bound: 8 MiB or a quarter of the cache), and the
 * engine reads the blocks between the furthest point already read ahead and
 * the new target into the cache.
 *
 * The cache holds segments of RA_SEG_BLOCKS aligned blocks, each loading or
 * valid. Only valid segments serve READs (ra_read copies them out). A READ
 * whose blocks are all in the cache but some still loading waits for the load
 * (ra_hold_or_wait) instead of reading the disk a second time: a client that
 * reads ahead itself (the kernel's read-ahead under FUSE) sends its READs
 * about when we start loading the same blocks. A WRITE
 * or ZERO calls ra_invalidate() for its blocks after the disk has the new data
 * and before it is acknowledged: valid segments are dropped, loading ones are
 * marked stale (their load may have read the old data) and dropped when it
 * completes. So a READ that arrives after an acknowledged write can never be
 * served the old bytes, while a READ racing the write sees old or new, as it
 * would from the disk.
 *
 * Thread-safe; the engine's ring threads share one cache per volume.
 */
#ifndef RDFS_IOS_READAHEAD_H
#define RDFS_IOS_READAHEAD_H

#include <stdint.h>

#define RA_SEG_BLOCKS		32u		/* 128 KiB segments */
#define RA_WINDOW_BLOCKS	256u		/* 1 MiB: how far a READ may start from a stream's end */
#define RA_INIT_BLOCKS		64u		/* 256 KiB ahead on a stream's second READ */
#define RA_MAX_BLOCKS		2048u		/* 8 MiB ahead at most (or a quarter of the cache) */
#define RA_STREAMS		32

struct ra_cache;
struct ra_seg;

/* A cache of @bytes (rounded down to segments) for a volume of @capacity blocks. */
int ra_create(uint64_t bytes, uint64_t capacity, struct ra_cache **out);
void ra_destroy(struct ra_cache *ra);

/* Copy blocks [first, first + count) to @dst if every one is cached: 0, else -ENOENT. */
int ra_read(struct ra_cache *ra, uint64_t first, uint64_t count, void *dst);
/*
 * Zero-copy hits: if every block of [first, first + count) is cached, hold
 * the segments that have them (at most @max, in block order) in @segs and
 * return how many; else -ENOENT (-E2BIG: they span more than @max). A held
 * segment's bytes never change, even if a write invalidates it meanwhile (it
 * then holds the bytes from before that write until ra_release()).
 */
int ra_hold(struct ra_cache *ra, uint64_t first, uint64_t count, struct ra_seg **segs, int max);
void ra_release(struct ra_cache *ra, struct ra_seg *const *segs, int n);

/* Told once when the segment it waits for has finished loading (any thread). */
struct ra_waiter {
	void (*loaded)(struct ra_waiter *w);
	struct ra_waiter *next;
};

/*
 * ra_hold(), or, when every block is in the cache but some segment is still
 * loading, -EINPROGRESS: @w->loaded() is called once that load ends (from the
 * thread calling ra_seg_loaded(), possibly before this returns); then ask
 * again (the load may have failed or been invalidated: -ENOENT).
 */
int ra_hold_or_wait(struct ra_cache *ra, uint64_t first, uint64_t count, struct ra_seg **segs,
		    int max, struct ra_waiter *w);

/*
 * Note a READ of blocks [first, first + count). Fills @loads (room for @max)
 * with the segments to read ahead now, each already in the cache as loading;
 * the caller reads blocks [ra_seg_first, + ra_seg_blocks) into ra_seg_buf and
 * calls ra_seg_loaded(). Returns how many.
 */
int ra_note_read(struct ra_cache *ra, uint64_t first, uint64_t count, struct ra_seg **loads,
		 int max);
void *ra_seg_buf(const struct ra_seg *s);
uint64_t ra_seg_first(const struct ra_seg *s);
uint32_t ra_seg_blocks(const struct ra_seg *s);
/* The load of @s finished with 0 or -errno; it now serves READs unless stale. */
void ra_seg_loaded(struct ra_cache *ra, struct ra_seg *s, int err);

/* Blocks [first, first + count) changed on disk: forget them (see above). */
void ra_invalidate(struct ra_cache *ra, uint64_t first, uint64_t count);

#endif
