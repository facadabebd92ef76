// SPDX-License-Identifier: MIT
/*
 * xport_test_server.h - what the transport's unit tests (lib_xport_test.cc,
 * lib_xport_tls_test.cc, lib_verbs_rdma_test.cc, lib_verbs_sink_test.cc) run
 * against: frame headers, data patterns, a test server on its own progress
 * thread, a client driven by the test thread, and the receive-budget rig.
 *
 * Header-only and linked into one binary from several files: everything is in
 * namespace xport_testing, functions inline, so each file's copy is the same
 * definition (include it before declaring anything of your own).
 */
#ifndef RDFS_TESTS_XPORT_TEST_SERVER_H
#define RDFS_TESTS_XPORT_TEST_SERVER_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
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

namespace xport_testing {

/* Liveness bound of a wait over tcp:// and tls://: hitting it is a failure, not a timing. */
inline constexpr auto kLiveness = std::chrono::seconds(20);
/* The same over rdma://: TCG + Soft-RoCE in the guest moves ~10 MB/s. Never a speed test. */
inline constexpr int kWaitMs = 120000;

/* A frame header, status 0 (the initializer follows struct rdfs_frame_hdr's fields). */
inline struct rdfs_frame_hdr make_hdr(uint16_t op, uint32_t tag, uint32_t body_len,
				      uint32_t data_len, uint8_t flags = 0)
{
	return { RDFS_FRAME_MAGIC, RDFS_FRAME_VERSION, flags, op, 0, tag, body_len, data_len };
}

/* @len bytes that depend on @seed: what a receiver checks a transfer against. */
inline std::vector<uint8_t> pattern(size_t len, uint32_t seed)
{
	std::vector<uint8_t> v(len);
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		v[i] = (uint8_t)(x >> 16);
	}
	return v;
}

/* A plain TCP socket connected to 127.0.0.1:@port, for peers that speak no rdfs. */
inline int raw_connect(int port)
{
	struct sockaddr_in sin = {};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT_EQ(0, connect(fd, (struct sockaddr *)&sin, sizeof(sin)));
	return fd;
}

/* The RDMA device's address (tests/vm/run --rdma exports it), or nullptr. */
inline const char *test_rdma_addr()
{
	const char *a = getenv("RDFS_TEST_RDMA_ADDR");

	return a && *a ? a : nullptr;
}

/* Skip the test where there is no RDMA device. */
#define NEED_RDMA()                                                                  \
	do {                                                                         \
		if (!xport_testing::test_rdma_addr())                                \
			GTEST_SKIP() << "RDFS_TEST_RDMA_ADDR unset: no RDMA device "  \
					"(run in tests/vm/run --rdma)";              \
	} while (0)

/* rdma://ADDR:@port on the device's address (NEED_RDMA() first). */
inline std::string rdma_url(int port)
{
	return std::string("rdma://") + test_rdma_addr() + ":" + std::to_string(port);
}

/* Run on a context before it listens or connects (tls:// credentials). */
using CtxHook = std::function<void(struct xport_ctx *ctx)>;

/*
 * What a Server does. By default it listens on tcp://127.0.0.1:0 and echoes
 * every message back as a reply (an unowned send: the module copies).
 */
