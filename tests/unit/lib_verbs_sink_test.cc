// SPDX-License-Identifier: MIT
/*
 * lib_verbs_sink_test.cc - Gfarm's figure 2 over rdma://: a request exposes
 * the client's destination (xport_post_send_sink), the server RDMA-WRITEs
 * each unit into it (xport_post_write) and says where with a data-less frame.
 * The bytes land byte for byte, and the sink's keys die with the reply or a
 * cancel: a late WRITE fails instead of reaching the memory. Over TCP the
 * same calls degrade to plain sends. RDMA parts run in the qemu guest
 * (tests/vm/run --rdma); they skip without RDFS_TEST_RDMA_ADDR.
 */
#include <gtest/gtest.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <list>
#include <string>
#include <thread>
#include <vector>

#include "xport_test_server.h"

extern "C" {
#include "frame.h"
#include "xport.h"
#include "xport_verbs_stats.h"
#include "xport_verbs_wire.h"
}

namespace {

using xport_testing::kWaitMs;
using xport_testing::make_hdr;
using xport_testing::pattern;
using xport_testing::rdma_url;

enum plan { PLAN_NOW = 1, PLAN_LATE = 2, PLAN_HOLD = 3 };

/* What the client asks for, in the request body. */
struct ask {
	uint32_t unit, total, plan;
};

/*
 * The shared test server, answering a READ that carries a sink by writing
 * pattern(total, tag) into it unit by unit, then a final frame. PLAN_LATE
 * keeps the sink and writes into it again when a PING comes; PLAN_HOLD writes
 * nothing until the PING (which writes into a kept PLAN_LATE sink first, if
 * there is one).
 */
class Server {
public:
	explicit Server(const std::string &url) : srv_(options(url)) {}
	~Server()
	{
		srv_.stop();	/* no handler runs past here */
		free(kept_);
		free(held_.sink);
	}
	const std::string &url() const { return srv_.url(); }
	std::atomic<int> send_errors{0};
	std::atomic<int> post_err{0};

private:
	xport_testing::ServerOptions options(const std::string &url)
	{
		xport_testing::ServerOptions o;

		o.url = url;
		o.liveness_ms = kWaitMs;
		o.on_recv = [this](struct xport_conn *conn, struct xport_msg *m) {
			handle(conn, m);
			return true;
		};
		o.on_send = [this](const struct xport_event *ev) {
			if (ev->status)
				send_errors++;
		};
		return o;
	}
	void write_units(struct xport_conn *conn, const struct xport_sink *sink, uint32_t tag,
			 uint32_t unit, uint32_t total, bool final)
	{
		srcs_.push_back(pattern(total, tag));
		std::vector<uint8_t> &src = srcs_.back();

		for (uint32_t off = 0; off < total; off += unit) {
			uint32_t len = total - off < unit ? total - off : unit;
			struct iovec iov = { src.data() + off, len };
			struct rdfs_frame_hdr h = make_hdr(RDFS_OP_READ, tag, 0, 0,
							   RDFS_FRAME_REPLY | RDFS_FRAME_MORE);
			int err = xport_post_write(conn, sink, off, &iov, 1, &h, nullptr, this);

			if (err)
				post_err = err;
		}
		if (final) {
			struct rdfs_frame_hdr h =
				make_hdr(RDFS_OP_READ, tag, 0, 0, RDFS_FRAME_REPLY);

			EXPECT_EQ(0, xport_post_send(conn, &h, nullptr, nullptr, 0, nullptr));
		}
	}
	void handle(struct xport_conn *conn, struct xport_msg *m)
	{
		struct ask a = {};

		if (m->hdr.opcode == RDFS_OP_PING) {
			/* the late or held WRITE: into a sink whose reply is over */
			if (kept_)
				write_units(conn, kept_, kept_tag_, kept_unit_, kept_total_, false);
			else if (held_.sink)
				write_units(conn, held_.sink, held_.tag, held_.unit, held_.total,
					    false);
			xport_msg_free(m);
			return;
		}
		if (m->hdr.body_len == sizeof(a))
			memcpy(&a, m->body, sizeof(a));
		if (!m->sink) {
			/* TCP: no sink, the data goes in the frame as usual */
			std::vector<uint8_t> src = pattern(a.total, m->hdr.tag);
			struct iovec iov = { src.data(), src.size() };
			struct rdfs_frame_hdr h =
				make_hdr(RDFS_OP_READ, m->hdr.tag, 0, a.total, RDFS_FRAME_REPLY);

			EXPECT_EQ(0, xport_post_send(conn, &h, nullptr, &iov, 1, nullptr));
			xport_msg_free(m);
			return;
		}
		EXPECT_EQ(a.total, xport_sink_len(m->sink));
		if (a.plan == PLAN_HOLD) {
			free(held_.sink);
			held_ = { m->sink, m->hdr.tag, a.unit, a.total };
			m->sink = nullptr;
			xport_msg_free(m);
			return;
		}
		write_units(conn, m->sink, m->hdr.tag, a.unit, a.total, true);
		if (a.plan == PLAN_LATE) {
			kept_ = m->sink;
			m->sink = nullptr;
			kept_tag_ = m->hdr.tag;
			kept_unit_ = a.unit;
			kept_total_ = a.total;
		}
		xport_msg_free(m);
	}

