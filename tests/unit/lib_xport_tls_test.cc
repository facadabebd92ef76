// SPDX-License-Identifier: MIT
/*
 * lib_xport_tls_test.cc - the tls:// transport (lib/xport_tcp.c with
 * lib/xport_tls.c) over real loopback sockets:
 *
 *  - it carries what tcp:// carries, intact and in order, also with several
 *    threads posting on one connection (one shared SSL object), and what a
 *    server posts before its side of the handshake is done;
 *  - an eavesdropper on the wire sees none of it (a recording relay; the same
 *    relay on tcp:// shows the test can tell);
 *  - only a peer holding the key is served, and peers that do not speak TLS,
 *    or speak nothing, get nothing and stop nobody else;
 *  - receive budgets and pause/resume still deliver everything when what is
 *    left sits read ahead inside OpenSSL, where epoll cannot see it (the
 *    "kick" path of xport_tcp.c);
 *  - a clean close between messages is status 0, a cut inside one is not,
 *    and closing once sent writes even what only TLS still holds;
 *  - a peer that went away costs a closed connection, not the process
 *    (SIGPIPE: see XportTlsDeathTest).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "xport_test_server.h"

extern "C" {
#include "xport.h"
}

namespace {

using Psk = std::array<uint8_t, XPORT_TLS_PSK_LEN>;

using xport_testing::BudgetRig;
using xport_testing::kLiveness;
using xport_testing::make_hdr;
using xport_testing::pattern;
using xport_testing::raw_connect;

Psk make_key(uint8_t seed)
{
	Psk k;

	for (size_t i = 0; i < k.size(); i++)
		k[i] = (uint8_t)(seed * 37 + i * 11 + 1);
	return k;
}

const Psk kKey = make_key(1);		/* what "client" holds and the servers know */
const char kIdentity[] = "client";

bool contains(const std::vector<uint8_t> &hay, const void *needle, size_t len)
{
	const uint8_t *n = (const uint8_t *)needle;

	return std::search(hay.begin(), hay.end(), n, n + len) != hay.end();
}

/* The keys a server knows (identity -> PSK); psk_of() also notes who asked. */
struct KeyRing {
	std::mutex mu;
	std::map<std::string, Psk> keys;
	std::vector<std::string> asked;

	static int psk_of(void *arg, const char *identity, uint8_t psk[XPORT_TLS_PSK_LEN])
	{
		KeyRing *r = (KeyRing *)arg;
		std::lock_guard<std::mutex> g(r->mu);

		r->asked.push_back(identity);
		auto it = r->keys.find(identity);
		if (it == r->keys.end())
			return -EACCES;
		memcpy(psk, it->second.data(), XPORT_TLS_PSK_LEN);
		return 0;
	}
};

const char kGreeting[] = "hello, whoever you are";
constexpr uint32_t kGreetingTag = 0xfffffff0u;
constexpr uint32_t kFloodTag = 0xfffffff1u;
constexpr uint32_t kFloodLen = 64 * 1024;

/*
 * A tls:// server's keys (a KeyRing knowing kIdentity's) and, for a flood,
 * how many replies it took: shared with the context hooks that use them.
 */
struct TlsState {
	KeyRing keys;
	uint32_t flooded = 0;		/* under the server's lock */

	TlsState() { keys.keys[kIdentity] = kKey; }
};

/* The context hook that makes a server find keys in @st (which it keeps alive). */
xport_testing::CtxHook knows_keys(std::shared_ptr<TlsState> st)
{
	return [st](struct xport_ctx *ctx) {
		xport_ctx_set_tls_server(ctx, KeyRing::psk_of, &st->keys);
	};
}

/* Greet a connection as it is accepted, before its handshake can have completed. */
void greet(struct xport_conn *conn)
{
	struct rdfs_frame_hdr h =
		make_hdr(RDFS_OP_AUTH_CHALLENGE, kGreetingTag, sizeof(kGreeting), 0);

	EXPECT_EQ(0, xport_post_send(conn, &h, kGreeting, nullptr, 0, nullptr));
}

/*
 * Reply until a post leaves bytes unwritten; the replies taken. Each post is
 * written at once while the socket takes it; the first that does not fit is
 * staged in TLS whole (it is smaller than the staging buffer), so the
 * connection's send queue is empty and only TLS holds what is left.
 */
uint32_t flood(struct xport_conn *conn)
{
	uint32_t t = 0;

	while (xport_conn_queued_bytes(conn) == 0 && t < 2048) {
		std::vector<uint8_t> data = pattern(kFloodLen, t);
		struct iovec iov = { data.data(), data.size() };
		struct rdfs_frame_hdr h =
			make_hdr(RDFS_OP_READ, t++, 0, kFloodLen, RDFS_FRAME_REPLY);

		EXPECT_EQ(0, xport_post_send(conn, &h, nullptr, &iov, 1, nullptr));
	}
	if (xport_conn_queued_bytes(conn) == 0)
		ADD_FAILURE() << "128 MiB went out at once: the socket never filled";
	xport_conn_close_when_sent(conn);
	return t;
}

/*
 * The shared test server listening on 127.0.0.1 (tls:// knowing kIdentity's
 * key, or tcp://). It echoes every message back as a reply, unless told not
 * to (then it holds them). Flags: pause every connection as it is accepted;
 * greet it at once (kGreeting, before its handshake can have completed: as
 * rpc_server sends its challenge); answer a message tagged kFloodTag with
 * kFloodLen-byte replies tagged 0, 1, ... until the connection holds bytes
 * it could not write, then close it once they are written (flood()).
 */
