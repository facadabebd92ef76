// SPDX-License-Identifier: MIT
/*
 * server.c - main loop and worker pool.
 *
 * The main loop moves requests: rpc_server_next() -> a bounded queue ->
 * one of `threads` workers, which runs the operation on the core and replies
 * with rpc_server_reply(). Running many requests at once is what lets
 * LevelDB merge their synced writes into one fsync (group commit, ns.c).
 * When the queue is full the main loop waits: backpressure instead of memory.
 *
 * Quick reads (LOOKUP, GETATTR, ...: ops_is_quick_read) are answered by the
 * main loop itself. Handing one to a worker costs a wake-up and two context
 * switches, more than the read; on a busy machine each wake-up also waits for
 * a CPU, and a stat() or the kernel's permission check before a create waits
 * for all of it. They take no lock a writer holds across its sync, so the loop
 * never waits for a disk flush.
 *
 * A connection's state (struct conn_state: the core session) is counted: one
 * reference for the connection and one per queued request, so the session is
 * closed (handles released, orphans reclaimed) only after the connection is
 * gone and its last request has been answered, by the worker that drops the
 * last reference.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "ops.h"
#include "rpc.h"
#include "rpc_metrics.h"
#include "server.h"
#include "zero.h"

#define QUEUE_LEN	1024
#define LOOP_TICK_MS	200

struct conn_state {
	atomic_int refs;
	struct ms_session *sess;
	struct conn_state *prev, *next;	/* all live ones, under ms_server.mu */
};

struct job {
	struct rpc_request req;		/* req.msg NULL: the connection closed */
	struct conn_state *cs;
};

struct ms_server {
	struct ms *ms;
	struct rpc_server *rpc;
	struct ms_ops_ctx ops;
	int root_squash;		/* for peers of the shared client key */
	struct auth_secret cap_key;
	struct ms_zeroer *zeroer;	/* installed in ms while the server exists */
	volatile sig_atomic_t *stop_flag;
	atomic_int stop;

	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full;
	struct job queue[QUEUE_LEN];
	int head, count;
	int draining;

	int nthreads;
	pthread_t *threads;
	struct conn_state *conns;

	/* the rebuilder's thread: a pass, then a wait of rebuild_interval_ms (or less) */
	pthread_t rebuilder;
	int rebuilder_started;
	int rebuilder_stop;		/* under mu */
	pthread_cond_t rebuilder_cv;
	int64_t rebuild_interval_ms;

	/* ms_server_opts.metrics; families NULL without */
	struct rpc_metrics rpcm;
	struct metric *m_busy;		/* workers running a request */
	struct metric *m_fences;	/* files fenced */
	struct metric *m_fence_msgs;	/* FENCEs to I/O servers, {result} */
};

/* Chunks one rebuild pass repairs at most before the next scan. */
#define REBUILD_PASS_CHUNKS	256

static void *rebuilder_main(void *arg)
{
	struct ms_server *srv = arg;

	for (;;) {
		struct ms_rebuild_stats st;
		struct timespec ts;
		int64_t wait_ms = srv->rebuild_interval_ms;

		if (ms_rebuild_pass(srv->ms, REBUILD_PASS_CHUNKS, &st) == 0 && st.work_left)
			wait_ms = 0;	/* more to do: go on at once */
		if (st.chunks_under || st.chunks_lost)
			log_debug(1100063,
				  "rebuild: %llu chunks under-replicated, %llu lost, %llu rebuilt",
				  (unsigned long long)st.chunks_under,
				  (unsigned long long)st.chunks_lost,
				  (unsigned long long)st.chunks_rebuilt);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += wait_ms / 1000;
		ts.tv_nsec += (long)(wait_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&srv->mu);
		if (!srv->rebuilder_stop && wait_ms)
			pthread_cond_timedwait(&srv->rebuilder_cv, &srv->mu, &ts);
		if (srv->rebuilder_stop) {
			pthread_mutex_unlock(&srv->mu);
			return NULL;
		}
		pthread_mutex_unlock(&srv->mu);
	}
}

static void conn_state_put(struct ms_server *srv, struct conn_state *cs)
{
	if (atomic_fetch_sub(&cs->refs, 1) == 1) {
		pthread_mutex_lock(&srv->mu);
		if (cs->prev)
			cs->prev->next = cs->next;
		else
			srv->conns = cs->next;
		if (cs->next)
			cs->next->prev = cs->prev;
		pthread_mutex_unlock(&srv->mu);
		ms_session_close(srv->ms, cs->sess);
		free(cs);
	}
}

