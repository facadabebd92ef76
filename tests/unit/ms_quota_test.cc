// SPDX-License-Identifier: MIT
/*
 * ms_quota_test.cc - user, group and project quotas in the metaserver core
 * (quota.c): usage moved by create, allocation (every copy), truncate, punch,
 * unlink, chown and a project change, always equal to the sum of the inodes;
 * EDQUOT at a hard limit, at a soft one whose grace is over, at creation and
 * at chgrp, never for root; allocate-ahead granted as far as it fits; project
 * ids inherited and refused across trees (EXDEV); usage, limits and grace
 * surviving restarts and crashes, computed on a database from before quotas;
 * the usage record's format; fsck finding and repairing wrong and corrupt
 * usage records; and concurrent writers of one user never passing its limit.
 */
#include <errno.h>
#include <fcntl.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

extern "C" {
#include <leveldb/c.h>

#include "frame.h"
#include "../../metaserver/ms_keys.h"
}

#include "ms_fixture.h"

namespace {

constexpr uint64_t kBlocks = 100000;
constexpr uint64_t BLK = 4096;

}  // namespace

class QuotaTest : public MsTest {
protected:
	uint32_t sid = 0;

	void SetUp() override
	{
		MsTest::SetUp();
		sid = add_server("vol0", kBlocks);
	}

	/* The usage record of @id of @type, read as root. */
	struct ms_quota q(uint32_t type, uint32_t id)
	{
		struct ms_quota out = {};

		EXPECT_EQ(ms_quota_get(ms, sess, &root, type, id, &out), 0);
		return out;
	}

	uint64_t ublocks(uint32_t uid) { return q(MS_QUOTA_USER, uid).blocks; }
	uint64_t uinodes(uint32_t uid) { return q(MS_QUOTA_USER, uid).inodes; }

	int set_limits(uint32_t type, uint32_t id, uint64_t bsoft, uint64_t bhard, uint64_t isoft,
		       uint64_t ihard)
	{
		struct ms_quota l = {};

		l.type = type;
		l.id = id;
		l.block_soft = bsoft;
		l.block_hard = bhard;
		l.inode_soft = isoft;
		l.inode_hard = ihard;
		return ms_quota_set(ms, sess, &root, &l,
				    MS_QUOTA_SET_BLOCK_SOFT | MS_QUOTA_SET_BLOCK_HARD |
					    MS_QUOTA_SET_INODE_SOFT | MS_QUOTA_SET_INODE_HARD,
				    0);
	}

	int set_grace(uint32_t type, uint64_t seconds)
	{
		struct ms_quota l = {};

		l.type = type;
		return ms_quota_set(ms, sess, &root, &l, MS_QUOTA_SET_GRACE, seconds);
	}

	/* Allocate blocks [b0, b0 + n) of @ino as @cr; the blocks the reply describes, or -errno. */
	int64_t alloc(uint64_t ino, uint64_t b0, uint64_t n, const struct ms_cred *cr)
	{
		struct ms_layout l;
		int ret = ms_layout(ms, sess, cr, ino, b0 * BLK, n * BLK, 1, 0, &l);

		if (ret)
			return ret;
		int64_t got = (int64_t)(l.length / BLK);
		ms_layout_free(&l);
		return got;
	}

	int truncate(uint64_t ino, uint64_t size, const struct ms_cred *cr)
	{
		struct ms_setattr sa = {};
		struct ms_attr a;

		sa.valid = MS_SET_SIZE;
		sa.size = size;
		return ms_setattr(ms, sess, cr, ino, &sa, &a);
	}

	int set_project(uint64_t ino, uint32_t project, const struct ms_cred *cr)
	{
		std::string v = std::to_string(project);

		return ms_setxattr(ms, cr, ino, RDFS_PROJECT_XATTR, v.data(), v.size(), 0);
	}

	std::string project_of(uint64_t ino)
	{
		void *v = nullptr;
		int n = ms_getxattr(ms, &root, ino, RDFS_PROJECT_XATTR, &v);

		if (n < 0)
			return "error " + std::to_string(n);
		std::string s((char *)v, n);
		free(v);
		return s;
	}

	/*
	 * Every usage record against the inodes: what fsck checks, done here by
	 * walking the namespace from the root (hard links counted once).
	 */
	void expect_usage_exact(const char *what)
	{
		std::map<std::pair<uint32_t, uint32_t>, std::pair<uint64_t, uint64_t>> want;
		std::set<uint64_t> seen;
		std::function<void(uint64_t)> walk = [&](uint64_t dir) {
			for (const std::string &name : list(dir)) {
				uint64_t ino = 0;

				ASSERT_EQ(lookup(dir, name.c_str(), &ino), 0);
				if (!seen.insert(ino).second)
					continue;
				struct ms_attr a = attr(ino);
				uint32_t proj = (uint32_t)std::stoul(project_of(ino));

				want[{ MS_QUOTA_USER, a.uid }].first += a.blocks;
				want[{ MS_QUOTA_USER, a.uid }].second++;
				want[{ MS_QUOTA_GROUP, a.gid }].first += a.blocks;
				want[{ MS_QUOTA_GROUP, a.gid }].second++;
				if (proj) {
					want[{ MS_QUOTA_PROJECT, proj }].first += a.blocks;
					want[{ MS_QUOTA_PROJECT, proj }].second++;
				}
				if (S_ISDIR(a.mode))
					walk(ino);
			}
		};
		struct ms_attr r = attr(MS_ROOT_INO);

		want[{ MS_QUOTA_USER, r.uid }].second++;
		want[{ MS_QUOTA_GROUP, r.gid }].second++;
		walk(MS_ROOT_INO);
		std::map<std::pair<uint32_t, uint32_t>, std::pair<uint64_t, uint64_t>> got;
		for (uint32_t t = 0; t < MS_QUOTA_TYPES; t++) {
			struct ms_quota *all = nullptr;
			int more = 0;
			int n = ms_quota_list(ms, sess, &root, t, 0, 0, &all, &more);

			ASSERT_GE(n, 0);
			for (int i = 0; i < n; i++)
				if (all[i].blocks || all[i].inodes)
					got[{ t, all[i].id }] = { all[i].blocks, all[i].inodes };
			free(all);
		}
		EXPECT_EQ(got, want) << what;
	}