class EchoServer : public xport_testing::Server {
public:
	enum Flags { kPauseAccepted = 1, kNoEcho = 2, kGreet = 4, kFlood = 8 };

	explicit EchoServer(const std::string &scheme = "tls", int flags = 0)
		: EchoServer(std::make_shared<TlsState>(), scheme, flags)
	{
	}
	KeyRing &keys() { return state_->keys; }
	/* Replies a flood took until the socket was full; 0 after 20 s without one. */
	uint32_t wait_flooded()
	{
		return wait([&] { return state_->flooded > 0; }) ? state_->flooded : 0;
	}

private:
	EchoServer(std::shared_ptr<TlsState> st, const std::string &scheme, int flags)
		: xport_testing::Server(options(st, scheme, flags)), state_(st)
	{
	}
	static xport_testing::ServerOptions options(std::shared_ptr<TlsState> st,
						    const std::string &scheme, int flags)
	{
		xport_testing::ServerOptions o;

		o.url = scheme + "://127.0.0.1:0";
		o.setup = knows_keys(st);
		o.pause_at_accept = flags & kPauseAccepted;
		o.hold = flags & kNoEcho;
		if (flags & kGreet)
			o.on_accept = greet;
		if (flags & kFlood) {
			o.on_recv = [st](struct xport_conn *conn, struct xport_msg *m) {
				if (m->hdr.tag != kFloodTag)
					return false;
				st->flooded = flood(conn);
				xport_msg_free(m);
				return true;
			};
		}
		return o;
	}

	std::shared_ptr<TlsState> state_;
};

/* The context hook that makes a client prove @identity with @key. */
xport_testing::CtxHook holds_key(const char *identity, const Psk &key)
{
	return [identity, key](struct xport_ctx *ctx) {
		EXPECT_EQ(0, xport_ctx_set_tls_client(ctx, identity, key.data()));
	};
}

/*
 * The shared client connected to @url with @identity and @key (no tls
 * credentials at all when @identity is null); err is what xport_connect()
 * returned, for the test to judge.
 */
struct Client : xport_testing::Client {
	explicit Client(const std::string &url, const char *identity = kIdentity,
			const Psk &key = kKey, int timeout_ms = 5000)
		: xport_testing::Client(url, options(identity, key, timeout_ms))
	{
	}
	static xport_testing::ClientOptions options(const char *identity, const Psk &key,
						    int timeout_ms)
	{
		xport_testing::ClientOptions o;

		o.timeout_ms = timeout_ms;
		o.expect_connected = false;
		if (identity)
			o.setup = holds_key(identity, key);
		return o;
	}
};

/* One PING with a body through @url comes back as its reply, byte for byte. */
void expect_echo_works(const std::string &url)
{
	Client c(url);

	xport_testing::expect_echo(c);
}

/* A listening socket on 127.0.0.1:0; its port in *@port. */
int raw_listen(int *port)
{
	struct sockaddr_in sin = {};
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT_EQ(0, bind(fd, (struct sockaddr *)&sin, sizeof(sin)));
	EXPECT_EQ(0, listen(fd, 16));
	EXPECT_EQ(0, getsockname(fd, (struct sockaddr *)&sin, &sl));
	*port = ntohs(sin.sin_port);
	return fd;
}

bool write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = (const uint8_t *)buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/*
 * Everything @fd receives until the peer hangs up (*@hung_up) or the
 * liveness bound passes (a failure for the caller to report).
 */
std::vector<uint8_t> read_until_hangup(int fd, bool *hung_up)
{
	std::vector<uint8_t> got;
	auto end = std::chrono::steady_clock::now() + kLiveness;
	uint8_t buf[4096];

	*hung_up = false;
	while (std::chrono::steady_clock::now() < end) {
		struct pollfd pfd = { fd, POLLIN, 0 };

		if (poll(&pfd, 1, 100) != 1)
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0) {
			*hung_up = n == 0 || errno == ECONNRESET;
			break;
		}
		got.insert(got.end(), buf, buf + n);
	}
	return got;
}

/* ------------------------------------------------------------------ echo */

TEST(XportTls, SmallBodiesEchoIntact)
{
	EchoServer srv;
	Client c(srv.url());

	ASSERT_EQ(0, c.err);
	EXPECT_EQ(0u, srv.url().find("tls://127.0.0.1:"));
	EXPECT_EQ(0u, std::string(xport_conn_peer(c.conn)).find("tls://"));
	const uint32_t sizes[] = { 0, 1, 23, 24, 100, 16383, 16384, 16385, 70000, RDFS_MAX_BODY };
	uint32_t tag = 1;
	for (uint32_t len : sizes) {
		std::vector<uint8_t> body = pattern(len, len);
		struct rdfs_frame_hdr h = make_hdr(RDFS_OP_LOOKUP, tag, len, 0);

		ASSERT_EQ(0, xport_post_send(c.conn, &h, body.data(), nullptr, 0, nullptr));
		struct xport_msg *m = c.recv();
		ASSERT_NE(nullptr, m) << "body of " << len;
		EXPECT_EQ(tag, m->hdr.tag);
		EXPECT_EQ(RDFS_OP_LOOKUP, m->hdr.opcode);
		EXPECT_TRUE(m->hdr.flags & RDFS_FRAME_REPLY);
		ASSERT_EQ(len, m->hdr.body_len);
		EXPECT_EQ(nullptr, m->data);
		if (len) {
			EXPECT_EQ(0, memcmp(body.data(), m->body, len)) << "body of " << len;
		} else {
			EXPECT_EQ(nullptr, m->body);
		}
		xport_msg_free(m);
		tag++;
	}
}

