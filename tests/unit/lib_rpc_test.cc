// SPDX-License-Identifier: MIT
/*
 * lib_rpc_test.cc - authenticated request/reply over real loopback sockets:
 * the handshake (good and wrong secrets, impostor servers, requests before
 * authentication), tag matching under concurrency, bulk data, error replies,
 * what callers see when a connection breaks, and flow control against peers
 * that outrun the server or never read its replies.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "metrics.h"
#include "rdfs.pb-c.h"
#include "rpc.h"
#include "rpc_metrics.h"
}

namespace {

struct auth_secret secret_of(const char *s)
{
	struct auth_secret a;

	auth_secret_from_bytes(&a, s, strlen(s));
	return a;
}

const struct auth_secret kSecret = secret_of("the cluster secret, 32 bytes ok!");
const struct auth_secret kCapKey = secret_of("the capability key, servers only");

/* What a server checks proofs with: the shared client key and the server/node keys. */
struct auth_keys keys_of(const struct auth_secret &client)
{
	struct auth_keys k;

	auth_keys_derive(&k, &client, &kCapKey);
	return k;
}

struct auth_secret server_key()
{
	struct auth_secret k;

	auth_server_key(&kCapKey, &k);
	return k;
}

/*
 * The application side of a test server:
 *   GETATTR ino      -> AttrReply { attr.ino = ino, attr.uid = peer identity length }
 *   READ (with data) -> IoReply { length } and the data echoed back
 *   UNLINK           -> -ENOENT "no such entry"
 *   STATFS           -> held: never answered (for timeouts)
 *   RMDIR            -> the server closes the connection
 *   VOLUME_INFO      -> 1 MiB of 0x5a sent zero-copy from a worker thread
 *   READLINK         -> a reply whose header status is +5 (not 0 or -errno)
 *   REGISTER         -> 0; the connection is closed after 300 ms without a frame
 */
class TestServer {
public:
	explicit TestServer(const struct auth_secret &secret = kSecret, int handshake_ms = 0,
			    struct metrics *reg = nullptr)
	{
		const char *urls[] = { "tcp://127.0.0.1:0", nullptr };

		struct auth_keys keys = keys_of(secret);

		EXPECT_EQ(0, rpc_server_create(urls, &keys, &srv_));
		if (handshake_ms)
			rpc_server_set_handshake_timeout(srv_, handshake_ms);
		if (reg) {
			EXPECT_EQ(0, rpc_metrics_register(&rm_, reg, "rdfs_t",
							  [](uint16_t) { return 1; }));
			rpc_server_set_metrics(srv_, &rm_);
		}
		url_ = rpc_server_url(srv_, 0);
		thread_ = std::thread([this] { run(); });
	}
	~TestServer()
	{
		stop_ = true;
		rpc_server_wake(srv_);
		thread_.join();
		for (auto &r : held_)
			rpc_request_done(&r);
		rpc_server_destroy(srv_);
	}
	const std::string &url() const { return url_; }
	int requests() { return requests_.load(); }
	int zc_done() { return zc_done_.load(); }
	int closed() { return closed_.load(); }
	std::vector<std::string> roles()
	{
		std::lock_guard<std::mutex> g(mu_);
		return roles_;
	}

private:
	void run()
	{
		struct rpc_request req;

		while (!stop_) {
			switch (rpc_server_next(srv_, &req, -1)) {
			case RPC_SRV_REQUEST:
				requests_++;
				handle(&req);
				break;
			case RPC_SRV_CLOSED:
				closed_++;
				rpc_request_done(&req);
				break;
			default:
				break;
			}
		}
	}
	void handle(struct rpc_request *req)
	{
		struct xport_msg *m = req->msg;

		{
			std::lock_guard<std::mutex> g(mu_);
			roles_.push_back(req->peer->id);
		}
		switch (m->hdr.opcode) {
		case RDFS_OP_GETATTR: {
			Rdfs__GetattrReq *in = rdfs__getattr_req__unpack(nullptr, m->hdr.body_len, m->body);
			Rdfs__AttrReply out = RDFS__ATTR_REPLY__INIT;
			Rdfs__Attr attr = RDFS__ATTR__INIT;

			ASSERT_NE(nullptr, in);
			attr.ino = in->ino;
			attr.uid = strlen(req->peer->id);
			out.attr = &attr;
			EXPECT_EQ(0, rpc_server_reply(req, 0, &out.base, nullptr, 0));
			rdfs__getattr_req__free_unpacked(in, nullptr);
			break;
		}
		case RDFS_OP_READ: {
			Rdfs__IoReply out = RDFS__IO_REPLY__INIT;
			struct iovec iov = { m->data, m->hdr.data_len };

			out.length = m->hdr.data_len;
			/* Reply from another thread, as the I/O server's workers do. */
			std::thread([&] {
				EXPECT_EQ(0, rpc_server_reply(req, 0, &out.base, &iov, m->hdr.data_len ? 1 : 0));
			}).join();
			break;
		}
		case RDFS_OP_UNLINK:
			EXPECT_EQ(0, rpc_server_reply_error(req, -ENOENT, "no such entry"));
			break;
		case RDFS_OP_REGISTER:
			rpc_conn_set_idle_timeout(req->conn, 300);
			EXPECT_EQ(0, rpc_server_reply(req, 0, nullptr, nullptr, 0));
			break;
		case RDFS_OP_STATFS:
			held_.push_back(*req);
			return;
		case RDFS_OP_RMDIR:
			xport_conn_close(req->conn);
			break;
		case RDFS_OP_VOLUME_INFO: {
			struct Zc {
				TestServer *srv;
				std::vector<uint8_t> buf;
			};
			Zc *zc = new Zc{ this, std::vector<uint8_t>(1u << 20, 0x5a) };
			struct iovec iov = { zc->buf.data(), zc->buf.size() };

			/* Reply from a worker; the buffer lives until the completion. */
			std::thread([&] {
				EXPECT_EQ(0, rpc_server_reply_zc(req, 0, nullptr, &iov, 1,
					[](void *arg, int status) {
						Zc *z = (Zc *)arg;
						EXPECT_EQ(0, status);
						z->srv->zc_done_++;
						delete z;
					}, zc));
			}).join();
			break;
		}
		case RDFS_OP_READLINK: {
			struct rdfs_frame_hdr h = {};

			/* rpc_server_reply() fixes the sign: craft the header by hand */
			h.magic = RDFS_FRAME_MAGIC;
			h.version = RDFS_FRAME_VERSION;
			h.flags = RDFS_FRAME_REPLY;
			h.opcode = m->hdr.opcode;
			h.tag = m->hdr.tag;
			h.status = 5;
			EXPECT_EQ(0, xport_post_send(req->conn, &h, nullptr, nullptr, 0, nullptr));
			break;
		}
		default:
			rpc_server_reply(req, -ENOSYS, nullptr, nullptr, 0);
			break;
		}
		rpc_request_done(req);
	}

	struct rpc_server *srv_ = nullptr;
	std::string url_;
	std::thread thread_;
	std::atomic<bool> stop_{false};
	std::atomic<int> requests_{0}, closed_{0}, zc_done_{0};
	std::vector<struct rpc_request> held_;
	struct rpc_metrics rm_;
	std::mutex mu_;
	std::vector<std::string> roles_;
};

