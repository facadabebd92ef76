// SPDX-License-Identifier: MIT
//
// client_io_test.cc - the client's read and write paths against a real cluster
// (a metaserver and two I/O servers as child processes): bytes for every size
// around block and chunk boundaries, holes, partial writes into fresh blocks,
// truncation, what other clients see before and after a commit, striping.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/falloc.h>

#include <set>
#include <thread>

#include "client_cluster.h"

extern "C" {
#include "rdfs_client.h"
}

using rdfs_test::pattern;

namespace {

const struct rdfs_cred root = {};

class ClientIo : public rdfs_test::ClusterSuite<ClientIo> {
public:
	static constexpr int servers = 2;
	static constexpr const char *volume_size = "512m";

protected:
	std::string unique(const char *base)
	{
		static int n;
		const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();

		return std::string(info->name()) + "-" + base + "-" + std::to_string(n++);
	}

	struct rdfs_file *create(struct rdfs_client *cl, const std::string &name,
				 int flags = O_RDWR | O_CREAT | O_EXCL)
	{
		struct rdfs_file *f = nullptr;
		struct stat st;

		EXPECT_EQ(rdfs_create(cl, &root, RDFS_ROOT_INO, name.c_str(), 0644, flags, &st, &f), 0);
		return f;
	}

	struct rdfs_file *open_by_name(struct rdfs_client *cl, const std::string &name,
				       int flags = O_RDWR)
	{
		struct rdfs_file *f = nullptr;
		struct stat st;

		EXPECT_EQ(rdfs_lookup(cl, &root, RDFS_ROOT_INO, name.c_str(), &st), 0);
		EXPECT_EQ(rdfs_open(cl, &root, st.st_ino, flags, &st, &f), 0);
		return f;
	}

	static std::vector<uint8_t> read_all(struct rdfs_file *f, size_t max, size_t step)
	{
		std::vector<uint8_t> out(max + 1);
		size_t got = 0;

		for (;;) {
			size_t want = std::min(step, out.size() - got);
			ssize_t n = rdfs_pread(f, out.data() + got, want, got);

			EXPECT_GE(n, 0) << strerror(-n);
			if (n <= 0)
				break;
			got += n;
			if (got == out.size())
				break;
		}
		out.resize(got);
		return out;
	}
};

TEST_F(ClientIo, BytesSurviveForEveryBoundarySize)
{
	const size_t sizes[] = { 0, 1, 4095, 4096, 4097, (1 << 20) - 1, 1 << 20, (1 << 20) + 1,
				 10 << 20 };

	for (size_t size : sizes) {
		std::string name = unique(std::to_string(size).c_str());
		auto data = pattern(size, (uint32_t)size);
		struct rdfs_file *f = create(c, name);

		ASSERT_NE(f, nullptr);
		ASSERT_EQ(rdfs_pwrite(f, data.data(), size, 0), (ssize_t)size);
		EXPECT_EQ(rdfs_file_size(f), size);
		ASSERT_EQ(rdfs_release(f), 0);

		// a second client sees exactly these bytes, read in odd-sized pieces
		struct rdfs_client *c2 = cluster->client();
		ASSERT_NE(c2, nullptr);
		struct rdfs_file *g = open_by_name(c2, name, O_RDONLY);
		ASSERT_NE(g, nullptr);
		EXPECT_EQ(read_all(g, size + 10000, 777777), data) << "size " << size;
		EXPECT_EQ(read_all(g, size + 10000, 16 << 20), data) << "size " << size;
		struct stat st;
		ASSERT_EQ(rdfs_getattr(c2, &root, rdfs_file_ino(g), &st), 0);
		EXPECT_EQ((size_t)st.st_size, size);
		EXPECT_EQ(st.st_blocks, (blkcnt_t)((size + 4095) / 4096 * 8));
		EXPECT_EQ(rdfs_release(g), 0);
		rdfs_client_close(c2);
	}
}

TEST_F(ClientIo, SmallUnalignedWritesAssembleAFile)
{
	auto data = pattern(300000, 7);
	struct rdfs_file *f = create(c, unique("pieces"));

	ASSERT_NE(f, nullptr);
	// pieces of 1..5000 bytes, each landing mid-block: the I/O server's RMW
	size_t off = 0, step = 1;
	while (off < data.size()) {
		size_t n = std::min(step, data.size() - off);

		ASSERT_EQ(rdfs_pwrite(f, data.data() + off, n, off), (ssize_t)n);
		off += n;
		step = step * 7 % 5001 + 1;
	}
	EXPECT_EQ(read_all(f, data.size() + 1, 65536), data);
	ASSERT_EQ(rdfs_flush(f), 0);
	EXPECT_EQ(read_all(f, data.size() + 1, 1 << 20), data);
	ASSERT_EQ(rdfs_release(f), 0);
}

TEST_F(ClientIo, HolesReadAsZeros)
{
	std::string name = unique("holes");
	struct rdfs_file *f = create(c, name);
	const uint8_t a = 0xaa, b = 0xbb;
	const size_t far = (5 << 20) + 3;

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, &a, 1, 0), 1);
	ASSERT_EQ(rdfs_pwrite(f, &b, 1, far), 1);
	ASSERT_EQ(rdfs_release(f), 0);

	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct rdfs_file *g = open_by_name(c2, name, O_RDONLY);
	ASSERT_NE(g, nullptr);
	std::vector<uint8_t> want(far + 1, 0);
	want[0] = a;
	want[far] = b;
	EXPECT_EQ(read_all(g, far + 100, 1 << 20), want);
	struct stat st;
	ASSERT_EQ(rdfs_getattr(c2, &root, rdfs_file_ino(g), &st), 0);
	// only the two written blocks are allocated
	EXPECT_EQ(st.st_blocks, 2 * 8);
	EXPECT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
}

