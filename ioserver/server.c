// SPDX-License-Identifier: MIT
/*
 * server.c - the I/O server core: listeners, the main loop that routes requests
 * (data ops to the io_uring threads, VOLUME_INFO answered inline; lib/rpc answers
 * PING itself), registration and an orderly stop (see ios.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cap.h"
#include "copy.h"
#include "fence.h"
#include "frame.h"
#include "io_request.h"
#include "ios.h"
#include "log.h"
#include "ms_clock.h"
#include "metrics.h"
#include "rdfs.pb-c.h"
#include "registration.h"
#include "rpc.h"
#include "rpc_metrics.h"
#include "server_id.h"
#include "volume.h"

#define IOS_MAX_LISTENERS	8
#define IOS_URL_MAX		256
/* How long the network must be idle, once stopping, before the replies count as flushed. */
#define IOS_DRAIN_POLL_MS	100

struct ios_server {
	struct volume *vol;
	struct rpc_server *rpc;
	struct io_pool *pool;
	struct registration *reg;
	struct server_id id;
	struct fence_table *fences;	/* checked by the pool, fed by FENCE and registration */
	struct copier *copier;		/* COPY: fetches sources, gives back WRITEs */
	char advertise[IOS_URL_MAX];
	uint64_t verifier;		/* boot verifier (ios_server_verifier) */
	atomic_bool stopping;
	struct rpc_metrics rpcm;	/* ios_options.metrics */
};

/*
 * Split "a,b" into a NULL-terminated array of at most IOS_MAX_LISTENERS
 * strings inside @buf. Returns the count or -EINVAL.
 */
static int split_urls(const char *list, char *buf, size_t len, const char **urls)
{
	int n = 0;
	char *save = NULL, *tok;

	if (snprintf(buf, len, "%s", list) >= (int)len)
		return -EINVAL;
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (n == IOS_MAX_LISTENERS)
			return -EINVAL;
		urls[n++] = tok;
	}
	urls[n] = NULL;
	return n ? n : -EINVAL;
}

/*
 * The URL peers can reach a listener bound at @bound by: a wildcard host
 * ("tcp://0.0.0.0:7100") becomes the loopback address, which is right for a
 * one-machine cluster; anything else needs --advertise.
 */
static int advertise_from_bound(const char *bound, char *out, size_t len)
{
	const char *host = strstr(bound, "://");
	const char *port = strrchr(bound, ':');
	size_t host_len;

	if (!host || !port || port < host + 3)
		return -EINVAL;
	host += 3;
	host_len = (size_t)(port - host);
	if ((host_len == 7 && !strncmp(host, "0.0.0.0", 7)) ||
	    (host_len == 4 && !strncmp(host, "[::]", 4)) || host_len == 0) {
		if (snprintf(out, len, "%.*s127.0.0.1%s", (int)(host - bound), bound, port) >= (int)len)
			return -EINVAL;
		return 0;
	}
	if (snprintf(out, len, "%s", bound) >= (int)len)
		return -EINVAL;
	return 0;
}

static void ios_volume_info(struct ios_server *s, struct rpc_request *req)
{
	Rdfs__VolumeInfoReply reply = RDFS__VOLUME_INFO_REPLY__INIT;
	uint32_t id = 0;

	reply.volume_uuid.data = (uint8_t *)volume_uuid(s->vol);
	reply.volume_uuid.len = VOLUME_UUID_LEN;
	reply.capacity_blocks = volume_capacity(s->vol);
	/* 0 until registered; the tools show it as "not registered". */
	if (server_id_get(&s->id, &id) == 0)
		reply.server_id = id;
	rpc_server_reply(req, 0, &reply.base, NULL, 0);
}

