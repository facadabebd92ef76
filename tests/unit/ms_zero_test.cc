// SPDX-License-Identifier: MIT
/*
 * ms_zero_test.cc - zeroing of recycled blocks through LAYOUT: only blocks
 * below a server's high-water mark go to the zeroer, a failing zeroer leaves
 * nothing allocated, and the persisted mark survives restarts, crashes and
 * concurrent allocations without ever falling behind a block that was used.
 */
#include <errno.h>

#include <functional>
#include <mutex>
#include <thread>

extern "C" {
#include <leveldb/c.h>
}

#include "ms_fixture.h"

namespace {

/* Stands in for the I/O servers: records what it is asked to zero. */
struct Zeroer {
	std::mutex mu;
	std::vector<struct ms_zero_range> calls;
	int fail = 0;

	static int fn(void *arg, const struct ms_zero_range *r, size_t n)
	{
		Zeroer *z = static_cast<Zeroer *>(arg);
		std::lock_guard<std::mutex> g(z->mu);

		for (size_t i = 0; i < n; i++)
			z->calls.push_back(r[i]);
		return z->fail;
	}
	std::vector<struct ms_zero_range> take()
	{
		std::lock_guard<std::mutex> g(mu);
		std::vector<struct ms_zero_range> out;

		out.swap(calls);
		return out;
	}
};

}  // namespace

/* Global, so that gtest finds them for the C struct (argument-dependent lookup). */
static bool operator==(const struct ms_zero_range &a, const struct ms_zero_range &b)
{
	return a.server_id == b.server_id && a.block == b.block && a.count == b.count;
}

static std::ostream &operator<<(std::ostream &os, const struct ms_zero_range &r)
{
	return os << "{server " << r.server_id << ", " << r.block << "+" << r.count << "}";
}


class MsZeroTest : public MsTest {
protected:
	Zeroer zeroer;

	void SetUp() override
	{
		MsTest::SetUp();
		ms_set_zeroer(ms, Zeroer::fn, &zeroer);
	}

	void reopen_with_zeroer(bool crash = false)
	{
		if (crash)
			crash_reopen();
		else
			reopen();
		ms_set_zeroer(ms, Zeroer::fn, &zeroer);
	}

	int alloc(uint64_t ino, uint64_t first_block, uint64_t nblocks)
	{
		struct ms_layout l;
		int ret = ms_layout(ms, sess, &root, ino, first_block * 4096, nblocks * 4096, 1, 0, &l);

		if (!ret)
			ms_layout_free(&l);
		return ret;
	}

	void truncate_blocks(uint64_t ino, uint64_t nblocks)
	{
		struct ms_setattr sa = {};
		struct ms_attr a;

		sa.valid = MS_SET_SIZE;
		sa.size = nblocks * 4096;
		ASSERT_EQ(ms_setattr(ms, sess, &root, ino, &sa, &a), 0);
	}

	uint64_t mark(uint32_t id)
	{
		uint64_t m = 0;

		EXPECT_EQ(ms_high_water(ms, id, &m), 0);
		return m;
	}

	/* Edit the database behind the metaserver's back (it must be closed). */
	void db_edit(const std::function<void(leveldb_t *)> &edit)
	{
		leveldb_options_t *o = leveldb_options_create();
		char *err = nullptr;
		leveldb_t *db = leveldb_open(o, dir.c_str(), &err);

		ASSERT_EQ(err, nullptr) << err;
		edit(db);
		leveldb_close(db);
		leveldb_options_destroy(o);
	}

	static void put_mark(leveldb_t *db, uint32_t id, const uint64_t *mark)
	{
		char k[5] = { 'H', (char)(id >> 24), (char)(id >> 16), (char)(id >> 8), (char)id };
		leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
		char *err = nullptr;

		if (mark) {
			char v[8];

			for (int i = 0; i < 8; i++)
				v[i] = (char)(*mark >> (8 * i));
			leveldb_put(db, wo, k, 5, v, 8, &err);
		} else {
			leveldb_delete(db, wo, k, 5, &err);
		}
		EXPECT_EQ(err, nullptr);
		leveldb_writeoptions_destroy(wo);
	}
};

