// SPDX-License-Identifier: MIT
/*
 * ms_metrics.c - what the metaserver's core shows to Prometheus (ms.h,
 * ms_metrics_register): the histograms ns_write() fills, and collectors that
 * read the registry of I/O servers, the inode count, the rebuilder's last
 * pass and the rebalance at each scrape.
 *
 * Collectors run on the HTTP server's thread and take the registry's and the
 * rebuilder's locks as `rdfs status` does, for a copy; no lock is held while
 * rendering, and none across anything slower than a memcpy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "metrics.h"
#include "ms_int.h"
#include "rdfs_frame.h"

/* Mutations one sync carried: powers of two up to beyond the worker count. */
static const uint64_t batch_bounds[] = { 1, 2, 4, 8, 16, 32, 64, 128 };

enum server_value {
	SV_UP,
	SV_DRAINING,
	SV_READ_ONLY,
	SV_CAPACITY,
	SV_FREE
};

static void collect_servers(struct ms *ms, enum server_value what, struct metrics_emitter *e)
{
	struct ms_server_info *a = NULL;
	char id[16];
	int n = ms_server_list(ms, &a);

	for (int i = 0; i < n; i++) {
		const char *labels[] = { id, a[i].name, a[i].label };
		double v = 0;

		snprintf(id, sizeof(id), "%u", a[i].id);
		switch (what) {
		case SV_UP:
			v = a[i].up;
			break;
		case SV_DRAINING:
			v = a[i].draining;
			break;
		case SV_READ_ONLY:
			v = a[i].read_only;
			break;
		case SV_CAPACITY:
			v = (double)a[i].capacity_blocks * RDFS_BLOCK_SIZE;
			break;
		case SV_FREE:
			v = (double)a[i].free_blocks * RDFS_BLOCK_SIZE;
			break;
		}
		metrics_emit(e, labels, v);
	}
	free(a);
}

static void collect_up(void *arg, struct metrics_emitter *e)
{
	collect_servers(arg, SV_UP, e);
}

static void collect_draining(void *arg, struct metrics_emitter *e)
{
	collect_servers(arg, SV_DRAINING, e);
}

static void collect_read_only(void *arg, struct metrics_emitter *e)
{
	collect_servers(arg, SV_READ_ONLY, e);
}

static void collect_capacity(void *arg, struct metrics_emitter *e)
{
	collect_servers(arg, SV_CAPACITY, e);
}

static void collect_free(void *arg, struct metrics_emitter *e)
{
	collect_servers(arg, SV_FREE, e);
}

static void collect_inodes(void *arg, struct metrics_emitter *e)
{
	struct ms *ms = arg;

	metrics_emit(e, NULL, (double)atomic_load(&ms->nfiles));
}

static void collect_rebuild_chunks(void *arg, struct metrics_emitter *e)
{
	static const char *const under[] = { "under_replicated" };
	static const char *const lost[] = { "lost" };
	static const char *const building[] = { "building" };
	struct ms_rebuild_stats st;

	ms_rebuild_status(arg, &st);
	metrics_emit(e, under, (double)st.chunks_under);
	metrics_emit(e, lost, (double)st.chunks_lost);
	metrics_emit(e, building, (double)st.chunks_building);
}

static void collect_rebuild_passes(void *arg, struct metrics_emitter *e)
{
	struct ms_rebuild_stats st;

	ms_rebuild_status(arg, &st);
	metrics_emit(e, NULL, (double)st.passes);
}

static void collect_unsynced(void *arg, struct metrics_emitter *e)
{
	uint64_t syncs, mutations, unsynced;

	ms_write_counts(arg, &syncs, &mutations, &unsynced);
	metrics_emit(e, NULL, (double)unsynced);
}

static void collect_rebalance_active(void *arg, struct metrics_emitter *e)
{
	struct ms_rebalance_status st;

	ms_rebalance_status(arg, &st);
	metrics_emit(e, NULL, st.active);
}

