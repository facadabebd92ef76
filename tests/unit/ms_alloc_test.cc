// SPDX-License-Identifier: MIT
/*
 * ms_alloc_test.cc - the registry and the block allocator through LAYOUT and
 * COMMIT: stable server ids, in-place extension, striping over two servers,
 * unwritten extents and their splitting on COMMIT, freeing and reuse, and
 * the allocation maps rebuilt at startup.
 */
#include <errno.h>

#include "ms_fixture.h"
extern "C" {
#include "frame.h"
}

#define MiB (1024ull * 1024)

class MsAllocTest : public MsTest {
protected:
	int layout(uint64_t ino, uint64_t off, uint64_t len, int allocate, struct ms_layout *l,
		   uint64_t handle = 0)
	{
		return ms_layout(ms, sess, &root, ino, off, len, allocate, handle, l);
	}

	std::vector<uint64_t> bitmap(uint32_t id)
	{
		uint64_t *w = nullptr, n = 0;

		EXPECT_EQ(ms_alloc_bitmap(ms, id, &w, &n), 0);
		std::vector<uint64_t> v(w, w + (n + 63) / 64);
		free(w);
		return v;
	}
};

TEST_F(MsAllocTest, RegisterOnlyFromIoservers)
{
	uint32_t id;

	EXPECT_EQ(ms_register(ms, sess, "tcp://x:1", "u", 1, 100, "n", "", 1, &id, &epoch_), -EPERM);
	/* only the identity "server" (the server key) may register, whatever else a client says */
	struct ms_session *fake = ms_session_new(ms, "ioserver");
	EXPECT_EQ(ms_register(ms, fake, "tcp://x:1", "u", 1, 100, "n", "", 1, &id, &epoch_), -EPERM);
	ms_session_close(ms, fake);
	struct ms_session *sa;
	uint32_t a = add_server("uuid-a", 1000, &sa), b = add_server("uuid-b", 1000);
	EXPECT_NE(a, b);
	/* while its server is up, a second registration of the volume is refused */
	struct ms_session *s = ms_session_new(ms, "server");
	EXPECT_EQ(ms_register(ms, s, "tcp://new:7100", "uuid-a", 6, 2000, "a2", "", 1, &id, &epoch_), -EBUSY);
	/* once it is down, the same volume keeps its id, with a new URL and capacity */
	ms_session_close(ms, sa);
	ASSERT_EQ(ms_register(ms, s, "tcp://new:7100", "uuid-a", 6, 2000, "a2", "", 1, &id, &epoch_), 0);
	EXPECT_EQ(id, a);
	struct ms_server_info *si = nullptr;
	int n = ms_server_list(ms, &si);
	ASSERT_EQ(n, 2);
	EXPECT_EQ(si[0].id, a);
	EXPECT_STREQ(si[0].url, "tcp://new:7100");
	EXPECT_EQ(si[0].capacity_blocks, 2000u);
	EXPECT_TRUE(si[0].up);
	free(si);
	ms_session_close(ms, s);
	n = ms_server_list(ms, &si);
	EXPECT_FALSE(si[0].up);
	EXPECT_TRUE(si[1].up);
	free(si);
	reopen();
	n = ms_server_list(ms, &si);
	ASSERT_EQ(n, 2);
	EXPECT_FALSE(si[0].up);
	EXPECT_FALSE(si[1].up);
	EXPECT_EQ(si[0].capacity_blocks, 2000u);
	free(si);
	EXPECT_EQ(add_server("uuid-b", 1000), b);
	EXPECT_EQ(add_server("uuid-c", 1000), b + 1);
}

TEST_F(MsAllocTest, NoServerUpMeansEio)
{
	uint64_t f = mkfile(1, "f");
	struct ms_layout l;

	EXPECT_EQ(layout(f, 0, 4096, 1, &l), -EIO);
	/* reading a layout needs no server */
	ASSERT_EQ(layout(f, 0, 4096, 0, &l), 0);
	EXPECT_EQ(l.n, 0u);
	ms_layout_free(&l);
}