	struct ms_fsck_report fsck(int repair, std::vector<struct ms_fsck_problem> *p)
	{
		struct ms_session *s = ms_session_new(ms, "server");
		struct ms_fsck_report r = {};

		EXPECT_EQ(ms_fsck(ms, s, repair, 0, 100, &r), 0);
		if (p)
			p->assign(r.p, r.p + r.n);
		ms_fsck_report_free(&r);
		ms_session_close(ms, s);
		return r;
	}

	/* Run @fn on the database itself while the metaserver is closed. */
	void offline(const std::function<void(leveldb_t *, leveldb_writeoptions_t *)> &fn)
	{
		char *err = nullptr;

		close_db();
		leveldb_options_t *o = leveldb_options_create();
		leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
		leveldb_t *db = leveldb_open(o, dir.c_str(), &err);

		ASSERT_EQ(err, nullptr) << err;
		fn(db, wo);
		leveldb_close(db);
		leveldb_writeoptions_destroy(wo);
		leveldb_options_destroy(o);
		open_db();
		EXPECT_EQ(add_server("vol0", kBlocks), sid);
	}
};

/* ------------------------------------------------------------ what counts */

TEST_F(QuotaTest, CreateAllocateTruncatePunchAndUnlinkMoveUsage)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);

	EXPECT_EQ(uinodes(alice.uid), 1u);
	EXPECT_EQ(q(MS_QUOTA_GROUP, alice.gid).inodes, 1u);
	EXPECT_EQ(ublocks(alice.uid), 0u);

	EXPECT_EQ(alloc(f, 0, 40, &alice), 40);
	EXPECT_EQ(ublocks(alice.uid), 40u);
	EXPECT_EQ(q(MS_QUOTA_GROUP, alice.gid).blocks, 40u);
	EXPECT_EQ(attr(f).blocks, 40u);

	/* allocating what is there costs nothing */
	EXPECT_EQ(alloc(f, 10, 20, &alice), 20);
	EXPECT_EQ(ublocks(alice.uid), 40u);

	ASSERT_EQ(truncate(f, 25 * BLK, &alice), 0);
	EXPECT_EQ(ublocks(alice.uid), 25u);

	struct ms_attr a;
	ASSERT_EQ(ms_punch(ms, sess, &alice, f, 5 * BLK, 10 * BLK, 0, &a), 0);
	EXPECT_EQ(ublocks(alice.uid), 15u);
	expect_usage_exact("after the punch");

	uint64_t l = 0;
	ASSERT_EQ(ms_symlink(ms, &alice, d, "l", "f", &a), 0);
	l = a.ino;
	EXPECT_NE(l, 0u);
	ASSERT_EQ(ms_mkdir(ms, &alice, d, "sub", 0755, 0, &a), 0);
	EXPECT_EQ(uinodes(alice.uid), 3u);

	/* a hard link is one inode, counted once */
	ASSERT_EQ(ms_link(ms, &alice, f, d, "f2", &a), 0);
	EXPECT_EQ(uinodes(alice.uid), 3u);
	ASSERT_EQ(ms_unlink(ms, &alice, d, "f"), 0);
	EXPECT_EQ(ublocks(alice.uid), 15u) << "the other link keeps it";
	ASSERT_EQ(ms_unlink(ms, &alice, d, "f2"), 0);
	EXPECT_EQ(ublocks(alice.uid), 0u);
	EXPECT_EQ(uinodes(alice.uid), 2u);
	ASSERT_EQ(ms_unlink(ms, &alice, d, "l"), 0);
	ASSERT_EQ(ms_rmdir(ms, &alice, d, "sub"), 0);
	/* no usage, no limits: no record */
	struct ms_quota *all = nullptr;
	int more = 0;
	int n = ms_quota_list(ms, sess, &root, MS_QUOTA_USER, alice.uid, 1, &all, &more);
	ASSERT_GE(n, 0);
	EXPECT_TRUE(n == 0 || all[0].id != alice.uid) << "alice's record outlived her inodes";
	free(all);
	expect_usage_exact("at the end");
}

TEST_F(QuotaTest, AnUnlinkedOpenFileCountsUntilItsLastClose)
{
	struct ms_attr a;
	uint64_t h = 0;
	uint64_t d = mkdir_(1, "d", 0777);
	ASSERT_EQ(ms_mknod(ms, sess, &alice, d, "f", S_IFREG | 0644, 0, 0, 1, 1, O_RDWR, &a, &h),
		  0);
	EXPECT_EQ(alloc(a.ino, 0, 8, &alice), 8);
	ASSERT_EQ(ms_unlink(ms, &alice, d, "f"), 0);
	EXPECT_EQ(ublocks(alice.uid), 8u);
	EXPECT_EQ(uinodes(alice.uid), 1u);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	EXPECT_EQ(ublocks(alice.uid), 0u);
	EXPECT_EQ(uinodes(alice.uid), 0u);
}

TEST_F(QuotaTest, EveryCopyCounts)
{
	add_server("vol1", kBlocks);
	uint64_t d = mkdir_(1, "d", 0777);
	ASSERT_EQ(ms_setxattr(ms, &root, d, RDFS_COPIES_XATTR, "2", 1, 0), 0);
	uint64_t f = mkfile(d, "f", 0644, &alice);

	EXPECT_EQ(alloc(f, 0, 30, &alice), 30);
	EXPECT_EQ(attr(f).blocks, 60u);
	EXPECT_EQ(ublocks(alice.uid), 60u);

	/* a hard limit of 70 leaves room for 5 more blocks of two copies, not 10 */
	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 0, 70, 0, 0), 0);
	EXPECT_EQ(alloc(f, 30, 20, &alice), 5);
	EXPECT_EQ(ublocks(alice.uid), 70u);
	EXPECT_EQ(alloc(f, 35, 1, &alice), -EDQUOT);
	expect_usage_exact("copies");
}

static int copy_ok(void *, uint64_t, uint32_t, uint32_t, uint64_t, uint32_t, uint64_t, uint64_t)
{
	return 0;
}

