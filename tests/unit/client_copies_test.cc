// SPDX-License-Identifier: MIT
//
// client_copies_test.cc - files with several copies on a real cluster: an I/O
// server killed in the middle of a sequential read or of a write + fsync costs
// the application nothing (the bytes come back exact), and a copy that missed
// writes while its server was down is never read again, from any client.
#include <fcntl.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "client_cluster.h"

extern "C" {
#include "frame.h"
}

namespace {

using rdfs_test::pattern;

constexpr uint64_t MiB = 1 << 20;
struct rdfs_cred root = { 0, 0, 0, {} };

struct rdfs_client *client_with(rdfs_test::Cluster *cl, int readahead_kb, int write_behind_kb,
				int stable)
{
	struct rdfs_client_opts o = cl->opts();
	struct rdfs_client *c = nullptr;

	o.readahead_kb = readahead_kb;
	o.write_behind_kb = write_behind_kb;
	o.write_stable = stable;
	for (int i = 0; i < 100 && rdfs_client_open(&o, &c) != 0; i++)
		usleep(100000);
	return c;
}

// Create @name with @copies copies (set on the empty file, before any block).
struct rdfs_file *create_copies(struct rdfs_client *c, const std::string &name, int copies)
{
	struct rdfs_file *f = nullptr;
	struct stat st;
	std::string v = std::to_string(copies);

	EXPECT_EQ(rdfs_create(c, &root, RDFS_ROOT_INO, name.c_str(), 0644,
			      O_RDWR | O_CREAT | O_EXCL, &st, &f), 0);
	EXPECT_EQ(rdfs_setxattr(c, &root, st.st_ino, RDFS_COPIES_XATTR, v.data(), v.size(), 0), 0);
	return f;
}

struct rdfs_file *open_name(struct rdfs_client *c, const std::string &name, int flags)
{
	struct rdfs_file *f = nullptr;
	struct stat st;

	EXPECT_EQ(rdfs_lookup(c, &root, RDFS_ROOT_INO, name.c_str(), &st), 0);
	EXPECT_EQ(rdfs_open(c, &root, st.st_ino, flags, &st, &f), 0);
	return f;
}

// A client as a server host connects: with the server key, derived from the
// capability key (what rdfs drain and rdfs rebalance need). nullptr on failure.
struct rdfs_client *admin_client(rdfs_test::Cluster *cl)
{
	struct rdfs_client_opts o = cl->opts();
	struct auth_secret cap;
	struct auth_identity id;
	struct rdfs_client *c = nullptr;

	if (auth_secret_load(cl->cap_path.c_str(), &cap))
		return nullptr;
	auth_identity_server(&cap, &id);
	o.secret = id.key;
	o.role = "server";
	return rdfs_client_open(&o, &c) ? nullptr : c;
}

// The whole file through a fresh open of @c: its bytes, or the error of the first read.
int read_all(struct rdfs_client *c, const std::string &name, size_t size,
	     std::vector<uint8_t> *out)
{
	struct rdfs_file *f = open_name(c, name, O_RDONLY);
	int err = 0;

	if (!f)
		return -ENOENT;
	out->assign(size, 0);
	for (size_t off = 0; off < size && !err; off += MiB) {
		ssize_t n = rdfs_pread(f, out->data() + off, std::min<size_t>(MiB, size - off), off);

		if (n < 0)
			err = (int)n;
		else if ((size_t)n != std::min<size_t>(MiB, size - off))
			err = -EIO;
	}
	rdfs_release(f);
	return err;
}

// The index (ios<i>) of the I/O server with the lowest id: the first copy of
// every block it holds, which readers ask for every other MiB (seg_pick_copy).
int lowest_id_server(rdfs_test::Cluster *cl)
{
	struct rdfs_client *c = cl->client();
	struct rdfs_server_info s[8];
	int n = c ? rdfs_server_list(c, s, 8) : -1;

	if (c)
		rdfs_client_close(c);
	EXPECT_GT(n, 0);
	return n > 0 ? atoi(s[0].name + 3) : 0;
}

size_t first_difference(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b)
{
	return std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin();
}

} // namespace

