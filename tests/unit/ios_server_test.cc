// SPDX-License-Identifier: MIT
/*
 * ios_server_test.cc - the I/O server core in-process on a real socket, driven
 * by a real rpc_client: data round trips, every capability refusal, bounds,
 * garbage on the wire, and registration with a stand-in metaserver.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "auth.h"
#include "cap.h"
#include "frame.h"
#include "rdfs.pb-c.h"
#include "rpc.h"
#include "../../ioserver/ios.h"
#include "../../ioserver/volume.h"
}

#include "ios_test_util.h"

namespace {

const uint32_t kServerId = 7;

class IoServerTest : public ::testing::Test {
protected:
	TempDir dir;
	struct auth_secret secret, cap_key, wrong_key;
	struct volume *vol = nullptr;
	struct ios_server *server = nullptr;
	std::thread loop;
	std::atomic<int> run_ret{1};
	struct rpc_client *client = nullptr;
	std::string url;

	void SetUp() override
	{
		auth_secret_from_bytes(&secret, "cluster-secret-for-tests-0123456789", 35);
		auth_secret_from_bytes(&cap_key, "capability-key-for-tests-0123456789", 35);
		auth_secret_from_bytes(&wrong_key, "not-the-capability-key-0123456789", 33);
		std::string path = dir.path() + "/vol";
		struct volume_open_opts vo = {};
		vo.path = path.c_str();
		vo.create_size = VOLUME_DATA_OFFSET + 4096 * 4096;	/* 16 MiB of blocks */
		ASSERT_EQ(volume_open(&vo, &vol), 0);
	}

	void start(const char *metaserver = nullptr, int ping_ms = 0)
	{
		struct ios_options o = {};
		o.vol = vol;
		o.listen = "tcp://127.0.0.1:0";
		o.metaserver = metaserver;
		o.fixed_server_id = kServerId;
		o.name = "test-ios";
		o.secret = &secret;
		o.cap_key = &cap_key;
		o.io_threads = 4;
		o.ping_interval_ms = ping_ms;
		ASSERT_EQ(ios_server_create(&o, &server), 0);
		url = ios_server_url(server, 0);
		loop = std::thread([this]() { run_ret = ios_server_run(server); });
		ASSERT_EQ(rpc_client_connect(url.c_str(), &secret, "client", 5000, &client), 0);
	}

	void stop()
	{
		if (client)
			rpc_client_close(client);
		client = nullptr;
		if (server) {
			ios_server_stop(server);
			loop.join();
			EXPECT_EQ(run_ret, 0);
			ios_server_destroy(server);
			server = nullptr;
		}
	}

	void TearDown() override
	{
		stop();
		volume_close(vol);
	}

	std::vector<uint8_t> volume_bytes(uint64_t first, uint32_t head, uint32_t length)
	{
		uint64_t n = volume_blocks_touched(head, length);
		AlignedBuf buf(n * 4096);
		EXPECT_EQ(volume_read_blocks(vol, first, n, buf.get()), 0);
		return std::vector<uint8_t>(buf.bytes() + head, buf.bytes() + head + length);
	}
};

TEST_F(IoServerTest, AlignedWriteThenReadBack)
{
	start();
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 100}});
	std::vector<uint8_t> d = pattern(16 * 4096, 1);
	IoResult w = io_call(client, RDFS_OP_WRITE, cap.get(), 3, 16, 0, d.size(), d.data(),
			     d.size());
	ASSERT_EQ(w.status, 0) << w.message;
	EXPECT_EQ(w.length, d.size());
	EXPECT_EQ(volume_bytes(3, 0, d.size()), d) << "stable WRITE acknowledged but not on the volume";

	IoResult r = io_call(client, RDFS_OP_READ, cap.get(), 3, 16, 0, d.size());
	ASSERT_EQ(r.status, 0) << r.message;
	EXPECT_EQ(r.length, d.size());
	EXPECT_EQ(r.data, d);
}

TEST_F(IoServerTest, UnalignedWriteAndReadAreByteExact)
{
	start();
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{10, 10}});
	std::vector<uint8_t> base = pattern(3 * 4096, 2);
	ASSERT_EQ(io_call(client, RDFS_OP_WRITE, cap.get(), 10, 3, 0, base.size(), base.data(),
			  base.size()).status, 0);
	std::vector<uint8_t> d = pattern(5000, 3);
	IoResult w = io_call(client, RDFS_OP_WRITE, cap.get(), 10, 3, 100, d.size(), d.data(),
			     d.size(), false);
	ASSERT_EQ(w.status, 0) << w.message;
	ASSERT_EQ(io_call(client, RDFS_OP_IO_COMMIT, nullptr, 0, 0, 0, 0).status, 0);
	memcpy(&base[100], d.data(), d.size());

	IoResult r = io_call(client, RDFS_OP_READ, cap.get(), 10, 3, 0, base.size());
	ASSERT_EQ(r.status, 0);
	EXPECT_EQ(r.data, base);
	r = io_call(client, RDFS_OP_READ, cap.get(), 10, 2, 4095, 2);
	ASSERT_EQ(r.status, 0);
	EXPECT_EQ(r.data, std::vector<uint8_t>(base.begin() + 4095, base.begin() + 4097));
}