int getattr(struct rpc_client *c, uint64_t ino, uint64_t *out_ino)
{
	Rdfs__GetattrReq req = RDFS__GETATTR_REQ__INIT;
	ProtobufCMessage *resp = nullptr;

	req.ino = ino;
	int err = rpc_call(c, RDFS_OP_GETATTR, &req.base, &rdfs__attr_reply__descriptor, &resp, 10000);
	if (err == 0) {
		auto *r = (Rdfs__AttrReply *)resp;
		*out_ino = r->attr ? r->attr->ino : 0;
		protobuf_c_message_free_unpacked(resp, nullptr);
	}
	return err;
}

void expect_good_client_works(const std::string &url)
{
	struct rpc_client *c;
	uint64_t ino = 0;

	ASSERT_EQ(0, rpc_client_connect(url.c_str(), &kSecret, "client", 5000, &c));
	EXPECT_EQ(0, getattr(c, 99, &ino));
	EXPECT_EQ(99u, ino);
	rpc_client_close(c);
}

std::string render(struct metrics *r)
{
	char *text = nullptr;
	size_t len = 0;

	EXPECT_EQ(0, metrics_render(r, &text, &len));
	std::string s = text ? text : "";
	free(text);
	return s;
}

bool has_line(const std::string &text, const std::string &line)
{
	return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(Rpc, MetricsCountRequestsErrorsBytesAndInFlight)
{
	struct metrics *reg = metrics_new();
	std::string t;

	{
		TestServer srv(kSecret, 0, reg);
		struct rpc_client *c;
		struct rpc_pending *p;
		struct rpc_reply r;
		uint64_t ino = 0;
		char data[1000];
		struct iovec iov = { data, sizeof(data) };

		memset(data, 7, sizeof(data));
		ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
		for (int i = 0; i < 3; i++)
			EXPECT_EQ(0, getattr(c, 5, &ino));
		EXPECT_EQ(-ENOENT, rpc_call(c, RDFS_OP_UNLINK, nullptr, nullptr, nullptr, 5000));
		ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_READ, nullptr, &iov, 1, &p));
		ASSERT_EQ(0, rpc_call_wait(p, 5000, &r));
		EXPECT_EQ(0, r.status);
		rpc_reply_release(&r);
		/* held by the application: in flight until it is done */
		EXPECT_EQ(-ETIMEDOUT, rpc_call(c, RDFS_OP_STATFS, nullptr, nullptr, nullptr, 200));
		t = render(reg);
		EXPECT_TRUE(has_line(t, "rdfs_t_requests_total{op=\"getattr\"} 3")) << t;
		EXPECT_TRUE(has_line(t, "rdfs_t_request_duration_seconds_count{op=\"getattr\"} 3"));
		EXPECT_TRUE(has_line(t, "rdfs_t_request_errors_total{op=\"unlink\",errno=\"ENOENT\"} 1"));
		EXPECT_TRUE(has_line(t, "rdfs_t_request_bytes_total{op=\"read\"} 1000"));
		EXPECT_TRUE(has_line(t, "rdfs_t_reply_bytes_total{op=\"read\"} 1000"));
		EXPECT_TRUE(has_line(t, "rdfs_t_requests_total{op=\"statfs\"} 1"));
		EXPECT_TRUE(has_line(t, "rdfs_t_request_duration_seconds_count{op=\"statfs\"} 0"));
		EXPECT_TRUE(has_line(t, "rdfs_t_requests_in_flight 1")) << t;
		EXPECT_TRUE(has_line(t, "rdfs_t_connections{role=\"client\"} 1"));
		EXPECT_TRUE(has_line(t, "rdfs_t_connections{role=\"server\"} 0"));
		/* PING is answered by the rpc layer: not an application request */
		EXPECT_EQ(std::string::npos, t.find("op=\"ping\"} 1"));
		rpc_client_close(c);
		/* the server's loop sees the close in its own time */
		for (int i = 0; i < 500 && srv.closed() == 0; i++)
			usleep(10000);
		ASSERT_EQ(1, srv.closed());
		t = render(reg);
		EXPECT_TRUE(has_line(t, "rdfs_t_connections{role=\"client\"} 0")) << t;
		/* the held request is done when the server goes */
	}
	t = render(reg);
	EXPECT_TRUE(has_line(t, "rdfs_t_requests_in_flight 0")) << t;
	metrics_free(reg);
}

TEST(Rpc, AuthenticatedCallsWork)
{
	TestServer srv;
	struct rpc_client *c;
	uint64_t ino = 0;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "ioserver", 5000, &c));
	EXPECT_EQ(srv.url(), rpc_client_url(c));
	EXPECT_EQ(0, getattr(c, 1234, &ino));
	EXPECT_EQ(1234u, ino);
	EXPECT_FALSE(rpc_client_broken(c));
	rpc_client_close(c);
	/* the claim "ioserver" with the cluster secret proves a client, nothing more */
	EXPECT_EQ(std::vector<std::string>{ "client" }, srv.roles());
}

TEST(Rpc, ServerErrorsCarryStatusAndMessage)
{
	TestServer srv;
	struct rpc_client *c;
	Rdfs__UnlinkReq req = RDFS__UNLINK_REQ__INIT;
	struct rpc_pending *p;
	struct rpc_reply r;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	req.name = (char *)"x";
	EXPECT_EQ(-ENOENT, rpc_call(c, RDFS_OP_UNLINK, &req.base, nullptr, nullptr, 10000));
	ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_UNLINK, &req.base, nullptr, 0, &p));
	ASSERT_EQ(0, rpc_call_wait(p, 10000, &r));
	EXPECT_EQ(-ENOENT, r.status);
	Rdfs__Error *e = rdfs__error__unpack(nullptr, r.msg->hdr.body_len, r.msg->body);
	ASSERT_NE(nullptr, e);
	EXPECT_STREQ("no such entry", e->message);
	rdfs__error__free_unpacked(e, nullptr);
	rpc_reply_release(&r);
	rpc_client_close(c);
}

/* A status that is not 0 or -errno must not reach callers that test ret < 0. */
TEST(Rpc, PositiveReplyStatusIsEproto)
{
	TestServer srv;
	struct rpc_client *c;
	ProtobufCMessage *resp = nullptr;
	uint64_t ino = 0;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	EXPECT_EQ(-EPROTO, rpc_call(c, RDFS_OP_READLINK, nullptr, &rdfs__readlink_reply__descriptor,
				    &resp, 10000));
	EXPECT_EQ(nullptr, resp);
	EXPECT_EQ(0, getattr(c, 7, &ino));	/* the connection is fine */
	EXPECT_EQ(7u, ino);
	rpc_client_close(c);
}

TEST(Rpc, PingIsAnsweredByTheRpcLayer)
{
	TestServer srv;
	struct rpc_client *c;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "tool", 5000, &c));
	EXPECT_EQ(0, rpc_call(c, RDFS_OP_PING, nullptr, nullptr, nullptr, 10000));
	EXPECT_EQ(0, srv.requests());
	rpc_client_close(c);
}

TEST(Rpc, UnknownOpcodeIsEnosysAndConnectionContinues)
{
	TestServer srv;
	struct rpc_client *c;
	uint64_t ino = 0;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	EXPECT_EQ(-ENOSYS, rpc_call(c, 100, nullptr, nullptr, nullptr, 10000));
	EXPECT_EQ(-EPROTO, rpc_call(c, RDFS_OP_AUTH_RESPONSE, nullptr, nullptr, nullptr, 10000));
	EXPECT_EQ(0, getattr(c, 5, &ino));
	EXPECT_EQ(5u, ino);
	EXPECT_EQ(1, srv.requests());
	rpc_client_close(c);
}