// Three I/O servers, two copies: whichever server dies, every chunk has a copy left.
TEST(ClientCopies, ServerKilledMidReadCostsTheReaderNothing)
{
	rdfs_test::Cluster cl;

	ASSERT_TRUE(cl.start(3)) << cl.dir;
	struct rdfs_client *w = client_with(&cl, 0, 0, 1), *r = client_with(&cl, 4096, 0, 1);
	ASSERT_NE(w, nullptr);
	ASSERT_NE(r, nullptr);
	auto data = pattern(32 * MiB + 777, 31);
	struct rdfs_file *f = create_copies(w, "big", 2);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);

	struct rdfs_file *g = open_name(r, "big", O_RDONLY);
	std::vector<uint8_t> back(data.size());
	size_t off = 0;
	// a third of the way in (read-ahead running), an I/O server dies
	for (; off < data.size() / 3; off += 256 * 1024)
		ASSERT_EQ(rdfs_pread(g, back.data() + off, 256 * 1024, off), 256 * 1024);
	cl.kill_ioserver(lowest_id_server(&cl));
	for (; off < data.size(); off += 256 * 1024) {
		size_t n = std::min<size_t>(256 * 1024, data.size() - off);

		ASSERT_EQ(rdfs_pread(g, back.data() + off, n, off), (ssize_t)n) << "at " << off;
	}
	EXPECT_EQ(first_difference(back, data), data.size());
	EXPECT_EQ(rdfs_release(g), 0);

	// and a reader that starts after the death reads it all, from the copies left
	std::vector<uint8_t> again;
	struct rdfs_client *late = client_with(&cl, 0, 0, 1);
	EXPECT_EQ(read_all(late, "big", data.size(), &again), 0);
	EXPECT_EQ(first_difference(again, data), data.size());
	rdfs_client_close(late);
	rdfs_client_close(w);
	rdfs_client_close(r);
}

// Killed in the middle of a stream of writes, before fsync: fsync and close
// succeed, and another client reads every byte. Unstable writes (IO_COMMIT at
// fsync) and stable ones, with write-behind.
class ClientCopiesWrite : public ::testing::TestWithParam<int> {};

TEST_P(ClientCopiesWrite, ServerKilledMidWriteAndFsyncCostsTheWriterNothing)
{
	rdfs_test::Cluster cl;
	int stable = GetParam();

	ASSERT_TRUE(cl.start(3)) << cl.dir;
	struct rdfs_client *w = client_with(&cl, 0, 8192, stable);
	ASSERT_NE(w, nullptr);
	auto data = pattern(24 * MiB, 32);
	struct rdfs_file *f = create_copies(w, "stream", 2);
	int victim = lowest_id_server(&cl);
	for (int i = 0; i < 24; i++) {
		if (i == 10)
			cl.kill_ioserver(victim);
		ASSERT_EQ(rdfs_pwrite(f, data.data() + i * MiB, MiB, (uint64_t)i * MiB),
			  (ssize_t)MiB) << "MiB " << i;
	}
	EXPECT_EQ(rdfs_fsync(f, 0), 0);
	EXPECT_EQ(rdfs_release(f), 0);

	struct rdfs_client *r = client_with(&cl, 1024, 0, 1);
	std::vector<uint8_t> back;
	ASSERT_EQ(read_all(r, "stream", data.size(), &back), 0);
	EXPECT_EQ(first_difference(back, data), data.size());
	rdfs_client_close(r);
	rdfs_client_close(w);
}

INSTANTIATE_TEST_SUITE_P(StableAndUnstable, ClientCopiesWrite, ::testing::Values(1, 0),
			 [](const ::testing::TestParamInfo<int> &p) {
				 return p.param ? "Stable" : "Unstable";
			 });

