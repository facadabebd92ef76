// SPDX-License-Identifier: MIT
/*
 * lib_xport_test.cc - the TCP transport over real loopback sockets: ordering,
 * bulk data, concurrency, and peers that send truncated, garbage or oversized frames.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "xport.h"
}

namespace {

struct rdfs_frame_hdr make_hdr(uint16_t op, uint32_t tag, uint32_t body_len, uint32_t data_len,
			       uint8_t flags = 0)
{
	struct rdfs_frame_hdr h = {};

	h.magic = RDFS_FRAME_MAGIC;
	h.version = RDFS_FRAME_VERSION;
	h.flags = flags;
	h.opcode = op;
	h.tag = tag;
	h.body_len = body_len;
	h.data_len = data_len;
	return h;
}

/* A server context whose thread echoes every message back as a reply. */
class EchoServer {
public:
	EchoServer()
	{
		EXPECT_EQ(0, xport_ctx_create(&ctx_));
		EXPECT_EQ(0, xport_listen(ctx_, "tcp://127.0.0.1:0", &listener_));
		url_ = xport_listener_url(listener_);
		thread_ = std::thread([this] { run(); });
	}
	~EchoServer()
	{
		stop_ = true;
		xport_ctx_wake(ctx_, nullptr);
		thread_.join();
		for (auto *c : conns_)
			xport_conn_put(c);
		xport_ctx_destroy(ctx_);
	}
	const std::string &url() const { return url_; }
	int port() const { return atoi(strrchr(url_.c_str(), ':') + 1); }
	std::vector<int> closed_statuses()
	{
		std::lock_guard<std::mutex> g(mu_);
		return closed_;
	}
	int accepted() { return accepted_.load(); }
	/* Wait (bounded, it is a liveness check) until @n connections were closed. */
	bool wait_closed(size_t n)
	{
		for (int i = 0; i < 1000; i++) {
			if (closed_statuses().size() >= n)
				return true;
			usleep(10000);
		}
		return false;
	}

private:
	void run()
	{
		struct xport_event ev[16];

		while (!stop_) {
			int n = xport_test(ctx_, ev, 16, -1);

			ASSERT_GE(n, 0);
			for (int i = 0; i < n; i++)
				handle(&ev[i]);
		}
	}
	void handle(struct xport_event *ev)
	{
		switch (ev->type) {
		case XPORT_EV_ACCEPT:
			conns_.insert(ev->conn);
			accepted_++;
			break;
		case XPORT_EV_RECV: {
			struct xport_msg *m = ev->msg;
			struct rdfs_frame_hdr h = m->hdr;
			struct iovec iov = { m->data, m->hdr.data_len };

			h.flags |= RDFS_FRAME_REPLY;
			EXPECT_EQ(0, xport_post_send(ev->conn, &h, m->body, &iov,
						     m->hdr.data_len ? 1 : 0, nullptr));
			xport_msg_free(m);
			break;
		}
		case XPORT_EV_CLOSED: {
			std::lock_guard<std::mutex> g(mu_);
			closed_.push_back(ev->status);
			if (conns_.erase(ev->conn))
				xport_conn_put(ev->conn);
			break;
		}
		default:
			break;
		}
	}

	struct xport_ctx *ctx_ = nullptr;
	struct xport_listener *listener_ = nullptr;
	std::string url_;
	std::thread thread_;
	std::atomic<bool> stop_{false};
	std::set<struct xport_conn *> conns_;
	std::mutex mu_;
	std::vector<int> closed_;
	std::atomic<int> accepted_{0};
};

/* A client context driven by the test thread. */
struct Client {
	struct xport_ctx *ctx = nullptr;
	struct xport_conn *conn = nullptr;

	explicit Client(const std::string &url)
	{
		EXPECT_EQ(0, xport_ctx_create(&ctx));
		EXPECT_EQ(0, xport_connect(ctx, url.c_str(), 5000, &conn));
	}
	~Client()
	{
		if (conn)
			xport_conn_put(conn);
		xport_ctx_destroy(ctx);
	}
	/* Next RECV message (bounded wait); nullptr if the connection closed. */
	struct xport_msg *recv(int *closed_status = nullptr)
	{
		struct xport_event ev;