TEST_F(ClientIo, PartialWriteIntoFreshBlockLeavesZeros)
{
	std::string name = unique("partial");
	struct rdfs_file *f = create(c, name);
	auto data = pattern(10, 3);

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), 10, 100), 10);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), 10, 4096 * 3 + 5), 10);
	ASSERT_EQ(rdfs_release(f), 0);

	// grow the file over the rest of the blocks: they must read as zeros
	struct stat in = {}, out;
	in.st_size = 4096 * 5;
	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct rdfs_file *g = open_by_name(c2, name, O_RDWR);
	ASSERT_NE(g, nullptr);
	ASSERT_EQ(rdfs_setattr(c2, &root, rdfs_file_ino(g), &in, RDFS_SET_SIZE, g, &out), 0);
	EXPECT_EQ(out.st_size, 4096 * 5);
	std::vector<uint8_t> want(4096 * 5, 0);
	memcpy(&want[100], data.data(), 10);
	memcpy(&want[4096 * 3 + 5], data.data(), 10);
	EXPECT_EQ(read_all(g, want.size() + 10, 5000), want);
	EXPECT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
}

TEST_F(ClientIo, TruncateDownThenUpReadsZeroTail)
{
	std::string name = unique("trunc");
	struct rdfs_file *f = create(c, name);
	auto data = pattern(3 * 4096 + 100, 11);
	struct stat in = {}, out;

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_flush(f), 0);
	in.st_size = 5000;
	ASSERT_EQ(rdfs_setattr(c, &root, rdfs_file_ino(f), &in, RDFS_SET_SIZE, f, &out), 0);
	EXPECT_EQ(out.st_size, 5000);
	EXPECT_EQ(rdfs_file_size(f), 5000u);
	in.st_size = 4 * 4096;
	ASSERT_EQ(rdfs_setattr(c, &root, rdfs_file_ino(f), &in, RDFS_SET_SIZE, f, &out), 0);

	std::vector<uint8_t> want(4 * 4096, 0);
	memcpy(want.data(), data.data(), 5000);
	EXPECT_EQ(read_all(f, want.size() + 10, 3000), want);
	ASSERT_EQ(rdfs_release(f), 0);

	// truncate by inode without an open file, seen by another client
	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct stat st;
	ASSERT_EQ(rdfs_lookup(c2, &root, RDFS_ROOT_INO, name.c_str(), &st), 0);
	in.st_size = 10;
	ASSERT_EQ(rdfs_setattr(c2, &root, st.st_ino, &in, RDFS_SET_SIZE, nullptr, &out), 0);
	in.st_size = 8192;
	ASSERT_EQ(rdfs_setattr(c2, &root, st.st_ino, &in, RDFS_SET_SIZE, nullptr, &out), 0);
	struct rdfs_file *g = open_by_name(c2, name, O_RDONLY);
	ASSERT_NE(g, nullptr);
	std::vector<uint8_t> want2(8192, 0);
	memcpy(want2.data(), data.data(), 10);
	EXPECT_EQ(read_all(g, 9000, 1 << 20), want2);
	EXPECT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
}