/*
 * The boot verifier: the same in every WRITE and IO_COMMIT reply of one server
 * process, another once the server is started again on the same volume, so a
 * client sees that unstable writes from before may be gone.
 */
TEST_F(IoServerTest, WriteVerifierIsConstantPerStartAndChangesOnRestart)
{
	start();
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 8}});
	std::vector<uint8_t> d = pattern(4096, 11);
	uint64_t v1 = ios_server_verifier(server);

	IoResult w = io_call(client, RDFS_OP_WRITE, cap.get(), 0, 1, 0, d.size(), d.data(),
			     d.size(), false);
	ASSERT_EQ(w.status, 0) << w.message;
	EXPECT_EQ(w.verifier, v1);
	w = io_call(client, RDFS_OP_WRITE, cap.get(), 1, 1, 0, d.size(), d.data(), d.size(), true);
	ASSERT_EQ(w.status, 0) << w.message;
	EXPECT_EQ(w.verifier, v1);
	IoResult c = io_call(client, RDFS_OP_IO_COMMIT, nullptr, 0, 0, 0, 0);
	ASSERT_EQ(c.status, 0) << c.message;
	EXPECT_EQ(c.verifier, v1);
	/* an IO_COMMIT reply still decodes for callers that ignore its body */
	EXPECT_EQ(rpc_call(client, RDFS_OP_IO_COMMIT, nullptr, nullptr, nullptr, 5000), 0);
	stop();

	start();
	uint64_t v2 = ios_server_verifier(server);
	EXPECT_NE(v2, v1);
	w = io_call(client, RDFS_OP_WRITE, cap.get(), 2, 1, 0, d.size(), d.data(), d.size(), false);
	ASSERT_EQ(w.status, 0) << w.message;
	EXPECT_EQ(w.verifier, v2);
	c = io_call(client, RDFS_OP_IO_COMMIT, nullptr, 0, 0, 0, 0);
	ASSERT_EQ(c.status, 0) << c.message;
	EXPECT_EQ(c.verifier, v2);
	/* the data written before the restart was committed and is still there */
	IoResult r = io_call(client, RDFS_OP_READ, cap.get(), 0, 2, 0, 2 * 4096);
	ASSERT_EQ(r.status, 0);
	std::vector<uint8_t> both(d);
	both.insert(both.end(), d.begin(), d.end());
	EXPECT_EQ(r.data, both);
}

TEST_F(IoServerTest, LargeRequestRoundTrip)
{
	start();
	const uint32_t len = 4u << 20;
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{1000, 1024}});
	std::vector<uint8_t> d = pattern(len, 4);
	ASSERT_EQ(io_call(client, RDFS_OP_WRITE, cap.get(), 1000, 1024, 0, len, d.data(), len,
			  false).status, 0);
	IoResult r = io_call(client, RDFS_OP_READ, cap.get(), 1000, 1024, 0, len);
	ASSERT_EQ(r.status, 0);
	EXPECT_TRUE(r.data == d);
}

TEST_F(IoServerTest, ForgedCapabilityGetsEaccesAndNoData)
{
	start();
	Cap good(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 8}});
	std::vector<uint8_t> secret_data = pattern(4096, 5);
	ASSERT_EQ(io_call(client, RDFS_OP_WRITE, good.get(), 0, 1, 0, 4096, secret_data.data(),
			  4096).status, 0);

	Cap forged(&wrong_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 8}});
	IoResult r = io_call(client, RDFS_OP_READ, forged.get(), 0, 1, 0, 4096);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(r.message, "forged capability");
	EXPECT_TRUE(r.data.empty());

	/* A genuine capability widened after signing is forged too. */
	Cap altered(&cap_key, kServerId, RDFS_CAP_READ, {{0, 1}});
	altered.get()->ranges[0]->count = 8;
	altered.get()->rights |= RDFS_CAP_WRITE;
	r = io_call(client, RDFS_OP_READ, altered.get(), 0, 8, 0, 8 * 4096);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(r.message, "forged capability");
	EXPECT_TRUE(r.data.empty());

	std::vector<uint8_t> junk(4096, 0xee);
	r = io_call(client, RDFS_OP_WRITE, forged.get(), 0, 1, 0, 4096, junk.data(), 4096);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(volume_bytes(0, 0, 4096), secret_data) << "forged WRITE touched the volume";

	/* No capability at all. */
	r = io_call(client, RDFS_OP_READ, nullptr, 0, 1, 0, 4096);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_TRUE(r.data.empty());
}

