// SPDX-License-Identifier: MIT
/*
 * client.c - the client's connections: the metaserver and the I/O servers.
 *
 * A connection is never repaired: when an rpc_client breaks it is replaced by a
 * new one on the next call, and the old one is closed when its last user lets
 * go. Metaserver calls wait (bounded) for the metaserver to come back; I/O-server
 * calls fail with -EIO at once, so a dead I/O server never hangs a client.
 * Open files learn of a new metaserver connection through its generation and
 * re-OPEN themselves (their handles died with the old connection).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"
#include "frame.h"
#include "log.h"

const uint8_t rdfs_zero_block[RDFS_BLOCK_SIZE];

int rpc_errno(int ret)
{
	switch (ret) {
	case -ENOTCONN:
	case -ETIMEDOUT:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -EPIPE:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ECANCELED:
		return -EIO;
	}
	return ret;
}

void peer_init(struct rdfs_peer *p, const char *url, uint32_t server_id)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->connect_lock, NULL);
	if (url)
		snprintf(p->url, sizeof(p->url), "%s", url);
	p->server_id = server_id;
}

/* Drop a reference under the peer's lock; *@dead gets the connection to close after it. */
static void conn_put_locked(struct rdfs_conn *cn, struct rdfs_conn **dead)
{
	*dead = NULL;
	if (--cn->refs == 0)
		*dead = cn;
}

static void conn_free(struct rdfs_conn *cn)
{
	if (!cn)
		return;
	rpc_client_close(cn->rpc);
	free(cn);
}

void peer_destroy(struct rdfs_peer *p)
{
	struct rdfs_conn *dead = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->conn) {
		conn_put_locked(p->conn, &dead);
		p->conn = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	conn_free(dead);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->connect_lock);
}

void peer_put(struct rdfs_peer *p, struct rdfs_conn *cn)
{
	struct rdfs_conn *dead;

	pthread_mutex_lock(&p->lock);
	conn_put_locked(cn, &dead);
	pthread_mutex_unlock(&p->lock);
	conn_free(dead);
}

/* The current connection if it is alive, referenced; else detach a broken one. */
static struct rdfs_conn *peer_current(struct rdfs_peer *p, struct rdfs_conn **dead)
{
	struct rdfs_conn *cn;

	*dead = NULL;
	cn = p->conn;
	if (cn && rpc_client_broken(cn->rpc)) {
		p->conn = NULL;
		conn_put_locked(cn, dead);
		cn = NULL;
	}
	if (cn)
		cn->refs++;
	return cn;
}

void peer_set_url(struct rdfs_peer *p, const char *url)
{
	struct rdfs_conn *dead = NULL;

	pthread_mutex_lock(&p->lock);
	if (strcmp(p->url, url) != 0) {
		snprintf(p->url, sizeof(p->url), "%s", url);
		if (p->conn) {
			conn_put_locked(p->conn, &dead);
			p->conn = NULL;
		}
	}
	pthread_mutex_unlock(&p->lock);
	conn_free(dead);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int peer_get(struct rdfs_client *c, struct rdfs_peer *p, int connect_ms, int wait_ms,
	     struct rdfs_conn **out)
{
	struct rdfs_conn *cn, *dead;
	struct rpc_client *rpc = NULL;
	int64_t deadline = mono_ms() + wait_ms;
	char url[sizeof(p->url)];
	int ret;

	pthread_mutex_lock(&p->lock);
	cn = peer_current(p, &dead);
	pthread_mutex_unlock(&p->lock);
	conn_free(dead);
	if (cn) {
		*out = cn;
		return 0;
	}

	pthread_mutex_lock(&p->connect_lock);
	for (;;) {
		/* another thread may have connected while we waited for the lock */
		pthread_mutex_lock(&p->lock);
		cn = peer_current(p, &dead);
		snprintf(url, sizeof(url), "%s", p->url);
		pthread_mutex_unlock(&p->lock);
		conn_free(dead);
		if (cn) {
			ret = 0;
			break;
		}
		if (!url[0]) {
			ret = -EIO;
			break;
		}
		ret = rpc_client_connect(url, &c->opts.secret, c->role, connect_ms, &rpc);
		if (ret == 0) {
			cn = calloc(1, sizeof(*cn));
			if (!cn) {
				rpc_client_close(rpc);
				ret = -ENOMEM;
				break;
			}
			cn->rpc = rpc;
			cn->refs = 2;	/* the peer's and the caller's */
			pthread_mutex_lock(&p->lock);
			cn->gen = ++p->gen;
			p->conn = cn;
			pthread_mutex_unlock(&p->lock);
			break;
		}
		if (ret == -EACCES || mono_ms() + 200 > deadline) {
			log_debug(1600001, "cannot connect to %s: %s", url, strerror(-ret));
			if (ret != -EACCES)
				ret = -EIO;
			break;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000000L }, NULL);
	}
	pthread_mutex_unlock(&p->connect_lock);
	*out = cn;
	return cn ? 0 : ret;
}