struct ServerOptions {
	std::string url = "tcp://127.0.0.1:0";
	/* Keep every message (take()) instead of answering it. */
	bool hold = false;
	/*
	 * Echo from the message's own buffers (an owned send: the message is
	 * freed at its XPORT_EV_SEND, which must say 0 or -ECANCELED).
	 */
	bool zero_copy = false;
	/*
	 * Not 0: answer every message with this many bytes of pattern(size, tag)
	 * instead of an echo, from a fresh buffer each time or (answer_declared)
	 * from one long-lived buffer declared with xport_mem_register() (one
	 * request at a time).
	 */
	uint32_t answer_size = 0;
	bool answer_declared = false;
	/* Close each connection once its echo is written (xport_conn_close_when_sent). */
	bool hang_up_after_reply = false;
	/* At accept: pause receiving, and the limits whose value is not 0. */
	bool pause_at_accept = false;
	size_t tx_limit = 0;
	unsigned int rx_budget_msgs = 0;
	uint32_t rx_max_data = 0;	/* xport_conn_set_rx_limits(RDFS_MAX_BODY, this) */
	/* How long a wait_...() waits before it gives up (a failure). */
	int liveness_ms = 20000;
	/* Run on the context before it listens. */
	CtxHook setup;
	/* Run on each accepted connection, after the limits. */
	std::function<void(struct xport_conn *conn)> on_accept;
	/* Offered each message first: true if it took the message (and answered it). */
	std::function<bool(struct xport_conn *conn, struct xport_msg *m)> on_recv;
	/* Given the completions of sends the server did not post itself. */
	std::function<void(const struct xport_event *ev)> on_send;

	ServerOptions &holding() { hold = true; return *this; }
	ServerOptions &answering(uint32_t size, bool declared = false)
	{
		answer_size = size;
		answer_declared = declared;
		return *this;
	}
	ServerOptions &hanging_up_after_reply() { hang_up_after_reply = true; return *this; }
	ServerOptions &paused_at_accept() { pause_at_accept = true; return *this; }
	ServerOptions &with_tx_limit(size_t max) { tx_limit = max; return *this; }
	ServerOptions &with_rx_budget(unsigned int msgs) { rx_budget_msgs = msgs; return *this; }
	ServerOptions &with_rx_max_data(uint32_t max) { rx_max_data = max; return *this; }
};

/*
 * A server context listening on its own progress thread. Every event is
 * handled under the server's lock (the hooks too), and every accessor takes
 * it, so any thread may ask.
 */
class Server {
public:
	explicit Server(ServerOptions o = ServerOptions()) : o_(std::move(o))
	{
		if (o_.answer_size && o_.answer_declared) {
			pool_.resize(o_.answer_size);
			EXPECT_EQ(0, xport_mem_register(pool_.data(), pool_.size()));
		}
		EXPECT_EQ(0, xport_ctx_create(&ctx_));
		if (o_.setup)
			o_.setup(ctx_);
		EXPECT_EQ(0, xport_listen(ctx_, o_.url.c_str(), &listener_));
		if (listener_)
			url_ = xport_listener_url(listener_);
		thread_ = std::thread([this] { run(); });
	}
	~Server()
	{
		stop();
		if (!pool_.empty()) {
			EXPECT_EQ(0, xport_mem_deregister(pool_.data(), pool_.size()));
		}
		for (auto *c : conns_)
			xport_conn_put(c);
		for (auto *m : held_)
			xport_msg_free(m);
		xport_ctx_destroy(ctx_);
	}
	Server(const Server &) = delete;
	Server &operator=(const Server &) = delete;

	/* Stop the progress thread: no event is handled after this. */
	void stop()
	{
		if (!thread_.joinable())
			return;
		stop_ = true;
		xport_ctx_wake(ctx_, nullptr);
		thread_.join();
	}

	const std::string &url() const { return url_; }
	int port() const { return atoi(strrchr(url_.c_str(), ':') + 1); }
	int accepted() { return locked([&] { return accepted_; }); }
	/* Messages received so far (all of them: answered, taken by a hook or held). */
	int received() { return locked([&] { return received_; }); }
	/* Own replies whose sends completed. */
	int sends_done() { return locked([&] { return sends_done_; }); }
	/* The status of each XPORT_EV_CLOSED so far, in order. */
	std::vector<int> closed_statuses() { return locked([&] { return closed_; }); }
	/* The messages held so far (hold), now the caller's to free. */
	std::vector<struct xport_msg *> take()
	{
		return locked([&] {
			std::vector<struct xport_msg *> v;

			v.swap(held_);
			return v;
		});
	}

