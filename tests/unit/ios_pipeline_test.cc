// SPDX-License-Identifier: MIT
/*
 * ios_pipeline_test.cc - the io_uring READ pipeline, read-ahead and write-back
 * of the I/O server, in-process on a real socket and a real volume file:
 * byte-exact data under overlapped sends for every unit size and depth, whole
 * vs overlap, read-ahead coherence across connections, READs waiting for
 * pool buffers, COMMIT durability across a kill -9, and malformed requests
 * among pipelined ones.
 */
#include <gtest/gtest.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "../../ioserver/ios.h"
#include "../../ioserver/volume.h"
}

#include "ios_test_util.h"

namespace {

const uint32_t kServerId = 11;
/* 64 MiB of blocks: room for a 16 MiB model region and then some. */
const uint64_t kVolBlocks = 16384;
/* The region the model covers: 20 MiB from block 100 on. */
const uint64_t kModelFirst = 100;
const size_t kModelLen = 20u << 20;

struct ServerConf {
	enum ios_send_mode mode = IOS_SEND_OVERLAP;
	uint32_t unit = 0;
	int depth = 0;
	int readahead_mb = IOS_READAHEAD_OFF;
	int threads = 2;
	uint64_t pool = 0;		/* buffer_pool_bytes; 0: derived */
};

class PipelineTest : public ::testing::Test {
protected:
	TempDir dir;
	struct auth_secret secret, cap_key;
	std::string path;
	struct volume *vol = nullptr;
	struct ios_server *server = nullptr;
	std::thread loop;
	std::vector<struct rpc_client *> clients;
	std::vector<uint8_t> model;

