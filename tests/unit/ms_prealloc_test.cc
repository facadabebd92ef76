// SPDX-License-Identifier: MIT
/*
 * ms_prealloc_test.cc - speculative preallocation: the unwritten blocks that
 * writers allocated past the end of a file are freed, in one batch, when its
 * last handle is released, not while another handle is open, not when a
 * connection merely breaks; a truncate frees what it cuts (preallocation
 * included) at once, open handles or not (the fence makes that safe).
 */
#include <errno.h>

#include "ms_fixture.h"

class MsPreallocTest : public MsTest {
protected:
	static constexpr uint64_t kBlocks = 100;
	uint32_t id = 0;
	struct ms_session *other = nullptr;

	void SetUp() override
	{
		MsTest::SetUp();
		id = add_server("vol", kBlocks);
		other = ms_session_new(ms, "client");
		ASSERT_NE(other, nullptr);
	}

	void TearDown() override
	{
		if (other)
			ms_session_close(ms, other);
		other = nullptr;
		MsTest::TearDown();
	}

	/*
	 * Create @name open in sess, allocate @alloc blocks from 0 (a write with its
	 * preallocation) and commit @size bytes written from 0; returns its ino.
	 */
	uint64_t stream_file(const char *name, uint64_t alloc, uint64_t size, uint64_t *h)
	{
		struct ms_attr a;
		struct ms_layout l;
		struct ms_range w = { 0, size };

		EXPECT_EQ(ms_mknod(ms, sess, &root, 1, name, 0644, 0, 0, 1, 1, O_RDWR, &a, h), 0);
		EXPECT_EQ(ms_layout(ms, sess, &root, a.ino, 0, alloc * 4096, 1, *h, &l), 0);
		ms_layout_free(&l);
		EXPECT_EQ(ms_commit(ms, sess, &root, a.ino, size, 0, &w, 1, *h, &a), 0);
		return a.ino;
	}

	/* Blocks of @ino's first MiB: how many, up to which file block, unwritten ones. */
	void extents(uint64_t ino, uint64_t *count, uint64_t *end, uint64_t *unwritten)
	{
		struct ms_layout l;

		*count = *end = *unwritten = 0;
		/* by length: the layout reply otherwise stops at the size */
		ASSERT_EQ(ms_layout(ms, sess, &root, ino, 0, 1 << 20, 0, 0, &l), 0);
		for (size_t i = 0; i < l.n; i++) {
			*count += l.ext[i].length / 4096;
			*end = (l.ext[i].file_offset + l.ext[i].length) / 4096;
			if (l.ext[i].unwritten)
				*unwritten += l.ext[i].length / 4096;
		}
		ms_layout_free(&l);
	}

	uint64_t free_blocks()
	{
		struct ms_statfs st;

		ms_statfs(ms, &st);
		return st.free_blocks;
	}

	int truncate(struct ms_session *s, uint64_t ino, uint64_t size)
	{
		struct ms_setattr sa = {};
		struct ms_attr a;

		sa.valid = MS_SET_SIZE;
		sa.size = size;
		return ms_setattr(ms, s, &root, ino, &sa, &a);
	}
};

TEST_F(MsPreallocTest, LastReleaseFreesUnwrittenBlocksPastEof)
{
	uint64_t h, count, end, unw;
	/* 10 blocks and a bit written, 40 allocated */
	uint64_t f = stream_file("f", 40, 10 * 4096 + 100, &h);

	EXPECT_EQ(attr(f).blocks, 40u) << "preallocated blocks count while the file is open";
	EXPECT_EQ(free_blocks(), kBlocks - 40);
	ASSERT_EQ(ms_release(ms, sess, h), 0);

	EXPECT_EQ(attr(f).blocks, 11u);
	EXPECT_EQ(attr(f).size, 10u * 4096 + 100);
	EXPECT_EQ(free_blocks(), kBlocks - 11);
	extents(f, &count, &end, &unw);
	EXPECT_EQ(count, 11u);
	EXPECT_EQ(end, 11u);
	EXPECT_EQ(unw, 0u);

	/* and it is durable: a restart rebuilds the maps from the layouts */
	ms_session_close(ms, other);
	other = nullptr;
	reopen();
	add_server("vol", kBlocks);
	EXPECT_EQ(attr(f).blocks, 11u);
	EXPECT_EQ(free_blocks(), kBlocks - 11);
}