/* FENCE: only the metaserver (a peer that proved the server key) takes capabilities back. */
static void ios_fence(struct ios_server *s, struct rpc_request *req)
{
	Rdfs__FenceReq *m;
	int64_t now = ms_clock_now_ns();
	int ret = 0;

	if (!req->peer || req->peer->cls != AUTH_CLASS_SERVER) {
		log_warn(1200030,
			 "%s: FENCE from %s refused: not a server", xport_conn_peer(req->conn),
			 req->peer ? req->peer->id : "?");
		rpc_server_reply_error(req, -EPERM, "FENCE is for the metaserver only");
		return;
	}
	m = rdfs__fence_req__unpack(NULL, req->msg->hdr.body_len, req->msg->body);
	if (!m) {
		rpc_server_reply_error(req, -EBADMSG, "undecodable FenceReq");
		return;
	}
	for (size_t i = 0; i < m->n_fences && !ret; i++)
		ret = fence_add(s->fences, m->fences[i]->ino, m->fences[i]->gen, m->epoch,
				m->until_ns, now);
	rdfs__fence_req__free_unpacked(m, NULL);
	rpc_server_reply(req, ret, NULL, NULL, 0);
}

/* ------------------------------------------------------------ metrics */

static int ios_serves(uint16_t op)
{
	switch (op) {
	case RDFS_OP_READ:
	case RDFS_OP_WRITE:
	case RDFS_OP_IO_COMMIT:
	case RDFS_OP_ZERO:
	case RDFS_OP_VOLUME_INFO:
	case RDFS_OP_FENCE:
	case RDFS_OP_COPY:
		return 1;
	default:
		return 0;
	}
}

static void collect_pool_busy(void *arg, struct metrics_emitter *e)
{
	metrics_emit(e, NULL, io_pool_busy(((struct ios_server *)arg)->pool));
}

enum pool_value { PV_DISK, PV_CACHE, PV_PARTS, PV_RA_LOADS };

static void collect_pool(struct ios_server *s, enum pool_value what, struct metrics_emitter *e)
{
	struct ios_stats st;

	ios_server_stats(s, &st);
	metrics_emit(e, NULL, what == PV_DISK ? st.units_from_disk :
			      what == PV_CACHE ? st.units_from_cache :
			      what == PV_PARTS ? st.parts_sent : st.readahead_loads);
}

static void collect_units_disk(void *arg, struct metrics_emitter *e)
{
	collect_pool(arg, PV_DISK, e);
}

static void collect_units_cache(void *arg, struct metrics_emitter *e)
{
	collect_pool(arg, PV_CACHE, e);
}

static void collect_parts(void *arg, struct metrics_emitter *e)
{
	collect_pool(arg, PV_PARTS, e);
}

static void collect_ra_loads(void *arg, struct metrics_emitter *e)
{
	collect_pool(arg, PV_RA_LOADS, e);
}

static void collect_capacity(void *arg, struct metrics_emitter *e)
{
	metrics_emit(e, NULL,
		     (double)volume_capacity(((struct ios_server *)arg)->vol) * RDFS_BLOCK_SIZE);
}

static void collect_registered(void *arg, struct metrics_emitter *e)
{
	uint32_t id;

	metrics_emit(e, NULL, server_id_get(&((struct ios_server *)arg)->id, &id) == 0);
}

/*
 * The I/O server's families. Free space is the metaserver's to count (it owns
 * the volume's map: rdfs_ms_ioserver_free_bytes); refused capabilities are
 * the errors by errno (ESTALE: fenced, ENOLINK: no lease, EACCES, EKEYEXPIRED).
 */
