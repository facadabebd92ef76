// SPDX-License-Identifier: MIT
/*
 * ms_copies_test.cc - copies of a file's chunks: the rdfs.copies attribute
 * (inherited, persisted, checked), allocation of every copy on distinct
 * servers, COMMIT and truncate across copies, STALE marking (never the last
 * copy, never served again, fenced), and fsck on a file with copies.
 */
#include <errno.h>

#include <map>
#include <set>

#include "ms_fixture.h"
extern "C" {
#include "frame.h"
}

#define MiB (1024ull * 1024)

namespace {

int fences_seen;

void count_fence(void *arg, const uint32_t *servers, size_t n, uint64_t ino, uint32_t gen,
		 int *status)
{
	fences_seen++;
	for (size_t i = 0; i < n; i++)
		status[i] = 0;
}

}  // namespace

class MsCopiesTest : public MsTest {
protected:
	std::string get(uint64_t ino, const struct ms_cred *cr = nullptr)
	{
		void *v = nullptr;
		int n = ms_getxattr(ms, cr ? cr : &root, ino, RDFS_COPIES_XATTR, &v);

		if (n < 0)
			return "error " + std::to_string(n);
		std::string s((char *)v, n);
		free(v);
		return s;
	}

	int set(uint64_t ino, const char *v, const struct ms_cred *cr = nullptr)
	{
		return ms_setxattr(ms, cr ? cr : &root, ino, RDFS_COPIES_XATTR, v, strlen(v), 0);
	}

	int layout(uint64_t ino, uint64_t off, uint64_t len, int allocate, struct ms_layout *l)
	{
		return ms_layout(ms, sess, &root, ino, off, len, allocate, 0, l);
	}

	/* Per file block: the servers holding a copy of it in @l. */
	static std::map<uint64_t, std::set<uint32_t>> copies_of(const struct ms_layout &l)
	{
		std::map<uint64_t, std::set<uint32_t>> m;

		for (size_t i = 0; i < l.n; i++)
			for (uint64_t b = 0; b < l.ext[i].length / 4096; b++) {
				auto &s = m[l.ext[i].file_offset / 4096 + b];

				EXPECT_EQ(s.count(l.ext[i].server_id), 0u)
					<< "two copies of block on one server";
				s.insert(l.ext[i].server_id);
			}
		return m;
	}

	int truncate(uint64_t ino, uint64_t size)
	{
		struct ms_setattr sa = {};
		struct ms_attr at;

		sa.valid = MS_SET_SIZE;
		sa.size = size;
		return ms_setattr(ms, sess, &root, ino, &sa, &at);
	}

	int stale(uint64_t ino, uint32_t server, uint64_t off, uint64_t len)
	{
		struct ms_range r = { off, len };

		return ms_stale(ms, sess, &root, ino, 0, server, &r, 1);
	}
};

TEST_F(MsCopiesTest, AttributeIsInheritedCheckedAndPersisted)
{
	uint64_t d = mkdir_(1, "d");
	uint64_t before = mkfile(d, "before");

	EXPECT_EQ(get(1), "1");	/* the cluster default */
	EXPECT_EQ(set(d, "3"), 0);
	EXPECT_EQ(get(d), "3");
	uint64_t f = mkfile(d, "f");
	uint64_t sub = mkdir_(d, "sub");
	uint64_t g = mkfile(sub, "g");
	EXPECT_EQ(get(f), "3");
	EXPECT_EQ(get(sub), "3");
	EXPECT_EQ(get(g), "3");
	/* what existed before keeps its own */
	EXPECT_EQ(get(before), "1");

	/* an echo's newline is fine; anything else outside 1..8 is not */
	EXPECT_EQ(set(f, "2\n"), 0);
	EXPECT_EQ(get(f), "2");
	for (const char *bad : { "0", "9", "", "12", "x", "-1", "2 " })
		EXPECT_EQ(set(f, bad), -EINVAL) << "'" << bad << "'";
	EXPECT_EQ(ms_setxattr(ms, &root, f, RDFS_COPIES_XATTR, "2", 1, MS_XATTR_CREATE), -EEXIST);
	/* only the owner (or root) sets it; anybody reads it */
	uint64_t pub = mkdir_(1, "pub", 0777);
	uint64_t mine = mkfile(pub, "mine", 0644, &alice);
	EXPECT_EQ(set(mine, "2", &bob), -EPERM);
	EXPECT_EQ(set(mine, "2", &alice), 0);
	EXPECT_EQ(get(mine, &bob), "2");
	/* removed: back to the cluster default */
	EXPECT_EQ(ms_removexattr(ms, &alice, mine, RDFS_COPIES_XATTR), 0);
	EXPECT_EQ(get(mine), "1");
	/* not a stored xattr: listxattr does not name it */
	char **names = nullptr;
	int n = ms_listxattr(ms, &root, f, &names);
	EXPECT_EQ(n, 0);
	ms_names_free(names, n > 0 ? n : 0);

	reopen();
	EXPECT_EQ(get(d), "3");
	EXPECT_EQ(get(f), "2");
	EXPECT_EQ(get(g), "3");
}

