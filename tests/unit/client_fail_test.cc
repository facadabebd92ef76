// SPDX-License-Identifier: MIT
//
// client_fail_test.cc - the client when servers die: a killed I/O server makes
// I/O fail with EIO (not hang) and works again once the server is back; a
// restarted metaserver is reconnected to and open files keep working. Also
// servers that hang, answer late or send what the client must refuse.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <atomic>

#include "client_cluster.h"

extern "C" {
#include "client_internal.h"
#include "rdfs_client.h"
#include "rpc.h"
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

// The metaserver writes an allocation for writing without a sync; the COMMIT
// after it makes both durable. A crash of its machine in between (its database
// as of the last sync) loses the blocks the client wrote: the COMMIT, naming
// the earlier incarnation, is refused, and the client reports the writes lost
// instead of committing a size over holes.
TEST(ClientFail, WritesToBlocksAMetaserverMachineCrashLostAreReportedLost)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client *c = cl.client();
	ASSERT_NE(c, nullptr);
	auto data = pattern(20000, 4);
	struct rdfs_file *f = nullptr;
	struct stat st;

	// the volume's first allocation raises its high-water mark: synced
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "before", 0644, O_RDWR | O_CREAT, &st, &f),
		  0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "lost", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	uint64_t ino = rdfs_file_ino(f);
	// the disk as a crash would leave it from here on: everything is synced
	std::string db = cl.dir + "/db", synced = cl.dir + "/db.synced";
	ASSERT_EQ(system(("cp -a '" + db + "' '" + synced + "'").c_str()), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());

	cl.kill_metaserver();
	ASSERT_EQ(system(("rm -rf '" + db + "' && mv '" + synced + "' '" + db + "'").c_str()), 0);
	cl.start_metaserver();
	ASSERT_TRUE(cl.wait_up(1));

	EXPECT_EQ(rdfs_flush(f), -EIO) << "a COMMIT over lost blocks was taken";
	EXPECT_EQ(rdfs_release(f), -EIO);
	ASSERT_EQ(rdfs_getattr(c, &root, ino, &st), 0);
	EXPECT_EQ(st.st_size, 0) << "the size names blocks nobody holds";

	// the file takes writes again, on new blocks
	ASSERT_EQ(rdfs_open(c, &root, ino, O_RDWR, &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);
	struct rdfs_client *c2 = cl.client();
	ASSERT_NE(c2, nullptr);
	ASSERT_EQ(rdfs_open(c2, &root, ino, O_RDONLY, &st, &f), 0);
	std::vector<uint8_t> buf(data.size());
	ASSERT_EQ(rdfs_pread(f, buf.data(), buf.size(), 0), (ssize_t)data.size());
	EXPECT_EQ(buf, data);
	EXPECT_EQ(rdfs_release(f), 0);
	// and what was synced before the crash is all there
	ASSERT_EQ(rdfs_lookup(c2, &root, RDFS_ROOT_INO, "before", &st), 0);
	ASSERT_EQ(rdfs_open(c2, &root, st.st_ino, O_RDONLY, &st, &f), 0);
	ASSERT_EQ(rdfs_pread(f, buf.data(), buf.size(), 0), (ssize_t)data.size());
	EXPECT_EQ(buf, data);
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c2);
	rdfs_client_close(c);
}

// A hung (not dead) I/O server: its connection stays up, nothing is answered.
// The READs of one call are in flight together, so the call fails after one
// RPC timeout, not one timeout per READ in turn.
TEST(ClientFail, HungIoServerFailsAReadWithinOneTimeout)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client_opts o = cl.opts();
	struct rdfs_client *c = nullptr;

	o.timeout_ms = 2000;
	ASSERT_EQ(rdfs_client_open(&o, &c), 0);
	// 32 MiB: at least 8 READs of at most 4 MiB, all to the one server
	auto data = pattern(32 << 20, 5);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "hung", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_flush(f), 0);

	ASSERT_EQ(kill(cl.ios_pids[0], SIGSTOP), 0);
	std::vector<uint8_t> buf(data.size());
	// A hung (not dead) server must give EIO, not a hang. The batch waits one
	// deadline for all its READs (io_batch.c), not one timeout per READ; that
	// is a liveness property, so it is not asserted as a wall-clock bound.
	EXPECT_EQ(rdfs_pread(f, buf.data(), buf.size(), 0), -EIO);

	// the late replies of the timed-out READs are dropped; reads work again
	ASSERT_EQ(kill(cl.ios_pids[0], SIGCONT), 0);
	ASSERT_EQ(rdfs_pread(f, buf.data(), buf.size(), 0), (ssize_t)data.size());
	EXPECT_EQ(buf, data);
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c);
}

