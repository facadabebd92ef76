// SPDX-License-Identifier: MIT
/*
 * ms_defer_test.cc - block reuse safety: blocks truncated away from a file
 * that some session holds open stay out of the allocator until its last
 * handle goes (a client may still hold a layout naming them), and are zeroed
 * at their next use; and the high-water mark a volume's first registration
 * sets, pristine or not.
 */
#include <errno.h>

#include <mutex>
#include <set>

#include "ms_fixture.h"

namespace {

/* Stands in for the I/O servers: records the blocks it is asked to zero. */
struct ZeroLog {
	std::mutex mu;
	std::set<uint64_t> blocks;

	static int fn(void *arg, const struct ms_zero_range *r, size_t n)
	{
		ZeroLog *z = static_cast<ZeroLog *>(arg);
		std::lock_guard<std::mutex> g(z->mu);

		for (size_t i = 0; i < n; i++)
			for (uint64_t b = r[i].block; b < r[i].block + r[i].count; b++)
				z->blocks.insert(b);
		return 0;
	}
};

}  // namespace

class MsDeferTest : public MsTest {
protected:
	/* A small volume, so that reuse of a block is forced and plain to see. */
	static constexpr uint64_t kBlocks = 20;
	uint32_t id = 0;
	struct ms_session *other = nullptr;
	ZeroLog zeros;

	void SetUp() override
	{
		MsTest::SetUp();
		id = add_server("vol", kBlocks);
		other = ms_session_new(ms, "client");
		ASSERT_NE(other, nullptr);
		ms_set_zeroer(ms, ZeroLog::fn, &zeros);
	}

	void TearDown() override
	{
		if (other)
			ms_session_close(ms, other);
		other = nullptr;
		MsTest::TearDown();
	}

