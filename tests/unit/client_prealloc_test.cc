// SPDX-License-Identifier: MIT
//
// client_prealloc_test.cc - speculative preallocation against a real cluster:
// a streaming writer asks the metaserver for blocks once per growing window,
// not once per write; writes inside the file and sparse writes allocate only
// what they touch; and once the last handle is released nothing is left past
// the end of the file and the servers' free blocks are what the file needs.
#include <gtest/gtest.h>

#include <fcntl.h>

#include "client_cluster.h"

extern "C" {
#include "rdfs_client.h"
}

using rdfs_test::Cluster;
using rdfs_test::pattern;

namespace {

const struct rdfs_cred root = {};
const size_t MiB = 1 << 20;

class ClientPrealloc : public rdfs_test::ClusterSuite<ClientPrealloc> {
public:
	static constexpr int servers = 2;
	static constexpr const char *volume_size = "512m";

protected:
	struct rdfs_file *create(const char *name)
	{
		struct rdfs_file *f = nullptr;
		struct stat st;

		EXPECT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, name, 0644,
				      O_RDWR | O_CREAT | O_EXCL, &st, &f), 0);
		return f;
	}

	uint64_t free_blocks()
	{
		struct rdfs_server_info s[8];
		int n = rdfs_server_list(c, s, 8);
		uint64_t sum = 0;

		EXPECT_GT(n, 0);
		for (int i = 0; i < n && i < 8; i++)
			sum += s[i].free_blocks;
		return sum;
	}

	uint64_t layout_allocs()
	{
		struct rdfs_client_stats st;

		rdfs_client_stats(c, &st);
		return st.layout_allocs;
	}

	/* Blocks the metaserver names for @ino, and the end of the last extent. */
	uint64_t extent_blocks(uint64_t ino, uint64_t *end, uint64_t *unwritten)
	{
		static struct rdfs_extent_info e[4096];
		int n = rdfs_layout(c, &root, ino, 0, 1ull << 30, e, 4096);
		uint64_t sum = 0;

		EXPECT_GE(n, 0);
		EXPECT_LE(n, 4096);
		*end = *unwritten = 0;
		for (int i = 0; i < n && i < 4096; i++) {
			sum += e[i].length / 4096;
			if (e[i].unwritten)
				*unwritten += e[i].length / 4096;
			if (e[i].file_offset + e[i].length > *end)
				*end = e[i].file_offset + e[i].length;
		}
		return sum;
	}

	blkcnt_t st_blocks(uint64_t ino)
	{
		struct stat st;

		EXPECT_EQ(rdfs_getattr(c, &root, ino, &st), 0);
		return st.st_blocks;
	}
};

TEST_F(ClientPrealloc, StreamingWriteAllocatesAheadAndReleaseTrims)
{
	const size_t total = 64 * MiB;
	auto data = pattern(total, 64);
	uint64_t free0 = free_blocks(), allocs0 = layout_allocs(), end, unw;
	struct rdfs_file *f = create("stream");

	ASSERT_NE(f, nullptr);
	uint64_t ino = rdfs_file_ino(f);
	for (size_t off = 0; off < total; off += MiB)
		ASSERT_EQ(rdfs_pwrite(f, data.data() + off, MiB, off), (ssize_t)MiB);
	uint64_t allocs = layout_allocs() - allocs0;
	// one per 1 MiB write without preallocation; 4, 8, 16, 32, 64 MiB windows with it
	EXPECT_LE(allocs, 8u);
	EXPECT_GE(allocs, 2u);
	ASSERT_EQ(rdfs_fsync(f, 0), 0);
	// while open, the blocks past EOF are the file's and counted
	EXPECT_GT(extent_blocks(ino, &end, &unw), total / 4096);
	EXPECT_GT(end, total);
	EXPECT_GT(unw, 0u);
	EXPECT_GT(st_blocks(ino), (blkcnt_t)(total / 512));
	ASSERT_EQ(rdfs_release(f), 0);

	EXPECT_EQ(extent_blocks(ino, &end, &unw), total / 4096);
	EXPECT_EQ(end, total) << "no extent may remain past EOF";
	EXPECT_EQ(unw, 0u);
	EXPECT_EQ(st_blocks(ino), (blkcnt_t)(total / 512));
	EXPECT_EQ(free0 - free_blocks(), total / 4096);

	// the bytes are all there
	struct rdfs_file *g = nullptr;
	struct stat st;
	std::vector<uint8_t> back(total);
	ASSERT_EQ(rdfs_open(c, &root, ino, O_RDONLY, &st, &g), 0);
	EXPECT_EQ(st.st_size, (off_t)total);
	for (size_t off = 0; off < total; off += 4 * MiB)
		ASSERT_EQ(rdfs_pread(g, back.data() + off, 4 * MiB, off), (ssize_t)(4 * MiB));
	EXPECT_TRUE(back == data);
	ASSERT_EQ(rdfs_release(g), 0);
}