TEST(XportTls, BigDataIsIntactAndAligned)
{
	EchoServer srv;
	Client c(srv.url());

	xport_testing::expect_big_data_echo(c);
}

TEST(XportTls, ManyMessagesArriveInOrder)
{
	EchoServer srv;
	Client c(srv.url());

	xport_testing::expect_echoes_in_order(c, 2000);
}

/*
 * What the server posts on a connection as it accepts it, before the
 * handshake can have completed, waits for the handshake and arrives first.
 */
TEST(XportTls, ServerPostsBeforeHandshakeCompletes)
{
	EchoServer srv("tls", EchoServer::kGreet);
	Client c(srv.url());

	ASSERT_EQ(0, c.err);
	struct xport_msg *m = c.recv();
	ASSERT_NE(nullptr, m);
	EXPECT_EQ(kGreetingTag, m->hdr.tag);
	EXPECT_EQ(RDFS_OP_AUTH_CHALLENGE, m->hdr.opcode);
	ASSERT_EQ(sizeof(kGreeting), m->hdr.body_len);
	EXPECT_EQ(0, memcmp(kGreeting, m->body, sizeof(kGreeting)));
	xport_msg_free(m);
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_PING, 5, 0, 0);
	ASSERT_EQ(0, xport_post_send(c.conn, &h, nullptr, nullptr, 0, nullptr));
	m = c.recv();
	ASSERT_NE(nullptr, m);
	EXPECT_EQ(5u, m->hdr.tag);
	xport_msg_free(m);
}

/*
 * Four threads post on one connection while its progress thread reads from
 * it: every call's reply comes back with exactly its bytes. The SSL object is
 * shared by all of them; interleaved records would corrupt the stream (a MAC
 * failure closes it) or swap bytes between messages.
 */
TEST(XportTls, SeveralThreadsPostingOnOneConnection)
{
	EchoServer srv;
	Client c(srv.url());
	const int nthreads = 4, per_thread = 1000;
	const size_t total = (size_t)nthreads * per_thread;
	std::map<uint32_t, std::string> got;	/* progress thread only, until joined */
	int closed = 0;				/* likewise; its status, or 1 for 0 */

	ASSERT_EQ(0, c.err);
	/* the client's progress thread: collects replies until all came (or 20 s) */
	std::thread progress([&] {
		auto end = std::chrono::steady_clock::now() + kLiveness;
		struct xport_event ev[32];

		while (got.size() < total && !closed && std::chrono::steady_clock::now() < end) {
			int n = xport_test(c.ctx, ev, 32, 100);

			for (int i = 0; i < n; i++) {
				if (ev[i].type == XPORT_EV_CLOSED)
					closed = ev[i].status ? ev[i].status : 1;
				if (ev[i].type != XPORT_EV_RECV)
					continue;
				struct xport_msg *m = ev[i].msg;
				EXPECT_TRUE(got.emplace(m->hdr.tag, std::string((char *)m->data,
							m->hdr.data_len)).second);
				xport_msg_free(m);
			}
		}
	});
	auto data_of = [](int t, int i) {
		/* some of them longer than a TLS record (16 KiB) */
		return "thread " + std::to_string(t) + " call " + std::to_string(i) +
		       std::string(i % 7 == 0 ? 20000 + i : i % 300, (char)('a' + t));
	};
	std::vector<std::thread> posters;
	for (int t = 0; t < nthreads; t++) {
		posters.emplace_back([&, t] {
			for (int i = 0; i < per_thread; i++) {
				std::string data = data_of(t, i);
				struct iovec iov = { (void *)data.data(), data.size() };
				struct rdfs_frame_hdr h =
					make_hdr(RDFS_OP_READ, t * per_thread + i + 1, 0, data.size());

				ASSERT_EQ(0, xport_post_send(c.conn, &h, nullptr, &iov, 1, nullptr));
			}
		});
	}
	for (auto &p : posters)
		p.join();
	progress.join();
	EXPECT_EQ(0, closed) << "the connection closed";
	ASSERT_EQ(total, got.size());
	for (int t = 0; t < nthreads; t++)
		for (int i = 0; i < per_thread; i++)
			ASSERT_EQ(data_of(t, i), got[t * per_thread + i + 1]) << t << "/" << i;
	EXPECT_TRUE(srv.closed_statuses().empty());
}

/* ------------------------------------------------------------------ eavesdropper */

/*
 * A relay that only listens in: accepts one connection on 127.0.0.1:0,
 * connects it to @target_port and copies bytes both ways, recording each
 * direction.
 */
