// SPDX-License-Identifier: MIT
//
// client_stale_reply_test.cc - a metaserver reply that left before this
// client settled a size (its COMMIT, its truncate) is older than that size:
// a GETATTR, LOOKUP or OPEN answered before our COMMIT and applied after it
// must not take the file's size back, or a read right after fsync stops at
// the old end (the kernel client's copy_file_range returned 0 so, under load).
//
// The race is made certain, not hoped for: the test holds the client's inode
// table lock, which a GETATTR reply needs to be applied (attr_note finds the
// inode there) and a COMMIT does not; the GETATTR is answered, waits, the
// COMMIT completes, then the old reply is applied.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/falloc.h>

#include <atomic>
#include <thread>

#include "client_cluster.h"

extern "C" {
#include "client_internal.h"
#include "rdfs_client.h"
}

using rdfs_test::Cluster;
using rdfs_test::pattern;

namespace {

const struct rdfs_cred root = {};

// A GETATTR of @ino answered now, applied only once @settle (a size change of
// this client's, which needs no inode-table lock) has returned.
template <typename Settle>
void getattr_applied_after(struct rdfs_client *c, uint64_t ino, Settle settle)
{
	std::atomic<bool> sent{false}, done{false};
	struct stat st;
	int ret = -1;

	pthread_mutex_lock(&c->itab.lock);
	std::thread g([&] {
		sent = true;
		ret = rdfs_getattr(c, &root, ino, &st);
		done = true;
	});
	while (!sent)
		usleep(1000);
	// answered well within this; applying the reply waits for the lock
	usleep(300000);
	EXPECT_FALSE(done);
	settle();
	pthread_mutex_unlock(&c->itab.lock);
	g.join();
	EXPECT_EQ(ret, 0);
}

TEST(ClientStaleReply, GetattrAnsweredBeforeACommitDoesNotShrinkTheFile)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client *c = cl.client();
	ASSERT_NE(c, nullptr);

	auto head = pattern(4096, 1), tail = pattern(5000, 2);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "f", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	uint64_t ino = rdfs_file_ino(f);
	ASSERT_EQ(rdfs_pwrite(f, head.data(), head.size(), 0), (ssize_t)head.size());
	ASSERT_EQ(rdfs_fsync(f, 0), 0);
	// past the end: 1 MiB + 5000 once committed
	ASSERT_EQ(rdfs_pwrite(f, tail.data(), tail.size(), 1 << 20), (ssize_t)tail.size());
	// the GETATTR says 4096; the COMMIT completes before its reply is applied
	getattr_applied_after(c, ino, [&] { EXPECT_EQ(rdfs_fsync(f, 0), 0); });

	std::vector<uint8_t> buf(tail.size());
	EXPECT_EQ(rdfs_pread(f, buf.data(), buf.size(), 1 << 20), (ssize_t)tail.size());
	EXPECT_EQ(buf, tail);
	EXPECT_EQ(rdfs_file_size(f), (1u << 20) + tail.size());
	EXPECT_EQ(rdfs_getattr(c, &root, ino, &st), 0);
	EXPECT_EQ(st.st_size, (off_t)((1 << 20) + tail.size()));
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c);
}

// (a collapse: a truncate's own reply is applied through the same lock)
TEST(ClientStaleReply, GetattrAnsweredBeforeACollapseDoesNotGrowTheFileBack)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client *c = cl.client();
	ASSERT_NE(c, nullptr);

	auto data = pattern((2 << 20) + 5000, 3);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "f", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	uint64_t ino = rdfs_file_ino(f);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_fsync(f, 0), 0);
	// the GETATTR says 2 MiB + 5000; the collapse of the first MiB completes first
	getattr_applied_after(c, ino, [&] {
		EXPECT_EQ(rdfs_fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 0, 1 << 20), 0);
	});

	std::vector<uint8_t> buf(5000);
	EXPECT_EQ(rdfs_file_size(f), (1u << 20) + 5000);
	EXPECT_EQ(rdfs_pread(f, buf.data(), buf.size(), 1 << 20), 5000);
	EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin() + (2 << 20)));
	EXPECT_EQ(rdfs_pread(f, buf.data(), buf.size(), (1 << 20) + 5000), 0);
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c);
}

} // namespace
