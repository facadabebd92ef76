// SPDX-License-Identifier: MIT
/*
 * lib_cap_test.cc - capabilities: genuine ones pass, every kind of tampering fails
 * with the documented errno.
 */
#include <errno.h>
#include <string.h>

#include <gtest/gtest.h>

extern "C" {
#include "cap.h"
}

namespace {

const int64_t kNow = 1700000000LL * 1000000000LL;
const char kHolder[] = "node:n1:1";

class Cap : public ::testing::Test {
protected:
	void SetUp() override
	{
		auth_secret_from_bytes(&key_, "capability key, metaserver+ios", 30);
		rdfs__capability__init(&cap_);
		for (int i = 0; i < 2; i++) {
			rdfs__block_range__init(&r_[i]);
			rp_[i] = &r_[i];
		}
		r_[0].first = 100;
		r_[0].count = 50;	/* [100, 150) */
		r_[1].first = 1000;
		r_[1].count = 10;	/* [1000, 1010) */
		cap_.server_id = 3;
		cap_.holder = (char *)kHolder;
		cap_.ino = 77;
		cap_.rights = RDFS_CAP_READ;
		cap_.expiry_ns = kNow + 600LL * 1000000000LL;
		cap_.n_ranges = 2;
		cap_.ranges = rp_;
		ASSERT_EQ(0, cap_sign(&key_, &cap_));
	}
	void TearDown() override { cap_free_mac(&cap_); }
	int check(uint32_t server, uint32_t rights, uint64_t first, uint64_t count)
	{
		return cap_check(&key_, &cap_, server, kHolder, rights, first, count, kNow);
	}

