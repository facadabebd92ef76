// SPDX-License-Identifier: MIT
/*
 * ms_fence_test.cc - block reuse safety: blocks that leave a file (truncate,
 * O_TRUNC, the reclaim of an orphan) are fenced on their I/O servers before
 * the allocator has them again, open file or not; a server the fence does not
 * reach keeps them until it registers again (with a new epoch); a chmod that
 * takes rights away fences too; reused blocks are zeroed; and the high-water
 * mark a volume's first registration sets, pristine or not. With async freeing
 * (freeing.c), a remove replies before its fence and its blocks still wait
 * for it, held in fsck's eyes, and an allocation short of space waits too.
 */
#include <errno.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "ms_fixture.h"

namespace {

/*
 * Stands in for the I/O servers' FENCE: records each fence and what the
 * allocator had free when it came (blocks must not be free before it), and
 * fails for the servers in @fail. While @closed, a fence waits (a slow server).
 */
struct FenceLog {
	struct Fence {
		uint64_t ino;
		uint32_t gen;
		std::vector<uint32_t> servers;
		uint64_t free_then;
	};
	std::mutex mu;
	std::vector<Fence> fences;
	std::set<uint32_t> fail;
	struct ms *ms = nullptr;
	bool closed = false;
	std::condition_variable opened;
	int held = 0;			/* fences waiting at the gate now */
	std::condition_variable arrived;

	static void fn(void *arg, const uint32_t *servers, size_t n, uint64_t ino, uint32_t gen,
		       int *status)
	{
		FenceLog *f = static_cast<FenceLog *>(arg);
		struct ms_statfs st;
		std::unique_lock<std::mutex> g(f->mu);

		f->held++;
		f->arrived.notify_all();
		f->opened.wait(g, [f] { return !f->closed; });
		f->held--;
		ms_statfs(f->ms, &st);
		f->fences.push_back({ ino, gen, std::vector<uint32_t>(servers, servers + n),
				      st.free_blocks });
		for (size_t i = 0; i < n; i++)
			status[i] = f->fail.count(servers[i]) ? -ETIMEDOUT : 0;
	}
};

}  // namespace

class MsFenceTest : public MsTest {
protected:
	/* A small volume, so that reuse of a block is forced and plain to see. */
	static constexpr uint64_t kBlocks = 20;
	uint32_t id = 0;
	struct ms_session *io = nullptr;	/* the volume's registration */
	struct ms_session *other = nullptr;
	ZeroLog zeros;
	FenceLog fences;

	void SetUp() override
	{
		MsTest::SetUp();
		id = add_server("vol", kBlocks, &io);
		other = ms_session_new(ms, "client");
		ASSERT_NE(other, nullptr);
		ms_set_zeroer(ms, ZeroLog::fn, &zeros);
		fences.ms = ms;
		ms_set_fencer(ms, FenceLog::fn, &fences);
	}

	void TearDown() override
	{
		gate(false);
		if (other)
			ms_session_close(ms, other);
		other = nullptr;
		if (io)
			ms_session_close(ms, io);
		io = nullptr;
		MsTest::TearDown();
	}

	/* Create @name open O_RDWR in @s with @nblocks blocks; returns its ino. */
	uint64_t make_open_file(struct ms_session *s, const char *name, uint64_t nblocks,
				uint64_t *h)
	{
		struct ms_attr a;
		struct ms_layout l;

		EXPECT_EQ(ms_mknod(ms, s, &root, 1, name, 0644, 0, 0, 1, 1, O_RDWR, &a, h), 0);
		EXPECT_EQ(ms_layout(ms, s, &root, a.ino, 0, nblocks * 4096, 1, *h, &l), 0);
		ms_layout_free(&l);
		return a.ino;
	}

	/* A closed file named @name whose @nblocks blocks are written; its ino. */
	uint64_t make_written_file(const char *name, uint64_t nblocks)
	{
		uint64_t h;
		uint64_t f = make_open_file(sess, name, nblocks, &h);
		struct ms_range w = { 0, nblocks * 4096 };
		struct ms_attr a;

		EXPECT_EQ(ms_commit(ms, sess, &root, f, nblocks * 4096, 0, &w, 1, h, &a), 0);
		EXPECT_EQ(ms_release(ms, sess, h), 0);
		return f;
	}