TEST_F(QuotaTest, TheRebuilderAddingAndDroppingCopiesMovesUsage)
{
	add_server("vol1", kBlocks);
	ms_set_copier(ms, copy_ok, nullptr);
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	struct ms_range w = { 0, 10 * BLK };
	struct ms_attr at;

	EXPECT_EQ(alloc(f, 0, 10, &alice), 10);
	ASSERT_EQ(ms_commit(ms, sess, &alice, f, 10 * BLK, 0, &w, 1, 0, &at), 0);
	/* limits do not stop the rebuilder: a copy it makes counts all the same */
	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 0, 12, 0, 0), 0);
	ASSERT_EQ(ms_setxattr(ms, &alice, f, RDFS_COPIES_XATTR, "2", 1, 0), 0);
	struct ms_rebuild_stats st;
	ASSERT_EQ(ms_rebuild_pass(ms, 100, &st), 0);
	EXPECT_EQ(st.chunks_rebuilt, 1u);
	EXPECT_EQ(attr(f).blocks, 20u);
	EXPECT_EQ(ublocks(alice.uid), 20u);
	EXPECT_EQ(q(MS_QUOTA_GROUP, alice.gid).blocks, 20u);
	ASSERT_EQ(ms_setxattr(ms, &alice, f, RDFS_COPIES_XATTR, "1", 1, 0), 0);
	ASSERT_EQ(ms_rebuild_pass(ms, 100, &st), 0);
	EXPECT_EQ(st.copies_dropped, 1u);
	EXPECT_EQ(ublocks(alice.uid), 10u);
	expect_usage_exact("after the rebuilds");
	std::vector<struct ms_fsck_problem> p;
	EXPECT_EQ(fsck(0, &p).problems, 0u);
}

TEST_F(QuotaTest, ChownAndChgrpMoveUsage)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);

	EXPECT_EQ(alloc(f, 0, 12, &alice), 12);
	ASSERT_EQ(chown_(f, bob.uid, -1, &root), 0);
	EXPECT_EQ(ublocks(alice.uid), 0u);
	EXPECT_EQ(uinodes(alice.uid), 0u);
	EXPECT_EQ(ublocks(bob.uid), 12u);
	EXPECT_EQ(uinodes(bob.uid), 1u);
	EXPECT_EQ(q(MS_QUOTA_GROUP, alice.gid).blocks, 12u) << "the group did not change";

	ASSERT_EQ(chown_(f, alice.uid, -1, &root), 0);
	/* alice moves it to a group of hers, which has room for 10 blocks only */
	ASSERT_EQ(set_limits(MS_QUOTA_GROUP, 101, 0, 10, 0, 0), 0);
	EXPECT_EQ(chown_(f, -1, 101, &alice), -EDQUOT);
	EXPECT_EQ(attr(f).gid, alice.gid);
	EXPECT_EQ(q(MS_QUOTA_GROUP, 101).blocks, 0u);
	ASSERT_EQ(set_limits(MS_QUOTA_GROUP, 101, 0, 12, 0, 0), 0);
	ASSERT_EQ(chown_(f, -1, 101, &alice), 0);
	EXPECT_EQ(q(MS_QUOTA_GROUP, 101).blocks, 12u);
	EXPECT_EQ(q(MS_QUOTA_GROUP, alice.gid).blocks, 0u);

	/* root moves usage past any limit (CAP_SYS_RESOURCE): it still counts */
	ASSERT_EQ(set_limits(MS_QUOTA_USER, bob.uid, 0, 1, 0, 1), 0);
	ASSERT_EQ(chown_(f, bob.uid, bob.gid, &root), 0);
	EXPECT_EQ(ublocks(bob.uid), 12u);
	EXPECT_EQ(q(MS_QUOTA_GROUP, bob.gid).blocks, 12u);
	expect_usage_exact("after the chowns");
}

/* ------------------------------------------------------------ limits */

TEST_F(QuotaTest, HardBlockLimitGrantsWhatFitsThenRefuses)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	uint64_t g = mkfile(d, "g", 0644, &alice);

	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 0, 20, 0, 0), 0);
	EXPECT_EQ(alloc(f, 0, 16, &alice), 16);
	/* allocate-ahead: asked 10, 4 fit; the reply says so, no error */
	EXPECT_EQ(alloc(g, 0, 10, &alice), 4);
	EXPECT_EQ(attr(g).blocks, 4u);
	EXPECT_EQ(ublocks(alice.uid), 20u);
	EXPECT_EQ(alloc(g, 4, 1, &alice), -EDQUOT);
	EXPECT_EQ(alloc(f, 100, 1, &alice), -EDQUOT);
	/* what is allocated already is described, and nothing more */
	EXPECT_EQ(alloc(g, 0, 10, &alice), 4);
	/* describing is no allocation */
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &alice, g, 0, 40 * BLK, 0, 0, &l), 0);
	ms_layout_free(&l);
	/* the group has no limit, the user one: the user's binds */
	EXPECT_EQ(q(MS_QUOTA_GROUP, alice.gid).blocks, 20u);
	/* freeing makes room again: nothing stays reserved by the refusals */
	ASSERT_EQ(truncate(f, 6 * BLK, &alice), 0);
	EXPECT_EQ(alloc(g, 4, 100, &alice), 10);
	EXPECT_EQ(ublocks(alice.uid), 20u);
	expect_usage_exact("at the limit");
}

/* Cut short chunks before the range's end: the chunks past the cut are left alone. */
TEST_F(QuotaTest, ALimitCuttingAManyChunkAllocationGrantsWhatFits)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	const uint64_t cpb = MS_DEFAULT_CHUNK / BLK;

	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 0, cpb + 44, 0, 0), 0);
	EXPECT_EQ(alloc(f, 0, 4 * cpb, &alice), (int64_t)(cpb + 44));
	EXPECT_EQ(attr(f).blocks, cpb + 44);
	EXPECT_EQ(alloc(f, cpb + 44, 2 * cpb, &alice), -EDQUOT);
	expect_usage_exact("cut inside the second of four chunks");
}

