/* SPDX-License-Identifier: MIT */
/*
 * fuse_metrics.h - what rdfs-fuse shows to Prometheus (lib/metrics.h, served
 * by lib/metrics_http.c when metrics_listen or [metrics] listen is set): the
 * FUSE requests the kernel sent, by operation (count, duration from the
 * moment the request was read to the end of its handling, errors by errno,
 * in flight), the file data they carried, and the client core's own
 * counters (rdfs_client_stats(), read at each scrape).
 *
 * The session loop (session_loop.c) brackets each request it hands to
 * libfuse with fuse_metrics_begin() and fuse_metrics_end(); ops.c reports an
 * error reply and the bytes of a READ or WRITE in between, on the same
 * thread (every op replies before it returns). The request's opcode,
 * start time and status are thread-local, the counters relaxed atomics:
 * nothing here takes a lock. Without fuse_metrics_register() every call is
 * a no-op.
 */
#ifndef RDFS_FUSE_METRICS_H
#define RDFS_FUSE_METRICS_H

#include <stdint.h>

#include "rdfs_fuse.h"

struct metrics;

/*
 * Register the families in @r and collectors over @c's counters. Once, before
 * the session runs; @c must outlive the registry's renders. 0, or -EINVAL (a
 * family could not be registered: no memory).
 */
int fuse_metrics_register(struct metrics *r, struct rdfs_client *c);

/* The request in @buf (as read from /dev/fuse) is handed to libfuse now. */
void fuse_metrics_begin(const struct fuse_buf *buf);
/* ... and its handling has ended: count its duration and its status. */
void fuse_metrics_end(void);
/* The current request is answered with the error @err (a positive errno; 0 is success). */
void fuse_metrics_error(int err);
/* File data a READ answered with, a WRITE took. */
void fuse_metrics_read_bytes(uint64_t n);
void fuse_metrics_write_bytes(uint64_t n);
/* A caller's supplementary groups were read from /proc (groups_cache.c). */
void fuse_metrics_groups_read(void);

#endif
