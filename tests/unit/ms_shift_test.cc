// SPDX-License-Identifier: MIT
/*
 * ms_shift_test.cc - fallocate COLLAPSE_RANGE and INSERT_RANGE at the
 * metaserver: the layout after the range moves by the range's length, block
 * for block onto the same server blocks (across chunk boundaries, with one
 * copy and with two), the collapsed blocks are freed, the size follows, the
 * file is fenced, and it all survives a restart; what ext4 refuses is refused.
 */
#include <errno.h>

#include <map>
#include <set>
#include <utility>

#include "ms_fixture.h"
extern "C" {
#include "frame.h"
}

namespace
{

const uint64_t BLK = 4096;

int fences_seen;

void count_fence(void *arg, const uint32_t *servers, size_t n, uint64_t ino, uint32_t gen,
		 int *status)
{
	fences_seen++;
	for (size_t i = 0; i < n; i++)
		status[i] = 0;
}

/* Per file block: the (server, volume block) pairs of its copies. */
typedef std::map<uint64_t, std::set<std::pair<uint32_t, uint64_t>>> BlockMap;

} // namespace

class MsShiftTest : public MsTest
{
      protected:
	uint64_t h = 0;

	void SetUp() override
	{
		MsTest::SetUp();
		add_server("a", 1 << 16);
		add_server("b", 1 << 16);
		add_server("c", 1 << 16);
		ms_set_fencer(ms, count_fence, nullptr);
		fences_seen = 0;
	}

	/* A file of @nblocks written blocks (committed, size @nblocks blocks), open in h. */
	uint64_t make_file(const char *name, uint64_t nblocks, const char *copies = nullptr)
	{
		struct ms_attr a;
		struct ms_layout l;

		EXPECT_EQ(ms_mknod(ms, sess, &root, 1, name, S_IFREG | 0644, 0, 0, 1, 1, O_RDWR, &a,
				   &h),
			  0);
		if (copies) {
			EXPECT_EQ(ms_setxattr(ms, &root, a.ino, RDFS_COPIES_XATTR, copies,
					      strlen(copies), 0),
				  0);
		}
		EXPECT_EQ(ms_layout(ms, sess, &root, a.ino, 0, nblocks * BLK, 1, h, &l), 0);
		ms_layout_free(&l);
		struct ms_range r = { 0, nblocks * BLK };
		EXPECT_EQ(ms_commit(ms, sess, &root, a.ino, nblocks * BLK, 1, &r, 1, h, &a), 0);
		return a.ino;
	}

	BlockMap map_of(uint64_t ino)
	{
		BlockMap m;
		uint64_t off = 0, size = attr(ino).size;

		/* the whole file, and the blocks past its end, in as many LAYOUTs as it takes */
		while (off < size + 64 * BLK) {
			struct ms_layout l;

			EXPECT_EQ(ms_layout(ms, sess, &root, ino, off, size + 64 * BLK - off, 0, h,
					    &l),
				  0);
			for (size_t i = 0; i < l.n; i++)
				for (uint64_t b = 0; b < l.ext[i].length / BLK; b++)
					m[l.ext[i].file_offset / BLK + b].insert(
						{ l.ext[i].server_id, l.ext[i].block + b });
			if (l.length == 0) {
				ms_layout_free(&l);
				break;
			}
			off = l.offset + l.length;
			ms_layout_free(&l);
		}
		return m;
	}

	/* rdfs fsck finds nothing: layouts, maps and block counts agree. */
	void expect_fsck_clean()
	{
		struct ms_session *srv = ms_session_new(ms, "server");
		struct ms_fsck_report r = {};

		ASSERT_EQ(ms_fsck(ms, srv, 0, 0, 10, &r), 0);
		EXPECT_EQ(r.problems, 0u);
		EXPECT_EQ(r.blocks_owned, r.blocks_mapped);
		ms_fsck_report_free(&r);
		ms_session_close(ms, srv);
	}

	uint64_t free_total()
	{
		struct ms_statfs st;

		ms_statfs(ms, &st);
		return st.free_blocks;
	}

	/* @before moved: block b of the result is block f(b) of before (absent if none). */
	template <typename F> static BlockMap moved(const BlockMap &before, uint64_t n, F f)
	{
		BlockMap m;

		for (uint64_t b = 0; b < n; b++) {
			int64_t src = f(b);

			if (src >= 0 && before.count((uint64_t)src))
				m[b] = before.at((uint64_t)src);
		}
		return m;
	}
};