class TapRelay {
public:
	explicit TapRelay(int target_port) : target_port_(target_port)
	{
		lfd_ = raw_listen(&port_);
		EXPECT_EQ(0, pipe(stop_));
		thread_ = std::thread([this] { run(); });
	}
	~TapRelay()
	{
		char c = 0;

		EXPECT_EQ(1, write(stop_[1], &c, 1));
		thread_.join();
		close(stop_[0]);
		close(stop_[1]);
		close(lfd_);
	}
	std::string url(const std::string &scheme) const
	{
		return scheme + "://127.0.0.1:" + std::to_string(port_);
	}
	std::vector<uint8_t> upstream()		/* client to server */
	{
		std::lock_guard<std::mutex> g(mu_);
		return rec_[0];
	}
	std::vector<uint8_t> downstream()	/* server to client */
	{
		std::lock_guard<std::mutex> g(mu_);
		return rec_[1];
	}

private:
	void run()
	{
		struct pollfd pfd[3] = { { lfd_, POLLIN, 0 }, { stop_[0], POLLIN, 0 } };
		int fd[2] = { -1, -1 };	/* client side, server side */
		bool open[2] = { true, true };
		uint8_t buf[65536];

		if (poll(pfd, 2, -1) < 1 || pfd[1].revents)
			return;
		fd[0] = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
		fd[1] = raw_connect(target_port_);
		while (open[0] || open[1]) {
			int n = 0, dir[2];

			for (int d = 0; d < 2; d++) {
				if (open[d]) {
					pfd[n] = { fd[d], POLLIN, 0 };
					dir[n++] = d;
				}
			}
			pfd[n] = { stop_[0], POLLIN, 0 };
			if (poll(pfd, n + 1, -1) < 1 || pfd[n].revents)
				break;
			for (int i = 0; i < n; i++) {
				int d = dir[i];
				if (!pfd[i].revents)
					continue;
				ssize_t k = recv(fd[d], buf, sizeof(buf), 0);
				if (k <= 0) {
					shutdown(fd[!d], SHUT_WR);
					open[d] = false;
					continue;
				}
				{
					std::lock_guard<std::mutex> g(mu_);
					rec_[d].insert(rec_[d].end(), buf, buf + k);
				}
				if (!write_all(fd[!d], buf, (size_t)k))
					open[d] = false;
			}
		}
		close(fd[0]);
		close(fd[1]);
	}

	int target_port_, port_ = 0, lfd_ = -1, stop_[2] = { -1, -1 };
	std::thread thread_;
	std::mutex mu_;
	std::vector<uint8_t> rec_[2];
};

/* 64 bytes nobody would send by chance. */
const char kCanary[] = "<rdfs canary 7f3a: if you can read this on the wire, it leaked!>";
static_assert(sizeof(kCanary) - 1 == 64, "the canary is 64 bytes");

struct Recording {
	std::vector<uint8_t> up, down;
	size_t sent = 0;	/* body + data bytes of the message */
};

/*
 * Send one message whose body and data carry the canary through a relay to
 * an echo server over @scheme, check its reply is intact, and return what
 * the relay saw.
 */
Recording record_exchange(const std::string &scheme)
{
	EchoServer srv(scheme);
	TapRelay relay(srv.port());
	Recording r;
	std::string body = std::string("body: ") + kCanary;
	std::vector<uint8_t> data(4 * 4096);

	for (size_t i = 0; i + 64 <= data.size(); i += 64)
		memcpy(data.data() + i, kCanary, 64);
	r.sent = body.size() + data.size();
	{
		Client c(relay.url(scheme));
		struct iovec iov = { data.data(), data.size() };
		struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 9, body.size(), data.size());

		EXPECT_EQ(0, c.err);
		if (c.err)
			return r;
		EXPECT_EQ(0, xport_post_send(c.conn, &h, body.data(), &iov, 1, nullptr));
		struct xport_msg *m = c.recv();
		EXPECT_NE(nullptr, m);
		if (!m)
			return r;
		EXPECT_EQ(body, std::string((char *)m->body, m->hdr.body_len));
		EXPECT_EQ(data.size(), m->hdr.data_len);
		EXPECT_EQ(0, memcmp(data.data(), m->data, data.size()));
		xport_msg_free(m);
	}
	r.up = relay.upstream();
	r.down = relay.downstream();
	return r;
}

/* The control: on tcp:// the relay sees the canary both ways, so the test can tell. */
TEST(XportTls, EavesdropperReadsTcp)
{
	Recording r = record_exchange("tcp");

	EXPECT_TRUE(contains(r.up, kCanary, 64));
	EXPECT_TRUE(contains(r.down, kCanary, 64));
}

/*
 * On tls:// the relay carries at least every byte of the message each way,
 * and no 16-byte piece of the canary, nor the key, is among them.
 */
TEST(XportTls, EavesdropperReadsNothingOverTls)
{
	Recording r = record_exchange("tls");

	ASSERT_GE(r.up.size(), r.sent) << "the message did not pass the relay";
	ASSERT_GE(r.down.size(), r.sent) << "the reply did not pass the relay";
	EXPECT_EQ(0x16, r.up[0]) << "not a TLS handshake record";
	for (size_t off = 0; off + 16 <= 64; off += 16) {
		EXPECT_FALSE(contains(r.up, kCanary + off, 16)) << "canary bytes " << off;
		EXPECT_FALSE(contains(r.down, kCanary + off, 16)) << "canary bytes " << off;
	}
	EXPECT_FALSE(contains(r.up, kKey.data(), kKey.size()));
	EXPECT_FALSE(contains(r.down, kKey.data(), kKey.size()));
}

