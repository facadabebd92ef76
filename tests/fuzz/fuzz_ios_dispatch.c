// SPDX-License-Identifier: MIT
/*
 * fuzz_ios_dispatch.c - requests through the I/O server's request path: READ,
 * WRITE, IO_COMMIT, ZERO, COPY, FENCE, VOLUME_INFO (and opcodes that are not
 * its own) into the real server, on a real volume file in a temp dir.
 *
 * How: the server's dispatch hands the data ops to its io_uring threads, which
 * answer later and on their own, and a COPY to its copy thread, which reads
 * the source over the server's own listener; no synchronous call runs a
 * request to its end. So the whole server runs in-process as the unit tests
 * run it (ios_server_create() on tcp://127.0.0.1:0 with a fixed server id and
 * no metaserver, ios_server_run() on a thread of its own) and the fuzz loop is
 * its peer: xport connections on 127.0.0.1 that authenticate as a client of
 * the shared key, a client node and a server (the server key), and send each
 * request as one frame with the input's body bytes as they are. Its replies
 * are read back before the next request.
 *
 * An input is up to MAX_REQS requests, each
 *     opcode (1 byte), mode (1 byte), body length (2 bytes, little-endian), body
 * (the last one's body is whatever is left when fewer bytes remain). An
 * opcode that is not the I/O server's is folded onto its own or LOOKUP. Mode:
 *   bits 0-1  the connection: client, node, server, client
 *   bits 2-3  the capability (of an IoReq, or both of a CopyReq) when the body
 *             decodes: 0 as sent (forged: the input never holds a valid MAC),
 *             1 signed with the server's key as it is, 2 signed after making
 *             it this server's, the connection's, unexpired and in the current
 *             epoch (rights and ranges the input's), 3 the same and granting
 *             read and write of exactly the requested blocks
 *   bits 4-7  bulk data sent with it: n * 3000 bytes, or for modes 2 and 3
 *             the IoReq's length when it is at most 1 MiB
 * Oracle: ASan/UBSan, and per request (FUZZ_CHECK): exactly one final reply
 * with the request's tag, within COPY's deadline; a status of 0 or a negative
 * errno; parts (RDFS_FRAME_MORE) only before it, empty of body, status 0; a
 * READ that succeeds carries as many bytes as its IoReply says; a READ, WRITE,
 * ZERO or COPY with a capability as sent (forged) never succeeds, nor does a
 * FENCE on a client's connection; the connections stay up. The server is
 * started again every RESET_EVERY inputs (its fences and epoch forgotten);
 * the volume stays.
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../ioserver/ios.h"
#include "../../ioserver/volume.h"
#include "auth.h"
#include "cap.h"
#include "frame.h"
#include "fuzz.h"
#include "log.h"
#include "rdfs.pb-c.h"
#include "rpc_internal.h"
#include "xport.h"

#define MAX_REQS	8
#define NCONNS		3
#define CONN_SERVER	2
#define SERVER_ID	7
#define VOLUME_BLOCKS	4096u
#define RESET_EVERY	4096
#define MAX_BULK	(1u << 20)
/* COPY's own deadline is 20 s (ioserver/copy.c): a reply comes before then */
#define REPLY_WAIT_MS	30000

int LLVMFuzzerInitialize(int *argc, char ***argv);
const char *__asan_default_options(void);

/*
 * No leak checks here: the server's threads answer an input's requests and
 * keep OpenSSL's per-thread state past it, so libFuzzer's count of what an
 * input allocated and freed means nothing. The I/O server's leaks are the
 * sanitizer builds' (make test-sanitize, make test-integration-san).
 */
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

enum cap_mode { CAP_AS_SENT, CAP_SIGNED, CAP_FIXED, CAP_GRANTED };

static const char *const conn_ids[NCONNS] = { "client", "node:fuzz:1", "server" };

static struct {
	char base[256];
	struct auth_secret secret, cap_key;
	struct volume *vol;
	struct ios_server *srv;
	pthread_t loop;
	char url[128];
	struct xport_ctx *xctx;
	struct xport_conn *conn[NCONNS];
	uint32_t tag;
	uint64_t epoch;			/* the newest any signed capability carried */
	uint64_t inputs;
	int verbose;
	uint8_t *bulk;
} F;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void *server_main(void *arg)
{
	FUZZ_CHECK(ios_server_run(F.srv) == 0);
	return NULL;
}

/* The next message on any connection of ours, within REPLY_WAIT_MS. */
static struct xport_msg *next_msg(struct xport_conn **from)
{
	struct xport_event ev;
	int waited = 0;