	void SetUp() override
	{
		auth_secret_from_bytes(&secret, "cluster-secret-for-tests-0123456789", 35);
		auth_secret_from_bytes(&cap_key, "capability-key-for-tests-0123456789", 35);
		path = dir.path() + "/vol";
		ASSERT_NO_FATAL_FAILURE(open_volume());
	}
	void TearDown() override
	{
		stop();
		if (vol)
			volume_close(vol);
	}
	void open_volume()
	{
		struct volume_open_opts vo = {};
		vo.path = path.c_str();
		vo.create_size = VOLUME_DATA_OFFSET + kVolBlocks * 4096;
		ASSERT_EQ(volume_open(&vo, &vol), 0);
	}
	void start(const ServerConf &c = ServerConf(), int nclients = 1)
	{
		struct ios_options o = {};
		o.vol = vol;
		o.listen = "tcp://127.0.0.1:0";
		o.fixed_server_id = kServerId;
		o.secret = &secret;
		o.cap_key = &cap_key;
		o.io_threads = c.threads;
		o.send_mode = c.mode;
		o.unit_size = c.unit;
		o.pipeline_depth = c.depth;
		o.readahead_cache_mb = c.readahead_mb;
		o.buffer_pool_bytes = c.pool;
		ASSERT_EQ(ios_server_create(&o, &server), 0);
		loop = std::thread([this]() { EXPECT_EQ(ios_server_run(server), 0); });
		for (int i = 0; i < nclients; i++) {
			struct rpc_client *cl = nullptr;
			ASSERT_EQ(rpc_client_connect(ios_server_url(server, 0), &secret, "client", 5000,
						     &cl), 0);
			clients.push_back(cl);
		}
	}
	void stop()
	{
		for (auto *c : clients)
			rpc_client_close(c);
		clients.clear();
		if (server) {
			ios_server_stop(server);
			loop.join();
			ios_server_destroy(server);
			server = nullptr;
		}
	}
	/* Fill the model region with a pattern through the server (whole-block WRITEs). */
	void write_model(struct rpc_client *c, uint32_t seed)
	{
		Cap cap(&cap_key, kServerId, RDFS_CAP_WRITE, {{0, kVolBlocks}});
		const size_t piece = 4u << 20;

		model = pattern(kModelLen, seed);
		for (size_t off = 0; off < kModelLen; off += piece) {
			IoResult w = io_call(c, RDFS_OP_WRITE, cap.get(), kModelFirst + off / 4096,
					     piece / 4096, 0, piece, model.data() + off, piece, false);
			ASSERT_EQ(w.status, 0) << w.message;
		}
	}
	/* READ bytes [head, head + length) of the blocks from the model's block @blk on. */
	IoResult read_model(struct rpc_client *c, uint64_t blk, uint32_t head, uint32_t length)
	{
		uint32_t count = (uint32_t)volume_blocks_touched(head, length);
		Cap cap(&cap_key, kServerId, RDFS_CAP_READ, {{0, kVolBlocks}});

		if (!count)
			count = 1;
		return io_call(c, RDFS_OP_READ, cap.get(), kModelFirst + blk, count, head, length);
	}
	std::vector<uint8_t> model_bytes(uint64_t blk, uint32_t head, uint32_t length)
	{
		size_t off = blk * 4096 + head;
		return std::vector<uint8_t>(model.begin() + off, model.begin() + off + length);
	}
	struct ios_stats stats()
	{
		struct ios_stats st;
		ios_server_stats(server, &st);
		return st;
	}
};

/* Request sizes around @unit: multiples of it and not, small and large. */
std::vector<uint32_t> sizes_for(uint32_t unit)
{
	std::vector<uint32_t> v = { 1, 4095, 4096, 4097, 12345, unit - 1, unit, unit + 1,
				    2 * unit, 3 * unit + 123, (1u << 20) - 4096 + 17 };
	if (4 * unit + 4096 <= (6u << 20))
		v.push_back(4 * unit + 4096);
	std::vector<uint32_t> out;
	for (uint32_t s : v)
		if (s >= 1 && s <= (6u << 20))
			out.push_back(s);
	return out;
}

TEST_F(PipelineTest, OverlapReturnsExactBytesForEveryUnitSizeAndDepth)
{
	const uint32_t units[] = { 4096, 8192, 64u << 10, 128u << 10, 256u << 10, 1u << 20 };
	const int depths[] = { 1, 2, 4, 8 };
	const uint32_t heads[] = { 0, 1, 512, 4095 };

	start();
	write_model(clients[0], 1);
	stop();
	for (uint32_t unit : units) {
		for (int depth : depths) {
			ServerConf c;
			c.unit = unit;
			c.depth = depth;
			start(c);
			for (uint32_t len : sizes_for(unit)) {
				for (uint32_t head : heads) {
					uint64_t blk = (len * 7 + head) % 64;
					SCOPED_TRACE("unit " + std::to_string(unit) + " depth " +
						     std::to_string(depth) + " length " +
						     std::to_string(len) + " head " +
						     std::to_string(head));
					IoResult r = read_model(clients[0], blk, head, len);
					ASSERT_EQ(r.status, 0) << r.message;
					EXPECT_EQ(r.length, len);
					ASSERT_TRUE(r.data == model_bytes(blk, head, len));
				}
			}
			/* Requests spanning several units went out in parts. */
			EXPECT_GT(stats().parts_sent, 0u);
			stop();
		}
	}
}

TEST_F(PipelineTest, LargestRequestInSmallestUnitsIsExact)
{
	ServerConf c;

	c.unit = 4096;
	c.depth = 8;
	start(c);
	write_model(clients[0], 2);
	/* 16 MiB from head 4095: 4097 units, every one a frame of its own */
	IoResult r = read_model(clients[0], 3, 4095, RDFS_MAX_DATA);
	ASSERT_EQ(r.status, 0) << r.message;
	EXPECT_TRUE(r.data == model_bytes(3, 4095, RDFS_MAX_DATA));
	r = read_model(clients[0], 0, 0, RDFS_MAX_DATA);
	ASSERT_EQ(r.status, 0) << r.message;
	EXPECT_TRUE(r.data == model_bytes(0, 0, RDFS_MAX_DATA));
}

TEST_F(PipelineTest, WholeAndOverlapReturnIdenticalBytes)
{
	const uint32_t lens[] = { 1, 4096, 100000, 128u << 10, (1u << 20) + 5, 4u << 20,
				  RDFS_MAX_DATA - 4096 };
	std::vector<std::vector<uint8_t>> whole;
	ServerConf c;

	c.mode = IOS_SEND_WHOLE;
	start(c);
	write_model(clients[0], 3);
	for (uint32_t len : lens) {
		IoResult r = read_model(clients[0], 1, 77, len);
		ASSERT_EQ(r.status, 0) << r.message;
		whole.push_back(r.data);
	}
	/* one frame per reply in whole mode */
	EXPECT_EQ(stats().parts_sent, 0u);
	stop();

	c.mode = IOS_SEND_OVERLAP;
	c.unit = 64u << 10;
	start(c);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		IoResult r = read_model(clients[0], 1, 77, lens[i]);
		ASSERT_EQ(r.status, 0) << r.message;
		EXPECT_TRUE(r.data == whole[i]) << "length " << lens[i];
		EXPECT_TRUE(r.data == model_bytes(1, 77, lens[i])) << "length " << lens[i];
	}
	EXPECT_GT(stats().parts_sent, 0u);
}