TEST_F(QuotaTest, RootIsNeverRefusedButCounts)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0666, &alice);

	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 0, 8, 0, 1), 0);
	/* root writes into alice's file: her blocks, past her limit */
	EXPECT_EQ(alloc(f, 0, 30, &root), 30);
	EXPECT_EQ(ublocks(alice.uid), 30u);
	EXPECT_EQ(alloc(f, 30, 1, &alice), -EDQUOT);
	/* and creates in her name (a chown after): counted too */
	uint64_t g = mkfile(d, "g", 0644, &root);
	ASSERT_EQ(chown_(g, alice.uid, -1, &root), 0);
	EXPECT_EQ(uinodes(alice.uid), 2u);
	struct ms_attr a;
	EXPECT_EQ(ms_mknod(ms, sess, &alice, d, "h", S_IFREG | 0644, 0, 0, 1, 0, 0, &a, nullptr),
		  -EDQUOT);
}

TEST_F(QuotaTest, SoftLimitRefusesOnceItsGraceIsOver)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	uint64_t g = mkfile(d, "g", 0644, &bob);

	/* a day of grace: over the soft limit, up to the hard one */
	ASSERT_EQ(set_grace(MS_QUOTA_USER, 86400), 0);
	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 10, 30, 0, 0), 0);
	EXPECT_EQ(alloc(f, 0, 8, &alice), 8);
	EXPECT_EQ(q(MS_QUOTA_USER, alice.uid).block_grace_ns, 0);
	EXPECT_EQ(alloc(f, 8, 8, &alice), 8);
	struct ms_quota qa = q(MS_QUOTA_USER, alice.uid);
	int64_t now = (int64_t)time(nullptr) * 1000000000ll;
	EXPECT_GT(qa.block_grace_ns, now + 86000ll * 1000000000ll);
	EXPECT_LT(qa.block_grace_ns, now + 86500ll * 1000000000ll);
	EXPECT_EQ(alloc(f, 16, 100, &alice), 14);
	EXPECT_EQ(alloc(f, 30, 1, &alice), -EDQUOT);
	/* back under the soft limit: the grace stops */
	ASSERT_EQ(truncate(f, 5 * BLK, &alice), 0);
	EXPECT_EQ(q(MS_QUOTA_USER, alice.uid).block_grace_ns, 0);

	/* no grace: over the soft limit, the soft limit is the hard one at once */
	ASSERT_EQ(set_grace(MS_QUOTA_USER, 0), 0);
	EXPECT_EQ(ms_quota_grace(ms, MS_QUOTA_USER), 0u);
	ASSERT_EQ(set_limits(MS_QUOTA_USER, bob.uid, 10, 100, 0, 0), 0);
	EXPECT_EQ(alloc(g, 0, 12, &bob), 12) << "crossing the soft limit starts the grace";
	EXPECT_NE(q(MS_QUOTA_USER, bob.uid).block_grace_ns, 0);
	EXPECT_EQ(alloc(g, 12, 1, &bob), -EDQUOT) << "and it is over at once";

	/* a soft limit set below the usage starts the grace now */
	ASSERT_EQ(set_grace(MS_QUOTA_USER, 3600), 0);
	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 2, 0, 0, 0), 0);
	qa = q(MS_QUOTA_USER, alice.uid);
	EXPECT_GT(qa.block_grace_ns, now + 3000ll * 1000000000ll);
	EXPECT_EQ(alloc(f, 5, 3, &alice), 3) << "within the grace";
}

TEST_F(QuotaTest, InodeLimitRefusesEveryKindOfCreate)
{
	uint64_t d = mkdir_(1, "d", 0777);
	struct ms_attr a;

	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 0, 0, 0, 3), 0);
	mkfile(d, "f1", 0644, &alice);
	ASSERT_EQ(ms_mkdir(ms, &alice, d, "sub", 0755, 0, &a), 0);
	ASSERT_EQ(ms_symlink(ms, &alice, d, "l", "f1", &a), 0);
	EXPECT_EQ(ms_mknod(ms, sess, &alice, d, "f2", S_IFREG | 0644, 0, 0, 1, 0, 0, &a, nullptr),
		  -EDQUOT);
	EXPECT_EQ(ms_mkdir(ms, &alice, d, "sub2", 0755, 0, &a), -EDQUOT);
	EXPECT_EQ(ms_symlink(ms, &alice, d, "l2", "f1", &a), -EDQUOT);
	uint64_t h = 0;
	EXPECT_EQ(ms_mknod(ms, sess, &alice, d, "f3", S_IFREG | 0644, 0, 0, 1, 1, O_RDWR, &a, &h),
		  -EDQUOT);
	EXPECT_EQ(lookup(d, "f2"), -ENOENT);
	/* open(O_CREAT) of a name that exists creates nothing: no limit in the way */
	ASSERT_EQ(ms_mknod(ms, sess, &alice, d, "f1", S_IFREG | 0644, 0, 0, 0, 1, O_RDWR, &a, &h),
		  0);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	EXPECT_EQ(uinodes(alice.uid), 3u);
	/* a hard link is no new inode */
	EXPECT_EQ(ms_link(ms, &alice, a.ino, d, "f1-link", &a), 0);
	/* a group's limit binds its members the same way */
	ASSERT_EQ(ms_unlink(ms, &alice, d, "l"), 0);
	ASSERT_EQ(set_limits(MS_QUOTA_GROUP, alice.gid, 0, 0, 2, 2), 0);
	EXPECT_EQ(ms_symlink(ms, &alice, d, "l", "f1", &a), -EDQUOT);
	EXPECT_EQ(ms_symlink(ms, &bob, d, "lb", "f1", &a), 0) << "bob is in no limited group";
	expect_usage_exact("inode limits");
}

/* ------------------------------------------------------------ projects */