TEST_F(ClientIo, RecycledBlockReadsZerosAroundAPartialWrite)
{
	// Truncating frees blocks 1..; the next allocation of this file starts where
	// its kept extent ends, so it gets them back, still holding the old bytes on
	// the volume. A 10-byte write into one must show zeros around it, not them.
	std::string name = unique("recycle");
	struct rdfs_file *f = create(c, name);
	auto data = pattern(16 * 4096, 51);
	struct stat in = {}, out;

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_flush(f), 0);
	in.st_size = 4096;
	ASSERT_EQ(rdfs_setattr(c, &root, rdfs_file_ino(f), &in, RDFS_SET_SIZE, f, &out), 0);
	const char msg[] = "0123456789";
	ASSERT_EQ(rdfs_pwrite(f, msg, 10, 2 * 4096 + 100), 10);
	ASSERT_EQ(rdfs_release(f), 0);

	std::vector<uint8_t> want(2 * 4096 + 110, 0);
	memcpy(want.data(), data.data(), 4096);
	memcpy(&want[2 * 4096 + 100], msg, 10);
	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct rdfs_file *g = open_by_name(c2, name, O_RDONLY);
	ASSERT_NE(g, nullptr);
	EXPECT_EQ(read_all(g, want.size() + 10, 1 << 20), want);
	EXPECT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
}

TEST_F(ClientIo, TwoClientsPartialWritesOfOneFreshBlockBothLand)
{
	std::string name = unique("two");
	struct rdfs_file *f = create(c, name);
	ASSERT_NE(f, nullptr);
	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct rdfs_file *g = open_by_name(c2, name, O_RDWR);
	ASSERT_NE(g, nullptr);

	std::vector<uint8_t> a(100, 'A'), b(100, 'B'), cc(100, 'C'), d(100, 'D');
	ASSERT_EQ(rdfs_pwrite(f, a.data(), 100, 0), 100);
	ASSERT_EQ(rdfs_pwrite(g, b.data(), 100, 100), 100);
	ASSERT_EQ(rdfs_pwrite(f, cc.data(), 100, 4096 + 50), 100);
	ASSERT_EQ(rdfs_pwrite(g, d.data(), 100, 4096 + 1000), 100);
	ASSERT_EQ(rdfs_release(f), 0);
	ASSERT_EQ(rdfs_release(g), 0);

	std::vector<uint8_t> want(4096 + 1100, 0);
	memset(&want[0], 'A', 100);
	memset(&want[100], 'B', 100);
	memset(&want[4096 + 50], 'C', 100);
	memset(&want[4096 + 1000], 'D', 100);
	for (struct rdfs_client *cl : { c, c2 }) {
		struct rdfs_file *h = open_by_name(cl, name, O_RDONLY);
		ASSERT_NE(h, nullptr);
		EXPECT_EQ(read_all(h, want.size() + 10, 1 << 20), want);
		EXPECT_EQ(rdfs_release(h), 0);
	}
	rdfs_client_close(c2);
}