TEST(Rpc, BulkDataBothWays)
{
	TestServer srv;
	struct rpc_client *c;
	Rdfs__IoReq req = RDFS__IO_REQ__INIT;
	std::vector<uint8_t> data(RDFS_MAX_DATA);
	struct rpc_pending *p;
	struct rpc_reply r;

	for (size_t i = 0; i < data.size(); i++)
		data[i] = (uint8_t)(i * 7 + i / 4096);
	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	struct iovec iov[2] = { { data.data(), 4096 }, { data.data() + 4096, data.size() - 4096 } };
	ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_READ, &req.base, iov, 2, &p));
	ASSERT_EQ(0, rpc_call_wait(p, 30000, &r));
	ASSERT_EQ(0, r.status);
	Rdfs__IoReply *io = rdfs__io_reply__unpack(nullptr, r.msg->hdr.body_len, r.msg->body);
	ASSERT_NE(nullptr, io);
	EXPECT_EQ(RDFS_MAX_DATA, io->length);
	rdfs__io_reply__free_unpacked(io, nullptr);
	ASSERT_EQ(RDFS_MAX_DATA, r.msg->hdr.data_len);
	EXPECT_EQ(0, memcmp(data.data(), r.msg->data, data.size()));
	rpc_reply_release(&r);
	rpc_client_close(c);
}

TEST(Rpc, ZeroCopyReplyFromWorkerThread)
{
	TestServer srv;
	struct rpc_client *c;
	struct rpc_pending *p;
	struct rpc_reply r;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_VOLUME_INFO, nullptr, nullptr, 0, &p));
	ASSERT_EQ(0, rpc_call_wait(p, 30000, &r));
	ASSERT_EQ(0, r.status);
	ASSERT_EQ(1u << 20, r.msg->hdr.data_len);
	EXPECT_EQ(0u, r.msg->hdr.body_len);
	std::vector<uint8_t> expect(1u << 20, 0x5a);
	EXPECT_EQ(0, memcmp(expect.data(), r.msg->data, expect.size()));
	rpc_reply_release(&r);
	for (int i = 0; i < 1000 && srv.zc_done() == 0; i++)
		usleep(10000);
	EXPECT_EQ(1, srv.zc_done());
	rpc_client_close(c);
}

TEST(Rpc, ManyThreadsManyOutstandingCalls)
{
	TestServer srv;
	struct rpc_client *c;
	const int nthreads = 6, rounds = 100, depth = 8;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	std::vector<std::thread> ts;
	for (int t = 0; t < nthreads; t++) {
		ts.emplace_back([&, t] {
			for (int r = 0; r < rounds; r++) {
				struct rpc_pending *p[depth];
				Rdfs__GetattrReq req[depth];

				for (int d = 0; d < depth; d++) {
					rdfs__getattr_req__init(&req[d]);
					req[d].ino = ((uint64_t)t << 32) | (r * depth + d);
					ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_GETATTR, &req[d].base,
								    nullptr, 0, &p[d]));
				}
				/* Wait in reverse order: matching is by tag, not arrival. */
				for (int d = depth - 1; d >= 0; d--) {
					struct rpc_reply rep;

					ASSERT_EQ(0, rpc_call_wait(p[d], 30000, &rep));
					ASSERT_EQ(0, rep.status);
					Rdfs__AttrReply *a = rdfs__attr_reply__unpack(
						nullptr, rep.msg->hdr.body_len, rep.msg->body);
					ASSERT_NE(nullptr, a);
					EXPECT_EQ(req[d].ino, a->attr->ino);
					rdfs__attr_reply__free_unpacked(a, nullptr);
					rpc_reply_release(&rep);
				}
			}
		});
	}
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(nthreads * rounds * depth, srv.requests());
	rpc_client_close(c);
}

TEST(Rpc, WrongSecretIsRefusedAndServerKeepsServing)
{
	TestServer srv;
	struct auth_secret wrong = secret_of("not the cluster secret, at all!!");
	struct rpc_client *c = nullptr;

	EXPECT_EQ(-EACCES, rpc_client_connect(srv.url().c_str(), &wrong, "client", 5000, &c));
	EXPECT_EQ(nullptr, c);
	expect_good_client_works(srv.url());
	EXPECT_EQ(0, srv.closed() - srv.closed());	/* only authenticated peers are reported */
	EXPECT_EQ(1, srv.requests());
}