TEST_F(PipelineTest, ManyConcurrentReadersWithATinyPipelineAreExact)
{
	ServerConf c;

	c.unit = 16u << 10;
	c.depth = 2;
	c.threads = 3;
	start(c, 4);
	write_model(clients[0], 4);
	std::vector<std::thread> ts;
	std::atomic<int> bad{0};
	for (int t = 0; t < 4; t++) {
		ts.emplace_back([&, t]() {
			for (int i = 0; i < 20; i++) {
				uint32_t len = 4096 * (1 + (i * 37 + t * 11) % 300) - (i % 3);
				uint32_t head = (i * 131) % 4096;
				uint64_t blk = (i * 13 + t) % 512;
				IoResult r = read_model(clients[t], blk, head, len);
				if (r.status || r.data != model_bytes(blk, head, len))
					bad++;
			}
		});
	}
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(bad.load(), 0);
}

/*
 * Every client pipelines its READs: @reads[client] are (block, head, length)
 * of the model, all sent before any reply is read. Returns how many replies
 * were wrong.
 */
int pipelined_reads_bad(std::vector<struct rpc_client *> &clients,
			struct auth_secret *cap_key,
			const std::vector<std::vector<std::array<uint32_t, 3>>> &reads,
			const std::vector<uint8_t> &model)
{
	std::vector<std::thread> ts;
	std::atomic<int> bad{0};

	for (size_t ci = 0; ci < reads.size(); ci++) {
		ts.emplace_back([&, ci]() {
			Cap cap(cap_key, kServerId, RDFS_CAP_READ, {{0, kVolBlocks}});
			const auto &rs = reads[ci];
			std::vector<Rdfs__IoReq> reqs(rs.size());
			std::vector<struct rpc_pending *> pend(rs.size(), nullptr);

			for (size_t i = 0; i < rs.size(); i++) {
				rdfs__io_req__init(&reqs[i]);
				reqs[i].cap = cap.get();
				reqs[i].first_block = kModelFirst + rs[i][0];
				reqs[i].block_count =
					(uint32_t)volume_blocks_touched(rs[i][1], rs[i][2]);
				reqs[i].head = rs[i][1];
				reqs[i].length = rs[i][2];
				if (rpc_call_start(clients[ci], RDFS_OP_READ, &reqs[i].base,
						   nullptr, 0, &pend[i]))
					bad++;
			}
			for (size_t i = 0; i < rs.size(); i++) {
				struct rpc_reply rep = {};
				size_t off = (size_t)rs[i][0] * 4096 + rs[i][1];
				std::vector<uint8_t> got;

				if (!pend[i] || rpc_call_wait(pend[i], 60000, &rep)) {
					bad++;
					continue;
				}
				got.resize(rpc_reply_data_len(&rep));
				rpc_reply_data_copy(&rep, 0, got.data(), got.size());
				if (rep.status || got.size() != rs[i][2] ||
				    memcmp(got.data(), model.data() + off, got.size()))
					bad++;
				rpc_reply_release(&rep);
			}
		});
	}
	for (auto &th : ts)
		th.join();
	return bad.load();
}