/* ------------------------------------------------------------------ keys */

TEST(XportTls, ClientCredentialsAreValidated)
{
	struct xport_ctx *ctx;
	std::string longest(XPORT_TLS_ID_MAX - 1, 'n');

	ASSERT_EQ(0, xport_ctx_create(&ctx));
	EXPECT_EQ(-EINVAL, xport_ctx_set_tls_client(ctx, "", kKey.data()));
	EXPECT_EQ(-EINVAL, xport_ctx_set_tls_client(ctx, nullptr, kKey.data()));
	EXPECT_EQ(-EINVAL, xport_ctx_set_tls_client(ctx, (longest + "n").c_str(), kKey.data()));
	EXPECT_EQ(0, xport_ctx_set_tls_client(ctx, longest.c_str(), kKey.data()));
	xport_ctx_destroy(ctx);
}

/*
 * A client whose key differs from the server's in one bit is refused with
 * -EACCES, and so is one naming an identity the server has no key for; the
 * server delivers nothing from either and reports both closed with -EACCES.
 * It keeps serving the client with the right key.
 */
TEST(XportTls, WrongKeyOrUnknownIdentityIsRefused)
{
	EchoServer srv;
	Psk wrong = kKey;

	wrong[XPORT_TLS_PSK_LEN - 1] ^= 1;
	{
		Client c(srv.url(), kIdentity, wrong);
		EXPECT_EQ(-EACCES, c.err);
	}
	ASSERT_TRUE(srv.wait_closed(1));
	{
		Client c(srv.url(), "intruder", kKey);
		EXPECT_EQ(-EACCES, c.err);
	}
	ASSERT_TRUE(srv.wait_closed(2));
	EXPECT_EQ(std::vector<int>({ -EACCES, -EACCES }), srv.closed_statuses());
	{
		std::lock_guard<std::mutex> g(srv.keys().mu);
		EXPECT_EQ(std::vector<std::string>({ kIdentity, "intruder" }), srv.keys().asked);
	}
	EXPECT_EQ(0, srv.received());
	expect_echo_works(srv.url());
	EXPECT_EQ(1, srv.received());
}

/* A context that never set tls credentials cannot connect to tls://. */
TEST(XportTls, ClientWithoutCredentialsIsRefused)
{
	EchoServer srv;
	{
		Client c(srv.url(), nullptr);
		EXPECT_EQ(-EACCES, c.err);
	}
	EXPECT_EQ(0, srv.received());
	expect_echo_works(srv.url());
}

/* A server that set no tls credentials refuses every tls:// client. */
TEST(XportTls, ServerWithoutCredentialsRefusesEveryone)
{
	struct xport_ctx *sctx;
	struct xport_listener *l;
	std::atomic<bool> stop{false};
	std::atomic<int> accepted{0}, received{0};

	ASSERT_EQ(0, xport_ctx_create(&sctx));
	ASSERT_EQ(0, xport_listen(sctx, "tls://127.0.0.1:0", &l));
	std::thread progress([&] {
		struct xport_event ev[8];

		while (!stop) {
			int n = xport_test(sctx, ev, 8, 100);

			for (int i = 0; i < n; i++) {
				if (ev[i].type == XPORT_EV_ACCEPT) {
					accepted++;
					xport_conn_put(ev[i].conn);
				}
				received += ev[i].type == XPORT_EV_RECV;
			}
		}
	});
	{
		Client c(xport_listener_url(l));
		EXPECT_EQ(-EACCES, c.err);
	}
	stop = true;
	progress.join();
	EXPECT_EQ(1, accepted.load());
	EXPECT_EQ(0, received.load());
	xport_ctx_destroy(sctx);
}

/* ------------------------------------------------------------------ mismatched peers */

/*
 * A tls:// client at a tcp:// listener fails before its timeout (the server
 * hangs up on a ClientHello it takes for a malformed frame), and the tcp://
 * server goes on serving.
 */
TEST(XportTls, TlsClientAtTcpListenerFails)
{
	EchoServer srv("tcp");
	{
		Client c("tls://127.0.0.1:" + std::to_string(srv.port()));
		EXPECT_NE(0, c.err);
		EXPECT_NE(-ETIMEDOUT, c.err);
	}
	ASSERT_TRUE(srv.wait_closed(1));
	EXPECT_EQ(-EPROTO, srv.closed_statuses()[0]);
	EXPECT_EQ(0, srv.received());
	expect_echo_works(srv.url());
}

/*
 * A tls:// client whose "server" answers with an rdfs frame instead of TLS
 * gets -EPROTO; one whose server says nothing gets -ETIMEDOUT.
 */
TEST(XportTls, ConnectToPeerNotSpeakingTls)
{
	int port, lfd = raw_listen(&port);
	const std::string url = "tls://127.0.0.1:" + std::to_string(port);

	std::thread fake([&] {
		uint8_t frame[RDFS_FRAME_HDR_LEN], buf[4096];
		struct rdfs_frame_hdr h = make_hdr(RDFS_OP_AUTH_CHALLENGE, 0, 0, 0);
		int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);

		EXPECT_GT(recv(fd, buf, sizeof(buf), 0), 0);	/* the ClientHello */
		rdfs_frame_hdr_encode(&h, frame);
		EXPECT_TRUE(write_all(fd, frame, sizeof(frame)));
		/* stay connected until the client hangs up: it must judge by the bytes */
		while (recv(fd, buf, sizeof(buf), 0) > 0)
			;
		close(fd);
	});
	{
		Client c(url);
		EXPECT_EQ(-EPROTO, c.err);
	}
	fake.join();
	{
		/* nobody accepts: the kernel completes the TCP connect, then silence */
		Client c(url, kIdentity, kKey, 300);
		EXPECT_EQ(-ETIMEDOUT, c.err);
	}
	close(lfd);
}