static int ios_metrics(struct ios_server *s, struct metrics *r)
{
	static const struct {
		const char *name, *help;
		enum metrics_type type;
		metrics_collect_fn fn;
	} fams[] = {
		{ "rdfs_ios_pool_requests", "Requests the io_uring threads hold (queued, on the "
		  "disk or sending; write-back WRITEs until written).", METRICS_GAUGE,
		  collect_pool_busy },
		{ "rdfs_ios_read_units_disk_total", "READ units read from the volume.",
		  METRICS_COUNTER, collect_units_disk },
		{ "rdfs_ios_read_units_cache_total", "READ units served from the read-ahead cache "
		  "(read-ahead hits).", METRICS_COUNTER, collect_units_cache },
		{ "rdfs_ios_read_parts_total", "Partial READ replies sent (overlapped sends).",
		  METRICS_COUNTER, collect_parts },
		{ "rdfs_ios_readahead_loads_total", "Read-ahead segment loads started.",
		  METRICS_COUNTER, collect_ra_loads },
		{ "rdfs_ios_volume_capacity_bytes", "Size of the volume.", METRICS_GAUGE,
		  collect_capacity },
		{ "rdfs_ios_registered", "1 once registered with the metaserver (it has a server "
		  "id), else 0.", METRICS_GAUGE, collect_registered },
	};
	int ret = rpc_metrics_register(&s->rpcm, r, "rdfs_ios", ios_serves);

	for (size_t i = 0; !ret && i < sizeof(fams) / sizeof(fams[0]); i++)
		if (!metrics_collector(r, fams[i].name, fams[i].help, fams[i].type, NULL, 0,
				       fams[i].fn, s))
			ret = -EINVAL;
	if (!ret)
		rpc_server_set_metrics(s->rpc, &s->rpcm);
	return ret;
}

/* Route one request; the data ops go to the io_uring threads, which then own it. */
static void ios_dispatch(struct ios_server *s, struct rpc_request *req)
{
	switch (req->msg->hdr.opcode) {
	case RDFS_OP_READ:
	case RDFS_OP_WRITE:
	case RDFS_OP_IO_COMMIT:
	case RDFS_OP_ZERO:
		io_pool_submit(s->pool, req);
		return;
	case RDFS_OP_VOLUME_INFO:
		ios_volume_info(s, req);
		break;
	case RDFS_OP_FENCE:
		ios_fence(s, req);
		break;
	case RDFS_OP_COPY:
		copier_submit(s->copier, req);
		return;
	default:
		log_debug(1200031,
			  "%s: %s (%u) is not an I/O server operation", xport_conn_peer(req->conn),
			  frame_op_name(req->msg->hdr.opcode), req->msg->hdr.opcode);
		rpc_server_reply_error(req, -EOPNOTSUPP, "not an I/O server operation");
		break;
	}
	rpc_request_done(req);
}

/* COPYs whose source bytes have come: on to the io_uring threads as WRITEs. */
static void ios_copies_ready(struct ios_server *s)
{
	struct rpc_request req;

	while (copier_take_ready(s->copier, &req))
		io_pool_submit(s->pool, &req);
}

static void ios_wake(void *arg)
{
	rpc_server_wake(((struct ios_server *)arg)->rpc);
}

/*
 * After stop: keep the network turning until the io_uring threads have answered
 * everything they hold and the transport has had a quiet moment to flush the
 * replies, refusing whatever new requests arrive meanwhile.
 */
static void ios_drain(struct ios_server *s)
{
	struct rpc_request req;
	bool quiet = false;

	while (io_pool_busy(s->pool) || copier_busy(s->copier) || !quiet) {
		ios_copies_ready(s);
		switch (rpc_server_next(s->rpc, &req, IOS_DRAIN_POLL_MS)) {
		case RPC_SRV_REQUEST:
			rpc_server_reply_error(&req, -ESHUTDOWN, "I/O server is stopping");
			rpc_request_done(&req);
			quiet = false;
			break;
		case RPC_SRV_CLOSED:
			rpc_request_done(&req);
			break;
		case RPC_SRV_TIMEOUT:
			quiet = true;
			break;
		case RPC_SRV_WAKE:
			break;
		}
	}
}

int ios_server_run(struct ios_server *s)
{
	struct rpc_request req;
	int ret;

	while (!atomic_load(&s->stopping)) {
		ios_copies_ready(s);
		switch (rpc_server_next(s->rpc, &req, 1000)) {
		case RPC_SRV_REQUEST:
			ios_dispatch(s, &req);
			break;
		case RPC_SRV_CLOSED:
			/* No per-connection state: in-flight replies to it just fail. */
			rpc_request_done(&req);
			break;
		case RPC_SRV_WAKE:
		case RPC_SRV_TIMEOUT:
			break;
		}
	}
	ios_drain(s);
	{
		struct ios_stats st;

		ios_server_stats(s, &st);
		log_info(1200032,
			 "served %llu READs: %llu units from disk, %llu from the read-ahead cache "
			 "(%llu segments read ahead), %llu partial replies",
			 (unsigned long long)st.reads, (unsigned long long)st.units_from_disk,
			 (unsigned long long)st.units_from_cache,
			 (unsigned long long)st.readahead_loads, (unsigned long long)st.parts_sent);
	}
	ret = volume_sync(s->vol);
	if (ret)
		log_error(1200033, "final volume sync failed: %s", strerror(-ret));
	return ret;
}

