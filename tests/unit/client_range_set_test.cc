// SPDX-License-Identifier: MIT
//
// client_range_set_test.cc - the block range sets that track what this client
// wrote: merging, splitting on removal, containment and iteration.
#include <gtest/gtest.h>

#include <vector>

extern "C" {
#include "range_set.h"
}

namespace {

std::vector<std::pair<uint64_t, uint64_t>> ranges(const struct range_set &s)
{
	std::vector<std::pair<uint64_t, uint64_t>> v;

	for (size_t i = 0; i < s.n; i++)
		v.emplace_back(s.r[i].start, s.r[i].end);
	return v;
}

using V = std::vector<std::pair<uint64_t, uint64_t>>;

TEST(ClientRangeSet, AddMergesTouchingAndOverlapping)
{
	struct range_set s;
	range_set_init(&s);
	ASSERT_EQ(range_set_add(&s, 10, 20), 0);
	ASSERT_EQ(range_set_add(&s, 30, 40), 0);
	ASSERT_EQ(range_set_add(&s, 0, 5), 0);
	EXPECT_EQ(ranges(s), (V{ { 0, 5 }, { 10, 20 }, { 30, 40 } }));
	ASSERT_EQ(range_set_add(&s, 20, 30), 0);	// touches both neighbours
	EXPECT_EQ(ranges(s), (V{ { 0, 5 }, { 10, 40 } }));
	ASSERT_EQ(range_set_add(&s, 3, 12), 0);
	EXPECT_EQ(ranges(s), (V{ { 0, 40 } }));
	ASSERT_EQ(range_set_add(&s, 7, 7), 0);		// empty: no change
	EXPECT_EQ(ranges(s), (V{ { 0, 40 } }));
	range_set_free(&s);
}

TEST(ClientRangeSet, RemoveTrimsAndSplits)
{
	struct range_set s;
	range_set_init(&s);
	range_set_add(&s, 0, 100);
	ASSERT_EQ(range_set_remove(&s, 40, 60), 0);
	EXPECT_EQ(ranges(s), (V{ { 0, 40 }, { 60, 100 } }));
	ASSERT_EQ(range_set_remove(&s, 30, 70), 0);
	EXPECT_EQ(ranges(s), (V{ { 0, 30 }, { 70, 100 } }));
	ASSERT_EQ(range_set_remove(&s, 0, 30), 0);
	EXPECT_EQ(ranges(s), (V{ { 70, 100 } }));
	ASSERT_EQ(range_set_remove(&s, 90, UINT64_MAX), 0);
	EXPECT_EQ(ranges(s), (V{ { 70, 90 } }));
	ASSERT_EQ(range_set_remove(&s, 0, 1000), 0);
	EXPECT_TRUE(ranges(s).empty());
	range_set_free(&s);
}

TEST(ClientRangeSet, ContainsOverlapsAndNext)
{
	struct range_set s;
	struct range r;
	range_set_init(&s);
	range_set_add(&s, 10, 20);
	range_set_add(&s, 30, 40);
	EXPECT_TRUE(range_set_contains(&s, 10, 20));
	EXPECT_TRUE(range_set_contains(&s, 15, 16));
	EXPECT_FALSE(range_set_contains(&s, 9, 11));
	EXPECT_FALSE(range_set_contains(&s, 15, 31));
	EXPECT_FALSE(range_set_contains(&s, 20, 21));
	EXPECT_TRUE(range_set_contains(&s, 5, 5));	// the empty range
	EXPECT_FALSE(range_set_overlaps(&s, 20, 30));
	EXPECT_TRUE(range_set_overlaps(&s, 19, 30));
	ASSERT_TRUE(range_set_next(&s, 0, 100, &r));
	EXPECT_EQ(r.start, 10u);
	EXPECT_EQ(r.end, 20u);
	ASSERT_TRUE(range_set_next(&s, r.end, 35, &r));
	EXPECT_EQ(r.start, 30u);
	EXPECT_EQ(r.end, 35u);
	EXPECT_FALSE(range_set_next(&s, 40, 100, &r));
	range_set_free(&s);
}

TEST(ClientRangeSet, ManyDisjointRangesStaySorted)
{
	struct range_set s;
	range_set_init(&s);
	// insert every other block in a scrambled order
	for (uint64_t i = 0; i < 1000; i++) {
		uint64_t b = (i * 7919) % 1000 * 2;
		ASSERT_EQ(range_set_add(&s, b, b + 1), 0);
	}
	ASSERT_EQ(s.n, 1000u);
	for (size_t i = 0; i < s.n; i++)
		EXPECT_EQ(s.r[i].start, 2 * i);
	// filling the gaps merges everything into one range
	for (uint64_t b = 1; b < 2000; b += 2)
		ASSERT_EQ(range_set_add(&s, b, b + 1), 0);
	EXPECT_EQ(ranges(s), (V{ { 0, 2000 } }));
	range_set_free(&s);
}

} // namespace
