// SPDX-License-Identifier: MIT
/*
 * ms_rebuild_test.cc - the rebuilder: stale copies freed and rebuilt on
 * another server, a server down past the grace replaced and its extra copy
 * dropped when it returns, copies added and dropped after rdfs.copies
 * changes, writes held off (and only reads granted) while a chunk is copied,
 * a failed copy leaving nothing behind, the counts of `rdfs status`, and
 * fsck running alongside the rebuilder finding nothing wrong.
 */
#include <errno.h>

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "ms_fixture.h"
extern "C" {
#include "frame.h"
}

namespace {

/* Stands in for the I/O servers' COPY: records each, answers what a test says. */
struct CopyLog {
	struct Copy {
		uint64_t ino;
		uint32_t dst, src;
		uint64_t dst_block, src_block, count;
	};
	std::vector<Copy> copies;
	int fail = 0;
	std::function<void()> during;	/* runs inside the copy: a client meanwhile */

	static int fn(void *arg, uint64_t ino, uint32_t gen, uint32_t dst, uint64_t dst_block,
		      uint32_t src, uint64_t src_block, uint64_t count)
	{
		CopyLog *l = static_cast<CopyLog *>(arg);

		l->copies.push_back({ ino, dst, src, dst_block, src_block, count });
		if (l->during)
			l->during();
		return l->fail;
	}
};

}  // namespace

class MsRebuildTest : public MsTest {
protected:
	CopyLog log;
	uint32_t a = 0, b = 0, c = 0;
	struct ms_session *sa = nullptr;	/* a's registration: closing it takes a down */

	void SetUp() override
	{
		options.rebuild_grace_ms = 0;
		MsTest::SetUp();
		a = add_server("a", 10000, &sa);
		b = add_server("b", 10000);
		c = add_server("c", 10000);
		ms_set_copier(ms, CopyLog::fn, &log);
	}

	void TearDown() override
	{
		if (sa)
			ms_session_close(ms, sa);
		sa = nullptr;
		MsTest::TearDown();
	}

	int set_copies(uint64_t ino, int n)
	{
		std::string v = std::to_string(n);

		return ms_setxattr(ms, &root, ino, RDFS_COPIES_XATTR, v.data(), v.size(), 0);
	}

	/* A file of @nblocks written blocks with @copies copies. */
	uint64_t written_file(const char *name, int copies, uint64_t nblocks)
	{
		uint64_t f = mkfile(1, name);
		struct ms_layout l;
		struct ms_range w = { 0, nblocks * 4096 };
		struct ms_attr at;

		EXPECT_EQ(set_copies(f, copies), 0);
		EXPECT_EQ(ms_layout(ms, sess, &root, f, 0, nblocks * 4096, 1, 0, &l), 0);
		ms_layout_free(&l);
		EXPECT_EQ(ms_commit(ms, sess, &root, f, nblocks * 4096, 0, &w, 1, 0, &at), 0);
		return f;
	}

	/* Per file block: the servers of its current copies (and whether they are written). */
	std::map<uint64_t, std::set<uint32_t>> current(uint64_t ino, uint64_t nblocks,
						       int with_stale = 0)
	{
		std::map<uint64_t, std::set<uint32_t>> m;
		struct ms_layout l;

		EXPECT_EQ(ms_layout(ms, sess, &root, ino, 0, nblocks * 4096,
				    with_stale ? MS_LAYOUT_WITH_STALE : 0, 0, &l), 0);
		for (size_t i = 0; i < l.n; i++) {
			EXPECT_FALSE(l.ext[i].unwritten) << "offset " << l.ext[i].file_offset;
			for (uint64_t k = 0; k < l.ext[i].length / 4096; k++)
				m[l.ext[i].file_offset / 4096 + k].insert(l.ext[i].server_id);
		}
		ms_layout_free(&l);
		return m;
	}

	struct ms_rebuild_stats pass(size_t max = 100)
	{
		struct ms_rebuild_stats st;