/*
 * Whole replies larger than a third of the buffer pool, from three
 * connections at once: READs wait for another's buffer to come back.
 */
TEST_F(PipelineTest, ReadsWaitingForPoolBuffersAreExact)
{
	ServerConf c;

	c.mode = IOS_SEND_WHOLE;
	c.pool = 16u << 20;
	start(c, 3);
	write_model(clients[0], 8);
	std::vector<std::vector<std::array<uint32_t, 3>>> reads(3);
	for (uint32_t ci = 0; ci < 3; ci++)
		for (uint32_t i = 0; i < 6; i++)
			reads[ci].push_back({ (ci * 7 + i * 131) % 1024, (i * 1237) % 4096,
					      (6u << 20) + i * 4099 });
	EXPECT_EQ(pipelined_reads_bad(clients, &cap_key, reads, model), 0);
}

/* Wait (bounded) until every read-ahead load started so far has finished. */
void wait_readahead_settled(PipelineTest *t, struct ios_server *s)
{
	for (int i = 0; i < 1000; i++) {
		struct ios_stats st;
		ios_server_stats(s, &st);
		if (st.readahead_loads_done == st.readahead_loads)
			return;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	ADD_FAILURE() << "read-ahead loads never finished";
}

TEST_F(PipelineTest, ReadAheadServesSequentialStreamsAndNeverStaleData)
{
	ServerConf c;

	c.readahead_mb = 32;
	c.unit = 128u << 10;
	start(c, 2);
	struct rpc_client *reader = clients[0], *writer = clients[1];
	write_model(writer, 5);

	/* A sequential stream: read-ahead keeps going past it. */
	const uint32_t req = 256u << 10;
	for (uint32_t off = 0; off < (4u << 20); off += req) {
		IoResult r = read_model(reader, off / 4096, 0, req);
		ASSERT_EQ(r.status, 0);
		ASSERT_TRUE(r.data == model_bytes(off / 4096, 0, req));
	}
	wait_readahead_settled(this, server);
	EXPECT_GT(stats().readahead_loads, 0u);

	/* Continue the stream: served from memory, still exact. */
	uint64_t cached_before = stats().units_from_cache;
	IoResult r = read_model(reader, (4u << 20) / 4096, 0, req);
	ASSERT_EQ(r.status, 0);
	EXPECT_TRUE(r.data == model_bytes((4u << 20) / 4096, 0, req));
	EXPECT_GT(stats().units_from_cache, cached_before);
	wait_readahead_settled(this, server);

	/* Overwrite part of what is cached through another connection (unstable, partial blocks). */
	Cap wcap(&cap_key, kServerId, RDFS_CAP_WRITE, {{0, kVolBlocks}});
	uint64_t wblk = (4u << 20) / 4096 + 70;	/* ahead of the stream: in the cache */
	std::vector<uint8_t> fresh = pattern(300000, 99);
	IoResult w = io_call(writer, RDFS_OP_WRITE, wcap.get(), kModelFirst + wblk,
			     (uint32_t)volume_blocks_touched(100, fresh.size()), 100, fresh.size(),
			     fresh.data(), fresh.size(), false);
	ASSERT_EQ(w.status, 0) << w.message;
	memcpy(model.data() + wblk * 4096 + 100, fresh.data(), fresh.size());

	/* Read on: every byte is the new one. */
	for (uint32_t off = (4u << 20) + req; off < (6u << 20); off += req) {
		IoResult rr = read_model(reader, off / 4096, 0, req);
		ASSERT_EQ(rr.status, 0);
		ASSERT_TRUE(rr.data == model_bytes(off / 4096, 0, req)) << "offset " << off;
	}
	/* And again, the written range itself, from either connection. */
	IoResult again = read_model(writer, wblk, 100, fresh.size());
	ASSERT_EQ(again.status, 0);
	EXPECT_TRUE(again.data == fresh);

	/* ZERO drops cached blocks too. */
	wait_readahead_settled(this, server);
	uint64_t zblk = (6u << 20) / 4096 + 40;
	IoResult z = io_call(writer, RDFS_OP_ZERO, wcap.get(), kModelFirst + zblk, 8, 0, 0);
	ASSERT_EQ(z.status, 0) << z.message;
	memset(model.data() + zblk * 4096, 0, 8 * 4096);
	for (uint32_t off = 6u << 20; off < (7u << 20); off += req) {
		IoResult rr = read_model(reader, off / 4096, 0, req);
		ASSERT_EQ(rr.status, 0);
		ASSERT_TRUE(rr.data == model_bytes(off / 4096, 0, req)) << "offset " << off;
	}
}

TEST_F(PipelineTest, ConcurrentStreamsAndWritersNeverReadStaleAfterAck)
{
	ServerConf c;

	c.readahead_mb = 8;
	c.unit = 32u << 10;
	c.threads = 2;
	start(c, 3);
	write_model(clients[0], 6);
	std::atomic<int> bad{0};
	std::atomic<bool> done{false};
	Cap wcap(&cap_key, kServerId, RDFS_CAP_WRITE, {{0, kVolBlocks}});
	/*
	 * The writer owns blocks [2048, 2048 + 64) of the model: it writes a new
	 * generation, and once acknowledged, reads it back through the reader's
	 * connection while two streams read through that range over and over.
	 */
	std::thread writer([&]() {
		for (uint32_t gen = 0; gen < 30 && !bad; gen++) {
			std::vector<uint8_t> d = pattern(64 * 4096, 1000 + gen);
			IoResult w = io_call(clients[1], RDFS_OP_WRITE, wcap.get(),
					     kModelFirst + 2048, 64, 0, d.size(), d.data(), d.size(),
					     gen % 2 == 0);
			if (w.status) {
				bad++;
				break;
			}
			IoResult r = read_model(clients[2], 2048, 0, 64 * 4096);
			if (r.status || r.data != d)
				bad++;
		}
		done = true;
	});
	std::thread stream([&]() {
		while (!done) {
			for (uint64_t blk = 1900; blk < 2300 && !done; blk += 16) {
				IoResult r = read_model(clients[0], blk, 0, 16 * 4096);
				if (r.status)
					bad++;
				/* outside the writer's blocks the model holds */
				if (blk + 16 <= 2048 || blk >= 2048 + 64) {
					if (r.data != model_bytes(blk, 0, 16 * 4096))
						bad++;
				}
			}
		}
	});
	writer.join();
	stream.join();
	EXPECT_EQ(bad.load(), 0);
}

TEST_F(PipelineTest, ReadAfterAcknowledgedUnstableWriteSeesIt)
{
	ServerConf c;

	c.readahead_mb = 8;
	start(c, 2);
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, kVolBlocks}});
	for (int i = 0; i < 50; i++) {
		std::vector<uint8_t> d = pattern(5000 + i * 811, 300 + i);
		uint32_t head = (i * 997) % 4096;
		uint64_t blk = 500 + (i % 7) * 3;
		uint32_t count = (uint32_t)volume_blocks_touched(head, d.size());
		IoResult w = io_call(clients[i % 2], RDFS_OP_WRITE, cap.get(), blk, count, head,
				     d.size(), d.data(), d.size(), false);
		ASSERT_EQ(w.status, 0) << w.message;
		IoResult r = io_call(clients[(i + 1) % 2], RDFS_OP_READ, cap.get(), blk, count,
				     head, d.size());
		ASSERT_EQ(r.status, 0);
		ASSERT_TRUE(r.data == d) << "write " << i;
	}
}