	/* Wait until @done (evaluated under the server's lock) or the liveness bound. */
	bool wait(const std::function<bool()> &done)
	{
		std::unique_lock<std::mutex> g(mu_);

		return cv_.wait_for(g, std::chrono::milliseconds(o_.liveness_ms), done);
	}
	bool wait_accepted(int n) { return wait([&] { return accepted_ >= n; }); }
	bool wait_closed(size_t n) { return wait([&] { return closed_.size() >= n; }); }

	/* Close every connection. */
	void close_all()
	{
		std::lock_guard<std::mutex> g(mu_);
		for (auto *c : conns_)
			xport_conn_close(c);
	}
	/* Resume receiving on every connection. */
	void resume_all()
	{
		std::lock_guard<std::mutex> g(mu_);
		for (auto *c : conns_)
			xport_conn_pause_rx(c, 0);
	}

private:
	/* A reply the server posted itself, owned until its XPORT_EV_SEND. */
	struct Reply {
		struct xport_msg *msg;		/* the echoed message, or nullptr */
		std::vector<uint8_t> data;	/* the answer's bytes */
	};

	template <class F> auto locked(F f) -> decltype(f())
	{
		std::lock_guard<std::mutex> g(mu_);
		return f();
	}
	void run()
	{
		struct xport_event ev[32];

		while (!stop_) {
			int n = xport_test(ctx_, ev, 32, -1);

			ASSERT_GE(n, 0);
			for (int i = 0; i < n; i++)
				handle(&ev[i]);
		}
	}
	void handle(struct xport_event *ev)
	{
		std::lock_guard<std::mutex> g(mu_);

		switch (ev->type) {
		case XPORT_EV_ACCEPT:
			if (o_.rx_max_data)
				xport_conn_set_rx_limits(ev->conn, RDFS_MAX_BODY, o_.rx_max_data);
			if (o_.tx_limit)
				xport_conn_set_tx_limit(ev->conn, o_.tx_limit);
			if (o_.rx_budget_msgs)
				xport_conn_set_rx_budget(ev->conn, o_.rx_budget_msgs, 0);
			if (o_.pause_at_accept)
				xport_conn_pause_rx(ev->conn, 1);
			if (o_.on_accept)
				o_.on_accept(ev->conn);
			conns_.insert(ev->conn);
			accepted_++;
			break;
		case XPORT_EV_RECV:
			received_++;
			if (o_.on_recv && o_.on_recv(ev->conn, ev->msg))
				break;
			if (o_.hold)
				held_.push_back(ev->msg);
			else
				reply(ev->conn, ev->msg);
			break;
		case XPORT_EV_SEND: {
			auto it = replies_.find(ev->user);

			if (it == replies_.end()) {
				if (o_.on_send)
					o_.on_send(ev);
				break;
			}
			Reply *r = static_cast<Reply *>(ev->user);

			/* Cancelled when the peer went away before reading it. */
			EXPECT_TRUE(ev->status == 0 || ev->status == -ECANCELED) << ev->status;
			replies_.erase(it);
			xport_msg_free(r->msg);
			delete r;
			sends_done_++;
			break;
		}
		case XPORT_EV_CLOSED:
			closed_.push_back(ev->status);
			if (conns_.erase(ev->conn))
				xport_conn_put(ev->conn);
			break;
		default:
			break;
		}
		cv_.notify_all();
	}
	void reply(struct xport_conn *conn, struct xport_msg *m)
	{
		struct rdfs_frame_hdr h = m->hdr;
		struct iovec iov = { m->data, m->hdr.data_len };

		h.flags |= RDFS_FRAME_REPLY;
		if (o_.answer_size) {
			/* A fresh buffer per reply: its registration must be too. */
			auto *r = new Reply{ nullptr, pattern(o_.answer_size, m->hdr.tag) };

			xport_msg_free(m);
			h.body_len = 0;
			h.data_len = o_.answer_size;
			iov = { r->data.data(), r->data.size() };
			if (!pool_.empty()) {
				memcpy(pool_.data(), r->data.data(), o_.answer_size);
				iov.iov_base = pool_.data();
			}
			replies_.insert(r);
			EXPECT_EQ(0, xport_post_send(conn, &h, nullptr, &iov, 1, r));
			return;
		}
		int niov = m->hdr.data_len ? 1 : 0;

		if (o_.zero_copy) {
			auto *r = new Reply{ m, {} };

			replies_.insert(r);
			EXPECT_EQ(0, xport_post_send(conn, &h, m->body, &iov, niov, r));
		} else {
			EXPECT_EQ(0, xport_post_send(conn, &h, m->body, &iov, niov, nullptr));
			xport_msg_free(m);
		}
		if (o_.hang_up_after_reply)
			xport_conn_close_when_sent(conn);
	}