// Two servers, two copies. Server A is stopped, the file rewritten, A started
// again: its copy is stale. Every reader gets the new bytes; with only A left,
// a read fails rather than return the old ones. The rebuilder would repair A's
// copy in its next pass (10 s by default, which a slow run such as TSan's
// reaches): its passes are an hour apart here, and a repaired copy may still
// be read, with the new bytes only.
TEST(ClientCopies, StaleCopyIsNeverReadFromAnyClient)
{
	rdfs_test::Cluster cl;

	cl.ms_args = { "--rebuild-interval", "3600" };
	ASSERT_TRUE(cl.start(2)) << cl.dir;
	struct rdfs_client *w = client_with(&cl, 0, 0, 1);
	struct rdfs_client *old = client_with(&cl, 0, 0, 1);
	ASSERT_NE(w, nullptr);
	ASSERT_NE(old, nullptr);
	auto v1 = pattern(6 * MiB, 41), v2 = pattern(6 * MiB, 42);
	struct rdfs_file *f = create_copies(w, "doc", 2);
	ASSERT_EQ(rdfs_pwrite(f, v1.data(), v1.size(), 0), (ssize_t)v1.size());
	ASSERT_EQ(rdfs_release(f), 0);

	// a reader that holds the layout (and capabilities) from before
	struct rdfs_file *o = open_name(old, "doc", O_RDONLY);
	std::vector<uint8_t> buf(v1.size());
	ASSERT_EQ(rdfs_pread(o, buf.data(), buf.size(), 0), (ssize_t)buf.size());
	ASSERT_EQ(first_difference(buf, v1), v1.size());

	int a = lowest_id_server(&cl);
	cl.kill_ioserver(a);
	f = open_name(w, "doc", O_RDWR);
	ASSERT_EQ(rdfs_pwrite(f, v2.data(), v2.size(), 0), (ssize_t)v2.size());
	ASSERT_EQ(rdfs_fsync(f, 0), 0);
	ASSERT_EQ(rdfs_release(f), 0);
	cl.start_ioserver(a);
	ASSERT_TRUE(cl.wait_up(2));

	for (int round = 0; round < 3; round++) {
		std::vector<uint8_t> back;
		struct rdfs_client *fresh = client_with(&cl, round * 1024, 0, 1);

		ASSERT_EQ(read_all(fresh, "doc", v2.size(), &back), 0) << "round " << round;
		EXPECT_EQ(first_difference(back, v2), v2.size()) << "round " << round;
		rdfs_client_close(fresh);
	}
	// the old reader's cached copy is refused (A's epoch moved on): new bytes
	ssize_t n = rdfs_pread(o, buf.data(), buf.size(), 0);
	ASSERT_EQ(n, (ssize_t)buf.size());
	EXPECT_EQ(first_difference(buf, v2), v2.size());

	// only the stale copy left: an error, never the old bytes
	cl.kill_ioserver(1 - a);
	std::vector<uint8_t> back;
	struct rdfs_client *last = client_with(&cl, 0, 0, 1);
	int err = read_all(last, "doc", v2.size(), &back);
	if (err == 0)
		EXPECT_EQ(first_difference(back, v2), v2.size()) << "a repaired copy, but not the new bytes";
	else
		EXPECT_EQ(err, -EIO);
	size_t old_bytes = 0;
	for (size_t i = 0; i + 4096 <= back.size(); i += 4096)
		old_bytes += std::equal(back.begin() + i, back.begin() + i + 4096, v1.begin() + i);
	EXPECT_EQ(old_bytes, 0u) << "blocks of the stale copy were returned";
	rdfs_release(o);
	rdfs_client_close(last);
	rdfs_client_close(old);
	rdfs_client_close(w);
}