static void *worker_main(void *arg)
{
	struct ms_server *srv = arg;

	for (;;) {
		struct job j;

		pthread_mutex_lock(&srv->mu);
		while (srv->count == 0 && !srv->draining)
			pthread_cond_wait(&srv->not_empty, &srv->mu);
		if (srv->count == 0) {
			pthread_mutex_unlock(&srv->mu);
			return NULL;
		}
		j = srv->queue[srv->head];
		srv->head = (srv->head + 1) % QUEUE_LEN;
		srv->count--;
		pthread_cond_signal(&srv->not_full);
		pthread_mutex_unlock(&srv->mu);

		if (j.req.msg) {
			metrics_gauge_add(srv->m_busy, 0, 1);
			ops_dispatch(&srv->ops, j.cs->sess, &j.req);
			metrics_gauge_add(srv->m_busy, 0, -1);
		}
		rpc_request_done(&j.req);
		conn_state_put(srv, j.cs);
	}
}

static void enqueue(struct ms_server *srv, const struct job *j)
{
	pthread_mutex_lock(&srv->mu);
	while (srv->count == QUEUE_LEN)
		pthread_cond_wait(&srv->not_full, &srv->mu);
	srv->queue[(srv->head + srv->count) % QUEUE_LEN] = *j;
	srv->count++;
	pthread_cond_signal(&srv->not_empty);
	pthread_mutex_unlock(&srv->mu);
}

/* The fencer, counted: files fenced, and each I/O server's answer. */
static void fence_counted(void *arg, const uint32_t *servers, size_t n, uint64_t ino,
			  uint32_t gen, int *status)
{
	struct ms_server *srv = arg;

	ms_zeroer_fence(srv->zeroer, servers, n, ino, gen, status);
	metrics_add(srv->m_fences, 0, 0, 1);
	for (size_t i = 0; i < n; i++)
		metrics_add(srv->m_fence_msgs, status[i] ? 1 : 0, 0, 1);
}

static void collect_queue(void *arg, struct metrics_emitter *e)
{
	struct ms_server *srv = arg;
	int n;

	pthread_mutex_lock(&srv->mu);
	n = srv->count;
	pthread_mutex_unlock(&srv->mu);
	metrics_emit(e, NULL, n);
}

static int server_metrics(struct ms_server *srv, struct metrics *r)
{
	static const char *const results[] = { "ok", "failed" };
	static const struct metrics_dim result_dim = { "result", results, 2 };
	int ret = rpc_metrics_register(&srv->rpcm, r, "rdfs_ms", ops_is_served);

	srv->m_busy = metrics_gauge(r, "rdfs_ms_workers_busy",
				    "Worker threads running a request now.", NULL);
	srv->m_fences = metrics_counter(r, "rdfs_ms_fences_total",
					"Files fenced: capabilities of their older layout "
					"generations taken back.", NULL, NULL, 0);
	srv->m_fence_msgs = metrics_counter(r, "rdfs_ms_fence_messages_total",
					    "FENCE messages to I/O servers, by whether the server "
					    "took it.", &result_dim, NULL, 0);
	if (ret || !srv->m_busy || !srv->m_fences || !srv->m_fence_msgs ||
	    !metrics_collector(r, "rdfs_ms_queue_depth",
			       "Requests waiting for a worker thread.", METRICS_GAUGE, NULL, 0,
			       collect_queue, srv))
		return -EINVAL;
	rpc_server_set_metrics(srv->rpc, &srv->rpcm);
	return 0;
}

/* The handshake's last word: a node key is good only for the node's current generation. */
static int admit_peer(void *arg, const struct auth_peer *peer, const char **why)
{
	struct ms_server *srv = arg;
	struct ms_squash sq;

	if (strncmp(peer->id, "node:", 5) != 0 || ms_node_admit(srv->ms, peer->id + 5, &sq) == 0)
		return 0;
	*why = "authentication failed: unknown or revoked client node";
	return -EACCES;
}

/* What a new session's requests get: the key decides, never the request. */
static int session_squash(struct ms_server *srv, const struct auth_peer *peer,
			  struct ms_squash *sq)
{
	static const struct ms_squash none = { MS_SQUASH_NONE, 0, 0 };
	static const struct ms_squash root = { MS_SQUASH_ROOT, 65534, 65534 };

	if (peer->cls == AUTH_CLASS_SERVER) {
		*sq = none;
		return 0;
	}
	if (strncmp(peer->id, "node:", 5) == 0)
		return ms_node_admit(srv->ms, peer->id + 5, sq);
	*sq = srv->root_squash ? root : none;
	return 0;
}

/*
 * Main loop, after an admin request: every live node session takes its node's
 * policy as it is now (`rdfs node set --squash` holds at once, not only for
 * the node's next connection). A session of a revoked key keeps its policy:
 * rpc_server_readmit() has closed its connection already.
 */
