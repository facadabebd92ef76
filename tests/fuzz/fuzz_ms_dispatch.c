// SPDX-License-Identifier: MIT
/*
 * fuzz_ms_dispatch.c - requests through the metaserver's dispatch, as its
 * workers run them: ops_dispatch() with a session of the role the input picks,
 * on one real core (LevelDB in a temp dir, no mocks) built at start-up with a
 * root, a few files, directories and I/O servers registered, as the unit
 * tests' fixture (tests/unit/ms_fixture.h) builds it. Every handler's unpack,
 * checks and effects on the core run.
 *
 * An input is up to MAX_REQS requests, each
 *     opcode (1 byte), role (1 byte), body length (2 bytes, little-endian), body
 * (the last one's body is whatever is left when fewer bytes remain), so one
 * input can create a file and then lay it out, commit, rename or unlink it.
 * An opcode the frame decoder refuses (0, RDFS_OP_MAX and above) is folded
 * into the range it admits. Role, low 2 bits: the shared client key, the
 * same with root squash, a node key (all squash), the server key (I/O
 * servers, `rdfs` with the cap key); a role byte of 0xf0 and above also
 * announces bulk data, which the metaserver must refuse. REGISTER capacities
 * are kept within libFuzzer's memory (fold_capacity).
 *
 * The replies go over a real TCP connection on 127.0.0.1 within one xport
 * context (the dispatch sends them with rpc_server_reply()), and are read
 * back on the same thread: one reply per request, with the request's tag and
 * a status of 0 or a negative errno, an error's body an Error message.
 * Oracle: ASan/UBSan, those FUZZ_CHECKs, and fsck (ms_fsck, what `rdfs fsck`
 * runs) every FSCK_EVERY inputs, and in every FSCK an input sends, finding
 * nothing wrong: no leaked, doubly owned, unmapped or out-of-range blocks, no
 * dangling entries, wrong counts or undecodable records. The core is built
 * again every RESET_EVERY inputs and the sessions every SESSION_EVERY (their
 * handles released, orphans reclaimed), so a long `make fuzz` stays bounded.
 * No zeroer or fencer is installed (the core alone, as in the unit tests):
 * freed blocks return at once and LAYOUT talks to no I/O server.
 *
 * State carries over between inputs, so a finding may need the inputs before
 * it: when the crash input alone passes, run again with the seed the run
 * printed on the corpus it started from (one thread: the same inputs again).
 * The temp dir is under $TMPDIR, or /dev/shm when it exists (LevelDB syncs
 * every write: tmpfs keeps it cheap).
 */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../metaserver/ops.h"
#include "frame.h"
#include "fuzz.h"
#include "log.h"
#include "rdfs.pb-c.h"
#include "rpc.h"
#include "xport.h"

#define MAX_REQS	16
#define NROLES		4
#define ROLE_SERVER	3
#define FSCK_EVERY	16
#define SESSION_EVERY	128
#define RESET_EVERY	1024
#define NSERVERS	3
#define SERVER_BLOCKS	(1u << 16)	/* 256 MiB each: allocation never runs dry at once */
#define REPLY_WAIT_MS	10000
/* REGISTER capacities past this are folded below it (run_one) */
#define FUZZ_MAX_BLOCKS	(1ull << 24)

int LLVMFuzzerInitialize(int *argc, char ***argv);

static const struct auth_secret *cap_key(void)
{
	static struct auth_secret k;

	if (!k.len)
		auth_secret_from_bytes(&k, "fuzz capability key, 32 bytes...", 32);
	return &k;
}

