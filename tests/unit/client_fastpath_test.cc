// SPDX-License-Identifier: MIT
//
// client_fastpath_test.cc - the client's fast data path against a real cluster:
// read-ahead (sequential, random, backward, across chunk and server boundaries,
// at EOF, and never stale after our own writes), write-behind (small writes
// gathered into chunk-sized WRITEs, read back byte for byte by another client,
// failures reported at fsync/close), and READ replies in many parts (I/O
// servers sending 4 KiB units) through both rdfs_pread() and rdfs_pread_iov().
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>

#include <mutex>
#include <random>
#include <set>

#include "client_cluster.h"

extern "C" {
#include "rdfs_client.h"
}

using rdfs_test::pattern;

namespace {

const struct rdfs_cred root = {};
constexpr size_t MiB = 1 << 20;

std::string unique(const char *base)
{
	static int n;
	const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();

	return std::string(info->name()) + "-" + base + "-" + std::to_string(n++);
}

struct rdfs_client *client_with(rdfs_test::Cluster *cl, int readahead_kb, int write_behind_kb)
{
	struct rdfs_client_opts o = cl->opts();
	struct rdfs_client *c = nullptr;

	o.readahead_kb = readahead_kb;
	o.write_behind_kb = write_behind_kb;
	for (int i = 0; i < 100 && rdfs_client_open(&o, &c) != 0; i++)
		usleep(100000);
	return c;
}

struct rdfs_file *create(struct rdfs_client *c, const std::string &name)
{
	struct rdfs_file *f = nullptr;
	struct stat st;

	EXPECT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, name.c_str(), 0644,
			      O_RDWR | O_CREAT | O_EXCL, &st, &f), 0);
	return f;
}

struct rdfs_file *open_name(struct rdfs_client *c, const std::string &name, int flags = O_RDWR)
{
	struct rdfs_file *f = nullptr;
	struct stat st;

	EXPECT_EQ(rdfs_lookup(c, &root, RDFS_ROOT_INO, name.c_str(), &st), 0);
	EXPECT_EQ(rdfs_open(c, &root, st.st_ino, flags, &st, &f), 0);
	return f;
}

// Write @data with one synchronous client (no write-behind), committed.
void put_file(struct rdfs_client *c, const std::string &name, const std::vector<uint8_t> &data)
{
	struct rdfs_file *f = create(c, name);

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);
}

// Read [off, off + size) and compare with @want (clamped to its size).
void expect_read(struct rdfs_file *f, const std::vector<uint8_t> &want, uint64_t off, size_t size)
{
	std::vector<uint8_t> buf(size);
	size_t expect = off >= want.size() ? 0 : std::min(size, want.size() - (size_t)off);
	ssize_t n = rdfs_pread(f, buf.data(), size, off);

	ASSERT_EQ(n, (ssize_t)expect) << "off " << off << " size " << size;
	ASSERT_TRUE(std::equal(buf.begin(), buf.begin() + expect, want.begin() + off))
		<< "wrong bytes at off " << off << " size " << size;
}

class ClientFastpath : public rdfs_test::ClusterSuite<ClientFastpath> {
public:
	static constexpr int servers = 2;
	static constexpr const char *volume_size = "512m";
};

TEST_F(ClientFastpath, SequentialReadIsServedFromReadAheadAcrossChunksAndServers)
{
	struct rdfs_client *r = client_with(cluster, 4096, 0);
	auto data = pattern(9 * MiB + 12345, 1);
	std::string name = unique("seq");
	struct rdfs_client_stats before, after;

	ASSERT_NE(r, nullptr);
	put_file(c, name, data);
	struct rdfs_file *f = open_name(r, name, O_RDONLY);
	rdfs_client_stats(r, &before);
	// an odd step, so reads straddle block, chunk and server boundaries
	for (uint64_t off = 0; off <= data.size(); off += 300000)
		expect_read(f, data, off, 300000);
	expect_read(f, data, data.size(), 4096);	// at EOF: 0
	rdfs_client_stats(r, &after);
	EXPECT_GT(after.readahead_bytes, before.readahead_bytes);
	EXPECT_GT(after.readahead_hit_bytes, before.readahead_hit_bytes + data.size() / 2);
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_close(r);
}

