// SPDX-License-Identifier: MIT
/*
 * lib_verbs_rndv_test.cc - the rendezvous without hardware: the sender's table
 * (send -> announce -> DONE -> completion; cancellation on close) refuses every
 * DONE that does not name an announced transfer of this use of the slot, and
 * the receiver's READ plan covers the descriptors exactly, in chunks, with the
 * remote body landing in the body buffer and the data in the data buffer.
 */
#include <errno.h>

#include <set>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "xport_verbs_rndv.h"
}

TEST(VerbsRndv, SendAnnounceDoneCompletes)
{
	struct verbs_rndv_table t;
	uint32_t cookie;
	int tx;

	ASSERT_EQ(0, verbs_rndv_table_init(&t, 4));
	ASSERT_EQ(0, verbs_rndv_alloc(&t, &tx, &cookie));
	/* DONE before the RNDV went out is not a completion. */
	EXPECT_EQ(nullptr, verbs_rndv_finish(&t, cookie));
	ASSERT_EQ(0, verbs_rndv_announce(&t, cookie));
	EXPECT_EQ(-EPROTO, verbs_rndv_announce(&t, cookie));
	EXPECT_EQ(&tx, verbs_rndv_finish(&t, cookie));
	/* A second DONE for it is a protocol error. */
	EXPECT_EQ(nullptr, verbs_rndv_finish(&t, cookie));
	EXPECT_EQ(0u, t.used);
	verbs_rndv_table_fini(&t);
}

TEST(VerbsRndv, StaleCookieOfAReusedSlotIsRefused)
{
	struct verbs_rndv_table t;
	uint32_t c1, c2;
	int a, b;

	ASSERT_EQ(0, verbs_rndv_table_init(&t, 1));
	ASSERT_EQ(0, verbs_rndv_alloc(&t, &a, &c1));
	verbs_rndv_announce(&t, c1);
	ASSERT_EQ(&a, verbs_rndv_finish(&t, c1));
	ASSERT_EQ(0, verbs_rndv_alloc(&t, &b, &c2));
	verbs_rndv_announce(&t, c2);
	EXPECT_NE(c1, c2);
	EXPECT_EQ(c1 & 0xffff, c2 & 0xffff);	/* same slot, new name */
	EXPECT_EQ(nullptr, verbs_rndv_finish(&t, c1));
	EXPECT_EQ(&b, verbs_rndv_finish(&t, c2));
	verbs_rndv_table_fini(&t);
}

TEST(VerbsRndv, ForgedCookiesAreRefused)
{
	struct verbs_rndv_table t;
	uint32_t c;
	int a;

	ASSERT_EQ(0, verbs_rndv_table_init(&t, 8));
	ASSERT_EQ(0, verbs_rndv_alloc(&t, &a, &c));
	verbs_rndv_announce(&t, c);
	EXPECT_EQ(nullptr, verbs_rndv_finish(&t, c ^ 0x10000));	/* other generation */
	EXPECT_EQ(nullptr, verbs_rndv_finish(&t, (c & 0xffff0000u) | 9));	/* out of range */
	EXPECT_EQ(nullptr, verbs_rndv_finish(&t, (c & 0xffff0000u) | ((c + 1) & 0xffff)));
	EXPECT_EQ(&a, verbs_rndv_finish(&t, c));
	verbs_rndv_table_fini(&t);
}

TEST(VerbsRndv, FullTableWaitsAndCloseCancelsEverything)
{
	struct verbs_rndv_table t;
	int tx[3];
	uint32_t c[3], extra;
	std::set<void *> cancelled;
	void *p;

	ASSERT_EQ(0, verbs_rndv_table_init(&t, 3));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, verbs_rndv_alloc(&t, &tx[i], &c[i]));
	EXPECT_EQ(-EAGAIN, verbs_rndv_alloc(&t, &extra, &extra));
	verbs_rndv_announce(&t, c[0]);
	verbs_rndv_announce(&t, c[2]);
	/* Close: announced or not, every open transfer comes back once. */
	while ((p = verbs_rndv_take_any(&t)))
		EXPECT_TRUE(cancelled.insert(p).second);
	EXPECT_EQ(3u, cancelled.size());
	EXPECT_EQ(nullptr, verbs_rndv_finish(&t, c[0]));
	EXPECT_EQ(0, verbs_rndv_alloc(&t, &tx[0], &c[0]));
	verbs_rndv_table_fini(&t);
	EXPECT_EQ(-EINVAL, verbs_rndv_table_init(&t, 0));
}

namespace {

std::vector<struct verbs_read> plan(const std::vector<struct verbs_desc> &d, uint32_t body_len,
				    uint32_t chunk)
{
	std::vector<struct verbs_read> out;
	struct verbs_read_iter it = {};
	struct verbs_read r;

	while (verbs_read_next(d.data(), (uint32_t)d.size(), body_len, chunk, &it, &r))
		out.push_back(r);
	return out;
}

} // namespace

TEST(VerbsRndv, ReadPlanChunksEachDescriptor)
{
	std::vector<struct verbs_desc> d = { { 0x10000, 2500, 0xAAAA }, { 0x90000, 1000, 0xBBBB } };
	auto r = plan(d, 0, 1024);

	ASSERT_EQ(4u, r.size());
	EXPECT_EQ(0x10000u, r[0].raddr);
	EXPECT_EQ(1024u, r[0].len);
	EXPECT_EQ(0u, r[0].off);
	EXPECT_EQ(0x10000u + 2048, r[2].raddr);
	EXPECT_EQ(452u, r[2].len);
	EXPECT_EQ(2048u, r[2].off);
	EXPECT_EQ(0xBBBBu, r[3].rkey);
	EXPECT_EQ(2500u, r[3].off);	/* the data buffer is contiguous */
	for (auto &x : r)
		EXPECT_FALSE(x.to_body);
}

TEST(VerbsRndv, RemoteBodyGoesToTheBodyBuffer)
{
	std::vector<struct verbs_desc> d = { { 0x1000, 3000, 1 }, { 0x8000, 5000, 2 } };
	auto r = plan(d, 3000, 4096);
	uint64_t body = 0, data = 0;

	ASSERT_EQ(3u, r.size());
	EXPECT_TRUE(r[0].to_body);
	EXPECT_EQ(0u, r[0].off);
	EXPECT_FALSE(r[1].to_body);
	EXPECT_EQ(0u, r[1].off);
	EXPECT_EQ(4096u, r[2].off);
	for (auto &x : r)
		(x.to_body ? body : data) += x.len;
	EXPECT_EQ(3000u, body);
	EXPECT_EQ(5000u, data);
}

TEST(VerbsRndv, PlanOfSixteenMiBCoversItExactlyOnce)
{
	std::vector<struct verbs_desc> d;
	std::vector<uint8_t> seen(16u << 20);

	for (uint32_t i = 0; i < 64; i++)
		d.push_back({ 0x100000000ull + i * (256u << 10), 256u << 10, i });
	auto r = plan(d, 0, 1u << 20);
	ASSERT_EQ(64u, r.size());	/* never across descriptors */
	for (auto &x : r) {
		EXPECT_EQ(x.rkey, (x.raddr - 0x100000000ull) / (256u << 10));
		for (uint32_t i = 0; i < x.len; i += 4096)
			seen[x.off + i]++;
	}
	for (size_t i = 0; i < seen.size(); i += 4096)
		ASSERT_EQ(1, seen[i]) << i;
}