void ios_server_stop(struct ios_server *s)
{
	atomic_store(&s->stopping, true);
	rpc_server_wake(s->rpc);
}

const char *ios_server_url(const struct ios_server *s, int i)
{
	return rpc_server_url(s->rpc, i);
}

const char *ios_server_advertise_url(const struct ios_server *s)
{
	return s->advertise;
}

uint64_t ios_server_verifier(const struct ios_server *s)
{
	return io_pool_verifier(s->pool);
}

void ios_server_stats(const struct ios_server *s, struct ios_stats *out)
{
	struct io_pool_stats ps;

	io_pool_get_stats(s->pool, &ps);
	out->reads = ps.reads;
	out->units_from_disk = ps.units_from_disk;
	out->units_from_cache = ps.units_from_cache;
	out->parts_sent = ps.parts_sent;
	out->readahead_loads = ps.ra_loads;
	out->readahead_loads_done = ps.ra_loads_done;
}

int ios_server_id(const struct ios_server *s, uint32_t *id)
{
	return server_id_get(&s->id, id);
}

static int ios_start_registration(struct ios_server *s, const struct ios_options *o,
				  bool pristine)
{
	struct registration_opts ro = {0};
	char name[IOS_URL_MAX];

	if (o->name && o->name[0]) {
		snprintf(name, sizeof(name), "%s", o->name);
	} else {
		const char *port = strrchr(s->advertise, ':');
		char host[128];

		if (gethostname(host, sizeof(host)))
			snprintf(host, sizeof(host), "ioserver");
		host[sizeof(host) - 1] = '\0';
		snprintf(name, sizeof(name), "%s%s", host, port ? port : "");
	}
	ro.metaserver = o->metaserver;
	ro.cap_key = o->cap_key;
	ro.url = s->advertise;
	ro.name = name;
	ro.domain = o->domain;
	ro.volume_uuid = volume_uuid(s->vol);
	ro.capacity_blocks = volume_capacity(s->vol);
	ro.pristine = pristine;
	ro.ping_interval_ms = o->ping_interval_ms > 0 ? o->ping_interval_ms : IOS_DEFAULT_PING_MS;
	ro.fences = s->fences;
	ro.id = &s->id;
	return registration_start(&ro, &s->reg);
}