		EXPECT_EQ(ms_rebuild_pass(ms, max, &st), 0);
		return st;
	}

	void expect_fsck_clean()
	{
		struct ms_session *srv = ms_session_new(ms, "server");
		struct ms_fsck_report rep;

		ASSERT_EQ(ms_fsck(ms, srv, 0, 0, 100, &rep), 0);
		EXPECT_EQ(rep.problems, 0u);
		ms_fsck_report_free(&rep);
		ms_session_close(ms, srv);
	}
};

TEST_F(MsRebuildTest, NothingToDoOnAHealthyFile)
{
	uint64_t f = written_file("f", 2, 64);
	auto before = current(f, 64);
	struct ms_rebuild_stats st = pass();

	EXPECT_EQ(st.chunks_under, 0u);
	EXPECT_EQ(st.chunks_rebuilt, 0u);
	EXPECT_TRUE(log.copies.empty());
	EXPECT_EQ(current(f, 64), before);
}

TEST_F(MsRebuildTest, StaleCopyIsFreedAndRebuiltOnAnotherServer)
{
	uint64_t f = written_file("f", 2, 16);
	auto before = current(f, 16);
	ASSERT_EQ(before[0].size(), 2u);
	uint32_t victim = *before[0].begin(), keeper = *before[0].rbegin();
	uint32_t spare = a + b + c - victim - keeper;
	struct ms_range r = { 4 * 4096, 4 * 4096 };
	uint64_t spare_free = free_blocks(spare);

	ASSERT_EQ(ms_stale(ms, sess, &root, f, 0, victim, &r, 1), 0);
	struct ms_rebuild_stats st = pass();
	EXPECT_EQ(st.chunks_under, 1u);
	EXPECT_EQ(st.chunks_rebuilt, 1u);
	EXPECT_EQ(st.stale_freed, 1u);
	ASSERT_EQ(log.copies.size(), 1u);
	EXPECT_EQ(log.copies[0].dst, spare);
	EXPECT_EQ(log.copies[0].src, keeper);
	EXPECT_EQ(log.copies[0].count, 4u);
	/* blocks 4-7 now on keeper and spare; the stale blocks went back */
	auto now = current(f, 16, 1);
	for (uint64_t k = 0; k < 16; k++)
		EXPECT_EQ(now[k], (k >= 4 && k < 8 ? std::set<uint32_t>{ keeper, spare } : before[k]))
			<< "block " << k;
	EXPECT_EQ(free_blocks(spare), spare_free - 4);
	EXPECT_EQ(free_blocks(victim), 10000u - 12);
	/* and the next pass finds nothing */
	st = pass();
	EXPECT_EQ(st.chunks_under, 0u);
	EXPECT_EQ(log.copies.size(), 1u);
	expect_fsck_clean();
}

TEST_F(MsRebuildTest, DownServerIsReplacedAfterTheGraceAndItsUnneededCopyDropped)
{
	uint64_t f = written_file("f", 2, 3 * 256);	/* three chunks: every server holds some */
	uint64_t n = 3 * 256;

	ms_session_close(ms, sa);
	sa = nullptr;
	struct ms_rebuild_stats st = pass();
	EXPECT_EQ(st.chunks_under, 2u) << "a holds a copy of two of the three chunks";
	EXPECT_EQ(st.chunks_rebuilt, 2u);
	for (auto &blk : current(f, n)) {
		std::set<uint32_t> live;

		for (uint32_t s : blk.second)
			if (s != a)
				live.insert(s);
		EXPECT_EQ(live, (std::set<uint32_t>{ b, c })) << "block " << blk.first;
	}
	/* a's copies count for nothing and are not needed: dropped (freed when it returns) */
	st = pass();
	EXPECT_EQ(st.chunks_under, 0u);
	EXPECT_EQ(st.copies_dropped, 2u);
	for (auto &blk : current(f, n))
		EXPECT_EQ(blk.second, (std::set<uint32_t>{ b, c })) << "block " << blk.first;

	/* a comes back: nothing of the file is on it, its blocks are free again */
	a = add_server("a", 10000, &sa);
	st = pass();
	EXPECT_EQ(st.copies_dropped, 0u);
	EXPECT_EQ(free_blocks(a), 10000u);
	for (auto &blk : current(f, n))
		EXPECT_EQ(blk.second.size(), 2u) << "block " << blk.first;
	expect_fsck_clean();
}