	for (;;) {
		int n = xport_test(F.xctx, &ev, 1, 100);

		FUZZ_CHECK(n >= 0);
		if (n == 0) {
			waited += 100;
			FUZZ_CHECK(waited < REPLY_WAIT_MS);
			continue;
		}
		/* a connection closed under us is a finding: well-formed frames all along */
		FUZZ_CHECK(ev.type == XPORT_EV_RECV || ev.type == XPORT_EV_SEND);
		if (ev.type == XPORT_EV_RECV) {
			if (from)
				*from = ev.conn;
			return ev.msg;
		}
	}
}

/* rpc_client's handshake (lib/rpc_client.c), on a bare xport connection. */
static struct xport_conn *connect_as(const char *claim, const struct auth_secret *key)
{
	Rdfs__AuthResponse resp = RDFS__AUTH_RESPONSE__INIT;
	uint8_t cn[AUTH_NONCE_LEN], sn[AUTH_NONCE_LEN], mac[AUTH_MAC_LEN], want[AUTH_MAC_LEN];
	Rdfs__AuthChallenge *chal;
	Rdfs__AuthResult *res;
	struct xport_conn *c;
	struct xport_msg *m;

	FUZZ_CHECK(xport_connect(F.xctx, F.url, 5000, &c) == 0);
	m = next_msg(NULL);
	FUZZ_CHECK(m->hdr.opcode == RDFS_OP_AUTH_CHALLENGE);
	chal = rdfs__auth_challenge__unpack(NULL, m->hdr.body_len, m->body);
	FUZZ_CHECK(chal && chal->nonce.len == AUTH_NONCE_LEN);
	memcpy(sn, chal->nonce.data, AUTH_NONCE_LEN);
	rdfs__auth_challenge__free_unpacked(chal, NULL);
	xport_msg_free(m);
	FUZZ_CHECK(auth_random(cn, sizeof(cn)) == 0);
	auth_client_proof(key, sn, cn, claim, mac);
	resp.mac.data = mac;
	resp.mac.len = sizeof(mac);
	resp.client_nonce.data = cn;
	resp.client_nonce.len = sizeof(cn);
	resp.role = (char *)claim;
	FUZZ_CHECK(rpc_send_msg(c, RDFS_OP_AUTH_RESPONSE, 0, 0, 0, &resp.base, NULL, 0) == 0);
	m = next_msg(NULL);
	FUZZ_CHECK(m->hdr.opcode == RDFS_OP_AUTH_RESULT && m->hdr.status == 0);
	res = rdfs__auth_result__unpack(NULL, m->hdr.body_len, m->body);
	FUZZ_CHECK(res && res->mac.len == AUTH_MAC_LEN);
	auth_server_proof(key, sn, cn, want);
	FUZZ_CHECK(memcmp(res->mac.data, want, AUTH_MAC_LEN) == 0);
	rdfs__auth_result__free_unpacked(res, NULL);
	xport_msg_free(m);
	return c;
}

static void server_start(void)
{
	struct auth_secret key;
	struct ios_options o = { 0 };

	o.vol = F.vol;
	o.listen = "tcp://127.0.0.1:0";
	o.fixed_server_id = SERVER_ID;
	o.name = "fuzz-ios";
	o.secret = &F.secret;
	o.cap_key = &F.cap_key;
	o.io_threads = 2;
	o.readahead_cache_mb = 4;
	o.buffer_pool_bytes = 32u << 20;
	FUZZ_CHECK(ios_server_create(&o, &F.srv) == 0);
	snprintf(F.url, sizeof(F.url), "%s", ios_server_url(F.srv, 0));
	FUZZ_CHECK(pthread_create(&F.loop, NULL, server_main, NULL) == 0);
	FUZZ_CHECK(xport_ctx_create(&F.xctx) == 0);
	F.conn[0] = connect_as(conn_ids[0], &F.secret);
	auth_node_key(&F.cap_key, conn_ids[1] + 5, &key);
	F.conn[1] = connect_as(conn_ids[1], &key);
	auth_server_key(&F.cap_key, &key);
	F.conn[2] = connect_as(conn_ids[2], &key);
	F.epoch = 0;
}

static void server_stop(void)
{
	xport_ctx_destroy(F.xctx);	/* closes our connections */
	F.xctx = NULL;
	ios_server_stop(F.srv);
	pthread_join(F.loop, NULL);
	ios_server_destroy(F.srv);
	F.srv = NULL;
}

