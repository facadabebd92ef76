// SPDX-License-Identifier: MIT
/*
 * ios_fence_test.cc - the I/O server's fences: older registration epochs are
 * refused and a newer one adopted; a file fence refuses older generations of
 * that file only, until it expires; fences only ever tighten.
 */
#include <errno.h>

#include <gtest/gtest.h>

extern "C" {
#include "../../ioserver/fence.h"
}

namespace {

const int64_t kNow = 1700000000LL * 1000000000LL;
const int64_t kSec = 1000000000LL;

class Fence : public ::testing::Test {
protected:
	void SetUp() override { ASSERT_EQ(fence_table_create(&t_), 0); }
	void TearDown() override { fence_table_destroy(t_); }
	struct fence_table *t_ = nullptr;
};

TEST_F(Fence, OlderEpochsAreRefusedANewerOneIsAdopted)
{
	fence_set_epoch(t_, 100);
	EXPECT_EQ(fence_check(t_, 100, 7, 0, kNow), 0);
	EXPECT_EQ(fence_check(t_, 99, 7, 0, kNow), -ESTALE);
	/* a genuine capability of a newer registration proves it: adopted */
	EXPECT_EQ(fence_check(t_, 150, 7, 0, kNow), 0);
	EXPECT_EQ(fence_epoch(t_), 150u);
	EXPECT_EQ(fence_check(t_, 100, 7, 0, kNow), -ESTALE);
	/* a registration reply that arrives late never lowers it */
	fence_set_epoch(t_, 120);
	EXPECT_EQ(fence_epoch(t_), 150u);
}

TEST_F(Fence, ALapsedRegistrationLeaseRefusesItsEpochUntilANewOne)
{
	int64_t now = fence_mono_ms();

	fence_set_epoch(t_, 100);
	EXPECT_EQ(fence_check(t_, 100, 7, 0, kNow), 0) << "no lease: served";
	fence_set_lease(t_, 100, now + 600000);
	EXPECT_EQ(fence_check(t_, 100, 7, 0, kNow), 0);
	/* the metaserver answered no PING for its timeout: it dropped us */
	fence_set_lease(t_, 100, now - 1);
	EXPECT_EQ(fence_check(t_, 100, 7, 0, kNow), -ENOLINK);
	EXPECT_EQ(fence_check(t_, 99, 7, 0, kNow), -ESTALE);
	/* a capability of a newer registration is not the lapsed lease's */
	EXPECT_EQ(fence_check(t_, 101, 7, 0, kNow), 0);
	EXPECT_EQ(fence_check(t_, 100, 7, 0, kNow), -ESTALE);
	fence_set_lease(t_, 101, now + 600000);
	EXPECT_EQ(fence_check(t_, 101, 7, 0, kNow), 0);
}

TEST_F(Fence, AFileFenceRefusesOlderGenerationsOfThatFileOnly)
{
	ASSERT_EQ(fence_add(t_, 7, 3, 0, kNow + 600 * kSec, kNow), 0);
	EXPECT_EQ(fence_count(t_), 1u);
	EXPECT_EQ(fence_check(t_, 0, 7, 2, kNow), -ESTALE);
	EXPECT_EQ(fence_check(t_, 0, 7, 0, kNow), -ESTALE);
	EXPECT_EQ(fence_check(t_, 0, 7, 3, kNow), 0);
	EXPECT_EQ(fence_check(t_, 0, 7, 4, kNow), 0);
	EXPECT_EQ(fence_check(t_, 0, 8, 0, kNow), 0) << "another file is not fenced";
}

TEST_F(Fence, FencesOnlyTightenAndExpireWithTheCapabilitiesTheyRefuse)
{
	ASSERT_EQ(fence_add(t_, 7, 5, 0, kNow + 10 * kSec, kNow), 0);
	ASSERT_EQ(fence_add(t_, 7, 3, 0, kNow + 20 * kSec, kNow), 0);	/* a late, older one */
	EXPECT_EQ(fence_check(t_, 0, 7, 4, kNow), -ESTALE) << "a fence was loosened";
	EXPECT_EQ(fence_check(t_, 0, 7, 4, kNow + 15 * kSec), -ESTALE) << "expiry shortened";
	/* once every capability it refuses has expired, it goes */
	EXPECT_EQ(fence_check(t_, 0, 7, 4, kNow + 20 * kSec), 0);
	EXPECT_EQ(fence_count(t_), 0u);
	/* an already expired fence is not kept at all */
	ASSERT_EQ(fence_add(t_, 9, 1, 0, kNow - 1, kNow), 0);
	EXPECT_EQ(fence_count(t_), 0u);
}

/* Generations start again in every epoch (a restarted metaserver forgets them). */
TEST_F(Fence, AFenceCountsTheGenerationsOfItsOwnEpochOnly)
{
	fence_set_epoch(t_, 100);
	ASSERT_EQ(fence_add(t_, 7, 4, 100, kNow + 600 * kSec, kNow), 0);
	EXPECT_EQ(fence_check(t_, 100, 7, 3, kNow), -ESTALE);
	/* the metaserver restarted: epoch 200, the file's generation is 0 again */
	fence_set_epoch(t_, 200);
	EXPECT_EQ(fence_check(t_, 200, 7, 0, kNow), 0) << "an old epoch's fence refused a new one";
	EXPECT_EQ(fence_check(t_, 100, 7, 9, kNow), -ESTALE) << "the old epoch itself";
	/* the new run fences the file: its series replaces the old one */
	ASSERT_EQ(fence_add(t_, 7, 1, 200, kNow + 600 * kSec, kNow), 0);
	EXPECT_EQ(fence_check(t_, 200, 7, 0, kNow), -ESTALE);
	EXPECT_EQ(fence_check(t_, 200, 7, 1, kNow), 0);
	/* a late fence of the old epoch changes nothing */
	ASSERT_EQ(fence_add(t_, 7, 9, 100, kNow + 600 * kSec, kNow), 0);
	EXPECT_EQ(fence_check(t_, 200, 7, 1, kNow), 0);
}

TEST_F(Fence, ManyFilesManyFences)
{
	for (uint64_t ino = 1; ino <= 20000; ino++)
		ASSERT_EQ(fence_add(t_, ino, 2, 0, kNow + kSec, kNow), 0);
	EXPECT_EQ(fence_count(t_), 20000u);
	for (uint64_t ino = 1; ino <= 20000; ino += 997) {
		EXPECT_EQ(fence_check(t_, 0, ino, 1, kNow), -ESTALE);
		EXPECT_EQ(fence_check(t_, 0, ino, 2, kNow), 0);
	}
	/* expired ones are dropped as checks and adds meet them */
	for (uint64_t ino = 1; ino <= 20000; ino++)
		fence_check(t_, 0, ino, 0, kNow + 2 * kSec);
	EXPECT_EQ(fence_count(t_), 0u);
}

} // namespace