	/* Create @name open O_RDWR in @s with @nblocks blocks; returns its ino. */
	uint64_t make_open_file(struct ms_session *s, const char *name, uint64_t nblocks,
				uint64_t *h)
	{
		struct ms_attr a;
		struct ms_layout l;

		EXPECT_EQ(ms_mknod(ms, s, &root, 1, name, 0644, 0, 1, 1, O_RDWR, &a, h), 0);
		EXPECT_EQ(ms_layout(ms, s, &root, a.ino, 0, nblocks * 4096, 1, *h, &l), 0);
		ms_layout_free(&l);
		return a.ino;
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
};

TEST_F(MsDeferTest, TruncatedBlocksOfAnOpenFileWaitForItsRelease)
{
	uint64_t h;
	uint64_t f = make_open_file(sess, "f", 10, &h);
	std::set<uint64_t> old = blocks_of(f);

	ASSERT_EQ(old.size(), 10u);
	/* another client truncates the file that sess still has open */
	ASSERT_EQ(truncate(other, f, 0), 0);
	EXPECT_TRUE(blocks_of(f).empty());
	EXPECT_EQ(attr(f).blocks, 0u);
	EXPECT_EQ(free_blocks(), kBlocks - 10) << "the truncated blocks must not be free yet";

	/* a new file gets the other 10 blocks, and then there are none */
	uint64_t g = mkfile(1, "g");
	std::set<uint64_t> gb;
	ASSERT_EQ(alloc(g, 10, &gb), 0);
	for (uint64_t b : gb)
		EXPECT_EQ(old.count(b), 0u) << "block " << b << " of the open file was reused";
	uint64_t k = mkfile(1, "k");
	EXPECT_EQ(alloc(k, 1), -ENOSPC);

	/* the last handle goes: the blocks are free again, and zeroed when reused */
	zeroed();
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	EXPECT_EQ(free_blocks(), 10u);
	std::set<uint64_t> kb;
	ASSERT_EQ(alloc(k, 10, &kb), 0);
	EXPECT_EQ(kb, old);
	EXPECT_EQ(zeroed(), old) << "reused blocks must be zeroed first";
}

TEST_F(MsDeferTest, TruncateByTheHolderItselfAndPartialTruncateAreDeferredToo)
{
	uint64_t h;
	uint64_t f = make_open_file(sess, "f", 10, &h);
	std::set<uint64_t> old = blocks_of(f);

	/* ftruncate through its own handle, to 4 blocks and a bit */
	struct ms_setattr sa = {};
	struct ms_attr a;

	sa.valid = MS_SET_SIZE;
	sa.size = 4 * 4096 + 100;
	sa.handle = h;
	ASSERT_EQ(ms_setattr(ms, sess, &alice, f, &sa, &a), 0);
	EXPECT_EQ(a.blocks, 5u);
	EXPECT_EQ(free_blocks(), kBlocks - 10);
	uint64_t g = mkfile(1, "g");
	std::set<uint64_t> gb;
	ASSERT_EQ(alloc(g, 10, &gb), 0);
	EXPECT_EQ(alloc(g, 11), -ENOSPC);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	EXPECT_EQ(free_blocks(), 5u);
	/* the 5 kept blocks are still the file's */
	std::set<uint64_t> kept = blocks_of(f);
	EXPECT_EQ(kept.size(), 5u);
	for (uint64_t b : kept)
		EXPECT_EQ(old.count(b), 1u);
}

TEST_F(MsDeferTest, OTruncWhileAnotherHandleIsOpenIsDeferred)
{
	uint64_t h, h2;
	uint64_t f = make_open_file(other, "f", 10, &h);
	struct ms_attr a;

	ASSERT_EQ(ms_open_file(ms, sess, &root, f, O_RDWR | O_TRUNC, &a, &h2), 0);
	EXPECT_EQ(a.size, 0u);
	EXPECT_EQ(a.blocks, 0u);
	EXPECT_EQ(free_blocks(), kBlocks - 10);
	/* the truncating handle alone does not keep them: the other one does */
	ASSERT_EQ(ms_release(ms, sess, h2), 0);
	EXPECT_EQ(free_blocks(), kBlocks - 10);
	ASSERT_EQ(ms_release(ms, other, h), 0);
	EXPECT_EQ(free_blocks(), kBlocks);
}

TEST_F(MsDeferTest, TruncateOfAFileNobodyHasOpenFreesAtOnce)
{
	uint64_t h;
	uint64_t f = make_open_file(sess, "f", 10, &h);
	struct ms_attr a;
	uint64_t h2;

	ASSERT_EQ(ms_release(ms, sess, h), 0);
	ASSERT_EQ(truncate(other, f, 0), 0);
	EXPECT_EQ(free_blocks(), kBlocks);
	/* nor does an O_TRUNC open when it is the only one */
	ASSERT_EQ(alloc(f, 10), 0);
	ASSERT_EQ(ms_open_file(ms, sess, &root, f, O_WRONLY | O_TRUNC, &a, &h2), 0);
	EXPECT_EQ(free_blocks(), kBlocks);
	ASSERT_EQ(ms_release(ms, sess, h2), 0);
}

TEST_F(MsDeferTest, ClosingTheConnectionReleasesTheDeferredBlocks)
{
	uint64_t h;
	uint64_t f = make_open_file(other, "f", 10, &h);

	ASSERT_EQ(truncate(sess, f, 0), 0);
	EXPECT_EQ(free_blocks(), kBlocks - 10);
	ms_session_close(ms, other);
	other = nullptr;
	EXPECT_EQ(free_blocks(), kBlocks);
	uint64_t g = mkfile(1, "g");
	EXPECT_EQ(alloc(g, kBlocks), 0);
}

TEST_F(MsDeferTest, UnlinkAndRenameOverAnOpenFileKeepItAsAnOrphan)
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
	/* truncating the orphan through its handle defers like any open file */
	struct ms_setattr sa = {};
	sa.valid = MS_SET_SIZE;
	sa.handle = h;
	ASSERT_EQ(ms_setattr(ms, other, &root, f, &sa, &a), 0);
	EXPECT_EQ(free_blocks(), kBlocks - 10);
	ASSERT_EQ(ms_release(ms, other, h), 0);
	EXPECT_EQ(ms_getattr(ms, f, &a), -ENOENT);
	EXPECT_EQ(free_blocks(), kBlocks - 5);

	/* unlink of an open file: same orphan path */
	uint64_t h2;
	ASSERT_EQ(ms_open_file(ms, other, &root, g, O_RDONLY, &a, &h2), 0);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(free_blocks(), kBlocks - 5);
	ASSERT_EQ(ms_release(ms, other, h2), 0);
	EXPECT_EQ(free_blocks(), kBlocks);
}

TEST_F(MsDeferTest, AfterACrashDeferredBlocksAreFreeAndStillZeroedAtReuse)
{
	uint64_t h;
	uint64_t f = make_open_file(other, "f", 10, &h);
	std::set<uint64_t> old = blocks_of(f);
	uint64_t mark = 0;

	ASSERT_EQ(truncate(sess, f, 0), 0);
	other = nullptr;	/* dies with the process */
	crash_reopen();
	ms_set_zeroer(ms, ZeroLog::fn, &zeros);
	EXPECT_EQ(free_blocks(), kBlocks) << "the maps are rebuilt from the layouts";
	ASSERT_EQ(ms_high_water(ms, id, &mark), 0);
	for (uint64_t b : old)
		EXPECT_LT(b, mark) << "a once-used block above the mark";

	EXPECT_EQ(add_server("vol", kBlocks), id);
	uint64_t g = mkfile(1, "g");
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
