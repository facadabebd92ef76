// SPDX-License-Identifier: MIT
//
// client_layout_cache_test.cc - the layout cache: replies tile the ranges they
// describe, newer replies replace older ones exactly over their range, forget
// splits segments, and expiring or read-only capabilities are not used.
#include <gtest/gtest.h>

#include <vector>

extern "C" {
#include "cap.h"
#include "client_internal.h"
}

namespace {

struct Ext {
	uint64_t off_blk, nblk;
	uint32_t server;
	uint64_t block;
	bool unwritten;
	bool stale;
};

// A LayoutReply for blocks [start, end) as the client receives it (packed, unpacked).
Rdfs__LayoutReply *reply(uint64_t start, uint64_t end, std::vector<Ext> exts,
			 int64_t expiry_ns, uint32_t rights)
{
	Rdfs__LayoutReply r = RDFS__LAYOUT_REPLY__INIT;
	std::vector<Rdfs__Extent> e(exts.size());
	std::vector<Rdfs__Extent *> ep;
	std::vector<Rdfs__Capability> caps(3);
	std::vector<Rdfs__Capability *> cp;

	for (size_t i = 0; i < exts.size(); i++) {
		rdfs__extent__init(&e[i]);
		e[i].file_offset = exts[i].off_blk * 4096;
		e[i].length = exts[i].nblk * 4096;
		e[i].server_id = exts[i].server;
		e[i].block = exts[i].block;
		e[i].unwritten = exts[i].unwritten;
		e[i].stale = exts[i].stale;
		ep.push_back(&e[i]);
	}
	for (uint32_t s = 0; s < 3; s++) {
		rdfs__capability__init(&caps[s]);
		caps[s].server_id = s + 1;
		caps[s].expiry_ns = expiry_ns;
		caps[s].rights = rights;
		cp.push_back(&caps[s]);
	}
	r.offset = start * 4096;
	r.length = (end - start) * 4096;
	r.n_extents = ep.size();
	r.extents = ep.data();
	r.n_caps = cp.size();
	r.caps = cp.data();
	std::vector<uint8_t> buf(rdfs__layout_reply__get_packed_size(&r));
	rdfs__layout_reply__pack(&r, buf.data());
	return rdfs__layout_reply__unpack(nullptr, buf.size(), buf.data());
}

const int64_t later = INT64_MAX / 2;
const uint32_t rw = RDFS_CAP_READ | RDFS_CAP_WRITE;

// A segment as the tests name it: copy 0, and copy 1 if there is one (server 0: none).
struct Seg {
	uint64_t start, end;
	int hole;
	uint32_t server;
	uint64_t block;
	uint32_t server2;
	uint64_t block2;
	int unwritten;
	bool operator==(const Seg &o) const
	{
		return start == o.start && end == o.end && hole == o.hole &&
		       (hole || (server == o.server && block == o.block && server2 == o.server2 &&
				 (!server2 || block2 == o.block2) && unwritten == o.unwritten));
	}
};

std::ostream &operator<<(std::ostream &os, const Seg &s)
{
	os << "[" << s.start << "," << s.end << ")" << (s.hole ? " hole" : "") << " s" << s.server
	   << " b" << s.block;
	if (s.server2)
		os << " + s" << s.server2 << " b" << s.block2;
	return os << (s.unwritten ? " unwritten" : "");
}

std::vector<Seg> lookup(struct layout_cache *lc, uint64_t a, uint64_t b, int for_write, int *ret)
{
	struct layout_seg *segs = nullptr;
	std::vector<Seg> v;
	int n = layout_cache_lookup(lc, a, b, for_write, cap_now_ns(), &segs);

	*ret = n < 0 ? n : 0;
	for (int i = 0; i < n; i++) {
		const struct layout_seg &g = segs[i];

		EXPECT_LE(g.ncopies, 2);
		v.push_back({ g.start, g.end, g.hole, g.ncopies ? g.copy[0].server_id : 0,
			      g.ncopies ? g.copy[0].block : 0, g.ncopies > 1 ? g.copy[1].server_id : 0,
			      g.ncopies > 1 ? g.copy[1].block : 0, g.unwritten });
	}
	if (n >= 0)
		layout_segs_put(segs, n);
	return v;
}

TEST(ClientLayoutCache, RepliesTileAndReplace)
{
	struct layout_cache lc;
	int ret;

	layout_cache_init(&lc);
	ASSERT_EQ(layout_cache_insert(&lc, reply(0, 16, { { 0, 8, 1, 100, false } }, later, rw)), 0);
	EXPECT_EQ(lookup(&lc, 0, 16, 0, &ret),
		  (std::vector<Seg>{ { 0, 8, 0, 1, 100 }, { 8, 16, 1, 0, 0 } }));
	// allocated for writing: holes are not good enough
	lookup(&lc, 0, 16, 1, &ret);
	EXPECT_EQ(ret, -ENOENT);
	lookup(&lc, 0, 17, 0, &ret);
	EXPECT_EQ(ret, -ENOENT);

	ASSERT_EQ(layout_cache_insert(&lc, reply(4, 12, { { 4, 8, 2, 200, true } }, later, rw)), 0);
	EXPECT_EQ(lookup(&lc, 0, 16, 0, &ret),
		  (std::vector<Seg>{ { 0, 4, 0, 1, 100 }, { 4, 12, 0, 2, 200, 0, 0, 1 }, { 12, 16, 1, 0, 0 } }));
	// a lookup inside a segment is clipped, its volume block moved along
	EXPECT_EQ(lookup(&lc, 6, 7, 1, &ret), (std::vector<Seg>{ { 6, 7, 0, 2, 202, 0, 0, 1 } }));

	layout_cache_forget(&lc, 2, 3);
	lookup(&lc, 0, 4, 0, &ret);
	EXPECT_EQ(ret, -ENOENT);
	EXPECT_EQ(lookup(&lc, 3, 4, 0, &ret), (std::vector<Seg>{ { 3, 4, 0, 1, 103 } }));
	EXPECT_EQ(lookup(&lc, 0, 2, 0, &ret), (std::vector<Seg>{ { 0, 2, 0, 1, 100 } }));
	layout_cache_forget(&lc, 0, UINT64_MAX);
	EXPECT_EQ(lc.n, 0u);
	layout_cache_free(&lc);
}

TEST(ClientLayoutCache, ExpiringAndReadOnlyCapabilitiesAreNotUsed)
{
	struct layout_cache lc;
	int ret;

	layout_cache_init(&lc);
	// expires within the refetch margin
	ASSERT_EQ(layout_cache_insert(&lc, reply(0, 4, { { 0, 4, 1, 7, false } },
					      cap_now_ns() + RDFS_CAP_MARGIN_NS / 2, rw)), 0);
	lookup(&lc, 0, 4, 0, &ret);
	EXPECT_EQ(ret, -ENOENT);
	// fresh but read-only: fine for reading, not for writing
	ASSERT_EQ(layout_cache_insert(&lc, reply(0, 4, { { 0, 4, 1, 7, false } }, later,
					      RDFS_CAP_READ)), 0);
	EXPECT_EQ(lookup(&lc, 0, 4, 0, &ret), (std::vector<Seg>{ { 0, 4, 0, 1, 7 } }));
	lookup(&lc, 0, 4, 1, &ret);
	EXPECT_EQ(ret, -ENOENT);
	layout_cache_free(&lc);
}

// Copies: a reply's extents overlap, one per copy; the cache cuts them at every
// boundary so each segment's copies are contiguous extents.
TEST(ClientLayoutCache, CopiesOverlapAndAreCutAtEveryBoundary)
{
	struct layout_cache lc;
	int ret;

	layout_cache_init(&lc);
	// copy on server 1: blocks 0-8 in one extent; on server 2: 0-4 and 4-10 apart
	ASSERT_EQ(layout_cache_insert(&lc, reply(0, 12,
						 { { 0, 8, 1, 100, false },
						   { 0, 4, 2, 500, false },
						   { 4, 6, 2, 900, false } },
						 later, rw)), 0);
	EXPECT_EQ(lookup(&lc, 0, 12, 0, &ret),
		  (std::vector<Seg>{ { 0, 4, 0, 1, 100, 2, 500 },
				     { 4, 8, 0, 1, 104, 2, 900 },
				     { 8, 10, 0, 2, 904 },
				     { 10, 12, 1 } }));
	// clipped inside a segment: every copy's block moves along
	EXPECT_EQ(lookup(&lc, 5, 6, 1, &ret), (std::vector<Seg>{ { 5, 6, 0, 1, 105, 2, 901 } }));
	layout_cache_free(&lc);
}

TEST(ClientLayoutCache, StaleCopiesAreSkippedAndWrittenCopiesWinOverUnwritten)
{
	struct layout_cache lc;
	int ret;

	layout_cache_init(&lc);
	// a stale copy is never a copy; an unwritten one where another is written
	// (a copy being built) is not one either
	ASSERT_EQ(layout_cache_insert(&lc, reply(0, 8,
						 { { 0, 8, 1, 100, false },
						   { 0, 8, 2, 200, false, true },
						   { 0, 8, 3, 300, true } },
						 later, rw)), 0);
	EXPECT_EQ(lookup(&lc, 0, 8, 0, &ret), (std::vector<Seg>{ { 0, 8, 0, 1, 100 } }));
	// all copies unwritten: an unwritten segment with both
	ASSERT_EQ(layout_cache_insert(&lc, reply(0, 8,
						 { { 0, 8, 1, 100, true }, { 0, 8, 3, 300, true } },
						 later, rw)), 0);
	EXPECT_EQ(lookup(&lc, 0, 8, 0, &ret),
		  (std::vector<Seg>{ { 0, 8, 0, 1, 100, 3, 300, 1 } }));
	layout_cache_free(&lc);
}

TEST(ClientLayoutCache, ExtentsOutOfOrderAreRefused)
{
	struct layout_cache lc;

	layout_cache_init(&lc);
	// blocks could otherwise be taken for holes and read as zeros
	EXPECT_EQ(layout_cache_insert(&lc, reply(0, 8,
						 { { 4, 4, 1, 100, false }, { 0, 4, 2, 200, false } },
						 later, rw)), -EPROTO);
	EXPECT_EQ(lc.n, 0u);
	layout_cache_free(&lc);
}

} // namespace