TEST(Rpc, ClientRefusesServerWithWrongSecret)
{
	/* The server knows a different secret: each side must refuse the other. */
	TestServer srv(secret_of("the impostor's secret, 32 bytes!"));
	struct rpc_client *c = nullptr;

	EXPECT_EQ(-EACCES, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	EXPECT_EQ(0, srv.requests());
}

/* A raw transport peer, to speak the protocol wrongly on purpose. */
struct RawPeer {
	struct xport_ctx *ctx = nullptr;
	struct xport_conn *conn = nullptr;

	RawPeer(const std::string &url)
	{
		EXPECT_EQ(0, xport_ctx_create(&ctx));
		EXPECT_EQ(0, xport_connect(ctx, url.c_str(), 5000, &conn));
	}
	~RawPeer()
	{
		xport_conn_put(conn);
		xport_ctx_destroy(ctx);
	}
	struct xport_msg *recv(int *closed)
	{
		struct xport_event ev;

		*closed = 0;
		for (int i = 0; i < 100; i++) {
			if (xport_test(ctx, &ev, 1, 100) != 1)
				continue;
			if (ev.type == XPORT_EV_RECV)
				return ev.msg;
			if (ev.type == XPORT_EV_CLOSED) {
				*closed = 1;
				return nullptr;
			}
		}
		return nullptr;
	}
};

struct rdfs_frame_hdr req_hdr(uint16_t op, uint32_t tag, uint32_t body_len)
{
	struct rdfs_frame_hdr h = {};

	h.magic = RDFS_FRAME_MAGIC;
	h.version = RDFS_FRAME_VERSION;
	h.opcode = op;
	h.tag = tag;
	h.body_len = body_len;
	return h;
}

TEST(Rpc, RequestBeforeAuthenticationIsRejectedAndClosed)
{
	TestServer srv;
	RawPeer peer(srv.url());
	int closed;

	struct xport_msg *m = peer.recv(&closed);
	ASSERT_NE(nullptr, m);
	EXPECT_EQ(RDFS_OP_AUTH_CHALLENGE, m->hdr.opcode);
	Rdfs__AuthChallenge *ch = rdfs__auth_challenge__unpack(nullptr, m->hdr.body_len, m->body);
	ASSERT_NE(nullptr, ch);
	EXPECT_EQ((size_t)AUTH_NONCE_LEN, ch->nonce.len);
	rdfs__auth_challenge__free_unpacked(ch, nullptr);
	xport_msg_free(m);

	/* Two requests back to back: the second is unread when the server hangs up. */
	struct rdfs_frame_hdr h = req_hdr(RDFS_OP_GETATTR, 77, 0);
	ASSERT_EQ(0, xport_post_send(peer.conn, &h, nullptr, nullptr, 0, nullptr));
	h.tag = 78;
	ASSERT_EQ(0, xport_post_send(peer.conn, &h, nullptr, nullptr, 0, nullptr));
	m = peer.recv(&closed);
	ASSERT_NE(nullptr, m);
	EXPECT_EQ(RDFS_OP_GETATTR, m->hdr.opcode);
	EXPECT_EQ(77u, m->hdr.tag);
	EXPECT_TRUE(m->hdr.flags & RDFS_FRAME_REPLY);
	EXPECT_EQ(-EACCES, m->hdr.status);
	xport_msg_free(m);
	m = peer.recv(&closed);
	EXPECT_EQ(nullptr, m);
	EXPECT_EQ(1, closed);
	EXPECT_EQ(0, srv.requests());
	expect_good_client_works(srv.url());
}

TEST(Rpc, ImpostorServerProofIsRefused)
{
	/* A fake server that accepts any response but cannot prove the secret. */
	struct xport_ctx *ctx;
	struct xport_listener *l;
	ASSERT_EQ(0, xport_ctx_create(&ctx));
	ASSERT_EQ(0, xport_listen(ctx, "tcp://127.0.0.1:0", &l));
	std::string url = xport_listener_url(l);
	std::thread fake([&] {
		struct xport_event ev;
		struct xport_conn *conn = nullptr;
		uint8_t nonce[AUTH_NONCE_LEN] = {}, mac[AUTH_MAC_LEN] = {};

		for (int i = 0; i < 100; i++) {
			if (xport_test(ctx, &ev, 1, 100) != 1)
				continue;
			if (ev.type == XPORT_EV_ACCEPT) {
				Rdfs__AuthChallenge ch = RDFS__AUTH_CHALLENGE__INIT;
				uint8_t buf[128];

				conn = ev.conn;
				ch.nonce.data = nonce;
				ch.nonce.len = sizeof(nonce);
				size_t n = rdfs__auth_challenge__pack(&ch, buf);
				struct rdfs_frame_hdr h = req_hdr(RDFS_OP_AUTH_CHALLENGE, 0, n);
				xport_post_send(conn, &h, buf, nullptr, 0, nullptr);
			} else if (ev.type == XPORT_EV_RECV) {
				Rdfs__AuthResult res = RDFS__AUTH_RESULT__INIT;
				uint8_t buf[128];

				res.mac.data = mac;
				res.mac.len = sizeof(mac);
				size_t n = rdfs__auth_result__pack(&res, buf);
				struct rdfs_frame_hdr h = req_hdr(RDFS_OP_AUTH_RESULT, 0, n);
				h.flags = RDFS_FRAME_REPLY;
				xport_post_send(conn, &h, buf, nullptr, 0, nullptr);
				xport_msg_free(ev.msg);
			} else if (ev.type == XPORT_EV_CLOSED) {
				break;
			}
		}
		xport_conn_put(conn);
	});
	struct rpc_client *c = nullptr;
	EXPECT_EQ(-EACCES, rpc_client_connect(url.c_str(), &kSecret, "client", 5000, &c));
	fake.join();
	xport_ctx_destroy(ctx);
}

TEST(Rpc, ConnectFailures)
{
	struct rpc_client *c;
	std::string url;
	{
		TestServer srv;
		url = srv.url();
	}
	EXPECT_EQ(-ECONNREFUSED, rpc_client_connect(url.c_str(), &kSecret, "client", 2000, &c));
	EXPECT_EQ(-EINVAL, rpc_client_connect("bogus", &kSecret, "client", 2000, &c));
}

TEST(Rpc, TimedOutCallLeavesConnectionUsable)
{
	TestServer srv;
	struct rpc_client *c;
	uint64_t ino = 0;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	EXPECT_EQ(-ETIMEDOUT, rpc_call(c, RDFS_OP_STATFS, nullptr, nullptr, nullptr, 50));
	EXPECT_FALSE(rpc_client_broken(c));
	EXPECT_EQ(0, getattr(c, 8, &ino));
	EXPECT_EQ(8u, ino);
	rpc_client_close(c);
}

TEST(Rpc, BrokenConnectionFailsPendingAndFutureCalls)
{
	TestServer srv;
	struct rpc_client *c;
	struct rpc_pending *held;
	struct rpc_reply r;
	uint64_t ino;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_STATFS, nullptr, nullptr, 0, &held));
	/* RMDIR makes the server hang up. */
	EXPECT_EQ(-ENOTCONN, rpc_call(c, RDFS_OP_RMDIR, nullptr, nullptr, nullptr, 10000));
	EXPECT_EQ(-ENOTCONN, rpc_call_wait(held, 10000, &r));
	EXPECT_EQ(nullptr, r.msg);
	EXPECT_TRUE(rpc_client_broken(c));
	EXPECT_EQ(-ENOTCONN, getattr(c, 1, &ino));
	rpc_client_close(c);
	for (int i = 0; i < 500 && srv.closed() < 1; i++)
		usleep(10000);
	EXPECT_EQ(1, srv.closed());
}

TEST(Rpc, ServerReportsClosedOnlyForAuthenticatedPeers)
{
	TestServer srv;
	struct auth_secret wrong = secret_of("not the cluster secret, at all!!");
	struct rpc_client *c;

	EXPECT_EQ(-EACCES, rpc_client_connect(srv.url().c_str(), &wrong, "client", 5000, &c));
	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	rpc_client_close(c);
	for (int i = 0; i < 500 && srv.closed() < 1; i++)
		usleep(10000);
	usleep(50000);
	EXPECT_EQ(1, srv.closed());
}

TEST(Rpc, IdleUnauthenticatedPeerIsDropped)
{
	TestServer srv(kSecret, 200);
	RawPeer peer(srv.url());
	int closed = 0;

	struct xport_msg *m = peer.recv(&closed);
	ASSERT_NE(nullptr, m);	/* the challenge */
	xport_msg_free(m);
	/* Say nothing: the server hangs up after its handshake timeout. */
	m = peer.recv(&closed);
	EXPECT_EQ(nullptr, m);
	EXPECT_EQ(1, closed);
	expect_good_client_works(srv.url());
}

TEST(Rpc, PeerSilentPastItsIdleTimeoutIsClosedOthersStay)
{
	TestServer srv;
	struct rpc_client *c, *other;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &other));
	ASSERT_EQ(0, rpc_call(c, RDFS_OP_REGISTER, nullptr, nullptr, nullptr, 10000));
	/* PINGs (answered by the rpc layer itself) count: three timeouts pass */
	for (int i = 0; i < 18; i++) {
		usleep(50000);
		ASSERT_EQ(0, rpc_call(c, RDFS_OP_PING, nullptr, nullptr, nullptr, 10000));
	}
	EXPECT_FALSE(rpc_client_broken(c));
	/* silence: the server hangs up (bounded wait, not a speed check) */
	for (int i = 0; i < 1000 && !rpc_client_broken(c); i++)
		usleep(10000);
	EXPECT_TRUE(rpc_client_broken(c));
	for (int i = 0; i < 500 && srv.closed() < 1; i++)
		usleep(10000);
	EXPECT_EQ(1, srv.closed());
	/* a connection without a timeout was as silent and stays */
	EXPECT_FALSE(rpc_client_broken(other));
	EXPECT_EQ(0, rpc_call(other, RDFS_OP_PING, nullptr, nullptr, nullptr, 10000));
	rpc_client_close(c);
	rpc_client_close(other);
}

TEST(Rpc, BulkDataBeforeAuthenticationIsRefusedUnread)
{
	TestServer srv;
	RawPeer peer(srv.url());
	std::vector<uint8_t> data(64 * 1024, 1);
	struct iovec iov = { data.data(), data.size() };
	int closed = 0;

	struct xport_msg *m = peer.recv(&closed);
	ASSERT_NE(nullptr, m);
	xport_msg_free(m);
	/* An unauthenticated peer cannot make the server allocate bulk buffers. */
	struct rdfs_frame_hdr h = req_hdr(RDFS_OP_WRITE, 1, 0);
	h.data_len = data.size();
	ASSERT_EQ(0, xport_post_send(peer.conn, &h, nullptr, &iov, 1, nullptr));
	m = peer.recv(&closed);
	EXPECT_EQ(nullptr, m);
	EXPECT_EQ(1, closed);
	EXPECT_EQ(0, srv.requests());
	expect_good_client_works(srv.url());
}

