/* SPDX-License-Identifier: MIT */
/*
 * xport_verbs_credit.h - the send window of a verbs connection (GNBD/VIA's
 * window, papers/gnbd-via-network-block-device.txt): a sender never has more
 * messages on the way than the receiver has receive buffers posted.
 *
 * Each side starts with the other's posted receive count as credits. Every
 * message costs one. The receiver counts the buffers it reposted as @owed and
 * returns them in the credits field of whatever it sends next; when nothing
 * flows it sends an explicit CREDIT message once @owed reaches the threshold
 * (half the window), so a request/reply stream needs no extra messages.
 *
 * Deadlock freedom: ordinary messages may not spend the last credit; it is kept
 * for a CREDIT message, which is always sendable when owed credits exist. A
 * paused receiver (xport_conn_pause_rx) does not repost what it holds, so the
 * sender runs out of credits and waits: that is the flow control.
 *
 * Pure bookkeeping, no locking: the connection lock covers it.
 */
#ifndef RDFS_XPORT_VERBS_CREDIT_H
#define RDFS_XPORT_VERBS_CREDIT_H

#include <stdint.h>

struct verbs_credits {
	uint32_t window;	/* the peer's posted receives: most we may hold */
	uint32_t avail;		/* messages we may still send */
	uint32_t owed;		/* our reposted receives not yet reported to the peer */
	uint32_t threshold;	/* send an explicit CREDIT at this many owed */
};

void verbs_credit_init(struct verbs_credits *c, uint32_t peer_window, uint32_t our_window);
/* Whether a message may be sent now (@explicit_credit: a CREDIT message). */
int verbs_credit_can_send(const struct verbs_credits *c, int explicit_credit);
/* Spend one credit and take the owed count to piggyback. -EAGAIN if none. */
int verbs_credit_take(struct verbs_credits *c, int explicit_credit, uint16_t *returned);
/* The peer returned @n credits. -EPROTO if that overruns the window (a lying peer). */
int verbs_credit_grant(struct verbs_credits *c, uint32_t n);
/* We reposted @n receive buffers. */
void verbs_credit_reposted(struct verbs_credits *c, uint32_t n);
/* Nothing else queued to carry them: is an explicit CREDIT due? */
int verbs_credit_explicit_due(const struct verbs_credits *c);

#endif