TEST_F(MsAllocTest, SmallFileGetsWholeBlocksAndExtendsInPlace)
{
	uint32_t id = add_server("u1", 10000);
	uint64_t f = mkfile(1, "f");
	struct ms_layout l;

	ASSERT_EQ(layout(f, 0, 10 * 1024, 1, &l), 0);
	ASSERT_EQ(l.n, 1u);
	EXPECT_EQ(l.ext[0].file_offset, 0u);
	EXPECT_EQ(l.ext[0].length, 3 * 4096u);
	EXPECT_TRUE(l.ext[0].unwritten);
	EXPECT_TRUE(l.rights & RDFS_CAP_WRITE);
	uint64_t first = l.ext[0].block;
	ms_layout_free(&l);
	EXPECT_EQ(attr(f).blocks, 3u);
	EXPECT_EQ(free_blocks(id), 10000u - 3);

	/* another file takes the next blocks; then f grows: it cannot extend in place */
	uint64_t g = mkfile(1, "g");
	ASSERT_EQ(layout(g, 0, 4096, 1, &l), 0);
	ms_layout_free(&l);
	/* growing f: one new extent (g sits right after f's blocks) */
	ASSERT_EQ(layout(f, 12288, 8192, 1, &l), 0);
	ASSERT_EQ(l.n, 1u);
	EXPECT_NE(l.ext[0].block, first + 3);
	ms_layout_free(&l);

	/* an unrelated file grown block by block stays one extent */
	uint64_t h = mkfile(1, "h");
	for (int i = 0; i < 16; i++) {
		ASSERT_EQ(layout(h, i * 4096ull, 4096, 1, &l), 0);
		ms_layout_free(&l);
	}
	ASSERT_EQ(layout(h, 0, 0, 0, &l), 0);
	EXPECT_EQ(l.length, 0u);	/* size is still 0: nothing described */
	ms_layout_free(&l);
	ASSERT_EQ(layout(h, 0, 16 * 4096, 0, &l), 0);
	ASSERT_EQ(l.n, 1u);
	EXPECT_EQ(l.ext[0].length, 16 * 4096u);
	EXPECT_EQ(l.rights, (uint32_t)(RDFS_CAP_READ | RDFS_CAP_WRITE));	/* root may do both */
	ms_layout_free(&l);
}

TEST_F(MsAllocTest, LayoutRangeIsBlockAligned)
{
	add_server("u1", 1000);
	uint64_t f = mkfile(1, "f");
	struct ms_layout l;

	ASSERT_EQ(layout(f, 5000, 100, 1, &l), 0);
	EXPECT_EQ(l.offset, 4096u);
	EXPECT_EQ(l.length, 4096u);
	ASSERT_EQ(l.n, 1u);
	EXPECT_EQ(l.ext[0].file_offset, 4096u);
	ms_layout_free(&l);
	/* a hole before it stays a hole */
	ASSERT_EQ(layout(f, 0, 8192, 0, &l), 0);
	ASSERT_EQ(l.n, 1u);
	EXPECT_EQ(l.ext[0].file_offset, 4096u);
	ms_layout_free(&l);
	/* a huge request is capped */
	ASSERT_EQ(layout(f, 0, 1ull << 40, 0, &l), 0);
	EXPECT_EQ(l.length, MS_LAYOUT_MAX_BYTES);
	ms_layout_free(&l);
}