TEST(Rpc, ManyClientsComeAndGo)
{
	TestServer srv;
	const int nthreads = 6, rounds = 15;
	std::atomic<int> ok{0};

	std::vector<std::thread> ts;
	for (int t = 0; t < nthreads; t++) {
		ts.emplace_back([&, t] {
			for (int r = 0; r < rounds; r++) {
				struct rpc_client *c;
				uint64_t ino = 0;

				ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client",
								10000, &c));
				if (getattr(c, t * 1000 + r, &ino) == 0 && ino == (uint64_t)(t * 1000 + r))
					ok++;
				/* Every other client leaves a call unanswered behind it. */
				if (r % 2) {
					struct rpc_pending *p;

					ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_STATFS, nullptr, nullptr, 0, &p));
					struct rpc_reply rep;
					EXPECT_EQ(-ETIMEDOUT, rpc_call_wait(p, 1, &rep));
				}
				rpc_client_close(c);
			}
		});
	}
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(nthreads * rounds, ok.load());
	for (int i = 0; i < 1000 && srv.closed() < nthreads * rounds; i++)
		usleep(10000);
	EXPECT_EQ(nthreads * rounds, srv.closed());
}

int open_fds()
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

TEST(Rpc, ServersAndClientsLeaveNoFileDescriptors)
{
	int before = open_fds();

	for (int i = 0; i < 3; i++) {
		auto srv = std::make_unique<TestServer>();
		struct auth_secret wrong = secret_of("not the cluster secret, at all!!");
		struct rpc_client *c[4], *bad;

		for (auto &x : c)
			ASSERT_EQ(0, rpc_client_connect(srv->url().c_str(), &kSecret, "client", 5000, &x));
		EXPECT_EQ(-EACCES, rpc_client_connect(srv->url().c_str(), &wrong, "client", 5000, &bad));
		/* Close some clients first; the server leaves the others behind. */
		rpc_client_close(c[0]);
		rpc_client_close(c[1]);
		srv.reset();
		rpc_client_close(c[2]);
		rpc_client_close(c[3]);
	}
	EXPECT_EQ(before, open_fds());
}

TEST(Rpc, PeerThatOutrunsTheServerIsHeldBackThenServed)
{
	/* A server that holds every request until told to answer them all. */
	const char *urls[] = { "tcp://127.0.0.1:0", nullptr };
	struct rpc_server *srv;
	struct auth_keys keys = keys_of(kSecret);
	ASSERT_EQ(0, rpc_server_create(urls, &keys, &srv));
	std::string url = rpc_server_url(srv, 0);
	std::atomic<bool> release{false}, stop{false};
	std::atomic<int> seen{0}, answered{0};
	std::thread loop([&] {
		std::vector<struct rpc_request> held;
		struct rpc_request req;

		while (!stop) {
			enum rpc_server_event e = rpc_server_next(srv, &req, 20);

			if (e == RPC_SRV_REQUEST) {
				seen++;
				held.push_back(req);
			} else if (e == RPC_SRV_CLOSED) {
				rpc_request_done(&req);
			}
			if (release) {
				for (auto &r : held) {
					rpc_server_reply(&r, 0, nullptr, nullptr, 0);
					rpc_request_done(&r);
					answered++;
				}
				held.clear();
			}
		}
		for (auto &r : held)
			rpc_request_done(&r);
	});

	struct rpc_client *c;
	const int n = 512;
	std::vector<struct rpc_pending *> p(n);
	std::vector<uint8_t> data(256 * 1024, 3);	/* n of them: 128 MiB in all */
	struct iovec iov = { data.data(), data.size() };
	ASSERT_EQ(0, rpc_client_connect(url.c_str(), &kSecret, "client", 5000, &c));
	for (int i = 0; i < n; i++)
		ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_WRITE, nullptr, &iov, 1, &p[i]));
	/*
	 * Wait until the server stops taking more: unchanged for half a second,
	 * so a loaded machine's slow sender is not taken for a held-back one
	 * (bounded; liveness only).
	 */
	int last = -1, still = 0;
	for (int i = 0; i < 300 && still < 5; i++) {
		int now = seen.load();

		still = now == last ? still + 1 : 0;
		last = now;
		usleep(100000);
	}
	/* It holds ~64 MiB, plus what one read round took, and no more. */
	EXPECT_GE(seen.load(), 256);
	EXPECT_LT(seen.load(), 256 + 64);
	release = true;
	for (int i = 0; i < n; i++) {
		struct rpc_reply r;

		ASSERT_EQ(0, rpc_call_wait(p[i], 30000, &r));
		EXPECT_EQ(0, r.status);
		rpc_reply_release(&r);
	}
	EXPECT_EQ(n, seen.load());
	rpc_client_close(c);
	stop = true;
	loop.join();
	rpc_server_destroy(srv);
}

/* Run the handshake by hand on a raw peer, as @role. True when the server accepts it. */
bool raw_authenticate(RawPeer &peer, const char *role)
{
	uint8_t nc[AUTH_NONCE_LEN], mac[AUTH_MAC_LEN], buf[256];
	Rdfs__AuthResponse resp = RDFS__AUTH_RESPONSE__INIT;
	int closed;

	struct xport_msg *m = peer.recv(&closed);
	if (!m || m->hdr.opcode != RDFS_OP_AUTH_CHALLENGE) {
		xport_msg_free(m);
		return false;
	}
	Rdfs__AuthChallenge *ch = rdfs__auth_challenge__unpack(nullptr, m->hdr.body_len, m->body);
	xport_msg_free(m);
	if (!ch || ch->nonce.len != AUTH_NONCE_LEN || auth_random(nc, sizeof(nc))) {
		if (ch)
			rdfs__auth_challenge__free_unpacked(ch, nullptr);
		return false;
	}
	auth_client_proof(&kSecret, ch->nonce.data, nc, role, mac);
	rdfs__auth_challenge__free_unpacked(ch, nullptr);
	resp.mac.data = mac;
	resp.mac.len = sizeof(mac);
	resp.client_nonce.data = nc;
	resp.client_nonce.len = sizeof(nc);
	resp.role = (char *)role;
	size_t n = rdfs__auth_response__pack(&resp, buf);
	struct rdfs_frame_hdr h = req_hdr(RDFS_OP_AUTH_RESPONSE, 1, n);
	if (xport_post_send(peer.conn, &h, buf, nullptr, 0, nullptr))
		return false;
	m = peer.recv(&closed);
	bool ok = m && m->hdr.opcode == RDFS_OP_AUTH_RESULT && m->hdr.status == 0;
	xport_msg_free(m);
	return ok;
}

/* The reply data for request @tag: the tag, then a byte pattern of it. */
void fill_reply(std::vector<uint8_t> &d, uint32_t tag)
{
	for (size_t i = 0; i < d.size(); i++)
		d[i] = (uint8_t)(tag * 7 + i / 4096);
	memcpy(d.data(), &tag, sizeof(tag));
}

/*
 * A server that answers every READ at once with 1 MiB (fill_reply of its tag)
 * and records, for peers with role "client", how many it answered and what was
 * then queued for them.
 */
class BulkReplyServer {
public:
	static constexpr size_t kReply = 1u << 20;