		for (int i = 0; i < 200; i++) {
			int n = xport_test(ctx, &ev, 1, 100);

			if (n <= 0)
				continue;
			if (ev.type == XPORT_EV_RECV)
				return ev.msg;
			if (ev.type == XPORT_EV_CLOSED) {
				if (closed_status)
					*closed_status = ev.status;
				return nullptr;
			}
		}
		ADD_FAILURE() << "no message within 20 s";
		return nullptr;
	}
};

int raw_connect(int port)
{
	struct sockaddr_in sin = {};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT_EQ(0, connect(fd, (struct sockaddr *)&sin, sizeof(sin)));
	return fd;
}

void expect_echo_works(const std::string &url)
{
	Client c(url);
	const char body[] = "still serving";
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_PING, 7, sizeof(body), 0);

	ASSERT_EQ(0, xport_post_send(c.conn, &h, body, nullptr, 0, nullptr));
	struct xport_msg *m = c.recv();
	ASSERT_NE(nullptr, m);
	EXPECT_EQ(7u, m->hdr.tag);
	EXPECT_TRUE(m->hdr.flags & RDFS_FRAME_REPLY);
	ASSERT_EQ(sizeof(body), m->hdr.body_len);
	EXPECT_EQ(0, memcmp(body, m->body, sizeof(body)));
	xport_msg_free(m);
}

TEST(Xport, ListenerReportsEphemeralPort)
{
	EchoServer srv;

	EXPECT_EQ(0u, srv.url().find("tcp://127.0.0.1:"));
	EXPECT_GT(srv.port(), 0);
	/* The host part may be a name. */
	Client c("tcp://localhost:" + std::to_string(srv.port()));
	EXPECT_NE(nullptr, c.conn);
	EXPECT_EQ(0u, std::string(xport_conn_peer(c.conn)).find("tcp://"));
}

TEST(Xport, BadUrlsAreEinval)
{
	struct xport_ctx *ctx;
	struct xport_conn *conn;
	struct xport_listener *l;

	ASSERT_EQ(0, xport_ctx_create(&ctx));
	EXPECT_EQ(-EPROTONOSUPPORT, xport_connect(ctx, "udp://127.0.0.1:1", 100, &conn));
	EXPECT_EQ(-EPROTONOSUPPORT, xport_listen(ctx, "udp://0.0.0.0:7000", &l));
	EXPECT_EQ(-EINVAL, xport_connect(ctx, "tcp://127.0.0.1:65536", 100, &conn));
	EXPECT_EQ(-EINVAL, xport_connect(ctx, "tcp://127.0.0.1:", 100, &conn));
	EXPECT_EQ(-EINVAL, xport_connect(ctx, "tcp://127.0.0.1", 100, &conn));
	EXPECT_EQ(-EINVAL, xport_connect(ctx, "127.0.0.1:7000", 100, &conn));
	EXPECT_EQ(-EINVAL, xport_listen(ctx, "tcp://127.0.0.1:port", &l));
	xport_ctx_destroy(ctx);
}

TEST(Xport, SecondListenerOnSamePortIsEaddrinuse)
{
	EchoServer srv;
	struct xport_ctx *ctx;
	struct xport_listener *l;

	ASSERT_EQ(0, xport_ctx_create(&ctx));
	EXPECT_EQ(-EADDRINUSE, xport_listen(ctx, srv.url().c_str(), &l));
	xport_ctx_destroy(ctx);
}

TEST(Xport, Ipv6Loopback)
{
	struct xport_ctx *ctx;
	struct xport_listener *l;
	struct xport_conn *conn;

	ASSERT_EQ(0, xport_ctx_create(&ctx));
	int err = xport_listen(ctx, "tcp://[::1]:0", &l);
	if (err == -EADDRNOTAVAIL || err == -EAFNOSUPPORT) {
		xport_ctx_destroy(ctx);
		GTEST_SKIP() << "no IPv6 loopback";
	}
	ASSERT_EQ(0, err);
	EXPECT_EQ(0u, std::string(xport_listener_url(l)).find("tcp://[::1]:"));
	ASSERT_EQ(0, xport_connect(ctx, xport_listener_url(l), 2000, &conn));
	EXPECT_EQ(0u, std::string(xport_conn_peer(conn)).find("tcp://[::1]:"));
	xport_conn_put(conn);
	xport_ctx_destroy(ctx);
}