/*
 * Raw peers at a tls:// listener that send a plain rdfs frame or an HTTP
 * request are hung up on: they get no rdfs frame back (at most one TLS alert
 * record), nothing is delivered, the close says -EPROTO, and the server goes
 * on serving.
 */
TEST(XportTls, PlainBytesAtTlsListenerGetNoReply)
{
	EchoServer srv;
	uint8_t frame[RDFS_FRAME_HDR_LEN + 4];
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_PING, 1, 4, 0);
	const char http[] = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";

	rdfs_frame_hdr_encode(&h, frame);
	memcpy(frame + RDFS_FRAME_HDR_LEN, "ping", 4);
	std::vector<std::vector<uint8_t>> inputs = {
		std::vector<uint8_t>(frame, frame + sizeof(frame)),
		std::vector<uint8_t>(http, http + sizeof(http) - 1),
	};
	for (size_t i = 0; i < inputs.size(); i++) {
		int fd = raw_connect(srv.port());
		bool hung_up;

		ASSERT_TRUE(write_all(fd, inputs[i].data(), inputs[i].size()));
		std::vector<uint8_t> got = read_until_hangup(fd, &hung_up);
		close(fd);
		EXPECT_TRUE(hung_up) << "input " << i;
		if (!got.empty()) {
			/* an alert record: 0x15, version, length 2, level, description */
			EXPECT_EQ(7u, got.size()) << "input " << i;
			EXPECT_EQ(0x15, got[0]) << "input " << i;
		}
		ASSERT_TRUE(srv.wait_closed(i + 1));
		EXPECT_EQ(-EPROTO, srv.closed_statuses()[i]) << "input " << i;
	}
	EXPECT_EQ(0, srv.received());
	expect_echo_works(srv.url());
	EXPECT_EQ(1, srv.received());
}

/*
 * Handshakes run on the server's progress thread without blocking it: a
 * peer that connects and says nothing, and one that sends the first bytes of
 * a TLS record and stops, hold nobody up; a good client is served meanwhile.
 */
TEST(XportTls, SilentPeersDoNotBlockOthers)
{
	EchoServer srv;
	const uint8_t half_record[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01 };
	int silent = raw_connect(srv.port());
	int stalled = raw_connect(srv.port());

	ASSERT_TRUE(write_all(stalled, half_record, sizeof(half_record)));
	ASSERT_TRUE(srv.wait_accepted(2));
	expect_echo_works(srv.url());
	expect_echo_works(srv.url());
	EXPECT_EQ(2, srv.received());
	/* the good clients closed; the raw peers are still waiting in handshake */
	ASSERT_TRUE(srv.wait_closed(2));
	EXPECT_EQ(std::vector<int>({ 0, 0 }), srv.closed_statuses());
	close(silent);
	close(stalled);
	/* hanging up inside a handshake is no clean close */
	ASSERT_TRUE(srv.wait_closed(4));
	EXPECT_EQ(std::vector<int>({ 0, 0, -ECONNRESET, -ECONNRESET }), srv.closed_statuses());
}

/* ------------------------------------------------------------------ receive budget */

/*
 * The receive-budget rig (xport_test_server.h) over tls://, its client
 * holding kIdentity's key. The client's posts go out at once, one TLS record
 * each, before the server reads any. Small frames all fit in OpenSSL's
 * read-ahead: the server's first read takes them all, so once the budget
 * stops delivery, everything left is inside OpenSSL and the socket is empty.
 * Larger floods fill the read-ahead with the socket behind it, and at their
 * end, too, only OpenSSL holds what is left.
 */
struct TlsBudgetRig : BudgetRig {
	TlsBudgetRig()
		: BudgetRig("tls://127.0.0.1:0", knows_keys(std::make_shared<TlsState>()),
			    holds_key(kIdentity, kKey))
	{
	}
};

/*
 * 500 small frames against a budget of 4 messages: 4 are delivered and no
 * 5th while none is freed. Then, each time delivery has stopped at the
 * budget, the test frees down to half: every restart must fetch what OpenSSL
 * read ahead (epoll will not report it). All 500 arrive in order, never more
 * than 4 held.
 */
TEST(XportTlsBudget, MessageBudgetRestartsFromReadAhead)
{
	TlsBudgetRig rig;
	int c = rig.add_conn(4, 0);
	BudgetRig::Side &s = rig.side(c);
	const uint32_t count = 500;

	ASSERT_NE(nullptr, s.server);
	rig.send_frames(c, count, 0);
	ASSERT_TRUE(rig.pump_until([&] { return rig.full(c); })) << "nothing delivered";
	EXPECT_EQ(0, rig.pump(300)) << "delivered past the budget with nothing freed";
	EXPECT_EQ(4u, s.held.size());
	while (s.next_tag < count) {
		uint32_t before = s.next_tag;

		rig.free_to_half(c);
		ASSERT_TRUE(rig.pump_until([&] { return rig.full(c) || s.next_tag == count; }))
			<< "stalled after tag " << before << " with " << s.held.size() << " held";
	}
	EXPECT_EQ(count, s.next_tag);
	EXPECT_EQ(4u, s.max_held);
	EXPECT_EQ(0, s.over_budget);
}