TEST_F(ClientIo, UncommittedWritesAreInvisibleToOthersUntilCommit)
{
	std::string name = unique("unwritten");
	struct rdfs_file *f = create(c, name);
	auto data = pattern(16384, 5);
	const uint8_t one = 0x5a;

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());

	// another client extends the file past our blocks: they are unwritten for it
	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct rdfs_file *g = open_by_name(c2, name, O_RDWR);
	ASSERT_NE(g, nullptr);
	EXPECT_EQ(rdfs_file_size(g), 0u);
	ASSERT_EQ(rdfs_pwrite(g, &one, 1, 20000), 1);
	std::vector<uint8_t> zeros(20001, 0);
	zeros[20000] = one;
	EXPECT_EQ(read_all(g, 30000, 1 << 20), zeros);

	// the extents exist, unwritten, before the commit
	struct rdfs_extent_info ext[16];
	int n = rdfs_layout(c, &root, rdfs_file_ino(f), 0, 16384, ext, 16);
	ASSERT_GT(n, 0);
	for (int i = 0; i < n && i < 16; i++)
		EXPECT_TRUE(ext[i].unwritten);

	uint64_t ino = rdfs_file_ino(f);
	ASSERT_EQ(rdfs_release(f), 0);
	ASSERT_EQ(rdfs_release(g), 0);
	n = rdfs_layout(c, &root, ino, 0, 16384, ext, 16);
	ASSERT_GT(n, 0);
	for (int i = 0; i < n && i < 16; i++)
		EXPECT_FALSE(ext[i].unwritten);

	// after both commits, a new open sees both writers' bytes
	g = open_by_name(c2, name, O_RDONLY);
	ASSERT_NE(g, nullptr);
	std::vector<uint8_t> want(20001, 0);
	memcpy(want.data(), data.data(), data.size());
	want[20000] = one;
	EXPECT_EQ(read_all(g, 30000, 1 << 20), want);
	EXPECT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
}

TEST_F(ClientIo, CloseToOpenBetweenTwoClients)
{
	std::string name = unique("cto");
	auto v1 = pattern(200000, 21), v2 = pattern(5000, 22);
	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);

	struct rdfs_file *f = create(c, name);
	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, v1.data(), v1.size(), 0), (ssize_t)v1.size());
	ASSERT_EQ(rdfs_release(f), 0);

	struct rdfs_file *g = open_by_name(c2, name, O_RDWR);
	ASSERT_NE(g, nullptr);
	EXPECT_EQ(read_all(g, 300000, 65536), v1);
	ASSERT_EQ(rdfs_pwrite(g, v2.data(), v2.size(), 70001), (ssize_t)v2.size());
	ASSERT_EQ(rdfs_pwrite(g, v2.data(), v2.size(), v1.size()), (ssize_t)v2.size());
	ASSERT_EQ(rdfs_release(g), 0);

	auto want = v1;
	memcpy(&want[70001], v2.data(), v2.size());
	want.insert(want.end(), v2.begin(), v2.end());
	f = open_by_name(c, name, O_RDONLY);
	ASSERT_NE(f, nullptr);
	EXPECT_EQ(rdfs_file_size(f), want.size());
	EXPECT_EQ(read_all(f, 400000, 1 << 20), want);
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c2);
}

TEST_F(ClientIo, AppendWritesAtTheEnd)
{
	std::string name = unique("append");
	struct rdfs_file *f = create(c, name, O_WRONLY | O_CREAT | O_EXCL | O_APPEND);
	auto data = pattern(9000, 8);
	off_t where = -1;

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite_at(f, data.data(), 3000, 0, &where), 3000);
	EXPECT_EQ(where, 0);
	ASSERT_EQ(rdfs_pwrite_at(f, data.data() + 3000, 6000, 0, &where), 6000);
	EXPECT_EQ(where, 3000);
	ASSERT_EQ(rdfs_release(f), 0);
	f = open_by_name(c, name, O_RDONLY);
	ASSERT_NE(f, nullptr);
	EXPECT_EQ(read_all(f, 10000, 4096), data);
	EXPECT_EQ(rdfs_pwrite(f, data.data(), 1, 0), -EBADF);
	ASSERT_EQ(rdfs_release(f), 0);
}

