// SPDX-License-Identifier: MIT
//
// client_fail_test.cc - the client when servers die: a killed I/O server makes
// I/O fail with EIO (not hang) and works again once the server is back; a
// restarted metaserver is reconnected to and open files keep working.
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

TEST(ClientFail, DeadIoServerGivesEioThenRecovers)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(2)) << cl.dir;
	struct rdfs_client *c = cl.client();
	ASSERT_NE(c, nullptr);

	// 8 chunks of 1 MiB: both servers hold some of them
	auto data = pattern(8 << 20, 1);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "f", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_flush(f), 0);

	cl.kill_ioserver(1);
	std::vector<uint8_t> buf(data.size());
	EXPECT_EQ(rdfs_pread(f, buf.data(), buf.size(), 0), -EIO);
	EXPECT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), -EIO);
	// the metaserver keeps answering meanwhile
	EXPECT_EQ(rdfs_getattr(c, &root, rdfs_file_ino(f), &st), 0);

	// back on another port: the client learns the new URL from the next layout
	cl.ios_ports[1] = rdfs_test::free_port();
	cl.start_ioserver(1);
	ASSERT_TRUE(cl.wait_up(2));
	ssize_t n = -EIO;
	// the restarted server may need a moment to accept I/O after registering
	for (int i = 0; i < 50 && n == -EIO; i++) {
		n = rdfs_pread(f, buf.data(), buf.size(), 0);
		if (n == -EIO)
			usleep(100000);
	}
	ASSERT_EQ(n, (ssize_t)data.size());
	EXPECT_EQ(buf, data);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), 4096, 8 << 20), 4096);
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c);
}

TEST(ClientFail, MetaserverRestartKeepsOpenFilesWorking)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client *c = cl.client();
	ASSERT_NE(c, nullptr);

	auto data = pattern(100000, 2);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "g", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), 50000, 0), 50000);
	ASSERT_EQ(rdfs_fsync(f, 0), 0);

	cl.kill_metaserver();
	cl.start_metaserver();
	ASSERT_TRUE(cl.wait_up(1));

	// the next calls reconnect and re-open the file for a new handle
	ASSERT_EQ(rdfs_pwrite(f, data.data() + 50000, 50000, 50000), 50000);
	ASSERT_EQ(rdfs_release(f), 0);
	ASSERT_EQ(rdfs_lookup(c, &root, RDFS_ROOT_INO, "g", &st), 0);
	EXPECT_EQ(st.st_size, 100000);
	ASSERT_EQ(rdfs_open(c, &root, st.st_ino, O_RDONLY, &st, &f), 0);
	std::vector<uint8_t> buf(data.size());
	ASSERT_EQ(rdfs_pread(f, buf.data(), buf.size(), 0), (ssize_t)data.size());
	EXPECT_EQ(buf, data);
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c);
}

TEST(ClientFail, FailedCommitKeepsWritesForTheNextFlush)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client_opts o = cl.opts();
	struct rdfs_client *c = nullptr;

	o.reconnect_ms = 300;
	ASSERT_EQ(rdfs_client_open(&o, &c), 0);
	auto data = pattern(20000, 3);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "h", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	uint64_t ino = rdfs_file_ino(f);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());

	cl.kill_metaserver();
	EXPECT_EQ(rdfs_flush(f), -EIO);
	EXPECT_EQ(rdfs_release(f), -EIO);
	uint64_t size = 0;
	ASSERT_EQ(rdfs_pending_size(c, ino, &size), 0);
	EXPECT_EQ(size, data.size());

	cl.start_metaserver();
	ASSERT_TRUE(cl.wait_up(1));
	ASSERT_EQ(rdfs_open(c, &root, ino, O_RDWR, &st, &f), 0);
	EXPECT_EQ(rdfs_file_size(f), data.size());
	ASSERT_EQ(rdfs_release(f), 0);

	struct rdfs_client *c2 = cl.client();
	ASSERT_NE(c2, nullptr);
	ASSERT_EQ(rdfs_open(c2, &root, ino, O_RDONLY, &st, &f), 0);
	EXPECT_EQ(st.st_size, (off_t)data.size());
	std::vector<uint8_t> buf(data.size());
	ASSERT_EQ(rdfs_pread(f, buf.data(), buf.size(), 0), (ssize_t)data.size());
	EXPECT_EQ(buf, data);
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c2);
	rdfs_client_close(c);
}

TEST(ClientFail, WrongSecretIsRefused)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(0)) << cl.dir;
	struct rdfs_client_opts o = cl.opts();
	struct rdfs_client *c = nullptr;

	o.secret.key[0] ^= 1;
	EXPECT_EQ(rdfs_client_open(&o, &c), -EACCES);
}

TEST(ClientFail, NoMetaserverIsReportedAtOnce)
{
	struct rdfs_client_opts o = {};
	struct rdfs_client *c = nullptr;
	std::string url = "tcp://127.0.0.1:" + std::to_string(rdfs_test::free_port());

	o.metaserver_url = url.c_str();
	auth_secret_from_bytes(&o.secret, "0123456789abcdef0123", 20);
	EXPECT_EQ(rdfs_client_open(&o, &c), -ECONNREFUSED);
}

} // namespace