	const ServerOptions o_;
	std::vector<uint8_t> pool_;		/* the declared answer buffer */
	struct xport_ctx *ctx_ = nullptr;
	struct xport_listener *listener_ = nullptr;
	std::string url_;
	std::thread thread_;
	std::atomic<bool> stop_{false};
	std::mutex mu_;
	std::condition_variable cv_;
	std::set<struct xport_conn *> conns_;
	std::set<void *> replies_;		/* Reply *: progress thread only */
	std::vector<struct xport_msg *> held_;
	std::vector<int> closed_;
	int accepted_ = 0, received_ = 0, sends_done_ = 0;
};

/* How a Client connects. */
struct ClientOptions {
	int timeout_ms = 5000;			/* xport_connect()'s */
	int liveness_ms = 20000;		/* recv()'s bound */
	bool expect_connected = true;		/* a failed connect is a test failure */
	CtxHook setup;				/* run on the context before connecting */
};

/*
 * A client context driven by the test thread, connected to @url; err is what
 * xport_connect() returned (conn is nullptr unless it is 0).
 */
struct Client {
	struct xport_ctx *ctx = nullptr;
	struct xport_conn *conn = nullptr;
	int err = -1;
	std::map<void *, int> sent;		/* XPORT_EV_SEND statuses by user pointer */
	int closed = 0, closed_status = 1;	/* XPORT_EV_CLOSEDs seen, the last one's status */

	explicit Client(const std::string &url, const ClientOptions &o = ClientOptions())
		: liveness_ms_(o.liveness_ms)
	{
		EXPECT_EQ(0, xport_ctx_create(&ctx));
		if (o.setup)
			o.setup(ctx);
		err = xport_connect(ctx, url.c_str(), o.timeout_ms, &conn);
		if (o.expect_connected) {
			EXPECT_EQ(0, err);
		}
		if (err)
			conn = nullptr;
	}
	~Client()
	{
		if (conn)
			xport_conn_put(conn);
		xport_ctx_destroy(ctx);
	}
	Client(const Client &) = delete;
	Client &operator=(const Client &) = delete;

	bool ok() const { return conn != nullptr; }

	/*
	 * The next message (bounded wait); nullptr once the connection closed,
	 * with the close's status in *@status.
	 */
	struct xport_msg *recv(int *status = nullptr)
	{
		auto end = std::chrono::steady_clock::now() +
			   std::chrono::milliseconds(liveness_ms_);
		struct xport_event ev;

