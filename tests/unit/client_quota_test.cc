// SPDX-License-Identifier: MIT
//
// client_quota_test.cc - EDQUOT through lib/client against a real cluster:
// write-behind returns it from the next write and from flush, fsync and
// release (never a success, never a silent loss), a synchronous write at
// once; a stream up to exactly the limit succeeds although its writes
// allocate ahead of themselves; and QUOTA_GET/SET/LIST through the client
// calls the tool uses.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <string>
#include <vector>

#include "client_cluster.h"

extern "C" {
#include "frame.h"
#include "rdfs_client.h"
}

namespace {

using rdfs_test::pattern;

constexpr uint64_t KiB = 1024, MiB = 1024 * 1024, BLK = 4096;
const struct rdfs_cred root = {};

class ClientQuota : public rdfs_test::ClusterSuite<ClientQuota> {
public:
	static constexpr int servers = 2;
	static constexpr const char *volume_size = "256m";

protected:
	std::vector<struct rdfs_client *> extra;

	void TearDown() override
	{
		for (struct rdfs_client *x : extra)
			rdfs_client_close(x);
		rdfs_test::ClusterSuite<ClientQuota>::TearDown();
	}

	struct rdfs_client *client_with(int write_behind_kb)
	{
		struct rdfs_client_opts o = cluster->opts();
		struct rdfs_client *x = nullptr;

		o.write_behind_kb = write_behind_kb;
		o.write_stable = 1;
		EXPECT_EQ(rdfs_client_open(&o, &x), 0);
		extra.push_back(x);
		return x;
	}

	static struct rdfs_cred user(uint32_t uid)
	{
		struct rdfs_cred cr = {};

		cr.uid = uid;
		cr.gid = uid;
		return cr;
	}

	void hard_limit(uint32_t uid, uint64_t bytes)
	{
		struct rdfs_quota q = {}, out;

		q.type = RDFS_QUOTA_USER;
		q.id = uid;
		q.block_hard = bytes / BLK;
		ASSERT_EQ(rdfs_quota_set(c, &root, &q, RDFS_QUOTA_SET_BLOCK_HARD, 0, &out), 0);
		EXPECT_EQ(out.block_hard, bytes / BLK);
	}

	// A file of @uid's in the root directory (made by root, then given away).
	uint64_t file_of(uint32_t uid, const std::string &name)
	{
		struct rdfs_file *f = nullptr;
		struct stat st, in = {};

		EXPECT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, name.c_str(), 0644,
				      O_RDWR | O_CREAT | O_EXCL, &st, &f),
			  0);
		EXPECT_EQ(rdfs_release(f), 0);
		in.st_uid = uid;
		in.st_gid = uid;
		EXPECT_EQ(rdfs_setattr(c, &root, st.st_ino, &in, RDFS_SET_UID | RDFS_SET_GID,
				       nullptr, &st),
			  0);
		return st.st_ino;
	}

	uint64_t usage(uint32_t uid)
	{
		struct rdfs_quota q;

		EXPECT_EQ(rdfs_quota_get(c, &root, RDFS_QUOTA_USER, uid, &q, nullptr), 0);
		return q.blocks;
	}

	uint64_t size_of(uint64_t ino)
	{
		struct stat st;

		EXPECT_EQ(rdfs_getattr(c, &root, ino, &st), 0);
		return st.st_size;
	}
};

TEST_F(ClientQuota, WriteBehindReportsEdquotFromTheNextWriteAndFromFlush)
{
	const uint32_t uid = 40001;
	struct rdfs_cred cr = user(uid);
	struct rdfs_client *wb = client_with(4096);
	uint64_t ino = file_of(uid, "wb");
	struct rdfs_file *f = nullptr;
	struct stat st;
	std::vector<uint8_t> data = pattern(4 * MiB, 7);
	uint64_t acked = 0;
	ssize_t n = 0;

	hard_limit(uid, MiB);
	ASSERT_EQ(rdfs_open(wb, &cr, ino, O_WRONLY, &st, &f), 0);
	for (uint64_t off = 0; off < data.size(); off += 64 * KiB) {
		n = rdfs_pwrite(f, data.data() + off, 64 * KiB, off);
		if (n < 0)
			break;
		acked += n;
	}
	/* the unit past the limit failed at its allocation: a later write says so */
	EXPECT_EQ(n, -EDQUOT);
	EXPECT_LT(acked, data.size());
	EXPECT_EQ(rdfs_flush(f), -EDQUOT) << "flush must report it too";
	EXPECT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(size_of(ino), MiB) << "what fits, and nothing of what failed";
	EXPECT_EQ(usage(uid), MiB / BLK);

	std::vector<uint8_t> back(MiB);
	ASSERT_EQ(rdfs_open(c, &root, ino, O_RDONLY, &st, &f), 0);
	EXPECT_EQ(rdfs_pread(f, back.data(), back.size(), 0), (ssize_t)MiB);
	EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin()));
	EXPECT_EQ(rdfs_release(f), 0);
}

TEST_F(ClientQuota, WriteBehindErrorOfTheLastUnitComesFromFsync)
{
	const uint32_t uid = 40002;
	struct rdfs_cred cr = user(uid);
	struct rdfs_client *wb = client_with(4096);
	uint64_t ino = file_of(uid, "fs");
	struct rdfs_file *f = nullptr;
	struct stat st;
	std::vector<uint8_t> data = pattern(MiB + 8 * KiB, 3);

	hard_limit(uid, MiB);
	ASSERT_EQ(rdfs_open(wb, &cr, ino, O_WRONLY, &st, &f), 0);
	/* one whole unit (fits), then 8 KiB gathered and not yet sent: no error yet */
	ASSERT_EQ(rdfs_pwrite(f, data.data(), MiB, 0), (ssize_t)MiB);
	ASSERT_EQ(rdfs_pwrite(f, data.data() + MiB, 8 * KiB, MiB), (ssize_t)(8 * KiB));
	EXPECT_EQ(rdfs_fsync(f, 0), -EDQUOT);
	EXPECT_EQ(rdfs_fsync(f, 0), 0) << "reported once, as NFS's deferred errors";
	EXPECT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(size_of(ino), MiB);
}