TEST_F(MsCopiesTest, EveryChunkGetsItsCopiesOnDistinctServers)
{
	add_server("a", 100000);
	add_server("b", 100000);
	add_server("c", 100000);
	uint64_t f = mkfile(1, "f");
	ASSERT_EQ(set(f, "2"), 0);

	struct ms_layout l;
	ASSERT_EQ(layout(f, 0, 10 * MiB, 1, &l), 0);
	auto m = copies_of(l);
	EXPECT_EQ(m.size(), 10 * MiB / 4096);
	std::map<uint32_t, uint64_t> per_server;
	for (auto &b : m) {
		EXPECT_EQ(b.second.size(), 2u) << "block " << b.first;
		for (uint32_t s : b.second)
			per_server[s]++;
	}
	/* spread over all three servers, not piled on two */
	EXPECT_EQ(per_server.size(), 3u);
	/* the extents of the reply are sorted by offset (clients rely on it) */
	for (size_t i = 1; i < l.n; i++)
		EXPECT_LE(l.ext[i - 1].file_offset, l.ext[i].file_offset);
	ms_layout_free(&l);

	/* the inode's block count counts every copy */
	struct ms_attr a;
	ASSERT_EQ(ms_getattr(ms, f, &a), 0);
	EXPECT_EQ(a.blocks, 2 * 10 * MiB / 4096);

	/* 3 copies on 3 servers; 4 copies on 3 servers: 3, under-replicated, no error */
	uint64_t g = mkfile(1, "g");
	ASSERT_EQ(set(g, "4"), 0);
	ASSERT_EQ(layout(g, 0, 2 * MiB, 1, &l), 0);
	for (auto &b : copies_of(l))
		EXPECT_EQ(b.second.size(), 3u);
	ms_layout_free(&l);
}

TEST_F(MsCopiesTest, CommitTruncateAndReopenCoverEveryCopy)
{
	uint32_t a = add_server("a", 10000), b = add_server("b", 10000);
	uint64_t f = mkfile(1, "f");
	ASSERT_EQ(set(f, "2"), 0);
	struct ms_layout l;

	ASSERT_EQ(layout(f, 0, 64 * 4096, 1, &l), 0);
	ms_layout_free(&l);
	EXPECT_EQ(free_blocks(a), 10000u - 64);
	EXPECT_EQ(free_blocks(b), 10000u - 64);
	struct ms_range w = { 0, 32 * 4096 };
	struct ms_attr at;
	ASSERT_EQ(ms_commit(ms, sess, &root, f, 32 * 4096, 0, &w, 1, 0, &at), 0);
	ASSERT_EQ(layout(f, 0, 64 * 4096, 0, &l), 0);
	for (size_t i = 0; i < l.n; i++)
		EXPECT_EQ(l.ext[i].unwritten, l.ext[i].file_offset >= 32 * 4096)
			<< "server " << l.ext[i].server_id << " offset " << l.ext[i].file_offset;
	EXPECT_EQ(copies_of(l).size(), 64u);
	ms_layout_free(&l);

	reopen();
	a = add_server("a", 10000);
	b = add_server("b", 10000);
	/* the maps rebuilt from the layouts hold both copies */
	EXPECT_EQ(free_blocks(a), 10000u - 64);
	EXPECT_EQ(free_blocks(b), 10000u - 64);
	ASSERT_EQ(truncate(f, 4096), 0);
	EXPECT_EQ(free_blocks(a), 10000u - 1);
	EXPECT_EQ(free_blocks(b), 10000u - 1);
}