		while (std::chrono::steady_clock::now() < end) {
			if (xport_test(ctx, &ev, 1, 100) != 1)
				continue;
			if (ev.type == XPORT_EV_RECV)
				return ev.msg;
			note(&ev);
			if (ev.type == XPORT_EV_CLOSED) {
				if (status)
					*status = ev.status;
				return nullptr;
			}
		}
		ADD_FAILURE() << "no message within " << liveness_ms_ / 1000 << " s";
		return nullptr;
	}
	/*
	 * Up to @n messages, waiting at most @wait_ms (-1: the liveness bound);
	 * fewer if the connection closed. Runs the context at least once (n = 0:
	 * once, for up to @wait_ms).
	 */
	std::vector<struct xport_msg *> recv(size_t n, int wait_ms = -1)
	{
		std::vector<struct xport_msg *> out;
		struct xport_event ev[32];
		int waited = 0;

		if (wait_ms < 0)
			wait_ms = liveness_ms_;
		do {
			int step = wait_ms < 100 ? wait_ms : 100;
			int k = xport_test(ctx, ev, 32, step);

			for (int i = 0; i < k; i++) {
				if (ev[i].type == XPORT_EV_RECV)
					out.push_back(ev[i].msg);
				else
					note(&ev[i]);
			}
			waited += step ? step : 1;
		} while (out.size() < n && !closed && waited < wait_ms);
		return out;
	}
	/* Run the context for @ms, collecting events, for things that should not happen. */
	std::vector<struct xport_msg *> idle(int ms) { return recv(SIZE_MAX, ms); }

private:
	/* Note a completion or a close. */
	void note(const struct xport_event *ev)
	{
		if (ev->type == XPORT_EV_SEND)
			sent[ev->user] = ev->status;
		else if (ev->type == XPORT_EV_CLOSED)
			closed++, closed_status = ev->status;
	}

	int liveness_ms_;
};

/* One PING with a body on @c comes back as its reply, byte for byte. */
inline void expect_echo(Client &c)
{
	const char body[] = "still serving";
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_PING, 7, sizeof(body), 0);

	ASSERT_EQ(0, c.err);
	ASSERT_EQ(0, xport_post_send(c.conn, &h, body, nullptr, 0, nullptr));
	struct xport_msg *m = c.recv();
	ASSERT_NE(nullptr, m);
	EXPECT_EQ(7u, m->hdr.tag);
	EXPECT_TRUE(m->hdr.flags & RDFS_FRAME_REPLY);
	ASSERT_EQ(sizeof(body), m->hdr.body_len);
	EXPECT_EQ(0, memcmp(body, m->body, sizeof(body)));
	xport_msg_free(m);
}

/*
 * @count LOOKUPs posted at once, with bodies "message I", come back as their
 * echoes in order (tags 0, 1, ...), intact.
 */
inline void expect_echoes_in_order(Client &c, int count)
{
	ASSERT_EQ(0, c.err);
	for (int i = 0; i < count; i++) {
		std::string body = "message " + std::to_string(i);
		struct rdfs_frame_hdr h = make_hdr(RDFS_OP_LOOKUP, i, body.size(), 0);

		ASSERT_EQ(0, xport_post_send(c.conn, &h, body.data(), nullptr, 0, nullptr));
	}
	for (int i = 0; i < count; i++) {
		struct xport_msg *m = c.recv();

		ASSERT_NE(nullptr, m) << "after " << i << " replies";
		EXPECT_EQ((uint32_t)i, m->hdr.tag);
		EXPECT_EQ("message " + std::to_string(i),
			  std::string((char *)m->body, m->hdr.body_len));
		EXPECT_EQ(RDFS_OP_LOOKUP, m->hdr.opcode);
		xport_msg_free(m);
	}
}

/*
 * A frame of RDFS_MAX_DATA bytes of data in two iovecs and a short body, an
 * owned send: it completes once, and its echo brings body and data back
 * intact, the data page-aligned.
 */