	struct auth_secret key_;
	Rdfs__Capability cap_;
	Rdfs__BlockRange r_[2];
	Rdfs__BlockRange *rp_[2];
};

TEST_F(Cap, SignedCapabilityChecks)
{
	EXPECT_EQ((size_t)AUTH_MAC_LEN, cap_.mac.len);
	EXPECT_EQ(0, check(3, RDFS_CAP_READ, 100, 50));
	EXPECT_EQ(0, check(3, RDFS_CAP_READ, 120, 1));
	EXPECT_EQ(0, check(3, RDFS_CAP_READ, 1009, 1));
}

TEST_F(Cap, SurvivesProtobufRoundTrip)
{
	uint8_t buf[256];
	size_t n = rdfs__capability__pack(&cap_, buf);
	Rdfs__Capability *c = rdfs__capability__unpack(nullptr, n, buf);

	ASSERT_NE(nullptr, c);
	EXPECT_EQ(0, cap_check(&key_, c, 3, kHolder, RDFS_CAP_READ, 100, 10, kNow));
	rdfs__capability__free_unpacked(c, nullptr);
}

TEST_F(Cap, ForgedMacIsEbadmsg)
{
	cap_.mac.data[0] ^= 0x80;
	EXPECT_EQ(-EBADMSG, check(3, RDFS_CAP_READ, 100, 1));
}

TEST_F(Cap, WrongKeyIsEbadmsg)
{
	struct auth_secret other;

	auth_secret_from_bytes(&other, "some other key, not the real one", 32);
	EXPECT_EQ(-EBADMSG, cap_check(&other, &cap_, 3, kHolder, RDFS_CAP_READ, 100, 1, kNow));
}

TEST_F(Cap, MissingOrShortMacIsEbadmsg)
{
	size_t len = cap_.mac.len;

	cap_.mac.len = 16;
	EXPECT_EQ(-EBADMSG, check(3, RDFS_CAP_READ, 100, 1));
	cap_.mac.len = 0;
	EXPECT_EQ(-EBADMSG, check(3, RDFS_CAP_READ, 100, 1));
	cap_.mac.len = len;
}

TEST_F(Cap, AlteredFieldsAreEbadmsg)
{
	r_[0].count = 5000;		/* widen the range */
	EXPECT_EQ(-EBADMSG, check(3, RDFS_CAP_READ, 100, 1));
	r_[0].count = 50;
	EXPECT_EQ(0, check(3, RDFS_CAP_READ, 100, 1));

	cap_.rights |= RDFS_CAP_WRITE;	/* grant yourself write */
	EXPECT_EQ(-EBADMSG, check(3, RDFS_CAP_WRITE, 100, 1));
	cap_.rights = RDFS_CAP_READ;

	cap_.expiry_ns += 1;		/* extend the lifetime */
	EXPECT_EQ(-EBADMSG, check(3, RDFS_CAP_READ, 100, 1));
	cap_.expiry_ns -= 1;

	cap_.ino = 78;
	EXPECT_EQ(-EBADMSG, check(3, RDFS_CAP_READ, 100, 1));
	cap_.ino = 77;

	cap_.holder = (char *)"node:n2:1";	/* hand it to another node */
	EXPECT_EQ(-EBADMSG, cap_check(&key_, &cap_, 3, "node:n2:1", RDFS_CAP_READ, 100, 1, kNow));
	cap_.holder = (char *)kHolder;

	cap_.n_ranges = 1;		/* drop a range */
	EXPECT_EQ(-EBADMSG, check(3, RDFS_CAP_READ, 100, 1));
	cap_.n_ranges = 2;
	EXPECT_EQ(0, check(3, RDFS_CAP_READ, 100, 1));
}

TEST_F(Cap, ExpiredIsEkeyexpired)
{
	EXPECT_EQ(-EKEYEXPIRED,
		  cap_check(&key_, &cap_, 3, kHolder, RDFS_CAP_READ, 100, 1, cap_.expiry_ns));
	EXPECT_EQ(0, cap_check(&key_, &cap_, 3, kHolder, RDFS_CAP_READ, 100, 1, cap_.expiry_ns - 1));
}

TEST_F(Cap, WrongServerIsEacces)
{
	EXPECT_EQ(-EACCES, check(4, RDFS_CAP_READ, 100, 1));
}

/* A genuine capability presented by anyone but its holder is refused. */
TEST_F(Cap, OtherHolderIsEacces)
{
	EXPECT_EQ(-EACCES, cap_check(&key_, &cap_, 3, "node:n2:1", RDFS_CAP_READ, 100, 1, kNow));
	EXPECT_EQ(-EACCES, cap_check(&key_, &cap_, 3, "client", RDFS_CAP_READ, 100, 1, kNow));
	EXPECT_EQ(-EACCES, cap_check(&key_, &cap_, 3, nullptr, RDFS_CAP_READ, 100, 1, kNow));
}

TEST_F(Cap, WrongRightsIsEacces)
{
	EXPECT_EQ(-EACCES, check(3, RDFS_CAP_WRITE, 100, 1));
	EXPECT_EQ(-EACCES, check(3, RDFS_CAP_READ | RDFS_CAP_WRITE, 100, 1));
}

TEST_F(Cap, UncoveredRangeIsEacces)
{
	EXPECT_EQ(-EACCES, check(3, RDFS_CAP_READ, 99, 1));	/* just before */
	EXPECT_EQ(-EACCES, check(3, RDFS_CAP_READ, 150, 1));	/* just after */
	EXPECT_EQ(-EACCES, check(3, RDFS_CAP_READ, 140, 20));	/* straddles the end */
	EXPECT_EQ(-EACCES, check(3, RDFS_CAP_READ, 500, 1));	/* in the gap */
	/* Spanning both ranges is not covered by either one. */
	EXPECT_EQ(-EACCES, check(3, RDFS_CAP_READ, 100, 910));
	/* first + count wrapping around 2^64 must not look covered. */
	EXPECT_EQ(-EACCES, check(3, RDFS_CAP_READ, 120, UINT64_MAX - 10));
}

TEST_F(Cap, AdjacentRangesAreNotMerged)
{
	/* [100,150) and [150,160), signed: a request over the seam is refused. */
	r_[1].first = 150;
	r_[1].count = 10;
	ASSERT_EQ(0, cap_sign(&key_, &cap_));
	EXPECT_EQ(0, check(3, RDFS_CAP_READ, 150, 10));
	EXPECT_EQ(-EACCES, check(3, RDFS_CAP_READ, 145, 10));
}

TEST(CapClock, NowIsRealtimeNanoseconds)
{
	int64_t t = cap_now_ns();

	EXPECT_GT(t, 1600000000LL * 1000000000LL);
}

} // namespace