	BulkReplyServer()
	{
		const char *urls[] = { "tcp://127.0.0.1:0", nullptr };

		struct auth_keys keys = keys_of(kSecret);

		EXPECT_EQ(0, rpc_server_create(urls, &keys, &srv_));
		url_ = rpc_server_url(srv_, 0);
		thread_ = std::thread([this] { run(); });
	}
	~BulkReplyServer()
	{
		stop_ = true;
		rpc_server_wake(srv_);
		thread_.join();
		rpc_server_destroy(srv_);
	}
	const std::string &url() const { return url_; }

	std::mutex mu;
	std::condition_variable cv;
	int handled = 0;		/* under mu, as are the rest */
	int closed = 0;
	size_t last_queued = 0, max_queued = 0;

	/* Liveness guard only: a server that never gets there fails, not hangs. */
	template <class Pred> bool wait(std::unique_lock<std::mutex> &g, Pred pred)
	{
		return cv.wait_for(g, std::chrono::seconds(60), pred);
	}

	/*
	 * Send READs on @peer one at a time, never reading the replies, until the
	 * server has more than the bound queued for it. Returns how many were sent.
	 */
	int fill_queue(RawPeer &peer, int max)
	{
		int sent = 0;

		while (sent < max) {
			struct rdfs_frame_hdr h = req_hdr(RDFS_OP_READ, ++sent, 0);

			EXPECT_EQ(0, xport_post_send(peer.conn, &h, nullptr, nullptr, 0, nullptr));
			std::unique_lock<std::mutex> g(mu);
			if (!wait(g, [&] { return handled == sent; })) {
				ADD_FAILURE() << "request " << sent << " never answered";
				return max;
			}
			if (last_queued > RPC_SERVER_TX_QUEUE_MAX)
				return sent;
		}
		return sent;
	}

private:
	void run()
	{
		std::vector<uint8_t> data(kReply);
		struct rpc_request req;

		while (!stop_) {
			enum rpc_server_event e = rpc_server_next(srv_, &req, -1);

			if (e == RPC_SRV_CLOSED) {
				bool raw = req.peer->cls == AUTH_CLASS_CLIENT;

				rpc_request_done(&req);
				std::lock_guard<std::mutex> g(mu);
				closed += raw;
				cv.notify_all();
			}
			if (e != RPC_SRV_REQUEST)
				continue;
			Rdfs__IoReply out = RDFS__IO_REPLY__INIT;
			struct iovec iov = { data.data(), data.size() };
			bool raw = req.peer->cls == AUTH_CLASS_CLIENT;

			fill_reply(data, req.msg->hdr.tag);
			out.length = kReply;
			EXPECT_EQ(0, rpc_server_reply(&req, 0, &out.base, &iov, 1));
			size_t q = xport_conn_queued_bytes(req.conn);
			rpc_request_done(&req);
			std::lock_guard<std::mutex> g(mu);
			if (raw) {
				handled++;
				last_queued = q;
				max_queued = std::max(max_queued, q);
			}
			cv.notify_all();
		}
	}

	struct rpc_server *srv_ = nullptr;
	std::string url_;
	std::thread thread_;
	std::atomic<bool> stop_{false};
};

/* A well-behaved client (proving the server key, to tell it apart) gets its 1 MiB READ replies intact. */
void expect_bulk_client_served(const std::string &url)
{
	const size_t kReply = BulkReplyServer::kReply;
	std::vector<uint8_t> want(kReply);
	struct auth_secret skey = server_key();
	struct rpc_client *c;

	ASSERT_EQ(0, rpc_client_connect(url.c_str(), &skey, "server", 5000, &c));
	for (int i = 0; i < 3; i++) {
		struct rpc_pending *p;
		struct rpc_reply r;

		ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_READ, nullptr, nullptr, 0, &p));
		ASSERT_EQ(0, rpc_call_wait(p, 30000, &r));
		EXPECT_EQ(0, r.status);
		if (r.msg->hdr.data_len == kReply) {
			fill_reply(want, r.msg->hdr.tag);
			EXPECT_EQ(0, memcmp(want.data(), r.msg->data, kReply));
		} else {
			ADD_FAILURE() << "data_len " << r.msg->hdr.data_len;
		}
		rpc_reply_release(&r);
	}
	rpc_client_close(c);
}

TEST(Rpc, PeerThatDoesNotReadRepliesIsHeldBackThenGetsThemAll)
{
	const size_t kReply = BulkReplyServer::kReply;
	const int n = 128;	/* 128 MiB of replies: well over the bound plus socket buffers */
	BulkReplyServer srv;
	RawPeer peer(srv.url());
	ASSERT_TRUE(raw_authenticate(peer, "client"));

	int sent = srv.fill_queue(peer, n);
	ASSERT_LT(sent, n);
	/* Pipeline the rest: the server must not read them while the replies pile up. */
	for (int tag = sent + 1; tag <= n; tag++) {
		struct rdfs_frame_hdr h = req_hdr(RDFS_OP_READ, tag, 0);

		EXPECT_EQ(0, xport_post_send(peer.conn, &h, nullptr, nullptr, 0, nullptr));
	}
	/* Meanwhile another client is served normally, with bulk data too. */
	expect_bulk_client_served(srv.url());
	{
		std::lock_guard<std::mutex> g(srv.mu);
		/* The intake stayed closed: nothing more was read from the raw peer... */
		EXPECT_EQ(sent, srv.handled);
		/* ...so what is queued for it never grew past the bound plus one reply. */
		EXPECT_LE(srv.max_queued, RPC_SERVER_TX_QUEUE_MAX + kReply + 4096);
	}

	/* Now the peer reads: every reply arrives, in order, intact. */
	std::vector<uint8_t> want(kReply);
	for (int tag = 1; tag <= n; tag++) {
		int closed;
		struct xport_msg *m = peer.recv(&closed);

		ASSERT_NE(nullptr, m) << "reply " << tag << " missing, closed " << closed;
		EXPECT_EQ(RDFS_OP_READ, m->hdr.opcode);
		EXPECT_TRUE(m->hdr.flags & RDFS_FRAME_REPLY);
		EXPECT_EQ((uint32_t)tag, m->hdr.tag);
		EXPECT_EQ(0, m->hdr.status);
		ASSERT_EQ(kReply, m->hdr.data_len);
		Rdfs__IoReply *io = rdfs__io_reply__unpack(nullptr, m->hdr.body_len, m->body);
		ASSERT_NE(nullptr, io);
		EXPECT_EQ(kReply, io->length);
		rdfs__io_reply__free_unpacked(io, nullptr);
		fill_reply(want, tag);
		EXPECT_EQ(0, memcmp(want.data(), m->data, kReply)) << "reply " << tag;
		xport_msg_free(m);
	}
	std::lock_guard<std::mutex> g(srv.mu);
	EXPECT_EQ(n, srv.handled);
}

TEST(Rpc, HeldBackPeerThatHangsUpIsCleanedUp)
{
	const int n = 128;
	BulkReplyServer srv;
	{
		RawPeer peer(srv.url());
		ASSERT_TRUE(raw_authenticate(peer, "client"));
		int sent = srv.fill_queue(peer, n);
		ASSERT_LT(sent, n);
		for (int tag = sent + 1; tag <= n; tag++) {
			struct rdfs_frame_hdr h = req_hdr(RDFS_OP_READ, tag, 0);

			EXPECT_EQ(0, xport_post_send(peer.conn, &h, nullptr, nullptr, 0, nullptr));
		}
		/* Closing with replies unread resets the connection. */
	}
	{
		std::unique_lock<std::mutex> g(srv.mu);
		EXPECT_TRUE(srv.wait(g, [&] { return srv.closed == 1; }));
	}
	expect_bulk_client_served(srv.url());
}