static struct {
	char base[256];		/* the temp dir */
	char db[300];
	struct ms *ms;
	struct ms_ops_ctx ops;
	struct ms_session *role[NROLES];
	struct ms_session *ios[NSERVERS];
	struct auth_peer peer[NROLES];
	struct xport_ctx *xctx;
	struct xport_conn *srv;		/* the metaserver's end: replies go out here */
	struct xport_conn *cli;		/* the peer's end: replies are read here */
	uint32_t tag;
	uint64_t inputs;
	int verbose;			/* $RDFS_FUZZ_LOG: every reply's status, and the logs */
} F;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void sessions_open(void)
{
	static const char *const ids[NROLES] = { "client", "client", "node:fuzz:1", "server" };
	static const struct ms_squash sq[NROLES] = {
		{ MS_SQUASH_NONE, 0, 0 }, { MS_SQUASH_ROOT, 65534, 65534 },
		{ MS_SQUASH_ALL, 3000, 3000 }, { MS_SQUASH_NONE, 0, 0 },
	};

	for (int i = 0; i < NROLES; i++) {
		F.role[i] = ms_session_new(F.ms, ids[i]);
		FUZZ_CHECK(F.role[i] != NULL);
		ms_session_set_squash(F.role[i], &sq[i]);
		F.peer[i].cls = i == ROLE_SERVER ? AUTH_CLASS_SERVER : AUTH_CLASS_CLIENT;
		snprintf(F.peer[i].id, sizeof(F.peer[i].id), "%s", ids[i]);
	}
}

static void sessions_close(void)
{
	for (int i = 0; i < NROLES; i++)
		ms_session_close(F.ms, F.role[i]);
}

/* A file of @blocks blocks written on the I/O servers: layout, then commit. */
static uint64_t populate_file(uint64_t parent, const char *name, uint64_t blocks)
{
	static const struct ms_cred root = { 0, 0, 0, NULL };
	struct ms_session *s = F.role[0];
	struct ms_range r = { 0, blocks * 4096 };
	struct ms_layout l;
	struct ms_attr a;
	uint64_t h = 0;

	FUZZ_CHECK(ms_mknod(F.ms, s, &root, parent, name, S_IFREG | 0666, 0, 0, 1, 1, 2, &a, &h) ==
		   0);
	if (blocks) {
		FUZZ_CHECK(ms_layout(F.ms, s, &root, a.ino, 0, r.length, 1, h, &l) == 0);
		ms_layout_free(&l);
		FUZZ_CHECK(ms_commit(F.ms, s, &root, a.ino, r.length, 0, &r, 1, h, &a) == 0);
	}
	FUZZ_CHECK(ms_release(F.ms, s, h) == 0);
	return a.ino;
}

/*
 * The core of every run: I/O servers up, a node, and a small tree
 *   /f0 (empty) /f1 (3 blocks) /big (2 chunks, 0666) /d/ (0777) /d/f (1 block)
 *   /d/sub/ /d/hard (a link of /d/f) /ln -> d/f, an xattr on /f1
 */
static void core_open(void)
{
	static const struct ms_cred root = { 0, 0, 0, NULL };
	struct ms_options o = { 0 };
	struct ms_attr a;
	struct ms_node n;
	uint64_t epoch, d, f;
	char err[256];
	uint32_t id;

	snprintf(F.db, sizeof(F.db), "%s/db", F.base);
	o.db_dir = F.db;
	o.cache_bytes = 1 << 20;
	if (ms_open(&o, &F.ms, err, sizeof(err))) {
		fprintf(stderr, "fuzz_ms_dispatch: %s\n", err);
		abort();
	}
	F.ops.ms = F.ms;
	F.ops.cap_key = cap_key();
	F.ops.cap_lifetime_ns = 600ll * 1000000000;
	for (int i = 0; i < NSERVERS; i++) {
		char uuid[16], url[64], dom[8];

		snprintf(uuid, sizeof(uuid), "fuzz-volume-%d", i);
		snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", 7100 + i);
		snprintf(dom, sizeof(dom), "rack%d", i);
		F.ios[i] = ms_session_new(F.ms, "server");
		FUZZ_CHECK(F.ios[i] != NULL);
		FUZZ_CHECK(ms_register(F.ms, F.ios[i], url, uuid, strlen(uuid), SERVER_BLOCKS, uuid,
				       dom, 1, &id, &epoch) == 0);
	}
	sessions_open();
	FUZZ_CHECK(ms_node_set(F.ms, F.role[ROLE_SERVER], "fuzz", 0, NULL, &n) == 0);
	populate_file(MS_ROOT_INO, "f0", 0);
	f = populate_file(MS_ROOT_INO, "f1", 3);
	populate_file(MS_ROOT_INO, "big", 2 * MS_DEFAULT_CHUNK / 4096);
	FUZZ_CHECK(ms_mkdir(F.ms, &root, MS_ROOT_INO, "d", 0777, 0, &a) == 0);
	d = a.ino;
	populate_file(d, "f", 1);
	FUZZ_CHECK(ms_mkdir(F.ms, &root, d, "sub", 0755, 0, &a) == 0);
	FUZZ_CHECK(ms_lookup(F.ms, &root, d, "f", &a) == 0);
	FUZZ_CHECK(ms_link(F.ms, &root, a.ino, d, "hard", &a) == 0);
	FUZZ_CHECK(ms_symlink(F.ms, &root, MS_ROOT_INO, "ln", "d/f", &a) == 0);
	FUZZ_CHECK(ms_setxattr(F.ms, &root, f, "user.fuzz", "v", 1, 0) == 0);
}