TEST(Xport, ConnectRefused)
{
	struct xport_ctx *ctx;
	struct xport_conn *conn;
	int port;

	{
		EchoServer srv;	/* learn a free port, then let it go */
		port = srv.port();
	}
	ASSERT_EQ(0, xport_ctx_create(&ctx));
	EXPECT_EQ(-ECONNREFUSED, xport_connect(ctx, ("tcp://127.0.0.1:" + std::to_string(port)).c_str(),
					       2000, &conn));
	xport_ctx_destroy(ctx);
}

TEST(Xport, ManyMessagesArriveInOrder)
{
	EchoServer srv;
	Client c(srv.url());
	const int count = 5000;

	for (int i = 0; i < count; i++) {
		std::string body = "message " + std::to_string(i);
		struct rdfs_frame_hdr h = make_hdr(RDFS_OP_LOOKUP, i, body.size(), 0);

		ASSERT_EQ(0, xport_post_send(c.conn, &h, body.data(), nullptr, 0, nullptr));
	}
	for (int i = 0; i < count; i++) {
		struct xport_msg *m = c.recv();

		ASSERT_NE(nullptr, m);
		std::string body((char *)m->body, m->hdr.body_len);
		EXPECT_EQ((uint32_t)i, m->hdr.tag);
		EXPECT_EQ("message " + std::to_string(i), body);
		EXPECT_EQ(RDFS_OP_LOOKUP, m->hdr.opcode);
		xport_msg_free(m);
	}
}

TEST(Xport, EmptyMessageHasNoBuffers)
{
	EchoServer srv;
	Client c(srv.url());
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_STATFS, 1, 0, 0);

	ASSERT_EQ(0, xport_post_send(c.conn, &h, nullptr, nullptr, 0, nullptr));
	struct xport_msg *m = c.recv();
	ASSERT_NE(nullptr, m);
	EXPECT_EQ(nullptr, m->body);
	EXPECT_EQ(nullptr, m->data);
	xport_msg_free(m);
}

std::vector<uint8_t> pattern(size_t len, uint32_t seed)
{
	std::vector<uint8_t> v(len);
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		v[i] = (uint8_t)(x >> 16);
	}
	return v;
}

TEST(Xport, BigDataIsIntactAndAligned)
{
	EchoServer srv;
	Client c(srv.url());
	std::vector<uint8_t> a = pattern(RDFS_MAX_DATA / 2, 1), b = pattern(RDFS_MAX_DATA / 2, 2);
	struct iovec iov[2] = { { a.data(), a.size() }, { b.data(), b.size() } };
	const char body[] = "bulk";
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 42, sizeof(body), RDFS_MAX_DATA);
	int token, sends = 0;

	/* Owned send: buffers stay ours until XPORT_EV_SEND. */
	ASSERT_EQ(0, xport_post_send(c.conn, &h, body, iov, 2, &token));
	struct xport_msg *m = nullptr;
	struct xport_event ev;
	for (int i = 0; i < 400 && !m; i++) {
		if (xport_test(c.ctx, &ev, 1, 100) != 1)
			continue;
		if (ev.type == XPORT_EV_SEND) {
			EXPECT_EQ(&token, ev.user);
			EXPECT_EQ(0, ev.status);
			sends++;
		} else if (ev.type == XPORT_EV_RECV) {
			m = ev.msg;
		}
	}
	ASSERT_NE(nullptr, m);
	EXPECT_EQ(1, sends);
	ASSERT_EQ(RDFS_MAX_DATA, m->hdr.data_len);
	EXPECT_EQ(0u, (uintptr_t)m->data % 4096);
	EXPECT_EQ(0, memcmp(m->data, a.data(), a.size()));
	EXPECT_EQ(0, memcmp(m->data + a.size(), b.data(), b.size()));
	EXPECT_EQ(0, memcmp(m->body, body, sizeof(body)));
	xport_msg_free(m);
}

TEST(Xport, UnownedSendCopiesSoCallerMayReuseBuffers)
{
	EchoServer srv;
	Client c(srv.url());
	const size_t len = 8u << 20;
	std::vector<uint8_t> expect = pattern(len, 3);
	std::vector<uint8_t> buf = expect;
	struct iovec iov = { buf.data(), len };
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 1, 0, len);

	ASSERT_EQ(0, xport_post_send(c.conn, &h, nullptr, &iov, 1, nullptr));
	memset(buf.data(), 0, len);	/* more than the socket buffers took at once */
	struct xport_msg *m = c.recv();
	ASSERT_NE(nullptr, m);
	ASSERT_EQ(len, m->hdr.data_len);
	EXPECT_EQ(0, memcmp(m->data, expect.data(), len));
	xport_msg_free(m);
}

