// SPDX-License-Identifier: MIT
/*
 * ms_admin_test.cc - what the metaserver does for the rdfs tool's admin
 * commands: the rdfs.stripe attribute (chunk size, stripe count, first
 * server; honoured by allocation, inherited by files and directories,
 * refused on a file with blocks), read-only I/O servers (no new blocks,
 * persisted with a label, shown by the rdfs_ms_ioserver_read_only gauge)
 * and the subtree walk of rdfs du/find (its cursor
 * across batches, its summary, and what a caller who may not list a
 * directory sees).
 */
#include <errno.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "ms_fixture.h"
extern "C" {
#include "frame.h"
#include "metrics.h"
}

#define MiB (1024ull * 1024)

class MsAdminTest : public MsTest
{
      protected:
	std::string get(uint64_t ino, const char *name = RDFS_STRIPE_XATTR)
	{
		void *v = nullptr;
		int n = ms_getxattr(ms, &root, ino, name, &v);

		if (n < 0)
			return "error " + std::to_string(n);
		std::string s((char *)v, n);
		free(v);
		return s;
	}

	int set(uint64_t ino, const std::string &v, const struct ms_cred *cr = nullptr)
	{
		return ms_setxattr(ms, cr ? cr : &root, ino, RDFS_STRIPE_XATTR, v.data(), v.size(),
				   0);
	}

	/* Per chunk of a fresh allocation of @len bytes: the servers of its copies, first first. */
	std::map<uint64_t, std::vector<uint32_t>> chunks(uint64_t ino, uint64_t len,
							 uint32_t *chunk_size = nullptr)
	{
		struct ms_layout l;
		std::map<uint64_t, std::vector<uint32_t>> m;

		EXPECT_EQ(ms_layout(ms, sess, &root, ino, 0, len, 1, 0, &l), 0);
		for (size_t i = 0; i < l.n; i++) {
			auto &v = m[l.ext[i].file_offset / l.chunk_size];

			if (std::find(v.begin(), v.end(), l.ext[i].server_id) == v.end())
				v.push_back(l.ext[i].server_id);
		}
		if (chunk_size)
			*chunk_size = l.chunk_size;
		ms_layout_free(&l);
		return m;
	}

	struct Walked {
		std::vector<std::string> paths;
		std::map<std::string, int> denied;
		uint64_t files = 0, dirs = 0, others = 0, bytes = 0, batches = 0;
		std::vector<std::string> linked; /* summary: the entries listed */
	};

	/* A whole walk from @ino, @max entries a batch; -errno of the first failing batch. */
	int walk(uint64_t ino, uint32_t max, int summary, const struct ms_cred *cr, Walked *out,
		 std::function<void(const std::string &cursor)> between = nullptr)
	{
		std::string cursor;

		for (;;) {
			struct ms_walk w;
			int ret = ms_walk(ms, cr, ino, cursor.data(), cursor.size(), max, summary,
					  &w);

			if (ret)
				return ret;
			out->batches++;
			EXPECT_LE(w.n, (size_t)max);
			for (size_t i = 0; i < w.n; i++) {
				std::string p(w.paths + w.e[i].path_off, w.e[i].path_len);

				if (summary)
					out->linked.push_back(p);
				else
					out->paths.push_back(p);
				if (w.e[i].denied)
					out->denied[p] = 1;
			}
			out->files += w.files;
			out->dirs += w.dirs;
			out->others += w.others;
			out->bytes += w.bytes;
			if (w.eof) {
				ms_walk_free(&w);
				return 0;
			}
			EXPECT_GT(w.cursor_len, 0u);
			cursor.assign(w.cursor, w.cursor_len);
			ms_walk_free(&w);
			if (between)
				between(cursor);
		}
	}

	void setsize(uint64_t ino, uint64_t size)
	{
		struct ms_attr a;

		ASSERT_EQ(ms_commit(ms, sess, &root, ino, size, 0, nullptr, 0, 0, &a), 0);
	}
};