TEST_F(QuotaTest, ProjectIdsAreInheritedAndCounted)
{
	uint64_t top = mkdir_(1, "proj", 0777);

	EXPECT_EQ(project_of(top), "0");
	EXPECT_EQ(set_project(top, 42, &alice), -EPERM) << "only root sets a project";
	ASSERT_EQ(set_project(top, 42, &root), 0);
	EXPECT_EQ(project_of(top), "42");
	EXPECT_EQ(q(MS_QUOTA_PROJECT, 42).inodes, 1u);

	uint64_t f = mkfile(top, "f", 0644, &alice);
	uint64_t sub = mkdir_(top, "sub", 0777, &bob);
	uint64_t g = mkfile(sub, "g", 0644, &bob);
	EXPECT_EQ(project_of(f), "42");
	EXPECT_EQ(project_of(sub), "42");
	EXPECT_EQ(project_of(g), "42") << "a subdirectory passes the id on too";
	EXPECT_EQ(alloc(f, 0, 10, &alice), 10);
	EXPECT_EQ(alloc(g, 0, 5, &bob), 5);
	struct ms_quota p = q(MS_QUOTA_PROJECT, 42);
	EXPECT_EQ(p.blocks, 15u);
	EXPECT_EQ(p.inodes, 4u);

	/* the project's limit binds whoever writes there */
	ASSERT_EQ(set_limits(MS_QUOTA_PROJECT, 42, 0, 20, 0, 5), 0);
	EXPECT_EQ(alloc(g, 5, 10, &bob), 5);
	EXPECT_EQ(alloc(f, 10, 1, &alice), -EDQUOT);
	mkfile(top, "h", 0644, &alice);
	struct ms_attr a;
	EXPECT_EQ(ms_mknod(ms, sess, &alice, top, "i", S_IFREG | 0644, 0, 0, 1, 0, 0, &a, nullptr),
		  -EDQUOT);
	/* outside the tree, no project: no limit, not counted */
	uint64_t out = mkdir_(1, "out", 0777);
	uint64_t o = mkfile(out, "o", 0644, &alice);
	EXPECT_EQ(alloc(o, 0, 50, &alice), 50);
	EXPECT_EQ(project_of(o), "0");
	EXPECT_EQ(q(MS_QUOTA_PROJECT, 0).inodes, 0u);

	/* a file's id moves its usage (root's to set); removing the xattr is project 0 */
	ASSERT_EQ(set_project(o, 7, &root), 0);
	EXPECT_EQ(q(MS_QUOTA_PROJECT, 7).blocks, 50u);
	ASSERT_EQ(ms_removexattr(ms, &root, o, RDFS_PROJECT_XATTR), 0);
	EXPECT_EQ(q(MS_QUOTA_PROJECT, 7).blocks, 0u);
	EXPECT_EQ(project_of(o), "0");
	EXPECT_EQ(ms_setxattr(ms, &root, o, RDFS_PROJECT_XATTR, "x", 1, 0), -EINVAL);
	EXPECT_EQ(ms_setxattr(ms, &root, o, RDFS_PROJECT_XATTR, "4294967295", 10, 0), -EINVAL);
	expect_usage_exact("projects");

	/* the id and the mark survive a restart */
	reopen();
	EXPECT_EQ(project_of(g), "42");
	uint64_t k = mkfile(sub, "k", 0644, &root);
	EXPECT_EQ(project_of(k), "42");
	EXPECT_EQ(q(MS_QUOTA_PROJECT, 42).inodes, 6u) << "proj, f, sub, g, h and k";
}

TEST_F(QuotaTest, RenameIntoAnotherProjectTreeIsEXDEV)
{
	uint64_t a_top = mkdir_(1, "a", 0777), b_top = mkdir_(1, "b", 0777);
	uint64_t plain = mkdir_(1, "plain", 0777);

	ASSERT_EQ(set_project(a_top, 1, &root), 0);
	ASSERT_EQ(set_project(b_top, 2, &root), 0);
	uint64_t f = mkfile(a_top, "f", 0644, &alice);
	uint64_t sub = mkdir_(a_top, "sub", 0777, &alice);
	uint64_t p = mkfile(plain, "p", 0644, &alice);
	EXPECT_EQ(alloc(f, 0, 3, &alice), 3);

	EXPECT_EQ(ms_rename(ms, &alice, a_top, "f", b_top, "f", 0), -EXDEV);
	EXPECT_EQ(ms_rename(ms, &alice, a_top, "sub", b_top, "sub", 0), -EXDEV);
	EXPECT_EQ(ms_rename(ms, &alice, plain, "p", a_top, "p", 0), -EXDEV)
		<< "project 0 into a project tree";
	uint64_t bf = mkfile(b_top, "bf", 0644, &alice);
	EXPECT_EQ(ms_rename(ms, &alice, a_top, "f", b_top, "bf", MS_RENAME_EXCHANGE), -EXDEV);
	struct ms_attr at;
	EXPECT_EQ(ms_link(ms, &alice, f, b_top, "lnk", &at), -EXDEV);
	EXPECT_EQ(q(MS_QUOTA_PROJECT, 1).blocks, 3u);
	EXPECT_EQ(q(MS_QUOTA_PROJECT, 2).inodes, 2u);

	/* within the tree, and out of it into a directory without the mark: allowed, id kept */
	ASSERT_EQ(ms_rename(ms, &alice, a_top, "f", sub, "f", 0), 0);
	ASSERT_EQ(ms_rename(ms, &alice, sub, "f", plain, "f", 0), 0);
	EXPECT_EQ(project_of(f), "1");
	EXPECT_EQ(q(MS_QUOTA_PROJECT, 1).blocks, 3u) << "what leaves the tree keeps its id";
	/* and in again: its id is the tree's */
	ASSERT_EQ(ms_rename(ms, &alice, plain, "f", a_top, "f", 0), 0);
	(void)p;
	(void)bf;
	expect_usage_exact("renames");
}

/* ------------------------------------------------------------ persistence */

TEST_F(QuotaTest, UsageLimitsAndGraceSurviveRestartAndCrash)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);

	ASSERT_EQ(set_grace(MS_QUOTA_GROUP, 1234), 0);
	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 10, 20, 5, 6), 0);
	EXPECT_EQ(alloc(f, 0, 12, &alice), 12);
	struct ms_quota before = q(MS_QUOTA_USER, alice.uid);
	EXPECT_NE(before.block_grace_ns, 0);

	reopen();
	EXPECT_EQ(add_server("vol0", kBlocks), sid);
	struct ms_quota after = q(MS_QUOTA_USER, alice.uid);
	EXPECT_EQ(std::tie(after.blocks, after.inodes, after.block_soft, after.block_hard,
			   after.inode_soft, after.inode_hard, after.block_grace_ns),
		  std::tie(before.blocks, before.inodes, before.block_soft, before.block_hard,
			   before.inode_soft, before.inode_hard, before.block_grace_ns));
	EXPECT_EQ(ms_quota_grace(ms, MS_QUOTA_GROUP), 1234u);
	EXPECT_EQ(ms_quota_grace(ms, MS_QUOTA_USER), (uint64_t)MS_QUOTA_GRACE_DEFAULT_S);

	/* a crash with an unlinked file open: reclaimed at startup, and its usage with it */
	struct ms_attr a;
	uint64_t h = 0;
	ASSERT_EQ(ms_mknod(ms, sess, &alice, d, "tmp", S_IFREG | 0644, 0, 0, 1, 1, O_RDWR, &a, &h),
		  0);
	EXPECT_EQ(alloc(a.ino, 0, 5, &alice), 5);
	ASSERT_EQ(ms_unlink(ms, &alice, d, "tmp"), 0);
	EXPECT_EQ(ublocks(alice.uid), 17u);
	crash_reopen();
	EXPECT_EQ(add_server("vol0", kBlocks), sid);
	EXPECT_EQ(ublocks(alice.uid), 12u);
	EXPECT_EQ(uinodes(alice.uid), 1u);
	EXPECT_EQ(alloc(f, 12, 100, &alice), 8);
	std::vector<struct ms_fsck_problem> p;
	EXPECT_EQ(fsck(0, &p).problems, 0u);
}