inline void expect_big_data_echo(Client &c)
{
	std::vector<uint8_t> a = pattern(RDFS_MAX_DATA / 2, 1), b = pattern(RDFS_MAX_DATA / 2, 2);
	struct iovec iov[2] = { { a.data(), a.size() }, { b.data(), b.size() } };
	const char body[] = "bulk";
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, 42, sizeof(body), RDFS_MAX_DATA);
	struct xport_msg *m = nullptr;
	struct xport_event ev;
	int token, sends = 0;

	ASSERT_EQ(0, c.err);
	/* Owned send: the buffers stay ours until XPORT_EV_SEND. */
	ASSERT_EQ(0, xport_post_send(c.conn, &h, body, iov, 2, &token));
	auto end = std::chrono::steady_clock::now() + kLiveness;
	while (!m && std::chrono::steady_clock::now() < end) {
		if (xport_test(c.ctx, &ev, 1, 100) != 1)
			continue;
		if (ev.type == XPORT_EV_SEND) {
			EXPECT_EQ(&token, ev.user);
			EXPECT_EQ(0, ev.status);
			sends++;
		} else if (ev.type == XPORT_EV_RECV) {
			m = ev.msg;
		} else {
			ADD_FAILURE() << "event " << ev.type << " status " << ev.status;
		}
	}
	ASSERT_NE(nullptr, m) << "no reply within 20 s";
	EXPECT_EQ(1, sends);
	EXPECT_EQ(42u, m->hdr.tag);
	ASSERT_EQ(RDFS_MAX_DATA, m->hdr.data_len);
	EXPECT_EQ(0u, (uintptr_t)m->data % 4096);
	EXPECT_EQ(0, memcmp(m->data, a.data(), a.size()));
	EXPECT_EQ(0, memcmp(m->data + a.size(), b.data(), b.size()));
	ASSERT_EQ(sizeof(body), m->hdr.body_len);
	EXPECT_EQ(0, memcmp(m->body, body, sizeof(body)));
	xport_msg_free(m);
}

/*
 * Receive budgets (xport_conn_set_rx_budget). One server context with a
 * listener and one client context, both driven by the test thread, so every
 * message the server delivers stays unfreed until the test frees it and the
 * test knows exactly what is held. Each client sends frames tagged 0, 1, ...
 * with an 8-character body naming the tag and, optionally, data of a pattern
 * seeded by the tag.
 */
class BudgetRig {
public:
	struct Side {
		struct xport_conn *client = nullptr, *server = nullptr;
		unsigned int max_msgs = 0;
		uint64_t max_bytes = 0;
		std::deque<struct xport_msg *> held;	/* delivered, not yet freed */
		uint64_t held_bytes = 0;
		size_t max_held = 0;
		uint64_t max_held_bytes = 0;
		uint32_t next_tag = 0;			/* = messages received so far */
		int over_budget = 0;			/* delivered while the budget was used up */
		int closed = 0;
		bool close_expected = false;		/* the test closes the client itself */
		int close_status = 1;
		uint32_t received_at_close = 0;
	};

	/* Listening on @url; @server_setup and @client_setup run on the contexts first. */
	explicit BudgetRig(const std::string &url = "tcp://127.0.0.1:0",
			   CtxHook server_setup = nullptr, CtxHook client_setup = nullptr)
		: server_setup_(std::move(server_setup))
	{
		EXPECT_EQ(0, xport_ctx_create(&sctx_));
		if (server_setup_)
			server_setup_(sctx_);
		EXPECT_EQ(0, xport_listen(sctx_, url.c_str(), &listener_));
		EXPECT_EQ(0, xport_ctx_create(&cctx_));
		if (client_setup)
			client_setup(cctx_);
	}
	~BudgetRig()
	{
		for (auto &s : sides_) {
			while (!s.held.empty()) {
				xport_msg_free(s.held.front());
				s.held.pop_front();
			}
			if (s.server)
				xport_conn_put(s.server);
			if (s.client)
				xport_conn_put(s.client);
		}
		xport_ctx_destroy(cctx_);
		xport_ctx_destroy(sctx_);
	}
	BudgetRig(const BudgetRig &) = delete;
	BudgetRig &operator=(const BudgetRig &) = delete;

	/* What one message counts against the byte budget: header, body and data. */
	static uint64_t msg_bytes(uint32_t data_len)
	{
		return RDFS_FRAME_HDR_LEN + 8 + (uint64_t)data_len;
	}