	/* Allocate @nblocks blocks for @ino (no handle); the blocks it got, or -errno. */
	int alloc(uint64_t ino, uint64_t nblocks, std::set<uint64_t> *got = nullptr)
	{
		struct ms_layout l;
		int ret = ms_layout(ms, sess, &root, ino, 0, nblocks * 4096, 1, 0, &l);

		if (ret)
			return ret;
		for (size_t i = 0; i < l.n && got; i++)
			for (uint64_t b = 0; b < l.ext[i].length / 4096; b++)
				got->insert(l.ext[i].block + b);
		ms_layout_free(&l);
		return 0;
	}

	std::set<uint64_t> blocks_of(uint64_t ino)
	{
		struct ms_layout l;
		std::set<uint64_t> out;

		/* by length: the size stays 0, as nothing is committed */
		EXPECT_EQ(ms_layout(ms, sess, &root, ino, 0, 1 << 20, 0, 0, &l), 0);
		for (size_t i = 0; i < l.n; i++)
			for (uint64_t b = 0; b < l.ext[i].length / 4096; b++)
				out.insert(l.ext[i].block + b);
		ms_layout_free(&l);
		return out;
	}

	int truncate(struct ms_session *s, uint64_t ino, uint64_t size)
	{
		struct ms_setattr sa = {};
		struct ms_attr a;

		sa.valid = MS_SET_SIZE;
		sa.size = size;
		return ms_setattr(ms, s, &root, ino, &sa, &a);
	}

	uint64_t free_blocks()
	{
		struct ms_statfs st;

		ms_statfs(ms, &st);
		return st.free_blocks;
	}

	std::set<uint64_t> zeroed()
	{
		std::lock_guard<std::mutex> g(zeros.mu);
		std::set<uint64_t> out;

		out.swap(zeros.blocks);
		return out;
	}

	uint32_t layout_gen(uint64_t ino)
	{
		struct ms_layout l;

		EXPECT_EQ(ms_layout(ms, sess, &root, ino, 0, 4096, 0, 0, &l), 0);
		ms_layout_free(&l);
		return l.gen;
	}

	/* Hold every fence (a slow I/O server) until gate(false). */
	void gate(bool closed)
	{
		std::lock_guard<std::mutex> g(fences.mu);

		fences.closed = closed;
		fences.opened.notify_all();
	}

	std::vector<FenceLog::Fence> fenced()
	{
		std::lock_guard<std::mutex> g(fences.mu);
		std::vector<FenceLog::Fence> out;

		out.swap(fences.fences);
		return out;
	}
};

TEST_F(MsFenceTest, TruncatedBlocksOfAnOpenFileAreFencedThenFreed)
{
	uint64_t h;
	uint64_t f = make_open_file(sess, "f", 10, &h);
	std::set<uint64_t> old = blocks_of(f);

	ASSERT_EQ(old.size(), 10u);
	EXPECT_EQ(layout_gen(f), 0u);
	fenced();
	/* another client truncates the file that sess still has open */
	ASSERT_EQ(truncate(other, f, 0), 0);
	auto fs = fenced();
	ASSERT_EQ(fs.size(), 1u);
	EXPECT_EQ(fs[0].ino, f);
	EXPECT_EQ(fs[0].gen, 1u);
	EXPECT_EQ(fs[0].servers, std::vector<uint32_t>{ id });
	EXPECT_EQ(fs[0].free_then, kBlocks - 10) << "blocks were free before their fence";
	/* free at once, open or not; layouts now carry the new generation */
	EXPECT_TRUE(blocks_of(f).empty());
	EXPECT_EQ(free_blocks(), kBlocks);
	EXPECT_EQ(layout_gen(f), 1u);

	/* a new file may get them, zeroed first */
	zeroed();
	uint64_t g = mkfile(1, "g");
	std::set<uint64_t> gb;
	ASSERT_EQ(alloc(g, kBlocks, &gb), 0);
	std::set<uint64_t> z = zeroed();
	for (uint64_t b : old)
		EXPECT_EQ(z.count(b), 1u) << "block " << b << " reused unzeroed";
	ASSERT_EQ(ms_release(ms, sess, h), 0);
}