TEST_F(IoServerTest, ExpiredCapability)
{
	start();
	Cap expired(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 8}}, -1);
	IoResult r = io_call(client, RDFS_OP_READ, expired.get(), 0, 1, 0, 4096);
	EXPECT_EQ(r.status, -EKEYEXPIRED);
	EXPECT_EQ(r.message, "capability expired");
	EXPECT_TRUE(r.data.empty());
	std::vector<uint8_t> d(4096, 1);
	r = io_call(client, RDFS_OP_WRITE, expired.get(), 0, 1, 0, 4096, d.data(), 4096);
	EXPECT_EQ(r.status, -EKEYEXPIRED);
	EXPECT_EQ(volume_bytes(0, 0, 4096), std::vector<uint8_t>(4096, 0));
}

TEST_F(IoServerTest, WrongRightsServerOrRange)
{
	start();
	std::vector<uint8_t> d(4096, 9);

	Cap read_only(&cap_key, kServerId, RDFS_CAP_READ, {{0, 8}});
	IoResult r = io_call(client, RDFS_OP_WRITE, read_only.get(), 0, 1, 0, 4096, d.data(), 4096);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(r.message, "capability does not grant write");
	EXPECT_EQ(io_call(client, RDFS_OP_READ, read_only.get(), 0, 1, 0, 4096).status, 0);

	Cap write_only(&cap_key, kServerId, RDFS_CAP_WRITE, {{0, 8}});
	r = io_call(client, RDFS_OP_READ, write_only.get(), 0, 1, 0, 4096);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_TRUE(r.data.empty());

	Cap other_server(&cap_key, kServerId + 1, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 8}});
	r = io_call(client, RDFS_OP_READ, other_server.get(), 0, 1, 0, 4096);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(r.message, "capability is for another I/O server");

	Cap narrow(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{4, 2}, {20, 1}});
	EXPECT_EQ(io_call(client, RDFS_OP_READ, narrow.get(), 4, 2, 0, 8192).status, 0);
	EXPECT_EQ(io_call(client, RDFS_OP_READ, narrow.get(), 20, 1, 0, 10).status, 0);
	r = io_call(client, RDFS_OP_READ, narrow.get(), 4, 3, 0, 8192);	/* one past */
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(r.message, "capability does not cover the requested blocks");
	r = io_call(client, RDFS_OP_READ, narrow.get(), 3, 2, 0, 4096);	/* one before */
	EXPECT_EQ(r.status, -EACCES);
	r = io_call(client, RDFS_OP_WRITE, narrow.get(), 5, 2, 0, 8192, pattern(8192, 1).data(),
		    8192);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(volume_bytes(6, 0, 4096), std::vector<uint8_t>(4096, 0));
}

TEST_F(IoServerTest, BoundsErrors)
{
	start();
	uint64_t cap_blocks = volume_capacity(vol);
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, cap_blocks + 10}});
	std::vector<uint8_t> d(8192, 3);

	EXPECT_EQ(io_call(client, RDFS_OP_READ, cap.get(), cap_blocks - 1, 1, 0, 4096).status, 0);
	EXPECT_EQ(io_call(client, RDFS_OP_READ, cap.get(), cap_blocks, 1, 0, 4096).status, -ERANGE);
	EXPECT_EQ(io_call(client, RDFS_OP_READ, cap.get(), cap_blocks - 1, 2, 0, 4096).status,
		  -ERANGE);
	EXPECT_EQ(io_call(client, RDFS_OP_WRITE, cap.get(), cap_blocks, 1, 0, 4096, d.data(),
			  4096).status, -ERANGE);
	EXPECT_EQ(io_call(client, RDFS_OP_READ, cap.get(), 0, 1, 4096, 0).status, -EINVAL);
	EXPECT_EQ(io_call(client, RDFS_OP_READ, cap.get(), 0, 1, 1, 4096).status, -EINVAL);
	EXPECT_EQ(io_call(client, RDFS_OP_READ, cap.get(), 0, 0, 0, 0).status, -EINVAL);
	/* WRITE whose data does not match its length field. */
	EXPECT_EQ(io_call(client, RDFS_OP_WRITE, cap.get(), 0, 2, 0, 8192, d.data(), 4096).status,
		  -EINVAL);
	EXPECT_EQ(volume_bytes(0, 0, 8192), std::vector<uint8_t>(8192, 0));
	/* Zero-length I/O is a no-op. */
	IoResult r = io_call(client, RDFS_OP_READ, cap.get(), 0, 1, 0, 0);
	EXPECT_EQ(r.status, 0);
	EXPECT_TRUE(r.data.empty());
}