int ios_server_create(const struct ios_options *o, struct ios_server **out)
{
	char listen_buf[IOS_MAX_LISTENERS * IOS_URL_MAX];
	const char *urls[IOS_MAX_LISTENERS + 1];
	struct io_pool_opts po = {0};
	struct ios_server *s;
	bool pristine = false;
	int ret;

	ret = split_urls(o->listen ? o->listen : IOS_DEFAULT_LISTEN, listen_buf,
			 sizeof(listen_buf), urls);
	if (ret < 0)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->vol = o->vol;
	atomic_init(&s->id.word, 0);
	atomic_init(&s->stopping, false);
	if (!o->metaserver)
		server_id_set(&s->id, o->fixed_server_id);
	ret = fence_table_create(&s->fences);
	if (ret) {
		free(s);
		return ret;
	}

	{
		struct auth_keys keys;

		auth_keys_derive(&keys, o->secret, o->cap_key);
		ret = rpc_server_create(urls, &keys, &s->rpc);
		auth_keys_clear(&keys);
	}
	if (ret)
		goto err_free;
	/*
	 * Far more than a client keeps in flight (its read-ahead and write-behind
	 * windows), few enough that the READs of one that never reads its
	 * replies, parked waiting for its share of the buffer pool, stay cheap.
	 */
	rpc_server_set_conn_budget(s->rpc, IOS_CONN_MAX_REQS, 0);
	rpc_server_set_stall_close(s->rpc, o->stall_close_ms);

	if (o->advertise && o->advertise[0]) {
		if (snprintf(s->advertise, sizeof(s->advertise), "%s", o->advertise) >=
		    (int)sizeof(s->advertise))
			ret = -EINVAL;
	} else {
		ret = advertise_from_bound(rpc_server_url(s->rpc, 0), s->advertise,
					   sizeof(s->advertise));
	}
	if (ret)
		goto err_rpc;

	po.vol = o->vol;
	po.cap_key = o->cap_key;
	po.id = &s->id;
	po.fences = s->fences;
	po.threads = o->io_threads > 0 ? o->io_threads : IOS_DEFAULT_IO_THREADS;
	po.send_mode = o->send_mode;
	po.unit_size = o->unit_size ? o->unit_size : IOS_DEFAULT_UNIT_SIZE;
	po.pipeline_depth = o->pipeline_depth > 0 ? o->pipeline_depth : IOS_DEFAULT_PIPELINE_DEPTH;
	if (o->readahead_cache_mb != IOS_READAHEAD_OFF)
		po.readahead_bytes = (uint64_t)(o->readahead_cache_mb > 0 ? o->readahead_cache_mb
						: IOS_DEFAULT_READAHEAD_MB) << 20;
	po.buffer_pool_bytes = o->buffer_pool_bytes;
	/*
	 * A fresh boot verifier per start: unstable writes acknowledged by an
	 * earlier process may be gone, and a client learns so by the change.
	 */
	ret = auth_random(&s->verifier, sizeof(s->verifier));
	if (ret)
		goto err_rpc;
	po.verifier = s->verifier;
	ret = io_pool_create(&po, &s->pool);
	if (ret) {
		log_error(1200034, "cannot set up the io_uring threads: %s%s", strerror(-ret),
			  ret == -EPERM || ret == -ENOSYS ? " (io_uring not allowed here?)" : "");
		goto err_rpc;
	}
	ret = copier_create(o->cap_key, o->metaserver, &s->id, s->advertise, ios_wake, s,
			    &s->copier);
	if (ret)
		goto err_pool;
	if (o->metrics && ios_metrics(s, o->metrics))
		log_warn(1200035,
			 "metrics: cannot register the I/O server's families; some are missing");

	/*
	 * The pristine flag leaves the superblock before anyone can write to the
	 * volume or a metaserver hears of it, not after the first registration:
	 * a crash between a REGISTER and the clearing could leave a volume with
	 * data that a fresh metaserver database takes for zeros. This process
	 * still knows the volume is untouched until its first registration
	 * succeeds and says so; a restart before then merely has every block
	 * zeroed before its first use.
	 */
	if (volume_is_pristine(s->vol)) {
		ret = volume_clear_pristine(s->vol);
		if (ret)
			log_warn(1200036, "cannot clear the volume's pristine flag (%s); it is offered as not pristine",
				 strerror(-ret));
		pristine = ret == 0;
	}
	if (o->metaserver) {
		ret = ios_start_registration(s, o, pristine);
		if (ret)
			goto err_pool;
	}
	*out = s;
	return 0;

err_pool:
	copier_destroy(s->copier);
	io_pool_stop(s->pool);
	io_pool_destroy(s->pool);
err_rpc:
	rpc_server_destroy(s->rpc);
err_free:
	fence_table_destroy(s->fences);
	free(s);
	return ret;
}

void ios_server_destroy(struct ios_server *s)
{
	if (!s)
		return;
	registration_stop(s->reg);
	copier_destroy(s->copier);
	io_pool_stop(s->pool);
	/* Sends still queued complete (cancelled) here and give their buffers back. */
	rpc_server_destroy(s->rpc);
	io_pool_destroy(s->pool);
	fence_table_destroy(s->fences);
	free(s);
}