struct rdfs_peer *ios_peer(struct rdfs_client *c, uint32_t server_id, const char *url)
{
	struct rdfs_peer *p = NULL, **grown;
	size_t i;

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < c->n_ios; i++) {
		if (c->ios[i]->server_id == server_id) {
			p = c->ios[i];
			break;
		}
	}
	if (!p) {
		grown = realloc(c->ios, (c->n_ios + 1) * sizeof(*grown));
		p = malloc(sizeof(*p));
		if (!grown || !p) {
			if (grown)
				c->ios = grown;
			free(p);
			pthread_mutex_unlock(&c->lock);
			return NULL;
		}
		c->ios = grown;
		peer_init(p, url, server_id);
		c->ios[c->n_ios++] = p;
	}
	pthread_mutex_unlock(&c->lock);
	/* a restarted I/O server may come back at another address */
	if (url && url[0])
		peer_set_url(p, url);
	return p;
}

void peer_suspect(struct rdfs_peer *p)
{
	__atomic_store_n(&p->suspect_until_ms, io_mono_ms() + RDFS_SUSPECT_MS, __ATOMIC_RELAXED);
}

static int ms_conn(struct rdfs_client *c, struct rdfs_conn **out)
{
	int wait = c->opts.reconnect_ms > 0 ? c->opts.reconnect_ms : RDFS_RECONNECT_MS;

	return peer_get(c, &c->ms, c->opts.timeout_ms, wait, out);
}

/*
 * How long a call waits for a restarted metaserver's I/O servers: longer than
 * its default startup_wait (30 s), after which it allocates on those it has.
 */
#define RDFS_NOT_READY_MS	45000

/*
 * A metaserver that has just started answers -EAGAIN while its I/O servers
 * register again (it did nothing): wait and ask again, for up to the longer
 * of the reconnect wait and RDFS_NOT_READY_MS. 1: ask again.
 */
static int ms_retry_not_ready(struct rdfs_client *c, int ret, int64_t *deadline, int *delay_ms)
{
	int wait = c->opts.reconnect_ms > RDFS_NOT_READY_MS ? c->opts.reconnect_ms
							     : RDFS_NOT_READY_MS;
	struct timespec ts;
	int64_t now, left;

	if (ret != -EAGAIN)
		return 0;
	now = mono_ms();
	if (!*deadline) {
		*deadline = now + wait;
		log_info(1600002,
			 "metaserver %s waits for its I/O servers to register; retrying for up "
			 "to %d ms", c->ms_url, wait);
	}
	left = *deadline - now;
	if (left <= 0)
		return 0;
	if (*delay_ms > left)
		*delay_ms = (int)left;
	ts.tv_sec = *delay_ms / 1000;
	ts.tv_nsec = (long)(*delay_ms % 1000) * 1000000;
	nanosleep(&ts, NULL);
	*delay_ms = *delay_ms * 2 > 1000 ? 1000 : *delay_ms * 2;
	return 1;
}