// What rdfs-fuse's metrics show of the core (rdfs_client_stats): every request
// to the metaserver by opcode, LAYOUT among them once per fetch, and the layout
// cache missed by a new file's first write, then hit by reads of what it holds.
TEST_F(ClientFastpath, StatsCountMetaserverRequestsAndLayoutCacheHits)
{
	struct rdfs_client *r = client_with(cluster, 0, 0);
	auto data = pattern(3 * MiB + 5, 7);
	struct rdfs_client_stats before, mid, after;
	uint64_t sent = 0;

	ASSERT_NE(r, nullptr);
	rdfs_client_stats(r, &before);
	struct rdfs_file *f = create(r, unique("stats"));
	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	rdfs_client_stats(r, &mid);
	EXPECT_EQ(mid.ms_requests[RDFS_OP_MKNOD] - before.ms_requests[RDFS_OP_MKNOD], 1u);
	EXPECT_GE(mid.layout_misses - before.layout_misses, 1u);
	EXPECT_EQ(mid.ms_requests[RDFS_OP_LAYOUT] - before.ms_requests[RDFS_OP_LAYOUT],
		  mid.layout_fetches - before.layout_fetches);
	for (int i = 0; i < 3; i++)
		expect_read(f, data, 0, data.size());
	rdfs_client_stats(r, &after);
	EXPECT_GE(after.layout_hits - mid.layout_hits, 3u);
	EXPECT_EQ(after.layout_misses, mid.layout_misses);
	EXPECT_EQ(after.ms_requests[RDFS_OP_LAYOUT], mid.ms_requests[RDFS_OP_LAYOUT]);
	EXPECT_EQ(after.cap_refused_fenced + after.cap_refused_expired + after.cap_refused_other,
		  0u);
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_stats(r, &after);
	for (int op = 0; op < RDFS_OP_MAX; op++)
		sent += after.ms_requests[op] - before.ms_requests[op];
	EXPECT_GE(sent, 3u);	// MKNOD, LAYOUT, RELEASE at least
	EXPECT_GE(after.ms_requests[RDFS_OP_RELEASE] - before.ms_requests[RDFS_OP_RELEASE], 1u);
	rdfs_client_close(r);
}

TEST_F(ClientFastpath, RandomAndBackwardReadsGetTheRightBytes)
{
	struct rdfs_client *r = client_with(cluster, 2048, 0);
	auto data = pattern(6 * MiB + 777, 2);
	std::string name = unique("rand");
	std::mt19937 rng(7);

	ASSERT_NE(r, nullptr);
	put_file(c, name, data);
	struct rdfs_file *f = open_name(r, name, O_RDONLY);
	// sequential for a while (read-ahead builds up), then jumps and backwards
	for (uint64_t off = 0; off < 3 * MiB; off += 128 * 1024)
		expect_read(f, data, off, 128 * 1024);
	for (int i = 0; i < 60; i++) {
		uint64_t off = rng() % (data.size() + 1000);
		size_t size = 1 + rng() % (2 * MiB);

		expect_read(f, data, off, size);
	}
	for (int64_t off = data.size() - 100000; off >= 0; off -= 100000)
		expect_read(f, data, off, 100000);
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_close(r);
}

TEST_F(ClientFastpath, ReadAheadNeverServesBytesOlderThanOurOwnWrite)
{
	struct rdfs_client *r = client_with(cluster, 8192, 0);
	auto data = pattern(8 * MiB, 3);
	std::string name = unique("stale");

	ASSERT_NE(r, nullptr);
	put_file(c, name, data);
	struct rdfs_file *f = open_name(r, name, O_RDWR);
	struct rdfs_file *g = open_name(r, name, O_RDWR);
	// read-ahead now holds the rest of the file
	for (uint64_t off = 0; off < 2 * MiB; off += 256 * 1024)
		expect_read(f, data, off, 256 * 1024);
	// overwrite ahead of the reader, through the same handle and another one
	auto news = pattern(100000, 33);
	ASSERT_EQ(rdfs_pwrite(f, news.data(), news.size(), 3 * MiB - 5000), (ssize_t)news.size());
	std::copy(news.begin(), news.end(), data.begin() + 3 * MiB - 5000);
	ASSERT_EQ(rdfs_pwrite(g, news.data(), 4096, 5 * MiB + 1), 4096);
	std::copy(news.begin(), news.begin() + 4096, data.begin() + 5 * MiB + 1);
	for (uint64_t off = 2 * MiB; off < data.size(); off += 256 * 1024)
		expect_read(f, data, off, 256 * 1024);
	// a truncate drops what was read ahead past the new end
	for (uint64_t off = 0; off < 2 * MiB; off += 256 * 1024)
		expect_read(g, data, off, 256 * 1024);
	struct stat st = {};
	st.st_size = 3 * MiB;
	ASSERT_EQ(rdfs_setattr(r, &root, rdfs_file_ino(g), &st, RDFS_SET_SIZE, g, &st), 0);
	data.resize(3 * MiB);
	for (uint64_t off = 2 * MiB; off < 4 * MiB; off += 256 * 1024)
		expect_read(g, data, off, 256 * 1024);
	ASSERT_EQ(rdfs_release(f), 0);
	ASSERT_EQ(rdfs_release(g), 0);
	rdfs_client_close(r);
}