TEST(Xport, PostValidatesLengths)
{
	EchoServer srv;
	Client c(srv.url());
	char body[4] = {};
	struct iovec iov = { body, 4 };
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 1, 0, 5);

	EXPECT_EQ(-EINVAL, xport_post_send(c.conn, &h, nullptr, &iov, 1, nullptr));
	h = make_hdr(RDFS_OP_WRITE, 1, 0, RDFS_MAX_DATA + 1);
	EXPECT_EQ(-EMSGSIZE, xport_post_send(c.conn, &h, nullptr, &iov, 1, nullptr));
	h = make_hdr(RDFS_OP_WRITE, 1, RDFS_MAX_BODY + 1, 0);
	EXPECT_EQ(-EMSGSIZE, xport_post_send(c.conn, &h, body, nullptr, 0, nullptr));
	expect_echo_works(srv.url());
}

TEST(Xport, ManyOutstandingTaggedCallsFromSeveralThreads)
{
	EchoServer srv;
	Client c(srv.url());
	const int nthreads = 4, per_thread = 1000;
	std::map<uint32_t, std::string> got;	/* progress thread only, until joined */
	std::atomic<size_t> ngot{0};
	std::atomic<bool> done{false};

	/* The client's progress thread collects replies while the posters run. */
	std::thread progress([&] {
		struct xport_event ev[32];

		while (got.size() < (size_t)nthreads * per_thread && !done) {
			int n = xport_test(c.ctx, ev, 32, 100);

			for (int i = 0; i < n; i++) {
				if (ev[i].type != XPORT_EV_RECV)
					continue;
				struct xport_msg *m = ev[i].msg;
				EXPECT_TRUE(got.emplace(m->hdr.tag, std::string((char *)m->data,
							m->hdr.data_len)).second);
				ngot = got.size();
				xport_msg_free(m);
			}
		}
	});
	std::vector<std::thread> posters;
	for (int t = 0; t < nthreads; t++) {
		posters.emplace_back([&, t] {
			for (int i = 0; i < per_thread; i++) {
				uint32_t tag = t * per_thread + i + 1;
				std::string data = "thread " + std::to_string(t) + " call " +
						   std::to_string(i) + std::string(i % 300, 'x');
				struct iovec iov = { (void *)data.data(), data.size() };
				struct rdfs_frame_hdr h = make_hdr(RDFS_OP_READ, tag, 0, data.size());

				ASSERT_EQ(0, xport_post_send(c.conn, &h, nullptr, &iov, 1, nullptr));
			}
		});
	}
	for (auto &p : posters)
		p.join();
	for (int i = 0; i < 300 && ngot < (size_t)nthreads * per_thread; i++)
		usleep(100000);
	done = true;
	progress.join();
	ASSERT_EQ((size_t)nthreads * per_thread, got.size());
	for (int t = 0; t < nthreads; t++)
		for (int i = 0; i < per_thread; i++)
			EXPECT_EQ("thread " + std::to_string(t) + " call " + std::to_string(i) +
					  std::string(i % 300, 'x'),
				  got[t * per_thread + i + 1]);
}

TEST(Xport, TruncatedFrameThenCloseKeepsServerServing)
{
	EchoServer srv;
	uint8_t buf[RDFS_FRAME_HDR_LEN + 10];
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 1, 100, 0);

	/* A header announcing 100 body bytes, then only 10 of them. */
	frame_hdr_encode(&h, buf);
	memset(buf + RDFS_FRAME_HDR_LEN, 'b', 10);
	int fd = raw_connect(srv.port());
	ASSERT_EQ((ssize_t)sizeof(buf), write(fd, buf, sizeof(buf)));
	close(fd);
	/* Half a header. */
	fd = raw_connect(srv.port());
	ASSERT_EQ(10, write(fd, buf, 10));
	close(fd);

	ASSERT_TRUE(srv.wait_closed(2));
	std::vector<int> st = srv.closed_statuses();
	EXPECT_EQ(-ECONNRESET, st[0]);
	EXPECT_EQ(-ECONNRESET, st[1]);
	expect_echo_works(srv.url());
}

