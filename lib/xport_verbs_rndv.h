/* SPDX-License-Identifier: MIT */
/*
 * xport_verbs_rndv.h - the rendezvous of a verbs connection, for frames whose
 * data does not fit a receive buffer (the Gfarm paper's figure 3 direction:
 * the receiver pulls with RDMA READ):
 *
 *   1. sender: registers the data for this send only (REMOTE_READ), takes a
 *      cookie, SENDs RNDV { cookie, descriptors, frame header, body }
 *   2. receiver: allocates the message (limits checked first), RDMA-READs
 *      each descriptor into it, in chunks
 *   3. receiver: when every READ completed, SENDs DONE { cookie } and delivers
 *      the message (in arrival order with the connection's other messages)
 *   4. sender: on DONE, deregisters (the rkeys die) and completes the post
 *   On close, every rendezvous still open is cancelled: memory deregistered,
 *   posts completed with -ECANCELED.
 *
 * The sender's table below is what makes DONE trustworthy: a cookie names one
 * slot and one use of it (a generation), so a DONE for a finished, reused or
 * never-announced rendezvous is a protocol error, never a completion of
 * someone else's send. The receiver's read iterator turns descriptors into
 * READ work requests. Both are pure (the connection lock covers them).
 */
#ifndef RDFS_XPORT_VERBS_RNDV_H
#define RDFS_XPORT_VERBS_RNDV_H

#include <stdint.h>

#include "xport_verbs_wire.h"

enum verbs_rndv_state {
	RNDV_FREE = 0,
	RNDV_REGISTERED,	/* cookie taken, memory registered, RNDV not yet sent */
	RNDV_ANNOUNCED,		/* RNDV sent: the peer may read, DONE expected */
};

struct verbs_rndv_slot {
	uint16_t gen;
	uint8_t state;
	void *priv;
};

struct verbs_rndv_table {
	struct verbs_rndv_slot *slots;
	uint32_t nslots, used, hint;
};

/* @nslots: most rendezvous open at once on one connection (at most 65536). */
int verbs_rndv_table_init(struct verbs_rndv_table *t, uint32_t nslots);
void verbs_rndv_table_fini(struct verbs_rndv_table *t);
/* Take a cookie for @priv. -EAGAIN when all slots are open. */
int verbs_rndv_alloc(struct verbs_rndv_table *t, void *priv, uint32_t *cookie);
/* The RNDV message for @cookie was sent. -EPROTO if not REGISTERED. */
int verbs_rndv_announce(struct verbs_rndv_table *t, uint32_t cookie);
/* The peer said DONE: free the slot, return its priv; NULL (protocol error) if not ANNOUNCED. */
void *verbs_rndv_finish(struct verbs_rndv_table *t, uint32_t cookie);
/* Free any one open slot and return its priv; NULL when none are open (to cancel all). */
void *verbs_rndv_take_any(struct verbs_rndv_table *t);

/* One RDMA READ: @len bytes from the peer's @raddr/@rkey to offset @off of body or data. */
struct verbs_read {
	uint64_t raddr;
	uint32_t rkey;
	uint32_t len;
	uint32_t off;
	int to_body;
};

struct verbs_read_iter {
	uint32_t idx;		/* descriptor */
	uint32_t done;		/* bytes of it already planned */
	uint64_t pos;		/* bytes of the remote stream (body, then data) planned */
};

/*
 * The next READ of at most @chunk bytes for descriptors @d[0..n) whose stream is
 * a remote body of @body_len bytes (0: body inline) followed by the data.
 * Returns 1 with @r filled, 0 when all is planned.
 */
int verbs_read_next(const struct verbs_desc *d, uint32_t n, uint32_t body_len, uint32_t chunk,
		    struct verbs_read_iter *it, struct verbs_read *r);

#endif