TEST_F(MsAllocTest, HundredMiBFileIsStripedOverTwoServers)
{
	uint32_t a = add_server("ua", 1u << 20), b = add_server("ub", 1u << 20);
	uint64_t f = mkfile(1, "big");
	struct ms_layout l;

	/* written as a client does: 4 MiB at a time */
	for (uint64_t off = 0; off < 100 * MiB; off += 4 * MiB) {
		ASSERT_EQ(layout(f, off, 4 * MiB, 1, &l), 0);
		ms_layout_free(&l);
	}
	ASSERT_EQ(layout(f, 0, 100 * MiB, 0, &l), 0);
	EXPECT_EQ(bytes_on(l, a), 50 * MiB);
	EXPECT_EQ(bytes_on(l, b), 50 * MiB);
	/* chunk i on server (stripe_start + i) % 2; each chunk one extent */
	uint32_t ss = attr(f).stripe_start;
	ASSERT_EQ(l.n, 100u);
	for (size_t i = 0; i < l.n; i++) {
		EXPECT_EQ(l.ext[i].file_offset, i * MiB);
		EXPECT_EQ(l.ext[i].length, MiB);
		EXPECT_EQ(l.ext[i].server_id, (ss + i) % 2 == 0 ? a : b);
	}
	/* consecutive chunks on one server are contiguous on its volume */
	EXPECT_EQ(l.ext[2].block, l.ext[0].block + 256);
	ms_layout_free(&l);
	EXPECT_EQ(attr(f).blocks, 100 * MiB / 4096);
}

TEST_F(MsAllocTest, CommitClearsUnwrittenAndSplits)
{
	add_server("u", 10000);
	uint64_t f = mkfile(1, "f"), h;
	struct ms_layout l;
	struct ms_attr a;

	ASSERT_EQ(ms_open_file(ms, sess, &root, f, O_RDWR, &a, &h), 0);
	ASSERT_EQ(layout(f, 0, 10 * 4096, 1, &l, h), 0);
	ASSERT_EQ(l.n, 1u);
	ms_layout_free(&l);
	struct ms_range w[2] = { { 4096, 8192 }, { 7 * 4096, 100 } };
	ASSERT_EQ(ms_commit(ms, sess, &root, f, 7 * 4096 + 100, 12345, w, 2, h, &a), 0);
	EXPECT_EQ(a.size, 7 * 4096u + 100);
	EXPECT_EQ(a.mtime_ns, 12345);
	ASSERT_EQ(layout(f, 0, 10 * 4096, 0, &l), 0);
	ASSERT_EQ(l.n, 5u);
	bool expect[5] = { true, false, true, false, true };
	uint64_t lens[5] = { 4096, 8192, 4 * 4096, 4096, 2 * 4096 };
	for (int i = 0; i < 5; i++) {
		EXPECT_EQ(l.ext[i].unwritten, expect[i]) << i;
		EXPECT_EQ(l.ext[i].length, lens[i]) << i;
		if (i) {
			EXPECT_EQ(l.ext[i].block, l.ext[i - 1].block + l.ext[i - 1].length / 4096);
		}
	}
	EXPECT_EQ(l.size, 7 * 4096u + 100);
	ms_layout_free(&l);
	/* size only grows */
	ASSERT_EQ(ms_commit(ms, sess, &root, f, 10, 0, nullptr, 0, h, &a), 0);
	EXPECT_EQ(a.size, 7 * 4096u + 100);
	/* the rest written: one written extent again */
	struct ms_range all = { 0, 10 * 4096 };
	ASSERT_EQ(ms_commit(ms, sess, &root, f, 0, 0, &all, 1, h, &a), 0);
	ASSERT_EQ(layout(f, 0, 10 * 4096, 0, &l), 0);
	ASSERT_EQ(l.n, 1u);
	EXPECT_FALSE(l.ext[0].unwritten);
	ms_layout_free(&l);
	/* commit needs write access */
	EXPECT_EQ(ms_commit(ms, sess, &alice, f, 0, 0, nullptr, 0, 0, &a), -EACCES);
}