TEST_F(MsZeroTest, OnlyBlocksBelowTheHighWaterMarkAreZeroed)
{
	uint32_t id = add_server("z", 100000);
	uint64_t f = mkfile(1, "f");

	/* a fresh volume: nothing to zero */
	ASSERT_EQ(alloc(f, 0, 100), 0);
	EXPECT_TRUE(zeroer.take().empty());
	EXPECT_EQ(mark(id), 100u);

	/* blocks 10..99 freed and taken back (the file grows in place): all zeroed */
	truncate_blocks(f, 10);
	ASSERT_EQ(alloc(f, 10, 90), 0);
	EXPECT_EQ(zeroer.take(), (std::vector<struct ms_zero_range>{ { id, 10, 90 } }));
	EXPECT_EQ(mark(id), 100u);

	/* past the mark again: fresh */
	ASSERT_EQ(alloc(f, 100, 50), 0);
	EXPECT_TRUE(zeroer.take().empty());
	EXPECT_EQ(mark(id), 150u);

	/* one run straddling the mark: only its part below it */
	truncate_blocks(f, 10);
	ASSERT_EQ(alloc(f, 10, 190), 0);
	EXPECT_EQ(zeroer.take(), (std::vector<struct ms_zero_range>{ { id, 10, 140 } }));
	EXPECT_EQ(mark(id), 200u);

	/* describing a layout never zeroes */
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, f, 0, 0, 0, 0, &l), 0);
	ms_layout_free(&l);
	EXPECT_TRUE(zeroer.take().empty());
}

TEST_F(MsZeroTest, FailedZeroingAllocatesNothing)
{
	uint32_t id = add_server("z", 60);
	uint64_t f = mkfile(1, "f"), g = mkfile(1, "g");

	ASSERT_EQ(alloc(f, 0, 50), 0);
	truncate_blocks(f, 0);
	ASSERT_EQ(free_blocks(id), 60u);

	/* g gets the 10 fresh blocks 50..59, then wraps to recycled 0..9 */
	zeroer.fail = -EIO;
	EXPECT_EQ(alloc(g, 0, 20), -EIO);
	EXPECT_EQ(zeroer.take(), (std::vector<struct ms_zero_range>{ { id, 0, 10 } }));
	EXPECT_EQ(free_blocks(id), 60u) << "a failed LAYOUT kept blocks";
	EXPECT_EQ(attr(g).blocks, 0u);
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, g, 0, 20 * 4096, 0, 0, &l), 0);
	EXPECT_EQ(l.n, 0u);
	ms_layout_free(&l);

	/* the failed try moved the allocator's hint: now all 20 come from recycled 10..29 */
	zeroer.fail = 0;
	ASSERT_EQ(alloc(g, 0, 20), 0);
	EXPECT_EQ(zeroer.take(), (std::vector<struct ms_zero_range>{ { id, 10, 20 } }));
	EXPECT_EQ(free_blocks(id), 40u);
	EXPECT_EQ(attr(g).blocks, 20u);
}