/*
 * The same with a byte budget and frames larger than a TLS record (20,032
 * bytes counted each), so messages straddle records and their data is
 * decrypted straight into the message: against 64 KiB, 4 are admitted
 * (the 4th crosses the bound), and 200 of them arrive intact and in order.
 */
TEST(XportTlsBudget, ByteBudgetRestartsFromReadAhead)
{
	const uint32_t data_len = 20000, count = 200;
	const uint64_t max_bytes = 64 * 1024, each = TlsBudgetRig::msg_bytes(data_len);
	TlsBudgetRig rig;
	int c = rig.add_conn(0, max_bytes);
	BudgetRig::Side &s = rig.side(c);

	ASSERT_NE(nullptr, s.server);
	rig.send_frames(c, count, data_len);
	ASSERT_TRUE(rig.pump_until([&] { return rig.full(c); })) << "nothing delivered";
	EXPECT_EQ(0, rig.pump(300)) << "delivered past the budget with nothing freed";
	EXPECT_EQ((max_bytes + each - 1) / each, s.held.size());
	while (s.next_tag < count) {
		uint32_t before = s.next_tag;

		rig.free_to_half(c);
		ASSERT_TRUE(rig.pump_until([&] { return rig.full(c) || s.next_tag == count; }))
			<< "stalled after tag " << before << " with " << s.held_bytes << " held";
	}
	EXPECT_EQ(count, s.next_tag);
	EXPECT_LT(s.max_held_bytes, max_bytes + each);
	EXPECT_EQ(0, s.over_budget);
}

/*
 * Pause and resume (xport_conn_pause_rx) with 2000 frames sent before the
 * server reads: at each first delivery after a resume the test pauses the
 * connection, waits until delivery has stopped (what was read before the
 * pause still comes), then resumes. The connection reads 256 records per
 * turn, so pauses land while the rest sits read ahead in OpenSSL; a resume
 * must fetch it. All 2000 arrive in order.
 */
TEST(XportTlsBudget, PauseResumeRestartsFromReadAhead)
{
	TlsBudgetRig rig;
	int c = rig.add_conn(0, 0);
	BudgetRig::Side &s = rig.side(c);
	const uint32_t count = 2000;
	int stopped_with_backlog = 0;

	ASSERT_NE(nullptr, s.server);
	rig.send_frames(c, count, 0);
	while (s.next_tag < count) {
		uint32_t before = s.next_tag;

		ASSERT_TRUE(rig.pump_until([&] { return s.next_tag > before; }))
			<< "stalled after tag " << before;
		xport_conn_pause_rx(s.server, 1);
		rig.free_oldest(c, SIZE_MAX);
		/* no event says "stopped": wait for a quiet spell, bounded */
		int quiet = 0;
		for (int i = 0; i < 100 && !quiet; i++)
			quiet = rig.pump(100) == 0;
		ASSERT_TRUE(quiet) << "pause did not stop delivery";
		stopped_with_backlog += s.next_tag < count;
		rig.free_oldest(c, SIZE_MAX);
		xport_conn_pause_rx(s.server, 0);
	}
	EXPECT_EQ(count, s.next_tag);
	EXPECT_GT(stopped_with_backlog, 0) << "no pause ever held anything back";
}

/* ------------------------------------------------------------------ closes */

/*
 * A peer that closes between messages is a clean close (0) on the other
 * side, both ways: the client closing, and the server going away, after
 * which the client may not send.
 */
TEST(XportTls, CleanCloseBetweenMessagesIsZero)
{
	std::unique_ptr<Client> c;
	{
		EchoServer srv;

		expect_echo_works(srv.url());
		ASSERT_TRUE(srv.wait_closed(1));
		EXPECT_EQ(0, srv.closed_statuses()[0]);

		c.reset(new Client(srv.url()));
		ASSERT_EQ(0, c->err);
		struct rdfs_frame_hdr h = make_hdr(RDFS_OP_PING, 3, 0, 0);
		ASSERT_EQ(0, xport_post_send(c->conn, &h, nullptr, nullptr, 0, nullptr));
		struct xport_msg *m = c->recv();
		ASSERT_NE(nullptr, m);
		xport_msg_free(m);
	}
	int status = 1;
	EXPECT_EQ(nullptr, c->recv(&status));
	EXPECT_EQ(0, status);
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_PING, 4, 0, 0);
	EXPECT_EQ(-EPIPE, xport_post_send(c->conn, &h, nullptr, nullptr, 0, nullptr));
}

/*
 * A server that closes a connection once what it posted is written
 * (xport_conn_close_when_sent, how servers hang up after an error reply)
 * writes every byte first, also those only TLS still holds. The client does
 * not read until the server has flooded it to the point where a reply stays
 * staged in TLS with nothing else queued (see flood()); then it
 * gets every reply intact and in order, and a clean close.
 */
