/* SPDX-License-Identifier: MIT */
/*
 * ops.h - the metaserver's request dispatch: decode a request body, run the
 * operation on the core (ms.h), encode and send the reply.
 */
#ifndef RDFS_MS_OPS_H
#define RDFS_MS_OPS_H

#include <stdint.h>

#include "auth.h"
#include "ms.h"
#include "rpc.h"

struct ms_ops_ctx {
	struct ms *ms;
	const struct auth_secret *cap_key;	/* signs LAYOUT capabilities */
	int64_t cap_lifetime_ns;
	int ioserver_timeout_ms;		/* a registration's heartbeat timeout; 0: none */
};

/*
 * Handle @req from a peer whose session is @s and send exactly one reply.
 * Never fails: a bad body gets -EBADMSG, a missing Cred -EINVAL.
 */
void ops_dispatch(const struct ms_ops_ctx *ctx, struct ms_session *s, struct rpc_request *req);

/* 1 if the metaserver handles opcode @op (its metrics have a series for each). */
int ops_is_served(uint16_t op);

/*
 * 1 if opcode @op is answered from memory and a few LevelDB point reads, with
 * no lock that a writer holds across its sync, no write and no I/O-server
 * traffic: cheap and bounded enough to run on the main loop (server.c).
 */
int ops_is_quick_read(uint16_t op);

/*
 * 1 for the node administration opcodes: rare, run on the main loop so that
 * the connections of a node they revoke are closed there right after.
 */
int ops_is_admin(uint16_t op);

#endif