TEST_F(PipelineTest, CommitWaitsForEveryEarlierWrite)
{
	start();
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, kVolBlocks}});
	std::vector<std::vector<uint8_t>> data;
	std::vector<Rdfs__IoReq> reqs(40);
	std::vector<struct iovec> iovs(40);
	std::vector<struct rpc_pending *> pend;
	for (int i = 0; i < 40; i++)
		data.push_back(pattern(64 * 1024 + (i % 3) * 1000, 700 + i));
	/* Pipelined: every WRITE and then the COMMIT sent before any reply is read. */
	for (int i = 0; i < 40; i++) {
		rdfs__io_req__init(&reqs[i]);
		reqs[i].cap = cap.get();
		reqs[i].first_block = 1000 + i * 20;
		reqs[i].block_count = (uint32_t)volume_blocks_touched(0, data[i].size());
		reqs[i].length = data[i].size();
		reqs[i].stable = false;
		iovs[i] = { data[i].data(), data[i].size() };
		struct rpc_pending *p = nullptr;
		ASSERT_EQ(rpc_call_start(clients[0], RDFS_OP_WRITE, &reqs[i].base, &iovs[i], 1, &p),
			  0);
		pend.push_back(p);
	}
	struct rpc_pending *cp = nullptr;
	ASSERT_EQ(rpc_call_start(clients[0], RDFS_OP_IO_COMMIT, nullptr, nullptr, 0, &cp), 0);
	struct rpc_reply rep = {};
	ASSERT_EQ(rpc_call_wait(cp, 30000, &rep), 0);
	ASSERT_EQ(rep.status, 0);
	rpc_reply_release(&rep);
	/* The COMMIT's reply came: every earlier WRITE is done, and on disk. */
	for (int i = 0; i < 40; i++) {
		uint64_t n = volume_blocks_touched(0, data[i].size());
		AlignedBuf buf(n * 4096);
		ASSERT_EQ(volume_read_blocks(vol, 1000 + i * 20, n, buf.get()), 0);
		EXPECT_EQ(0, memcmp(buf.get(), data[i].data(), data[i].size())) << "write " << i;
	}
	for (auto *p : pend) {
		struct rpc_reply r = {};
		ASSERT_EQ(rpc_call_wait(p, 30000, &r), 0);
		EXPECT_EQ(r.status, 0);
		rpc_reply_release(&r);
	}
}