TEST_F(ClientQuota, ASynchronousWriteGetsEdquotAtOnce)
{
	const uint32_t uid = 40003;
	struct rdfs_cred cr = user(uid);
	uint64_t ino = file_of(uid, "sync");
	struct rdfs_file *f = nullptr;
	struct stat st;
	std::vector<uint8_t> data = pattern(256 * KiB, 1);

	hard_limit(uid, 128 * KiB);
	ASSERT_EQ(rdfs_open(c, &cr, ino, O_WRONLY | O_SYNC, &st, &f), 0);
	EXPECT_EQ(rdfs_pwrite(f, data.data(), 128 * KiB, 0), (ssize_t)(128 * KiB));
	EXPECT_EQ(rdfs_pwrite(f, data.data() + 128 * KiB, 4 * KiB, 128 * KiB), -EDQUOT);
	EXPECT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(size_of(ino), 128 * KiB);
	/* root writes on: never refused, and counted */
	ASSERT_EQ(rdfs_open(c, &root, ino, O_WRONLY, &st, &f), 0);
	EXPECT_EQ(rdfs_pwrite(f, data.data() + 128 * KiB, 128 * KiB, 128 * KiB),
		  (ssize_t)(128 * KiB));
	EXPECT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(usage(uid), 256 * KiB / BLK);
}

// One write (the kernel client's writeback batch) that only partly fits: EDQUOT, never ENOSPC.
TEST_F(ClientQuota, AWriteStraddlingTheLimitGetsEdquot)
{
	const uint32_t uid = 40006;
	struct rdfs_cred cr = user(uid);
	uint64_t ino = file_of(uid, "straddle");
	struct rdfs_file *f = nullptr;
	struct stat st;
	std::vector<uint8_t> data = pattern(4 * MiB, 7);

	hard_limit(uid, 1 * MiB);
	ASSERT_EQ(rdfs_open(c, &cr, ino, O_WRONLY | O_SYNC, &st, &f), 0);
	EXPECT_EQ(rdfs_pwrite(f, data.data(), 4 * MiB, 0), -EDQUOT);
	EXPECT_EQ(rdfs_release(f), 0);
	EXPECT_LE(usage(uid), 1 * MiB / BLK);
}

TEST_F(ClientQuota, AStreamUpToTheLimitNeverFailsOnItsAllocateAhead)
{
	const uint32_t uid = 40004;
	struct rdfs_cred cr = user(uid);
	struct rdfs_client *wb = client_with(4096);
	uint64_t ino = file_of(uid, "ahead");
	struct rdfs_file *f = nullptr;
	struct rdfs_client_stats before, after;
	struct stat st;
	const uint64_t size = 6 * MiB;
	std::vector<uint8_t> data = pattern(size, 5);

	hard_limit(uid, size);
	rdfs_client_stats(wb, &before);
	ASSERT_EQ(rdfs_open(wb, &cr, ino, O_WRONLY, &st, &f), 0);
	for (uint64_t off = 0; off < size; off += 128 * KiB)
		ASSERT_EQ(rdfs_pwrite(f, data.data() + off, 128 * KiB, off), (ssize_t)(128 * KiB))
			<< "at " << off;
	EXPECT_EQ(rdfs_fsync(f, 0), 0);
	rdfs_client_stats(wb, &after);
	/* the stream did ask for more than it wrote: the metaserver cut it to the limit */
	EXPECT_GT(after.prealloc_bytes, before.prealloc_bytes);
	EXPECT_EQ(usage(uid), size / BLK);
	EXPECT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(size_of(ino), size);
	EXPECT_EQ(usage(uid), size / BLK);
}

TEST_F(ClientQuota, ListPagesThroughEveryRecord)
{
	struct rdfs_quota all[8], q = {};
	uint64_t grace[RDFS_QUOTA_TYPES];
	int more = 0, n;

	for (uint32_t id = 42000; id < 42005; id++) {
		q.type = RDFS_QUOTA_GROUP;
		q.id = id;
		q.inode_soft = id;
		ASSERT_EQ(rdfs_quota_set(c, &root, &q, RDFS_QUOTA_SET_INODE_SOFT, 0, &q), 0);
	}
	n = rdfs_quota_list(c, &root, RDFS_QUOTA_GROUP, 42001, all, 3, &more, grace);
	ASSERT_EQ(n, 3);
	EXPECT_EQ(more, 1);
	EXPECT_EQ(all[0].id, 42001u);
	EXPECT_EQ(all[2].inode_soft, 42003u);
	EXPECT_EQ(grace[RDFS_QUOTA_GROUP], 7u * 86400);
	n = rdfs_quota_list(c, &root, RDFS_QUOTA_GROUP, 42004, all, 8, &more, nullptr);
	ASSERT_EQ(n, 1);
	EXPECT_EQ(more, 0);
	struct rdfs_cred someone = user(555);
	EXPECT_EQ(rdfs_quota_list(c, &someone, RDFS_QUOTA_GROUP, 0, all, 8, &more, nullptr),
		  -EPERM);
	EXPECT_EQ(rdfs_quota_get(c, &someone, RDFS_QUOTA_GROUP, 42000, &q, nullptr), -EPERM);
	EXPECT_EQ(rdfs_quota_get(c, &someone, RDFS_QUOTA_USER, 555, &q, nullptr), 0);
}

} // namespace