TEST_F(ClientIo, OpenWithTruncEmptiesTheFile)
{
	std::string name = unique("otrunc");
	struct rdfs_file *f = create(c, name);
	auto data = pattern(10000, 9);

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);
	f = open_by_name(c, name, O_RDWR | O_TRUNC);
	ASSERT_NE(f, nullptr);
	EXPECT_EQ(rdfs_file_size(f), 0u);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), 10, 5000), 10);
	std::vector<uint8_t> want(5010, 0);
	memcpy(&want[5000], data.data(), 10);
	EXPECT_EQ(read_all(f, 6000, 6000), want);
	ASSERT_EQ(rdfs_release(f), 0);
}

TEST_F(ClientIo, HundredMebibyteFileIsStripedOverBothServers)
{
	std::string name = unique("striped");
	struct rdfs_file *f = create(c, name);
	const size_t size = 100u << 20, step = 4u << 20;
	std::vector<uint8_t> buf(step);

	ASSERT_NE(f, nullptr);
	for (size_t off = 0; off < size; off += step) {
		for (size_t i = 0; i < step; i += 4096)
			memcpy(&buf[i], &off, sizeof(off)), buf[i + 8] = (uint8_t)(i >> 12);
		ASSERT_EQ(rdfs_pwrite(f, buf.data(), step, off), (ssize_t)step);
	}
	ASSERT_EQ(rdfs_fsync(f, 0), 0);

	std::vector<struct rdfs_extent_info> ext(100000);
	int n = rdfs_layout(c, &root, rdfs_file_ino(f), 0, size, ext.data(), (int)ext.size());
	ASSERT_GT(n, 0);
	std::set<uint32_t> servers;
	uint64_t covered = 0;
	for (int i = 0; i < n; i++) {
		servers.insert(ext[i].server_id);
		covered += ext[i].length;
		EXPECT_FALSE(ext[i].unwritten);
	}
	EXPECT_EQ(servers.size(), 2u);
	EXPECT_EQ(covered, size);

	// spot-check bytes through a second client
	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct rdfs_file *g = open_by_name(c2, name, O_RDONLY);
	ASSERT_NE(g, nullptr);
	for (size_t off = 0; off < size; off += 13u << 20) {
		size_t base = off / step * step;
		ASSERT_EQ(rdfs_pread(g, buf.data(), step, base), (ssize_t)step);
		size_t tag;
		memcpy(&tag, &buf[8192], sizeof(tag));
		EXPECT_EQ(tag, base);
		EXPECT_EQ(buf[8192 + 8], 2);
	}
	EXPECT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
	ASSERT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(rdfs_unlink(c, &root, RDFS_ROOT_INO, name.c_str()), 0);
}

TEST_F(ClientIo, ConcurrentPartialWritesToFreshBlocksAllLand)
{
	// 8 threads write interleaved 100-byte pieces: every block is partly
	// written by several threads at once, and no write may erase a
	// neighbour's bytes
	std::string name = unique("concurrent");
	struct rdfs_file *f = create(c, name);
	const size_t piece = 100, pieces = 800;
	auto data = pattern(piece * pieces, 31);

	ASSERT_NE(f, nullptr);
	std::vector<std::thread> threads;
	for (int t = 0; t < 8; t++)
		threads.emplace_back([&, t] {
			for (size_t i = t; i < pieces; i += 8)
				EXPECT_EQ(rdfs_pwrite(f, data.data() + i * piece, piece, i * piece),
					  (ssize_t)piece);
		});
	for (auto &th : threads)
		th.join();
	ASSERT_EQ(rdfs_release(f), 0);

	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct rdfs_file *g = open_by_name(c2, name, O_RDONLY);
	ASSERT_NE(g, nullptr);
	EXPECT_EQ(read_all(g, data.size() + 1, 1 << 20), data);
	EXPECT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
}

