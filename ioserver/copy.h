/* SPDX-License-Identifier: MIT */
/*
 * copy.h - COPY requests (copy_file_range without the client): fetch the
 * source bytes from the I/O server that holds them, then hand the request
 * back as a stable WRITE of those bytes.
 *
 * Threads: one copy thread of its own. copier_submit() (main loop) takes a
 * COPY request and answers errors itself; the main loop is woken (@wake) when
 * a request is ready and takes it back with copier_take_ready() to submit it
 * to the io_uring threads as the WRITE it now is. Its reply goes to the
 * client as the answer to its COPY.
 */
#ifndef RDFS_IOS_COPY_H
#define RDFS_IOS_COPY_H

#include "auth.h"
#include "rpc.h"

struct copier;

/* Largest dst.length of one COPY. */
#define COPY_MAX_BYTES	(4u << 20)

struct server_id;

/*
 * @cap_key: the server key that source servers accept is derived from it.
 * Source servers are found by the id their capability names: this server
 * (@self, at @self_url) or, through SERVER_LIST, the metaserver's registry
 * (@metaserver; NULL: none, so only copies within this server work). A
 * client never names the address this server logs into with the server key.
 */
int copier_create(const struct auth_secret *cap_key, const char *metaserver,
		  const struct server_id *self, const char *self_url, void (*wake)(void *arg),
		  void *arg, struct copier **out);
/* Take @req (a COPY); it is answered or comes back through copier_take_ready(). */
void copier_submit(struct copier *cp, const struct rpc_request *req);
/* 1 with *@out a WRITE request to submit, 0 when none is ready. */
int copier_take_ready(struct copier *cp, struct rpc_request *out);
/* Requests taken and not yet given back or answered. */
int copier_busy(struct copier *cp);
/* Answer what is still queued with -ESHUTDOWN, stop the thread, free. */
void copier_destroy(struct copier *cp);

#endif