static int ms_call_core(struct rdfs_client *c, uint16_t op, const ProtobufCMessage *req,
			const ProtobufCMessageDescriptor *desc, void *resp, unsigned int flags,
			uint64_t *gen, int timeout_ms)
{
	struct rdfs_conn *cn;
	int64_t deadline = 0;
	int ret, attempt, delay = 50;

	for (attempt = 0; attempt < 2; attempt++) {
		ret = ms_conn(c, &cn);
		if (ret)
			return ret;
		if (gen)
			*gen = cn->gen;
		ms_count(c, op);
		ret = rpc_call(cn->rpc, op, req, desc, (ProtobufCMessage **)resp, timeout_ms);
		peer_put(&c->ms, cn);
		if (ms_retry_not_ready(c, ret, &deadline, &delay)) {
			attempt--;
			continue;
		}
		if (ret != -ENOTCONN || !(flags & MS_IDEMPOTENT))
			break;
	}
	if (ret < 0 && rpc_errno(ret) != ret)
		log_debug(1600003, "%s to %s: %s", frame_op_name(op), c->ms_url, strerror(-ret));
	return rpc_errno(ret);
}

int ms_call_gen(struct rdfs_client *c, uint16_t op, const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *desc, void *resp, unsigned int flags,
		uint64_t *gen)
{
	return ms_call_core(c, op, req, desc, resp, flags, gen, c->opts.timeout_ms);
}

int ms_call(struct rdfs_client *c, uint16_t op, const ProtobufCMessage *req,
	    const ProtobufCMessageDescriptor *desc, void *resp, unsigned int flags)
{
	return ms_call_core(c, op, req, desc, resp, flags, NULL, c->opts.timeout_ms);
}

int ms_call_timeout(struct rdfs_client *c, uint16_t op, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *desc, void *resp, unsigned int flags,
		    int timeout_ms)
{
	return ms_call_core(c, op, req, desc, resp, flags, NULL, timeout_ms);
}

uint64_t ms_gen(struct rdfs_client *c)
{
	uint64_t gen = 0;

	pthread_mutex_lock(&c->ms.lock);
	if (c->ms.conn && !rpc_client_broken(c->ms.conn->rpc))
		gen = c->ms.conn->gen;
	pthread_mutex_unlock(&c->ms.lock);
	return gen;
}

/* Re-OPEN @f on @cn (its old handle died with the old connection). Under f->lock. */
static int file_reopen(struct rdfs_file *f, struct rdfs_conn *cn)
{
	Rdfs__OpenReq req = RDFS__OPEN_REQ__INIT;
	Rdfs__OpenReply *rep = NULL;
	Rdfs__Cred cred;
	int ret;

	cred_to_pb(&f->cred, &cred);
	req.cred = &cred;
	req.ino = f->in->ino;
	req.flags = f->flags & ~(O_TRUNC | O_CREAT | O_EXCL);
	ms_count(f->c, RDFS_OP_OPEN);
	ret = rpc_call(cn->rpc, RDFS_OP_OPEN, &req.base, &rdfs__open_reply__descriptor,
		       (ProtobufCMessage **)&rep, f->c->opts.timeout_ms);
	if (ret)
		return ret;
	f->handle = rep->handle;
	f->handle_gen = cn->gen;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return 0;
}

int ms_file_call(struct rdfs_file *f, uint16_t op, const ProtobufCMessage *req,
		 uint64_t *handle_field, const ProtobufCMessageDescriptor *desc, void *resp,
		 unsigned int flags)
{
	struct rdfs_client *c = f->c;
	struct rdfs_conn *cn;
	int64_t deadline = 0;
	int ret, attempt, delay = 50;

	for (attempt = 0; attempt < 2; attempt++) {
		ret = ms_conn(c, &cn);
		if (ret)
			return ret;
		pthread_mutex_lock(&f->lock);
		ret = 0;
		if (f->handle_gen != cn->gen) {
			ret = file_reopen(f, cn);
			if (ret)
				log_warn(1600004,
					 "cannot re-open ino=%llu after reconnecting: %s",
					 (unsigned long long)f->in->ino, strerror(-ret));
		}
		*handle_field = f->handle;
		pthread_mutex_unlock(&f->lock);
		if (ret == 0) {
			ms_count(c, op);
			ret = rpc_call(cn->rpc, op, req, desc, (ProtobufCMessage **)resp,
				       c->opts.timeout_ms);
		}
		peer_put(&c->ms, cn);
		if (ms_retry_not_ready(c, ret, &deadline, &delay)) {
			attempt--;
			continue;
		}
		if (ret != -ENOTCONN || !(flags & MS_IDEMPOTENT))
			break;
	}
	return rpc_errno(ret);
}