TEST_F(MsRebuildTest, ReturningServerWithinTheGraceLeavesAnExtraCopyThatIsDropped)
{
	uint64_t f = written_file("f", 2, 3 * 256);
	uint64_t n = 3 * 256;

	ms_session_close(ms, sa);
	sa = nullptr;
	EXPECT_EQ(pass().chunks_rebuilt, 2u);
	/* back before its copies were dropped (as within a grace): three copies, one too many */
	a = add_server("a", 10000, &sa);
	struct ms_rebuild_stats st = pass();
	EXPECT_EQ(st.copies_dropped, 2u);
	for (auto &blk : current(f, n))
		EXPECT_EQ(blk.second.size(), 2u) << "block " << blk.first;
	expect_fsck_clean();
}

TEST_F(MsRebuildTest, DrainMovesEveryCopyOffAndNothingNewGoesThere)
{
	uint64_t f = written_file("f", 1, 3 * 256);
	uint64_t n = 3 * 256;
	struct ms_session *srv = ms_session_new(ms, "server");

	EXPECT_EQ(ms_drain(ms, sess, a, 1), -EPERM) << "a client may not drain";
	EXPECT_EQ(ms_drain(ms, srv, 999, 1), -ENOENT);
	ASSERT_EQ(ms_drain(ms, srv, a, 1), 0);
	/* new blocks avoid it at once */
	uint64_t g = written_file("g", 1, 3 * 256);
	for (auto &blk : current(g, n))
		EXPECT_EQ(blk.second.count(a), 0u) << "block " << blk.first;
	/* its chunk is copied elsewhere, then dropped from it */
	pass();
	pass();
	EXPECT_EQ(free_blocks(a), 10000u);
	for (auto &blk : current(f, n)) {
		EXPECT_EQ(blk.second.size(), 1u) << "block " << blk.first;
		EXPECT_EQ(blk.second.count(a), 0u) << "block " << blk.first;
	}
	EXPECT_FALSE(log.copies.empty());
	for (auto &cp : log.copies)
		EXPECT_EQ(cp.src, a);
	/* remembered across a restart */
	struct ms_server_info *si = nullptr;
	ms_session_close(ms, srv);
	ms_session_close(ms, sa);
	sa = nullptr;
	reopen();
	a = add_server("a", 10000, &sa);
	b = add_server("b", 10000);
	c = add_server("c", 10000);
	int ns = ms_server_list(ms, &si);
	ASSERT_EQ(ns, 3);
	for (int i = 0; i < ns; i++)
		EXPECT_EQ(si[i].draining, si[i].id == a) << "server " << si[i].id;
	free(si);
	/* cancelled: it takes new blocks again */
	srv = ms_session_new(ms, "server");
	ASSERT_EQ(ms_drain(ms, srv, a, 0), 0);
	ms_session_close(ms, srv);
	uint64_t h = written_file("h", 1, 3 * 256);
	size_t on_a = 0;
	for (auto &blk : current(h, n))
		on_a += blk.second.count(a);
	EXPECT_GT(on_a, 0u);
	expect_fsck_clean();
}

TEST_F(MsRebuildTest, WithinTheGraceNothingIsCopied)
{
	ms_session_close(ms, sa);
	sa = nullptr;
	close_db();
	options.rebuild_grace_ms = 3600 * 1000;
	open_db();
	a = add_server("a", 10000, &sa);
	b = add_server("b", 10000);
	c = add_server("c", 10000);
	ms_set_copier(ms, CopyLog::fn, &log);
	uint64_t f = written_file("f", 2, 256);
	(void)f;
	ms_session_close(ms, sa);
	sa = nullptr;
	struct ms_rebuild_stats st = pass();
	EXPECT_EQ(st.chunks_under, 0u);
	EXPECT_TRUE(log.copies.empty());
}

