/* SPDX-License-Identifier: MIT */
/*
 * xport_verbs_stats.h - counters of the verbs module's memory registration,
 * summed over the process's RDMA devices: for tests (which path a send took)
 * and logs. Plain C types, so C++ tests can include it without the verbs headers.
 */
#ifndef RDFS_XPORT_VERBS_STATS_H
#define RDFS_XPORT_VERBS_STATS_H

#include <stdint.h>

struct verbs_stats {
	uint64_t windows;	/* memory windows bound over cached registrations (all) */
	uint64_t send_mrs;	/* per-send registrations (memory nobody declared) */
	uint64_t sinks;		/* requests that exposed a sink (xport_post_send_sink) */
	uint64_t sink_windows;	/* sink pieces exposed through a window (declared memory) */
	uint64_t sink_mrs;	/* sink pieces registered for their request (undeclared) */
	uint64_t recv_mrs;	/* rendezvous READ destinations registered per message */
	/*
	 * Every ibv_reg_mr of the data path: the three per-message kinds above
	 * plus cache fills (misses). Steady state over declared memory: none.
	 */
	uint64_t reg_mrs;
	uint64_t cache_hits, cache_misses, cache_evictions;
};

void verbs_stats_get(struct verbs_stats *out);

#endif