TEST_F(MsFenceTest, PartialTruncateAndOTruncFenceEachTime)
{
	uint64_t h, h2;
	uint64_t f = make_open_file(sess, "f", 10, &h);
	struct ms_setattr sa = {};
	struct ms_attr a;

	/* ftruncate through its own handle, to 4 blocks and a bit */
	fenced();
	sa.valid = MS_SET_SIZE;
	sa.size = 4 * 4096 + 100;
	sa.handle = h;
	ASSERT_EQ(ms_setattr(ms, sess, &alice, f, &sa, &a), 0);
	EXPECT_EQ(a.blocks, 5u);
	EXPECT_EQ(free_blocks(), kBlocks - 5);
	EXPECT_EQ(fenced().size(), 1u);
	EXPECT_EQ(blocks_of(f).size(), 5u);

	/* O_TRUNC while another handle is open: fenced and freed at once too */
	ASSERT_EQ(ms_open_file(ms, other, &root, f, O_RDWR | O_TRUNC, &a, &h2), 0);
	EXPECT_EQ(a.blocks, 0u);
	EXPECT_EQ(free_blocks(), kBlocks);
	auto fs = fenced();
	ASSERT_EQ(fs.size(), 1u);
	EXPECT_EQ(fs[0].gen, 2u);
	EXPECT_EQ(layout_gen(f), 2u);
	ASSERT_EQ(ms_release(ms, other, h2), 0);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	EXPECT_EQ(free_blocks(), kBlocks);
}

TEST_F(MsFenceTest, BlocksAServerDidNotTakeTheFenceOfWaitForItsNextRegistration)
{
	uint64_t h;
	uint64_t f = make_open_file(sess, "f", 10, &h);
	uint64_t epoch = ms_server_epoch(ms, id);

	fences.fail.insert(id);
	ASSERT_EQ(truncate(other, f, 0), 0);
	EXPECT_EQ(free_blocks(), kBlocks - 10) << "freed although the server was not told";
	EXPECT_EQ(ms_blocks_held(ms, id), 10u);
	uint64_t g = mkfile(1, "g");
	EXPECT_EQ(alloc(g, 11), -ENOSPC);

	/* it registers again: a new, larger epoch fences everything older there */
	fences.fail.clear();
	ms_session_close(ms, io);
	io = nullptr;
	EXPECT_EQ(add_server("vol", kBlocks, &io), id);
	EXPECT_GT(ms_server_epoch(ms, id), epoch);
	EXPECT_EQ(ms_blocks_held(ms, id), 0u);
	EXPECT_EQ(free_blocks(), kBlocks);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
}

TEST_F(MsFenceTest, ServersThatAreDownAreNotAskedAndTheirBlocksAreFreed)
{
	uint64_t h;
	uint64_t f = make_open_file(sess, "f", 10, &h);

	/* down: it gets a new epoch before it serves this metaserver again */
	ms_session_close(ms, io);
	io = nullptr;
	fenced();
	ASSERT_EQ(truncate(other, f, 0), 0);
	EXPECT_TRUE(fenced().empty());
	EXPECT_EQ(layout_gen(f), 1u) << "the generation moves on all the same";
	EXPECT_EQ(free_blocks(), kBlocks);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
}

