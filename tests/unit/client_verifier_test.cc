// SPDX-License-Identifier: MIT
//
// client_verifier_test.cc - unstable (write-back) WRITEs and the I/O server's
// boot verifier: an I/O server killed and restarted between the WRITEs and
// the fsync may have lost them, and fsync says so (-EIO, and keeps saying so
// for that open); without a restart fsync succeeds and the data is there.
#include <gtest/gtest.h>

#include <fcntl.h>

#include "client_cluster.h"

extern "C" {
#include "client_internal.h"
#include "rdfs_client.h"
}

using rdfs_test::Cluster;
using rdfs_test::pattern;

namespace {

const struct rdfs_cred root = {};

struct rdfs_client *client_with(Cluster &cl, int write_stable)
{
	struct rdfs_client_opts o = cl.opts();
	struct rdfs_client *c = nullptr;

	o.write_stable = write_stable;
	for (int i = 0; i < 100; i++) {
		if (rdfs_client_open(&o, &c) == 0)
			return c;
		usleep(100000);
	}
	return nullptr;
}

// Restart I/O server @i on its volume and port; return once it serves I/O
// (checked by another client, so @c's connections are left as they are).
void restart_ioserver(Cluster &cl, int i)
{
	cl.kill_ioserver(i);
	cl.start_ioserver(i);
	ASSERT_TRUE(cl.wait_up((int)cl.ios_pids.size()));
	struct rdfs_client *probe = cl.client();
	ASSERT_NE(probe, nullptr);
	struct rdfs_file *f = nullptr;
	struct stat st;
	std::string name = "probe" + std::to_string(i) + "." + std::to_string(cl.ios_pids[i]);
	ASSERT_EQ(rdfs_create(probe, &root, RDFS_ROOT_INO, name.c_str(), 0644,
			      O_RDWR | O_CREAT, &st, &f), 0);
	auto d = pattern(4096, 99);
	ssize_t n = -EIO;
	// the restarted server may need a moment to accept I/O after registering
	for (int t = 0; t < 100 && n < 0; t++) {
		n = rdfs_pwrite(f, d.data(), d.size(), 0);
		if (n < 0)
			usleep(100000);
	}
	ASSERT_EQ(n, (ssize_t)d.size());
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(probe);
}

std::vector<uint8_t> read_back(struct rdfs_client *c, uint64_t ino, size_t size)
{
	struct rdfs_file *f = nullptr;
	struct stat st;
	std::vector<uint8_t> buf(size);

	EXPECT_EQ(rdfs_open(c, &root, ino, O_RDONLY, &st, &f), 0);
	if (!f)
		return {};
	EXPECT_EQ(rdfs_pread(f, buf.data(), buf.size(), 0), (ssize_t)size);
	EXPECT_EQ(rdfs_release(f), 0);
	return buf;
}

TEST(ClientVerifier, UnstableWritesThenFsyncKeepTheData)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client *c = client_with(cl, 0);
	ASSERT_NE(c, nullptr);

	auto data = pattern(3 << 20, 1);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "f", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	EXPECT_EQ(rdfs_fsync(f, 0), 0);
	EXPECT_EQ(rdfs_fsync(f, 0), 0);
	uint64_t ino = rdfs_file_ino(f);
	EXPECT_EQ(rdfs_release(f), 0);

	EXPECT_EQ(read_back(c, ino, data.size()), data);
	rdfs_client_close(c);
	// and from a client that never saw the writes
	c = cl.client();
	ASSERT_NE(c, nullptr);
	EXPECT_EQ(read_back(c, ino, data.size()), data);
	rdfs_client_close(c);
}

TEST(ClientVerifier, RestartBeforeFsyncLosesUnstableWritesAndSaysSo)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client *c = client_with(cl, 0);
	ASSERT_NE(c, nullptr);

	auto data = pattern(2 << 20, 2);
	struct rdfs_file *f = nullptr, *g = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "f", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());

	restart_ioserver(cl, 0);
	EXPECT_EQ(rdfs_fsync(f, 0), -EIO);
	// the verifier told the loss (a commit that merely failed would be retried)
	pthread_mutex_lock(&f->in->lock);
	EXPECT_EQ(f->in->n_unstable, 0u);
	pthread_mutex_unlock(&f->in->lock);
	// reported again, not just once, for this open: fsync, flush, close
	EXPECT_EQ(rdfs_fsync(f, 0), -EIO);
	EXPECT_EQ(rdfs_flush(f), -EIO);
	uint64_t ino = rdfs_file_ino(f);
	EXPECT_EQ(rdfs_release(f), -EIO);

	// a new open starts clean: its own unstable writes commit fine
	ASSERT_EQ(rdfs_open(c, &root, ino, O_RDWR, &st, &g), 0);
	EXPECT_EQ(rdfs_fsync(g, 0), 0);
	auto more = pattern(8192, 3);
	ASSERT_EQ(rdfs_pwrite(g, more.data(), more.size(), 0), (ssize_t)more.size());
	EXPECT_EQ(rdfs_fsync(g, 0), 0);
	EXPECT_EQ(rdfs_release(g), 0);
	auto back = read_back(c, ino, more.size());
	EXPECT_EQ(back, more);
	rdfs_client_close(c);
}

TEST(ClientVerifier, RestartAfterFsyncLosesNothing)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client *c = client_with(cl, 0);
	ASSERT_NE(c, nullptr);

	auto data = pattern(1 << 20, 4);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "f", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_fsync(f, 0), 0);

	restart_ioserver(cl, 0);
	// nothing unstable since the last commit: nothing to report
	EXPECT_EQ(rdfs_fsync(f, 0), 0);
	uint64_t ino = rdfs_file_ino(f);
	EXPECT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(read_back(c, ino, data.size()), data);
	rdfs_client_close(c);
}

TEST(ClientVerifier, StableWritesAreUnaffectedByARestart)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client *c = client_with(cl, 1);
	ASSERT_NE(c, nullptr);

	auto data = pattern(1 << 20, 5);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "f", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());

	restart_ioserver(cl, 0);
	EXPECT_EQ(rdfs_fsync(f, 0), 0);
	uint64_t ino = rdfs_file_ino(f);
	EXPECT_EQ(rdfs_release(f), 0);
	EXPECT_EQ(read_back(c, ino, data.size()), data);
	rdfs_client_close(c);
}

} // namespace