static void core_close(void)
{
	sessions_close();
	for (int i = 0; i < NSERVERS; i++)
		ms_session_close(F.ms, F.ios[i]);
	ms_close(F.ms);
	F.ms = NULL;
	rm_tree(F.db);
}

static void core_fsck(void)
{
	struct ms_fsck_report rep;

	FUZZ_CHECK(ms_fsck(F.ms, F.role[ROLE_SERVER], 0, 0, 16, &rep) == 0);
	for (size_t i = 0; i < rep.n; i++)
		fprintf(stderr, "fsck: kind %u ino %llu other %llu server %u block %llu count %llu\n",
			rep.p[i].kind, (unsigned long long)rep.p[i].ino,
			(unsigned long long)rep.p[i].other_ino, rep.p[i].server_id,
			(unsigned long long)rep.p[i].block, (unsigned long long)rep.p[i].count);
	FUZZ_CHECK(rep.problems == 0);
	ms_fsck_report_free(&rep);
}

/* The peer's end of the loopback connection: wait for the reply(ies) to @tag. */
static void check_replies(uint16_t op, uint32_t tag)
{
	struct xport_event ev[8];
	int replies = 0, waited = 0;

	for (;;) {
		/* after the first reply, one more look for a second one */
		int n = xport_test(F.xctx, ev, 8, replies ? 0 : 100);

		FUZZ_CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			struct xport_msg *m = ev[i].msg;

			FUZZ_CHECK(ev[i].type == XPORT_EV_RECV || ev[i].type == XPORT_EV_SEND);
			if (ev[i].type != XPORT_EV_RECV)
				continue;
			FUZZ_CHECK(ev[i].conn == F.cli);
			FUZZ_CHECK(m->hdr.flags & RDFS_FRAME_REPLY);
			FUZZ_CHECK(!(m->hdr.flags & RDFS_FRAME_MORE));
			FUZZ_CHECK(m->hdr.tag == tag && m->hdr.opcode == op);
			FUZZ_CHECK(m->hdr.status <= 0 && m->hdr.status > -4096);
			if (m->hdr.status < 0 && m->hdr.body_len) {
				Rdfs__Error *e = rdfs__error__unpack(NULL, m->hdr.body_len, m->body);

				FUZZ_CHECK(e != NULL);
				rdfs__error__free_unpacked(e, NULL);
			}
			/* an FSCK the input sends finds the core as consistent as ours do */
			if (op == RDFS_OP_FSCK && m->hdr.status == 0) {
				Rdfs__FsckReply *r = rdfs__fsck_reply__unpack(NULL, m->hdr.body_len,
									      m->body);

				FUZZ_CHECK(r != NULL);
				FUZZ_CHECK(r->problems == 0);
				rdfs__fsck_reply__free_unpacked(r, NULL);
			}
			replies++;
			if (F.verbose)
				fprintf(stderr, "op %u tag %u: %d\n", op, tag, m->hdr.status);
			xport_msg_free(m);
		}
		if (replies && n == 0)
			break;
		if (!n)
			waited += 100;
		FUZZ_CHECK(waited < REPLY_WAIT_MS);
	}
	FUZZ_CHECK(replies == 1);
}

