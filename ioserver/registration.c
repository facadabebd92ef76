// SPDX-License-Identifier: MIT
/*
 * registration.c - the thread that keeps this I/O server registered with the
 * metaserver (see registration.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cap.h"
#include "frame.h"
#include "log.h"
#include "ms_clock.h"
#include "rdfs.pb-c.h"
#include "registration.h"
#include "rpc.h"
#include "volume.h"

#define REG_CONNECT_TIMEOUT_MS	3000
#define REG_CALL_TIMEOUT_MS	5000
/* Capped low: an I/O server that is not registered serves nothing, so after a
 * metaserver restart every second of backoff is a second of EIO for clients. */
#define REG_BACKOFF_MIN_MS	500
#define REG_BACKOFF_MAX_MS	2000
#define REG_POLL_MS		200

struct registration {
	char *metaserver;
	struct auth_secret server_key;	/* proves this is a server (auth.h) */
	char *url;
	char *name;
	char *domain;
	uint8_t uuid[VOLUME_UUID_LEN];
	uint64_t capacity_blocks;
	bool pristine;			/* until the first successful REGISTER */
	int ping_interval_ms;
	/* of the current registration (RegisterReply): 0 for none */
	int timeout_ms;
	uint64_t epoch;
	int64_t lease_until_ms;		/* fence_mono_ms(); INT64_MAX: no lease */
	struct server_id *id;
	struct fence_table *fences;

	pthread_t thread;
	pthread_mutex_t mutex;
	pthread_cond_t wake;		/* CLOCK_MONOTONIC */
	bool stopping;
};

/* Sleep @ms unless stopped first; returns true when stopping. */
static bool reg_sleep(struct registration *r, int ms)
{
	struct timespec until;
	bool stopping;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&r->mutex);
	while (!r->stopping &&
	       pthread_cond_timedwait(&r->wake, &r->mutex, &until) != ETIMEDOUT)
		;
	stopping = r->stopping;
	pthread_mutex_unlock(&r->mutex);
	return stopping;
}

static bool reg_stopping(struct registration *r)
{
	bool stopping;

	pthread_mutex_lock(&r->mutex);
	stopping = r->stopping;
	pthread_mutex_unlock(&r->mutex);
	return stopping;
}

/* REGISTER on @c; 0 and the id published, or -errno (logged). */
static int reg_register(struct registration *r, struct rpc_client *c)
{
	Rdfs__RegisterReq req = RDFS__REGISTER_REQ__INIT;
	Rdfs__RegisterReply *reply;
	struct rpc_pending *pending;
	struct rpc_reply rep;
	uint32_t old_id;
	int64_t sent_ms, sent_ns, recv_ns;
	int ret;

	req.url = r->url;
	req.volume_uuid.data = r->uuid;
	req.volume_uuid.len = VOLUME_UUID_LEN;
	req.capacity_blocks = r->capacity_blocks;
	req.name = r->name;
	req.domain = r->domain;
	req.pristine = r->pristine;

	sent_ms = fence_mono_ms();
	sent_ns = cap_now_ns();
	ret = rpc_call_start(c, RDFS_OP_REGISTER, &req.base, NULL, 0, &pending);
	if (!ret)
		ret = rpc_call_wait(pending, REG_CALL_TIMEOUT_MS, &rep);
	recv_ns = cap_now_ns();
	if (ret) {
		log_warn(1200020,
			 "metaserver %s: REGISTER failed: %s", r->metaserver, strerror(-ret));
		return ret;
	}
	if (rep.status) {
		Rdfs__Error *err = rdfs__error__unpack(NULL, rep.msg->hdr.body_len, rep.msg->body);

		ret = rep.status < 0 ? rep.status : -EPROTO;
		log_error(1200021, "metaserver %s refused registration: %s%s%s", r->metaserver,
			  strerror(-ret), err && err->message[0] ? ": " : "",
			  err ? err->message : "");
		if (err)
			rdfs__error__free_unpacked(err, NULL);
		rpc_reply_release(&rep);
		return ret;
	}
	reply = rdfs__register_reply__unpack(NULL, rep.msg->hdr.body_len, rep.msg->body);
	rpc_reply_release(&rep);
	if (!reply) {
		log_error(1200022, "metaserver %s: undecodable REGISTER reply", r->metaserver);
		return -EBADMSG;
	}
	if (server_id_get(r->id, &old_id) == 0 && old_id != reply->server_id)
		log_warn(1200023, "metaserver changed this server's id from %u to %u", old_id,
			 reply->server_id);
	/* capability and fence times are the metaserver's: from now on we read its clock */
	if (reply->realtime_ns) {
		ms_clock_learn(sent_ns, reply->realtime_ns, recv_ns);
		if (llabs(ms_clock_skew_ns()) > 1000000000ll)
			log_warn(1200024,
				 "this host's clock is %.1f s %s the metaserver's; capabilities "
				 "and fences go by the metaserver's",
				 llabs(ms_clock_skew_ns()) / 1e9,
				 ms_clock_skew_ns() > 0 ? "ahead of" : "behind");
	}
	/* every capability of an earlier registration (or metaserver) is fenced, before we serve */
	r->epoch = reply->epoch;
	r->timeout_ms = (int)reply->ioserver_timeout_ms;
	/* the metaserver's silence clock started when it got our REGISTER, after sent_ms */
	r->lease_until_ms = r->timeout_ms ? sent_ms + r->timeout_ms : INT64_MAX;
	if (r->fences) {
		fence_set_epoch(r->fences, reply->epoch);
		fence_set_lease(r->fences, r->epoch, r->lease_until_ms);
	}
	server_id_set(r->id, reply->server_id);
	log_info(1200025, "registered with metaserver %s as server %u (url %s, %llu blocks%s)",
		 r->metaserver, reply->server_id, r->url, (unsigned long long)r->capacity_blocks,
		 r->pristine ? ", pristine" : "");
	/* from now on clients may have written to it */
	r->pristine = false;
	rdfs__register_reply__free_unpacked(reply, NULL);
	return 0;
}

