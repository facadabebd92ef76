// SPDX-License-Identifier: MIT
/*
 * ms_commit_test.cc - COMMIT of many ranges at once: out of order,
 * overlapping, spanning chunk boundaries, several in one chunk, some in holes
 * or empty. Exactly the blocks named turn written, in one durable batch: after
 * a crash the layout shows the same.
 */
#include <errno.h>

#include <set>

#include "ms_fixture.h"

class MsCommitTest : public MsTest {
protected:
	/* Block numbers of the file (4 KiB units) that its layout shows written. */
	std::set<uint64_t> written_blocks(uint64_t ino, uint64_t bytes, uint64_t *mapped)
	{
		std::set<uint64_t> out;
		struct ms_layout l;

		*mapped = 0;
		EXPECT_EQ(ms_layout(ms, sess, &root, ino, 0, bytes, 0, 0, &l), 0);
		for (size_t i = 0; i < l.n; i++) {
			*mapped += l.ext[i].length / 4096;
			if (l.ext[i].unwritten)
				continue;
			for (uint64_t b = 0; b < l.ext[i].length / 4096; b++)
				out.insert(l.ext[i].file_offset / 4096 + b);
		}
		ms_layout_free(&l);
		return out;
	}
};

TEST_F(MsCommitTest, ManyRangesInAnyOrderMarkExactlyTheirBlocks)
{
	const uint64_t MiB = 1 << 20;
	uint64_t f, h, mapped;
	struct ms_attr a;
	struct ms_layout l;

	add_server("a", 100000);
	add_server("b", 100000);
	f = mkfile(1, "f");
	ASSERT_EQ(ms_open_file(ms, sess, &root, f, O_RDWR, &a, &h), 0);
	/* chunks 0..3 and 6 allocated (1 MiB chunks), 4..5 a hole */
	ASSERT_EQ(ms_layout(ms, sess, &root, f, 0, 4 * MiB, 1, h, &l), 0);
	ms_layout_free(&l);
	ASSERT_EQ(ms_layout(ms, sess, &root, f, 6 * MiB, MiB, 1, h, &l), 0);
	ms_layout_free(&l);

	/* byte ranges; blocks are 4 KiB, chunks 256 blocks */
	std::vector<struct ms_range> w = {
		{ 700 * 4096, 5 * 4096 },		/* chunk 2 */
		{ 3 * 4096, 4096 },			/* chunk 0 */
		{ 250 * 4096, 10 * 4096 },		/* chunks 0 and 1 */
		{ 3 * 4096 + 100, 4096 },		/* overlaps the one before, rounds out to 3..4 */
		{ 1000 * 4096, 24 * 4096 },		/* the end of chunk 3 */
		{ 512 * 4096, 0 },			/* empty: nothing */
		{ 4 * MiB + 4096, 4096 },		/* in the hole: nothing */
		{ 6 * MiB + 10 * 4096, 2 * 4096 },	/* chunk 6, past the hole */
		{ 260 * 4096, 2 * 4096 },		/* chunk 1, right after the one above */
		{ 255 * 4096, 2 * 4096 },		/* inside chunks 0..1 again */
	};
	std::set<uint64_t> expect;
	for (const struct ms_range &r : w) {
		if (r.length == 0 || (r.offset >= 4 * MiB && r.offset < 6 * MiB))
			continue;
		for (uint64_t b = r.offset / 4096; b < (r.offset + r.length + 4095) / 4096; b++)
			expect.insert(b);
	}
	ASSERT_EQ(ms_commit(ms, sess, &root, f, 7 * MiB, 0, w.data(), w.size(), h, &a), 0);
	EXPECT_EQ(a.size, 7 * MiB);
	EXPECT_EQ(written_blocks(f, 7 * MiB, &mapped), expect);
	EXPECT_EQ(mapped, 5 * 256u);
	/* the same ranges again change nothing */
	ASSERT_EQ(ms_commit(ms, sess, &root, f, 7 * MiB, 0, w.data(), w.size(), h, &a), 0);
	EXPECT_EQ(written_blocks(f, 7 * MiB, &mapped), expect);

	crash_reopen();
	EXPECT_EQ(written_blocks(f, 7 * MiB, &mapped), expect);
	EXPECT_EQ(mapped, 5 * 256u);
	EXPECT_EQ(attr(f).size, 7 * MiB);
	EXPECT_EQ(attr(f).blocks, 5 * 256u);
}

TEST_F(MsCommitTest, EmptyCommitOnlySetsSizeAndTimes)
{
	uint64_t f, h, mapped;
	struct ms_attr a;

	add_server("a", 1000);
	f = mkfile(1, "f");
	ASSERT_EQ(ms_open_file(ms, sess, &root, f, O_RDWR, &a, &h), 0);
	ASSERT_EQ(ms_commit(ms, sess, &root, f, 123, 777, nullptr, 0, h, &a), 0);
	EXPECT_EQ(a.size, 123u);
	EXPECT_EQ(a.mtime_ns, 777);
	EXPECT_TRUE(written_blocks(f, 4096, &mapped).empty());
	EXPECT_EQ(mapped, 0u);
}
