// SPDX-License-Identifier: MIT
/*
 * ms_orphan_test.cc - open-but-unlinked files: they keep their data and show
 * nlink 0 until the last handle goes (release or the session's end), and a
 * crash leaves them to be reclaimed at the next start.
 */
#include <errno.h>

#include "ms_fixture.h"

class MsOrphanTest : public MsTest {
protected:
	uint32_t id = 0;

	void SetUp() override
	{
		MsTest::SetUp();
		id = add_server("vol", 1000);
	}

	uint64_t free_blocks()
	{
		struct ms_statfs st;

		ms_statfs(ms, &st);
		return st.free_blocks;
	}

	uint64_t make_file_with_blocks(const char *name, uint64_t *h)
	{
		struct ms_attr a;
		struct ms_layout l;

		EXPECT_EQ(ms_mknod(ms, sess, &root, 1, name, 0644, 0, 0, 1, 1, O_RDWR, &a, h), 0);
		EXPECT_EQ(ms_layout(ms, sess, &root, a.ino, 0, 40960, 1, *h, &l), 0);
		ms_layout_free(&l);
		return a.ino;
	}
};

TEST_F(MsOrphanTest, UnlinkedOpenFileLivesUntilRelease)
{
	uint64_t h, h2;
	uint64_t f = make_file_with_blocks("f", &h);
	struct ms_attr a;
	struct ms_layout l;

	ASSERT_EQ(ms_open_file(ms, sess, &root, f, O_RDONLY, &a, &h2), 0);
	EXPECT_EQ(free_blocks(), 990u);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(lookup(1, "f"), -ENOENT);
	ASSERT_EQ(ms_getattr(ms, f, &a), 0);
	EXPECT_EQ(a.nlink, 0u);
	ASSERT_EQ(ms_layout(ms, sess, &root, f, 0, 40960, 0, h, &l), 0);
	EXPECT_EQ(l.n, 1u);
	ms_layout_free(&l);
	EXPECT_EQ(free_blocks(), 990u);
	/* it cannot be linked back */
	EXPECT_EQ(ms_link(ms, &root, f, 1, "back", &a), -ENOENT);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	EXPECT_EQ(ms_getattr(ms, f, &a), 0);
	ASSERT_EQ(ms_release(ms, sess, h2), 0);
	EXPECT_EQ(ms_getattr(ms, f, &a), -ENOENT);
	EXPECT_EQ(free_blocks(), 1000u);
}

TEST_F(MsOrphanTest, SessionCloseReleasesHandles)
{
	struct ms_session *other = ms_session_new(ms, "client");
	struct ms_attr a;
	uint64_t h, h2;
	uint64_t f = make_file_with_blocks("f", &h);

	ASSERT_EQ(ms_release(ms, sess, h), 0);
	ASSERT_EQ(ms_open_file(ms, other, &root, f, O_RDONLY, &a, &h2), 0);
	/* a handle belongs to its session */
	EXPECT_EQ(ms_release(ms, sess, h2), -EBADF);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(ms_getattr(ms, f, &a), 0);
	ms_session_close(ms, other);
	EXPECT_EQ(ms_getattr(ms, f, &a), -ENOENT);
	EXPECT_EQ(free_blocks(), 1000u);
}

TEST_F(MsOrphanTest, OrphansAreReclaimedAfterCrash)
{
	uint64_t h;
	uint64_t f = make_file_with_blocks("f", &h), keep = make_file_with_blocks("keep", &h);
	struct ms_attr a;

	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	ASSERT_EQ(ms_getattr(ms, f, &a), 0);
	crash_reopen();
	EXPECT_EQ(ms_getattr(ms, f, &a), -ENOENT);
	EXPECT_EQ(ms_getattr(ms, keep, &a), 0);
	/* the orphan's blocks are free, the kept file's are not (no server is up yet) */
	uint64_t *w, n;
	ASSERT_EQ(ms_alloc_bitmap(ms, id, &w, &n), 0);
	int used = 0;
	for (uint64_t b = 0; b < n; b++)
		used += (w[b / 64] >> (b % 64)) & 1;
	free(w);
	EXPECT_EQ(used, 10);
	struct ms_statfs st;
	ms_statfs(ms, &st);
	EXPECT_EQ(st.files, 2u);
}

TEST_F(MsOrphanTest, CleanRestartAlsoReclaims)
{
	uint64_t h;
	uint64_t f = make_file_with_blocks("f", &h);
	struct ms_attr a;

	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	reopen();
	EXPECT_EQ(ms_getattr(ms, f, &a), -ENOENT);
}