TEST_F(ClientPrealloc, PartialLastBlockKeepsItsBlockOnly)
{
	const size_t size = 5 * MiB + 100;
	auto data = pattern(size, 5);
	uint64_t free0 = free_blocks(), end, unw;
	struct rdfs_file *f = create("partial");

	ASSERT_NE(f, nullptr);
	uint64_t ino = rdfs_file_ino(f);
	for (size_t off = 0; off < size; off += MiB) {
		size_t n = std::min(MiB, size - off);

		ASSERT_EQ(rdfs_pwrite(f, data.data() + off, n, off), (ssize_t)n);
	}
	ASSERT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(extent_blocks(ino, &end, &unw), (size + 4095) / 4096);
	EXPECT_EQ(end, (size + 4095) / 4096 * 4096);
	EXPECT_EQ(free0 - free_blocks(), (size + 4095) / 4096);
}

TEST_F(ClientPrealloc, WritesInsideTheFileAllocateExactly)
{
	struct rdfs_file *f = create("inside");
	struct stat in = {}, out;
	auto data = pattern(MiB, 7);

	ASSERT_NE(f, nullptr);
	uint64_t ino = rdfs_file_ino(f);
	in.st_size = 32 * MiB;
	ASSERT_EQ(rdfs_setattr(c, &root, ino, &in, RDFS_SET_SIZE, f, &out), 0);
	uint64_t allocs0 = layout_allocs();
	ASSERT_EQ(rdfs_pwrite(f, data.data(), MiB, 4 * MiB), (ssize_t)MiB);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), MiB, 5 * MiB), (ssize_t)MiB);
	EXPECT_EQ(layout_allocs() - allocs0, 2u);
	EXPECT_EQ(st_blocks(ino), (blkcnt_t)(2 * MiB / 512)) << "only the touched blocks";
	ASSERT_EQ(rdfs_release(f), 0);
}

TEST_F(ClientPrealloc, SparseWritesStaySparse)
{
	struct rdfs_file *f = create("sparse");
	const uint8_t a = 1;
	uint64_t end, unw;

	ASSERT_NE(f, nullptr);
	uint64_t ino = rdfs_file_ino(f);
	// each write jumps: none continues a stream, none preallocates
	for (uint64_t off = 0; off < 100 * MiB; off += 10 * MiB)
		ASSERT_EQ(rdfs_pwrite(f, &a, 1, off), 1);
	EXPECT_EQ(st_blocks(ino), 10 * 8);
	ASSERT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(extent_blocks(ino, &end, &unw), 10u);
}

TEST_F(ClientPrealloc, JumpAfterAStreamLeavesNothingPastEof)
{
	struct rdfs_file *f = create("jump");
	auto data = pattern(8 * MiB, 9);
	uint64_t end, unw;

	ASSERT_NE(f, nullptr);
	uint64_t ino = rdfs_file_ino(f);
	for (size_t off = 0; off < 8 * MiB; off += MiB)
		ASSERT_EQ(rdfs_pwrite(f, data.data() + off, MiB, off), (ssize_t)MiB);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), MiB, 200 * MiB), (ssize_t)MiB);
	ASSERT_EQ(rdfs_release(f), 0);
	extent_blocks(ino, &end, &unw);
	EXPECT_EQ(end, 201 * MiB);

	// the bytes read back, and the gap reads as zeros
	struct rdfs_file *g = nullptr;
	struct stat st;
	std::vector<uint8_t> back(MiB), zeros(MiB, 0);
	ASSERT_EQ(rdfs_open(c, &root, ino, O_RDONLY, &st, &g), 0);
	EXPECT_EQ(st.st_size, (off_t)(201 * MiB));
	ASSERT_EQ(rdfs_pread(g, back.data(), MiB, 7 * MiB), (ssize_t)MiB);
	EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin() + 7 * MiB));
	ASSERT_EQ(rdfs_pread(g, back.data(), MiB, 10 * MiB), (ssize_t)MiB);
	EXPECT_TRUE(back == zeros);
	ASSERT_EQ(rdfs_pread(g, back.data(), MiB, 200 * MiB), (ssize_t)MiB);
	EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin()));
	ASSERT_EQ(rdfs_release(g), 0);
}