TEST_F(MsCopiesTest, StaleCopyIsFencedNeverServedAndNeverTheLast)
{
	uint32_t a = add_server("a", 10000), b = add_server("b", 10000);
	ms_set_fencer(ms, count_fence, nullptr);
	uint64_t f = mkfile(1, "f");
	ASSERT_EQ(set(f, "2"), 0);
	struct ms_layout l;

	ASSERT_EQ(layout(f, 0, 16 * 4096, 1, &l), 0);
	ms_layout_free(&l);
	fences_seen = 0;
	/* server a missed a write of blocks 4-7 */
	ASSERT_EQ(stale(f, a, 4 * 4096, 4 * 4096), 0);
	EXPECT_EQ(fences_seen, 1) << "capabilities naming the stale copy must be refused";
	ASSERT_EQ(layout(f, 0, 16 * 4096, 0, &l), 0);
	auto m = copies_of(l);
	for (uint64_t blk = 0; blk < 16; blk++)
		EXPECT_EQ(m[blk], (blk >= 4 && blk < 8 ? std::set<uint32_t>{ b }
						     : std::set<uint32_t>{ a, b }))
			<< "block " << blk;
	ms_layout_free(&l);
	/* rdfs layout sees it, marked */
	ASSERT_EQ(layout(f, 0, 16 * 4096, MS_LAYOUT_WITH_STALE, &l), 0);
	int stale_seen = 0;
	for (size_t i = 0; i < l.n; i++)
		if (l.ext[i].stale) {
			stale_seen++;
			EXPECT_EQ(l.ext[i].server_id, a);
			EXPECT_EQ(l.ext[i].file_offset, 4 * 4096u);
			EXPECT_EQ(l.ext[i].length, 4 * 4096u);
		}
	EXPECT_EQ(stale_seen, 1);
	ms_layout_free(&l);

	/* b holds the last current copy of 4-7: refused, and nothing changes */
	fences_seen = 0;
	EXPECT_EQ(stale(f, b, 0, 16 * 4096), -EIO);
	EXPECT_EQ(fences_seen, 0);
	ASSERT_EQ(layout(f, 0, 16 * 4096, 0, &l), 0);
	EXPECT_EQ(copies_of(l)[0], (std::set<uint32_t>{ a, b }));
	ms_layout_free(&l);
	/* twice is once; a server with no copy there changes nothing */
	EXPECT_EQ(stale(f, a, 4 * 4096, 4 * 4096), 0);
	EXPECT_EQ(stale(f, 999, 0, 4096), 0);

	/* a write allocating in a stale-only range is not possible: blocks 4-7 are held */
	ASSERT_EQ(layout(f, 0, 16 * 4096, 1, &l), 0);
	m = copies_of(l);
	EXPECT_EQ(m[5], std::set<uint32_t>{ b });
	ms_layout_free(&l);

	/* survives a restart; a truncate frees the stale blocks too */
	reopen();
	a = add_server("a", 10000);
	b = add_server("b", 10000);
	ASSERT_EQ(layout(f, 0, 16 * 4096, 0, &l), 0);
	EXPECT_EQ(copies_of(l)[5], std::set<uint32_t>{ b });
	ms_layout_free(&l);
	EXPECT_EQ(free_blocks(a), 10000u - 16);
	ASSERT_EQ(truncate(f, 0), 0);
	EXPECT_EQ(free_blocks(a), 10000u);
	EXPECT_EQ(free_blocks(b), 10000u);

	/* bad ranges and rights */
	EXPECT_EQ(stale(f, a, 0, 0), -EINVAL);
	struct ms_range r = { 0, 4096 };
	EXPECT_EQ(ms_stale(ms, sess, &bob, f, 0, a, &r, 1), -EACCES);
}

TEST_F(MsCopiesTest, FsckIsCleanWithCopiesAndStaleCopies)
{
	uint32_t a = add_server("a", 10000);
	add_server("b", 10000);
	add_server("c", 10000);
	uint64_t f = mkfile(1, "f");
	ASSERT_EQ(set(f, "3"), 0);
	struct ms_layout l;

	ASSERT_EQ(layout(f, 0, 100 * 4096, 1, &l), 0);
	ms_layout_free(&l);
	ASSERT_EQ(stale(f, a, 10 * 4096, 20 * 4096), 0);
	struct ms_session *srv = ms_session_new(ms, "server");
	struct ms_fsck_report rep;
	ASSERT_EQ(ms_fsck(ms, srv, 0, 0, 100, &rep), 0);
	EXPECT_EQ(rep.problems, 0u);
	EXPECT_EQ(rep.blocks_owned, 300u);
	ms_fsck_report_free(&rep);
	ms_session_close(ms, srv);
}