TEST_F(MsAdminTest, StripeCountAndFirstServerAreHonouredByAllocation)
{
	uint32_t s1 = add_server("a", 100000), s2 = add_server("b", 100000);
	uint32_t s3 = add_server("c", 100000), s4 = add_server("d", 100000);
	std::set<uint32_t> all = { s1, s2, s3, s4 };

	/* the default: chunks go round all four */
	uint64_t f0 = mkfile(1, "all");
	std::set<uint32_t> used;
	for (auto &c : chunks(f0, 8 * MiB))
		used.insert(c.second[0]);
	EXPECT_EQ(used, all);

	/* stripe count 2: two servers, alternating */
	uint64_t f = mkfile(1, "two");
	ASSERT_EQ(set(f, "stripe_count=2"), 0);
	EXPECT_EQ(get(f), "chunk_size=1048576 stripe_count=2 stripe_index=-1");
	auto m = chunks(f, 8 * MiB);
	ASSERT_EQ(m.size(), 8u);
	used.clear();
	for (auto &c : m) {
		ASSERT_EQ(c.second.size(), 1u);
		used.insert(c.second[0]);
		if (c.first >= 2) {
			EXPECT_EQ(c.second[0], m[c.first - 2][0]) << "chunk " << c.first;
		}
	}
	EXPECT_EQ(used.size(), 2u);

	/* first server s3, count 2, 256 KiB chunks: s3 s4 s3 s4 ... */
	uint64_t g = mkfile(1, "pinned");
	ASSERT_EQ(set(g, "chunk_size=262144 stripe_count=2 stripe_index=" + std::to_string(s3)), 0);
	uint32_t cs = 0;
	m = chunks(g, 2 * MiB, &cs);
	EXPECT_EQ(cs, 262144u);
	ASSERT_EQ(m.size(), 8u);
	for (auto &c : m)
		EXPECT_EQ(c.second[0], c.first % 2 ? s4 : s3) << "chunk " << c.first;
	EXPECT_EQ(attr(g).chunk_size, 262144u);

	/* first server s4, count 3 wraps to s1, s2 */
	uint64_t h = mkfile(1, "wrap");
	ASSERT_EQ(set(h, "stripe_count=3 stripe_index=" + std::to_string(s4)), 0);
	m = chunks(h, 6 * MiB);
	uint32_t want[] = { s4, s1, s2 };
	for (auto &c : m)
		EXPECT_EQ(c.second[0], want[c.first % 3]) << "chunk " << c.first;

	/* one server and two copies: the copy goes to another server, never the same */
	uint64_t k = mkfile(1, "copies");
	ASSERT_EQ(set(k, "stripe_count=1 stripe_index=" + std::to_string(s2)), 0);
	ASSERT_EQ(ms_setxattr(ms, &root, k, RDFS_COPIES_XATTR, "2", 1, 0), 0);
	for (auto &c : chunks(k, 4 * MiB)) {
		ASSERT_EQ(c.second.size(), 2u);
		EXPECT_NE(c.second[0], c.second[1]);
		EXPECT_TRUE(c.second[0] == s2 || c.second[1] == s2);
	}
}