TEST_F(ClientFastpath, ReadAheadOffReadsTheSame)
{
	struct rdfs_client *r = client_with(cluster, -1, 0);
	auto data = pattern(3 * MiB + 3, 4);
	std::string name = unique("off");
	struct rdfs_client_stats st;

	ASSERT_NE(r, nullptr);
	put_file(c, name, data);
	struct rdfs_file *f = open_name(r, name, O_RDONLY);
	for (uint64_t off = 0; off <= data.size(); off += 65536)
		expect_read(f, data, off, 65536);
	rdfs_client_stats(r, &st);
	EXPECT_EQ(st.readahead_bytes, 0u);
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_close(r);
}

TEST_F(ClientFastpath, SmallSequentialWritesAreGatheredIntoChunkSizedWrites)
{
	struct rdfs_client *w = client_with(cluster, 0, 16384);
	auto data = pattern(5 * MiB + 4321, 5);
	std::string name = unique("gather");
	struct rdfs_client_stats st;

	ASSERT_NE(w, nullptr);
	struct rdfs_file *f = create(w, name);
	size_t writes = 0;
	for (size_t off = 0; off < data.size(); off += 3000, writes++) {
		size_t n = std::min<size_t>(3000, data.size() - off);

		ASSERT_EQ(rdfs_pwrite(f, data.data() + off, n, off), (ssize_t)n);
	}
	// this client sees its own size and bytes before the close
	EXPECT_EQ(rdfs_file_size(f), data.size());
	expect_read(f, data, MiB - 10, 20);
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_stats(w, &st);
	EXPECT_EQ(st.write_behind_bytes, data.size());
	EXPECT_LE(st.write_behind_writes, 16u) << "from " << writes << " writes";

	// another client reads it back byte for byte
	struct rdfs_file *g = open_name(c, name, O_RDONLY);
	EXPECT_EQ(rdfs_file_size(g), data.size());
	std::vector<uint8_t> back(data.size());
	ASSERT_EQ(rdfs_pread(g, back.data(), back.size(), 0), (ssize_t)back.size());
	EXPECT_TRUE(back == data);
	ASSERT_EQ(rdfs_release(g), 0);
	rdfs_client_close(w);
}

// Buffers lent to rdfs_pwrite_lend(): each must come back exactly once.
struct LentBuffers {
	std::mutex lock;
	std::set<void *> out;
	int released = 0;
	int twice = 0;

	static void release(void *arg);
};

LentBuffers *lent_buffers;

void LentBuffers::release(void *arg)
{
	std::lock_guard<std::mutex> g(lent_buffers->lock);

	if (lent_buffers->out.erase(arg) == 0)
		lent_buffers->twice++;
	lent_buffers->released++;
	free(arg);
}