TEST_F(IoServerTest, ZeroAfterWriteReadsZerosAndLeavesNeighbours)
{
	start();
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{30, 8}});
	std::vector<uint8_t> d = pattern(8 * 4096, 11);
	ASSERT_EQ(io_call(client, RDFS_OP_WRITE, cap.get(), 30, 8, 0, d.size(), d.data(),
			  d.size()).status, 0);

	IoResult z = io_call(client, RDFS_OP_ZERO, cap.get(), 32, 3, 0, 0);
	ASSERT_EQ(z.status, 0) << z.message;
	std::fill(d.begin() + 2 * 4096, d.begin() + 5 * 4096, 0);
	EXPECT_EQ(volume_bytes(30, 0, d.size()), d) << "ZERO acknowledged but not on the volume";
	IoResult r = io_call(client, RDFS_OP_READ, cap.get(), 30, 8, 0, d.size());
	ASSERT_EQ(r.status, 0);
	EXPECT_EQ(r.data, d);

	/* A partial write after ZERO is read-modify-written onto the zeros. */
	std::vector<uint8_t> p = pattern(10, 12);
	ASSERT_EQ(io_call(client, RDFS_OP_WRITE, cap.get(), 33, 1, 100, p.size(), p.data(),
			  p.size()).status, 0);
	std::vector<uint8_t> want(4096, 0);
	std::copy(p.begin(), p.end(), want.begin() + 100);
	EXPECT_EQ(volume_bytes(33, 0, 4096), want);
}

TEST_F(IoServerTest, ZeroNeedsAWriteCapabilityCoveringTheBlocks)
{
	start();
	Cap good(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{40, 4}});
	std::vector<uint8_t> d = pattern(4 * 4096, 13);
	ASSERT_EQ(io_call(client, RDFS_OP_WRITE, good.get(), 40, 4, 0, d.size(), d.data(),
			  d.size()).status, 0);

	Cap read_only(&cap_key, kServerId, RDFS_CAP_READ, {{40, 4}});
	IoResult r = io_call(client, RDFS_OP_ZERO, read_only.get(), 40, 4, 0, 0);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(r.message, "capability does not grant write");

	Cap narrow(&cap_key, kServerId, RDFS_CAP_WRITE, {{40, 2}});
	r = io_call(client, RDFS_OP_ZERO, narrow.get(), 40, 3, 0, 0);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(r.message, "capability does not cover the requested blocks");

	Cap forged(&wrong_key, kServerId, RDFS_CAP_WRITE, {{40, 4}});
	r = io_call(client, RDFS_OP_ZERO, forged.get(), 40, 4, 0, 0);
	EXPECT_EQ(r.status, -EACCES);
	EXPECT_EQ(r.message, "forged capability");

	Cap other(&cap_key, kServerId + 1, RDFS_CAP_WRITE, {{40, 4}});
	EXPECT_EQ(io_call(client, RDFS_OP_ZERO, other.get(), 40, 4, 0, 0).status, -EACCES);
	Cap expired(&cap_key, kServerId, RDFS_CAP_WRITE, {{40, 4}}, -1);
	EXPECT_EQ(io_call(client, RDFS_OP_ZERO, expired.get(), 40, 4, 0, 0).status, -EKEYEXPIRED);
	EXPECT_EQ(io_call(client, RDFS_OP_ZERO, nullptr, 40, 4, 0, 0).status, -EACCES);
	EXPECT_EQ(volume_bytes(40, 0, d.size()), d) << "a refused ZERO touched the volume";

	uint64_t cap_blocks = volume_capacity(vol);
	Cap wide(&cap_key, kServerId, RDFS_CAP_WRITE, {{0, cap_blocks + 10}});
	EXPECT_EQ(io_call(client, RDFS_OP_ZERO, wide.get(), cap_blocks - 1, 2, 0, 0).status,
		  -ERANGE);
	EXPECT_EQ(io_call(client, RDFS_OP_ZERO, wide.get(), 40, 0, 0, 0).status, -EINVAL);
	EXPECT_EQ(volume_bytes(40, 0, d.size()), d);
}