TEST_F(MsRebuildTest, CopiesFollowChangesOfRdfsCopies)
{
	uint64_t f = written_file("f", 1, 100);

	ASSERT_EQ(set_copies(f, 3), 0);
	/* one new copy per chunk and pass */
	EXPECT_EQ(pass().chunks_rebuilt, 1u);
	EXPECT_EQ(pass().chunks_rebuilt, 1u);
	EXPECT_EQ(pass().chunks_under, 0u);
	for (auto &blk : current(f, 100))
		EXPECT_EQ(blk.second, (std::set<uint32_t>{ a, b, c })) << "block " << blk.first;

	ASSERT_EQ(set_copies(f, 1), 0);
	pass();
	pass();
	for (auto &blk : current(f, 100))
		EXPECT_EQ(blk.second.size(), 1u) << "block " << blk.first;
	EXPECT_EQ(free_blocks(a) + free_blocks(b) + free_blocks(c), 3 * 10000u - 100);
	expect_fsck_clean();
}

TEST_F(MsRebuildTest, WritesWaitAndReadsGoOnWhileAChunkIsCopied)
{
	uint64_t f = written_file("f", 1, 16);
	uint64_t g = written_file("g", 1, 16);
	int during = 0;

	ASSERT_EQ(set_copies(f, 2), 0);
	log.during = [&] {
		struct ms_layout l;

		during++;
		/* no allocation in the chunk: the client retries */
		EXPECT_EQ(ms_layout(ms, sess, &root, f, 0, 4096, 1, 0, &l), -EAGAIN);
		/* reads are fine, but the capabilities grant no WRITE */
		ASSERT_EQ(ms_layout(ms, sess, &root, f, 0, 16 * 4096, 0, 0, &l), 0);
		EXPECT_EQ(l.rights, RDFS_CAP_READ);
		EXPECT_EQ(l.n, 1u) << "the copy being built is not described";
		ms_layout_free(&l);
		/* rdfs layout shows it, as building */
		ASSERT_EQ(ms_layout(ms, sess, &root, f, 0, 16 * 4096, MS_LAYOUT_WITH_STALE, 0, &l), 0);
		ASSERT_EQ(l.n, 2u);
		EXPECT_EQ(l.ext[0].building + l.ext[1].building, 1);
		EXPECT_EQ(l.ext[0].stale + l.ext[1].stale, 1);
		ms_layout_free(&l);
		/* other files are not held up */
		ASSERT_EQ(ms_layout(ms, sess, &root, g, 0, 4096, 1, 0, &l), 0);
		EXPECT_EQ(l.rights, RDFS_CAP_READ | RDFS_CAP_WRITE);
		ms_layout_free(&l);
	};
	EXPECT_EQ(pass().chunks_rebuilt, 1u);
	EXPECT_EQ(during, 1);
	log.during = nullptr;
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, f, 0, 4096, 1, 0, &l), 0);
	EXPECT_EQ(l.n, 2u);
	ms_layout_free(&l);
}

TEST_F(MsRebuildTest, FailedCopyLeavesNothingBehind)
{
	uint64_t f = written_file("f", 1, 16);
	auto before = current(f, 16);
	uint64_t total = free_blocks(a) + free_blocks(b) + free_blocks(c);

	ASSERT_EQ(set_copies(f, 2), 0);
	log.fail = -EIO;
	struct ms_rebuild_stats st = pass();
	EXPECT_EQ(st.chunks_rebuilt, 0u);
	EXPECT_EQ(log.copies.size(), 1u);
	EXPECT_EQ(current(f, 16, 1), before);
	EXPECT_EQ(free_blocks(a) + free_blocks(b) + free_blocks(c), total);
	expect_fsck_clean();
	/* and the next pass tries again */
	log.fail = 0;
	EXPECT_EQ(pass().chunks_rebuilt, 1u);
}

