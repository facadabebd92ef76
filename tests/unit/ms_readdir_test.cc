// SPDX-License-Identifier: MIT
/*
 * ms_readdir_test.cc - paged readdir: name order, resuming strictly after a
 * name (even one deleted meanwhile), page limits, and 10,000 entries listed
 * while other threads insert and delete: no duplicates, every stable entry seen.
 */
#include <errno.h>

#include <atomic>
#include <set>
#include <thread>

#include "ms_fixture.h"

TEST_F(MsTest, ReaddirOrderAndResume)
{
	uint64_t d = mkdir_(1, "d");
	struct ms_dirent ents[8];
	int eof = 0;

	for (const char *n : { "c", "a", "b", "e" })
		mkfile(d, n);
	mkdir_(d, "sub");
	EXPECT_EQ(list(d), (std::vector<std::string>{ "a", "b", "c", "e", "sub" }));
	ASSERT_EQ(ms_readdir(ms, &root, d, "b", 1, 2, ents, &eof), 2);
	EXPECT_STREQ(ents[0].name, "c");
	EXPECT_STREQ(ents[1].name, "e");
	EXPECT_EQ(eof, 0);
	/* resume after a name that no longer exists */
	ASSERT_EQ(ms_readdir(ms, &root, d, "d", 1, 8, ents, &eof), 2);
	EXPECT_STREQ(ents[0].name, "e");
	EXPECT_STREQ(ents[1].name, "sub");
	EXPECT_EQ(ents[1].type, (uint32_t)(S_IFDIR >> 12));
	EXPECT_EQ(ents[0].type, (uint32_t)(S_IFREG >> 12));
	EXPECT_EQ(eof, 1);
	ASSERT_EQ(ms_readdir(ms, &root, d, "sub", 3, 8, ents, &eof), 0);
	EXPECT_EQ(eof, 1);
	EXPECT_EQ(ms_readdir(ms, &root, mkfile(1, "f"), nullptr, 0, 8, ents, &eof), -ENOTDIR);
	EXPECT_EQ(ms_readdir(ms, &root, 4242, nullptr, 0, 8, ents, &eof), -ENOENT);
	/* an empty directory */
	ASSERT_EQ(ms_readdir(ms, &root, mkdir_(1, "empty"), nullptr, 0, 8, ents, &eof), 0);
	EXPECT_EQ(eof, 1);
}

TEST_F(MsTest, ReaddirPageIsCappedAt1024)
{
	uint64_t d = mkdir_(1, "d");
	std::vector<struct ms_dirent> ents(MS_READDIR_MAX);
	int eof;

	for (int i = 0; i < 1100; i++) {
		char n[16];
		struct ms_attr a;

		snprintf(n, sizeof(n), "f%05d", i);
		ASSERT_EQ(ms_mknod(ms, sess, &root, d, n, 0644, 0, 0, 1, 0, 0, &a, nullptr), 0);
	}
	EXPECT_EQ(ms_readdir(ms, &root, d, nullptr, 0, 5000, ents.data(), &eof), 1024);
	EXPECT_EQ(eof, 0);
	EXPECT_EQ(ms_readdir(ms, &root, d, nullptr, 0, 0, ents.data(), &eof), 1024);
}

TEST_F(MsTest, ReaddirTenThousandWithConcurrentChanges)
{
	const int stable = 10000;
	uint64_t d = mkdir_(1, "big");
	std::atomic<bool> done{ false };

	/* eight creators at once: their synced writes share fsyncs (group commit) */
	std::vector<std::thread> creators;
	for (int t = 0; t < 8; t++)
		creators.emplace_back([&, t]() {
			for (int i = t; i < stable; i += 8) {
				char n[32];
				struct ms_attr a;

				snprintf(n, sizeof(n), "stable-%05d", i);
				EXPECT_EQ(ms_mknod(ms, sess, &root, d, n, 0644, 0, 0, 1, 0, 0, &a,
						   nullptr), 0);
			}
		});
	for (auto &t : creators)
		t.join();
	/* churn: names that sort before, among and after the stable ones */
	std::thread churn([&]() {
		int i = 0;

		while (!done.load()) {
			char n[32];
			struct ms_attr a;
			const char *pfx[] = { "a-", "stable-0", "stable-5", "z-" };

			snprintf(n, sizeof(n), "%s%d", pfx[i % 4], i);
			EXPECT_EQ(ms_mknod(ms, sess, &root, d, n, 0644, 0, 0, 1, 0, 0, &a, nullptr), 0);
			if (i % 3 == 0) {
				EXPECT_EQ(ms_unlink(ms, &root, d, n), 0);
			}
			i++;
		}
	});

	std::set<std::string> seen;
	std::vector<struct ms_dirent> ents(MS_READDIR_MAX);
	std::string after, prev;
	int eof = 0, pages = 0;

	while (!eof) {
		int n = ms_readdir(ms, &root, d, after.data(), after.size(), 333, ents.data(), &eof);

		ASSERT_GE(n, 0);
		for (int i = 0; i < n; i++) {
			std::string name(ents[i].name, ents[i].namelen);

			EXPECT_TRUE(seen.insert(name).second) << "duplicate " << name;
			EXPECT_LT(prev, name) << "out of order";
			prev = name;
		}
		if (n)
			after = std::string(ents[n - 1].name, ents[n - 1].namelen);
		pages++;
	}
	done = true;
	churn.join();
	for (int i = 0; i < stable; i++) {
		char n[32];

		snprintf(n, sizeof(n), "stable-%05d", i);
		EXPECT_TRUE(seen.count(n)) << "missed " << n;
	}
	EXPECT_GE(pages, stable / 333);
}