TEST_F(MsAdminTest, DirectoryDefaultsAreInheritedAndPersisted)
{
	add_server("a", 100000);
	uint32_t s2 = add_server("b", 100000);
	uint64_t d = mkdir_(1, "d");
	std::string v = "chunk_size=524288 stripe_count=1 stripe_index=" + std::to_string(s2);

	ASSERT_EQ(set(d, "chunk_size=524288\nstripe_count=1 stripe_index=" + std::to_string(s2) +
				 "\n"),
		  0);
	EXPECT_EQ(get(d), v);
	uint64_t f = mkfile(d, "f");
	uint64_t sub = mkdir_(d, "sub");
	uint64_t g = mkfile(sub, "g");
	EXPECT_EQ(get(f), v);
	EXPECT_EQ(get(sub), v);
	EXPECT_EQ(get(g), v);
	for (auto &c : chunks(g, 4 * MiB))
		EXPECT_EQ(c.second[0], s2);
	/* a symlink has none */
	struct ms_attr a;
	ASSERT_EQ(ms_symlink(ms, &root, d, "l", "f", &a), 0);
	EXPECT_EQ(get(a.ino), "error " + std::to_string(-ENODATA));

	/* what existed keeps its own; what is new gets the new default */
	ASSERT_EQ(set(d, "stripe_count=-1 stripe_index=-1"), 0);
	EXPECT_EQ(get(d), "chunk_size=524288 stripe_count=-1 stripe_index=-1");
	EXPECT_EQ(get(f), v);
	EXPECT_EQ(get(mkfile(d, "f2")), "chunk_size=524288 stripe_count=-1 stripe_index=-1");

	reopen();
	EXPECT_EQ(get(sub), v);
	EXPECT_EQ(get(g), v);
	/* removing it: the cluster's chunk size, all servers, the metaserver's choice */
	ASSERT_EQ(ms_removexattr(ms, &root, sub, RDFS_STRIPE_XATTR), 0);
	EXPECT_EQ(get(sub), "chunk_size=1048576 stripe_count=-1 stripe_index=-1");
	/* the root's default reads as the cluster's */
	EXPECT_EQ(get(1), "chunk_size=1048576 stripe_count=-1 stripe_index=-1");
}

TEST_F(MsAdminTest, SetstripeIsCheckedAndRefusedOnAFileWithBlocks)
{
	uint32_t s1 = add_server("a", 100000);
	uint64_t f = mkfile(1, "f");

	EXPECT_EQ(set(f, "chunk_size=5000"), -EINVAL);
	EXPECT_EQ(set(f, "chunk_size=0"), -EINVAL);
	EXPECT_EQ(set(f, "chunk_size=134217728"), -EINVAL);
	EXPECT_EQ(set(f, "stripe_count=257"), -EINVAL);
	EXPECT_EQ(set(f, "stripe_count=-2"), -EINVAL);
	EXPECT_EQ(set(f, "stripe_index=99"), -EINVAL);
	EXPECT_EQ(set(f, "stripes=2"), -EINVAL);
	EXPECT_EQ(set(f, "stripe_count"), -EINVAL);
	/* the owner or root only */
	EXPECT_EQ(set(f, "stripe_count=1", &alice), -EPERM);
	ASSERT_EQ(set(f, "chunk_size=65536 stripe_index=" + std::to_string(s1)), 0);

	chunks(f, 1 * MiB);
	EXPECT_GT(attr(f).blocks, 0u);
	EXPECT_EQ(set(f, "chunk_size=131072"), -EBUSY);
	EXPECT_EQ(set(f, "stripe_count=1"), -EBUSY);
	EXPECT_EQ(set(f, "stripe_index=-1"), -EBUSY);
	EXPECT_EQ(ms_removexattr(ms, &root, f, RDFS_STRIPE_XATTR), -EBUSY);
	/* what it is already is no change */
	EXPECT_EQ(set(f, "chunk_size=65536"), 0);
	EXPECT_EQ(get(f), "chunk_size=65536 stripe_count=-1 stripe_index=" + std::to_string(s1));
	/* truncated to nothing, it takes one again */
	struct ms_setattr sa = {};
	struct ms_attr a;
	sa.valid = MS_SET_SIZE;
	ASSERT_EQ(ms_setattr(ms, sess, &root, f, &sa, &a), 0);
	EXPECT_EQ(set(f, "chunk_size=131072"), 0);
}