/*
 * fsck takes its picture of the maps and the layouts while the rebuilder adds
 * and drops copies: a new copy's blocks are in the map and in a layout at
 * once for it, never in the map alone (leaked, which --repair would
 * quarantine and later free under the new copy). Random interleavings: a
 * picture taken between the two is what failed before plan_copy held
 * ms->blocks_rw across its allocation.
 */
TEST_F(MsRebuildTest, FsckAlongsideTheRebuilderFindsNothingWrong)
{
	std::vector<uint64_t> files;
	std::atomic<bool> stop{ false };
	std::atomic<int> checks{ 0 }, problems{ 0 };
	std::string first;

	for (int i = 0; i < 8; i++)
		files.push_back(written_file(("f" + std::to_string(i)).c_str(), 1, 64));
	std::thread fsck([&] {
		struct ms_session *srv = ms_session_new(ms, "server");

		while (!stop.load()) {
			struct ms_fsck_report rep;

			if (ms_fsck(ms, srv, 0, 0, 10, &rep) != 0)
				continue;
			if (rep.problems && problems++ == 0)
				first = "leaked " + std::to_string(rep.counts[MS_FSCK_LEAKED]) + " of " +
					std::to_string(rep.problems);
			checks++;
			ms_fsck_report_free(&rep);
		}
		ms_session_close(ms, srv);
	});
	for (int round = 0; round < 60; round++) {
		for (uint64_t f : files)
			ASSERT_EQ(set_copies(f, round % 2 ? 1 : 2), 0);
		pass();
	}
	stop = true;
	fsck.join();
	EXPECT_GT(checks.load(), 0);
	EXPECT_EQ(problems.load(), 0) << "in " << checks.load() << " checks; the first: " << first;
	expect_fsck_clean();
}

TEST_F(MsRebuildTest, LostChunksAreCounted)
{
	uint64_t f = written_file("f", 1, 3 * 256);

	(void)f;
	ms_session_close(ms, sa);
	sa = nullptr;
	struct ms_rebuild_stats st = pass();
	/* one chunk in three was on a alone: nothing to copy from */
	EXPECT_EQ(st.chunks_lost, 1u);
	EXPECT_EQ(st.chunks_under, 1u);
	EXPECT_EQ(st.chunks_rebuilt, 0u);
	struct ms_rebuild_stats now;
	ms_rebuild_status(ms, &now);
	EXPECT_EQ(now.chunks_lost, 1u);
}

TEST_F(MsRebuildTest, DrainCompletesWhenTheCopiesWantedExceedTheServersLeft)
{
	/* three copies on three servers: draining one leaves room for two */
	uint64_t f = written_file("f", 3, 256);
	struct ms_session *srv = ms_session_new(ms, "server");

	ASSERT_EQ(ms_drain(ms, srv, a, 1), 0);
	ms_session_close(ms, srv);
	pass();
	EXPECT_EQ(free_blocks(a), 10000u);
	for (auto &blk : current(f, 256))
		EXPECT_EQ(blk.second, (std::set<uint32_t>{ b, c })) << "block " << blk.first;
	EXPECT_TRUE(log.copies.empty()) << "nothing to copy: the others hold it";
}