TEST_F(MsAllocTest, TruncateFreesBlocksAndTheyAreReused)
{
	uint32_t id = add_server("u", 1000);
	uint64_t f = mkfile(1, "f");
	struct ms_layout l;
	struct ms_setattr sa = {};
	struct ms_attr a;

	ASSERT_EQ(layout(f, 0, 100 * 4096, 1, &l), 0);
	ms_layout_free(&l);
	EXPECT_EQ(free_blocks(id), 900u);
	sa.valid = MS_SET_SIZE;
	sa.size = 10 * 4096 + 1;	/* keeps 11 blocks */
	ASSERT_EQ(ms_setattr(ms, sess, &root, f, &sa, &a), 0);
	EXPECT_EQ(a.blocks, 11u);
	EXPECT_EQ(free_blocks(id), 989u);
	ASSERT_EQ(layout(f, 0, 0, 0, &l), 0);
	ASSERT_EQ(l.n, 1u);
	EXPECT_EQ(l.ext[0].length, 11 * 4096u);
	ms_layout_free(&l);
	/* growing again is a hole, not the old blocks */
	sa.size = 100 * 4096;
	ASSERT_EQ(ms_setattr(ms, sess, &root, f, &sa, &a), 0);
	EXPECT_EQ(a.blocks, 11u);
	/* another file gets the freed blocks */
	uint64_t g = mkfile(1, "g");
	ASSERT_EQ(layout(g, 0, 989 * 4096ull, 1, &l), 0);
	EXPECT_EQ(free_blocks(id), 0u);
	ms_layout_free(&l);
	uint64_t h = mkfile(1, "h");
	EXPECT_EQ(layout(h, 0, 4096, 1, &l), -ENOSPC);
	EXPECT_EQ(attr(h).blocks, 0u);
	/* unlink frees everything */
	ASSERT_EQ(ms_unlink(ms, &root, 1, "g"), 0);
	EXPECT_EQ(free_blocks(id), 989u);
	ASSERT_EQ(layout(h, 0, 4096, 1, &l), 0);
	ms_layout_free(&l);
}

TEST_F(MsAllocTest, FullServerSpillsToTheOther)
{
	uint32_t a = add_server("a", 10), b = add_server("b", 1000);
	uint64_t f = mkfile(1, "f");
	struct ms_layout l;

	ASSERT_EQ(layout(f, 0, 2 * MiB, 1, &l), 0);
	EXPECT_EQ(bytes_on(l, a) + bytes_on(l, b), 2 * MiB);
	EXPECT_EQ(bytes_on(l, a), 10 * 4096u);
	ms_layout_free(&l);
}

TEST_F(MsAllocTest, BitmapRebuiltAfterReopenEqualsBefore)
{
	uint32_t a = add_server("a", 5000), b = add_server("b", 5000);
	struct ms_layout l;
	struct ms_setattr sa = {};
	struct ms_attr at;

	for (int i = 0; i < 6; i++) {
		char n[16];

		snprintf(n, sizeof(n), "f%d", i);
		uint64_t f = mkfile(1, n);
		ASSERT_EQ(layout(f, 0, (i + 1) * 700 * 1024ull, 1, &l), 0);
		ms_layout_free(&l);
		if (i % 2) {
			sa.valid = MS_SET_SIZE;
			sa.size = 5000;
			ASSERT_EQ(ms_setattr(ms, sess, &root, f, &sa, &at), 0);
		}
	}
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f2"), 0);
	auto ba = bitmap(a), bb = bitmap(b);
	uint64_t fa = free_blocks(a), fb = free_blocks(b);
	reopen();
	EXPECT_EQ(bitmap(a), ba);
	EXPECT_EQ(bitmap(b), bb);
	EXPECT_EQ(free_blocks(a), fa);
	EXPECT_EQ(free_blocks(b), fb);
	struct ms_statfs st;
	ms_statfs(ms, &st);
	EXPECT_EQ(st.total_blocks, 10000u);
	EXPECT_EQ(st.free_blocks, fa + fb);
}