TEST_F(ClientIo, WriteBackWritesAreDurableAfterFsync)
{
	struct rdfs_client_opts o = cluster->opts();
	struct rdfs_client *wb = nullptr;
	std::string name = unique("writeback");
	auto data = pattern(3 << 20, 41);

	o.write_stable = 0;
	ASSERT_EQ(rdfs_client_open(&o, &wb), 0);
	struct rdfs_file *f = create(wb, name);
	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 12345), (ssize_t)data.size());
	ASSERT_EQ(rdfs_fsync(f, 0), 0);

	struct rdfs_file *g = open_by_name(c, name, O_RDONLY);
	ASSERT_NE(g, nullptr);
	std::vector<uint8_t> want(12345, 0);
	want.insert(want.end(), data.begin(), data.end());
	EXPECT_EQ(read_all(g, want.size() + 1, 1 << 20), want);
	EXPECT_EQ(rdfs_release(g), 0);
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(wb);
}

TEST_F(ClientIo, UnlinkedOpenFileKeepsWorking)
{
	std::string name = unique("unlinked");
	struct rdfs_file *f = create(c, name);
	auto data = pattern(50000, 51);
	struct stat st;

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_unlink(c, &root, RDFS_ROOT_INO, name.c_str()), 0);
	EXPECT_EQ(rdfs_lookup(c, &root, RDFS_ROOT_INO, name.c_str(), &st), -ENOENT);
	ASSERT_EQ(rdfs_flush(f), 0);
	EXPECT_EQ(read_all(f, data.size() + 1, 7000), data);
	ASSERT_EQ(rdfs_getattr(c, &root, rdfs_file_ino(f), &st), 0);
	EXPECT_EQ(st.st_nlink, 0u);
	EXPECT_EQ(rdfs_release(f), 0);
}

TEST_F(ClientIo, PendingSizeIsVisibleToThisClientOnly)
{
	std::string name = unique("pending");
	struct rdfs_file *f = create(c, name);
	auto data = pattern(7000, 61);
	uint64_t size = 1;
	struct stat st;

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_pending_size(c, rdfs_file_ino(f), &size), 0);
	EXPECT_EQ(size, 7000u);
	ASSERT_EQ(rdfs_getattr(c, &root, rdfs_file_ino(f), &st), 0);
	EXPECT_EQ(st.st_size, 7000);

	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	ASSERT_EQ(rdfs_getattr(c2, &root, rdfs_file_ino(f), &st), 0);
	EXPECT_EQ(st.st_size, 0);
	EXPECT_EQ(rdfs_pending_size(c2, rdfs_file_ino(f), &size), -ENOENT);
	ASSERT_EQ(rdfs_release(f), 0);
	ASSERT_EQ(rdfs_getattr(c2, &root, st.st_ino, &st), 0);
	EXPECT_EQ(st.st_size, 7000);
	rdfs_client_close(c2);
}

TEST_F(ClientIo, ZeroCopyReadMatchesCopyingRead)
{
	std::string name = unique("iov");
	struct rdfs_file *f = create(c, name);
	auto data = pattern(6 << 20, 71);

	ASSERT_NE(f, nullptr);
	// data, a hole, data written but not committed (ours), a partial block
	ASSERT_EQ(rdfs_pwrite(f, data.data(), 1 << 20, 0), 1 << 20);
	ASSERT_EQ(rdfs_flush(f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data() + (3 << 20), 2 << 20, 3 << 20), 2 << 20);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), 777, (6 << 20) - 1000), 777);

	std::mt19937 rng(5);
	for (int k = 0; k < 40; k++) {
		size_t off = rng() % (6 << 20), size = rng() % (9 << 20);
		if (k == 0)
			off = 0, size = 7 << 20;
		std::vector<uint8_t> copy(size);
		ssize_t n = rdfs_pread(f, copy.data(), size, off);
		ASSERT_GE(n, 0);
		copy.resize(n);
		if (k == 0) {
			std::vector<uint8_t> want((6 << 20) - 1000 + 777, 0);
			memcpy(&want[0], data.data(), 1 << 20);
			memcpy(&want[3 << 20], data.data() + (3 << 20), 2 << 20);
			memcpy(&want[(6 << 20) - 1000], data.data(), 777);
			ASSERT_EQ(copy, want);
		}

		struct rdfs_read_buf *rb = nullptr;
		const struct iovec *iov = nullptr;
		int niov = 0;
		ssize_t m = rdfs_pread_iov(f, size, off, &rb, &iov, &niov);
		ASSERT_EQ(m, n);
		std::vector<uint8_t> got;
		for (int i = 0; i < niov; i++)
			got.insert(got.end(), (uint8_t *)iov[i].iov_base,
				   (uint8_t *)iov[i].iov_base + iov[i].iov_len);
		EXPECT_EQ(got, copy) << "off " << off << " size " << size;
		rdfs_read_buf_free(rb);
	}
	ASSERT_EQ(rdfs_release(f), 0);
}