TEST_F(ClientFastpath, LentWholeChunksAreSentUncopiedAndReleasedOnce)
{
	struct rdfs_client *w = client_with(cluster, 0, 4096);
	std::string name = unique("lend");
	std::vector<uint8_t> model(12 * MiB, 0);
	LentBuffers lb;
	struct rdfs_client_stats st;
	size_t lent = 0;

	lent_buffers = &lb;
	ASSERT_NE(w, nullptr);
	struct rdfs_file *f = create(w, name);
	// (offset, size, kept?): whole chunks are kept; a part of one, a chunk's
	// worth across a boundary, or a chunk continuing gathered bytes is not
	const struct { uint64_t off; size_t size; bool kept; } writes[] = {
		{ 0, MiB, true }, { MiB, MiB, true }, { 2 * MiB, 1000, false },
		{ 2 * MiB + 1000, MiB - 1000, false }, { 3 * MiB + 7, MiB, false },
		{ 5 * MiB, MiB, true }, { 4 * MiB, MiB, true }, { 6 * MiB, 4096, false },
		{ 8 * MiB, MiB, true }, { 9 * MiB, MiB, true }, { 9 * MiB, MiB, true },
	};
	int seed = 300;
	for (const auto &wr : writes) {
		auto p = pattern(wr.size, seed++);
		void *buf = malloc(wr.size);
		struct rdfs_lend lend = { LentBuffers::release, buf, 0 };

		ASSERT_NE(buf, nullptr);
		memcpy(buf, p.data(), wr.size);
		{
			std::lock_guard<std::mutex> g(lb.lock);
			lb.out.insert(buf);
		}
		ASSERT_EQ(rdfs_pwrite_lend(f, buf, wr.size, wr.off, &lend), (ssize_t)wr.size);
		EXPECT_EQ(lend.kept, wr.kept) << "write at " << wr.off << " of " << wr.size;
		if (lend.kept) {
			lent += wr.size;
		} else {
			std::lock_guard<std::mutex> g(lb.lock);
			lb.out.erase(buf);
			free(buf);
		}
		std::copy(p.begin(), p.end(), model.begin() + wr.off);
	}
	model.resize(10 * MiB);
	// this client reads its own bytes before the close, lent ones included
	expect_read(f, model, 0, model.size());
	ASSERT_EQ(rdfs_release(f), 0);
	{
		std::lock_guard<std::mutex> g(lb.lock);
		EXPECT_TRUE(lb.out.empty()) << lb.out.size() << " lent buffers never released";
		EXPECT_EQ(lb.twice, 0);
		EXPECT_EQ(lb.released, 7);
	}
	rdfs_client_stats(w, &st);
	EXPECT_EQ(st.write_behind_lent_bytes, lent);

	struct rdfs_file *g = open_name(c, name, O_RDONLY);
	EXPECT_EQ(rdfs_file_size(g), model.size());
	std::vector<uint8_t> back(model.size());
	ASSERT_EQ(rdfs_pread(g, back.data(), back.size(), 0), (ssize_t)back.size());
	EXPECT_TRUE(back == model);
	ASSERT_EQ(rdfs_release(g), 0);
	rdfs_client_close(w);
	lent_buffers = nullptr;
}

TEST_F(ClientFastpath, WriteBehindWithJumpsOverwritesAndAppends)
{
	struct rdfs_client *w = client_with(cluster, 0, 4096);
	std::string name = unique("jumps");
	std::vector<uint8_t> model(12 * MiB, 0);
	std::mt19937 rng(11);

	ASSERT_NE(w, nullptr);
	struct rdfs_file *f = create(w, name);
	uint64_t end = 0;
	for (int i = 0; i < 200; i++) {
		uint64_t off = i % 3 ? end : rng() % (10 * MiB);
		size_t n = 1 + rng() % 300000;
		auto p = pattern(n, 100 + i);

		if (off + n > model.size())
			n = model.size() - off;
		ASSERT_EQ(rdfs_pwrite(f, p.data(), n, off), (ssize_t)n);
		std::copy(p.begin(), p.begin() + n, model.begin() + off);
		end = std::max(end, off + n);
		if (i % 50 == 49)
			expect_read(f, std::vector<uint8_t>(model.begin(), model.begin() + end),
				    rng() % end, 200000);
	}
	model.resize(end);
	ASSERT_EQ(rdfs_fsync(f, 0), 0);
	ASSERT_EQ(rdfs_release(f), 0);

	// O_APPEND through write-behind lands at the end, in order
	struct rdfs_file *a = open_name(w, name, O_WRONLY | O_APPEND);
	for (int i = 0; i < 20; i++) {
		auto p = pattern(5000 + i, 300 + i);

		ASSERT_EQ(rdfs_pwrite(a, p.data(), p.size(), 0), (ssize_t)p.size());
		model.insert(model.end(), p.begin(), p.end());
	}
	ASSERT_EQ(rdfs_release(a), 0);

	struct rdfs_file *g = open_name(c, name, O_RDONLY);
	std::vector<uint8_t> back(model.size() + 10);
	ASSERT_EQ(rdfs_pread(g, back.data(), back.size(), 0), (ssize_t)model.size());
	back.resize(model.size());
	auto diff = std::mismatch(back.begin(), back.end(), model.begin());
	EXPECT_TRUE(diff.first == back.end())
		<< "first difference at " << (diff.first - back.begin()) << " of " << model.size();
	ASSERT_EQ(rdfs_release(g), 0);
	rdfs_client_close(w);
}