TEST(Xport, CleanCloseBetweenMessagesReportsZero)
{
	EchoServer srv;
	{
		Client c(srv.url());
		xport_conn_close(c.conn);
	}
	ASSERT_TRUE(srv.wait_closed(1));
	EXPECT_EQ(0, srv.closed_statuses()[0]);
}

TEST(Xport, GarbageBytesCloseWithEproto)
{
	EchoServer srv;
	const char garbage[] = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";
	int fd = raw_connect(srv.port());
	char c;

	ASSERT_EQ((ssize_t)sizeof(garbage), write(fd, garbage, sizeof(garbage)));
	/* The server hangs up on us. */
	EXPECT_LE(read(fd, &c, 1), 0);
	close(fd);
	ASSERT_TRUE(srv.wait_closed(1));
	EXPECT_EQ(-EPROTO, srv.closed_statuses()[0]);
	expect_echo_works(srv.url());
}

TEST(Xport, OversizedHeaderClosesWithEmsgsize)
{
	EchoServer srv;
	uint8_t buf[RDFS_FRAME_HDR_LEN];
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 1, 0, 0xffffffffu);
	int fd = raw_connect(srv.port());
	char c;

	frame_hdr_encode(&h, buf);
	ASSERT_EQ((ssize_t)sizeof(buf), write(fd, buf, sizeof(buf)));
	EXPECT_LE(read(fd, &c, 1), 0);
	close(fd);
	ASSERT_TRUE(srv.wait_closed(1));
	EXPECT_EQ(-EMSGSIZE, srv.closed_statuses()[0]);
	expect_echo_works(srv.url());
}

TEST(Xport, CloseCancelsQueuedOwnedSendsThenReportsClosed)
{
	struct xport_ctx *ctx;
	struct xport_listener *l;
	struct xport_conn *conn;
	struct xport_event ev;
	std::vector<uint8_t> big(RDFS_MAX_DATA);
	struct iovec iov = { big.data(), big.size() };
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 1, 0, big.size());
	int tokens[4], sends = 0, cancelled = 0, closed = 0;

	/* A listener nobody accepts from: the kernel takes a few MiB, then nothing. */
	ASSERT_EQ(0, xport_ctx_create(&ctx));
	ASSERT_EQ(0, xport_listen(ctx, "tcp://127.0.0.1:0", &l));
	struct xport_ctx *cctx;
	ASSERT_EQ(0, xport_ctx_create(&cctx));
	ASSERT_EQ(0, xport_connect(cctx, xport_listener_url(l), 2000, &conn));
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, xport_post_send(conn, &h, nullptr, &iov, 1, &tokens[i]));
	xport_conn_close(conn);
	EXPECT_EQ(-EPIPE, xport_post_send(conn, &h, nullptr, &iov, 1, nullptr));
	while (!closed && xport_test(cctx, &ev, 1, 2000) == 1) {
		if (ev.type == XPORT_EV_SEND) {
			EXPECT_EQ(0, closed) << "SEND after CLOSED";
			sends++;
			cancelled += ev.status == -ECANCELED;
		} else if (ev.type == XPORT_EV_CLOSED) {
			closed = 1;
		}
	}
	EXPECT_EQ(1, closed);
	EXPECT_EQ(4, sends);
	EXPECT_GE(cancelled, 3);
	xport_conn_put(conn);
	xport_ctx_destroy(cctx);
	xport_ctx_destroy(ctx);
}

/*
 * A hard close after close_when_sent must not wait for a peer that never reads:
 * the handshake timeout relies on it to drop a rejected peer that stalls.
 */