TEST_F(ClientIo, RandomOperationsMatchALocalModel)
{
	// four threads, each with its own file and a local copy of what it must hold:
	// random writes (aligned or not), reads, truncates and flushes
	std::vector<std::thread> threads;
	std::vector<std::string> names;
	std::vector<std::vector<uint8_t>> models(4);

	for (int t = 0; t < 4; t++)
		names.push_back(unique("model"));
	for (int t = 0; t < 4; t++)
		threads.emplace_back([&, t] {
			std::mt19937 rng(100 + t);
			std::vector<uint8_t> &model = models[t];
			struct rdfs_file *f = create(c, names[t]);
			const size_t span = 3 << 20;

			ASSERT_NE(f, nullptr);
			for (int op = 0; op < 150; op++) {
				unsigned kind = rng() % 10;
				size_t off = rng() % span, len = rng() % 300000 + 1;

				if (rng() % 3 == 0)
					off &= ~(size_t)4095;
				if (kind < 5) {
					auto d = pattern(len, rng());
					ASSERT_EQ(rdfs_pwrite(f, d.data(), len, off), (ssize_t)len);
					if (model.size() < off + len)
						model.resize(off + len, 0);
					memcpy(&model[off], d.data(), len);
				} else if (kind < 8) {
					std::vector<uint8_t> got(len);
					ssize_t n = rdfs_pread(f, got.data(), len, off);
					size_t want = off >= model.size() ? 0 :
						      std::min(len, model.size() - off);
					ASSERT_EQ(n, (ssize_t)want) << "op " << op;
					ASSERT_TRUE(std::equal(got.begin(), got.begin() + want,
							       model.begin() + off))
						<< "thread " << t << " op " << op << " off " << off;
				} else if (kind == 8) {
					struct stat in = {}, out;
					in.st_size = rng() % span;
					ASSERT_EQ(rdfs_setattr(c, &root, rdfs_file_ino(f), &in,
							       RDFS_SET_SIZE, f, &out), 0);
					model.resize(in.st_size, 0);
				} else {
					ASSERT_EQ(rdfs_flush(f), 0);
				}
			}
			ASSERT_EQ(rdfs_release(f), 0);
		});
	for (auto &th : threads)
		th.join();

	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	for (int t = 0; t < 4; t++) {
		struct rdfs_file *g = open_by_name(c2, names[t], O_RDONLY);
		ASSERT_NE(g, nullptr);
		EXPECT_EQ(read_all(g, 4 << 20, 1 << 20), models[t]) << "file " << t;
		EXPECT_EQ(rdfs_release(g), 0);
	}
	rdfs_client_close(c2);
}

} // namespace