TEST_F(QuotaTest, ADatabaseFromBeforeQuotasGetsItsUsageComputed)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	uint64_t g = mkfile(d, "g", 0644, &bob);

	EXPECT_EQ(alloc(f, 0, 9, &alice), 9);
	EXPECT_EQ(alloc(g, 0, 4, &bob), 4);
	/* what an older metaserver leaves: no usage records, no marker */
	offline([&](leveldb_t *db, leveldb_writeoptions_t *wo) {
		leveldb_readoptions_t *ro = leveldb_readoptions_create();
		leveldb_iterator_t *it = leveldb_create_iterator(db, ro);
		leveldb_writebatch_t *b = leveldb_writebatch_create();
		const char fmt[] = { 'F', 'q', 'u', 'o', 't', 'a' };
		char *err = nullptr;
		int n = 0;

		for (leveldb_iter_seek(it, "Q", 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
			size_t kl;
			const char *k = leveldb_iter_key(it, &kl);

			if (k[0] != 'Q')
				break;
			leveldb_writebatch_delete(b, k, kl);
			n++;
		}
		EXPECT_GE(n, 4);
		leveldb_writebatch_delete(b, fmt, sizeof(fmt));
		leveldb_write(db, wo, b, &err);
		EXPECT_EQ(err, nullptr);
		leveldb_writebatch_destroy(b);
		leveldb_iter_destroy(it);
		leveldb_readoptions_destroy(ro);
	});
	EXPECT_EQ(ublocks(alice.uid), 9u);
	EXPECT_EQ(ublocks(bob.uid), 4u);
	EXPECT_EQ(uinodes(root.uid), 2u);
	expect_usage_exact("computed");
	std::vector<struct ms_fsck_problem> p;
	EXPECT_EQ(fsck(0, &p).problems, 0u);
}

TEST_F(QuotaTest, UsageRecordAndInodeRecordRoundTrip)
{
	struct ms_quota a = {}, b = {};
	uint8_t v[MS_QUOTA_REC];

	a.blocks = 1ull << 40;
	a.inodes = 12345;
	a.block_soft = 1;
	a.block_hard = 2;
	a.inode_soft = 3;
	a.inode_hard = UINT64_MAX;
	a.block_grace_ns = INT64_MAX;
	a.inode_grace_ns = -1;
	quota_encode(&a, v);
	EXPECT_EQ(v[0], 1);
	ASSERT_EQ(quota_decode(v, sizeof(v), &b), 0);
	EXPECT_EQ(std::tie(b.blocks, b.inodes, b.block_soft, b.block_hard, b.inode_soft,
			   b.inode_hard, b.block_grace_ns, b.inode_grace_ns),
		  std::tie(a.blocks, a.inodes, a.block_soft, a.block_hard, a.inode_soft,
			   a.inode_hard, a.block_grace_ns, a.inode_grace_ns));
	EXPECT_EQ(quota_decode(v, sizeof(v) - 1, &b), -EIO);
	v[0] = 2;
	EXPECT_EQ(quota_decode(v, sizeof(v), &b), -EIO);

	/* an inode with a project is a version 4 record; without, as before */
	std::unique_ptr<struct ms_inode> in(new struct ms_inode()), out(new struct ms_inode());
	std::vector<uint8_t> buf(MS_INODE_MAX);
	in->mode = S_IFLNK | 0777;
	in->uid = 5;
	in->project = 0xfffffffe;
	in->flags = MS_INO_PROJINHERIT;
	in->target_len = 4095;
	memset(in->target, 'x', 4095);
	size_t n = inode_encode(in.get(), buf.data());
	ASSERT_EQ(n, (size_t)MS_INODE_FIXED_V4 + 4095);
	EXPECT_EQ(buf[0], 4);
	ASSERT_EQ(inode_decode(9, buf.data(), n, out.get()), 0);
	EXPECT_EQ(out->project, 0xfffffffeu);
	EXPECT_EQ(out->flags, MS_INO_PROJINHERIT);
	EXPECT_EQ(out->target_len, 4095u);
	EXPECT_EQ(out->charge.project, 0xfffffffeu);
	EXPECT_EQ(out->charge.counted, 1);
	in->project = 0;
	in->flags = 0;
	n = inode_encode(in.get(), buf.data());
	EXPECT_EQ(buf[0], 2);
	ASSERT_EQ(inode_decode(9, buf.data(), n, out.get()), 0);
	EXPECT_EQ(out->project, 0u);
}

/* ------------------------------------------------------------ who may */

