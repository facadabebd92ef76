// SPDX-License-Identifier: MIT
/*
 * lib_xport_test.cc - the TCP transport over real loopback sockets: ordering,
 * bulk data, concurrency, peers that send truncated, garbage or oversized frames,
 * and the per-connection receive budget.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "xport_test_server.h"

extern "C" {
#include "xport.h"
}

namespace {

using xport_testing::BudgetRig;
using xport_testing::Client;
using xport_testing::make_hdr;
using xport_testing::pattern;
using xport_testing::raw_connect;

/* The shared test server: tcp://127.0.0.1:0, echoing every message back as a reply. */
using EchoServer = xport_testing::Server;

void expect_echo_works(const std::string &url)
{
	Client c(url);

	xport_testing::expect_echo(c);
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

	xport_testing::expect_echoes_in_order(c, 5000);
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

TEST(Xport, BigDataIsIntactAndAligned)
{
	EchoServer srv;
	Client c(srv.url());

	xport_testing::expect_big_data_echo(c);
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
	rdfs_frame_hdr_encode(&h, buf);
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

	rdfs_frame_hdr_encode(&h, buf);
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

/*
 * 200 frames sent at once to a connection with a budget of 8 messages: 8 are
 * delivered and, with none freed, no 9th, however long we wait. Delivery
 * resumes only once at most half (4) are held: freeing 3 is not enough. Then,
 * freeing whatever is held whenever delivery stops, all 200 arrive in order
 * and never more than 8 are held.
 */
TEST(XportBudget, MessageBudgetHoldsDeliveryAtTheBound)
{
	BudgetRig rig;
	const int count = 200;
	int c = rig.add_conn(8, 0);
	BudgetRig::Side &s = rig.side(c);

	rig.send_frames(c, count, 0);
	rig.pump(500);
	ASSERT_EQ(8u, s.held.size()) << "delivered without being freed";
	EXPECT_EQ(8u, s.next_tag);

	/* 5 held: more than half, still starved */
	rig.free_oldest(c, 3);
	EXPECT_EQ(0, rig.pump(300)) << "resumed with 5 of 8 held";
	/* 4 held: half; resumes and fills the budget again (tags 8..11), no more */
	rig.free_oldest(c, 1);
	EXPECT_EQ(4, rig.pump(500));
	EXPECT_EQ(8u, s.held.size());
	EXPECT_EQ(12u, s.next_tag);

	EXPECT_EQ((uint32_t)count, rig.drain(c, count));
	EXPECT_EQ(8u, s.max_held);
	EXPECT_EQ(0, s.over_budget);
	EXPECT_EQ(0, s.closed);
}

/*
 * The same with a byte budget: 200 frames of 4 KiB data (4,128 bytes counted
 * each: header, body, data) against 32 KiB. A message is admitted while fewer
 * than 32 KiB are held, so the last one admitted may cross it: held bytes
 * stay below 32 KiB + one message, and exactly ceil(32768 / 4128) = 8 are
 * delivered without freeing. Resumption needs at most 16 KiB held: freeing 4
 * (16,512 left) is not enough, 5 (12,384 left) is.
 */
TEST(XportBudget, ByteBudgetHoldsDeliveryAtTheBound)
{
	BudgetRig rig;
	const int count = 200;
	const uint32_t data_len = 4096;
	const uint64_t max_bytes = 32 * 1024, each = BudgetRig::msg_bytes(data_len);
	const size_t bound = (max_bytes + each - 1) / each;	/* 8 */
	int c = rig.add_conn(0, max_bytes);
	BudgetRig::Side &s = rig.side(c);

	ASSERT_EQ(8u, bound);
	rig.send_frames(c, count, data_len);
	rig.pump(500);
	ASSERT_EQ(bound, s.held.size()) << "delivered without being freed";
	EXPECT_GE(s.held_bytes, max_bytes);
	EXPECT_LT(s.held_bytes, max_bytes + each);

	rig.free_oldest(c, 4);
	EXPECT_GT(s.held_bytes, max_bytes / 2);
	EXPECT_EQ(0, rig.pump(300)) << "resumed with more than half the bytes held";
	rig.free_oldest(c, 1);
	EXPECT_LE(s.held_bytes, max_bytes / 2);
	EXPECT_EQ(5, rig.pump(500));
	EXPECT_EQ(bound, s.held.size());

	EXPECT_EQ((uint32_t)count, rig.drain(c, count));
	EXPECT_EQ(bound, s.max_held);
	EXPECT_LT(s.max_held_bytes, max_bytes + each);
	EXPECT_EQ(0, s.over_budget);
	EXPECT_EQ(0, s.closed);
}

/*
 * A peer that sends 200 frames and closes cleanly while the connection is
 * held at its budget loses nothing: the close is seen only after every frame
 * it sent was delivered (the budget stops reading, so the FIN waits behind the
 * frames), and it is reported as a clean close (0).
 */
TEST(XportBudget, PeerCloseWhileHeldStillDeliversEverything)
{
	BudgetRig rig;
	const int count = 200;
	int c = rig.add_conn(8, 0);
	BudgetRig::Side &s = rig.side(c);

	rig.send_frames(c, count, 0);
	rig.close_client(c);
	rig.pump(500);
	ASSERT_EQ(8u, s.held.size());
	EXPECT_EQ(0, s.closed) << "closed with frames still unread";

	EXPECT_EQ((uint32_t)count, rig.drain(c, count));
	for (int i = 0; i < 100 && !s.closed; i++) {
		rig.free_oldest(c, SIZE_MAX);
		rig.pump(50);
	}
	EXPECT_EQ(1, s.closed);
	EXPECT_EQ(0, s.close_status);
	EXPECT_EQ((uint32_t)count, s.received_at_close);
	EXPECT_EQ(0, s.over_budget);
}

/*
 * 0 is no bound: with budget (0, 0) all 200 frames arrive with none freed,
 * and so they do with (0, 1 MiB), whose bytes (200 x 40) stay far below the
 * bound: a 0 in one dimension leaves that dimension unbounded. A connection
 * of the same server with 8 messages, sent the same frames at the same time,
 * holds at 8 (the control: the budget is in force on this server).
 */
TEST(XportBudget, ZeroIsNoBound)
{
	BudgetRig rig;
	const int count = 200;
	int open = rig.add_conn(0, 0);
	int bytes_only = rig.add_conn(0, 1 << 20);
	int control = rig.add_conn(8, 0);

	rig.send_frames(open, count, 0);
	rig.send_frames(bytes_only, count, 0);
	rig.send_frames(control, count, 0);
	for (int i = 0; i < 200 && (rig.side(open).next_tag < (uint32_t)count ||
				    rig.side(bytes_only).next_tag < (uint32_t)count); i++)
		rig.pump(50);
	rig.pump(300);
	EXPECT_EQ((size_t)count, rig.side(open).held.size());
	EXPECT_EQ((size_t)count, rig.side(bytes_only).held.size());
	EXPECT_EQ(8u, rig.side(control).held.size());
	EXPECT_EQ(0, rig.side(control).over_budget);
	EXPECT_EQ(0, rig.side(open).closed);
	EXPECT_EQ(0, rig.side(bytes_only).closed);
}

} // namespace
