/* SPDX-License-Identifier: MIT */
/*
 * fence.h - what the metaserver took back: capabilities an I/O server refuses
 * (-ESTALE) although their MAC is good (docs/DESIGN.md, "Taking blocks back").
 *
 * Two kinds. The registration epoch: each registration with the metaserver
 * gets a new, larger epoch, and a capability of an older one is refused, so a
 * metaserver restart (or a registration it broke off) fences everything issued
 * before at once, with nothing to remember or persist. A capability of a newer
 * epoch than ours is genuine proof that the metaserver registered us again: it
 * is adopted, so a reply racing its RegisterReply is not refused.
 *
 * File fences: FENCE {ino, gen, epoch, until} refuses capabilities of @ino of
 * registration @epoch with a layout generation below @gen until @until
 * (CLOCK_REALTIME, compared with our clock like a capability's expiry: every
 * capability granted before the fence has expired by then), so the table
 * bounds itself. Generations start again at 0 in every epoch (a restarted
 * metaserver forgets them): a fence of an older epoch refuses nothing newer.
 *
 * The registration lease: the metaserver drops a registration it heard nothing
 * on for its ioserver_timeout, and may then mark our copies stale and let a
 * fence it could not deliver go. So capabilities of a registration are served
 * only until that timeout after the sending of the last PING the metaserver
 * answered (our CLOCK_MONOTONIC: it runs on while we are stopped, so a
 * SIGSTOPped server that wakes refuses before its registration thread even
 * runs): from then on they get -ENOLINK, which clients take as a failed
 * server (another copy is read, a write marks this copy stale), until a new
 * registration's epoch arrives.
 *
 * Thread-safe: the main loop adds fences, the ring threads check. A check of an
 * empty table takes no lock.
 */
#ifndef RDFS_IOS_FENCE_H
#define RDFS_IOS_FENCE_H

#include <stddef.h>
#include <stdint.h>

struct fence_table;

int fence_table_create(struct fence_table **out);
void fence_table_destroy(struct fence_table *t);

/* A registration: capabilities of epochs below @epoch are refused from now on. */
void fence_set_epoch(struct fence_table *t, uint64_t epoch);
uint64_t fence_epoch(const struct fence_table *t);

/*
 * Serve capabilities of epochs up to @epoch only until @until_ms
 * (CLOCK_MONOTONIC, fence_mono_ms()); INT64_MAX: no lease (the default).
 */
void fence_set_lease(struct fence_table *t, uint64_t epoch, int64_t until_ms);
int64_t fence_mono_ms(void);

/* Refuse generations of @ino below @gen in @epoch until @until_ns. 0 or -ENOMEM. */
int fence_add(struct fence_table *t, uint64_t ino, uint32_t gen, uint64_t epoch,
	      int64_t until_ns, int64_t now_ns);

/*
 * 0 if a genuine capability of @epoch, @ino, @gen may be served at @now_ns;
 * else -ESTALE (fenced) or -ENOLINK (the registration's lease lapsed).
 */
int fence_check(struct fence_table *t, uint64_t epoch, uint64_t ino, uint32_t gen,
		int64_t now_ns);

/* The reply text for an error of fence_check(). */
const char *fence_why(int err);

/* File fences in force (expired ones may still be counted until swept). */
size_t fence_count(struct fence_table *t);

#endif
