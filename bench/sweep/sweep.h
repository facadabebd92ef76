/* SPDX-License-Identifier: MIT */
/*
 * sweep.h - rdfs-sweep: the request-size sweep against one I/O server (gmblock's
 * figures 2 and 5) and the two limits it is judged by, the volume's own O_DIRECT
 * read rate and the loopback network rate, measured the same way.
 *
 * A pass reads, for each request size, a fixed budget of bytes with a fixed
 * number of requests outstanding, walking the test file forward so that no block
 * is read twice in one pass. Pass K uses its own region of the file, so the
 * passes of one run (whole, overlap, disk; several runs) never read a block
 * another pass read: every request reaches the disk. With several streams,
 * stream k walks the k-th slice of the pass's region.
 */
#ifndef RDFS_SWEEP_H
#define RDFS_SWEEP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rdfs.pb-c.h"
#include "rdfs_client.h"

#define SWEEP_OK	0
#define SWEEP_FAIL	1
#define SWEEP_USAGE	2

#define SWEEP_MAX_SIZES	32
#define SWEEP_BLOCK	4096u
/* Volume layout (lib/frame.h's contract): protocol block b is at this + b * 4096. */
#define SWEEP_VOLUME_DATA_OFFSET	(1ull << 20)

/* What every measuring pass is told. */
struct sweep_plan {
	uint64_t sizes[SWEEP_MAX_SIZES];	/* request sizes, bytes, ascending */
	int nsizes;
	uint64_t bytes_per_size;	/* at least this much read per size */
	uint64_t min_requests;		/* and at least this many requests */
	int depth;			/* requests outstanding (per stream) */
	int streams;			/* ioserver: concurrent sequential readers */
	int shared_connection;		/* ioserver: all streams on one connection */
	int pass;			/* which region of the file */
	int run;			/* recorded only */
	const char *label;		/* the record's "mode" */
	int verify;			/* check every byte read against the pattern */
	uint64_t seed;
};

/* The file the sweep reads, as contiguous runs of volume blocks. */
struct sweep_run {
	uint64_t file_offset;		/* bytes */
	uint64_t length;		/* bytes */
	uint64_t block;			/* volume block of file_offset */
	const Rdfs__Capability *cap;	/* covers the whole run */
};

struct sweep_target {
	struct sweep_run *runs;
	size_t nruns;
	uint64_t size;			/* file size */
	uint32_t server_id;
	char server_url[256];
	Rdfs__LayoutReply **replies;	/* kept: they own the capabilities */
	size_t nreplies;
};

/* One measured point. */
struct sweep_result {
	uint64_t request_bytes;
	uint64_t requests;
	uint64_t bytes;
	double seconds;			/* requests only; verification excluded */
	double mib_per_s;
};

/* Connection settings shared by the subcommands. */
struct sweep_env {
	struct rdfs_client *client;
	const char *metaserver;
	struct auth_secret secret;
	int timeout_ms;
	const char *path;		/* the test file, a path in the rdfs namespace */
	const char *volume;		/* the I/O server's volume file (disk; cache dropping) */
	FILE *json;			/* records go here (JSON Lines), or NULL */
	const char *net_ns;		/* net: the responder's network namespace, or NULL */
	const char *net_addr;		/* net: the IPv4 address it listens on (127.0.0.1) */
};

/* ---- plan.c */
uint64_t plan_requests(const struct sweep_plan *p, uint64_t size);
/* One stream's share of them (all of them with one stream). */
uint64_t plan_stream_requests(const struct sweep_plan *p, uint64_t size);
/* Bytes one pass may walk over (the budget of every size, plus run-break slack). */
uint64_t plan_pass_bytes(const struct sweep_plan *p);
int plan_parse_sizes(struct sweep_plan *p, const char *list);
double now_seconds(void);
void result_finish(struct sweep_result *r);
void result_emit(const struct sweep_env *env, const struct sweep_plan *p,
		 const struct sweep_result *r, const char *extra_json);

/* ---- pattern.c: the bytes of the test file, a function of the file offset */
void pattern_fill(void *buf, size_t len, uint64_t file_offset, uint64_t seed);
/* 0, or -EILSEQ after printing where the first wrong byte is. */
int pattern_check(const void *buf, size_t len, uint64_t file_offset, uint64_t seed,
		  const char *what);

/* ---- walk.c: positions of one pass's requests in the file */
struct sweep_walk {
	const struct sweep_target *t;
	size_t run;
	uint64_t pos;			/* next file offset */
	uint64_t end;			/* end of the pass's region */
};
void walk_init(struct sweep_walk *w, const struct sweep_target *t, uint64_t start, uint64_t end);
/* The run holding [pos, pos + len) for the next request, or NULL when the region is used up. */
const struct sweep_run *walk_next(struct sweep_walk *w, uint64_t len, uint64_t *file_offset);

/* ---- target.c */
int target_prepare(struct sweep_env *env, uint64_t size, uint64_t seed);
int target_open(struct sweep_env *env, struct sweep_target *t);
void target_free(struct sweep_target *t);
/* Drop the volume's pages from the page cache (a buffered I/O server, the host side). */
void target_drop_volume_cache(const struct sweep_env *env);

/* ---- the measurements; each returns 0, or SWEEP_FAIL after saying why */
int sweep_ioserver(struct sweep_env *env, const struct sweep_plan *p);
int sweep_disk(struct sweep_env *env, const struct sweep_plan *p);
int sweep_net(struct sweep_env *env, const struct sweep_plan *p);
int sweep_netrpc(struct sweep_env *env, const struct sweep_plan *p);
/* fs.c: whole files through a file system; @paths NULL-terminated, one thread each. */
int sweep_fs(struct sweep_env *env, const struct sweep_plan *p, char **paths, int write,
	     int direct);
/* The bytes of one file a fs-read/fs-write pass covers. */
uint64_t fs_file_bytes(const struct sweep_plan *p);

#endif