static void cleanup(void)
{
	if (F.srv)
		server_stop();
	if (F.vol)
		volume_close(F.vol);
	nftw(F.base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct volume_open_opts vo = { 0 };
	const char *tmp = getenv("TMPDIR");
	char path[300];

	log_init("fuzz_ios_dispatch", LOG_LVL_ERROR);
	F.verbose = getenv("RDFS_FUZZ_LOG") != NULL;
	if (!F.verbose)
		FUZZ_CHECK(log_open_file("/dev/null") == 0);
	if (!tmp)
		tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(F.base, sizeof(F.base), "%s/fuzz_ios_dispatch.XXXXXX", tmp);
	FUZZ_CHECK(mkdtemp(F.base) != NULL);
	atexit(cleanup);
	auth_secret_from_bytes(&F.secret, "fuzz cluster secret, 32 bytes...", 32);
	auth_secret_from_bytes(&F.cap_key, "fuzz capability key, 32 bytes...", 32);
	snprintf(path, sizeof(path), "%s/vol", F.base);
	vo.path = path;
	vo.create_size = VOLUME_DATA_OFFSET + (uint64_t)VOLUME_BLOCKS * 4096;
	FUZZ_CHECK(volume_open(&vo, &F.vol) == 0);
	FUZZ_CHECK(posix_memalign((void **)&F.bulk, 4096, MAX_BULK) == 0);
	for (size_t i = 0; i < MAX_BULK; i++)
		F.bulk[i] = (uint8_t)(i * 7 + i / 4096);
	server_start();
	return 0;
}

/*
 * Make @cap what @mode says for a request of blocks [@first, @first + @count)
 * on connection @conn, and sign it.
 */
static void cap_rework(Rdfs__Capability *cap, int mode, int conn, uint64_t first,
		       uint64_t count)
{
	if (mode >= CAP_FIXED) {
		cap->server_id = SERVER_ID;
		/* protobuf-c's own "" when absent; else unpacked into malloc'ed memory */
		if (cap->holder != protobuf_c_empty_string)
			free(cap->holder);
		cap->holder = strdup(conn_ids[conn]);
		FUZZ_CHECK(cap->holder != NULL);
		cap->expiry_ns = cap_now_ns() + 60ll * 1000000000;
		cap->epoch = F.epoch;
	}
	if (mode == CAP_GRANTED) {
		cap->rights = RDFS_CAP_READ | RDFS_CAP_WRITE;
		for (size_t i = 0; i < cap->n_ranges; i++)
			rdfs__block_range__free_unpacked(cap->ranges[i], NULL);
		free(cap->ranges);
		cap->ranges = malloc(sizeof(*cap->ranges));
		cap->ranges[0] = malloc(sizeof(**cap->ranges));
		FUZZ_CHECK(cap->ranges && cap->ranges[0]);
		rdfs__block_range__init(cap->ranges[0]);
		cap->ranges[0]->first = first;
		cap->ranges[0]->count = count ? count : 1;
		cap->n_ranges = 1;
	}
	/* cap_sign() replaces the MAC; the old one is protobuf-c's, from malloc too */
	FUZZ_CHECK(cap_sign(&F.cap_key, cap) == 0);
	if (cap->epoch > F.epoch)
		F.epoch = cap->epoch;	/* adopted by the server: older ones are refused now */
}

/*
 * The body to send for @op in @mode: the input's bytes, or (a capability to
 * sign and a body that decodes) the request re-packed around the reworked
 * capability. Returns a malloc'ed copy; *@iolen the IoReq's length if any.
 */
static uint8_t *body_for(uint8_t op, int cmode, int conn, const uint8_t *body, size_t *len,
			 int64_t *iolen)
{
	uint8_t *out = NULL;

	*iolen = -1;
	if (op == RDFS_OP_COPY) {
		Rdfs__CopyReq *c = rdfs__copy_req__unpack(NULL, *len, body);

		if (c && c->dst)
			*iolen = c->dst->length;
		if (c && cmode != CAP_AS_SENT) {
			if (c->dst && c->dst->cap)
				cap_rework(c->dst->cap, cmode, conn, c->dst->first_block,
					   c->dst->block_count);
			if (c->src && c->src->cap)
				cap_rework(c->src->cap, cmode, conn, c->src->first_block,
					   c->src->block_count);
			*len = rdfs__copy_req__get_packed_size(c);
			out = malloc(*len ? *len : 1);
			FUZZ_CHECK(out != NULL);
			rdfs__copy_req__pack(c, out);
		}
		if (c)
			rdfs__copy_req__free_unpacked(c, NULL);
	} else if (op == RDFS_OP_READ || op == RDFS_OP_WRITE || op == RDFS_OP_ZERO ||
		   op == RDFS_OP_IO_COMMIT) {
		Rdfs__IoReq *io = rdfs__io_req__unpack(NULL, *len, body);

		if (io)
			*iolen = io->length;
		if (io && io->cap && cmode != CAP_AS_SENT) {
			cap_rework(io->cap, cmode, conn, io->first_block, io->block_count);
			*len = rdfs__io_req__get_packed_size(io);
			out = malloc(*len ? *len : 1);
			FUZZ_CHECK(out != NULL);
			rdfs__io_req__pack(io, out);
		}
		if (io)
			rdfs__io_req__free_unpacked(io, NULL);
	} else if (op == RDFS_OP_FENCE) {
		Rdfs__FenceReq *f = rdfs__fence_req__unpack(NULL, *len, body);

		/* a fence of a newer epoch may move the server's on: follow it */
		if (f && conn == CONN_SERVER && f->epoch > F.epoch)
			F.epoch = f->epoch;
		if (f)
			rdfs__fence_req__free_unpacked(f, NULL);
	}
	if (!out) {
		out = malloc(*len ? *len : 1);
		FUZZ_CHECK(out != NULL);
		if (*len)
			memcpy(out, body, *len);
	}
	return out;
}

static uint8_t fold_op(uint8_t op)
{
	static const uint8_t ours[] = {
		RDFS_OP_READ, RDFS_OP_WRITE, RDFS_OP_IO_COMMIT, RDFS_OP_VOLUME_INFO,
		RDFS_OP_ZERO, RDFS_OP_FENCE, RDFS_OP_COPY, RDFS_OP_PING, RDFS_OP_LOOKUP,
	};

	for (size_t i = 0; i < sizeof(ours); i++)
		if (op == ours[i])
			return op;
	return ours[op % sizeof(ours)];
}

static void run_one(uint8_t op, uint8_t mode, const uint8_t *in, size_t len)
{
	int conn = (mode & 3) == 3 ? 0 : mode & 3;
	int cmode = (mode >> 2) & 3;
	struct rdfs_frame_hdr h;
	struct iovec iov;
	struct xport_conn *from;
	uint64_t data = 0;
	int64_t iolen;
	uint8_t *body;

	op = fold_op(op);
	body = body_for(op, cmode, conn, in, &len, &iolen);
	iov.iov_base = F.bulk;
	iov.iov_len = (size_t)(mode >> 4) * 3000;
	if (cmode >= CAP_FIXED && iolen >= 0 && iolen <= MAX_BULK)
		iov.iov_len = op == RDFS_OP_WRITE || op == RDFS_OP_COPY ? (size_t)iolen : 0;
	rpc_hdr_init(&h, op, 0, 0, ++F.tag, len, iov.iov_len);
	FUZZ_CHECK(xport_post_send(F.conn[conn], &h, body, &iov, iov.iov_len ? 1 : 0, NULL) == 0);
	free(body);

	for (;;) {
		struct xport_msg *m = next_msg(&from);
		int st = m->hdr.status;

		FUZZ_CHECK(from == F.conn[conn]);
		FUZZ_CHECK(m->hdr.flags & RDFS_FRAME_REPLY);
		FUZZ_CHECK(m->hdr.tag == F.tag);
		/* a COPY whose source came is answered as the WRITE it became (copy.c) */
		FUZZ_CHECK(m->hdr.opcode == op ||
			   (op == RDFS_OP_COPY && m->hdr.opcode == RDFS_OP_WRITE));
		FUZZ_CHECK(st <= 0 && st > -4096);
		if (m->hdr.flags & RDFS_FRAME_MORE) {
			FUZZ_CHECK(st == 0 && m->hdr.body_len == 0);
			data += m->hdr.data_len;
			xport_msg_free(m);
			continue;
		}
		data += m->hdr.data_len;
		if (F.verbose)
			fprintf(stderr, "op %u on %s, cap mode %d: %d, %llu bytes\n", op,
				conn_ids[conn], cmode, st, (unsigned long long)data);
		if (st == 0 && op == RDFS_OP_READ) {
			Rdfs__IoReply *r = rdfs__io_reply__unpack(NULL, m->hdr.body_len, m->body);

			FUZZ_CHECK(r != NULL && r->length == data);
			rdfs__io_reply__free_unpacked(r, NULL);
		}
		if (cmode == CAP_AS_SENT && (op == RDFS_OP_READ || op == RDFS_OP_WRITE ||
					     op == RDFS_OP_ZERO || op == RDFS_OP_COPY))
			FUZZ_CHECK(st != 0);
		if (op == RDFS_OP_FENCE && conn != CONN_SERVER)
			FUZZ_CHECK(st == -EPERM);
		xport_msg_free(m);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_records(data, size, MAX_REQS, run_one);
	if (++F.inputs % RESET_EVERY == 0) {
		server_stop();
		server_start();
	}
	return 0;
}