TEST_F(PipelineTest, MalformedRequestsAmongPipelinedReadsGetErrors)
{
	ServerConf c;

	c.unit = 8192;
	start(c);
	write_model(clients[0], 7);
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ, {{kModelFirst, 256}});
	Cap wrong(&cap_key, kServerId + 1, RDFS_CAP_READ, {{kModelFirst, 256}});
	for (int i = 0; i < 10; i++) {
		/* outside the capability */
		IoResult bad = io_call(clients[0], RDFS_OP_READ, cap.get(), kModelFirst + 250, 10, 0,
				       40960);
		EXPECT_EQ(bad.status, -EACCES);
		EXPECT_TRUE(bad.data.empty());
		/* another server's capability */
		bad = io_call(clients[0], RDFS_OP_READ, wrong.get(), kModelFirst, 1, 0, 4096);
		EXPECT_EQ(bad.status, -EACCES);
		/* head + length past the blocks */
		bad = io_call(clients[0], RDFS_OP_READ, cap.get(), kModelFirst, 2, 100, 8192);
		EXPECT_EQ(bad.status, -EINVAL);
		/* past the volume */
		Cap far(&cap_key, kServerId, RDFS_CAP_READ, {{kVolBlocks - 1, 10}});
		bad = io_call(clients[0], RDFS_OP_READ, far.get(), kVolBlocks - 1, 10, 0, 40960);
		EXPECT_EQ(bad.status, -ERANGE);
		/* and a good one in between */
		IoResult r = io_call(clients[0], RDFS_OP_READ, cap.get(), kModelFirst + i, 20, 5,
				     20 * 4096 - 5);
		ASSERT_EQ(r.status, 0);
		EXPECT_TRUE(r.data == model_bytes(i, 5, 20 * 4096 - 5));
	}
	/* undecodable body */
	struct rpc_pending *p = nullptr;
	ASSERT_EQ(rpc_call_start(clients[0], RDFS_OP_READ, nullptr, nullptr, 0, &p), 0);
	struct rpc_reply rep = {};
	ASSERT_EQ(rpc_call_wait(p, 10000, &rep), 0);
	EXPECT_NE(rep.status, 0);
	rpc_reply_release(&rep);
}