// While a COMMIT is on its way, an attribute reply the metaserver produced
// before it (a getattr answered first) must not shrink this client's view of
// its own writes: reads would stop short and the kernel would see the file shrink.
TEST(ClientFail, AttrFromBeforeAnInFlightCommitKeepsOurSize)
{
	Cluster cl;
	ASSERT_TRUE(cl.start(1)) << cl.dir;
	struct rdfs_client *c = cl.client();
	ASSERT_NE(c, nullptr);
	auto data = pattern(100, 6);
	struct rdfs_file *f = nullptr;
	struct stat st;
	ASSERT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, "inflight", 0644, O_RDWR | O_CREAT, &st, &f),
		  0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());

	// hold the COMMIT in flight: the metaserver takes it but does not answer yet
	ASSERT_EQ(kill(cl.ms_pid, SIGSTOP), 0);
	int flushed = 1;
	std::thread flusher([&] { flushed = rdfs_flush(f); });
	usleep(300000);

	// the reply of a getattr the metaserver answered before the COMMIT
	Rdfs__Attr old = RDFS__ATTR__INIT;
	old.ino = rdfs_file_ino(f);
	old.mode = S_IFREG | 0644;
	old.nlink = 1;
	old.size = 0;
	attr_note(c, &old, size_clock_now(c), &st);
	EXPECT_EQ(st.st_size, (off_t)data.size());
	EXPECT_EQ(rdfs_file_size(f), data.size());

	ASSERT_EQ(kill(cl.ms_pid, SIGCONT), 0);
	flusher.join();
	EXPECT_EQ(flushed, 0);
	EXPECT_EQ(rdfs_file_size(f), data.size());
	std::vector<uint8_t> buf(data.size());
	ASSERT_EQ(rdfs_pread(f, buf.data(), buf.size(), 0), (ssize_t)data.size());
	EXPECT_EQ(buf, data);
	EXPECT_EQ(rdfs_release(f), 0);
	rdfs_client_close(c);
}

// A metaserver whose READDIR pages hold only names the client refuses (over
// NAME_MAX): the stream must end, not ask for the same page after the same
// name again and again. This one gives up (eof) at its third page.
TEST(ClientFail, ReaddirPageOfRefusedNamesEndsTheStream)
{
	struct auth_secret secret;
	const char *urls[] = { "tcp://127.0.0.1:0", nullptr };
	struct rpc_server *srv = nullptr;
	std::atomic<bool> stop{false};
	std::atomic<int> pages{0};

	struct auth_keys keys;

	auth_secret_from_bytes(&secret, "0123456789abcdef0123", 20);
	auth_keys_derive(&keys, &secret, nullptr);
	ASSERT_EQ(rpc_server_create(urls, &keys, &srv), 0);
	std::thread fake([&] {
		struct rpc_request req;
		std::string name(RDFS_NAME_MAX + 1, 'x');

		while (!stop) {
			if (rpc_server_next(srv, &req, 100) != RPC_SRV_REQUEST) {
				rpc_request_done(&req);
				continue;
			}
			if (req.msg->hdr.opcode != RDFS_OP_READDIR) {
				rpc_server_reply(&req, -ENOSYS, nullptr, nullptr, 0);
				rpc_request_done(&req);
				continue;
			}
			Rdfs__Dirent de = RDFS__DIRENT__INIT;
			Rdfs__Dirent *dep = &de;
			Rdfs__ReaddirReply rep = RDFS__READDIR_REPLY__INIT;

			de.name.data = (uint8_t *)name.data();
			de.name.len = name.size();
			de.ino = 5;
			de.type = S_IFREG >> 12;
			rep.entries = &dep;
			rep.n_entries = 1;
			rep.eof = ++pages >= 3;
			rpc_server_reply(&req, 0, &rep.base, nullptr, 0);
			rpc_request_done(&req);
		}
	});

	struct rdfs_client_opts o = {};
	struct rdfs_client *c = nullptr;
	struct rdfs_dir *d = nullptr;
	struct rdfs_dirent ent;

	o.metaserver_url = rpc_server_url(srv, 0);
	o.secret = secret;
	o.timeout_ms = 5000;
	EXPECT_EQ(rdfs_client_open(&o, &c), 0);
	if (c) {
		EXPECT_EQ(rdfs_opendir(c, &root, RDFS_ROOT_INO, &d), 0);
		if (d) {
			EXPECT_EQ(rdfs_readdir_at(d, 0, &ent), 0);
			rdfs_closedir(d);
		}
		rdfs_client_close(c);
	}
	EXPECT_EQ(pages.load(), 1);
	stop = true;
	rpc_server_wake(srv);
	fake.join();
	rpc_server_destroy(srv);
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