TEST(Xport, HardCloseOverridesCloseWhenSent)
{
	struct xport_ctx *ctx, *cctx;
	struct xport_listener *l;
	struct xport_conn *conn;
	struct xport_event ev;
	std::vector<uint8_t> big(RDFS_MAX_DATA);
	struct iovec iov = { big.data(), big.size() };
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 1, 0, big.size());
	int tokens[4], sends = 0, closed = 0;

	ASSERT_EQ(0, xport_ctx_create(&ctx));
	ASSERT_EQ(0, xport_listen(ctx, "tcp://127.0.0.1:0", &l));
	ASSERT_EQ(0, xport_ctx_create(&cctx));
	ASSERT_EQ(0, xport_connect(cctx, xport_listener_url(l), 2000, &conn));
	/* 64 MiB to a peer that reads nothing: most of it stays queued. */
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, xport_post_send(conn, &h, nullptr, &iov, 1, &tokens[i]));
	xport_conn_close_when_sent(conn);
	xport_conn_close(conn);
	while (!closed && xport_test(cctx, &ev, 1, 2000) == 1) {
		if (ev.type == XPORT_EV_SEND)
			sends++;
		else if (ev.type == XPORT_EV_CLOSED)
			closed = 1;
	}
	EXPECT_EQ(1, closed);
	EXPECT_EQ(4, sends);
	xport_conn_put(conn);
	xport_ctx_destroy(cctx);
	xport_ctx_destroy(ctx);
}

/*
 * Out of file descriptors, a listener hangs up on the peer it cannot accept:
 * otherwise the peer waits in the backlog and the level-triggered listener
 * keeps the progress thread spinning. Once descriptors are back it accepts.
 */
TEST(Xport, AcceptAtFdLimitHangsUpOnThePeer)
{
	struct xport_ctx *ctx;
	struct xport_listener *l;
	struct xport_event ev[8];
	struct rlimit old, low;
	std::vector<int> filler;
	char byte;
	int fd, port, d, dropped = 0, accepted = 0;

	ASSERT_EQ(0, xport_ctx_create(&ctx));
	ASSERT_EQ(0, xport_listen(ctx, "tcp://127.0.0.1:0", &l));
	port = atoi(strrchr(xport_listener_url(l), ':') + 1);
	fd = raw_connect(port);
	ASSERT_GE(fd, 0);

	/* use up every descriptor under a low limit */
	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
	d = dup(fd);
	ASSERT_GE(d, 0);
	close(d);
	low = old;
	low.rlim_cur = (rlim_t)d + 32;
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
	while ((d = dup(fd)) >= 0)
		filler.push_back(d);
	EXPECT_EQ(EMFILE, errno);

	for (int i = 0; i < 40 && !dropped; i++) {
		struct pollfd pfd = { fd, POLLIN, 0 };

		EXPECT_EQ(0, xport_test(ctx, ev, 8, 50));
		if (poll(&pfd, 1, 0) == 1)
			dropped = recv(fd, &byte, 1, 0) <= 0;
	}
	for (int f : filler)
		close(f);
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &old));
	EXPECT_TRUE(dropped);
	close(fd);

	/* still serving */
	fd = raw_connect(port);
	for (int i = 0; i < 40 && !accepted; i++) {
		int n = xport_test(ctx, ev, 8, 50);

		for (int j = 0; j < n; j++) {
			if (ev[j].type == XPORT_EV_ACCEPT) {
				accepted++;
				xport_conn_close(ev[j].conn);
				xport_conn_put(ev[j].conn);
			}
		}
	}
	EXPECT_EQ(1, accepted);
	close(fd);
	xport_ctx_destroy(ctx);
}

TEST(Xport, WakeCarriesUserPointer)
{
	struct xport_ctx *ctx;
	struct xport_event ev;
	int token;

	ASSERT_EQ(0, xport_ctx_create(&ctx));
	std::thread t([&] { xport_ctx_wake(ctx, &token); });
	ASSERT_EQ(1, xport_test(ctx, &ev, 1, 10000));
	t.join();
	EXPECT_EQ(XPORT_EV_WAKE, ev.type);
	EXPECT_EQ(&token, ev.user);
	EXPECT_EQ(0, xport_test(ctx, &ev, 1, 0));
	xport_ctx_destroy(ctx);
}

TEST(Xport, PeerCloseFailsClient)
{
	int status = 1;
	std::unique_ptr<Client> c;
	{
		EchoServer srv;
		c.reset(new Client(srv.url()));
		expect_echo_works(srv.url());
	}
	EXPECT_EQ(nullptr, c->recv(&status));
	EXPECT_EQ(0, status);
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_PING, 1, 0, 0);
	EXPECT_EQ(-EPIPE, xport_post_send(c->conn, &h, nullptr, nullptr, 0, nullptr));
}

} // namespace
