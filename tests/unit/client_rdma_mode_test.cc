// SPDX-License-Identifier: MIT
/*
 * client_rdma_mode_test.cc - rdma_mode read and write give the same bytes
 * through rdfs_pread() and rdfs_pread_iov(). On the host the I/O server is
 * on tcp:// (write mode falls back to data in the replies); in the qemu guest
 * (RDFS_TEST_RDMA_ADDR set, tests/vm/run --rdma) it listens on rdma://, so
 * write mode has the server RDMA-WRITE each unit into the client's buffer
 * (Gfarm's figure 2) and read mode has the client RDMA-READ it (figure 3).
 */
#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "client_cluster.h"

extern "C" {
#include "rdfs_client.h"
#include "xport_verbs_stats.h"
}

using rdfs_test::pattern;

namespace {

const struct rdfs_cred root = {};
constexpr size_t MiB = 1 << 20;

class ClientRdmaMode : public ::testing::Test {
protected:
	static inline rdfs_test::Cluster *cluster;

	static void SetUpTestSuite()
	{
		const char *addr = getenv("RDFS_TEST_RDMA_ADDR");

		cluster = new rdfs_test::Cluster();
		cluster->ios_args = { "--unit-size", "64k", "--pipeline-depth", "3" };
		if (addr && *addr) {
			int port = rdfs_test::free_port();

			cluster->ios_args.push_back("--listen");
			cluster->ios_args.push_back(std::string("rdma://") + addr + ":" +
						    std::to_string(port));
		}
		ASSERT_TRUE(cluster->start(1)) << cluster->dir;
	}
	static void TearDownTestSuite()
	{
		delete cluster;
		cluster = nullptr;
	}
};

TEST_F(ClientRdmaMode, BothModesReadTheSameBytesThroughBothReadCalls)
{
	struct rdfs_client_opts o = cluster->opts();
	struct rdfs_client *w = nullptr;

	for (int i = 0; i < 100 && rdfs_client_open(&o, &w) != 0; i++)
		usleep(100000);
	ASSERT_NE(w, nullptr);
	auto data = pattern(5 * MiB + 999, 21);
	const char *addr = getenv("RDFS_TEST_RDMA_ADDR");
	bool rdma = addr && *addr;
	struct rdfs_file *f = nullptr;
	struct stat st;

	ASSERT_EQ(rdfs_create(w, &root, RDFS_ROOT_INO, "modes", 0644, O_RDWR | O_CREAT | O_EXCL,
			      &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_close(w);

	const struct { uint64_t off; size_t size; } cases[] = {
		{ 0, 4096 }, { 0, 4 * MiB }, { 123, MiB }, { MiB - 1, 2 },
		{ 2 * MiB + 4095, 3 * MiB }, { data.size() - 10, 4096 }, { 77, 100000 },
	};
	for (int mode : { RDFS_RDMA_READ, RDFS_RDMA_WRITE }) {
		o = cluster->opts();
		o.readahead_kb = -1;
		o.rdma_mode = mode;
		struct rdfs_client *c = nullptr;

		for (int i = 0; i < 100 && rdfs_client_open(&o, &c) != 0; i++)
			usleep(100000);
		ASSERT_NE(c, nullptr);
		struct verbs_stats before, after;
		verbs_stats_get(&before);
		ASSERT_EQ(rdfs_lookup(c, &root, RDFS_ROOT_INO, "modes", &st), 0);
		ASSERT_EQ(rdfs_open(c, &root, st.st_ino, O_RDONLY, &st, &f), 0);
		for (const auto &k : cases) {
			size_t want = std::min(k.size, data.size() - (size_t)k.off);
			std::vector<uint8_t> got(k.size, 0xa5);

			ASSERT_EQ(rdfs_pread(f, got.data(), k.size, k.off), (ssize_t)want)
				<< "mode " << mode << " off " << k.off;
			EXPECT_TRUE(std::equal(got.begin(), got.begin() + want,
					       data.begin() + k.off))
				<< "pread mode " << mode << " off " << k.off << " size " << k.size;

			struct rdfs_read_buf *rb = nullptr;
			const struct iovec *iov = nullptr;
			int niov = 0;
			ASSERT_EQ(rdfs_pread_iov(f, k.size, k.off, &rb, &iov, &niov),
				  (ssize_t)want);
			std::vector<uint8_t> flat;
			for (int i = 0; i < niov; i++)
				flat.insert(flat.end(), (uint8_t *)iov[i].iov_base,
					    (uint8_t *)iov[i].iov_base + iov[i].iov_len);
			EXPECT_TRUE(flat.size() == want &&
				    std::equal(flat.begin(), flat.end(), data.begin() + k.off))
				<< "pread_iov mode " << mode << " off " << k.off << " size "
				<< k.size;
			rdfs_read_buf_free(rb);
		}
		ASSERT_EQ(rdfs_release(f), 0);
		rdfs_client_close(c);
		verbs_stats_get(&after);
		/* over rdma://, only write mode exposes the destination */
		if (rdma)
			EXPECT_EQ(mode == RDFS_RDMA_WRITE, after.sinks > before.sinks)
				<< "mode " << mode;
		else
			EXPECT_EQ(after.sinks, before.sinks);
	}
}

/*
 * The registration cache for client buffers, end to end against a real I/O
 * server: once warm, write mode's rdfs_pread_iov() exposes slots of the
 * client's declared pool through windows (no registration per request) and
 * read mode's rendezvous replies land in recycled declared buffers (none
 * either); rdfs_pread() into the caller's own memory registers it per
 * request, as it must. Over TCP (the host) there is nothing to count.
 */
TEST_F(ClientRdmaMode, SteadyStateReadsRegisterNoClientMemoryPerRequest)
{
	const char *addr = getenv("RDFS_TEST_RDMA_ADDR");
	bool rdma = addr && *addr;
	struct rdfs_client_opts o = cluster->opts();
	struct rdfs_client *w = nullptr;
	struct rdfs_file *f = nullptr;
	struct stat st;
	auto data = pattern(2 * MiB, 33);

	for (int i = 0; i < 100 && rdfs_client_open(&o, &w) != 0; i++)
		usleep(100000);
	ASSERT_NE(w, nullptr);
	ASSERT_EQ(rdfs_create(w, &root, RDFS_ROOT_INO, "steady", 0644,
			      O_RDWR | O_CREAT | O_EXCL, &st, &f), 0);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);
	rdfs_client_close(w);

	/* sizes up to a pool slot (rdfs-fuse's largest read), odd offsets too */
	const struct { uint64_t off; size_t size; } cases[] = {
		{ 0, MiB }, { 123, 100000 }, { MiB + 7, MiB - 7 },
	};
	for (int mode : { RDFS_RDMA_WRITE, RDFS_RDMA_READ }) {
		o = cluster->opts();
		o.readahead_kb = -1;
		o.rdma_mode = mode;
		struct rdfs_client *c = nullptr;

		for (int i = 0; i < 100 && rdfs_client_open(&o, &c) != 0; i++)
			usleep(100000);
		ASSERT_NE(c, nullptr);
		ASSERT_EQ(rdfs_lookup(c, &root, RDFS_ROOT_INO, "steady", &st), 0);
		ASSERT_EQ(rdfs_open(c, &root, st.st_ino, O_RDONLY, &st, &f), 0);
		auto read_all = [&](const char *what) {
			for (const auto &k : cases) {
				struct rdfs_read_buf *rb = nullptr;
				const struct iovec *iov = nullptr;
				int niov = 0;
				std::vector<uint8_t> flat;

				ASSERT_EQ(rdfs_pread_iov(f, k.size, k.off, &rb, &iov, &niov),
					  (ssize_t)k.size);
				for (int i = 0; i < niov; i++)
					flat.insert(flat.end(), (uint8_t *)iov[i].iov_base,
						    (uint8_t *)iov[i].iov_base + iov[i].iov_len);
				EXPECT_TRUE(flat.size() == k.size &&
					    std::equal(flat.begin(), flat.end(),
						       data.begin() + k.off))
					<< what << " mode " << mode << " off " << k.off;
				rdfs_read_buf_free(rb);
			}
		};
		read_all("warm-up");
		struct verbs_stats before, after;
		verbs_stats_get(&before);
		read_all("steady");
		verbs_stats_get(&after);
		if (rdma) {
			/* not one ibv_reg_mr: windows over cached registrations */
			EXPECT_EQ(0u, after.reg_mrs - before.reg_mrs) << "mode " << mode;
			EXPECT_EQ(0u, after.recv_mrs - before.recv_mrs) << "mode " << mode;
			EXPECT_EQ(0u, after.sink_mrs - before.sink_mrs) << "mode " << mode;
			if (mode == RDFS_RDMA_WRITE) {
				EXPECT_GE(after.sink_windows - before.sink_windows,
					  sizeof(cases) / sizeof(cases[0]));
			} else {
				EXPECT_GT(after.cache_hits, before.cache_hits);
			}
		} else {
			EXPECT_EQ(after.reg_mrs, before.reg_mrs);
		}

		/* the caller's own memory is not declared: registered per request */
		std::vector<uint8_t> got(MiB);
		verbs_stats_get(&before);
		ASSERT_EQ(rdfs_pread(f, got.data(), got.size(), MiB), (ssize_t)MiB);
		EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin() + MiB));
		verbs_stats_get(&after);
		if (rdma && mode == RDFS_RDMA_WRITE) {
			EXPECT_GT(after.sink_mrs, before.sink_mrs);
		}
		ASSERT_EQ(rdfs_release(f), 0);
		rdfs_client_close(c);
	}
}

} // namespace
