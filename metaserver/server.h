/* SPDX-License-Identifier: MIT */
/*
 * server.h - the metaserver's network side: the rpc server, the main loop and
 * the worker pool that runs requests on the core.
 */
#ifndef RDFS_MS_SERVER_H
#define RDFS_MS_SERVER_H

#include <signal.h>
#include <stdint.h>

#include "auth.h"
#include "ms.h"

struct ms_server;

struct ms_server_opts {
	const char *const *listen;		/* NULL-terminated URLs */
	const struct auth_secret *secret;	/* cluster secret: the shared client key */
	const struct auth_secret *cap_key;	/* signs capabilities; server key derives from it */
	int threads;				/* workers; 0: 8 */
	int64_t cap_lifetime_ns;		/* 0: 600 s */
	volatile sig_atomic_t *stop;		/* optional: set (by a signal handler) to stop */
	int root_squash;			/* requests of uid 0 from clients run as 65534 */
	int64_t rebuild_interval_ms;		/* between the rebuilder's passes; 0: 10 s */
	/* an I/O server silent this long is down; 0: MS_DEFAULT_IOSERVER_TIMEOUT_MS, < 0: never */
	int ioserver_timeout_ms;
	/* a peer whose queued replies do not shrink this long is closed; 0: 60 s (rpc.h) */
	int stall_close_ms;
	/*
	 * Optional: count requests, connections, the worker queue and fences
	 * here (rdfs_ms_*); it must outlive the server.
	 */
	struct metrics *metrics;
};

#define MS_DEFAULT_IOSERVER_TIMEOUT_MS	6000

int ms_server_create(struct ms *ms, const struct ms_server_opts *o, struct ms_server **out);
/* The bound URL of listener @i. */
const char *ms_server_listen_url(const struct ms_server *srv, int i);
/*
 * Serve until ms_server_stop() or *o->stop; then stop taking requests, let the
 * workers finish the queued ones (each is replied to) and return 0.
 */
int ms_server_run(struct ms_server *srv);
/* Thread-safe. */
void ms_server_stop(struct ms_server *srv);
void ms_server_destroy(struct ms_server *srv);

#endif