TEST_F(MsRebuildTest, CopiesAndNewCopiesGoToDistinctFailureDomains)
{
	/* a, b, c are domains of their own; r1 and r2 share rack "x" */
	uint32_t r1 = add_server("r1", 10000, nullptr, true, "x");
	uint32_t r2 = add_server("r2", 10000, nullptr, true, "x");
	struct ms_server_info *si = nullptr;
	int n = ms_server_list(ms, &si);
	int in_x = 0;

	for (int i = 0; i < n; i++)
		in_x += !strcmp(si[i].domain, "x");
	free(si);
	EXPECT_EQ(in_x, 2);
	/* many chunks, two copies: never both in rack x */
	uint64_t f = written_file("f", 2, 20 * 256);
	for (auto &blk : current(f, 20 * 256))
		EXPECT_FALSE(blk.second.count(r1) && blk.second.count(r2)) << "block " << blk.first;
	/* with a and b drained, c and the rack are left: a copy in each, never two in x */
	struct ms_session *srv = ms_session_new(ms, "server");
	ASSERT_EQ(ms_drain(ms, srv, a, 1), 0);
	ASSERT_EQ(ms_drain(ms, srv, b, 1), 0);
	ms_session_close(ms, srv);
	for (int i = 0; i < 4; i++)
		pass();
	for (auto &blk : current(f, 20 * 256)) {
		EXPECT_EQ(blk.second.size(), 2u) << "block " << blk.first;
		EXPECT_TRUE(blk.second.count(c)) << "block " << blk.first;
	}
	/* the domain is remembered in the server record */
	ms_session_close(ms, sa);
	sa = nullptr;
	reopen();
	si = nullptr;
	n = ms_server_list(ms, &si);
	in_x = 0;
	for (int i = 0; i < n; i++)
		in_x += !strcmp(si[i].domain, "x");
	free(si);
	EXPECT_EQ(in_x, 2);
}

/* rdfs rebalance: two servers filled, a third added empty, then the rebalance. */
class MsRebalanceTest : public MsRebuildTest {
protected:
	struct ms_session *srv = nullptr;	/* the admin's: proved the server key */

	void SetUp() override
	{
		options.rebuild_grace_ms = 0;
		MsTest::SetUp();
		ms_set_copier(ms, CopyLog::fn, &log);
		srv = ms_session_new(ms, "server");
	}

	void TearDown() override
	{
		if (srv)
			ms_session_close(ms, srv);
		srv = nullptr;
		MsRebuildTest::TearDown();
	}

	/* Each server's used fraction, as SERVER_LIST reports it. */
	std::map<uint32_t, double> usage()
	{
		std::map<uint32_t, double> u;
		struct ms_server_info *si = nullptr;
		int n = ms_server_list(ms, &si);

		for (int i = 0; i < n; i++)
			u[si[i].id] = (double)(si[i].capacity_blocks - si[i].free_blocks) /
				      (double)si[i].capacity_blocks;
		free(si);
		return u;
	}

	double mean(const std::map<uint32_t, double> &u)
	{
		double sum = 0;

		for (auto &p : u)
			sum += p.second;	/* equal capacities: the plain mean */
		return sum / (double)u.size();
	}

	struct ms_rebalance_status status()
	{
		struct ms_rebalance_status rs;

		ms_rebalance_status(ms, &rs);
		return rs;
	}

	/* Passes until the rebalance has ended (at most @max); how many it took. */
	int passes_until_done(int max = 50)
	{
		int n = 0;

		while (status().active && n < max) {
			pass();
			n++;
		}
		return n;
	}

	/* Per file block: the domains of its current copies. */
	std::map<uint64_t, std::set<std::string>> domains(uint64_t ino, uint64_t nblocks,
							  std::map<uint32_t, std::string> dom)
	{
		std::map<uint64_t, std::set<std::string>> m;

		for (auto &blk : current(ino, nblocks))
			for (uint32_t s : blk.second)
				m[blk.first].insert(dom[s]);
		return m;
	}
};