TEST_F(MsAllocTest, CapacityChangeResizesBitmap)
{
	struct ms_session *s;
	uint32_t a = add_server("a", 100, &s);
	uint64_t f = mkfile(1, "f");
	struct ms_layout l;

	ASSERT_EQ(layout(f, 0, 50 * 4096, 1, &l), 0);
	ms_layout_free(&l);
	ms_session_close(ms, s);	/* the server restarts with a grown volume */
	EXPECT_EQ(add_server("a", 1000), a);
	EXPECT_EQ(free_blocks(a), 950u);
	auto bits = bitmap(a);
	EXPECT_EQ(bits.size(), (1000u + 63) / 64);
}

/* A volume never shrinks under its blocks: such a registration would leave extents past its end. */
TEST_F(MsAllocTest, ARegistrationShrinkingBelowBlocksInUseIsRefused)
{
	struct ms_session *s;
	uint32_t a = add_server("a", 100, &s), id;
	uint64_t f = mkfile(1, "f");
	struct ms_layout l;

	ASSERT_EQ(layout(f, 0, 50 * 4096, 1, &l), 0);
	ms_layout_free(&l);
	/* on its own session, and after a restart: the blocks 0..49 are in use either way */
	EXPECT_EQ(ms_register(ms, s, "tcp://127.0.0.1:71a", "a", 1, 40, "a", "", 1, &id, &epoch_),
		  -EINVAL);
	ms_session_close(ms, s);
	s = ms_session_new(ms, "server");
	EXPECT_EQ(ms_register(ms, s, "tcp://127.0.0.1:71a", "a", 1, 49, "a", "", 1, &id, &epoch_),
		  -EINVAL);
	EXPECT_EQ(free_blocks(a), 50u);
	struct ms_server_info *si = nullptr;
	ASSERT_EQ(ms_server_list(ms, &si), 1);
	EXPECT_EQ(si[0].capacity_blocks, 100u);
	EXPECT_FALSE(si[0].up);
	free(si);
	/* down to the last block in use is fine, and allocation stays inside */
	ASSERT_EQ(ms_register(ms, s, "tcp://127.0.0.1:71a", "a", 1, 60, "a", "", 1, &id, &epoch_), 0);
	EXPECT_EQ(id, a);
	EXPECT_EQ(free_blocks(a), 10u);
	uint64_t g = mkfile(1, "g");
	ASSERT_EQ(layout(g, 0, 20 * 4096, 1, &l), -ENOSPC);
	ASSERT_EQ(layout(g, 0, 10 * 4096, 1, &l), 0);
	for (size_t i = 0; i < l.n; i++)
		EXPECT_LE(l.ext[i].block + l.ext[i].length / 4096, 60u);
	ms_layout_free(&l);
	reopen();
	ASSERT_EQ(ms_server_list(ms, &si), 1);
	EXPECT_EQ(si[0].capacity_blocks, 60u);
	free(si);
	ms_session_close(ms, s);
}

/* The same where the blocks in use lie in whole words of the map past the new end. */
TEST_F(MsAllocTest, AShrinkingRegistrationSeesBlocksInUseInWholeWords)
{
	struct ms_session *s;
	uint32_t a = add_server("a", 300, &s), id;
	uint64_t f = mkfile(1, "f");
	struct ms_layout l;

	ASSERT_EQ(layout(f, 0, 150 * 4096, 1, &l), 0);
	ms_layout_free(&l);
	ms_session_close(ms, s);
	s = ms_session_new(ms, "server");
	for (uint64_t cap : { 0, 64, 128, 149 })
		EXPECT_EQ(ms_register(ms, s, "tcp://127.0.0.1:71a", "a", 1, cap, "a", "", 1, &id,
				      &epoch_), -EINVAL) << cap;
	EXPECT_EQ(ms_register(ms, s, "tcp://127.0.0.1:71a", "a", 1, 150, "a", "", 1, &id, &epoch_),
		  0);
	EXPECT_EQ(free_blocks(a), 0u);
	ms_session_close(ms, s);
}