TEST_F(QuotaTest, UsersSeeTheirOwnQuotasOnlyRootSetsAndLists)
{
	struct ms_quota out, l = {};
	struct ms_quota *all = nullptr;
	int more;

	EXPECT_EQ(ms_quota_get(ms, sess, &alice, MS_QUOTA_USER, alice.uid, &out), 0);
	EXPECT_EQ(ms_quota_get(ms, sess, &alice, MS_QUOTA_GROUP, alice.gid, &out), 0);
	EXPECT_EQ(ms_quota_get(ms, sess, &alice, MS_QUOTA_GROUP, 101, &out), 0);
	EXPECT_EQ(ms_quota_get(ms, sess, &alice, MS_QUOTA_USER, bob.uid, &out), -EPERM);
	EXPECT_EQ(ms_quota_get(ms, sess, &alice, MS_QUOTA_GROUP, bob.gid, &out), -EPERM);
	EXPECT_EQ(ms_quota_get(ms, sess, &alice, MS_QUOTA_PROJECT, 1, &out), -EPERM);
	EXPECT_EQ(ms_quota_get(ms, sess, &alice, 3, alice.uid, &out), -EINVAL);
	l.type = MS_QUOTA_USER;
	l.id = alice.uid;
	l.block_hard = 1000;
	EXPECT_EQ(ms_quota_set(ms, sess, &alice, &l, MS_QUOTA_SET_BLOCK_HARD, 0), -EPERM);
	EXPECT_EQ(ms_quota_list(ms, sess, &alice, MS_QUOTA_USER, 0, 0, &all, &more), -EPERM);
	/* a server session is the administrator whatever its credentials say */
	struct ms_session *srv = ms_session_new(ms, "server");
	EXPECT_EQ(ms_quota_set(ms, srv, &alice, &l, MS_QUOTA_SET_BLOCK_HARD, 0), 0);
	EXPECT_EQ(l.block_hard, 1000u);
	EXPECT_EQ(ms_quota_get(ms, srv, &bob, MS_QUOTA_USER, alice.uid, &out), 0);
	EXPECT_EQ(out.block_hard, 1000u);
	ms_session_close(ms, srv);
	/* only what is named changes */
	l.block_hard = 0;
	l.inode_hard = 9;
	ASSERT_EQ(ms_quota_set(ms, sess, &root, &l, MS_QUOTA_SET_INODE_HARD, 0), 0);
	EXPECT_EQ(l.block_hard, 1000u);
	EXPECT_EQ(l.inode_hard, 9u);
	EXPECT_EQ(ms_quota_set(ms, sess, &root, &l, 0x200, 0), -EINVAL);
	l.type = MS_QUOTA_PROJECT;
	l.id = 0;
	EXPECT_EQ(ms_quota_set(ms, sess, &root, &l, MS_QUOTA_SET_BLOCK_HARD, 0), -EINVAL)
		<< "project 0 is no project";
	EXPECT_EQ(ms_quota_set(ms, sess, &root, &l, MS_QUOTA_SET_GRACE, 11ull * 366 * 86400),
		  -EINVAL);
}

TEST_F(QuotaTest, ListPagesByIdWithLimitsOrUsage)
{
	uint64_t d = mkdir_(1, "d", 0777);

	for (uint32_t u = 5000; u < 5010; u++) {
		struct ms_cred c = { u, 7, 0, nullptr };

		mkfile(d, ("f" + std::to_string(u)).c_str(), 0644, &c);
	}
	ASSERT_EQ(set_limits(MS_QUOTA_USER, 9999, 0, 5, 0, 0), 0);
	struct ms_quota *all = nullptr;
	int more = 0;
	int n = ms_quota_list(ms, sess, &root, MS_QUOTA_USER, 5003, 4, &all, &more);
	ASSERT_EQ(n, 4);
	EXPECT_EQ(more, 1);
	EXPECT_EQ(all[0].id, 5003u);
	EXPECT_EQ(all[3].id, 5006u);
	free(all);
	n = ms_quota_list(ms, sess, &root, MS_QUOTA_USER, 5007, 0, &all, &more);
	ASSERT_EQ(n, 4);
	EXPECT_EQ(more, 0);
	EXPECT_EQ(all[3].id, 9999u);
	EXPECT_EQ(all[3].inodes, 0u);
	EXPECT_EQ(all[3].block_hard, 5u);
	free(all);
}

/* ------------------------------------------------------------ fsck */

TEST_F(QuotaTest, FsckFindsAndRepairsAWrongAndACorruptUsageRecord)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	uint64_t g = mkfile(d, "g", 0644, &bob);

	EXPECT_EQ(alloc(f, 0, 11, &alice), 11);
	EXPECT_EQ(alloc(g, 0, 3, &bob), 3);
	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 0, 500, 0, 0), 0);
	std::vector<struct ms_fsck_problem> p;
	ASSERT_EQ(fsck(0, &p).problems, 0u);

	/* alice's record says 999 blocks and 4 inodes; bob's is garbage */
	offline([&](leveldb_t *db, leveldb_writeoptions_t *wo) {
		uint8_t k[MS_KEY_MAX], v[MS_QUOTA_REC];
		struct ms_quota bad = {};
		char *err = nullptr;

		bad.blocks = 999;
		bad.inodes = 4;
		bad.block_hard = 500;
		quota_encode(&bad, v);
		leveldb_put(db, wo, (char *)k, key_quota(k, MS_QUOTA_USER, alice.uid), (char *)v,
			    sizeof(v), &err);
		EXPECT_EQ(err, nullptr);
		leveldb_put(db, wo, (char *)k, key_quota(k, MS_QUOTA_USER, bob.uid), "junk", 4,
			    &err);
		EXPECT_EQ(err, nullptr);
	});
	EXPECT_EQ(ublocks(alice.uid), 999u);
	EXPECT_EQ(alloc(f, 11, 1, &alice), -EDQUOT) << "the wrong usage binds until repaired";
	EXPECT_EQ(ublocks(bob.uid), 0u) << "a corrupt record counts from zero";

	struct ms_fsck_report r = fsck(0, &p);
	EXPECT_EQ(r.counts[MS_FSCK_QUOTA_BLOCKS], 2u);
	EXPECT_EQ(r.counts[MS_FSCK_QUOTA_INODES], 2u);
	EXPECT_EQ(r.counts[MS_FSCK_QUOTA_CORRUPT], 1u);
	EXPECT_EQ(r.repaired, 0u);
	bool seen_alice = false;
	for (const auto &x : p) {
		if (x.kind == MS_FSCK_QUOTA_BLOCKS && x.ino == alice.uid) {
			EXPECT_EQ(x.server_id, (uint32_t)MS_QUOTA_USER);
			EXPECT_EQ(x.block, 999u);
			EXPECT_EQ(x.count, 11u);
			seen_alice = true;
		}
	}
	EXPECT_TRUE(seen_alice);
	EXPECT_EQ(ublocks(alice.uid), 999u) << "a check changes nothing";

	r = fsck(1, &p);
	EXPECT_EQ(r.problems, 5u);
	EXPECT_EQ(r.repaired, 5u);
	EXPECT_EQ(ublocks(alice.uid), 11u);
	EXPECT_EQ(uinodes(alice.uid), 1u);
	EXPECT_EQ(q(MS_QUOTA_USER, alice.uid).block_hard, 500u) << "the limits stay";
	EXPECT_EQ(ublocks(bob.uid), 3u);
	EXPECT_EQ(uinodes(bob.uid), 1u);
	EXPECT_EQ(fsck(0, &p).problems, 0u);
	EXPECT_EQ(alloc(f, 11, 1, &alice), 1);
	/* and the records on disk are right: bob's was written again */
	reopen();
	EXPECT_EQ(ublocks(alice.uid), 12u);
	EXPECT_EQ(ublocks(bob.uid), 3u);
	EXPECT_EQ(fsck(0, &p).problems, 0u);

	/*
	 * A change after the record went wrong stays counted: the repair adds
	 * the difference of the record to the inodes, whatever the record is now.
	 */
	offline([&](leveldb_t *db, leveldb_writeoptions_t *wo) {
		uint8_t k[MS_KEY_MAX], v[MS_QUOTA_REC];
		struct ms_quota bad = {};
		char *err = nullptr;

		bad.blocks = 100;
		bad.inodes = 1;
		quota_encode(&bad, v);
		leveldb_put(db, wo, (char *)k, key_quota(k, MS_QUOTA_USER, bob.uid), (char *)v,
			    sizeof(v), &err);
		EXPECT_EQ(err, nullptr);
	});
	EXPECT_EQ(alloc(g, 3, 2, &bob), 2);
	EXPECT_EQ(ublocks(bob.uid), 102u);
	r = fsck(1, &p);
	EXPECT_EQ(r.problems, 1u);
	EXPECT_EQ(ublocks(bob.uid), 5u);
	expect_usage_exact("repaired");
}