TEST_F(MsAdminTest, ReadOnlyServerGetsNoNewBlocksAndKeepsItsLabel)
{
	uint32_t s1 = add_server("a", 100000), s2 = add_server("b", 100000);
	uint32_t s3 = add_server("c", 100000);
	struct ms_session *srv = ms_session_new(ms, "server");

	/* a file with blocks on every server, before */
	uint64_t old = mkfile(1, "old");
	std::set<uint32_t> used;
	for (auto &c : chunks(old, 6 * MiB))
		used.insert(c.second[0]);
	ASSERT_EQ(used.count(s2), 1u);

	EXPECT_EQ(ms_server_set(ms, sess, s2, "x", 1), -EPERM);
	EXPECT_EQ(ms_server_set(ms, srv, 99, "x", 1), -ENOENT);
	EXPECT_EQ(ms_server_set(ms, srv, s2, std::string(128, 'x').c_str(), -1), -EINVAL);
	EXPECT_EQ(ms_server_set(ms, srv, s2, "bad\nlabel", -1), -EINVAL);
	ASSERT_EQ(ms_server_set(ms, srv, s2, "rack 4, failing disk", 1), 0);
	ASSERT_EQ(ms_server_set(ms, srv, s1, "rack 1", -1), 0);

	uint64_t f = mkfile(1, "new");
	used.clear();
	for (auto &c : chunks(f, 12 * MiB))
		for (uint32_t s : c.second)
			used.insert(s);
	EXPECT_EQ(used, (std::set<uint32_t>{ s1, s3 }));
	/* even pinned to it: the next server takes the chunk */
	uint64_t g = mkfile(1, "pinned");
	ASSERT_EQ(set(g, "stripe_count=1 stripe_index=" + std::to_string(s2)), 0);
	for (auto &c : chunks(g, 2 * MiB))
		EXPECT_EQ(c.second[0], s3);
	/* what it holds stays described (readable, writable in place) */
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, old, 0, 6 * MiB, 0, 0, &l), 0);
	bool on_s2 = false;
	for (size_t i = 0; i < l.n; i++)
		on_s2 |= l.ext[i].server_id == s2;
	EXPECT_TRUE(on_s2);
	ms_layout_free(&l);

	ms_session_close(ms, srv);
	/* persisted, across the restart and the servers' registrations again */
	reopen();
	add_server("a", 100000);
	add_server("b", 100000);
	add_server("c", 100000);
	struct ms_server_info *si = nullptr;
	int n = ms_server_list(ms, &si);
	std::map<uint32_t, struct ms_server_info> by;
	for (int i = 0; i < n; i++)
		by[si[i].id] = si[i];
	free(si);
	EXPECT_EQ(std::string(by[s2].label), "rack 4, failing disk");
	EXPECT_EQ(by[s2].read_only, 1);
	EXPECT_EQ(std::string(by[s1].label), "rack 1");
	EXPECT_EQ(by[s1].read_only, 0);
	EXPECT_EQ(by[s3].label[0], '\0');
	used.clear();
	for (auto &c : chunks(mkfile(1, "after"), 6 * MiB))
		used.insert(c.second[0]);
	EXPECT_EQ(used.count(s2), 0u);

	/* off again: it takes blocks; "" clears the label */
	srv = ms_session_new(ms, "server");
	ASSERT_EQ(ms_server_set(ms, srv, s2, "", 0), 0);
	ms_session_close(ms, srv);
	used.clear();
	for (auto &c : chunks(mkfile(1, "again"), 6 * MiB))
		used.insert(c.second[0]);
	EXPECT_EQ(used.count(s2), 1u);
	si = nullptr;
	n = ms_server_list(ms, &si);
	for (int i = 0; i < n; i++)
		if (si[i].id == s2) {
			EXPECT_EQ(si[i].label[0], '\0');
		}
	free(si);
}