/*
 * Partial replies (RDFS_FRAME_MORE). PartServer answers READ with the bytes
 * pattern_byte(tag seed, i) for i < IoReq.length, cut into parts of
 * IoReq.first_block bytes sent with rpc_server_reply_part(); the final frame
 * carries the rest and an IoReply, or, with IoReq.stable set, -EIO after all
 * the parts. IoReq.head == 1 holds the request until a second one with head 1
 * arrives, then sends the two replies' parts alternately. WRITE sends
 * RDFS_MAX_DATA + 1 MiB in 1 MiB parts: more than one reply may carry.
 */
uint8_t pattern_byte(uint32_t seed, size_t i)
{
	return (uint8_t)(i * 131 + (i >> 12) + seed * 17);
}

class PartServer {
public:
	PartServer()
	{
		const char *urls[] = { "tcp://127.0.0.1:0", nullptr };

		struct auth_keys keys = keys_of(kSecret);

		EXPECT_EQ(0, rpc_server_create(urls, &keys, &srv_));
		url_ = rpc_server_url(srv_, 0);
		thread_ = std::thread([this] { run(); });
	}
	~PartServer()
	{
		stop_ = true;
		rpc_server_wake(srv_);
		thread_.join();
		rpc_server_destroy(srv_);
	}
	const std::string &url() const { return url_; }
	int parts_sent() { return sent_.load(); }

private:
	struct Part {
		PartServer *srv;
		std::vector<uint8_t> buf;
	};
	struct Plan {
		struct rpc_request req;
		std::vector<uint8_t> data;
		size_t part, off = 0;
		bool fail;
	};

	static void part_sent(void *arg, int status)
	{
		Part *p = (Part *)arg;

		p->srv->sent_++;
		delete p;
	}
	/* Send the next part of @pl; true when only the final frame is left. */
	bool send_part(Plan &pl)
	{
		size_t n = std::min(pl.part, pl.data.size() - pl.off);

		if (pl.off + n >= pl.data.size() && !pl.fail)
			return true;
		if (n == 0)
			return true;
		Part *p = new Part{ this, std::vector<uint8_t>(pl.data.begin() + pl.off,
							       pl.data.begin() + pl.off + n) };
		struct iovec iov = { p->buf.data(), p->buf.size() };
		EXPECT_EQ(0, rpc_server_reply_part(&pl.req, &iov, 1, part_sent, p));
		pl.off += n;
		return pl.off >= pl.data.size() && pl.fail;
	}
	void finish(Plan &pl)
	{
		Rdfs__IoReply out = RDFS__IO_REPLY__INIT;
		struct iovec iov = { pl.data.data() + pl.off, pl.data.size() - pl.off };

		if (pl.fail) {
			EXPECT_EQ(0, rpc_server_reply_error(&pl.req, -EIO, "disk failed"));
		} else {
			out.length = pl.data.size();
			EXPECT_EQ(0, rpc_server_reply(&pl.req, 0, &out.base, &iov, iov.iov_len ? 1 : 0));
		}
		rpc_request_done(&pl.req);
	}
	void run()
	{
		struct rpc_request req;
		std::vector<Plan> held;

		while (!stop_) {
			switch (rpc_server_next(srv_, &req, -1)) {
			case RPC_SRV_REQUEST:
				handle(&req, held);
				break;
			case RPC_SRV_CLOSED:
				rpc_request_done(&req);
				break;
			default:
				break;
			}
		}
		for (auto &pl : held)
			rpc_request_done(&pl.req);
	}
	void handle(struct rpc_request *req, std::vector<Plan> &held)
	{
		struct xport_msg *m = req->msg;

		if (m->hdr.opcode == RDFS_OP_WRITE) {
			for (size_t off = 0; off < RDFS_MAX_DATA + (1u << 20); off += 1u << 20) {
				Part *p = new Part{ this, std::vector<uint8_t>(1u << 20, 0x77) };
				struct iovec iov = { p->buf.data(), p->buf.size() };
				if (rpc_server_reply_part(req, &iov, 1, part_sent, p))
					delete p;
			}
			rpc_server_reply(req, 0, nullptr, nullptr, 0);
			rpc_request_done(req);
			return;
		}
		if (m->hdr.opcode != RDFS_OP_READ) {
			rpc_server_reply_error(req, -ENOSYS, nullptr);
			rpc_request_done(req);
			return;
		}
		Rdfs__IoReq *io = rdfs__io_req__unpack(nullptr, m->hdr.body_len, m->body);
		ASSERT_NE(nullptr, io);
		Plan pl;
		pl.req = *req;
		pl.part = io->first_block ? io->first_block : 4096;
		pl.fail = io->stable;
		pl.data.resize(io->length);
		for (size_t i = 0; i < pl.data.size(); i++)
			pl.data[i] = pattern_byte(io->block_count, i);
		bool pair = io->head == 1;
		rdfs__io_req__free_unpacked(io, nullptr);
		if (!pair) {
			while (!send_part(pl))
				;
			finish(pl);
			return;
		}
		held.push_back(std::move(pl));
		if (held.size() < 2)
			return;
		/* Interleave the two replies part by part. */
		bool done0 = false, done1 = false;
		while (!done0 || !done1) {
			if (!done0)
				done0 = send_part(held[0]);
			if (!done1)
				done1 = send_part(held[1]);
		}
		finish(held[1]);
		finish(held[0]);
		held.clear();
	}

	struct rpc_server *srv_ = nullptr;
	std::string url_;
	std::thread thread_;
	std::atomic<bool> stop_{false};
	std::atomic<int> sent_{0};
};

struct PartCall {
	struct rpc_pending *p = nullptr;
	struct rpc_reply r = {};
};

int start_parted_read(struct rpc_client *c, uint32_t length, uint32_t part, uint32_t seed,
		      bool fail, bool pair, PartCall *call)
{
	Rdfs__IoReq req = RDFS__IO_REQ__INIT;

	req.length = length;
	req.first_block = part;
	req.block_count = seed;
	req.stable = fail;
	req.head = pair ? 1 : 0;
	return rpc_call_start(c, RDFS_OP_READ, &req.base, nullptr, 0, &call->p);
}

/* The reply's data, through each accessor, equals the pattern. */
void expect_pattern(const struct rpc_reply *r, uint32_t length, uint32_t seed)
{
	std::vector<uint8_t> want(length), got(length), viaiov;
	std::vector<struct iovec> iov(r->nparts + 1);

	for (size_t i = 0; i < length; i++)
		want[i] = pattern_byte(seed, i);
	ASSERT_EQ(length, rpc_reply_data_len(r));
	EXPECT_EQ(length, rpc_reply_data_copy(r, 0, got.data(), length));
	EXPECT_TRUE(want == got) << "copy differs";
	int n = rpc_reply_data_iov(r, iov.data(), (int)iov.size());
	ASSERT_LE(n, (int)iov.size());
	for (int i = 0; i < n; i++)
		viaiov.insert(viaiov.end(), (uint8_t *)iov[i].iov_base,
			      (uint8_t *)iov[i].iov_base + iov[i].iov_len);
	EXPECT_TRUE(want == viaiov) << "iovecs differ";
	/* a copy from the middle, across part boundaries */
	if (length > 10000) {
		std::vector<uint8_t> mid(length - 5001);
		EXPECT_EQ(mid.size(), rpc_reply_data_copy(r, 5000, mid.data(), mid.size()));
		EXPECT_EQ(0, memcmp(mid.data(), want.data() + 5000, mid.size()));
	}
	/* asking past the end copies what there is */
	EXPECT_EQ(0u, rpc_reply_data_copy(r, length, got.data(), 1));
}