TEST_F(MsPreallocTest, NotWhileAnotherHandleIsOpen)
{
	uint64_t h, h2, count, end, unw;
	uint64_t f = stream_file("f", 40, 8 * 4096, &h);
	struct ms_attr a;

	ASSERT_EQ(ms_open_file(ms, other, &root, f, O_RDONLY, &a, &h2), 0);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	EXPECT_EQ(attr(f).blocks, 40u) << "another handle may hold a layout naming them";
	EXPECT_EQ(free_blocks(), kBlocks - 40);

	ASSERT_EQ(ms_release(ms, other, h2), 0);
	EXPECT_EQ(attr(f).blocks, 8u);
	EXPECT_EQ(free_blocks(), kBlocks - 8);
	extents(f, &count, &end, &unw);
	EXPECT_EQ(end, 8u);
}

TEST_F(MsPreallocTest, BrokenConnectionKeepsThemUntilTheNextRelease)
{
	uint64_t h, h2;
	uint64_t f = stream_file("f", 40, 8 * 4096, &h);
	struct ms_attr a;

	/* its client may reconnect and commit what it wrote into them */
	ms_session_close(ms, sess);
	sess = ms_session_new(ms, "client");
	ASSERT_NE(sess, nullptr);
	EXPECT_EQ(attr(f).blocks, 40u);
	EXPECT_EQ(free_blocks(), kBlocks - 40);

	ASSERT_EQ(ms_open_file(ms, sess, &root, f, O_RDONLY, &a, &h2), 0);
	ASSERT_EQ(ms_release(ms, sess, h2), 0);
	EXPECT_EQ(attr(f).blocks, 8u);
	EXPECT_EQ(free_blocks(), kBlocks - 8);
}

TEST_F(MsPreallocTest, TruncateUnderOpenHandlesFreesWhatItCutsAtOnce)
{
	uint64_t h, h2;
	uint64_t f = stream_file("f", 40, 20 * 4096, &h);
	struct ms_attr a;

	ASSERT_EQ(ms_open_file(ms, other, &root, f, O_RDWR, &a, &h2), 0);
	/* the written blocks past 5 and the preallocation past 20 go at once */
	ASSERT_EQ(truncate(other, f, 5 * 4096), 0);
	EXPECT_EQ(attr(f).blocks, 5u);
	EXPECT_EQ(free_blocks(), kBlocks - 5);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	ASSERT_EQ(ms_release(ms, other, h2), 0);
	EXPECT_EQ(attr(f).blocks, 5u);
	EXPECT_EQ(free_blocks(), kBlocks - 5);
}

TEST_F(MsPreallocTest, TruncateUpKeepsTheBlocksItCoversAndCutsAnExtent)
{
	uint64_t h, count, end, unw;
	uint64_t f = stream_file("f", 40, 4 * 4096, &h);

	/* extend over part of the preallocation: those blocks are the file's now */
	ASSERT_EQ(truncate(sess, f, 12 * 4096 + 1), 0);
	ASSERT_EQ(ms_release(ms, sess, h), 0);

	/* [0,4) written, [4,13) unwritten (reading as zeros) and kept */
	extents(f, &count, &end, &unw);
	EXPECT_EQ(count, 13u);
	EXPECT_EQ(end, 13u);
	EXPECT_EQ(unw, 9u);
	EXPECT_EQ(attr(f).blocks, 13u);
	EXPECT_EQ(free_blocks(), kBlocks - 13);
}

TEST_F(MsPreallocTest, WrittenBlocksPastEofAreNotTrimmed)
{
	uint64_t h, count, end, unw;
	uint64_t f = stream_file("f", 40, 4 * 4096, &h);
	struct ms_range w = { 30 * 4096, 4096 };
	struct ms_attr a;

	/* a COMMIT of a block past the size marks it written but leaves the size */
	ASSERT_EQ(ms_commit(ms, sess, &root, f, 0, 0, &w, 1, h, &a), 0);
	EXPECT_EQ(a.size, 4u * 4096);
	ASSERT_EQ(ms_release(ms, sess, h), 0);

	/* only the unwritten ones go: [4,30) and [31,40) */
	extents(f, &count, &end, &unw);
	EXPECT_EQ(count, 5u);
	EXPECT_EQ(end, 31u);
	EXPECT_EQ(unw, 0u);
	EXPECT_EQ(attr(f).blocks, 5u);
	EXPECT_EQ(free_blocks(), kBlocks - 5);
}

TEST_F(MsPreallocTest, UnlinkedFileIsPurgedWhole)
{
	uint64_t h;
	uint64_t f = stream_file("f", 40, 4 * 4096, &h);

	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(free_blocks(), kBlocks - 40);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	EXPECT_EQ(free_blocks(), kBlocks);
	struct ms_attr a;
	EXPECT_EQ(ms_getattr(ms, f, &a), -ENOENT);
}
