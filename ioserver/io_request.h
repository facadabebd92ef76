/* SPDX-License-Identifier: MIT */
/*
 * io_request.h - READ, WRITE, IO_COMMIT and ZERO: a bounded queue feeding a pool of
 * disk threads, each of which decodes, checks (registration, capability,
 * bounds), does the volume I/O and replies.
 *
 * Everything between "request taken off the network" and "reply sent" lives in
 * io_request.c, so replacing the thread pool with an io_uring pipeline is a
 * change of that file alone.
 */
#ifndef RDFS_IOS_IO_REQUEST_H
#define RDFS_IOS_IO_REQUEST_H

#include <stdint.h>

#include "auth.h"
#include "rpc.h"
#include "server_id.h"

struct volume;
struct io_pool;

struct io_pool_opts {
	struct volume *vol;
	const struct auth_secret *cap_key;
	const struct server_id *id;
	int threads;
	uint64_t verifier;	/* boot verifier carried by every IoReply */
};

int io_pool_create(const struct io_pool_opts *o, struct io_pool **out);
/*
 * Hand @req (READ, WRITE, IO_COMMIT or ZERO) to the disk threads, which reply and
 * release it. Blocks while the queue is full, so a flood of requests slows the
 * network loop instead of growing memory.
 */
void io_pool_submit(struct io_pool *p, const struct rpc_request *req);
/* Wait until every submitted request has been answered. */
void io_pool_drain(struct io_pool *p);
/* Requests submitted and not yet answered (a snapshot). */
int io_pool_busy(struct io_pool *p);
/* Drains, then stops and joins the threads. */
void io_pool_destroy(struct io_pool *p);

#endif