TEST_F(PipelineTest, ListensOnEveryUrlOfACommaSeparatedList)
{
	struct ios_options o = {};
	o.vol = vol;
	o.listen = "tcp://127.0.0.1:0,tcp://127.0.0.1:0";
	o.fixed_server_id = kServerId;
	o.secret = &secret;
	o.cap_key = &cap_key;
	ASSERT_EQ(ios_server_create(&o, &server), 0);
	loop = std::thread([this]() { EXPECT_EQ(ios_server_run(server), 0); });
	ASSERT_NE(ios_server_url(server, 1), nullptr);
	EXPECT_STRNE(ios_server_url(server, 0), ios_server_url(server, 1));
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 16}});
	std::vector<uint8_t> d = pattern(8192, 42);
	for (int i = 0; i < 2; i++) {
		struct rpc_client *cl = nullptr;
		ASSERT_EQ(rpc_client_connect(ios_server_url(server, i), &secret, "client", 5000, &cl),
			  0);
		clients.push_back(cl);
	}
	IoResult w = io_call(clients[0], RDFS_OP_WRITE, cap.get(), 0, 2, 0, d.size(), d.data(),
			     d.size());
	ASSERT_EQ(w.status, 0);
	IoResult r = io_call(clients[1], RDFS_OP_READ, cap.get(), 0, 2, 0, d.size());
	ASSERT_EQ(r.status, 0);
	EXPECT_TRUE(r.data == d);
}

/* ------------------------------------------------------------ crash durability */

/*
 * The server in a child process, so it can be killed with SIGKILL. Writes its
 * port to @fd, then serves until killed.
 */
[[noreturn]] void serve_child(const std::string &path, int fd)
{
	struct auth_secret secret, cap_key;
	auth_secret_from_bytes(&secret, "cluster-secret-for-tests-0123456789", 35);
	auth_secret_from_bytes(&cap_key, "capability-key-for-tests-0123456789", 35);
	struct volume_open_opts vo = {};
	vo.path = path.c_str();
	struct volume *vol = nullptr;
	if (volume_open(&vo, &vol))
		_exit(1);
	struct ios_options o = {};
	o.vol = vol;
	o.listen = "tcp://127.0.0.1:0";
	o.fixed_server_id = kServerId;
	o.secret = &secret;
	o.cap_key = &cap_key;
	o.readahead_cache_mb = 16;
	struct ios_server *server = nullptr;
	if (ios_server_create(&o, &server))
		_exit(2);
	std::string url = ios_server_url(server, 0);
	if (write(fd, url.c_str(), url.size() + 1) != (ssize_t)url.size() + 1)
		_exit(3);
	close(fd);
	ios_server_run(server);
	_exit(0);
}

struct Child {
	pid_t pid = -1;
	std::string url;
};

