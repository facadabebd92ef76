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
};

// A LayoutReply for blocks [start, end) as the client receives it (packed, unpacked).
Rdfs__LayoutReply *reply(uint64_t start, uint64_t end, std::vector<Ext> exts,
			 int64_t expiry_ns, uint32_t rights)
{
	Rdfs__LayoutReply r = RDFS__LAYOUT_REPLY__INIT;
	std::vector<Rdfs__Extent> e(exts.size());
	std::vector<Rdfs__Extent *> ep;
	std::vector<Rdfs__Capability> caps(2);
	std::vector<Rdfs__Capability *> cp;

	for (size_t i = 0; i < exts.size(); i++) {
		rdfs__extent__init(&e[i]);
		e[i].file_offset = exts[i].off_blk * 4096;
		e[i].length = exts[i].nblk * 4096;
		e[i].server_id = exts[i].server;
		e[i].block = exts[i].block;
		e[i].unwritten = exts[i].unwritten;
		ep.push_back(&e[i]);
	}
	for (uint32_t s = 0; s < 2; s++) {
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

struct Seg {
	uint64_t start, end;
	int hole;
	uint32_t server;
	uint64_t block;
	bool operator==(const Seg &o) const
	{
		return start == o.start && end == o.end && hole == o.hole &&
		       (hole || (server == o.server && block == o.block));
	}
};

std::ostream &operator<<(std::ostream &os, const Seg &s)
{
	return os << "[" << s.start << "," << s.end << ")" << (s.hole ? " hole" : "") << " s"
		  << s.server << " b" << s.block;
}

std::vector<Seg> lookup(struct layout_cache *lc, uint64_t a, uint64_t b, int for_write, int *ret)
{
	struct layout_seg *segs = nullptr;
	std::vector<Seg> v;
	int n = layout_cache_lookup(lc, a, b, for_write, cap_now_ns(), &segs);

	*ret = n < 0 ? n : 0;
	for (int i = 0; i < n; i++)
		v.push_back({ segs[i].start, segs[i].end, segs[i].hole, segs[i].server_id,
			      segs[i].block });
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
		  (std::vector<Seg>{ { 0, 4, 0, 1, 100 }, { 4, 12, 0, 2, 200 }, { 12, 16, 1, 0, 0 } }));
	// a lookup inside a segment is clipped, its volume block moved along
	EXPECT_EQ(lookup(&lc, 6, 7, 1, &ret), (std::vector<Seg>{ { 6, 7, 0, 2, 202 } }));

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

} // namespace