/* The metrics' per-server read-only gauge: 1 exactly while the server is, with its label. */
TEST_F(MsAdminTest, ReadOnlyGaugeFollowsTheServer)
{
	uint32_t s1 = add_server("a", 100000), s2 = add_server("b", 100000);
	struct ms_session *srv = ms_session_new(ms, "server");
	struct metrics *r = metrics_new();
	auto render = [&]() {
		char *out = nullptr;
		size_t len = 0;

		EXPECT_EQ(metrics_render(r, &out, &len), 0);
		std::string s(out ? out : "", len);
		free(out);
		return s;
	};
	auto series = [&](uint32_t id, const char *name, const char *label, int v) {
		return "rdfs_ms_ioserver_read_only{server=\"" + std::to_string(id) + "\",name=\"" +
		       name + "\",label=\"" + label + "\"} " + std::to_string(v) + "\n";
	};

	ASSERT_NE(r, nullptr);
	ASSERT_EQ(ms_metrics_register(ms, r), 0);
	std::string text = render();
	EXPECT_NE(text.find("# TYPE rdfs_ms_ioserver_read_only gauge\n"), std::string::npos);
	EXPECT_NE(text.find(series(s1, "a", "", 0)), std::string::npos) << text;
	EXPECT_NE(text.find(series(s2, "b", "", 0)), std::string::npos) << text;
	ASSERT_EQ(ms_server_set(ms, srv, s2, "rack \"4\"", 1), 0);
	text = render();
	EXPECT_NE(text.find(series(s1, "a", "", 0)), std::string::npos) << text;
	EXPECT_NE(text.find(series(s2, "b", "rack \\\"4\\\"", 1)), std::string::npos) << text;
	ASSERT_EQ(ms_server_set(ms, srv, s2, nullptr, 0), 0);
	text = render();
	EXPECT_NE(text.find(series(s2, "b", "rack \\\"4\\\"", 0)), std::string::npos) << text;
	ms_session_close(ms, srv);
	/* the core keeps its histograms' pointers: a new core before the registry goes */
	reopen();
	metrics_free(r);
}

TEST_F(MsAdminTest, WalkResumesAcrossBatchesInDepthFirstOrder)
{
	/* a tree: 3 directories of 40 files, a nested one, a symlink, a hard link */
	std::set<std::string> want;
	uint64_t top = mkdir_(1, "top");
	uint64_t total = 0;
	for (int d = 0; d < 3; d++) {
		std::string dn = "d" + std::to_string(d);
		uint64_t di = mkdir_(top, dn.c_str());
		want.insert(dn);
		for (int i = 0; i < 40; i++) {
			std::string fn = "f" + std::to_string(i);
			uint64_t f = mkfile(di, fn.c_str());
			setsize(f, (uint64_t)d * 1000 + i);
			total += (uint64_t)d * 1000 + i;
			want.insert(dn + "/" + fn);
		}
	}
	uint64_t deep = mkdir_(mkdir_(top, "n"), "deeper");
	uint64_t leaf = mkfile(deep, "leaf");
	setsize(leaf, 7);
	total += 7;
	want.insert("n");
	want.insert("n/deeper");
	want.insert("n/deeper/leaf");
	struct ms_attr a;
	ASSERT_EQ(ms_symlink(ms, &root, top, "sym", "n/deeper/leaf", &a), 0);
	total += a.size;
	want.insert("sym");
	ASSERT_EQ(ms_link(ms, &root, leaf, top, "hard", &a), 0);
	want.insert("hard");

	Walked w;
	ASSERT_EQ(walk(top, 7, 0, &root, &w), 0);
	EXPECT_GT(w.batches, want.size() / 7);
	std::set<std::string> got(w.paths.begin(), w.paths.end());
	EXPECT_EQ(got.size(), w.paths.size()) << "an entry came twice";
	EXPECT_EQ(got, want);
	/* depth first: a directory right before what it holds, names in order */
	std::vector<std::string> sorted(w.paths);
	std::sort(sorted.begin(), sorted.end(), [](const std::string &x, const std::string &y) {
		/* "/" sorts before any name byte within one directory's walk */
		std::string a = x, b = y;
		std::replace(a.begin(), a.end(), '/', '\x01');
		std::replace(b.begin(), b.end(), '/', '\x01');
		return a < b;
	});
	EXPECT_EQ(w.paths, sorted);
	EXPECT_EQ(w.files, 3u * 40 + 2); /* leaf is seen twice: through both links */
	EXPECT_EQ(w.dirs, 5u);
	EXPECT_EQ(w.others, 1u);

	/* the summary: sums, and the linked file listed (twice) instead of counted */
	Walked s;
	ASSERT_EQ(walk(top, 7, 1, &root, &s), 0);
	EXPECT_EQ(s.linked, (std::vector<std::string>{ "hard", "n/deeper/leaf" }));
	EXPECT_EQ(s.files, 3u * 40);
	EXPECT_EQ(s.dirs, 5u);
	EXPECT_EQ(s.bytes, w.bytes - 2 * 7);
	EXPECT_GE(w.bytes, total);

	/* a batch of one: every entry its own batch, the same walk */
	Walked one;
	ASSERT_EQ(walk(top, 1, 0, &root, &one), 0);
	EXPECT_EQ(one.paths, w.paths);

	/* the entry a cursor names goes away between batches: the walk goes on after it */
	Walked gone;
	int removed = 0;
	ASSERT_EQ(walk(top, 5, 0, &root, &gone,
		       [&](const std::string &cursor) {
			       uint64_t d1 = 0;

			       if (removed || cursor.compare(0, 3, "d1/"))
				       return;
			       ASSERT_EQ(lookup(top, "d1", &d1), 0);
			       ASSERT_EQ(ms_unlink(ms, &root, d1, cursor.c_str() + 3), 0);
			       removed = 1;
		       }),
		  0);
	EXPECT_EQ(removed, 1);
	std::set<std::string> g2(gone.paths.begin(), gone.paths.end());
	EXPECT_EQ(g2.size(), gone.paths.size()) << "an entry came twice";
	EXPECT_EQ(g2, want);
	EXPECT_EQ(gone.paths, w.paths);

	/* a file is not a start */
	struct ms_walk mw;
	EXPECT_EQ(ms_walk(ms, &root, leaf, nullptr, 0, 0, 0, &mw), -ENOTDIR);
}

