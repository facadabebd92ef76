// SPDX-License-Identifier: MIT
/*
 * ms_alloc_sync_test.cc - an allocation for writing rides on the sync of the
 * COMMIT after it: written without a sync unless it raises a high-water mark
 * (or is fallocate's), kept across a restart of the process, and, where a
 * crash of the machine lost it, found by the COMMIT of what was written
 * there under the earlier incarnation: nothing committed, -ESTALE.
 */
#include <errno.h>
#include <fcntl.h>

#include <string>

#include "ms_fixture.h"
extern "C" {
#include "rdfs_frame.h"
}

class MsAllocSyncTest : public MsTest {
protected:
	uint32_t id = 0;

	void SetUp() override
	{
		MsTest::SetUp();
		id = add_server("vol", 100000);
	}

	struct Counts {
		uint64_t syncs, mutations, unsynced;
	};

	Counts counts()
	{
		Counts k;

		ms_write_counts(ms, &k.syncs, &k.mutations, &k.unsynced);
		return k;
	}

	/* Allocate [0, @nblocks blocks) of @ino, as a writer does (or fallocate). */
	int alloc(uint64_t ino, uint64_t nblocks, int how = 1, uint64_t *inc = nullptr)
	{
		struct ms_layout l;
		int ret = ms_layout(ms, sess, &root, ino, 0, nblocks * 4096, how, 0, &l);

		if (ret == 0) {
			if (inc)
				*inc = l.incarnation;
			ms_layout_free(&l);
		}
		return ret;
	}

	int commit_from(uint64_t ino, uint64_t bytes, uint64_t inc)
	{
		struct ms_range w = { 0, bytes };
		struct ms_attr a;

		return ms_commit_from(ms, sess, &root, ino, bytes, 0, &w, 1, 0, inc, &a);
	}

	/* The database as a crash of the machine would leave it now (all synced). */
	std::string snapshot()
	{
		std::string copy = dir + ".synced";
		std::string cmd = "rm -rf '" + copy + "' && cp -a '" + dir + "' '" + copy + "'";

		EXPECT_EQ(system(cmd.c_str()), 0);
		return copy;
	}
};

TEST_F(MsAllocSyncTest, AnAllocationForWritingIsNotSyncedTheCommitAfterItIs)
{
	uint64_t f = mkfile(1, "f"), g = mkfile(1, "g"), h = mkfile(1, "h");

	/* the first allocation on a pristine volume raises its mark: synced */
	Counts k0 = counts();
	ASSERT_EQ(alloc(f, 4), 0);
	Counts k1 = counts();
	EXPECT_EQ(k1.syncs - k0.syncs, 1u);
	EXPECT_EQ(k1.unsynced, k0.unsynced);

	/* the next, below the mark: no sync of its own */
	ASSERT_EQ(alloc(g, 4), 0);
	Counts k2 = counts();
	EXPECT_EQ(k2.syncs, k1.syncs) << "an allocation below the mark was synced";
	EXPECT_EQ(k2.unsynced - k1.unsynced, 1u);

	/* its COMMIT is synced, and so carries the allocation to the disk */
	ASSERT_EQ(commit_from(g, 4 * 4096, ms_incarnation(ms)), 0);
	Counts k3 = counts();
	EXPECT_EQ(k3.syncs - k2.syncs, 1u);
	EXPECT_EQ(k3.unsynced, k2.unsynced);

	/* fallocate's blocks were promised to the caller: synced */
	ASSERT_EQ(alloc(h, 4, MS_ALLOC_KEEP), 0);
	Counts k4 = counts();
	EXPECT_EQ(k4.syncs - k3.syncs, 1u);
	EXPECT_EQ(k4.unsynced, k3.unsynced);
}

TEST_F(MsAllocSyncTest, AnUnsyncedAllocationSurvivesARestartOfTheProcess)
{
	uint64_t f = mkfile(1, "f"), g = mkfile(1, "g"), inc = 0;

	ASSERT_EQ(alloc(f, 4), 0);	/* raises the mark */
	ASSERT_EQ(alloc(g, 8, 1, &inc), 0);
	EXPECT_EQ(inc, ms_incarnation(ms));
	EXPECT_NE(inc, 0u);
	reopen();
	EXPECT_NE(ms_incarnation(ms), inc) << "a new start, a new incarnation";
	/* LevelDB wrote it to its log before the reply: the blocks are there */
	add_server("vol", 100000);
	EXPECT_EQ(commit_from(g, 8 * 4096, inc), 0);
	EXPECT_EQ(attr(g).size, 8 * 4096u);
	EXPECT_EQ(attr(g).blocks, 8u);
}

TEST_F(MsAllocSyncTest, ACommitFindsTheAllocationAMachineCrashLost)
{
	uint64_t f = mkfile(1, "f"), g = mkfile(1, "g"), inc = 0;

	ASSERT_EQ(alloc(f, 4), 0);	/* raises the mark: synced */
	std::string synced = snapshot();
	ASSERT_EQ(alloc(g, 8, 1, &inc), 0);
	/* the client writes its 8 blocks; then the machine goes down */
	crash_reopen(synced);	/* and the machine with it */
	add_server("vol", 100000);

	/* g has no blocks now: the COMMIT of its writes must not make a size of holes */
	EXPECT_EQ(commit_from(g, 8 * 4096, inc), -ESTALE);
	EXPECT_EQ(attr(g).size, 0u) << "a refused COMMIT changed the file";
	EXPECT_EQ(commit_from(g, 8 * 4096, RDFS_INCARNATION_MIXED), -ESTALE);

	/* what was synced before the crash is there and commits as always */
	EXPECT_EQ(commit_from(f, 4 * 4096, inc), 0);
	EXPECT_EQ(attr(f).size, 4 * 4096u);

	/* a client that does not say, or says this start: today's meaning */
	uint64_t h = mkfile(1, "h");
	EXPECT_EQ(commit_from(h, 4096, 0), 0);
	EXPECT_EQ(commit_from(h, 4096, ms_incarnation(ms)), 0);
}

TEST_F(MsAllocSyncTest, ACommitChecksEveryBlockAcrossChunks)
{
	uint64_t f = mkfile(1, "f"), inc = ms_incarnation(ms) + 1;

	/* 2 MiB: two chunk records; a COMMIT over them and one block past */
	ASSERT_EQ(alloc(f, 512), 0);
	EXPECT_EQ(commit_from(f, 512 * 4096, inc), 0);
	struct ms_range w = { 0, 513 * 4096 };
	struct ms_attr a;
	EXPECT_EQ(ms_commit_from(ms, sess, &root, f, 513 * 4096, 0, &w, 1, 0, inc, &a), -ESTALE);
	/* a hole in the middle: a written range across it is refused */
	EXPECT_EQ(ms_punch(ms, sess, &root, f, 300 * 4096, 4096, 0, &a), 0);
	struct ms_range mid = { 299 * 4096, 3 * 4096 };
	EXPECT_EQ(ms_commit_from(ms, sess, &root, f, 0, 0, &mid, 1, 0, inc, &a), -ESTALE);
	struct ms_range before = { 0, 300 * 4096 };
	EXPECT_EQ(ms_commit_from(ms, sess, &root, f, 0, 0, &before, 1, 0, inc, &a), 0);
}