// fallocate COLLAPSE_RANGE and INSERT_RANGE: the writer's own unwritten-back
// bytes move too, the bytes read back moved through the writer and through
// another client, and ext4's refusals are EINVAL (the kernel client's path;
// Linux's FUSE refuses these modes before rdfs-fuse sees them).
// copy_file_range decides once what of the source is data and what reads as
// zeros: here its cached layout still says data where another client punched
// a hole, the COPY is refused (fenced), and the fresh layout says hole. The
// destination must end up with the source as it is now (zeros), never with
// its own old bytes (fsx found that once, as "old data after a copied hole").
TEST_F(ClientIo, CopyOfARangeAnotherClientPunchedGivesZeros)
{
	std::string name = unique("copy-punched");
	struct rdfs_file *f = create(c, name);
	const size_t size = 256 << 10, src = 128 << 10, len = 64 << 10;
	std::vector<uint8_t> want = pattern(size, 11);

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, want.data(), size, 0), (ssize_t)size);
	ASSERT_EQ(rdfs_fsync(f, 0), 0);
	// this client caches the source's layout: data
	std::vector<uint8_t> buf(len);
	ASSERT_EQ(rdfs_pread(f, buf.data(), len, src), (ssize_t)len);

	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct rdfs_file *g = open_by_name(c2, name);
	ASSERT_NE(g, nullptr);
	ASSERT_EQ(rdfs_fallocate(g, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, src, len), 0);
	ASSERT_EQ(rdfs_release(g), 0);
	std::fill(want.begin() + src, want.begin() + src + len, 0);

	ASSERT_EQ(rdfs_copy_range(f, src, f, 0, len), (int64_t)len);
	std::fill(want.begin(), want.begin() + len, 0);
	EXPECT_EQ(read_all(f, size, 1 << 20), want) << "through the copying client";
	ASSERT_EQ(rdfs_release(f), 0);

	g = open_by_name(c2, name, O_RDONLY);
	ASSERT_NE(g, nullptr);
	EXPECT_EQ(read_all(g, size, 1 << 20), want) << "through another client";
	EXPECT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
}

TEST_F(ClientIo, CollapseAndInsertMoveTheBytes)
{
	std::string name = unique("shift");
	struct rdfs_file *f = create(c, name);
	const size_t size = (3 << 20) + 5000;
	std::vector<uint8_t> want = pattern(size, 7);

	ASSERT_NE(f, nullptr);
	ASSERT_EQ(rdfs_pwrite(f, want.data(), size, 0), (ssize_t)size);
	ASSERT_EQ(rdfs_fsync(f, 0), 0);
	// a write still behind (not committed) when the collapse comes
	std::vector<uint8_t> patch = pattern(3000, 9);
	ASSERT_EQ(rdfs_pwrite(f, patch.data(), patch.size(), (2 << 20) + 100), 3000);
	std::copy(patch.begin(), patch.end(), want.begin() + (2 << 20) + 100);

	const size_t coff = 512 << 10, clen = (1 << 20) + (8 << 10);
	ASSERT_EQ(rdfs_fallocate(f, FALLOC_FL_COLLAPSE_RANGE, coff, clen), 0);
	want.erase(want.begin() + coff, want.begin() + coff + clen);
	EXPECT_EQ(read_all(f, size, 1 << 20), want) << "collapsed";

	const size_t ioff = 100 << 10, ilen = 64 << 10;
	ASSERT_EQ(rdfs_fallocate(f, FALLOC_FL_INSERT_RANGE, ioff, ilen), 0);
	want.insert(want.begin() + ioff, ilen, 0);
	EXPECT_EQ(read_all(f, size, 1 << 20), want) << "inserted";

	const size_t now = want.size();
	EXPECT_EQ(rdfs_fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 100, 4096), -EINVAL);
	EXPECT_EQ(rdfs_fallocate(f, FALLOC_FL_INSERT_RANGE, 4096, 100), -EINVAL);
	EXPECT_EQ(rdfs_fallocate(f, FALLOC_FL_COLLAPSE_RANGE, now & ~4095ul, 4096), -EINVAL);
	EXPECT_EQ(rdfs_fallocate(f, FALLOC_FL_INSERT_RANGE, (now + 4095) & ~4095ul, 4096), -EINVAL);
	EXPECT_EQ(rdfs_fallocate(f, FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE, 0, 4096),
		  -EINVAL);
	ASSERT_EQ(rdfs_release(f), 0);

	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	struct rdfs_file *g = open_by_name(c2, name, O_RDONLY);
	ASSERT_NE(g, nullptr);
	EXPECT_EQ(read_all(g, size + 100, 1 << 20), want) << "through another client";
	struct stat st;
	ASSERT_EQ(rdfs_getattr(c2, &root, rdfs_file_ino(g), &st), 0);
	EXPECT_EQ((size_t)st.st_size, want.size());
	EXPECT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
}
