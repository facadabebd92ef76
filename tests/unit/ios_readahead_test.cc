// SPDX-License-Identifier: MIT
/*
 * ios_readahead_test.cc - the read-ahead cache and stream detection on their
 * own (the engine's loads simulated by filling segment buffers), the bounded
 * buffer pool, and the asynchronous range lock.
 */
#include <gtest/gtest.h>

#include <errno.h>
#include <string.h>

#include <atomic>
#include <thread>
#include <vector>

extern "C" {
#include "../../ioserver/bufpool.h"
#include "../../ioserver/range_lock.h"
#include "../../ioserver/readahead.h"
}

namespace {

const uint64_t kCap = 1u << 20;	/* blocks */

/* What the "disk" holds: block b is filled with (b + gen) & 0xff. */
void load_all(struct ra_cache *ra, struct ra_seg **segs, int n, int gen)
{
	for (int i = 0; i < n; i++) {
		memset(ra_seg_buf(segs[i]), (int)((ra_seg_first(segs[i]) + gen) & 0xff),
		       (size_t)ra_seg_blocks(segs[i]) * 4096);
		for (uint32_t b = 0; b < ra_seg_blocks(segs[i]); b++)
			memset((uint8_t *)ra_seg_buf(segs[i]) + (size_t)b * 4096,
			       (int)((ra_seg_first(segs[i]) + b + gen) & 0xff), 4096);
		ra_seg_loaded(ra, segs[i], 0);
	}
}

bool block_is(const uint8_t *p, uint64_t b, int gen)
{
	for (int i = 0; i < 4096; i++)
		if (p[i] != (uint8_t)((b + gen) & 0xff))
			return false;
	return true;
}

TEST(ReadAhead, FirstReadStartsAStreamTheNextReadsAheadFurtherAndFurther)
{
	struct ra_cache *ra;
	struct ra_seg *segs[256];

	ASSERT_EQ(ra_create(64u << 20, kCap, &ra), 0);
	EXPECT_EQ(ra_note_read(ra, 1000, 64, segs, 256), 0);	/* a lone READ */
	int n1 = ra_note_read(ra, 1064, 64, segs, 256);		/* continues it */
	ASSERT_GT(n1, 0);
	EXPECT_LE(ra_seg_first(segs[0]), 1128u);
	load_all(ra, segs, n1, 0);
	uint64_t reach1 = ra_seg_first(segs[n1 - 1]) + ra_seg_blocks(segs[n1 - 1]);
	int n2 = ra_note_read(ra, 1128, 64, segs, 256);
	ASSERT_GT(n2, 0);
	load_all(ra, segs, n2, 0);
	uint64_t reach2 = ra_seg_first(segs[n2 - 1]) + ra_seg_blocks(segs[n2 - 1]);
	/* the window grew: the second continuation reaches further past its READ */
	EXPECT_GT(reach2 - 1192, reach1 - 1128);
	std::vector<uint8_t> buf(64 * 4096);
	ASSERT_EQ(ra_read(ra, 1192, 64, buf.data()), 0);
	for (int b = 0; b < 64; b++)
		EXPECT_TRUE(block_is(buf.data() + b * 4096, 1192 + b, 0)) << b;
	/* a READ elsewhere misses */
	EXPECT_EQ(ra_read(ra, 500000, 1, buf.data()), -ENOENT);
	ra_destroy(ra);
}

TEST(ReadAhead, InterleavedStreamsFromTwoPlacesAreBothFollowed)
{
	struct ra_cache *ra;
	struct ra_seg *segs[256];

	ASSERT_EQ(ra_create(64u << 20, kCap, &ra), 0);
	ra_note_read(ra, 0, 32, segs, 256);
	ra_note_read(ra, 200000, 32, segs, 256);
	int a = ra_note_read(ra, 32, 32, segs, 256);
	load_all(ra, segs, a, 0);
	int b = ra_note_read(ra, 200032, 32, segs, 256);
	load_all(ra, segs, b, 0);
	EXPECT_GT(a, 0);
	EXPECT_GT(b, 0);
	std::vector<uint8_t> buf(32 * 4096);
	EXPECT_EQ(ra_read(ra, 64, 32, buf.data()), 0);
	EXPECT_EQ(ra_read(ra, 200064, 32, buf.data()), 0);
	ra_destroy(ra);
}

TEST(ReadAhead, InvalidateDropsValidAndLoadingSegments)
{
	struct ra_cache *ra;
	struct ra_seg *segs[256];
	std::vector<uint8_t> buf(32 * 4096);

	ASSERT_EQ(ra_create(64u << 20, kCap, &ra), 0);
	ra_note_read(ra, 0, 32, segs, 256);
	int n = ra_note_read(ra, 32, 32, segs, 256);
	ASSERT_GE(n, 2);
	/* the first loaded, the second still loading when the write lands */
	load_all(ra, segs, 1, 0);
	uint64_t valid = ra_seg_first(segs[0]), loading = ra_seg_first(segs[1]);
	ASSERT_EQ(ra_read(ra, valid, 32, buf.data()), 0);
	ra_invalidate(ra, valid + 5, 1);
	ra_invalidate(ra, loading + 31, 1);
	EXPECT_EQ(ra_read(ra, valid, 32, buf.data()), -ENOENT);
	/* the load that may have read the old bytes finishes: it serves nothing */
	load_all(ra, segs + 1, 1, 0);
	EXPECT_EQ(ra_read(ra, loading, 32, buf.data()), -ENOENT);
	ra_destroy(ra);
}

struct CountingWaiter {
	struct ra_waiter w;
	std::atomic<int> told{0};
};

void counting_waiter_loaded(struct ra_waiter *w)
{
	reinterpret_cast<CountingWaiter *>(w)->told++;
}

TEST(ReadAhead, AReadOfBlocksStillLoadingWaitsForTheLoadInsteadOfTheDisk)
{
	struct ra_cache *ra;
	struct ra_seg *segs[256], *held[8];
	CountingWaiter a, b;
	std::vector<uint8_t> buf(32 * 4096);

	a.w.loaded = b.w.loaded = counting_waiter_loaded;
	ASSERT_EQ(ra_create(64u << 20, kCap, &ra), 0);
	ra_note_read(ra, 0, 32, segs, 256);
	int n = ra_note_read(ra, 32, 32, segs, 256);
	ASSERT_GE(n, 2);
	uint64_t s0 = ra_seg_first(segs[0]), s1 = ra_seg_first(segs[1]);
	/* not cached at all: read the disk */
	EXPECT_EQ(ra_hold_or_wait(ra, 500000, 8, held, 8, &a.w), -ENOENT);
	/* both segments loading: wait (once) for the first of them */
	EXPECT_EQ(ra_hold_or_wait(ra, s0, 64, held, 8, &a.w), -EINPROGRESS);
	/* a second READ of the same blocks waits too */
	EXPECT_EQ(ra_hold_or_wait(ra, s0 + 4, 8, held, 8, &b.w), -EINPROGRESS);
	EXPECT_EQ(a.told, 0);
	load_all(ra, segs, 1, 0);
	EXPECT_EQ(a.told, 1);
	EXPECT_EQ(b.told, 1);
	/* the first is in, the second still loading: wait again */
	EXPECT_EQ(ra_hold_or_wait(ra, s0, 64, held, 8, &a.w), -EINPROGRESS);
	EXPECT_EQ(ra_hold_or_wait(ra, s0 + 4, 8, held, 8, &b.w), 1);
	ra_release(ra, held, 1);
	load_all(ra, segs + 1, 1, 0);
	EXPECT_EQ(a.told, 2);
	EXPECT_EQ(b.told, 1);
	ASSERT_EQ(ra_hold_or_wait(ra, s0, 64, held, 8, &a.w), 2);
	EXPECT_EQ(held[0], segs[0]);
	EXPECT_EQ(held[1], segs[1]);
	ra_release(ra, held, 2);
	ASSERT_EQ(ra_read(ra, s1, 32, buf.data()), 0);
	EXPECT_TRUE(block_is(buf.data(), s1, 0));
	/* plain ra_hold never waits: a loading segment is a miss */
	int m = ra_note_read(ra, 64, 32, segs, 256);
	ASSERT_GE(m, 1);
	EXPECT_EQ(ra_hold(ra, ra_seg_first(segs[0]), 32, held, 8), -ENOENT);
	load_all(ra, segs, m, 0);
	ra_destroy(ra);
}

TEST(ReadAhead, AWaiterOfAFailedOrInvalidatedLoadIsToldAndThenMisses)
{
	struct ra_cache *ra;
	struct ra_seg *segs[256], *held[8];
	CountingWaiter a, b;

	a.w.loaded = b.w.loaded = counting_waiter_loaded;
	ASSERT_EQ(ra_create(64u << 20, kCap, &ra), 0);
	ra_note_read(ra, 0, 32, segs, 256);
	int n = ra_note_read(ra, 32, 32, segs, 256);
	ASSERT_GE(n, 2);
	uint64_t s0 = ra_seg_first(segs[0]), s1 = ra_seg_first(segs[1]);
	ASSERT_EQ(ra_hold_or_wait(ra, s0, 8, held, 8, &a.w), -EINPROGRESS);
	ASSERT_EQ(ra_hold_or_wait(ra, s1, 8, held, 8, &b.w), -EINPROGRESS);
	ra_seg_loaded(ra, segs[0], -EIO);		/* the disk failed the load */
	ra_invalidate(ra, s1 + 3, 1);			/* a WRITE landed meanwhile */
	load_all(ra, segs + 1, 1, 0);
	EXPECT_EQ(a.told, 1);
	EXPECT_EQ(b.told, 1);
	EXPECT_EQ(ra_hold_or_wait(ra, s0, 8, held, 8, &a.w), -ENOENT);
	EXPECT_EQ(ra_hold_or_wait(ra, s1, 8, held, 8, &b.w), -ENOENT);
	ra_destroy(ra);
}

TEST(ReadAhead, HeldSegmentKeepsItsBytesAcrossInvalidationAndEviction)
{
	struct ra_cache *ra;
	struct ra_seg *segs[256], *held[8];

	/* a small cache: 16 segments */
	ASSERT_EQ(ra_create(2u << 20, kCap, &ra), 0);
	ra_note_read(ra, 0, 32, segs, 256);
	int n = ra_note_read(ra, 32, 32, segs, 256);
	ASSERT_GT(n, 0);
	load_all(ra, segs, n, 0);
	uint64_t first = ra_seg_first(segs[0]);
	ASSERT_EQ(ra_hold(ra, first, 32, held, 8), 1);
	const uint8_t *bytes = (const uint8_t *)ra_seg_buf(held[0]);
	ra_invalidate(ra, first, 32);
	/* churn the cache well past its size */
	uint64_t pos = 64;
	for (int i = 0; i < 40; i++) {
		int m = ra_note_read(ra, pos, 32, segs, 256);
		load_all(ra, segs, m, 1);
		pos += 32;
	}
	for (int b = 0; b < 32; b++)
		EXPECT_TRUE(block_is(bytes + b * 4096, first + b, 0)) << b;
	ra_release(ra, held, 1);
	std::vector<uint8_t> buf(4096);
	EXPECT_EQ(ra_read(ra, first, 1, buf.data()), -ENOENT);
	EXPECT_EQ(ra_hold(ra, 0, 64 * 32, held, 8), -ENOENT);
	ra_destroy(ra);
}

TEST(ReadAhead, TheVolumeEndIsNeverReadPast)
{
	struct ra_cache *ra;
	struct ra_seg *segs[256];

	ASSERT_EQ(ra_create(64u << 20, 1000, &ra), 0);
	ra_note_read(ra, 900, 10, segs, 256);
	int n = ra_note_read(ra, 910, 10, segs, 256);
	for (int i = 0; i < n; i++) {
		EXPECT_LE(ra_seg_first(segs[i]) + ra_seg_blocks(segs[i]), 1000u);
		ra_seg_loaded(ra, segs[i], -EIO);	/* a failed load serves nothing */
	}
	std::vector<uint8_t> buf(4096);
	EXPECT_EQ(ra_read(ra, 990, 1, buf.data()), -ENOENT);
	ra_destroy(ra);
}

TEST(BufPool, BudgetIsABoundAndBuffersAreAligned)
{
	struct bufpool *p;

	EXPECT_EQ(bufpool_create(1u << 20, 128u << 10, 4, &p), -EINVAL);
	ASSERT_EQ(bufpool_create(32u << 20, 128u << 10, 8, &p), 0);
	std::vector<void *> got;
	void *b;
	while ((b = bufpool_get(p, 128u << 10)))
		got.push_back(b);
	EXPECT_EQ(got.size(), (32u << 20) / (128u << 10));
	for (void *x : got)
		EXPECT_EQ((uintptr_t)x % 4096, 0u);
	EXPECT_EQ(bufpool_get(p, 4096), nullptr);
	bufpool_put(p, got.back(), 128u << 10);
	got.pop_back();
	/* a recycled unit buffer makes room for another size */
	b = bufpool_get(p, 8192);
	EXPECT_NE(b, nullptr);
	bufpool_put(p, b, 8192);
	for (void *x : got)
		bufpool_put(p, x, 128u << 10);
	b = bufpool_get(p, 16u << 20);
	EXPECT_NE(b, nullptr);
	bufpool_put(p, b, 16u << 20);
	bufpool_destroy(p);
}

TEST(RangeLockAsync, WaitersAreGrantedInOrderWhenTheirRangeFrees)
{
	struct range_lock rl;
	struct range_lock_entry a, b, c, d;
	std::vector<char> order;

	ASSERT_EQ(range_lock_init(&rl), 0);
	auto cb = [](void *arg) { ((std::vector<char> *)((void **)arg)[0])->push_back(*(char *)((void **)arg)[1]); };
	char nb = 'b', nc = 'c', nd = 'd';
	void *ab[2] = { &order, &nb }, *ac[2] = { &order, &nc }, *ad[2] = { &order, &nd };
	EXPECT_EQ(range_lock_acquire_async(&rl, &a, 0, 10, 0, cb, nullptr), 1);
	EXPECT_EQ(range_lock_acquire_async(&rl, &b, 5, 6, 0, cb, ab), 0);	/* under a */
	EXPECT_EQ(range_lock_acquire_async(&rl, &c, 5, 20, 0, cb, ac), 0);	/* after b */
	EXPECT_EQ(range_lock_acquire_async(&rl, &d, 30, 40, 0, cb, ad), 1);	/* disjoint */
	EXPECT_TRUE(order.empty());
	range_lock_release(&rl, &a);
	ASSERT_EQ(order, std::vector<char>({ 'b' }));	/* c overlaps the waiting b */
	range_lock_release(&rl, &b);
	ASSERT_EQ(order, std::vector<char>({ 'b', 'c' }));
	range_lock_release(&rl, &c);
	range_lock_release(&rl, &d);
	/* a blocking acquirer waits behind an async holder */
	struct range_lock_entry e, f;
	EXPECT_EQ(range_lock_acquire_async(&rl, &e, 0, 1, 0, cb, nullptr), 1);
	std::atomic<bool> got{false};
	std::thread t([&]() {
		range_lock_acquire(&rl, &f, 0, 1);
		got = true;
		range_lock_release(&rl, &f);
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	EXPECT_FALSE(got.load());
	range_lock_release(&rl, &e);
	t.join();
	EXPECT_TRUE(got.load());
	range_lock_destroy(&rl);
}

TEST(RangeLockAsync, ReadersShareAndQueueBehindAnEarlierWriter)
{
	struct range_lock rl;
	struct range_lock_entry r1, r2, w, r3;
	std::atomic<int> granted{0};
	auto cb = [](void *arg) { (*(std::atomic<int> *)arg)++; };

	ASSERT_EQ(range_lock_init(&rl), 0);
	EXPECT_EQ(range_lock_acquire_async(&rl, &r1, 0, 10, 1, cb, &granted), 1);
	EXPECT_EQ(range_lock_acquire_async(&rl, &r2, 5, 15, 1, cb, &granted), 1);	/* shared */
	EXPECT_EQ(range_lock_acquire_async(&rl, &w, 8, 9, 0, cb, &granted), 0);	/* waits */
	/* a reader after the waiting writer must see its data: it waits too */
	EXPECT_EQ(range_lock_acquire_async(&rl, &r3, 0, 20, 1, cb, &granted), 0);
	range_lock_release(&rl, &r1);
	EXPECT_EQ(granted.load(), 0);
	range_lock_release(&rl, &r2);
	EXPECT_EQ(granted.load(), 1);	/* the writer */
	range_lock_release(&rl, &w);
	EXPECT_EQ(granted.load(), 2);	/* then the reader */
	range_lock_release(&rl, &r3);
	range_lock_destroy(&rl);
}

} // namespace
