// SPDX-License-Identifier: MIT
/*
 * ios_bufpool_test.cc - the pool declares its unit buffers to the transport
 * (xport_mem_register) for exactly as long as it owns them, so an RDMA
 * connection registers each once instead of once per reply unit.
 */
#include <gtest/gtest.h>

#include <errno.h>

#include <vector>

extern "C" {
#include "../../ioserver/bufpool.h"
#include "xport.h"
}

namespace {

const size_t kUnit = 128u << 10;

TEST(BufPoolDeclare, UnitBuffersAreDeclaredWhileThePoolOwnsThem)
{
	struct bufpool *p;

	ASSERT_EQ(bufpool_create(32u << 20, kUnit, 4, &p), 0);
	std::vector<void *> units;
	/* the preallocated ones and the ones made on demand alike */
	for (int i = 0; i < 8; i++) {
		void *b = bufpool_get(p, kUnit);
		ASSERT_NE(b, nullptr);
		units.push_back(b);
		/* declared already: a second declaration overlaps it */
		EXPECT_EQ(xport_mem_register(b, kUnit), -EEXIST);
		EXPECT_EQ(xport_mem_register((char *)b + 4096, 4096), -EEXIST);
	}
	/* a buffer of another size lives for one request: not declared */
	void *odd = bufpool_get(p, 3 * 4096);
	ASSERT_NE(odd, nullptr);
	EXPECT_EQ(xport_mem_register(odd, 3 * 4096), 0);
	EXPECT_EQ(xport_mem_deregister(odd, 3 * 4096), 0);
	bufpool_put(p, odd, 3 * 4096);
	/* recycled, still the pool's: still declared */
	for (void *b : units)
		bufpool_put(p, b, kUnit);
	EXPECT_EQ(xport_mem_register(units[0], kUnit), -EEXIST);
	bufpool_destroy(p);
	/* freed: every declaration is gone with it */
	for (void *b : units)
		EXPECT_EQ(xport_mem_deregister(b, kUnit), -ENOENT);
}

TEST(BufPoolDeclare, BuffersFreedToMakeRoomAreUndeclaredFirst)
{
	struct bufpool *p;

	ASSERT_EQ(bufpool_create(RDFS_MAX_DATA, kUnit, 0, &p), 0);
	void *u = bufpool_get(p, kUnit);
	ASSERT_NE(u, nullptr);
	bufpool_put(p, u, kUnit);
	/* the whole budget for one big buffer: the recycled unit must go */
	void *big = bufpool_get(p, RDFS_MAX_DATA);
	ASSERT_NE(big, nullptr);
	EXPECT_EQ(xport_mem_deregister(u, kUnit), -ENOENT);
	bufpool_put(p, big, RDFS_MAX_DATA);
	bufpool_destroy(p);
}

} // namespace