// The rebuilder, for real: a server dies, the metaserver (grace 0) copies its
// chunks onto the one left over server to server; then the other original
// server dies too, and every byte is read back from the rebuilt copies.
TEST(ClientCopies, DeadServerIsRebuiltElsewhereAndTheCopiesHoldTheBytes)
{
	rdfs_test::Cluster cl;

	cl.ms_args = { "--rebuild-grace", "0", "--rebuild-interval", "1" };
	ASSERT_TRUE(cl.start(3)) << cl.dir;
	struct rdfs_client *w = client_with(&cl, 0, 0, 1);
	ASSERT_NE(w, nullptr);
	auto data = pattern(8 * MiB + 5000, 51);
	struct rdfs_file *f = create_copies(w, "kept", 2);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);
	struct stat st;
	ASSERT_EQ(rdfs_lookup(w, &root, RDFS_ROOT_INO, "kept", &st), 0);

	int first = lowest_id_server(&cl);
	struct rdfs_copies_status cs = {};
	ASSERT_EQ(rdfs_copies_status(w, &cs), 0);
	uint64_t passes = cs.passes;
	cl.kill_ioserver(first);
	// until a pass begun after the death finds every chunk with its copies (bounded)
	int rounds = 0;
	for (; rounds < 600; rounds++) {
		ASSERT_EQ(rdfs_copies_status(w, &cs), 0);
		if (cs.passes >= passes + 2 && cs.chunks_under == 0 && cs.chunks_building == 0)
			break;
		usleep(100000);
	}
	ASSERT_EQ(cs.chunks_under, 0u) << "not rebuilt after " << rounds / 10 << " s";
	EXPECT_EQ(cs.chunks_lost, 0u);
	// checked through the metaserver: every block has two current copies on live servers
	struct rdfs_server_info srv[8];
	int ns = rdfs_server_list(w, srv, 8);
	ASSERT_EQ(ns, 3);
	std::vector<struct rdfs_extent_info> ext(4096);
	int n = rdfs_layout(w, &root, st.st_ino, 0, data.size(), ext.data(), (int)ext.size());
	ASSERT_GT(n, 0);
	std::map<uint64_t, std::set<uint32_t>> per;
	for (int i = 0; i < n; i++) {
		EXPECT_FALSE(ext[i].stale);
		for (uint64_t b = 0; b < ext[i].length / 4096; b++)
			per[ext[i].file_offset / 4096 + b].insert(ext[i].server_id);
	}
	uint32_t dead_id = 0;
	for (int i = 0; i < ns; i++)
		if (!srv[i].up)
			dead_id = srv[i].id;
	ASSERT_NE(dead_id, 0u);
	for (uint64_t b = 0; b < (data.size() + 4095) / 4096; b++) {
		std::set<uint32_t> live = per[b];
		live.erase(dead_id);
		EXPECT_EQ(live.size(), 2u) << "block " << b;
	}

	// the second server of the original pair dies: the rebuilt copies must hold the bytes
	int second = -1;
	for (int i = 0; i < 3; i++)
		if (i != first && cl.ios_pids[i] > 0 && second < 0)
			second = i;
	// kill the live server that is not the one the rebuilder filled: any chunk
	// that lost its first copy now has only its rebuilt one (and the survivor)
	cl.kill_ioserver(second);
	std::vector<uint8_t> back;
	struct rdfs_client *r = client_with(&cl, 0, 0, 1);
	int err = read_all(r, "kept", data.size(), &back);
	// blocks whose two live copies were on (rebuilt target, survivor) read back;
	// the ones on (second, target) read from the target: either way, all of them
	EXPECT_EQ(err, 0);
	EXPECT_EQ(first_difference(back, data), data.size());
	rdfs_client_close(r);
	rdfs_client_close(w);
}

