// SPDX-License-Identifier: MIT
/*
 * ms_stress_test.cc - random operations with random arguments (huge offsets,
 * odd flags, names that exist or not) from several threads at once, then the
 * invariants that must hold whatever happened: directory nlink = 2 + subdirs,
 * file nlink = number of entries naming it, and allocation maps that a restart
 * rebuilds to exactly the same bits.
 */
#include <errno.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "ms_fixture.h"

class MsStressTest : public MsTest {
protected:
	/* walk the tree; returns false on the first broken invariant */
	void check_tree(uint64_t dir, std::map<uint64_t, uint32_t> &links)
	{
		struct ms_attr d = attr(dir);
		std::vector<struct ms_dirent> ents(MS_READDIR_MAX);
		std::string after;
		uint32_t subdirs = 0;
		int eof = 0;

		while (!eof) {
			int n = ms_readdir(ms, &root, dir, after.data(), after.size(), 0, ents.data(),
					   &eof);
			ASSERT_GE(n, 0);
			for (int i = 0; i < n; i++) {
				struct ms_attr a;

				ASSERT_EQ(ms_getattr(ms, ents[i].ino, &a), 0) << ents[i].name;
				EXPECT_EQ(a.mode >> 12, ents[i].type) << ents[i].name;
				if (S_ISDIR(a.mode)) {
					subdirs++;
					check_tree(a.ino, links);
				} else {
					links[a.ino]++;
				}
			}
			if (n)
				after = std::string(ents[n - 1].name, ents[n - 1].namelen);
		}
		EXPECT_EQ(d.nlink, 2 + subdirs) << "dir " << dir;
	}
};

