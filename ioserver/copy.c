// SPDX-License-Identifier: MIT
/*
 * copy.c - COPY: copy_file_range done between I/O servers (see copy.h).
 *
 * A COPY names a destination WRITE (its capability, blocks and bytes) and a
 * source (a READ capability, its blocks and head). The copy thread READs the
 * source bytes from the I/O server the capability names (this one too, over
 * its own listener: one path for both), then turns
 * the request into the stable WRITE it describes: the io_uring threads check
 * the destination capability, the fences and the range locks as for any
 * WRITE, and answer the client, tag and all. So a COPY is exactly a READ by
 * this server and a WRITE by the client, and every check of those applies.
 *
 * The source server accepts the capability from us because we proved the
 * server key; we accept only a source capability granted to the client that
 * asks (its holder), so a COPY cannot use anyone else's. Where we log in with
 * the server key is never the client's to say: a client-named address could
 * relay our answer to the metaserver's challenge and log in there as a
 * server. The address of a server id comes from the metaserver's registry
 * (SERVER_LIST, as the server) or is our own.
 *
 * Ownership: a queued job owns its request (reference on the connection)
 * until it is answered here or handed back. Source connections belong to the
 * copy thread alone: no lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cap.h"
#include "copy.h"
#include "frame.h"
#include "log.h"
#include "ms_clock.h"
#include "rdfs.pb-c.h"
#include "server_id.h"
#include "xport_module.h"

#define COPY_CONNS		16
#define COPY_CONNECT_MS		5000
/*
 * A COPY not written by then is answered -ETIMEDOUT and never written: its
 * client (30 s by default) may have given up and written the range since.
 */
#define COPY_DEADLINE_MS	20000

struct copy_job {
	struct rpc_request req;
	int64_t deadline_ms;		/* CLOCK_MONOTONIC */
	struct copy_job *next;
};

struct src_conn {
	uint32_t id;			/* the I/O server */
	char url[256];
	struct rpc_client *c;
};

struct copier {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct copy_job *queue, *queue_tail;	/* COPYs to fetch */
	struct copy_job *ready;			/* WRITEs for the main loop */
	int stop;
	atomic_int busy;
	struct auth_secret server_key;
	struct auth_secret cap_key;		/* checks capabilities before any fetch */
	char *metaserver;			/* NULL: no registry to ask */
	const struct server_id *self;
	char self_url[256];
	void (*wake)(void *arg);
	void *wake_arg;
	struct src_conn conns[COPY_CONNS];	/* the copy thread's */
	int next_evict;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fail(struct copy_job *j, int err, const char *why)
{
	rpc_server_reply_error(&j->req, err, why);
	rpc_request_done(&j->req);
	free(j);
}

/* The registered address of I/O server @id, from the metaserver; 0 or -errno. */
static int registry_url(struct copier *cp, uint32_t id, char *url, size_t len)
{
	Rdfs__ServerListReply *rep = NULL;
	struct rpc_client *ms;
	int ret;

	if (!cp->metaserver)
		return -EHOSTUNREACH;
	ret = rpc_client_connect(cp->metaserver, &cp->server_key, "server", COPY_CONNECT_MS, &ms);
	if (ret)
		return ret;
	ret = rpc_call(ms, RDFS_OP_SERVER_LIST, NULL, &rdfs__server_list_reply__descriptor,
		       (ProtobufCMessage **)&rep, COPY_CONNECT_MS);
	rpc_client_close(ms);
	if (ret)
		return ret;
	ret = -EHOSTUNREACH;
	for (size_t i = 0; i < rep->n_servers; i++)
		if (rep->servers[i]->server_id == id && rep->servers[i]->url) {
			snprintf(url, len, "%s", rep->servers[i]->url);
			ret = 0;
		}
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return ret;
}

/* A connection, as the server, to I/O server @id, reused while it works. */
static struct rpc_client *src_conn(struct copier *cp, uint32_t id, int *err)
{
	struct src_conn *sc = NULL;
	uint32_t self;
	char url[256];
	int ret;