TEST_F(MsFenceTest, OrphansAreFencedAtTheirLastReleaseAndForgotten)
{
	uint64_t h;
	uint64_t f = make_open_file(other, "f", 5, &h);
	uint64_t g = mkfile(1, "g");
	struct ms_attr a;
	std::set<uint64_t> fb = blocks_of(f);

	ASSERT_EQ(alloc(g, 5), 0);
	/* rename over the open file: it stays, whole, with nlink 0 */
	ASSERT_EQ(ms_rename(ms, &root, 1, "g", 1, "f", 0), 0);
	ASSERT_EQ(ms_getattr(ms, f, &a), 0);
	EXPECT_EQ(a.nlink, 0u);
	EXPECT_EQ(blocks_of(f), fb);
	EXPECT_EQ(free_blocks(), kBlocks - 10);
	fenced();
	ASSERT_EQ(ms_release(ms, other, h), 0);
	EXPECT_EQ(ms_getattr(ms, f, &a), -ENOENT);
	EXPECT_EQ(free_blocks(), kBlocks - 5);
	auto fs = fenced();
	ASSERT_EQ(fs.size(), 1u);
	EXPECT_EQ(fs[0].ino, f);
	EXPECT_EQ(ms_file_gen(ms, f), 0u) << "a removed file's generation is forgotten";

	/* unlink of a file nobody has open: fenced and freed at once */
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(free_blocks(), kBlocks);
	EXPECT_EQ(fenced().size(), 1u);
}

TEST_F(MsFenceTest, ChmodOrChownThatTakesRightsAwayFences)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	struct ms_setattr sa = {};
	struct ms_attr a;

	ASSERT_EQ(alloc(f, 2), 0);
	fenced();
	sa.valid = MS_SET_MODE;
	sa.mode = 0600;
	ASSERT_EQ(ms_setattr(ms, sess, &alice, f, &sa, &a), 0);
	auto fs = fenced();
	ASSERT_EQ(fs.size(), 1u);
	EXPECT_EQ(fs[0].servers, std::vector<uint32_t>{ id });
	EXPECT_EQ(free_blocks(), kBlocks - 2) << "a chmod frees nothing";
	/* giving rights takes nothing back */
	sa.mode = 0644;
	ASSERT_EQ(ms_setattr(ms, sess, &alice, f, &sa, &a), 0);
	EXPECT_TRUE(fenced().empty());
	sa.valid = MS_SET_UID;
	sa.uid = 0;
	ASSERT_EQ(ms_setattr(ms, sess, &root, f, &sa, &a), 0);
	EXPECT_EQ(fenced().size(), 1u);
	EXPECT_EQ(layout_gen(f), 2u);
}

TEST_F(MsFenceTest, PunchFreesTheWholeBlocksInsideAndSplitsTheExtent)
{
	uint64_t h;
	uint64_t f = make_open_file(sess, "f", 10, &h);
	std::set<uint64_t> old = blocks_of(f);
	struct ms_attr a;

	ASSERT_EQ(old.size(), 10u);
	fenced();
	/* bytes 100 .. 5 blocks + 50: whole blocks 1..4 go, 0 and 5 stay (zeroed by the client) */
	ASSERT_EQ(ms_punch(ms, sess, &root, f, 100, 5 * 4096 - 50, h, &a), 0);
	EXPECT_EQ(a.blocks, 6u);
	EXPECT_EQ(free_blocks(), kBlocks - 6);
	auto fs = fenced();
	ASSERT_EQ(fs.size(), 1u);
	EXPECT_EQ(fs[0].free_then, kBlocks - 10) << "blocks were free before their fence";
	/* the extent is two now: file blocks 0 and 5..9, on the same volume blocks as before */
	std::set<uint64_t> left = blocks_of(f), want;
	uint64_t first = *old.begin();
	want.insert(first);
	for (uint64_t b = first + 5; b < first + 10; b++)
		want.insert(b);
	EXPECT_EQ(left, want);
	/* a range of no whole block frees nothing, and needs write access */
	ASSERT_EQ(ms_punch(ms, sess, &root, f, 4096 * 6 + 1, 100, h, &a), 0);
	EXPECT_EQ(a.blocks, 6u);
	EXPECT_EQ(ms_punch(ms, other, &bob, f, 0, 4096, 0, &a), -EACCES);
	EXPECT_EQ(ms_punch(ms, sess, &root, f, 0, 0, h, &a), -EINVAL);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
}