TEST_F(MsRebalanceTest, MovesFromTheFullestToTheEmptiestUntilInTheBandThenStops)
{
	a = add_server("a", 10000, &sa);
	b = add_server("b", 10000);
	uint64_t one = written_file("one", 1, 12 * 256), two = written_file("two", 2, 4 * 256);
	c = add_server("c", 10000);
	auto before = usage();
	ASSERT_GT(before[a], 0.25);
	ASSERT_GT(before[b], 0.25);

	EXPECT_EQ(ms_rebalance(ms, sess, 1, 10), -EPERM) << "a client may not rebalance";
	EXPECT_EQ(ms_rebalance(ms, srv, 1, 101), -EINVAL);
	EXPECT_FALSE(status().active);
	ASSERT_EQ(ms_rebalance(ms, srv, 1, 10), 0);
	EXPECT_TRUE(status().active);
	EXPECT_EQ(status().threshold_pct, 10u);
	EXPECT_EQ(status().outside, 3u) << "a and b above the band, c below";

	/* a chunk being moved takes no write meanwhile, and reads go on */
	int during = 0;
	log.during = [&] {
		uint64_t ino = log.copies.back().ino;
		uint64_t len = (ino == one ? 12 : 4) * 256 * 4096ull;
		struct ms_layout l;

		if (during++)
			return;
		EXPECT_EQ(ms_layout(ms, sess, &root, ino, 0, len, 1, 0, &l), -EAGAIN);
		ASSERT_EQ(ms_layout(ms, sess, &root, ino, 0, len, 0, 0, &l), 0);
		EXPECT_EQ(l.rights, RDFS_CAP_READ);
		ms_layout_free(&l);
	};
	int n = passes_until_done();
	log.during = nullptr;
	EXPECT_LT(n, 50) << "the rebalance never ended";
	EXPECT_EQ(during, (int)log.copies.size());
	struct ms_rebalance_status rs = status();
	EXPECT_FALSE(rs.active);
	EXPECT_EQ(rs.outside, 0u);

	/* fullest to emptiest: every move from a or b, to c */
	ASSERT_FALSE(log.copies.empty());
	uint64_t copied = 0;
	for (auto &cp : log.copies) {
		EXPECT_EQ(cp.dst, c);
		EXPECT_TRUE(cp.src == a || cp.src == b) << cp.src;
		copied += cp.count * 4096;
	}
	EXPECT_EQ(rs.bytes_moved, copied);
	/* in the band, and not past it: c was filled no further than needed */
	auto after = usage();
	double m = mean(after);
	for (auto &p : after)
		EXPECT_LE(std::abs(p.second - m), 0.05 + 1e-9) << "server " << p.first;
	EXPECT_NEAR(m, mean(before), 1e-9) << "a move frees what it takes";
	EXPECT_LE(after[c], m + 0.05);
	/* the files: their copies, on distinct servers, nothing stale left over */
	for (auto &blk : current(one, 12 * 256, 1))
		EXPECT_EQ(blk.second.size(), 1u) << "block " << blk.first;
	for (auto &blk : current(two, 4 * 256, 1))
		EXPECT_EQ(blk.second.size(), 2u) << "block " << blk.first;
	expect_fsck_clean();
	/* ended: the next passes move nothing */
	size_t moves = log.copies.size();
	pass();
	pass();
	EXPECT_EQ(log.copies.size(), moves);
}

TEST_F(MsRebalanceTest, CancelStopsItAndARequestOutlivesARestart)
{
	a = add_server("a", 10000, &sa);
	b = add_server("b", 10000);
	written_file("one", 1, 16 * 256);
	c = add_server("c", 10000);

	ASSERT_EQ(ms_rebalance(ms, srv, 1, 10), 0);
	ASSERT_EQ(ms_rebalance(ms, srv, 0, 0), 0);
	EXPECT_FALSE(status().active);
	pass();
	EXPECT_TRUE(log.copies.empty()) << "cancelled before any pass";

	/* asked, then the metaserver restarts: it goes on */
	ASSERT_EQ(ms_rebalance(ms, srv, 1, 20), 0);
	ms_session_close(ms, srv);
	srv = nullptr;
	ms_session_close(ms, sa);
	sa = nullptr;
	reopen();
	ms_set_copier(ms, CopyLog::fn, &log);
	EXPECT_TRUE(status().active);
	EXPECT_EQ(status().threshold_pct, 20u);
	a = add_server("a", 10000, &sa);
	b = add_server("b", 10000);
	c = add_server("c", 10000);
	EXPECT_LT(passes_until_done(), 50);
	EXPECT_FALSE(log.copies.empty());
	auto u = usage();
	double m = mean(u);
	for (auto &p : u)
		EXPECT_LE(std::abs(p.second - m), 0.10 + 1e-9) << "server " << p.first;
	expect_fsck_clean();
}