/*
 * A volume as large as the metaserver takes (MS_MAX_VOLUME_BLOCKS) has a map
 * of 8 GiB, past libFuzzer's memory limit: a REGISTER body that decodes and
 * asks for more than FUZZ_MAX_BLOCKS but not more than that is re-packed
 * with the capacity folded below FUZZ_MAX_BLOCKS. Larger ones, refused
 * before any map is made, go as they are.
 */
static void fold_capacity(struct xport_msg *m)
{
	Rdfs__RegisterReq *r = rdfs__register_req__unpack(NULL, m->hdr.body_len, m->body);

	if (r && r->capacity_blocks > FUZZ_MAX_BLOCKS &&
	    r->capacity_blocks <= MS_MAX_VOLUME_BLOCKS) {
		r->capacity_blocks %= FUZZ_MAX_BLOCKS;
		free(m->body);
		m->hdr.body_len = (uint32_t)rdfs__register_req__get_packed_size(r);
		m->body = malloc(m->hdr.body_len ? m->hdr.body_len : 1);
		FUZZ_CHECK(m->body != NULL);
		rdfs__register_req__pack(r, m->body);
	}
	if (r)
		rdfs__register_req__free_unpacked(r, NULL);
}

static void run_one(uint8_t op, uint8_t rolebyte, const uint8_t *body, size_t len)
{
	static uint8_t bulk[4096] __attribute__((aligned(4096)));
	struct xport_msg m = { 0 };
	struct rpc_request req = { 0 };
	int role = rolebyte % NROLES;

	/* the frame decoder lets only these through to any dispatch (fuzz_frame) */
	if (op == 0 || op >= RDFS_OP_MAX)
		op = 1 + op % (RDFS_OP_MAX - 1);
	m.hdr.magic = RDFS_FRAME_MAGIC;
	m.hdr.version = RDFS_FRAME_VERSION;
	m.hdr.opcode = op;
	m.hdr.tag = ++F.tag;
	m.hdr.body_len = (uint32_t)len;
	if (rolebyte >= 0xf0) {
		m.hdr.data_len = sizeof(bulk);
		m.data = bulk;
	}
	/* exactly the body's bytes on the heap, so ASan sees a read past it */
	if (len) {
		m.body = malloc(len);
		FUZZ_CHECK(m.body != NULL);
		memcpy(m.body, body, len);
	}
	if (op == RDFS_OP_REGISTER)
		fold_capacity(&m);
	req.conn = F.srv;
	req.msg = &m;
	req.peer = &F.peer[role];
	ops_dispatch(&F.ops, F.role[role], &req);
	free(m.body);
	check_replies(op, m.hdr.tag);
}

static void cleanup(void)
{
	if (F.ms)
		core_close();
	rm_tree(F.base);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	struct xport_listener *l;
	struct xport_event ev;

	/* the handlers' warnings about hostile requests are the point, not news */
	log_init("fuzz_ms_dispatch", LOG_LVL_ERROR);
	F.verbose = getenv("RDFS_FUZZ_LOG") != NULL;
	if (!F.verbose)
		FUZZ_CHECK(log_open_file("/dev/null") == 0);
	if (!tmp)
		tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(F.base, sizeof(F.base), "%s/fuzz_ms_dispatch.XXXXXX", tmp);
	FUZZ_CHECK(mkdtemp(F.base) != NULL);
	atexit(cleanup);
	FUZZ_CHECK(xport_ctx_create(&F.xctx) == 0);
	FUZZ_CHECK(xport_listen(F.xctx, "tcp://127.0.0.1:0", &l) == 0);
	FUZZ_CHECK(xport_connect(F.xctx, xport_listener_url(l), 5000, &F.cli) == 0);
	while (!F.srv) {
		FUZZ_CHECK(xport_test(F.xctx, &ev, 1, 5000) == 1);
		if (ev.type == XPORT_EV_ACCEPT)
			F.srv = ev.conn;
	}
	core_open();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_records(data, size, MAX_REQS, run_one);
	F.inputs++;
	if (F.inputs % FSCK_EVERY == 0)
		core_fsck();
	if (F.inputs % RESET_EVERY == 0) {
		core_close();
		core_open();
	} else if (F.inputs % SESSION_EVERY == 0) {
		sessions_close();
		sessions_open();
	}
	return 0;
}