TEST_F(IoServerTest, VolumeInfoPingCommitAndUnknownOps)
{
	start();
	Rdfs__VolumeInfoReply *info = nullptr;
	ASSERT_EQ(rpc_call(client, RDFS_OP_VOLUME_INFO, nullptr, &rdfs__volume_info_reply__descriptor,
			   (ProtobufCMessage **)&info, 5000), 0);
	ASSERT_NE(info, nullptr);
	EXPECT_EQ(info->server_id, kServerId);
	EXPECT_EQ(info->capacity_blocks, volume_capacity(vol));
	ASSERT_EQ(info->volume_uuid.len, (size_t)VOLUME_UUID_LEN);
	EXPECT_EQ(memcmp(info->volume_uuid.data, volume_uuid(vol), VOLUME_UUID_LEN), 0);
	rdfs__volume_info_reply__free_unpacked(info, nullptr);

	EXPECT_EQ(rpc_call(client, RDFS_OP_PING, nullptr, nullptr, nullptr, 5000), 0);
	EXPECT_EQ(rpc_call(client, RDFS_OP_IO_COMMIT, nullptr, nullptr, nullptr, 5000), 0);
	Rdfs__GetattrReq ga = RDFS__GETATTR_REQ__INIT;
	EXPECT_EQ(rpc_call(client, RDFS_OP_GETATTR, &ga.base, nullptr, nullptr, 5000), -EOPNOTSUPP);
	uint32_t id = 0;
	EXPECT_EQ(ios_server_id(server, &id), 0);
	EXPECT_EQ(id, kServerId);
}

TEST_F(IoServerTest, UndecodableIoReqIsRefused)
{
	start();
	/* AuthChallenge's field 1 holds bytes where IoReq expects a Capability message. */
	Rdfs__AuthChallenge bogus = RDFS__AUTH_CHALLENGE__INIT;
	uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	bogus.nonce.data = junk;
	bogus.nonce.len = sizeof(junk);
	EXPECT_EQ(rpc_call(client, RDFS_OP_READ, &bogus.base, nullptr, nullptr, 5000), -EBADMSG);
	EXPECT_EQ(rpc_call(client, RDFS_OP_PING, nullptr, nullptr, nullptr, 5000), 0);
}

TEST_F(IoServerTest, ConcurrentClientsWritingOneBlockAllLand)
{
	start();
	const int kClients = 4, kPerClient = 64;
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{50, 1}});
	std::vector<std::thread> threads;
	for (int t = 0; t < kClients; t++) {
		threads.emplace_back([&, t]() {
			struct rpc_client *c = nullptr;
			ASSERT_EQ(rpc_client_connect(url.c_str(), &secret, "client", 5000, &c), 0);
			/* Client t writes 16-byte runs t, t + kClients, ... of block 50. */
			for (int i = 0; i < kPerClient; i++) {
				uint32_t run = (uint32_t)(i * kClients + t);
				std::vector<uint8_t> d(16, (uint8_t)(run + 1));
				IoResult r = io_call(c, RDFS_OP_WRITE, cap.get(), 50, 1, run * 16,
						     16, d.data(), 16, i % 2);
				ASSERT_EQ(r.status, 0) << r.message;
			}
			rpc_client_close(c);
		});
	}
	for (auto &t : threads)
		t.join();
	std::vector<uint8_t> got = volume_bytes(50, 0, 4096);
	for (uint32_t run = 0; run < kClients * kPerClient; run++)
		for (int i = 0; i < 16; i++)
			ASSERT_EQ(got[run * 16 + i], (uint8_t)(run + 1)) << "run " << run << " lost";
}

TEST_F(IoServerTest, AdvertisedUrl)
{
	struct ios_options o = {};
	o.vol = vol;
	o.listen = "tcp://0.0.0.0:0";
	o.fixed_server_id = kServerId;
	o.secret = &secret;
	o.cap_key = &cap_key;
	o.io_threads = 1;
	struct ios_server *s = nullptr;
	ASSERT_EQ(ios_server_create(&o, &s), 0);
	std::string bound = ios_server_url(s, 0);
	std::string port = bound.substr(bound.rfind(':'));
	EXPECT_EQ(std::string(ios_server_advertise_url(s)), "tcp://127.0.0.1" + port)
		<< "a wildcard listener advertises the loopback address";
	ios_server_destroy(s);

	o.advertise = "tcp://io7.example:7100";
	ASSERT_EQ(ios_server_create(&o, &s), 0);
	EXPECT_STREQ(ios_server_advertise_url(s), "tcp://io7.example:7100");
	ios_server_destroy(s);

	o.listen = "bogus://x";
	EXPECT_LT(ios_server_create(&o, &s), 0);
}