TEST_F(MsStressTest, RandomOperationsKeepInvariants)
{
	uint32_t s1 = add_server("s1", 20000), s2 = add_server("s2", 20000);
	std::vector<std::thread> ts;
	std::atomic<int> ok[16];
	std::mutex known_mu;
	std::vector<uint64_t> known = { MS_ROOT_INO };

	for (auto &o : ok)
		o = 0;
	for (int t = 0; t < 4; t++) {
		ts.emplace_back([&, t]() {
			std::mt19937_64 rng(1234 + t);
			struct ms_session *s = ms_session_new(ms, "client");
			const char *names[] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j",
						"k", "..", ".", "" };
			const struct ms_cred *creds[] = { &root, &root, &alice, &bob };
			std::vector<uint64_t> handles;

			for (int i = 0; i < 3000; i++) {
				/* inodes that were created (some since removed), now and then any */
				uint64_t ino, p, q;
				{
					std::lock_guard<std::mutex> g(known_mu);
					ino = known[rng() % known.size()];
					p = known[rng() % known.size()];
					q = known[rng() % known.size()];
				}
				if (rng() % 16 == 0)
					ino = rng() % 64;
				int op = (int)(rng() % 16), ret = -1;
				const char *n1 = names[rng() % 14], *n2 = names[rng() % 14];
				const struct ms_cred *cr = creds[rng() % 4];
				uint64_t off = rng() % 3 == 0 ? rng() : rng() % (8 << 20);
				uint64_t len = rng() % 3 == 0 ? rng() : rng() % (3 << 20);
				struct ms_attr a;
				struct ms_layout l;
				struct ms_setattr sa = {};
				uint64_t h = 0;

				switch (op) {
				case 0:
					ret = ms_mknod(ms, s, cr, p, n1,
						       rng() % 8 ? S_IFREG | 0666 : (uint32_t)rng(), 0, 0, rng() & 1,
						 rng() & 1, (uint32_t)rng() & 0xfff, &a, &h);
					break;
				case 1:
					ret = ms_mkdir(ms, cr, p, n1, rng() % 4 ? 0777 : 01777, 0, &a);
					break;
				case 2:
					ret = ms_unlink(ms, cr, p, n1);
					break;
				case 3:
					ret = ms_rmdir(ms, cr, p, n1);
					break;
				case 4:
				case 5:
					ret = ms_rename(ms, cr, p, n1, q, n2, (uint32_t)(rng() % 4));
					break;
				case 6:
					ret = ms_link(ms, cr, ino, p, n1, &a);
					break;
				case 7:
					ret = ms_symlink(ms, cr, p, n1, "target", &a);
					break;
				case 8:
					sa.valid = (uint32_t)rng() & 511;
					sa.mode = (uint32_t)rng();
					sa.size = rng() % 2 ? rng() : rng() % (4 << 20);
					sa.handle = handles.empty() ? 0 : handles[rng() % handles.size()];
					ret = ms_setattr(ms, s, cr, ino, &sa, &a);
					break;
				case 9:
				case 10:
					ret = ms_layout(ms, s, cr, ino, off, len, rng() & 1, 0, &l);
					if (ret == 0)
						ms_layout_free(&l);
					break;
				case 11: {
					struct ms_range r = { off, len };

					ret = ms_commit(ms, s, cr, ino, rng() % (16 << 20), 0, &r, 1, 0, &a);
					break;
				}
				case 12:
					ret = ms_open_file(ms, s, cr, ino, (uint32_t)rng() & 0x3ff, &a, &h);
					if (ret == 0)
						handles.push_back(h);
					break;
				case 13:
					if (!handles.empty()) {
						size_t k = rng() % handles.size();

						ms_release(ms, s, handles[k]);
						handles.erase(handles.begin() + k);
					}
					break;
				case 14:
					ret = ms_setxattr(ms, cr, ino, rng() & 1 ? "user.x" : "trusted.y", "v",
						    1, (uint32_t)(rng() % 4));
					break;
				default: {
					struct ms_dirent ents[8];
					int eof;

					ret = ms_readdir(ms, cr, ino, n1, strlen(n1), 8, ents, &eof);
					break;
				}
				}
				if (ret >= 0)
					ok[op]++;
				if (ret == 0 && op <= 7 && op != 2 && op != 3 && op != 4 &&
				    op != 5) {
					std::lock_guard<std::mutex> g(known_mu);
					known.push_back(a.ino);
				}
			}
			if (t % 2) {
				ms_session_close(ms, s);
			} else {
				/* the other half leave their handles, as a dead process would */
				std::lock_guard<std::mutex> g(known_mu);
				abandon(s);
			}
		});
	}
	for (auto &t : ts)
		t.join();
	/* the mix must have done real work, not only failed */
	int total = 0;
	for (auto &o : ok)
		total += o.load();
	EXPECT_GT(total, 600);
	for (int op : { 0, 1, 2, 12 })
		EXPECT_GT(ok[op].load(), 0) << "op " << op;

	std::map<uint64_t, uint32_t> links;
	check_tree(MS_ROOT_INO, links);
	for (auto &kv : links)
		EXPECT_EQ(attr(kv.first).nlink, kv.second) << "ino " << kv.first;

	uint64_t *w1, *w2, n1, n2;
	ASSERT_EQ(ms_alloc_bitmap(ms, s1, &w1, &n1), 0);
	ASSERT_EQ(ms_alloc_bitmap(ms, s2, &w2, &n2), 0);
	std::vector<uint64_t> b1(w1, w1 + (n1 + 63) / 64), b2(w2, w2 + (n2 + 63) / 64);
	free(w1);
	free(w2);
	/* a crash leaves the abandoned handles' orphans to startup; compare after that */
	crash_reopen();
	links.clear();
	check_tree(MS_ROOT_INO, links);
	for (auto &kv : links)
		EXPECT_EQ(attr(kv.first).nlink, kv.second) << "ino " << kv.first;
	uint64_t *r1, *r2;
	ASSERT_EQ(ms_alloc_bitmap(ms, s1, &r1, &n1), 0);
	ASSERT_EQ(ms_alloc_bitmap(ms, s2, &r2, &n2), 0);
	/* every block in use after the restart was in use before it */
	for (size_t i = 0; i < b1.size(); i++)
		EXPECT_EQ(r1[i] & ~b1[i], 0u) << i;
	for (size_t i = 0; i < b2.size(); i++)
		EXPECT_EQ(r2[i] & ~b2[i], 0u) << i;
	free(r1);
	free(r2);
	reopen();
	uint64_t *q1;
	ASSERT_EQ(ms_alloc_bitmap(ms, s1, &q1, &n1), 0);
	free(q1);
}