// rdfs drain, for real: every block moves off the drained server (online, with
// a file open), which ends up holding nothing; every file reads back identical,
// also once the drained server is stopped.
TEST(ClientCopies, DrainEmptiesTheServerAndEveryFileReadsBack)
{
	rdfs_test::Cluster cl;

	cl.ms_args = { "--rebuild-interval", "1" };
	ASSERT_TRUE(cl.start(3)) << cl.dir;
	struct rdfs_client *w = client_with(&cl, 0, 0, 1);
	ASSERT_NE(w, nullptr);
	auto one = pattern(6 * MiB + 100, 61), two = pattern(5 * MiB, 62);
	struct rdfs_file *f = create_copies(w, "one", 1);
	ASSERT_EQ(rdfs_pwrite(f, one.data(), one.size(), 0), (ssize_t)one.size());
	ASSERT_EQ(rdfs_release(f), 0);
	f = create_copies(w, "two", 2);
	ASSERT_EQ(rdfs_pwrite(f, two.data(), two.size(), 0), (ssize_t)two.size());
	ASSERT_EQ(rdfs_release(f), 0);
	// a reader holds "one" open across the drain
	struct rdfs_file *open_one = open_name(w, "one", O_RDONLY);

	struct rdfs_client *admin = admin_client(&cl);
	ASSERT_NE(admin, nullptr);
	// not with the cluster secret
	EXPECT_EQ(rdfs_drain(w, 1, 1), -EPERM);

	int victim = lowest_id_server(&cl);
	struct rdfs_server_info srv[8];
	ASSERT_EQ(rdfs_server_list(w, srv, 8), 3);
	uint32_t vid = srv[0].id;
	ASSERT_GT(srv[0].capacity_blocks - srv[0].free_blocks, 0u);
	ASSERT_EQ(rdfs_drain(admin, vid, 1), 0);
	int rounds = 0;
	for (; rounds < 600; rounds++) {
		ASSERT_EQ(rdfs_server_list(w, srv, 8), 3);
		if (srv[0].capacity_blocks == srv[0].free_blocks)
			break;
		usleep(100000);
	}
	ASSERT_EQ(srv[0].capacity_blocks, srv[0].free_blocks)
		<< "still used after " << rounds / 10 << " s";
	EXPECT_TRUE(srv[0].draining);

	// the open reader goes on, and with the drained server stopped all reads back
	std::vector<uint8_t> buf(one.size());
	ASSERT_EQ(rdfs_pread(open_one, buf.data(), buf.size(), 0), (ssize_t)buf.size());
	EXPECT_EQ(first_difference(buf, one), one.size());
	EXPECT_EQ(rdfs_release(open_one), 0);
	cl.kill_ioserver(victim);
	struct rdfs_client *r = client_with(&cl, 0, 0, 1);
	std::vector<uint8_t> back;
	ASSERT_EQ(read_all(r, "one", one.size(), &back), 0);
	EXPECT_EQ(first_difference(back, one), one.size());
	ASSERT_EQ(read_all(r, "two", two.size(), &back), 0);
	EXPECT_EQ(first_difference(back, two), two.size());
	rdfs_client_close(r);
	rdfs_client_close(admin);
	rdfs_client_close(w);
}