TEST_F(MsFenceTest, AfterACrashFreedBlocksAreFreeZeroedAtReuseAndEpochsMoveOn)
{
	uint64_t h;
	uint64_t f = make_open_file(other, "f", 10, &h);
	std::set<uint64_t> old = blocks_of(f);
	uint64_t mark = 0, epoch = ms_server_epoch(ms, id);

	fences.fail.insert(id);		/* killed before the fence was answered */
	ASSERT_EQ(truncate(sess, f, 0), 0);
	abandon(other);		/* dies with the process */
	abandon(io);
	other = nullptr;
	io = nullptr;
	crash_reopen();
	ms_set_zeroer(ms, ZeroLog::fn, &zeros);
	EXPECT_EQ(free_blocks(), kBlocks) << "the maps are rebuilt from the layouts";
	ASSERT_EQ(ms_high_water(ms, id, &mark), 0);
	for (uint64_t b : old)
		EXPECT_LT(b, mark) << "a once-used block above the mark";
	/* nothing is allocated on it before it registers, and then with a newer epoch */
	uint64_t g = mkfile(1, "g");
	EXPECT_EQ(alloc(g, 1), -EIO);
	EXPECT_EQ(add_server("vol", kBlocks, &io), id);
	EXPECT_GT(ms_server_epoch(ms, id), epoch);
	std::set<uint64_t> gb;
	ASSERT_EQ(alloc(g, kBlocks, &gb), 0);
	std::set<uint64_t> z = zeroed();
	for (uint64_t b : old)
		EXPECT_EQ(z.count(b), 1u) << "block " << b << " reused unzeroed";
}

/* ------------------------------------------------------------ first registration */

class MsRegisterMarkTest : public MsTest {
protected:
	uint64_t mark(uint32_t id)
	{
		uint64_t m = ~0ull;

		EXPECT_EQ(ms_high_water(ms, id, &m), 0);
		return m;
	}
};

TEST_F(MsRegisterMarkTest, FirstRegistrationOfAPristineVolumeStartsAtZero)
{
	uint32_t id = add_server("clean", 1000, nullptr, true);

	EXPECT_EQ(mark(id), 0u);
	reopen();
	EXPECT_EQ(mark(id), 0u);
}

TEST_F(MsRegisterMarkTest, FirstRegistrationOfAnotherVolumeZeroesEveryBlock)
{
	ZeroLog zeros;
	uint32_t id = add_server("dirty", 1000, nullptr, false);

	EXPECT_EQ(mark(id), 1000u);
	ms_set_zeroer(ms, ZeroLog::fn, &zeros);
	uint64_t f = mkfile(1, "f");
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, f, 0, 8 * 4096, 1, 0, &l), 0);
	ms_layout_free(&l);
	EXPECT_EQ(zeros.blocks.size(), 8u)
		<< "a never-used block of an unknown volume went out unzeroed";
	reopen();
	EXPECT_EQ(mark(id), 1000u);
}

TEST_F(MsRegisterMarkTest, ReregistrationKeepsTheMark)
{
	struct ms_session *s1, *s2;
	uint32_t clean = add_server("clean", 1000, &s1, true);
	uint32_t dirty = add_server("dirty", 1000, &s2, false);

	ms_session_close(ms, s1);
	ms_session_close(ms, s2);
	/* the flag of a known volume is ignored, either way */
	EXPECT_EQ(add_server("clean", 1000, nullptr, false), clean);
	EXPECT_EQ(add_server("dirty", 1000, nullptr, true), dirty);
	EXPECT_EQ(mark(clean), 0u);
	EXPECT_EQ(mark(dirty), 1000u);
	reopen();
	EXPECT_EQ(add_server("clean", 1000, nullptr, false), clean);
	EXPECT_EQ(add_server("dirty", 1000, nullptr, true), dirty);
	EXPECT_EQ(mark(clean), 0u);
	EXPECT_EQ(mark(dirty), 1000u);
}