	/*
	 * Connect a client, accept it and give the accepting side the budget
	 * before anything is sent (as xport.h asks: before the first delivery).
	 */
	int add_conn(unsigned int max_msgs, uint64_t max_bytes)
	{
		Side s;
		struct xport_event ev;
		std::atomic<bool> connected{false};
		int err = -1;

		/* a tls:// connect waits for the handshake, which the server's progress runs */
		std::thread connector([&] {
			err = xport_connect(cctx_, xport_listener_url(listener_), 5000, &s.client);
			connected = true;
		});
		auto end = std::chrono::steady_clock::now() + kLiveness;
		while (!(connected && s.server) && std::chrono::steady_clock::now() < end) {
			if (xport_test(sctx_, &ev, 1, 10) != 1)
				continue;
			if (ev.type == XPORT_EV_ACCEPT && !s.server) {
				s.server = ev.conn;	/* the event's reference is ours */
				xport_conn_set_rx_budget(s.server, max_msgs, max_bytes);
			} else {
				ADD_FAILURE() << "server event " << ev.type << " " << ev.status;
			}
		}
		connector.join();
		EXPECT_EQ(0, err);
		EXPECT_NE(nullptr, s.server) << "no ACCEPT";
		s.max_msgs = max_msgs;
		s.max_bytes = max_bytes;
		sides_.push_back(std::move(s));
		return (int)sides_.size() - 1;
	}

	/* Post @count frames at once from client @i (unowned: the module copies what waits). */
	void send_frames(int i, int count, uint32_t data_len)
	{
		for (int t = 0; t < count; t++) {
			char body[16];
			std::vector<uint8_t> data = pattern(data_len, t);
			struct iovec iov = { data.data(), data.size() };
			struct rdfs_frame_hdr h = make_hdr(RDFS_OP_WRITE, t, 8, data_len);

			snprintf(body, sizeof(body), "%08u", (unsigned int)t % 100000000u);
			ASSERT_EQ(0, xport_post_send(sides_[i].client, &h, body, &iov,
						     data_len ? 1 : 0, nullptr));
		}
	}

	/*
	 * Drive both contexts for @ms (the client's so it flushes what its socket
	 * did not take at once). Returns how many messages the server delivered.
	 */
	int pump(int ms)
	{
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
		int got = 0;

		do
			got += pump_once();
		while (std::chrono::steady_clock::now() < end);
		return got;
	}

	/* Drive both until @done (true) or the liveness bound passes (false). */
	bool pump_until(const std::function<bool()> &done)
	{
		auto end = std::chrono::steady_clock::now() + kLiveness;

		while (!done()) {
			if (std::chrono::steady_clock::now() >= end)
				return false;
			pump_once();
		}
		return true;
	}

	/* Whether @i's budget is used up: the module may deliver nothing more. */
	bool full(int i) const
	{
		const Side &s = sides_[i];

		return (s.max_msgs && s.held.size() >= s.max_msgs) ||
		       (s.max_bytes && s.held_bytes >= s.max_bytes);
	}

	/* Close client @i once what it posted is written (a clean close, FIN after the data). */
	void close_client(int i)
	{
		sides_[i].close_expected = true;
		xport_conn_close_when_sent(sides_[i].client);
	}

	/* Free the @n oldest messages connection @i holds. */
	void free_oldest(int i, size_t n)
	{
		Side &s = sides_[i];

		for (; n && !s.held.empty(); n--) {
			s.held_bytes -= msg_bytes(s.held.front()->hdr.data_len);
			xport_msg_free(s.held.front());
			s.held.pop_front();
		}
	}

	/* Free @i's oldest until at most half its budget is held: delivery may resume. */
	void free_to_half(int i)
	{
		Side &s = sides_[i];

		while (!s.held.empty() && ((s.max_msgs && s.held.size() > s.max_msgs / 2) ||
					   (s.max_bytes && s.held_bytes > s.max_bytes / 2)))
			free_oldest(i, 1);
	}