// rdfs rebalance, for real: two servers filled, a third added empty; the
// rebalance ends with every server within +-5 points of the cluster's usage,
// while the file it moves first (the lowest inode) is open for writing and
// rewritten throughout; every file (one copy and two) reads back identical
// from a fresh client.
TEST(ClientCopies, RebalanceEvensOutANewServerWhileAFileIsWritten)
{
	rdfs_test::Cluster cl;

	cl.ms_args = { "--rebuild-interval", "1" };
	ASSERT_TRUE(cl.start(2, "64m")) << cl.dir;
	struct rdfs_client *w = client_with(&cl, 0, 0, 1);
	ASSERT_NE(w, nullptr);
	auto one = pattern(24 * MiB + 100, 91), two = pattern(12 * MiB, 92);
	// the writer keeps "one" open across the rebalance, rewriting it
	struct rdfs_file *writer = create_copies(w, "one", 1);
	ASSERT_EQ(rdfs_pwrite(writer, one.data(), one.size(), 0), (ssize_t)one.size());
	ASSERT_EQ(rdfs_fsync(writer, 0), 0);
	struct rdfs_file *f = create_copies(w, "two", 2);
	ASSERT_EQ(rdfs_pwrite(f, two.data(), two.size(), 0), (ssize_t)two.size());
	ASSERT_EQ(rdfs_release(f), 0);

	// the third server joins
	cl.ios_pids.push_back(-1);
	cl.ios_ports.push_back(rdfs_test::free_port());
	cl.start_ioserver(2);
	ASSERT_TRUE(cl.wait_up(3));

	struct rdfs_client *admin = admin_client(&cl);
	ASSERT_NE(admin, nullptr);
	EXPECT_EQ(rdfs_rebalance(w, 1, 10), -EPERM) << "not with the cluster secret";
	EXPECT_EQ(rdfs_rebalance(admin, 1, 101), -EINVAL);
	ASSERT_EQ(rdfs_rebalance(admin, 1, 10), 0);

	struct rdfs_copies_status cs = {};
	int rounds = 0, writes = 0;
	for (; rounds < 600; rounds++) {
		ASSERT_EQ(rdfs_copies_status(w, &cs), 0);
		if (!cs.rebalancing)
			break;
		// 64 KiB rewritten in each MiB of the file in turn, new bytes each time
		size_t off = (size_t)rounds * MiB % (24 * MiB);
		for (size_t i = 0; i < 64 * 1024; i++)
			one[off + i] = (uint8_t)(one[off + i] + 1);
		ASSERT_EQ(rdfs_pwrite(writer, one.data() + off, 64 * 1024, off), 64 * 1024)
			<< "a write during the rebalance";
		writes++;
		usleep(100000);
	}
	ASSERT_FALSE(cs.rebalancing) << "still rebalancing after " << rounds / 10 << " s";
	EXPECT_GT(writes, 0);
	EXPECT_EQ(cs.rebalance_outside, 0u);
	EXPECT_GT(cs.rebalance_bytes_moved, 0u);

	// within the band: every server within 5 points of the cluster's fraction
	struct rdfs_server_info srv[8];
	ASSERT_EQ(rdfs_server_list(w, srv, 8), 3);
	uint64_t used = 0, capacity = 0;
	for (int i = 0; i < 3; i++) {
		used += srv[i].capacity_blocks - srv[i].free_blocks;
		capacity += srv[i].capacity_blocks;
	}
	double mean = (double)used / (double)capacity;
	for (int i = 0; i < 3; i++) {
		double frac = (double)(srv[i].capacity_blocks - srv[i].free_blocks) /
			      (double)srv[i].capacity_blocks;

		EXPECT_LE(std::abs(frac - mean), 0.05) << "server " << srv[i].id;
	}

	// the writer goes on, and everything reads back from a fresh client
	for (size_t i = 0; i < MiB; i++)
		one[i] = (uint8_t)(one[i] ^ 0x5a);
	ASSERT_EQ(rdfs_pwrite(writer, one.data(), MiB, 0), (ssize_t)MiB);
	ASSERT_EQ(rdfs_fsync(writer, 0), 0);
	ASSERT_EQ(rdfs_release(writer), 0);
	// the open file was among what moved: some of it is on the new server
	struct stat st;
	ASSERT_EQ(rdfs_lookup(w, &root, RDFS_ROOT_INO, "one", &st), 0);
	std::vector<struct rdfs_extent_info> ext(4096);
	int n = rdfs_layout(w, &root, st.st_ino, 0, one.size(), ext.data(), (int)ext.size());
	ASSERT_GT(n, 0);
	uint32_t newest = std::max({ srv[0].id, srv[1].id, srv[2].id });
	EXPECT_TRUE(std::any_of(ext.begin(), ext.begin() + n,
				[&](auto &e) { return e.server_id == newest; }));
	struct rdfs_client *r = client_with(&cl, 0, 0, 1);
	std::vector<uint8_t> back;
	ASSERT_EQ(read_all(r, "one", one.size(), &back), 0);
	EXPECT_EQ(first_difference(back, one), one.size());
	ASSERT_EQ(read_all(r, "two", two.size(), &back), 0);
	EXPECT_EQ(first_difference(back, two), two.size());
	rdfs_client_close(r);
	rdfs_client_close(admin);
	rdfs_client_close(w);
}