TEST(RpcParts, MultiPartReplyIsReassembledByteForByte)
{
	PartServer srv;
	struct rpc_client *c;
	const uint32_t sizes[][2] = {
		{ 1, 4096 }, { 4096, 4096 }, { 4097, 4096 }, { 100000, 4096 },
		{ 1u << 20, 128u << 10 }, { (1u << 20) + 123, 131072 }, { RDFS_MAX_DATA, 1u << 20 },
		{ RDFS_MAX_DATA, 4096 },
	};

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	for (auto &sz : sizes) {
		PartCall call;

		SCOPED_TRACE(std::to_string(sz[0]) + " bytes in parts of " + std::to_string(sz[1]));
		ASSERT_EQ(0, start_parted_read(c, sz[0], sz[1], sz[0] & 0xff, false, false, &call));
		ASSERT_EQ(0, rpc_call_wait(call.p, 30000, &call.r));
		ASSERT_EQ(0, call.r.status);
		EXPECT_EQ((int)((sz[0] - 1) / sz[1]), call.r.nparts);
		expect_pattern(&call.r, sz[0], sz[0] & 0xff);
		Rdfs__IoReply *io = rdfs__io_reply__unpack(nullptr, call.r.msg->hdr.body_len,
							   call.r.msg->body);
		ASSERT_NE(nullptr, io);
		EXPECT_EQ(sz[0], io->length);
		rdfs__io_reply__free_unpacked(io, nullptr);
		rpc_reply_release(&call.r);
		EXPECT_EQ(nullptr, call.r.parts);
		EXPECT_EQ(0, call.r.nparts);
		rpc_reply_release(&call.r);	/* twice is harmless */
	}
	EXPECT_FALSE(rpc_client_broken(c));
	rpc_client_close(c);
}

TEST(RpcParts, InterleavedPartsOfTwoCallsGoToTheirOwnReplies)
{
	PartServer srv;
	struct rpc_client *c;
	PartCall a, b;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	ASSERT_EQ(0, start_parted_read(c, 300000, 4096, 1, false, true, &a));
	ASSERT_EQ(0, start_parted_read(c, 200001, 8192, 2, false, true, &b));
	ASSERT_EQ(0, rpc_call_wait(b.p, 30000, &b.r));
	ASSERT_EQ(0, rpc_call_wait(a.p, 30000, &a.r));
	ASSERT_EQ(0, a.r.status);
	ASSERT_EQ(0, b.r.status);
	EXPECT_GT(a.r.nparts, 10);
	EXPECT_GT(b.r.nparts, 10);
	expect_pattern(&a.r, 300000, 1);
	expect_pattern(&b.r, 200001, 2);
	rpc_reply_release(&a.r);
	rpc_reply_release(&b.r);
	rpc_client_close(c);
}

TEST(RpcParts, PartsThenErrorStatusHandNoDataToTheCaller)
{
	PartServer srv;
	struct rpc_client *c;
	PartCall call;
	uint64_t ino;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	ASSERT_EQ(0, start_parted_read(c, 65536, 4096, 3, true, false, &call));
	ASSERT_EQ(0, rpc_call_wait(call.p, 30000, &call.r));
	EXPECT_EQ(-EIO, call.r.status);
	EXPECT_EQ(0, call.r.nparts);
	EXPECT_EQ(0u, rpc_reply_data_len(&call.r));
	Rdfs__Error *e = rdfs__error__unpack(nullptr, call.r.msg->hdr.body_len, call.r.msg->body);
	ASSERT_NE(nullptr, e);
	EXPECT_STREQ("disk failed", e->message);
	rdfs__error__free_unpacked(e, nullptr);
	rpc_reply_release(&call.r);
	/* the connection carries on */
	PartCall ok;
	ASSERT_EQ(0, start_parted_read(c, 20000, 4096, 4, false, false, &ok));
	ASSERT_EQ(0, rpc_call_wait(ok.p, 30000, &ok.r));
	ASSERT_EQ(0, ok.r.status);
	expect_pattern(&ok.r, 20000, 4);
	rpc_reply_release(&ok.r);
	EXPECT_EQ(-ENOSYS, getattr(c, 1, &ino));
	rpc_client_close(c);
}

TEST(RpcParts, PartsOverTheDataLimitBreakTheConnection)
{
	PartServer srv;
	struct rpc_client *c;
	struct rpc_pending *p;
	struct rpc_reply r;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	ASSERT_EQ(0, rpc_call_start(c, RDFS_OP_WRITE, nullptr, nullptr, 0, &p));
	EXPECT_EQ(-ENOTCONN, rpc_call_wait(p, 30000, &r));
	EXPECT_TRUE(rpc_client_broken(c));
	rpc_client_close(c);
	/* the server serves the next client */
	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	PartCall ok;
	ASSERT_EQ(0, start_parted_read(c, 50000, 4096, 5, false, false, &ok));
	ASSERT_EQ(0, rpc_call_wait(ok.p, 30000, &ok.r));
	expect_pattern(&ok.r, 50000, 5);
	rpc_reply_release(&ok.r);
	rpc_client_close(c);
}

TEST(RpcParts, PartsOfATimedOutCallAreDiscarded)
{
	PartServer srv;
	struct rpc_client *c;
	PartCall a, b;

	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	/* held by the server until its pair arrives: times out first */
	ASSERT_EQ(0, start_parted_read(c, 100000, 4096, 6, false, true, &a));
	EXPECT_EQ(-ETIMEDOUT, rpc_call_wait(a.p, 100, &a.r));
	ASSERT_EQ(0, start_parted_read(c, 70000, 4096, 7, false, true, &b));
	ASSERT_EQ(0, rpc_call_wait(b.p, 30000, &b.r));
	ASSERT_EQ(0, b.r.status);
	expect_pattern(&b.r, 70000, 7);
	rpc_reply_release(&b.r);
	EXPECT_FALSE(rpc_client_broken(c));
	rpc_client_close(c);
}

TEST(RpcParts, RequestFlaggedMoreIsAProtocolError)
{
	PartServer srv;
	RawPeer peer(srv.url());
	int closed;

	struct xport_msg *m = peer.recv(&closed);
	ASSERT_NE(nullptr, m);
	EXPECT_EQ(RDFS_OP_AUTH_CHALLENGE, m->hdr.opcode);
	xport_msg_free(m);
	struct rdfs_frame_hdr h = req_hdr(RDFS_OP_READ, 9, 0);
	h.flags = RDFS_FRAME_MORE;
	ASSERT_EQ(0, xport_post_send(peer.conn, &h, nullptr, nullptr, 0, nullptr));
	m = peer.recv(&closed);
	EXPECT_EQ(nullptr, m);
	EXPECT_EQ(1, closed);
	xport_msg_free(m);

	/* a partial reply sent to a server is refused too, and others are still served */
	struct rpc_client *c;
	ASSERT_EQ(0, rpc_client_connect(srv.url().c_str(), &kSecret, "client", 5000, &c));
	PartCall ok;
	ASSERT_EQ(0, start_parted_read(c, 9000, 4096, 8, false, false, &ok));
	ASSERT_EQ(0, rpc_call_wait(ok.p, 30000, &ok.r));
	expect_pattern(&ok.r, 9000, 8);
	rpc_reply_release(&ok.r);
	rpc_client_close(c);
}

} // namespace