TEST_F(ClientPrealloc, AnotherOpenHandleKeepsThemUntilItGoes)
{
	struct rdfs_file *f = create("two"), *g = nullptr;
	auto data = pattern(4 * MiB, 3);
	struct stat st;
	uint64_t end, unw;

	ASSERT_NE(f, nullptr);
	uint64_t ino = rdfs_file_ino(f);
	struct rdfs_client *c2 = cluster->client();
	ASSERT_NE(c2, nullptr);
	ASSERT_EQ(rdfs_open(c2, &root, ino, O_RDONLY, &st, &g), 0);
	for (size_t off = 0; off < 4 * MiB; off += MiB)
		ASSERT_EQ(rdfs_pwrite(f, data.data() + off, MiB, off), (ssize_t)MiB);
	ASSERT_EQ(rdfs_release(f), 0);
	extent_blocks(ino, &end, &unw);
	EXPECT_GT(end, 4 * MiB) << "another handle is open";
	ASSERT_EQ(rdfs_release(g), 0);
	rdfs_client_close(c2);
	EXPECT_EQ(extent_blocks(ino, &end, &unw), 4 * MiB / 4096);
	EXPECT_EQ(end, 4 * MiB);
}

// A small volume: a stream may fill it to the last block, windows or not.
class ClientPreallocFull : public ::testing::Test {
protected:
	static Cluster *cluster;

	static void SetUpTestSuite()
	{
		cluster = new Cluster();
		ASSERT_TRUE(cluster->start(1, "9m")) << "cluster in " << cluster->dir;
	}
	static void TearDownTestSuite()
	{
		delete cluster;
		cluster = nullptr;
	}
};

Cluster *ClientPreallocFull::cluster;

TEST_F(ClientPreallocFull, StreamFillsTheVolumeToTheLastBlock)
{
	struct rdfs_client *c = cluster->client();
	struct rdfs_server_info s[1];
	struct rdfs_file *f = nullptr;
	struct stat st;

	ASSERT_NE(c, nullptr);
	ASSERT_EQ(rdfs_server_list(c, s, 1), 1);
	const uint64_t cap = s[0].free_blocks * 4096;
	auto data = pattern(cap, 11);
	ASSERT_GT(cap, 5 * MiB);

	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "full", 0644, O_RDWR | O_CREAT | O_EXCL,
			      &st, &f), 0);
	// past 5 MiB the window no longer fits: the writes alone must
	for (uint64_t off = 0; off < cap; off += MiB) {
		size_t n = std::min<uint64_t>(MiB, cap - off);

		ASSERT_EQ(rdfs_pwrite(f, data.data() + off, n, off), (ssize_t)n) << off;
	}
	EXPECT_EQ(rdfs_pwrite(f, data.data(), 4096, cap), -ENOSPC);
	ASSERT_EQ(rdfs_release(f), 0);
	ASSERT_EQ(rdfs_server_list(c, s, 1), 1);
	EXPECT_EQ(s[0].free_blocks, 0u);

	std::vector<uint8_t> back(cap);
	ASSERT_EQ(rdfs_open(c, &root, st.st_ino, O_RDONLY, &st, &f), 0);
	EXPECT_EQ(st.st_size, (off_t)cap);
	ASSERT_EQ(rdfs_pread(f, back.data(), cap, 0), (ssize_t)cap);
	EXPECT_TRUE(back == data);
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c);
}

}  // namespace