TEST_F(MsZeroTest, MarkSurvivesRestartsAndCrashesAfterTheBlocksAreFreed)
{
	uint32_t id = add_server("z", 100000);
	uint64_t f = mkfile(1, "f");

	ASSERT_EQ(alloc(f, 0, 1000), 0);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	reopen_with_zeroer();
	/* nothing points at blocks 0..999 now; the persisted mark still covers them */
	EXPECT_GE(mark(id), 1000u);
	uint64_t after_restart = mark(id);

	EXPECT_EQ(add_server("z", 100000), id);
	uint64_t g = mkfile(1, "g");
	ASSERT_EQ(alloc(g, 0, 10), 0);
	auto z = zeroer.take();
	ASSERT_EQ(z.size(), 1u);
	EXPECT_EQ(z[0].server_id, id);
	EXPECT_LT(z[0].block, 1000u) << "a recycled block went out unzeroed";

	/* allocate far past the mark, crash with the file still open, free it */
	truncate_blocks(g, 0);
	ASSERT_EQ(alloc(g, 0, after_restart + 5000), 0);
	uint64_t high = mark(id);
	EXPECT_GE(high, after_restart + 5000);
	crash_reopen();
	ms_set_zeroer(ms, Zeroer::fn, &zeroer);
	EXPECT_GE(mark(id), high);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "g"), 0);
	reopen_with_zeroer();
	EXPECT_GE(mark(id), high);
}

TEST_F(MsZeroTest, ConcurrentAllocationsNeverPersistASmallerMark)
{
	uint32_t id = add_server("z", 2000000);
	const int kThreads = 8, kRounds = 40, kBlocks = 1000;
	std::vector<uint64_t> files;

	for (int t = 0; t < kThreads; t++)
		files.push_back(mkfile(1, ("f" + std::to_string(t)).c_str()));
	std::vector<std::thread> threads;
	for (int t = 0; t < kThreads; t++)
		threads.emplace_back([&, t]() {
			for (int r = 0; r < kRounds; r++)
				ASSERT_EQ(alloc(files[t], (uint64_t)r * kBlocks, kBlocks), 0);
		});
	for (auto &th : threads)
		th.join();
	uint64_t high = mark(id);
	EXPECT_EQ(high, (uint64_t)kThreads * kRounds * kBlocks);
	EXPECT_TRUE(zeroer.take().empty());

	/* with every file gone only the persisted mark remembers the blocks */
	for (int t = 0; t < kThreads; t++)
		ASSERT_EQ(ms_unlink(ms, &root, 1, ("f" + std::to_string(t)).c_str()), 0);
	reopen_with_zeroer();
	EXPECT_GE(mark(id), high);
}

TEST_F(MsZeroTest, MissingOrStaleMarksAreRepairedAtStartup)
{
	uint32_t id = add_server("z", 500);
	uint64_t f = mkfile(1, "f");

	ASSERT_EQ(alloc(f, 0, 10), 0);

	/* a database from before marks: every block may have been used */
	close_db();
	db_edit([&](leveldb_t *db) { put_mark(db, id, nullptr); });
	open_db();
	ms_set_zeroer(ms, Zeroer::fn, &zeroer);
	EXPECT_EQ(mark(id), 500u);
	EXPECT_EQ(add_server("z", 500), id);
	uint64_t g = mkfile(1, "g");
	ASSERT_EQ(alloc(g, 0, 5), 0);
	EXPECT_EQ(zeroer.take(), (std::vector<struct ms_zero_range>{ { id, 10, 5 } }));
	reopen_with_zeroer();
	EXPECT_EQ(mark(id), 500u) << "the assumed mark was not persisted";

	/* a mark behind the layouts (damage) is raised to them */
	close_db();
	uint64_t zero = 0;
	db_edit([&](leveldb_t *db) { put_mark(db, id, &zero); });
	open_db();
	EXPECT_EQ(mark(id), 15u);
	reopen();
	EXPECT_EQ(mark(id), 15u);
}

TEST_F(MsZeroTest, WithoutAZeroerRecycledBlocksAreHandedOutAsTheyAre)
{
	ms_set_zeroer(ms, nullptr, nullptr);
	uint32_t id = add_server("z", 100);
	uint64_t f = mkfile(1, "f");

	ASSERT_EQ(alloc(f, 0, 20), 0);
	truncate_blocks(f, 0);
	ASSERT_EQ(alloc(f, 0, 20), 0);
	EXPECT_EQ(free_blocks(id), 80u);
	EXPECT_TRUE(zeroer.take().empty());
}