TEST_F(MsFenceTest, AsyncRemoveRepliesBeforeItsFenceAndFreesOnlyAfterIt)
{
	uint64_t queued, done, blocks;

	ASSERT_EQ(ms_set_freeing_async(ms, 1), 0);
	uint64_t f = make_written_file("f", 10);
	fenced();
	gate(true);
	/* the server has not answered the fence: the remove is done anyway */
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(free_blocks(), kBlocks - 10) << "freed before their fence";
	ms_freeing_stats(ms, &queued, &done, &blocks);
	EXPECT_EQ(queued, 1u);
	EXPECT_EQ(blocks, 10u);

	/* fsck counts them as held, not leaked */
	struct ms_session *srv = ms_session_new(ms, "server");
	struct ms_fsck_report rep;
	ASSERT_EQ(ms_fsck(ms, srv, 0, 0, 10, &rep), 0);
	EXPECT_EQ(rep.problems, 0u);
	EXPECT_EQ(rep.blocks_held, 10u);
	ms_fsck_report_free(&rep);
	ms_session_close(ms, srv);

	/* the fence is answered: then, and only then, they are free */
	gate(false);
	ASSERT_EQ(ms_set_freeing_async(ms, 0), 0);	/* drains the queue */
	auto fs = fenced();
	ASSERT_EQ(fs.size(), 1u);
	EXPECT_EQ(fs[0].ino, f);
	EXPECT_EQ(fs[0].free_then, kBlocks - 10) << "blocks were free before their fence";
	EXPECT_EQ(free_blocks(), kBlocks);
	ms_freeing_stats(ms, &queued, &done, &blocks);
	EXPECT_EQ(done, 1u);
	EXPECT_EQ(blocks, 0u);
}

TEST_F(MsFenceTest, AsyncAllocationShortOfSpaceWaitsForRemovedFilesBlocks)
{
	ASSERT_EQ(ms_set_freeing_async(ms, 1), 0);
	make_written_file("f", kBlocks);
	gate(true);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	uint64_t g = mkfile(1, "g");
	/* the server answers later; the allocation meanwhile must not fail ENOSPC */
	std::thread answer([this] {
		std::this_thread::sleep_for(std::chrono::milliseconds(300));
		gate(false);
	});
	int ret = alloc(g, kBlocks);
	answer.join();
	EXPECT_EQ(ret, 0);
	EXPECT_EQ(free_blocks(), 0u);
}

TEST_F(MsFenceTest, AsyncFreeingOfAServerThatMissedTheFenceWaitsForItsRegistration)
{
	ASSERT_EQ(ms_set_freeing_async(ms, 1), 0);
	make_written_file("f", 10);
	fences.fail.insert(id);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	ASSERT_EQ(ms_set_freeing_async(ms, 0), 0);
	EXPECT_EQ(free_blocks(), kBlocks - 10) << "freed although the server was not told";
	EXPECT_EQ(ms_blocks_held(ms, id), 10u);
	fences.fail.clear();
}

TEST_F(MsFenceTest, AsyncFreeingOfAServerDownAtItsFenceFreesEvenIfItIsBackSince)
{
	struct ms_session *p, *q;

	/* a 2 MiB file striped over p and q (vol is down, too small to stripe) */
	ms_session_close(ms, io);
	io = nullptr;
	uint32_t pid = add_server("p", 1024, &p), qid = add_server("q", 1024, &q);
	uint64_t f = mkfile(1, "f");
	ASSERT_EQ(alloc(f, 512), 0);
	ASSERT_LT(MsTest::free_blocks(qid), 1024u);
	ASSERT_EQ(ms_set_freeing_async(ms, 1), 0);

	/* q is down when the fence goes out; p holds the fence open */
	gate(true);
	ms_session_close(ms, q);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	{
		std::unique_lock<std::mutex> g(fences.mu);
		fences.arrived.wait(g, [this] { return fences.held > 0; });
	}
	/* q registers again before the blocks are freed: a new epoch all the same */
	EXPECT_EQ(add_server("q", 1024, &q), qid);
	gate(false);
	ASSERT_EQ(ms_set_freeing_async(ms, 0), 0);
	auto fs = fenced();
	ASSERT_EQ(fs.size(), 1u);
	EXPECT_EQ(fs[0].servers, std::vector<uint32_t>{ pid });
	EXPECT_EQ(ms_blocks_held(ms, qid), 0u) << "held for a registration that has been";
	EXPECT_EQ(MsTest::free_blocks(qid), 1024u);
	EXPECT_EQ(MsTest::free_blocks(pid), 1024u);
	ms_session_close(ms, p);
	ms_session_close(ms, q);
}