Child spawn_server(const std::string &path)
{
	Child c;
	int fds[2];
	char buf[256] = {};

	EXPECT_EQ(pipe(fds), 0);
	fflush(nullptr);
	c.pid = fork();
	if (c.pid == 0) {
		close(fds[0]);
		serve_child(path, fds[1]);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	EXPECT_GT(n, 0);
	c.url = buf;
	return c;
}

void kill9(Child &c)
{
	int st = 0;
	kill(c.pid, SIGKILL);
	EXPECT_EQ(waitpid(c.pid, &st, 0), c.pid);
	EXPECT_TRUE(WIFSIGNALED(st));
}

TEST_F(PipelineTest, CommittedUnstableWritesSurviveKill9)
{
	volume_close(vol);	/* the child opens it */
	vol = nullptr;
	Child child = spawn_server(path);
	struct rpc_client *c = nullptr;
	ASSERT_EQ(rpc_client_connect(child.url.c_str(), &secret, "client", 5000, &c), 0);
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, kVolBlocks}});
	std::vector<std::vector<uint8_t>> data;
	uint64_t verifier = 0;
	for (int i = 0; i < 12; i++) {
		data.push_back(pattern(100000 + i * 4096, 900 + i));
		uint32_t head = (i * 333) % 4096;
		IoResult w = io_call(c, RDFS_OP_WRITE, cap.get(), 3000 + i * 40,
				     (uint32_t)volume_blocks_touched(head, data[i].size()), head,
				     data[i].size(), data[i].data(), data[i].size(), false);
		ASSERT_EQ(w.status, 0) << w.message;
		if (i == 0)
			verifier = w.verifier;
		EXPECT_EQ(w.verifier, verifier);
	}
	IoResult cm = io_call(c, RDFS_OP_IO_COMMIT, nullptr, 0, 0, 0, 0);
	ASSERT_EQ(cm.status, 0);
	EXPECT_EQ(cm.verifier, verifier);	/* same process: nothing was lost */
	kill9(child);
	rpc_client_close(c);

	/* Restart on the same volume: the committed bytes are there. */
	ASSERT_NO_FATAL_FAILURE(open_volume());
	start();
	Cap rcap(&cap_key, kServerId, RDFS_CAP_READ, {{0, kVolBlocks}});
	for (int i = 0; i < 12; i++) {
		uint32_t head = (i * 333) % 4096;
		IoResult r = io_call(clients[0], RDFS_OP_READ, rcap.get(), 3000 + i * 40,
				     (uint32_t)volume_blocks_touched(head, data[i].size()), head,
				     data[i].size());
		ASSERT_EQ(r.status, 0);
		EXPECT_TRUE(r.data == data[i]) << "committed write " << i;
	}
	IoResult cm2 = io_call(clients[0], RDFS_OP_IO_COMMIT, nullptr, 0, 0, 0, 0);
	ASSERT_EQ(cm2.status, 0);
	EXPECT_NE(cm2.verifier, verifier);
}

TEST_F(PipelineTest, UncommittedWriteThenRestartChangesTheVerifier)
{
	volume_close(vol);
	vol = nullptr;
	Child child = spawn_server(path);
	struct rpc_client *c = nullptr;
	ASSERT_EQ(rpc_client_connect(child.url.c_str(), &secret, "client", 5000, &c), 0);
	Cap cap(&cap_key, kServerId, RDFS_CAP_WRITE, {{0, kVolBlocks}});
	std::vector<uint8_t> d = pattern(8192, 5);
	IoResult w = io_call(c, RDFS_OP_WRITE, cap.get(), 10, 2, 0, d.size(), d.data(), d.size(),
			     false);
	ASSERT_EQ(w.status, 0);
	kill9(child);
	rpc_client_close(c);

	ASSERT_NO_FATAL_FAILURE(open_volume());
	start();
	/* The client's COMMIT after the restart tells it the write may be gone. */
	IoResult cm = io_call(clients[0], RDFS_OP_IO_COMMIT, nullptr, 0, 0, 0, 0);
	ASSERT_EQ(cm.status, 0);
	EXPECT_NE(cm.verifier, w.verifier);
	EXPECT_EQ(cm.verifier, ios_server_verifier(server));
}

} // namespace