// A cluster of its own: the test kills an I/O server.
TEST(ClientFastpathFail, IoServerDeathMidStreamIsReportedAtFsyncAndClose)
{
	rdfs_test::Cluster cl;

	ASSERT_TRUE(cl.start(2)) << cl.dir;
	struct rdfs_client *w = client_with(&cl, 0, 8192);
	ASSERT_NE(w, nullptr);
	std::string name = "victim";
	struct rdfs_file *f = create(w, name);
	auto data = pattern(MiB, 6);

	for (int i = 0; i < 4; i++)
		ASSERT_EQ(rdfs_pwrite(f, data.data(), MiB, (uint64_t)i * MiB), (ssize_t)MiB);
	cl.kill_ioserver(0);
	/*
	 * The stream starts over from 0: chunks 0-3 alternate between the two
	 * servers and already hold blocks, so the WRITEs of those on the dead
	 * one must fail. (Chunks allocated after the metaserver saw the death go
	 * to the live server and may all succeed: then nothing is lost.)
	 */
	int write_errors = 0;
	for (int i = 0; i < 24; i++)
		if (rdfs_pwrite(f, data.data(), MiB, (uint64_t)i * MiB) < 0)
			write_errors++;
	EXPECT_EQ(rdfs_fsync(f, 0), -EIO) << write_errors << " writes failed before";
	// the file stays usable: a write that fails is reported again
	int rel = rdfs_release(f);
	EXPECT_TRUE(rel == 0 || rel == -EIO) << rel;
	rdfs_client_close(w);
}

TEST(ClientFastpathFail, IoServerDeathBeforeCloseIsReportedByClose)
{
	rdfs_test::Cluster cl;

	ASSERT_TRUE(cl.start(2)) << cl.dir;
	struct rdfs_client *w = client_with(&cl, 0, 65536);
	ASSERT_NE(w, nullptr);
	struct rdfs_file *f = create(w, "victim2");
	auto data = pattern(3000, 7);

	// small writes stay gathered in the client until the close sends them
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_fsync(f, 0), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), data.size()), (ssize_t)data.size());
	cl.kill_ioserver(0);
	cl.kill_ioserver(1);
	EXPECT_EQ(rdfs_release(f), -EIO);
	rdfs_client_close(w);
}

// I/O servers that send every READ in 4 KiB units: replies in many parts.
class ClientMultipart : public ::testing::Test {
protected:
	static inline rdfs_test::Cluster *cluster;

	static void SetUpTestSuite()
	{
		cluster = new rdfs_test::Cluster();
		cluster->ios_args = { "--send-mode", "overlap", "--unit-size", "4k",
				      "--pipeline-depth", "3" };
		ASSERT_TRUE(cluster->start(2)) << cluster->dir;
	}
	static void TearDownTestSuite()
	{
		delete cluster;
		cluster = nullptr;
	}
};

TEST_F(ClientMultipart, ReadsInManyPartsThroughBothReadCalls)
{
	struct rdfs_client *c = client_with(cluster, 2048, 0);
	ASSERT_NE(c, nullptr);
	auto data = pattern(5 * MiB + 999, 8);
	std::string name = unique("parts");

	put_file(c, name, data);
	struct rdfs_file *f = open_name(c, name, O_RDONLY);
	for (uint64_t off = 0; off <= data.size(); off += 700001)
		expect_read(f, data, off, 700001);
	const struct { uint64_t off; size_t size; } cases[] = {
		{ 0, 4 * MiB }, { 123, MiB }, { MiB - 1, 2 }, { 2 * MiB + 4095, 3 * MiB },
		{ data.size() - 10, 4096 },
	};
	for (const auto &k : cases) {
		struct rdfs_read_buf *rb = nullptr;
		const struct iovec *iov = nullptr;
		int niov = 0;
		size_t want = std::min(k.size, data.size() - (size_t)k.off);
		ssize_t n = rdfs_pread_iov(f, k.size, k.off, &rb, &iov, &niov);

		ASSERT_EQ(n, (ssize_t)want);
		std::vector<uint8_t> got;
		for (int i = 0; i < niov; i++)
			got.insert(got.end(), (uint8_t *)iov[i].iov_base,
				   (uint8_t *)iov[i].iov_base + iov[i].iov_len);
		EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin() + k.off) &&
			    got.size() == want) << "off " << k.off << " size " << k.size;
		if (k.size >= MiB) {
			EXPECT_GT(niov, 2) << "a reply in several parts";
		}
		rdfs_read_buf_free(rb);
	}
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c);
}

} // namespace