	for (int i = 0; i < COPY_CONNS; i++)
		if (cp->conns[i].c && cp->conns[i].id == id) {
			sc = &cp->conns[i];
			break;
		}
	if (sc && rpc_client_broken(sc->c)) {
		/* it may have moved: ask the registry again */
		rpc_client_close(sc->c);
		sc->c = NULL;
	}
	if (sc && sc->c)
		return sc->c;
	if (server_id_get(cp->self, &self) == 0 && self == id)
		ret = snprintf(url, sizeof(url), "%s", cp->self_url) < (int)sizeof(url) ? 0 :
		      -ENAMETOOLONG;
	else
		ret = registry_url(cp, id, url, sizeof(url));
	if (ret) {
		*err = ret;
		return NULL;
	}
	if (!sc) {
		for (int i = 0; i < COPY_CONNS && !sc; i++)
			if (!cp->conns[i].c)
				sc = &cp->conns[i];
		if (!sc) {
			sc = &cp->conns[cp->next_evict];
			cp->next_evict = (cp->next_evict + 1) % COPY_CONNS;
			rpc_client_close(sc->c);
			sc->c = NULL;
		}
	}
	sc->id = id;
	snprintf(sc->url, sizeof(sc->url), "%s", url);
	ret = rpc_client_connect(url, &cp->server_key, "server", COPY_CONNECT_MS, &sc->c);
	if (ret) {
		sc->c = NULL;
		*err = ret;
		return NULL;
	}
	return sc->c;
}

/* The COPY's checks that need no capability key; 0 or -EINVAL with *@why. */
static int copy_valid(const Rdfs__CopyReq *m, const struct rpc_request *req, const char **why)
{
	const Rdfs__IoReq *d = m->dst;
	const Rdfs__CopySrc *s = m->src;

	*why = "COPY needs dst, src and their capabilities";
	if (!d || !s || !d->cap || !s->cap)
		return -EINVAL;
	*why = "COPY length is 1 byte to 4 MiB";
	if (d->length == 0 || d->length > COPY_MAX_BYTES)
		return -EINVAL;
	*why = "COPY source head/blocks do not match its length";
	if (s->head >= 4096 || s->block_count != (s->head + (uint64_t)d->length + 4095) / 4096)
		return -EINVAL;
	*why = "COPY source capability was granted to another peer";
	if (!req->peer || !s->cap->holder || strcmp(s->cap->holder, req->peer->id))
		return -EACCES;
	return 0;
}

/*
 * The source capability, checked here as its server will (a forged one
 * costs no connection), and the destination's, as far as it can be before
 * the WRITE (its fences are the WRITE's to check). 0, or -errno with *@why.
 */
static int copy_caps_ok(struct copier *cp, const Rdfs__CopyReq *m, const struct rpc_request *req,
			const char **why)
{
	const Rdfs__IoReq *d = m->dst;
	const Rdfs__CopySrc *s = m->src;
	int64_t now = ms_clock_now_ns();
	uint32_t self;
	int ret;

	ret = cap_check(&cp->cap_key, s->cap, s->cap->server_id, req->peer->id, RDFS_CAP_READ,
			s->first_block, s->block_count, now);
	*why = ret == -EKEYEXPIRED ? "COPY source capability expired" :
	       ret == -EBADMSG ? "forged COPY source capability" :
	       "COPY source capability does not cover the source";
	if (ret)
		return ret == -EBADMSG ? -EACCES : ret;
	if (server_id_get(cp->self, &self))
		return 0;
	ret = cap_check(&cp->cap_key, d->cap, self, req->peer->id, RDFS_CAP_WRITE, d->first_block,
			d->block_count, now);
	*why = ret == -EKEYEXPIRED ? "COPY destination capability expired" :
	       ret == -EBADMSG ? "forged COPY destination capability" :
	       "COPY destination capability does not grant writing these blocks here";
	return ret == -EBADMSG ? -EACCES : ret;
}

/* Fetch the source of @j and turn it into its WRITE; 0, or answered and freed. */
static int copy_fetch(struct copier *cp, struct copy_job *j)
{
	struct xport_msg *msg = j->req.msg;
	Rdfs__CopyReq *m = rdfs__copy_req__unpack(NULL, msg->hdr.body_len, msg->body);
	Rdfs__IoReq rd = RDFS__IO_REQ__INIT;
	struct rpc_pending *pend;
	struct rpc_reply reply;
	struct rpc_client *c;
	const char *why;
	uint8_t *body = NULL, *data = NULL;
	size_t blen;
	uint32_t len;
	int ret;

	if (!m) {
		fail(j, -EBADMSG, "undecodable CopyReq");
		return -EBADMSG;
	}
	ret = copy_valid(m, &j->req, &why);
	if (!ret)
		ret = copy_caps_ok(cp, m, &j->req, &why);
	if (!ret && mono_ms() >= j->deadline_ms) {
		ret = -ETIMEDOUT;
		why = "COPY waited too long for its turn";
	}
	if (ret) {
		rdfs__copy_req__free_unpacked(m, NULL);
		fail(j, ret, why);
		return ret;
	}
	len = m->dst->length;
	c = src_conn(cp, m->src->cap->server_id, &ret);
	if (!c) {
		log_warn(1200002,
			 "ino=%llu: COPY: cannot reach source I/O server %u: %s",
			 (unsigned long long)m->src->cap->ino, m->src->cap->server_id,
			 strerror(-ret));
		rdfs__copy_req__free_unpacked(m, NULL);
		fail(j, -EIO, "cannot reach the source I/O server");
		return -EIO;
	}
	rd.cap = m->src->cap;
	rd.first_block = m->src->first_block;
	rd.block_count = m->src->block_count;
	rd.head = m->src->head;
	rd.length = len;
	ret = rpc_call_start(c, RDFS_OP_READ, &rd.base, NULL, 0, &pend);
	if (!ret) {
		int64_t left = j->deadline_ms - mono_ms();

		ret = rpc_call_wait(pend, left > 0 ? (int)left : 1, &reply);
	}
	if (ret) {
		rdfs__copy_req__free_unpacked(m, NULL);
		fail(j, -EIO, "the source I/O server did not answer");
		return -EIO;
	}
	if (reply.status || rpc_reply_data_len(&reply) < len) {
		/* its refusal is the client's to handle: ESTALE refetches, EACCES fails */
		ret = reply.status ? reply.status : -EIO;
		rpc_reply_release(&reply);
		rdfs__copy_req__free_unpacked(m, NULL);
		fail(j, ret, "the source I/O server refused the READ");
		return ret;
	}
	data = xport_data_alloc(len);
	m->dst->stable = 1;	/* nothing of a COPY is left for a later IO_COMMIT */
	blen = rdfs__io_req__get_packed_size(m->dst);
	body = malloc(blen ? blen : 1);
	if (!data || !body) {
		rpc_reply_release(&reply);
		rdfs__copy_req__free_unpacked(m, NULL);
		if (data)
			xport_data_free(data, len);
		free(body);
		fail(j, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	rpc_reply_data_copy(&reply, 0, data, len);
	rpc_reply_release(&reply);
	if (mono_ms() >= j->deadline_ms) {
		/* its client may have written the range since it gave up: never write late */
		rdfs__copy_req__free_unpacked(m, NULL);
		xport_data_free(data, len);
		free(body);
		fail(j, -ETIMEDOUT, "COPY source came too late");
		return -ETIMEDOUT;
	}
	rdfs__io_req__pack(m->dst, body);
	rdfs__copy_req__free_unpacked(m, NULL);

	/* now it is the WRITE it describes */
	free(msg->body);
	msg->body = body;
	msg->hdr.body_len = (uint32_t)blen;
	xport_data_free(msg->data, msg->hdr.data_len);
	msg->data = data;
	msg->hdr.data_len = len;
	msg->hdr.opcode = RDFS_OP_WRITE;
	return 0;
}

static void *copy_main(void *arg)
{
	struct copier *cp = arg;

	pthread_mutex_lock(&cp->mu);
	for (;;) {
		struct copy_job *j;

		while (!cp->queue && !cp->stop)
			pthread_cond_wait(&cp->cv, &cp->mu);
		if (cp->stop)
			break;
		j = cp->queue;
		cp->queue = j->next;
		if (!cp->queue)
			cp->queue_tail = NULL;
		pthread_mutex_unlock(&cp->mu);

		if (copy_fetch(cp, j) == 0) {
			pthread_mutex_lock(&cp->mu);
			j->next = cp->ready;
			cp->ready = j;
			pthread_mutex_unlock(&cp->mu);
			cp->wake(cp->wake_arg);
		} else {
			atomic_fetch_sub(&cp->busy, 1);
		}
		pthread_mutex_lock(&cp->mu);
	}
	pthread_mutex_unlock(&cp->mu);
	return NULL;
}

int copier_create(const struct auth_secret *cap_key, const char *metaserver,
		  const struct server_id *self, const char *self_url, void (*wake)(void *arg),
		  void *arg, struct copier **out)
{
	struct copier *cp = calloc(1, sizeof(*cp));

	if (!cp)
		return -ENOMEM;
	if (metaserver && !(cp->metaserver = strdup(metaserver))) {
		free(cp);
		return -ENOMEM;
	}
	cp->self = self;
	snprintf(cp->self_url, sizeof(cp->self_url), "%s", self_url ? self_url : "");
	pthread_mutex_init(&cp->mu, NULL);
	pthread_cond_init(&cp->cv, NULL);
	atomic_init(&cp->busy, 0);
	cp->wake = wake;
	cp->wake_arg = arg;
	if (cap_key) {
		auth_server_key(cap_key, &cp->server_key);
		cp->cap_key = *cap_key;
	}
	if (pthread_create(&cp->thread, NULL, copy_main, cp)) {
		pthread_cond_destroy(&cp->cv);
		pthread_mutex_destroy(&cp->mu);
		free(cp->metaserver);
		free(cp);
		return -EAGAIN;
	}
	*out = cp;
	return 0;
}

void copier_submit(struct copier *cp, const struct rpc_request *req)
{
	struct copy_job *j = calloc(1, sizeof(*j));

	if (!j) {
		struct rpc_request r = *req;

		rpc_server_reply_error(&r, -ENOMEM, "out of memory");
		rpc_request_done(&r);
		return;
	}
	j->req = *req;
	j->deadline_ms = mono_ms() + COPY_DEADLINE_MS;
	atomic_fetch_add(&cp->busy, 1);
	pthread_mutex_lock(&cp->mu);
	if (cp->queue_tail)
		cp->queue_tail->next = j;
	else
		cp->queue = j;
	cp->queue_tail = j;
	pthread_cond_signal(&cp->cv);
	pthread_mutex_unlock(&cp->mu);
}

int copier_take_ready(struct copier *cp, struct rpc_request *out)
{
	struct copy_job *j;

	pthread_mutex_lock(&cp->mu);
	j = cp->ready;
	if (j)
		cp->ready = j->next;
	pthread_mutex_unlock(&cp->mu);
	if (!j)
		return 0;
	*out = j->req;
	free(j);
	atomic_fetch_sub(&cp->busy, 1);
	return 1;
}

int copier_busy(struct copier *cp)
{
	return atomic_load(&cp->busy);
}

void copier_destroy(struct copier *cp)
{
	struct copy_job *j, *next;

	if (!cp)
		return;
	pthread_mutex_lock(&cp->mu);
	cp->stop = 1;
	pthread_cond_signal(&cp->cv);
	pthread_mutex_unlock(&cp->mu);
	pthread_join(cp->thread, NULL);
	for (j = cp->queue; j; j = next) {
		next = j->next;
		fail(j, -ESHUTDOWN, "I/O server is stopping");
	}
	for (j = cp->ready; j; j = next) {
		next = j->next;
		fail(j, -ESHUTDOWN, "I/O server is stopping");
	}
	for (int i = 0; i < COPY_CONNS; i++)
		if (cp->conns[i].c)
			rpc_client_close(cp->conns[i].c);
	memset(&cp->server_key, 0, sizeof(cp->server_key));
	memset(&cp->cap_key, 0, sizeof(cp->cap_key));
	free(cp->metaserver);
	pthread_cond_destroy(&cp->cv);
	pthread_mutex_destroy(&cp->mu);
	free(cp);
}
