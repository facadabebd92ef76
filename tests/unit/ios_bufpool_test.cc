// SPDX-License-Identifier: MIT
/*
 * ios_bufpool_test.cc - the pool declares its unit buffers, and the read-ahead
 * cache its segments, to the transport (xport_mem_register) for exactly as
 * long as they own them, so an RDMA connection registers each once instead of
 * once per reply unit.
 */
#include <gtest/gtest.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "../../ioserver/bufpool.h"
#include "../../ioserver/readahead.h"
#include "frame.h"
#include "xport.h"
#include "xport_verbs_stats.h"
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

TEST(BufPoolDeclare, ReadAheadSegmentsAreDeclaredUntilTheCacheGoes)
{
	struct ra_cache *ra;
	struct ra_seg *segs[256];

	ASSERT_EQ(ra_create(64u << 20, 1u << 20, &ra), 0);
	EXPECT_EQ(ra_note_read(ra, 1000, 64, segs, 256), 0);
	int n = ra_note_read(ra, 1064, 64, segs, 256);
	ASSERT_GT(n, 0);
	std::vector<void *> bufs;
	for (int i = 0; i < n; i++) {
		bufs.push_back(ra_seg_buf(segs[i]));
		EXPECT_EQ(xport_mem_register(ra_seg_buf(segs[i]), 4096), -EEXIST) << i;
		ra_seg_loaded(ra, segs[i], 0);
	}
	ra_destroy(ra);
	for (void *b : bufs)
		EXPECT_EQ(xport_mem_register(b, 4096), 0);
	for (void *b : bufs)
		EXPECT_EQ(xport_mem_deregister(b, 4096), 0);
}

/*
 * In the qemu guest (tests/vm/run --rdma): replies sent from pool units go by
 * rendezvous through windows over one cached registration per unit, never by
 * a registration per send.
 */
TEST(BufPoolDeclareRdma, UnitsAreSentThroughWindowsNotPerSendRegistrations)
{
	const char *addr = getenv("RDFS_TEST_RDMA_ADDR");

	if (!addr || !*addr)
		GTEST_SKIP() << "RDFS_TEST_RDMA_ADDR unset: no RDMA device (run in tests/vm/run --rdma)";
	struct xport_ctx *sctx, *cctx;
	struct xport_listener *l;
	struct xport_conn *conn;
	struct bufpool *p;
	std::atomic<int> received{0}, bad{0};
	std::atomic<bool> stop{false};

	ASSERT_EQ(bufpool_create(32u << 20, kUnit, 2, &p), 0);
	ASSERT_EQ(xport_ctx_create(&sctx), 0);
	ASSERT_EQ(xport_ctx_create(&cctx), 0);
	ASSERT_EQ(xport_listen(sctx, (std::string("rdma://") + addr + ":0").c_str(), &l), 0);
	std::thread server([&] {
		struct xport_event ev[8];

		while (!stop) {
			int n = xport_test(sctx, ev, 8, 1000);

			for (int i = 0; i < n; i++) {
				if (ev[i].type == XPORT_EV_ACCEPT) {
					xport_conn_put(ev[i].conn);
				} else if (ev[i].type == XPORT_EV_RECV) {
					struct xport_msg *m = ev[i].msg;

					for (uint32_t j = 0; j < m->hdr.data_len; j++)
						if (m->data[j] != (uint8_t)(j * 7 + m->hdr.tag))
							bad++;
					received++;
					xport_msg_free(m);
				}
			}
		}
	});
	ASSERT_EQ(xport_connect(cctx, xport_listener_url(l), 120000, &conn), 0);

	struct verbs_stats before, after;
	verbs_stats_get(&before);
	for (uint32_t tag = 1; tag <= 3; tag++) {
		uint8_t *b = (uint8_t *)bufpool_get(p, kUnit);
		ASSERT_NE(b, nullptr);
		for (uint32_t j = 0; j < kUnit; j++)
			b[j] = (uint8_t)(j * 7 + tag);
		struct rdfs_frame_hdr h = {};
		h.magic = RDFS_FRAME_MAGIC;
		h.version = RDFS_FRAME_VERSION;
		h.opcode = 1;
		h.tag = tag;
		h.data_len = (uint32_t)kUnit;
		struct iovec iov = { b, kUnit };
		ASSERT_EQ(xport_post_send(conn, &h, nullptr, &iov, 1, b), 0);
		/* one at a time, so the same unit comes back from the pool */
		struct xport_event ev;
		int n;
		do
			n = xport_test(cctx, &ev, 1, 120000);
		while (n == 1 && ev.type != XPORT_EV_SEND);
		ASSERT_EQ(n, 1);
		EXPECT_EQ(ev.status, 0);
		bufpool_put(p, b, kUnit);
	}
	verbs_stats_get(&after);
	while (received < 3)
		std::this_thread::yield();
	EXPECT_EQ(bad, 0);
	EXPECT_EQ(after.send_mrs - before.send_mrs, 0u);
	EXPECT_EQ(after.windows - before.windows, 3u);
	EXPECT_GE(after.cache_hits - before.cache_hits, 2u);
	stop = true;
	server.join();
	xport_conn_put(conn);
	xport_ctx_destroy(cctx);
	xport_ctx_destroy(sctx);
	bufpool_destroy(p);
}

} // namespace