// Every copy's server failed lately (one came back after a partition, another is
// cut off now): the copy whose server failed the longest ago is asked, not the first.
TEST(ClientLayoutCache, AllCopiesSuspectAsksTheOneThatFailedLongestAgo)
{
	struct rdfs_client *c = (struct rdfs_client *)calloc(1, sizeof(*c));
	Rdfs__Capability cap = RDFS__CAPABILITY__INIT;
	struct layout_seg s = {};
	int64_t now = io_mono_ms();

	ASSERT_NE(c, nullptr);
	pthread_mutex_init(&c->lock, nullptr);
	s.start = 0;
	s.end = 256;
	s.ncopies = 2;
	s.copy[0].server_id = 2;
	s.copy[1].server_id = 1;
	s.copy[0].cap = &cap;
	s.copy[1].cap = &cap;
	struct rdfs_peer *p1 = ios_peer(c, 1, nullptr), *p2 = ios_peer(c, 2, nullptr);
	ASSERT_NE(p1, nullptr);
	ASSERT_NE(p2, nullptr);
	p1->suspect_until_ms = now + 10000;	/* failed 20 s ago */
	p2->suspect_until_ms = now + 30000;	/* failed just now */
	EXPECT_EQ(seg_pick_copy(c, &s), 1);
	p1->suspect_until_ms = now + 30000;
	p2->suspect_until_ms = now + 10000;
	EXPECT_EQ(seg_pick_copy(c, &s), 0);
	p2->suspect_until_ms = 0;		/* not suspect: preferred */
	EXPECT_EQ(seg_pick_copy(c, &s), 0);
	for (size_t i = 0; i < c->n_ios; i++) {
		peer_destroy(c->ios[i]);
		free(c->ios[i]);
	}
	free(c->ios);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