// Failure domains, from the I/O servers' --domain to the placement: four
// servers in two racks, two copies: every block has a copy in each rack.
TEST(ClientCopies, CopiesGoToDistinctFailureDomains)
{
	rdfs_test::Cluster cl;

	for (int i = 0; i < 4; i++)
		cl.ios_args_of[i] = { "--domain", i < 2 ? "rack1" : "rack2" };
	ASSERT_TRUE(cl.start(4, "256m")) << cl.dir;
	struct rdfs_client *w = client_with(&cl, 0, 0, 1);
	ASSERT_NE(w, nullptr);
	struct rdfs_server_info srv[8];
	ASSERT_EQ(rdfs_server_list(w, srv, 8), 4);
	std::map<uint32_t, std::string> dom;
	for (int i = 0; i < 4; i++)
		dom[srv[i].id] = srv[i].domain;
	EXPECT_EQ(std::count_if(dom.begin(), dom.end(),
				[](auto &p) { return p.second == "rack1"; }), 2);
	auto data = pattern(12 * MiB, 71);
	struct rdfs_file *f = create_copies(w, "racked", 2);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);
	struct stat st;
	ASSERT_EQ(rdfs_lookup(w, &root, RDFS_ROOT_INO, "racked", &st), 0);
	std::vector<struct rdfs_extent_info> ext(4096);
	int n = rdfs_layout(w, &root, st.st_ino, 0, data.size(), ext.data(), (int)ext.size());
	ASSERT_GT(n, 0);
	std::map<uint64_t, std::set<std::string>> racks;
	std::set<uint32_t> used;
	for (int i = 0; i < n; i++) {
		used.insert(ext[i].server_id);
		for (uint64_t b = 0; b < ext[i].length / 4096; b++)
			racks[ext[i].file_offset / 4096 + b].insert(dom[ext[i].server_id]);
	}
	EXPECT_EQ(used.size(), 4u) << "every server takes a share";
	for (auto &r : racks)
		EXPECT_EQ(r.second.size(), 2u) << "block " << r.first;
	rdfs_client_close(w);
}

// A server that hangs (SIGSTOP: its connections stay open, nothing answers),
// as a partitioned one does: reads go on from the other copy after the
// reader's timeout; a write goes on too, and the hung copy is marked stale
// (the writer's timeout must outlast the metaserver's FENCE of the hung
// server, 10 s); once the server is back, no client reads its copy.
TEST(ClientCopies, HungServerIsRoutedAroundAfterTheTimeout)
{
	rdfs_test::Cluster cl;

	ASSERT_TRUE(cl.start(2)) << cl.dir;
	struct rdfs_client_opts o = cl.opts();
	struct rdfs_client *w = nullptr, *quick = nullptr;
	o.timeout_ms = 15000;
	ASSERT_EQ(rdfs_client_open(&o, &w), 0);
	o.timeout_ms = 1500;
	ASSERT_EQ(rdfs_client_open(&o, &quick), 0);
	auto v1 = pattern(4 * MiB, 81), v2 = pattern(4 * MiB, 82);
	struct rdfs_file *f = create_copies(w, "hung", 2);
	ASSERT_EQ(rdfs_pwrite(f, v1.data(), v1.size(), 0), (ssize_t)v1.size());
	ASSERT_EQ(rdfs_release(f), 0);

	int victim = lowest_id_server(&cl);
	pid_t pid = cl.ios_pids[victim];
	ASSERT_EQ(kill(pid, SIGSTOP), 0);
	std::vector<uint8_t> back;
	EXPECT_EQ(read_all(quick, "hung", v1.size(), &back), 0);
	EXPECT_EQ(first_difference(back, v1), v1.size());
	f = open_name(w, "hung", O_RDWR);
	EXPECT_EQ(rdfs_pwrite(f, v2.data(), v2.size(), 0), (ssize_t)v2.size());
	EXPECT_EQ(rdfs_fsync(f, 0), 0);
	EXPECT_EQ(rdfs_release(f), 0);
	ASSERT_EQ(kill(pid, SIGCONT), 0);

	// back: its copy missed the rewrite, and no new client reads it
	struct rdfs_client *r = client_with(&cl, 0, 0, 1);
	ASSERT_EQ(read_all(r, "hung", v2.size(), &back), 0);
	EXPECT_EQ(first_difference(back, v2), v2.size());
	rdfs_client_close(r);
	rdfs_client_close(quick);
	rdfs_client_close(w);
}
