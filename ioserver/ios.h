/* SPDX-License-Identifier: MIT */
/*
 * ios.h - the I/O server core: serves one volume over rpc (READ, WRITE,
 * IO_COMMIT, ZERO, VOLUME_INFO; PING is lib/rpc's) and keeps it registered with the
 * metaserver.
 *
 * main.c is only option parsing around this; the unit tests run the same core
 * in-process on port 0, with a fixed server id instead of a metaserver.
 *
 * Lifecycle: ios_server_create() binds the listeners, starts the io_uring
 * threads (io_request.h), clears the volume's pristine flag (offering the volume as pristine
 * to the metaserver when it was set, see volume.h) and starts the
 * registration thread; ios_server_run() is the main loop and
 * returns after ios_server_stop() (any thread, not a signal handler) once every
 * accepted request is answered and the volume is synced; ios_server_destroy()
 * frees the rest. The volume stays the caller's.
 */
#ifndef RDFS_IOS_H
#define RDFS_IOS_H

#include <stdint.h>

#include "auth.h"

struct volume;
struct ios_server;

#define IOS_DEFAULT_LISTEN		"tcp://0.0.0.0:7100"
#define IOS_DEFAULT_IO_THREADS		2
#define IOS_CONN_MAX_REQS		128	/* requests per connection in progress */
#define IOS_DEFAULT_PING_MS		2000
#define IOS_DEFAULT_UNIT_SIZE		(256u << 10)
/*
 * One unit read on the disk per READ, the next submitted before the last is
 * sent: measured here (bench/sweep/run --pipeline-depths), a disk that serves
 * concurrent reads side by side delivers a request's units all at once, and
 * the network has nothing to overlap with; it also reads slower with more
 * queued (O_DIRECT 1 MiB: 770 MiB/s at depth 1, 557 at depth 4).
 */
#define IOS_DEFAULT_PIPELINE_DEPTH	1
#define IOS_DEFAULT_READAHEAD_MB	256
/* ios_options.readahead_cache_mb for no server read-ahead (0 means the default). */
#define IOS_READAHEAD_OFF		(-1)

/* How a READ goes on the wire; the I/O pool (io_request.h) takes it as is. */
enum ios_send_mode {
	IOS_SEND_OVERLAP = 0,		/* each unit on the wire as soon as it is read (default) */
	IOS_SEND_WHOLE,			/* read the whole request, then reply in one frame */
};

struct ios_options {
	struct volume *vol;			/* opened by the caller, not owned */
	const char *listen;			/* comma-separated URLs; NULL: IOS_DEFAULT_LISTEN */
	const char *advertise;			/* URL given to the metaserver; NULL: derived */
	/*
	 * Metaserver URL to register with. NULL: no registration; the server uses
	 * fixed_server_id from the start (tests, tools).
	 */
	const char *metaserver;
	uint32_t fixed_server_id;
	const char *name;			/* NULL: "hostname:port" */
	const char *domain;			/* failure domain; NULL: none */
	const struct auth_secret *secret;	/* cluster secret: the shared client key */
	const struct auth_secret *cap_key;	/* capability key; server and node keys derive from it */
	int io_threads;				/* io_uring threads; 0: IOS_DEFAULT_IO_THREADS */
	int ping_interval_ms;			/* 0: IOS_DEFAULT_PING_MS */
	enum ios_send_mode send_mode;
	uint32_t unit_size;			/* READ unit, a multiple of 4096; 0: default */
	int pipeline_depth;			/* unit reads in flight per READ; 0: default */
	int readahead_cache_mb;			/* 0: default; IOS_READAHEAD_OFF: none */
	uint64_t buffer_pool_bytes;		/* READ buffer memory; 0: derived */
	/* a peer whose queued replies do not shrink this long is closed; 0: 60 s (rpc.h) */
	int stall_close_ms;
	/*
	 * Optional: count requests, connections, the pipeline and the volume
	 * here (rdfs_ios_*, docs/DESIGN.md "Metrics"); it must outlive the server
	 * and be rendered only while the server exists.
	 */
	struct metrics *metrics;
};

/* -errno: listener bind failures (-EADDRINUSE, -EINVAL for a bad URL), -ENOMEM. */
int ios_server_create(const struct ios_options *o, struct ios_server **out);
/* Serve until ios_server_stop(); 0, or -errno if the volume's final sync failed. */
int ios_server_run(struct ios_server *s);
/* Thread-safe; ios_server_run() finishes the requests it has accepted, then returns. */
void ios_server_stop(struct ios_server *s);
void ios_server_destroy(struct ios_server *s);

/* The bound URL of listener @i (port 0 resolved). */
const char *ios_server_url(const struct ios_server *s, int i);
/* The URL given to the metaserver. */
const char *ios_server_advertise_url(const struct ios_server *s);
/* 0 and the metaserver-assigned (or fixed) id, -EAGAIN before the first registration. */
int ios_server_id(const struct ios_server *s, uint32_t *id);

/*
 * The boot verifier, random for each ios_server_create(), sent in every WRITE
 * and IO_COMMIT reply.
 */
uint64_t ios_server_verifier(const struct ios_server *s);

/* Counters of the READ pipeline and the read-ahead cache since start. */
struct ios_stats {
	uint64_t reads;			/* READ requests */
	uint64_t units_from_disk;	/* READ units read from the volume */
	uint64_t units_from_cache;	/* READ units served from the read-ahead cache */
	uint64_t parts_sent;		/* partial replies (RDFS_FRAME_MORE) */
	uint64_t readahead_loads;	/* read-ahead segment loads started */
	uint64_t readahead_loads_done;	/* ... and finished */
};

void ios_server_stats(const struct ios_server *s, struct ios_stats *out);

#endif