TEST_F(MsShiftTest, CollapseMovesTheTailDownAcrossChunks)
{
	/* 1 MiB chunks (256 blocks); 3 chunks + 10 blocks; collapse 300 blocks from block 100 */
	uint64_t f = make_file("f", 778);
	BlockMap before = map_of(f);
	uint64_t free0 = free_total(), blocks0 = attr(f).blocks;
	struct ms_attr a;

	ASSERT_EQ(before.size(), 778u);
	ASSERT_EQ(ms_shift(ms, sess, &root, f, 100 * BLK, 300 * BLK, 0, h, &a), 0);
	EXPECT_EQ(a.size, 478 * BLK);
	EXPECT_EQ(a.blocks, blocks0 - 300);
	EXPECT_EQ(free_total(), free0 + 300) << "the collapsed blocks are free";
	EXPECT_EQ(fences_seen, 2) << "fenced: for the freed blocks and for the moved ones";
	BlockMap want = moved(before, 478,
			      [](uint64_t b) { return (int64_t)(b < 100 ? b : b + 300); });
	EXPECT_EQ(map_of(f), want);
	/* a restart reads the same layout, and the maps agree with it */
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	reopen();
	h = 0;
	EXPECT_EQ(map_of(f), want);
	EXPECT_EQ(free_total(), free0 + 300);
	expect_fsck_clean();
}

TEST_F(MsShiftTest, InsertLeavesAHoleAndMovesTheRestUp)
{
	uint64_t f = make_file("f", 600);
	BlockMap before = map_of(f);
	uint64_t free0 = free_total();
	struct ms_attr a;

	/* 3 blocks: the rest of the file lands 3 blocks off every chunk boundary */
	ASSERT_EQ(ms_shift(ms, sess, &root, f, 250 * BLK, 3 * BLK, 1, h, &a), 0);
	EXPECT_EQ(a.size, 603 * BLK);
	EXPECT_EQ(free_total(), free0) << "an insert allocates nothing";
	EXPECT_EQ(fences_seen, 1);
	BlockMap want = moved(before, 603, [](uint64_t b) {
		return b < 250 ? (int64_t)b : b < 253 ? -1 : (int64_t)(b - 3);
	});
	EXPECT_EQ(map_of(f), want);
	/* and a collapse of the same range gives the first layout back */
	ASSERT_EQ(ms_shift(ms, sess, &root, f, 250 * BLK, 3 * BLK, 0, h, &a), 0);
	EXPECT_EQ(a.size, 600 * BLK);
	EXPECT_EQ(map_of(f), before);
}

TEST_F(MsShiftTest, EveryCopyMovesWithItsBlock)
{
	uint64_t f = make_file("f", 520, "2");
	BlockMap before = map_of(f);
	struct ms_attr a;

	for (auto &b : before)
		ASSERT_EQ(b.second.size(), 2u) << "block " << b.first;
	ASSERT_EQ(ms_shift(ms, sess, &root, f, 8 * BLK, 256 * BLK, 0, h, &a), 0);
	EXPECT_EQ(map_of(f),
		  moved(before, 264, [](uint64_t b) { return (int64_t)(b < 8 ? b : b + 256); }));
	EXPECT_EQ(a.blocks, 2u * 264);
	expect_fsck_clean();
}

TEST_F(MsShiftTest, WhatExt4RefusesIsRefused)
{
	uint64_t f = make_file("f", 10);
	BlockMap before = map_of(f);
	struct ms_attr a;

	/* not block-aligned */
	EXPECT_EQ(ms_shift(ms, sess, &root, f, 100, BLK, 0, h, &a), -EINVAL);
	EXPECT_EQ(ms_shift(ms, sess, &root, f, BLK, 100, 1, h, &a), -EINVAL);
	EXPECT_EQ(ms_shift(ms, sess, &root, f, BLK, 0, 0, h, &a), -EINVAL);
	/* a collapse reaching the end of the file; an insert at or past it */
	EXPECT_EQ(ms_shift(ms, sess, &root, f, 5 * BLK, 5 * BLK, 0, h, &a), -EINVAL);
	EXPECT_EQ(ms_shift(ms, sess, &root, f, 10 * BLK, BLK, 1, h, &a), -EINVAL);
	/* no write access */
	EXPECT_EQ(ms_shift(ms, sess, &bob, f, 0, BLK, 0, 0, &a), -EACCES);
	/* a directory */
	EXPECT_EQ(ms_shift(ms, sess, &root, 1, 0, BLK, 0, 0, &a), -EISDIR);
	EXPECT_EQ(map_of(f), before) << "a refused shift changed the layout";
	EXPECT_EQ(attr(f).size, 10 * BLK);
	EXPECT_EQ(fences_seen, 0);
}

TEST_F(MsShiftTest, AHoleMovesAsAHole)
{
	uint64_t f = make_file("f", 300);
	BlockMap before;
	struct ms_attr a;

	/* punch blocks 20..29, then collapse 5 blocks before them */
	ASSERT_EQ(ms_punch(ms, sess, &root, f, 20 * BLK, 10 * BLK, h, &a), 0);
	before = map_of(f);
	ASSERT_EQ(before.count(25), 0u);
	ASSERT_EQ(ms_shift(ms, sess, &root, f, 10 * BLK, 5 * BLK, 0, h, &a), 0);
	BlockMap got = map_of(f);
	EXPECT_EQ(got,
		  moved(before, 295, [](uint64_t b) { return (int64_t)(b < 10 ? b : b + 5); }));
	EXPECT_EQ(got.count(15), 0u);
	EXPECT_EQ(got.count(24), 0u);
	EXPECT_EQ(got.count(25), 1u);
	expect_fsck_clean();
}
