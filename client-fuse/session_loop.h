/* SPDX-License-Identifier: MIT */
/*
 * session_loop.h - rdfs-fuse's FUSE session loop (session_loop.c): worker
 * threads like fuse_session_loop_mt()'s, whose WRITE request buffers a write
 * op may keep.
 */
#ifndef RDFS_FUSE_SESSION_LOOP_H
#define RDFS_FUSE_SESSION_LOOP_H

#include <stddef.h>

#include "rdfs_fuse.h"

/*
 * Serve @se until it ends (unmount, or fuse_session_exit() from a signal
 * handler) with up to @max_threads workers. Returns 0, or -errno when reading
 * the device failed.
 */
int session_loop_run(struct fuse_session *se, unsigned int max_threads);

/*
 * In an op: the buffer the current request was read into, if [@data, @data +
 * @len) lies in it (a WRITE's data does), else NULL (another loop, or a
 * request libfuse copied out of a pipe). A heap block: free() releases it.
 */
void *session_loop_request_buffer(const void *data, size_t len);

/*
 * In an op, after session_loop_request_buffer(): the buffer now belongs to
 * someone else (who free()s it); the worker reads its next request into a
 * new one.
 */
void session_loop_buffer_given(void);

#endif