static void collect_rebalance_moved(void *arg, struct metrics_emitter *e)
{
	struct ms_rebalance_status st;

	ms_rebalance_status(arg, &st);
	metrics_emit(e, NULL, (double)st.bytes_moved);
}

static void collect_rebalance_outside(void *arg, struct metrics_emitter *e)
{
	struct ms_rebalance_status st;

	ms_rebalance_status(arg, &st);
	metrics_emit(e, NULL, st.outside);
}

int ms_metrics_register(struct ms *ms, struct metrics *r)
{
	static const char *const server_labels[] = { "server", "name" };
	static const char *const state_label[] = { "state" };
	static const char *const labelled[] = { "server", "name", "label" };
	struct metric *ok[14];
	int n = 0;

	ms->metrics.sync_seconds = metrics_histogram(
		r, "rdfs_ms_sync_write_duration_seconds",
		"Duration of one synced LevelDB write (it carries the batches of every "
		"mutation that was waiting: one fsync for all of them).",
		NULL, metrics_latency_bounds_ns, metrics_latency_nbounds, 1e9);
	ms->metrics.sync_batch = metrics_histogram(
		r, "rdfs_ms_sync_batch_mutations",
		"Mutations each synced LevelDB write carried (group commit): _count is the "
		"number of syncs, _sum the number of mutations made durable.",
		NULL, batch_bounds, sizeof(batch_bounds) / sizeof(batch_bounds[0]), 1);
	ok[n++] = ms->metrics.sync_seconds;
	ok[n++] = ms->metrics.sync_batch;
	ok[n++] = metrics_collector(r, "rdfs_ms_unsynced_writes_total",
				    "LevelDB writes made without a sync: allocations for writing, "
				    "made durable by the synced COMMIT that follows them.",
				    METRICS_COUNTER, NULL, 0, collect_unsynced, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_ioserver_up",
				    "1 if the I/O server is registered and heard from, else 0.",
				    METRICS_GAUGE, server_labels, 2, collect_up, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_ioserver_draining",
				    "1 if the I/O server is drained (rdfs drain), else 0.",
				    METRICS_GAUGE, server_labels, 2, collect_draining, ms);
	ok[n++] = metrics_collector(
		r, "rdfs_ms_ioserver_read_only",
		"1 if the I/O server is read-only (rdfs servers set --read-only: "
		"no new blocks go there), else 0; label is the admin's label.",
		METRICS_GAUGE, labelled, 3, collect_read_only, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_ioserver_capacity_bytes",
				    "Size of the I/O server's volume.", METRICS_GAUGE,
				    server_labels, 2, collect_capacity, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_ioserver_free_bytes",
				    "Bytes of the I/O server's volume that the allocator has free.",
				    METRICS_GAUGE, server_labels, 2, collect_free, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_inodes", "Inodes in the namespace.", METRICS_GAUGE,
				    NULL, 0, collect_inodes, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_rebuild_chunks",
				    "Chunks the rebuilder's last pass found under-replicated or "
				    "lost, and the chunk being copied now.",
				    METRICS_GAUGE, state_label, 1, collect_rebuild_chunks, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_rebuild_passes_total",
				    "Passes of the rebuilder over every chunk since the start.",
				    METRICS_COUNTER, NULL, 0, collect_rebuild_passes, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_rebalance_active",
				    "1 while an rdfs rebalance is in progress, else 0.",
				    METRICS_GAUGE, NULL, 0, collect_rebalance_active, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_rebalance_moved_bytes",
				    "Bytes the current (or last) rebalance has moved since it was "
				    "asked.",
				    METRICS_GAUGE, NULL, 0, collect_rebalance_moved, ms);
	ok[n++] = metrics_collector(r, "rdfs_ms_rebalance_servers_outside",
				    "I/O servers outside the rebalance's band at its last pass.",
				    METRICS_GAUGE, NULL, 0, collect_rebalance_outside, ms);
	for (int i = 0; i < n; i++)
		if (!ok[i])
			return -EINVAL;
	return 0;
}