	std::list<std::vector<uint8_t>> srcs_;	/* sources live until the end */
	struct xport_sink *kept_ = nullptr;
	uint32_t kept_tag_ = 0, kept_unit_ = 0, kept_total_ = 0;
	struct {
		struct xport_sink *sink;
		uint32_t tag, unit, total;
	} held_ = {};
	xport_testing::Server srv_;	/* last: its thread starts once the rest is there */
};

/* The shared client, asking for data into sinks. */
class Client : public xport_testing::Client {
public:
	explicit Client(const std::string &url) : xport_testing::Client(url, options()) {}
	static xport_testing::ClientOptions options()
	{
		xport_testing::ClientOptions o;

		o.timeout_ms = kWaitMs;
		o.liveness_ms = kWaitMs;
		return o;
	}

	/* Post a READ exposing @dest, split into @pieces iovecs. */
	int ask(uint32_t tag, std::vector<uint8_t> &dest, uint32_t unit, uint32_t plan,
		int pieces)
	{
		return ask_into(tag, dest.data(), dest.size(), unit, plan, pieces);
	}
	int ask_into(uint32_t tag, uint8_t *dest, size_t size, uint32_t unit, uint32_t plan,
		     int pieces)
	{
		struct ask a = { unit, (uint32_t)size, plan };
		std::vector<struct iovec> sink;
		size_t per = size / pieces, off = 0;

		for (int i = 0; i < pieces; i++) {
			size_t len = i == pieces - 1 ? size - off : per;

			sink.push_back({ dest + off, len });
			off += len;
		}
		struct rdfs_frame_hdr h = make_hdr(RDFS_OP_READ, tag, sizeof(a), 0);

		return xport_post_send_sink(conn, &h, &a, nullptr, 0, sink.data(),
					    (int)sink.size(), nullptr);
	}
	int ping()
	{
		struct rdfs_frame_hdr h = make_hdr(RDFS_OP_PING, 99, 0, 0);

		return xport_post_send(conn, &h, nullptr, nullptr, 0, nullptr);
	}
	/*
	 * Receive the reply to @tag up to its final frame; the placed byte count
	 * in @placed, inline data appended to @inline_data. False on timeout.
	 */
	bool reply(uint32_t tag, uint64_t *placed, std::vector<uint8_t> *inline_data)
	{
		struct xport_event ev;

		*placed = 0;
		for (;;) {
			int n = xport_test(ctx, &ev, 1, kWaitMs);

			if (n != 1)
				return false;
			if (ev.type == XPORT_EV_CLOSED)
				return false;
			if (ev.type != XPORT_EV_RECV)
				continue;
			struct xport_msg *m = ev.msg;
			bool final = !(m->hdr.flags & RDFS_FRAME_MORE);

			EXPECT_EQ(tag, m->hdr.tag);
			*placed += m->placed_len;
			if (inline_data && m->hdr.data_len)
				inline_data->insert(inline_data->end(), m->data,
						    m->data + m->hdr.data_len);
			xport_msg_free(m);
			if (final)
				return true;
		}
	}
	/* Wait for the connection to close (a late WRITE took it down). */
	bool wait_closed()
	{
		struct xport_event ev;

		for (;;) {
			int n = xport_test(ctx, &ev, 1, kWaitMs);

			if (n != 1)
				return false;
			if (ev.type == XPORT_EV_RECV)
				xport_msg_free(ev.msg);
			if (ev.type == XPORT_EV_CLOSED)
				return true;
		}
	}
};

bool wait_for(const std::atomic<int> &v, int want)
{
	for (int i = 0; i < kWaitMs / 10 && v < want; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	return v >= want;
}

TEST(VerbsSink, ServerWritesEachUnitIntoTheClientsBufferByteForByte)
{
	NEED_RDMA();
	Server s(rdma_url(0));
	Client c(s.url());
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(XPORT_CAP_RDMA, xport_conn_caps(c.conn) & XPORT_CAP_RDMA);
	const uint32_t units[] = { 4096, 12345, 128u << 10, 1u << 20 };
	const uint32_t totals[] = { 4096, 100000, 1u << 20, 4u << 20 };
	uint32_t tag = 1;

	for (uint32_t unit : units) {
		for (uint32_t total : totals) {
			std::vector<uint8_t> dest(total, 0xee);
			uint64_t placed;

			ASSERT_EQ(0, c.ask(tag, dest, unit, PLAN_NOW, 3))
				<< unit << " " << total;
			ASSERT_TRUE(c.reply(tag, &placed, nullptr));
			EXPECT_EQ(total, placed);
			EXPECT_TRUE(dest == pattern(total, tag)) << "unit " << unit << " total "
								 << total;
			tag++;
		}
	}
	EXPECT_EQ(0, s.post_err);
	EXPECT_EQ(0, s.send_errors);
}

/* A long-lived buffer declared with xport_mem_register() for the scope of a test. */
struct Declared {
	std::vector<uint8_t> v;
	explicit Declared(size_t n, uint8_t fill) : v(n, fill)
	{
		EXPECT_EQ(0, xport_mem_register(v.data(), v.size()));
	}
	~Declared() { EXPECT_EQ(0, xport_mem_deregister(v.data(), v.size())); }
};

/*
 * Declared memory is exposed through a window bound per request
 * (REMOTE_WRITE): no registration per request, a window per piece, the
 * declared range registered once; byte for byte as before.
 */
TEST(VerbsSink, DeclaredSinkIsExposedThroughWindowsWithoutRegistering)
{
	NEED_RDMA();
	Server s(rdma_url(0));
	Client c(s.url());
	ASSERT_TRUE(c.ok());
	Declared mem(1u << 20, 0);
	const uint32_t units[] = { 12345, 1u << 20 };
	const uint32_t totals[] = { 4096, 100000, 1u << 20 };
	struct verbs_stats before, after;
	uint32_t tag = 1, asks = 0;

	verbs_stats_get(&before);
	for (uint32_t unit : units) {
		for (uint32_t total : totals) {
			/* a part of the declared range, as with a client's pool */
			uint64_t placed;

			ASSERT_EQ(0, c.ask_into(tag, mem.v.data(), total, unit, PLAN_NOW, 3));
			ASSERT_TRUE(c.reply(tag, &placed, nullptr));
			EXPECT_EQ(total, placed);
			EXPECT_EQ(0, memcmp(mem.v.data(), pattern(total, tag).data(), total))
				<< "unit " << unit << " total " << total;
			tag++;
			asks++;
		}
	}
	verbs_stats_get(&after);
	EXPECT_EQ(asks, after.sinks - before.sinks);
	EXPECT_EQ(3 * asks, after.sink_windows - before.sink_windows);
	EXPECT_EQ(0u, after.sink_mrs - before.sink_mrs);
	/* the declared range: registered at most once (on its first use) */
	EXPECT_LE(after.cache_misses - before.cache_misses, 1u);
	EXPECT_EQ(0, s.post_err);
	EXPECT_EQ(0, s.send_errors);
}

/*
 * A finished sink's window rkey is dead, even while a newer request exposes
 * the very same declared bytes to the same peer: a key is one request's.
 */
TEST(VerbsSink, StaleWindowKeyOfAFinishedSinkFailsWhileANewOneIsLive)
{
	NEED_RDMA();
	Server s(rdma_url(0));
	Client c(s.url());
	ASSERT_TRUE(c.ok());
	Declared mem(256u << 10, 0);
	uint64_t placed;

	ASSERT_EQ(0, c.ask_into(7, mem.v.data(), mem.v.size(), 64u << 10, PLAN_LATE, 2));
	ASSERT_TRUE(c.reply(7, &placed, nullptr));
	ASSERT_EQ(0, memcmp(mem.v.data(), pattern(mem.v.size(), 7).data(), mem.v.size()));
	memset(mem.v.data(), 0x55, mem.v.size());
	/* the same bytes again, held open by the server: a live window now */
	ASSERT_EQ(0, c.ask_into(8, mem.v.data(), mem.v.size(), 64u << 10, PLAN_HOLD, 2));
	std::this_thread::sleep_for(std::chrono::milliseconds(200));
	/* the server writes with request 7's keys: refused */
	ASSERT_EQ(0, c.ping());
	EXPECT_TRUE(wait_for(s.send_errors, 1));
	EXPECT_TRUE(c.wait_closed());
	for (uint8_t b : mem.v)
		ASSERT_EQ(0x55, b);
}

TEST(VerbsSink, CancelledDeclaredSinkRefusesWrites)
{
	NEED_RDMA();
	Server s(rdma_url(0));
	Client c(s.url());
	ASSERT_TRUE(c.ok());
	Declared mem(64u << 10, 0x33);

	ASSERT_EQ(0, c.ask_into(8, mem.v.data(), mem.v.size(), 16u << 10, PLAN_HOLD, 1));
	std::this_thread::sleep_for(std::chrono::milliseconds(200));
	xport_sink_cancel(c.conn, 8);
	ASSERT_EQ(0, c.ping());
	EXPECT_TRUE(wait_for(s.send_errors, 1));
	EXPECT_TRUE(c.wait_closed());
	for (uint8_t b : mem.v)
		ASSERT_EQ(0x33, b);
}

TEST(VerbsSink, SinkKeyIsDeadAfterTheReply)
{
	NEED_RDMA();
	Server s(rdma_url(0));
	Client c(s.url());
	ASSERT_TRUE(c.ok());
	std::vector<uint8_t> dest(256u << 10, 0);
	uint64_t placed;

	ASSERT_EQ(0, c.ask(7, dest, 64u << 10, PLAN_LATE, 2));
	ASSERT_TRUE(c.reply(7, &placed, nullptr));
	ASSERT_TRUE(dest == pattern(dest.size(), 7));
	memset(dest.data(), 0x55, dest.size());
	/* the server writes with the finished reply's keys: refused */
	ASSERT_EQ(0, c.ping());
	EXPECT_TRUE(wait_for(s.send_errors, 1));
	EXPECT_TRUE(c.wait_closed());
	for (uint8_t b : dest)
		ASSERT_EQ(0x55, b);
}

TEST(VerbsSink, CancelledSinkRefusesWrites)
{
	NEED_RDMA();
	Server s(rdma_url(0));
	Client c(s.url());
	ASSERT_TRUE(c.ok());
	std::vector<uint8_t> dest(64u << 10, 0x33);

	ASSERT_EQ(0, c.ask(8, dest, 16u << 10, PLAN_HOLD, 1));
	/* the call timed out: the client gives the memory up before any reply */
	std::this_thread::sleep_for(std::chrono::milliseconds(200));
	xport_sink_cancel(c.conn, 8);
	ASSERT_EQ(0, c.ping());
	EXPECT_TRUE(wait_for(s.send_errors, 1));
	EXPECT_TRUE(c.wait_closed());
	for (uint8_t b : dest)
		ASSERT_EQ(0x33, b);
}

/* Over TCP the sink calls are plain sends: the data comes in the frame. */
TEST(VerbsSink, OverTcpASinkRequestIsAPlainRequest)
{
	Server s("tcp://127.0.0.1:0");
	Client c(s.url());
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(0u, xport_conn_caps(c.conn) & XPORT_CAP_RDMA);
	std::vector<uint8_t> dest(100000, 0), got;
	uint64_t placed;

	ASSERT_EQ(0, c.ask(3, dest, 4096, PLAN_NOW, 2));
	ASSERT_TRUE(c.reply(3, &placed, &got));
	EXPECT_EQ(0u, placed);
	EXPECT_TRUE(got == pattern(dest.size(), 3));
	struct iovec iov = { dest.data(), 4096 };
	struct rdfs_frame_hdr h = make_hdr(RDFS_OP_READ, 1, 0, 0, RDFS_FRAME_REPLY);
	int dummy;
	EXPECT_EQ(-EOPNOTSUPP, xport_post_write(c.conn, (struct xport_sink *)&dummy, 0, &iov,
						1, &h, nullptr, &dummy));
}

/* A SINK or PLACED message as the wire has it. */
std::vector<uint8_t> wire_msg(uint8_t type, const std::vector<struct verbs_desc> &descs,
			      uint8_t flags, uint32_t data_len)
{
	struct verbs_hdr vh = {};
	struct rdfs_frame_hdr fh = make_hdr(RDFS_OP_READ, 5, 0, data_len, flags);
	std::vector<uint8_t> b(verbs_sink_len((unsigned int)descs.size(), 0, data_len));

	vh.type = type;
	vh.ndesc = (uint16_t)descs.size();
	verbs_hdr_encode(&vh, b.data());
	for (size_t i = 0; i < descs.size(); i++)
		verbs_desc_put(b.data() + VERBS_HDR_LEN + i * VERBS_DESC_LEN, &descs[i]);
	rdfs_frame_hdr_encode(&fh, b.data() + VERBS_HDR_LEN + descs.size() * VERBS_DESC_LEN);
	return b;
}

int parse(const std::vector<uint8_t> &b)
{
	struct verbs_msg m;

	return verbs_msg_parse(b.data(), b.size(), RDFS_MAX_BODY, RDFS_MAX_DATA, &m);
}

TEST(VerbsSinkWire, SinkAndPlacedMessagesParseAndBadOnesAreRefused)
{
	struct verbs_msg m;
	auto sink = wire_msg(VERBS_MSG_SINK, { { 0x1000, 4096, 7 }, { 0x9000, 100, 8 } }, 0, 0);

	ASSERT_EQ(0, verbs_msg_parse(sink.data(), sink.size(), RDFS_MAX_BODY, RDFS_MAX_DATA, &m));
	EXPECT_EQ(2, m.vh.ndesc);
	struct verbs_desc d;
	verbs_desc_get(m.desc + VERBS_DESC_LEN, &d);
	EXPECT_EQ(0x9000u, d.addr);
	EXPECT_EQ(8u, d.rkey);
	auto placed = wire_msg(VERBS_MSG_PLACED, { { 65536, 4096, 0 } },
			       RDFS_FRAME_REPLY | RDFS_FRAME_MORE, 0);
	EXPECT_EQ(0, parse(placed));

	/* an empty sink piece, a sink bigger than one reply */
	EXPECT_EQ(-EPROTO, parse(wire_msg(VERBS_MSG_SINK, { { 0x1000, 0, 7 } }, 0, 0)));
	EXPECT_EQ(-EPROTO, parse(wire_msg(VERBS_MSG_SINK,
					  { { 0x1000, RDFS_MAX_DATA, 7 }, { 0, 1, 7 } }, 0, 0)));
	EXPECT_EQ(-EPROTO, parse(wire_msg(VERBS_MSG_SINK, {}, 0, 0)));
	/* a placed frame names one range, no key, within one reply, and has no data */
	EXPECT_EQ(-EPROTO, parse(wire_msg(VERBS_MSG_PLACED, { { 0, 4096, 3 } },
					  RDFS_FRAME_REPLY | RDFS_FRAME_MORE, 0)));
	EXPECT_EQ(-EPROTO, parse(wire_msg(VERBS_MSG_PLACED, { { 0, 4096, 0 }, { 4096, 1, 0 } },
					  RDFS_FRAME_REPLY | RDFS_FRAME_MORE, 0)));
	EXPECT_EQ(-EPROTO, parse(wire_msg(VERBS_MSG_PLACED, { { RDFS_MAX_DATA, 1, 0 } },
					  RDFS_FRAME_REPLY | RDFS_FRAME_MORE, 0)));
	EXPECT_EQ(-EPROTO, parse(wire_msg(VERBS_MSG_PLACED, { { ~0ull, 2, 0 } },
					  RDFS_FRAME_REPLY | RDFS_FRAME_MORE, 0)));
	EXPECT_EQ(-EPROTO, parse(wire_msg(VERBS_MSG_PLACED, { { 0, 0, 0 } },
					  RDFS_FRAME_REPLY | RDFS_FRAME_MORE, 0)));
	EXPECT_EQ(-EPROTO, parse(wire_msg(VERBS_MSG_PLACED, { { 0, 4096, 0 } }, RDFS_FRAME_REPLY,
					  16)));
	/* truncated */
	sink.pop_back();
	EXPECT_EQ(-EPROTO, parse(sink));
}

} // namespace
