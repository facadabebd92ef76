/* SPDX-License-Identifier: MIT */
/*
 * io_request.h - READ, WRITE, IO_COMMIT and ZERO on io_uring.
 *
 * The main loop hands each request to one of the ring threads (round robin);
 * every ring thread owns an io_uring and an eventfd through which it hears of
 * new work, and runs each request it owns as a small state machine: decode,
 * check (registration, capability, bounds), then volume I/O on the ring, then
 * the reply. Nothing in a ring thread blocks on another request, except ZERO,
 * whose fallocate + fdatasync runs in the ring thread (rare, metaserver only).
 *
 * READ (gmblock's synchronized send): a request is cut into units of
 * unit_size; up to pipeline_depth unit reads are on the disk at once, into
 * buffers of the bounded pool (bufpool.h); in IOS_SEND_OVERLAP each unit goes
 * on the wire as a RDFS_FRAME_MORE part (rpc_server_reply_part) as soon as it
 * and every unit before it are read, and the final frame carries the IoReply
 * and the last unit. IOS_SEND_WHOLE reads the request into one buffer and
 * replies in one frame. A disk error after some units went out is reported by
 * the final frame (the client drops the parts). Units are served from the
 * read-ahead cache when it holds them (readahead.h).
 *
 * WRITE: the data stays in the transport's 4096-aligned receive buffer and is
 * written from there (only a partial first/last block goes through a bounce
 * block for its read-modify-write), under the blocks' range lock. Stable
 * writes carry RWF_DSYNC and are acknowledged when durable; unstable ones
 * (write-back) are acknowledged on receipt, once in line for their blocks'
 * range lock: READs take their blocks shared, in the same line, so a READ
 * arriving after the acknowledgement waits for the write. IO_COMMIT waits
 * for every WRITE received before it, then fdatasyncs. A write-back WRITE
 * that fails after its acknowledgement changes the write verifier, as a
 * restart would, so its client sends it again.
 *
 * The files that implement it, one idea each, and a job's life as one state:
 * io_internal.h.
 */
#ifndef RDFS_IOS_IO_REQUEST_H
#define RDFS_IOS_IO_REQUEST_H

#include <stdint.h>

#include "auth.h"
#include "ios.h"
#include "rpc.h"
#include "server_id.h"

struct volume;
struct io_pool;
struct fence_table;

struct io_pool_opts {
	struct volume *vol;
	const struct auth_secret *cap_key;
	const struct server_id *id;
	struct fence_table *fences;	/* capabilities the metaserver took back */
	int threads;			/* ring threads, >= 1 */
	uint64_t verifier;		/* boot verifier carried by every IoReply */
	enum ios_send_mode send_mode;
	uint32_t unit_size;		/* bytes, a multiple of 4096 */
	int pipeline_depth;		/* unit reads in flight per request, >= 1 */
	uint64_t readahead_bytes;	/* read-ahead cache; 0: off */
	uint64_t buffer_pool_bytes;	/* READ buffers; 0: derived (io_pool_default_buffers) */
};

/* The buffer pool's default size for @o: room for many requests' pipelines, at least 2 x 16 MiB. */
uint64_t io_pool_default_buffers(const struct io_pool_opts *o);

/* Counters since start, for logs and tests. */
struct io_pool_stats {
	uint64_t reads;			/* READ requests */
	uint64_t units_from_disk;	/* READ units read from the volume */
	uint64_t units_from_cache;	/* READ units served by the read-ahead cache */
	uint64_t parts_sent;		/* RDFS_FRAME_MORE partial replies */
	uint64_t ra_loads;		/* read-ahead segment loads started */
	uint64_t ra_loads_done;		/* ... and finished (failed or not) */
};

int io_pool_create(const struct io_pool_opts *o, struct io_pool **out);
void io_pool_get_stats(struct io_pool *p, struct io_pool_stats *out);
/* Hand @req (READ, WRITE, IO_COMMIT or ZERO) to a ring thread, which replies and releases it. */
void io_pool_submit(struct io_pool *p, const struct rpc_request *req);
/*
 * The write verifier now: the boot verifier, changed again whenever a
 * write-back WRITE fails after its acknowledgement.
 */
uint64_t io_pool_verifier(struct io_pool *p);
/* Requests submitted and not finished (a snapshot; write-back WRITEs count until written). */
int io_pool_busy(struct io_pool *p);
/* Wait until every submitted request is answered, then stop the ring threads. */
void io_pool_stop(struct io_pool *p);
/*
 * Free the rest. Call after rpc_server_destroy(): send completions of replies
 * still queued then return their buffers to the pool.
 */
void io_pool_destroy(struct io_pool *p);

#endif