/* ------------------------------------------------------------ failed writes */

TEST_F(QuotaTest, AWriteThatFailsMovesNoUsage)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	struct ms_attr a;

	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 0, 20, 0, 3), 0);
	EXPECT_EQ(alloc(f, 0, 10, &alice), 10);

	/* an allocation whose batch the disk refuses: no block, no usage, no reservation */
	ms_debug_fail_writes(ms, 1);
	EXPECT_EQ(alloc(f, 10, 10, &alice), -EIO);
	EXPECT_EQ(attr(f).blocks, 10u);
	EXPECT_EQ(ublocks(alice.uid), 10u);
	EXPECT_EQ(alloc(f, 10, 100, &alice), 10) << "all the room is still there";

	/* a create, a chown and a truncate that are not written change nothing either */
	ms_debug_fail_writes(ms, 1);
	EXPECT_EQ(ms_mknod(ms, sess, &alice, d, "g", S_IFREG | 0644, 0, 0, 1, 0, 0, &a, nullptr),
		  -EIO);
	EXPECT_EQ(uinodes(alice.uid), 1u);
	ms_debug_fail_writes(ms, 1);
	EXPECT_EQ(chown_(f, bob.uid, -1, &root), -EIO);
	EXPECT_EQ(ublocks(bob.uid), 0u);
	EXPECT_EQ(ublocks(alice.uid), 20u);
	ms_debug_fail_writes(ms, 1);
	EXPECT_EQ(truncate(f, 0, &alice), -EIO);
	EXPECT_EQ(ublocks(alice.uid), 20u);
	ms_debug_fail_writes(ms, 1);
	ASSERT_EQ(set_grace(MS_QUOTA_USER, 5), -EIO);
	EXPECT_EQ(ms_quota_grace(ms, MS_QUOTA_USER), (uint64_t)MS_QUOTA_GRACE_DEFAULT_S);

	/* and what is written next counts from the right numbers */
	mkfile(d, "g", 0644, &alice);
	mkfile(d, "h", 0644, &alice);
	EXPECT_EQ(ms_mknod(ms, sess, &alice, d, "i", S_IFREG | 0644, 0, 0, 1, 0, 0, &a, nullptr),
		  -EDQUOT);
	ASSERT_EQ(truncate(f, 4 * BLK, &alice), 0);
	EXPECT_EQ(ublocks(alice.uid), 4u);
	expect_usage_exact("after the failed writes");
	std::vector<struct ms_fsck_problem> p;
	EXPECT_EQ(fsck(0, &p).problems, 0u);
	reopen();
	EXPECT_EQ(ublocks(alice.uid), 4u);
	EXPECT_EQ(uinodes(alice.uid), 3u);
}

/* ------------------------------------------------------------ concurrency */

TEST_F(QuotaTest, ConcurrentWritersOfOneUserNeverPassItsHardLimit)
{
	constexpr int kThreads = 4;
	constexpr uint64_t kHard = 1000;
	uint64_t d = mkdir_(1, "d", 0777);
	std::atomic<uint64_t> granted{ 0 };
	std::atomic<int> refused{ 0 };
	std::vector<std::thread> ts;

	ASSERT_EQ(set_limits(MS_QUOTA_USER, alice.uid, 0, kHard, 0, 0), 0);
	for (int t = 0; t < kThreads; t++) {
		ts.emplace_back([&, t] {
			std::string name = "f" + std::to_string(t);
			struct ms_attr a;

			if (ms_mknod(ms, sess, &alice, d, name.c_str(), S_IFREG | 0644, 0, 0, 1, 0, 0,
				     &a, nullptr))
				return;
			for (uint64_t b = 0;;) {
				int64_t got = alloc(a.ino, b, 7, &alice);

				if (got < 0) {
					if (got == -EDQUOT)
						refused++;
					return;
				}
				granted += (uint64_t)got;
				b += (uint64_t)got;
			}
		});
	}
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(refused.load(), kThreads);
	EXPECT_EQ(granted.load(), kHard);
	EXPECT_EQ(ublocks(alice.uid), kHard);
	expect_usage_exact("after the race");
	std::vector<struct ms_fsck_problem> p;
	EXPECT_EQ(fsck(0, &p).problems, 0u);
}