TEST_F(MsRebalanceTest, MovesNeverPutTwoCopiesInOneDomainAndEndWhenStuck)
{
	/* a in rack x, b in rack y: every chunk of a 2-copy file on both */
	a = add_server("a", 10000, &sa, true, "x");
	b = add_server("b", 10000, nullptr, true, "y");
	uint64_t f = written_file("f", 2, 10 * 256);
	/* c joins rack x: only a's copies may go there */
	c = add_server("c", 10000, nullptr, true, "x");
	std::map<uint32_t, std::string> dom = { { a, "x" }, { b, "y" }, { c, "x" } };

	ASSERT_EQ(ms_rebalance(ms, srv, 1, 10), 0);
	EXPECT_LT(passes_until_done(), 50);
	ASSERT_FALSE(log.copies.empty());
	for (auto &cp : log.copies) {
		EXPECT_EQ(cp.dst, c);
		EXPECT_EQ(cp.src, a) << "a copy in y would have left y";
	}
	for (auto &blk : domains(f, 10 * 256, dom))
		EXPECT_EQ(blk.second, (std::set<std::string>{ "x", "y" })) << "block " << blk.first;
	/* b cannot get closer: the request ended anyway, saying so */
	struct ms_rebalance_status rs = status();
	EXPECT_FALSE(rs.active);
	EXPECT_GE(rs.outside, 1u);
	expect_fsck_clean();
}

TEST_F(MsRebalanceTest, CopiesSharingADomainMoveToAnotherWithoutARebalance)
{
	/* only rack x at first: both copies there */
	a = add_server("a", 10000, &sa, true, "x");
	b = add_server("b", 10000, nullptr, true, "x");
	uint64_t f = written_file("f", 2, 3 * 256);
	c = add_server("c", 10000, nullptr, true, "y");
	std::map<uint32_t, std::string> dom = { { a, "x" }, { b, "x" }, { c, "y" } };

	for (auto &blk : domains(f, 3 * 256, dom))
		ASSERT_EQ(blk.second, (std::set<std::string>{ "x" })) << "block " << blk.first;
	EXPECT_FALSE(status().active);
	struct ms_rebuild_stats st = pass();
	EXPECT_EQ(st.copies_moved, 3u);
	EXPECT_EQ(st.bytes_moved, 0u) << "not a rebalance's";
	for (auto &blk : domains(f, 3 * 256, dom))
		EXPECT_EQ(blk.second, (std::set<std::string>{ "x", "y" })) << "block " << blk.first;
	for (auto &blk : current(f, 3 * 256, 1))
		EXPECT_EQ(blk.second.size(), 2u) << "block " << blk.first;
	/* spread: nothing more to do */
	EXPECT_EQ(pass().copies_moved, 0u);
	expect_fsck_clean();
}

TEST_F(MsRebalanceTest, StopsAsSoonAsEveryServerIsInTheBand)
{
	a = add_server("a", 10000, &sa);
	b = add_server("b", 10000);
	written_file("one", 1, 20 * 256);
	c = add_server("c", 10000);
	/* a and b 25.6 % used, c empty, the cluster 17.1 %: a band of +-15 points
	 * takes in c with its first chunk (2.6 %), so one move is all it takes */
	ASSERT_EQ(ms_rebalance(ms, srv, 1, 30), 0);
	EXPECT_EQ(status().outside, 1u);
	EXPECT_LT(passes_until_done(), 50);
	EXPECT_EQ(log.copies.size(), 1u);
	EXPECT_EQ(status().outside, 0u);
	EXPECT_EQ(status().bytes_moved, 256 * 4096u);
}