TEST(XportTls, CloseWhenSentWritesWhatTlsHolds)
{
	EchoServer srv("tls", EchoServer::kFlood);
	Client c(srv.url());
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_READ, kFloodTag, 0, 0);
	int status = 1;

	ASSERT_EQ(0, c.err);
	xport_conn_pause_rx(c.conn, 1);
	ASSERT_EQ(0, xport_post_send(c.conn, &h, nullptr, nullptr, 0, nullptr));
	uint32_t n = srv.wait_flooded();
	ASSERT_GT(n, 0u) << "the server's socket never filled";
	xport_conn_pause_rx(c.conn, 0);
	for (uint32_t t = 0; t < n; t++) {
		struct xport_msg *m = c.recv(&status);

		ASSERT_NE(nullptr, m) << "reply " << t << " of " << n << "; closed with " << status;
		EXPECT_EQ(t, m->hdr.tag);
		ASSERT_EQ(kFloodLen, m->hdr.data_len);
		EXPECT_EQ(0, memcmp(pattern(kFloodLen, t).data(), m->data, kFloodLen)) << t;
		xport_msg_free(m);
	}
	EXPECT_EQ(nullptr, c.recv(&status));
	EXPECT_EQ(0, status);
	ASSERT_TRUE(srv.wait_closed(1));
	EXPECT_EQ(0, srv.closed_statuses()[0]);
}

/*
 * A peer that closes inside a message is a broken stream (-ECONNRESET). The
 * server does not read (paused) while the client posts three 16 MiB messages,
 * more than the sockets hold, and closes with them partly sent; then the
 * server reads what arrived and meets the end inside a message.
 */
TEST(XportTls, CloseInsideMessageIsAnError)
{
	EchoServer srv("tls", EchoServer::kPauseAccepted | EchoServer::kNoEcho);
	std::vector<uint8_t> big = pattern(RDFS_MAX_DATA, 5);
	struct iovec iov = { big.data(), big.size() };
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 1, 0, big.size());
	struct xport_event ev;
	int tokens[3], sends = 0, cancelled = 0, closed = 0;
	{
		Client c(srv.url());

		ASSERT_EQ(0, c.err);
		for (int i = 0; i < 3; i++)
			ASSERT_EQ(0, xport_post_send(c.conn, &h, nullptr, &iov, 1, &tokens[i]));
		xport_conn_close(c.conn);
		while (!closed && xport_test(c.ctx, &ev, 1, 2000) == 1) {
			if (ev.type == XPORT_EV_SEND) {
				sends++;
				cancelled += ev.status == -ECANCELED;
			} else if (ev.type == XPORT_EV_CLOSED) {
				closed = 1;
			}
		}
		EXPECT_EQ(3, sends);
		ASSERT_GE(cancelled, 1) << "all 48 MiB fit the sockets: nothing was cut";
	}
	srv.resume_all();
	ASSERT_TRUE(srv.wait_closed(1));
	EXPECT_EQ(-ECONNRESET, srv.closed_statuses()[0]);
	EXPECT_LT(srv.received(), 3);
}

/*
 * What a process that posts on a connection its server has already closed
 * exits with: 0 when it survives and sees the connection closed. The client
 * has not looked at the socket since the server's FIN arrived; the first
 * bytes it writes draw a reset, and a write after that fails with EPIPE,
 * which raises SIGPIPE unless the write asks it not to (MSG_NOSIGNAL). The
 * process keeps SIGPIPE's default action, as a command-line tool or a
 * program using librdfs does.
 */
int post_after_server_closed(const std::string &scheme)
{
	EchoServer srv(scheme);
	Client c(srv.url());
	std::vector<uint8_t> big(1u << 20, 0xa5);
	struct iovec iov = { big.data(), big.size() };
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 2, 0, big.size());
	int status = 1;

	signal(SIGPIPE, SIG_DFL);
	if (c.err)
		return 10;
	/* one exchange: the server's side of the handshake is done too */
	h = make_hdr(RDFS_OP_PING, 1, 0, 0);
	if (xport_post_send(c.conn, &h, nullptr, nullptr, 0, nullptr))
		return 11;
	struct xport_msg *m = c.recv();
	if (!m)
		return 12;
	xport_msg_free(m);
	srv.close_all();
	if (!srv.wait_closed(1))
		return 13;
	h = make_hdr(RDFS_OP_WRITE, 2, 0, big.size());
	int err = xport_post_send(c.conn, &h, nullptr, &iov, 1, nullptr);
	if (err && err != -EPIPE)
		return 14;
	while ((m = c.recv(&status)))
		xport_msg_free(m);
	return status != 1 ? 0 : 15;
}

/* The control: tcp:// writes with MSG_NOSIGNAL. */
TEST(XportTlsDeathTest, PostAfterServerClosedSurvivesOverTcp)
{
	GTEST_FLAG_SET(death_test_style, "threadsafe");
	EXPECT_EXIT(exit(post_after_server_closed("tcp")), ::testing::ExitedWithCode(0), "");
}

/* tls:// must not kill the process either: OpenSSL writes to the socket itself. */
TEST(XportTlsDeathTest, PostAfterServerClosedSurvivesOverTls)
{
	GTEST_FLAG_SET(death_test_style, "threadsafe");
	EXPECT_EXIT(exit(post_after_server_closed("tls")), ::testing::ExitedWithCode(0), "");
}

} // namespace
