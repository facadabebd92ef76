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
	uint64_t windows;	/* memory windows bound over cached registrations */
	uint64_t send_mrs;	/* per-send registrations (memory nobody declared) */
	uint64_t sinks;		/* requests that exposed a sink (xport_post_send_sink) */
	uint64_t cache_hits, cache_misses, cache_evictions;
};

void verbs_stats_get(struct verbs_stats *out);

#endif