/*
 * The map of a volume is in memory: one too large for it is refused before
 * anything is written (a capacity near 2^64 once wrapped the map's size to
 * a word, and the database kept it for every start after).
 */
TEST_F(MsAllocTest, ARegistrationBeyondTheLargestVolumeIsRefused)
{
	struct ms_session *s = ms_session_new(ms, "server");
	struct ms_server_info *si = nullptr;
	uint32_t id;

	EXPECT_EQ(ms_register(ms, s, "tcp://127.0.0.1:7100", "u", 1, UINT64_MAX, "n", "", 1, &id,
			      &epoch_), -EINVAL);
	EXPECT_EQ(ms_register(ms, s, "tcp://127.0.0.1:7100", "u", 1, MS_MAX_VOLUME_BLOCKS + 1, "n",
			      "", 1, &id, &epoch_), -EINVAL);
	EXPECT_EQ(ms_server_list(ms, &si), 0);
	free(si);
	ASSERT_EQ(ms_register(ms, s, "tcp://127.0.0.1:7100", "u", 1, 1000, "n", "", 1, &id,
			      &epoch_), 0);
	/* and a known volume cannot grow past it either */
	EXPECT_EQ(ms_register(ms, s, "tcp://127.0.0.1:7100", "u", 1, UINT64_MAX, "n", "", 1, &id,
			      &epoch_), -EINVAL);
	ms_session_close(ms, s);
	reopen();
	ASSERT_EQ(ms_server_list(ms, &si), 1);
	EXPECT_EQ(si[0].capacity_blocks, 1000u);
	free(si);
}

TEST_F(MsAllocTest, LayoutAccessChecks)
{
	add_server("a", 100);
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice), h;
	struct ms_layout l;
	struct ms_attr a;

	EXPECT_EQ(ms_layout(ms, sess, &bob, f, 0, 4096, 1, 0, &l), -EACCES);
	ASSERT_EQ(ms_layout(ms, sess, &bob, f, 0, 4096, 0, 0, &l), 0);
	EXPECT_EQ(l.rights, (uint32_t)RDFS_CAP_READ);
	ms_layout_free(&l);
	ASSERT_EQ(ms_open_file(ms, sess, &alice, f, O_WRONLY, &a, &h), 0);
	ASSERT_EQ(ms_layout(ms, sess, &alice, f, 0, 4096, 0, h, &l), 0);
	EXPECT_EQ(l.rights, (uint32_t)(RDFS_CAP_READ | RDFS_CAP_WRITE));
	ms_layout_free(&l);

	/* rights are exactly what the caller may do: write permission alone gives no READ */
	uint64_t wo = mkfile(d, "wo", 0602, &alice), ro = mkfile(d, "ro", 0604, &alice);
	uint64_t none = mkfile(d, "none", 0600, &alice);
	ASSERT_EQ(ms_layout(ms, sess, &bob, wo, 0, 4096, 0, 0, &l), 0);
	EXPECT_EQ(l.rights, (uint32_t)RDFS_CAP_WRITE);
	ms_layout_free(&l);
	ASSERT_EQ(ms_layout(ms, sess, &bob, wo, 0, 4096, 1, 0, &l), 0);
	EXPECT_EQ(l.rights, (uint32_t)RDFS_CAP_WRITE);
	ms_layout_free(&l);
	ASSERT_EQ(ms_layout(ms, sess, &bob, ro, 0, 4096, 0, 0, &l), 0);
	EXPECT_EQ(l.rights, (uint32_t)RDFS_CAP_READ);
	ms_layout_free(&l);
	EXPECT_EQ(ms_layout(ms, sess, &bob, none, 0, 4096, 0, 0, &l), -EACCES);
	EXPECT_EQ(ms_layout(ms, sess, &root, d, 0, 4096, 0, 0, &l), -EISDIR);
}