/* Raw TCP to the server's port, for traffic no rpc_client would send. */
int raw_connect(const std::string &url)
{
	int port = atoi(strrchr(url.c_str(), ':') + 1);
	struct sockaddr_in sa = {};
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT_GE(fd, 0);
	EXPECT_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

TEST_F(IoServerTest, GarbageAndWrongSecretLeaveTheServerServing)
{
	start();
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 4}});

	/* Random bytes. */
	int fd = raw_connect(url);
	std::vector<uint8_t> g = pattern(10000, 11);
	EXPECT_EQ(send(fd, g.data(), g.size(), MSG_NOSIGNAL), (ssize_t)g.size());
	/* A well-formed header announcing more than the limits. */
	int fd2 = raw_connect(url);
	struct rdfs_frame_hdr h = {};
	h.magic = RDFS_FRAME_MAGIC;
	h.version = RDFS_FRAME_VERSION;
	h.opcode = RDFS_OP_WRITE;
	h.body_len = 0xffffffffu;
	h.data_len = 0xffffffffu;
	uint8_t hb[RDFS_FRAME_HDR_LEN];
	rdfs_frame_hdr_encode(&h, hb);
	EXPECT_EQ(send(fd2, hb, sizeof(hb), MSG_NOSIGNAL), (ssize_t)sizeof(hb));
	/* A truncated header, then silence (connection left open). */
	int fd3 = raw_connect(url);
	EXPECT_EQ(send(fd3, hb, 10, MSG_NOSIGNAL), 10);
	/* Connect and vanish. */
	close(raw_connect(url));

	/* The wrong cluster secret. */
	struct auth_secret bad;
	auth_secret_from_bytes(&bad, "some-other-cluster-secret-000000", 32);
	struct rpc_client *intruder = nullptr;
	EXPECT_EQ(rpc_client_connect(url.c_str(), &bad, "client", 5000, &intruder), -EACCES);

	/* The established client and a new one are both served. */
	std::vector<uint8_t> d = pattern(4096, 12);
	EXPECT_EQ(io_call(client, RDFS_OP_WRITE, cap.get(), 1, 1, 0, 4096, d.data(), 4096).status, 0);
	struct rpc_client *fresh = nullptr;
	ASSERT_EQ(rpc_client_connect(url.c_str(), &secret, "client", 5000, &fresh), 0);
	IoResult r = io_call(fresh, RDFS_OP_READ, cap.get(), 1, 1, 0, 4096);
	EXPECT_EQ(r.status, 0);
	EXPECT_EQ(r.data, d);
	rpc_client_close(fresh);
	close(fd);
	close(fd2);
	close(fd3);
}

TEST_F(IoServerTest, StopAnswersAcceptedWritesAndFlushes)
{
	start();
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 64}});
	std::vector<std::vector<uint8_t>> data;
	std::vector<struct rpc_pending *> pend;
	std::vector<Rdfs__IoReq> reqs(32);
	std::vector<struct iovec> iovs(32);
	for (int i = 0; i < 32; i++)
		data.push_back(pattern(4096, 100 + i));
	for (int i = 0; i < 32; i++) {
		rdfs__io_req__init(&reqs[i]);
		reqs[i].cap = cap.get();
		reqs[i].first_block = i;
		reqs[i].block_count = 1;
		reqs[i].length = 4096;
		iovs[i] = { data[i].data(), 4096 };
		struct rpc_pending *p = nullptr;
		ASSERT_EQ(rpc_call_start(client, RDFS_OP_WRITE, &reqs[i].base, &iovs[i], 1, &p), 0);
		pend.push_back(p);
	}
	std::vector<int> acked(32, 0);
	auto collect = [&](int i) {
		struct rpc_reply rep = {};
		if (rpc_call_wait(pend[i], 10000, &rep) == 0) {
			acked[i] = rep.status == 0;
			EXPECT_TRUE(rep.status == 0 || rep.status == -ESHUTDOWN) << rep.status;
			rpc_reply_release(&rep);
		}
	};
	for (int i = 0; i < 5; i++)
		collect(i);
	ios_server_stop(server);	/* with the rest in flight */
	loop.join();
	EXPECT_EQ(run_ret, 0);
	ios_server_destroy(server);	/* closes the connections: no reply stays pending */
	server = nullptr;
	for (int i = 5; i < 32; i++)
		collect(i);
	for (int i = 0; i < 5; i++)
		EXPECT_TRUE(acked[i]);
	for (int i = 0; i < 32; i++) {
		if (acked[i]) {
			EXPECT_EQ(volume_bytes(i, 0, 4096), data[i]) << "acknowledged block " << i;
		}
	}
}

/*
 * A full file system under the volume: the WRITE that hits it gets ENOSPC and
 * the server keeps serving. Runs in a child with a private mount namespace
 * holding a 2 MiB tmpfs; skipped where mounting is not allowed.
 */