TEST_F(MsAdminTest, WalkShowsOnlyWhatTheCallerCouldList)
{
	uint64_t top = mkdir_(1, "top", 0755);
	uint64_t priv = mkdir_(top, "private", 0700);
	mkfile(priv, "secret");
	mkdir_(priv, "inner");
	uint64_t pub = mkdir_(top, "public", 0755);
	mkfile(pub, "a");
	uint64_t noexec = mkdir_(top, "noexec", 0744);
	mkfile(noexec, "b");
	/* one of alice's own, which she may list */
	uint64_t mine = mkdir_(top, "mine", 0700);
	ASSERT_EQ(chown_(mine, 1000, 1000, &root), 0);
	mkfile(mine, "c", 0600);

	Walked r;
	ASSERT_EQ(walk(top, 3, 0, &root, &r), 0);
	EXPECT_EQ(r.paths.size(), 9u);
	EXPECT_TRUE(r.denied.empty());

	Walked w;
	ASSERT_EQ(walk(top, 3, 0, &alice, &w), 0);
	EXPECT_EQ(w.paths, (std::vector<std::string>{ "mine", "mine/c", "noexec", "private",
						      "public", "public/a" }));
	EXPECT_EQ(w.denied, (std::map<std::string, int>{ { "noexec", 1 }, { "private", 1 } }));

	Walked s;
	ASSERT_EQ(walk(top, 3, 1, &alice, &s), 0);
	EXPECT_EQ(s.linked, (std::vector<std::string>{ "noexec", "private" }));
	EXPECT_EQ(s.dirs, 4u);
	EXPECT_EQ(s.files, 2u);

	/* a start the caller may not list */
	struct ms_walk mw;
	EXPECT_EQ(ms_walk(ms, &alice, priv, nullptr, 0, 0, 0, &mw), -EACCES);
	EXPECT_EQ(ms_walk(ms, &root, priv, nullptr, 0, 0, 0, &mw), 0);
	EXPECT_EQ(mw.n, 2u);
	ms_walk_free(&mw);
	/* a cursor into a directory she may not list does not get her in */
	EXPECT_EQ(ms_walk(ms, &alice, top, "private/inner", 13, 0, 0, &mw), 0);
	std::vector<std::string> after;
	for (size_t i = 0; i < mw.n; i++)
		after.push_back(std::string(mw.paths + mw.e[i].path_off, mw.e[i].path_len));
	EXPECT_EQ(after, (std::vector<std::string>{ "public", "public/a" }));
	ms_walk_free(&mw);
}