	/*
	 * Free what @i holds whenever the server has been quiet for 50 ms, until
	 * @total messages arrived (or 20 s passed). Returns the messages received.
	 */
	uint32_t drain(int i, uint32_t total)
	{
		auto end = std::chrono::steady_clock::now() + kLiveness;

		while (sides_[i].next_tag < total && std::chrono::steady_clock::now() < end)
			if (pump(50) == 0)
				free_oldest(i, SIZE_MAX);
		return sides_[i].next_tag;
	}

	/* Connection @i's state (the reference stays valid as connections are added). */
	Side &side(int i) { return sides_[i]; }

private:
	int pump_once()
	{
		struct xport_event ev[32];
		int got = 0;
		int n = xport_test(sctx_, ev, 32, 10);

		EXPECT_GE(n, 0);
		for (int k = 0; k < n; k++)
			got += server_event(&ev[k]);
		n = xport_test(cctx_, ev, 32, 0);
		EXPECT_GE(n, 0);
		for (int k = 0; k < n; k++) {
			EXPECT_NE(XPORT_EV_RECV, ev[k].type) << "the client got a message";
			if (ev[k].type == XPORT_EV_CLOSED && !client_close_expected(ev[k].conn))
				ADD_FAILURE() << "client closed: " << ev[k].status;
		}
		return got;
	}

	bool client_close_expected(struct xport_conn *conn)
	{
		for (auto &c : sides_)
			if (c.client == conn)
				return c.close_expected;
		return false;
	}

	/* One server event: check and keep a message; 1 if it was one. */
	int server_event(struct xport_event *ev)
	{
		Side *s = nullptr;
		int i = 0;

		for (size_t k = 0; k < sides_.size(); k++) {
			if (sides_[k].server == ev->conn) {
				s = &sides_[k];
				i = (int)k;
			}
		}
		if (ev->type == XPORT_EV_CLOSED) {
			if (!s || !s->close_expected)
				ADD_FAILURE() << "server connection closed: " << ev->status;
			if (s) {
				s->closed++;
				s->close_status = ev->status;
				s->received_at_close = s->next_tag;
			}
			return 0;
		}
		if (ev->type != XPORT_EV_RECV)
			return 0;
		struct xport_msg *m = ev->msg;
		if (!s) {
			ADD_FAILURE() << "message on an unknown connection";
			xport_msg_free(m);
			return 0;
		}
		/* In order and intact. */
		uint32_t tag = m->hdr.tag;
		char body[16];
		snprintf(body, sizeof(body), "%08u", tag % 100000000u);
		EXPECT_EQ(s->next_tag, tag);
		s->next_tag = tag + 1;
		EXPECT_EQ(std::string(body), std::string((char *)m->body, m->hdr.body_len));
		if (m->hdr.data_len) {
			std::vector<uint8_t> want = pattern(m->hdr.data_len, tag);
			EXPECT_EQ(0, memcmp(want.data(), m->data, want.size())) << "tag " << tag;
		}
		/*
		 * Admitted only while the budget had room: fewer than max_msgs
		 * messages and fewer than max_bytes bytes held before this one.
		 * The test frees only while no event is queued, so what it holds
		 * now is what the module counted when it took this message.
		 */
		if (full(i) && !s->over_budget++)
			ADD_FAILURE() << "tag " << tag << " delivered with " << s->held.size()
				      << " messages, " << s->held_bytes << " bytes held";
		s->held.push_back(m);
		s->held_bytes += msg_bytes(m->hdr.data_len);
		s->max_held = std::max(s->max_held, s->held.size());
		s->max_held_bytes = std::max(s->max_held_bytes, s->held_bytes);
		return 1;
	}

	CtxHook server_setup_;		/* kept: it may own what the context points to */
	struct xport_ctx *sctx_ = nullptr, *cctx_ = nullptr;
	struct xport_listener *listener_ = nullptr;
	std::deque<Side> sides_;
};

} // namespace xport_testing

#endif