/* Install a connection made outside peer_get() as @p's current one. */
static void peer_install(struct rdfs_peer *p, struct rpc_client *rpc, struct rdfs_conn *cn)
{
	cn->rpc = rpc;
	cn->refs = 1;
	pthread_mutex_lock(&p->lock);
	cn->gen = ++p->gen;
	p->conn = cn;
	pthread_mutex_unlock(&p->lock);
}

int rdfs_client_opts_load_key(struct rdfs_client_opts *o, const char *path)
{
	struct auth_identity id;
	int ret = auth_identity_load(path, o->role ? o->role : "client", &id);

	if (ret)
		return ret;
	o->secret = id.key;
	snprintf(o->claim, sizeof(o->claim), "%s", id.claim);
	o->role = o->claim;
	memset(&id, 0, sizeof(id));
	return 0;
}

const char *rdfs_key_error(int err)
{
	switch (err) {
	case -EPERM:
		return "group or others may access it (chmod 600 it)";
	case -EINVAL:
		return "not a key: too short, too long, or a malformed node key file";
	default:
		return strerror(-err);
	}
}

int rdfs_client_open(const struct rdfs_client_opts *opts, struct rdfs_client **out)
{
	struct rdfs_client *c;
	struct rdfs_conn *cn;
	struct rpc_client *rpc;
	int ret;

	if (!opts || !opts->metaserver_url)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	cn = calloc(1, sizeof(*cn));
	if (!c || !cn) {
		free(c);
		free(cn);
		return -ENOMEM;
	}
	c->opts = *opts;
	if (c->opts.timeout_ms <= 0)
		c->opts.timeout_ms = 30000;
	c->ms_url = strdup(opts->metaserver_url);
	c->role = strdup(opts->role ? opts->role : "client");
	if (!c->ms_url || !c->role) {
		ret = -ENOMEM;
		goto err;
	}
	c->opts.metaserver_url = c->ms_url;
	c->opts.role = c->role;

	/*
	 * The first connection is not retried and keeps its errno, so a wrong URL,
	 * a stopped metaserver or a wrong secret is reported at once and precisely.
	 */
	ret = rpc_client_connect(c->ms_url, &c->opts.secret, c->role, c->opts.timeout_ms, &rpc);
	if (ret)
		goto err;
	pthread_mutex_init(&c->lock, NULL);
	peer_init(&c->ms, c->ms_url, 0);
	peer_install(&c->ms, rpc, cn);
	inode_table_init(&c->itab);
	dir_attr_init(&c->dattr);
	placed_pool_init(&c->placed);
	*out = c;
	return 0;
err:
	free(cn);
	free(c->ms_url);
	free(c->role);
	free(c);
	return ret;
}

void rdfs_client_close(struct rdfs_client *c)
{
	size_t i;

	if (!c)
		return;
	inode_table_destroy(&c->itab);
	dir_attr_destroy(&c->dattr);
	for (i = 0; i < c->n_ios; i++) {
		peer_destroy(c->ios[i]);
		free(c->ios[i]);
	}
	free(c->ios);
	peer_destroy(&c->ms);
	/* After every connection: no request may still expose a slot. */
	placed_pool_destroy(&c->placed);
	pthread_mutex_destroy(&c->lock);
	free(c->ms_url);
	free(c->role);
	free(c);
}
