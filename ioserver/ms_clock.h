/* SPDX-License-Identifier: MIT */
/*
 * ms_clock.h - the metaserver's wall clock, as this I/O server learned it at
 * its last registration. Capabilities and fences carry absolute times of
 * that clock (CLOCK_REALTIME on the metaserver), so checking them against
 * this one makes their lifetimes what the metaserver granted, whatever this
 * host's own clock says.
 *
 * One process-wide offset, written by the registration thread, read by any
 * thread (an atomic: no lock).
 */
#ifndef RDFS_IOS_MS_CLOCK_H
#define RDFS_IOS_MS_CLOCK_H

#include <stdint.h>

/*
 * The metaserver said its clock read @ms_ns in a reply to a request sent at
 * @sent_ns and answered at @recv_ns (both this host's CLOCK_REALTIME): take
 * the middle of the two as the moment it read it.
 */
void ms_clock_learn(int64_t sent_ns, int64_t ms_ns, int64_t recv_ns);
/* The metaserver's CLOCK_REALTIME now, in nanoseconds. */
int64_t ms_clock_now_ns(void);
/* This host's clock minus the metaserver's (0 before the first registration). */
int64_t ms_clock_skew_ns(void);

#endif