int full_disk_child(const std::string &dir)
{
	struct auth_secret secret, cap_key;
	auth_secret_from_bytes(&secret, "cluster-secret-for-tests-0123456789", 35);
	auth_secret_from_bytes(&cap_key, "capability-key-for-tests-0123456789", 35);
	if (unshare(CLONE_NEWNS) || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
	    mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=2m"))
		return 77;
	std::string path = dir + "/vol";
	struct volume_open_opts vo = {};
	vo.path = path.c_str();
	vo.create_size = 64u << 20;		/* sparse: far more than the 2 MiB behind it */
	struct volume *vol = nullptr;
	if (volume_open(&vo, &vol))
		return 1;
	struct ios_options o = {};
	o.vol = vol;
	o.listen = "tcp://127.0.0.1:0";
	o.fixed_server_id = kServerId;
	o.secret = &secret;
	o.cap_key = &cap_key;
	o.io_threads = 2;
	struct ios_server *server = nullptr;
	if (ios_server_create(&o, &server))
		return 2;
	std::thread loop([server]() { ios_server_run(server); });
	struct rpc_client *c = nullptr;
	if (rpc_client_connect(ios_server_url(server, 0), &secret, "client", 5000, &c))
		return 3;
	int rc = 0;
	{
		Cap cap(&cap_key, kServerId, RDFS_CAP_READ | RDFS_CAP_WRITE, {{0, 4096}});
		std::vector<uint8_t> d = pattern(256 * 4096, 1);
		int status = 0;
		uint64_t block = 0;
		for (; block < 4096 && status == 0; block += 256)
			status = io_call(c, RDFS_OP_WRITE, cap.get(), block, 256, 0, d.size(),
					 d.data(), d.size()).status;
		if (status != -ENOSPC)
			rc = 4;
		else if (io_call(c, RDFS_OP_READ, cap.get(), 0, 256, 0, d.size()).data != d)
			rc = 5;	/* what was acknowledged before the disk filled is intact */
	}
	rpc_client_close(c);
	ios_server_stop(server);
	loop.join();
	ios_server_destroy(server);
	volume_close(vol);
	umount(dir.c_str());
	return rc;
}

TEST(IoServerFullDisk, WriteGetsEnospcAndServerKeepsServing)
{
	TempDir dir;
	fflush(nullptr);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0)
		_exit(full_disk_child(dir.path()));
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT_TRUE(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		GTEST_SKIP() << "cannot mount a private tmpfs here";
	EXPECT_EQ(WEXITSTATUS(st), 0) << "step that failed (see full_disk_child)";
}

/* ------------------------------------------------------------ registration */

/* A stand-in metaserver: answers REGISTER with a fixed id and PINGs. */
class FakeMetaserver {
public:
	FakeMetaserver(const struct auth_secret *secret, const struct auth_secret *cap_key,
		       uint32_t id, const char *listen)
		: id_(id)
	{
		const char *urls[] = { listen, nullptr };
		struct auth_keys keys;

		auth_keys_derive(&keys, secret, cap_key);
		EXPECT_EQ(rpc_server_create(urls, &keys, &srv_), 0);
		thread_ = std::thread([this]() { run(); });
	}
	~FakeMetaserver()
	{
		stop_ = true;
		rpc_server_wake(srv_);
		thread_.join();
		rpc_server_destroy(srv_);
	}
	std::string url() const { return rpc_server_url(srv_, 0); }
	std::atomic<int> registers{0}, pings{0}, closed{0}, pristine_registers{0};
	std::string reg_url, reg_name, reg_role;
	std::vector<uint8_t> reg_uuid;
	uint64_t reg_capacity = 0;

private:
	void run()
	{
		while (!stop_) {
			struct rpc_request req;
			enum rpc_server_event ev = rpc_server_next(srv_, &req, 200);
			if (ev == RPC_SRV_CLOSED) {
				closed++;
				rpc_request_done(&req);
				continue;
			}
			if (ev != RPC_SRV_REQUEST)
				continue;
			if (req.msg->hdr.opcode == RDFS_OP_REGISTER) {
				Rdfs__RegisterReq *r = rdfs__register_req__unpack(
					nullptr, req.msg->hdr.body_len, req.msg->body);
				if (r) {
					reg_url = r->url;
					reg_name = r->name;
					reg_role = req.peer->id;
					reg_uuid.assign(r->volume_uuid.data,
							r->volume_uuid.data + r->volume_uuid.len);
					reg_capacity = r->capacity_blocks;
					if (r->pristine)
						pristine_registers++;
					rdfs__register_req__free_unpacked(r, nullptr);
				}
				Rdfs__RegisterReply rep = RDFS__REGISTER_REPLY__INIT;
				rep.server_id = id_;
				rpc_server_reply(&req, 0, &rep.base, nullptr, 0);
				registers++;
			} else if (req.msg->hdr.opcode == RDFS_OP_PING) {
				rpc_server_reply(&req, 0, nullptr, nullptr, 0);
				pings++;
			} else {
				rpc_server_reply_error(&req, -EOPNOTSUPP, "fake");
			}
			rpc_request_done(&req);
		}
	}

	uint32_t id_;
	struct rpc_server *srv_ = nullptr;
	std::thread thread_;
	std::atomic<bool> stop_{false};
};

bool wait_for(const std::function<bool()> &cond, int ms = 10000)
{
	for (int i = 0; i < ms / 10; i++) {
		if (cond())
			return true;
		usleep(10000);
	}
	return cond();
}

TEST_F(IoServerTest, NotRegisteredYetGetsEagain)
{
	/* A metaserver URL where nothing listens: registration keeps failing. */
	start("tcp://127.0.0.1:1");
	Cap cap(&cap_key, kServerId, RDFS_CAP_READ, {{0, 4}});
	IoResult r = io_call(client, RDFS_OP_READ, cap.get(), 0, 1, 0, 4096);
	EXPECT_EQ(r.status, -EAGAIN);
	EXPECT_EQ(r.message, "not registered yet");
	uint32_t id;
	EXPECT_EQ(ios_server_id(server, &id), -EAGAIN);
	/* The flag leaves the disk before any metaserver hears of the volume. */
	EXPECT_FALSE(volume_is_pristine(vol));
	/* The small ops work regardless. */
	EXPECT_EQ(rpc_call(client, RDFS_OP_PING, nullptr, nullptr, nullptr, 5000), 0);
}

TEST_F(IoServerTest, ServingWithoutAMetaserverAlsoEndsPristine)
{
	ASSERT_TRUE(volume_is_pristine(vol));
	start();
	/* clients may write with a fixed id too: the blocks are no longer known zeros */
	EXPECT_FALSE(volume_is_pristine(vol));
}

TEST_F(IoServerTest, RegistersKeepsPingingAndReregisters)
{
	auto ms = std::make_unique<FakeMetaserver>(&secret, &cap_key, 42, "tcp://127.0.0.1:0");
	std::string ms_url = ms->url();
	start(ms_url.c_str(), 50);

	uint32_t id = 0;
	ASSERT_TRUE(wait_for([&]() { return ios_server_id(server, &id) == 0; }));
	EXPECT_EQ(id, 42u);
	EXPECT_EQ(ms->reg_role, "server") << "registers with the server key";
	EXPECT_EQ(ms->reg_url, url) << "a 127.0.0.1 listener advertises itself";
	EXPECT_EQ(ms->reg_name, "test-ios");
	EXPECT_EQ(ms->reg_capacity, volume_capacity(vol));
	EXPECT_EQ(ms->reg_uuid, std::vector<uint8_t>(volume_uuid(vol), volume_uuid(vol) + 16));
	/* The volume was created here: offered as pristine, once, and no longer marked so. */
	EXPECT_EQ(ms->pristine_registers, 1);
	EXPECT_FALSE(volume_is_pristine(vol));
	/* The registration connection stays open (rpc answers its PINGs itself). */
	usleep(300 * 1000);
	EXPECT_EQ(ms->closed, 0);
	EXPECT_EQ(ms->registers, 1);

	/* I/O with a capability for the assigned id works; the fixed id is not used. */
	Cap cap(&cap_key, 42, RDFS_CAP_READ, {{0, 4}});
	EXPECT_EQ(io_call(client, RDFS_OP_READ, cap.get(), 0, 1, 0, 4096).status, 0);
	Cap stale(&cap_key, kServerId, RDFS_CAP_READ, {{0, 4}});
	EXPECT_EQ(io_call(client, RDFS_OP_READ, stale.get(), 0, 1, 0, 4096).status, -EACCES);

	/* The metaserver restarts on the same port: the I/O server registers again. */
	ms.reset();
	ms = std::make_unique<FakeMetaserver>(&secret, &cap_key, 42, ms_url.c_str());
	EXPECT_TRUE(wait_for([&]() { return ms->registers >= 1; }, 20000));
	EXPECT_EQ(ms->pristine_registers, 0) << "clients may have written since";
	/* Serving never stopped. */
	EXPECT_EQ(io_call(client, RDFS_OP_READ, cap.get(), 0, 1, 0, 4096).status, 0);
	stop();
}

}  // namespace