static void refresh_node_squash(struct ms_server *srv)
{
	struct conn_state *cs;
	struct ms_squash sq;
	const char *id;

	pthread_mutex_lock(&srv->mu);
	for (cs = srv->conns; cs; cs = cs->next) {
		id = ms_session_identity(cs->sess);
		if (!strncmp(id, "node:", 5) && ms_node_admit(srv->ms, id + 5, &sq) == 0)
			ms_session_set_squash(cs->sess, &sq);
	}
	pthread_mutex_unlock(&srv->mu);
}

int ms_server_create(struct ms *ms, const struct ms_server_opts *o, struct ms_server **out)
{
	struct ms_server *srv = calloc(1, sizeof(*srv));
	int ret;

	if (!srv)
		return -ENOMEM;
	srv->ms = ms;
	srv->cap_key = *o->cap_key;
	srv->ops.ms = ms;
	srv->ops.cap_key = &srv->cap_key;
	srv->ops.cap_lifetime_ns = o->cap_lifetime_ns ? o->cap_lifetime_ns : 600ll * 1000000000;
	srv->ops.ioserver_timeout_ms = o->ioserver_timeout_ms == 0 ? MS_DEFAULT_IOSERVER_TIMEOUT_MS
				     : o->ioserver_timeout_ms > 0 ? o->ioserver_timeout_ms : 0;
	srv->stop_flag = o->stop;
	srv->root_squash = o->root_squash;
	srv->nthreads = o->threads > 0 ? o->threads : 8;
	pthread_mutex_init(&srv->mu, NULL);
	pthread_cond_init(&srv->not_empty, NULL);
	pthread_cond_init(&srv->not_full, NULL);
	ret = ms_zeroer_create(ms, o->cap_key, srv->ops.cap_lifetime_ns, &srv->zeroer);
	if (ret) {
		free(srv);
		return ret;
	}
	{
		struct auth_keys keys;

		auth_keys_derive(&keys, o->secret, o->cap_key);
		ret = rpc_server_create(o->listen, &keys, &srv->rpc);
		auth_keys_clear(&keys);
	}
	if (!ret) {
		rpc_server_set_admit(srv->rpc, admit_peer, srv);
		rpc_server_set_stall_close(srv->rpc, o->stall_close_ms);
	}
	if (ret) {
		ms_zeroer_destroy(srv->zeroer);
		free(srv);
		return ret;
	}
	srv->threads = calloc(srv->nthreads, sizeof(pthread_t));
	if (!srv->threads) {
		rpc_server_destroy(srv->rpc);
		ms_zeroer_destroy(srv->zeroer);
		free(srv);
		return -ENOMEM;
	}
	/* every LAYOUT from now on zeroes the recycled blocks it allocates */
	ms_set_zeroer(ms, ms_zeroer_zero, srv->zeroer);
	/* ... and fences every file whose blocks it frees */
	if (o->metrics && server_metrics(srv, o->metrics))
		log_warn(1100064,
			 "metrics: cannot register the server's families; some are missing");
	ms_set_fencer(ms, fence_counted, srv);
	/* removes reply before their fence; their blocks follow it (freeing.c) */
	if (ms_set_freeing_async(ms, 1))
		log_warn(1100068, "cannot start the freeing thread: removes wait for their fence");
	/* ... and the rebuilder copies between I/O servers through it */
	ms_set_copier(ms, ms_zeroer_copy, srv->zeroer);
	pthread_cond_init(&srv->rebuilder_cv, NULL);
	srv->rebuild_interval_ms = o->rebuild_interval_ms > 0 ? o->rebuild_interval_ms : 10000;
	if (pthread_create(&srv->rebuilder, NULL, rebuilder_main, srv) == 0)
		srv->rebuilder_started = 1;
	else
		log_error(1100065, "cannot start the rebuilder thread: copies will not be rebuilt");
	for (int i = 0; i < srv->nthreads; i++) {
		ret = pthread_create(&srv->threads[i], NULL, worker_main, srv);
		if (ret) {
			srv->nthreads = i;
			ms_server_destroy(srv);
			return -ret;
		}
	}
	*out = srv;
	return 0;
}

const char *ms_server_listen_url(const struct ms_server *srv, int i)
{
	return rpc_server_url(srv->rpc, i);
}

void ms_server_stop(struct ms_server *srv)
{
	atomic_store(&srv->stop, 1);
	rpc_server_wake(srv->rpc);
}

static int stopping(struct ms_server *srv)
{
	return atomic_load(&srv->stop) || (srv->stop_flag && *srv->stop_flag);
}