/*
 * Ping until the connection breaks, the lease lapses or we stop. The rpc
 * progress thread notices a closed connection at once, so it is polled often;
 * the PING is what catches a peer that vanished without closing, and what
 * tells the metaserver we are alive: with a timeout, it drops a registration
 * that sent nothing for that long, so we ping three times per timeout and a
 * registration whose lease lapsed is given up (fence.h: the data path stops
 * serving it by itself) and made again.
 */
static void reg_keepalive(struct registration *r, struct rpc_client *c)
{
	int interval = r->ping_interval_ms, call_ms = REG_CALL_TIMEOUT_MS;
	int since_ping = 0;

	if (r->timeout_ms && r->timeout_ms / 3 < interval)
		interval = r->timeout_ms / 3 > REG_POLL_MS ? r->timeout_ms / 3 : REG_POLL_MS;
	if (r->timeout_ms && r->timeout_ms < call_ms)
		call_ms = r->timeout_ms;
	while (!reg_sleep(r, REG_POLL_MS)) {
		int ret = 0;

		since_ping += REG_POLL_MS;
		if (since_ping >= interval && !rpc_client_broken(c)) {
			int64_t sent = fence_mono_ms();

			since_ping = 0;
			ret = rpc_call(c, RDFS_OP_PING, NULL, NULL, NULL, call_ms);
			/* Any reply, even an error status, shows the connection is alive. */
			if (ret != -ENOTCONN && ret != -ETIMEDOUT && r->timeout_ms) {
				r->lease_until_ms = sent + r->timeout_ms;
				if (r->fences)
					fence_set_lease(r->fences, r->epoch, r->lease_until_ms);
			}
		}
		if (r->timeout_ms && fence_mono_ms() > r->lease_until_ms) {
			log_warn(1200026,
				 "metaserver %s answered no PING for %d ms: it has dropped this "
				 "registration; serving nothing until registered again",
				 r->metaserver, r->timeout_ms);
			return;
		}
		if (ret == -ENOTCONN || ret == -ETIMEDOUT || rpc_client_broken(c)) {
			log_warn(1200027, "lost connection to metaserver %s (%s); reconnecting",
				 r->metaserver, strerror(ret == -ETIMEDOUT ? ETIMEDOUT : ENOTCONN));
			return;
		}
	}
}

static void *reg_main(void *arg)
{
	struct registration *r = arg;
	int backoff = REG_BACKOFF_MIN_MS;
	int last_err = 0;

	while (!reg_stopping(r)) {
		struct rpc_client *c = NULL;
		int ret = rpc_client_connect(r->metaserver, &r->server_key, "server",
					     REG_CONNECT_TIMEOUT_MS, &c);

		if (ret) {
			/* Repeating the same failure every backoff step would flood the log. */
			if (ret != last_err)
				log_warn(1200028, "cannot connect to metaserver %s: %s%s; retrying",
					 r->metaserver, strerror(-ret),
					 ret == -EACCES ? " (wrong capability key?)" : "");
			last_err = ret;
		} else {
			ret = reg_register(r, c);
			if (!ret) {
				backoff = REG_BACKOFF_MIN_MS;
				last_err = 0;
				reg_keepalive(r, c);
			}
			rpc_client_close(c);
		}
		if (reg_sleep(r, backoff))
			break;
		backoff = backoff * 2 > REG_BACKOFF_MAX_MS ? REG_BACKOFF_MAX_MS : backoff * 2;
	}
	return NULL;
}

static void reg_free(struct registration *r)
{
	memset(&r->server_key, 0, sizeof(r->server_key));
	free(r->metaserver);
	free(r->url);
	free(r->name);
	free(r->domain);
	free(r);
}

int registration_start(const struct registration_opts *o, struct registration **out)
{
	struct registration *r = calloc(1, sizeof(*r));
	pthread_condattr_t attr;
	int ret;

	if (!r)
		return -ENOMEM;
	r->metaserver = strdup(o->metaserver);
	r->url = strdup(o->url);
	r->name = strdup(o->name ? o->name : "");
	r->domain = strdup(o->domain ? o->domain : "");
	if (!r->metaserver || !r->url || !r->name || !r->domain) {
		reg_free(r);
		return -ENOMEM;
	}
	auth_server_key(o->cap_key, &r->server_key);
	memcpy(r->uuid, o->volume_uuid, VOLUME_UUID_LEN);
	r->capacity_blocks = o->capacity_blocks;
	r->pristine = o->pristine;
	r->ping_interval_ms = o->ping_interval_ms > 0 ? o->ping_interval_ms : 2000;
	r->lease_until_ms = INT64_MAX;
	r->id = o->id;
	r->fences = o->fences;

	pthread_mutex_init(&r->mutex, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&r->wake, &attr);
	pthread_condattr_destroy(&attr);

	ret = pthread_create(&r->thread, NULL, reg_main, r);
	if (ret) {
		pthread_cond_destroy(&r->wake);
		pthread_mutex_destroy(&r->mutex);
		reg_free(r);
		return -ret;
	}
	*out = r;
	return 0;
}

void registration_stop(struct registration *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mutex);
	r->stopping = true;
	pthread_cond_broadcast(&r->wake);
	pthread_mutex_unlock(&r->mutex);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->mutex);
	reg_free(r);
}