int ms_server_run(struct ms_server *srv)
{
	while (!stopping(srv)) {
		struct rpc_request req;
		enum rpc_server_event ev = rpc_server_next(srv->rpc, &req, LOOP_TICK_MS);
		struct conn_state *cs;
		struct job j;

		switch (ev) {
		case RPC_SRV_REQUEST:
			cs = rpc_conn_app(req.conn);
			if (!cs) {
				struct ms_squash sq;

				if (session_squash(srv, req.peer, &sq)) {
					/* revoked between its handshake and its first request */
					rpc_server_reply_error(&req, -EACCES, "client node revoked");
					rpc_request_done(&req);
					break;
				}
				cs = calloc(1, sizeof(*cs));
				if (cs)
					cs->sess = ms_session_new(srv->ms, req.peer->id);
				if (!cs || !cs->sess) {
					free(cs);
					rpc_server_reply_error(&req, -ENOMEM, "out of memory");
					rpc_request_done(&req);
					break;
				}
				ms_session_set_squash(cs->sess, &sq);
				atomic_store(&cs->refs, 1);	/* the connection's */
				rpc_conn_set_app(req.conn, cs);
				pthread_mutex_lock(&srv->mu);
				cs->next = srv->conns;
				if (cs->next)
					cs->next->prev = cs;
				srv->conns = cs;
				pthread_mutex_unlock(&srv->mu);
			}
			if (ops_is_quick_read(req.msg->hdr.opcode)) {
				/* the connection's reference keeps cs alive meanwhile */
				ops_dispatch(&srv->ops, cs->sess, &req);
				rpc_request_done(&req);
				break;
			}
			if (ops_is_admin(req.msg->hdr.opcode)) {
				ops_dispatch(&srv->ops, cs->sess, &req);
				rpc_request_done(&req);
				/* a revoked node or an older key of it is cut off now */
				rpc_server_readmit(srv->rpc);
				/* and a changed policy holds from the next request on */
				refresh_node_squash(srv);
				break;
			}
			atomic_fetch_add(&cs->refs, 1);
			j.req = req;
			j.cs = cs;
			enqueue(srv, &j);
			break;
		case RPC_SRV_CLOSED:
			cs = rpc_conn_app(req.conn);
			if (!cs) {
				rpc_request_done(&req);
				break;
			}
			rpc_conn_set_app(req.conn, NULL);
			/* the worker drops the connection's reference after earlier requests */
			j.req = req;
			j.cs = cs;
			enqueue(srv, &j);
			break;
		default:
			break;
		}
	}
	log_info(1100066, "stopping: finishing queued requests");
	pthread_mutex_lock(&srv->mu);
	srv->draining = 1;
	pthread_cond_broadcast(&srv->not_empty);
	pthread_mutex_unlock(&srv->mu);
	for (int i = 0; i < srv->nthreads; i++)
		pthread_join(srv->threads[i], NULL);
	srv->nthreads = 0;
	return 0;
}

void ms_server_destroy(struct ms_server *srv)
{
	if (!srv)
		return;
	if (srv->nthreads) {
		pthread_mutex_lock(&srv->mu);
		srv->draining = 1;
		pthread_cond_broadcast(&srv->not_empty);
		pthread_mutex_unlock(&srv->mu);
		for (int i = 0; i < srv->nthreads; i++)
			pthread_join(srv->threads[i], NULL);
	}
	if (srv->rebuilder_started) {
		pthread_mutex_lock(&srv->mu);
		srv->rebuilder_stop = 1;
		pthread_cond_broadcast(&srv->rebuilder_cv);
		pthread_mutex_unlock(&srv->mu);
		pthread_join(srv->rebuilder, NULL);
		srv->rebuilder_started = 0;
	}
	rpc_server_destroy(srv->rpc);
	ms_set_copier(srv->ms, NULL, NULL);
	ms_set_zeroer(srv->ms, NULL, NULL);
	ms_set_fencer(srv->ms, NULL, NULL);
	ms_zeroer_destroy(srv->zeroer);
	/* connections still open at shutdown: release their handles now */
	while (srv->conns) {
		struct conn_state *cs = srv->conns;

		srv->conns = cs->next;
		ms_session_close(srv->ms, cs->sess);
		free(cs);
	}
	free(srv->threads);
	pthread_cond_destroy(&srv->rebuilder_cv);
	pthread_cond_destroy(&srv->not_empty);
	pthread_cond_destroy(&srv->not_full);
	pthread_mutex_destroy(&srv->mu);
	memset(&srv->cap_key, 0, sizeof(srv->cap_key));
	free(srv);
}
