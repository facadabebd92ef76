// SPDX-License-Identifier: MIT
/*
 * ms_idmap_test.cc - a client node's id policy at the metaserver: squash,
 * then maps of client id ranges to file-system ranges, applied to a
 * request's credential and mapped back for replies; the policies it refuses
 * (overlaps, empty or wrapping ranges); ACL xattr values rewritten and kept
 * in the order acl_valid() wants; a node's maps persisted across a restart.
 */
#include <errno.h>
#include <stdint.h>

#include <vector>

#include <leveldb/c.h>

#include "ms_fixture.h"

extern "C" {
#include "../../metaserver/acl.h"
#include "../../metaserver/ms_keys.h"
}

namespace
{

struct ms_squash policy(enum ms_squash_mode mode, std::vector<struct ms_idmap> maps,
			int unmapped_squash = 0)
{
	struct ms_squash sq = {};

	sq.mode = mode;
	sq.anonuid = 65534;
	sq.anongid = 65533;
	sq.unmapped_squash = (uint8_t)unmapped_squash;
	for (const auto &m : maps)
		sq.maps[sq.nmaps++] = m;
	return sq;
}

/* uids 1000..1099 are 51000..; gids 100..109 are 5100.. */
const std::vector<struct ms_idmap> site = { { 0, 1000, 51000, 100 }, { 1, 100, 5100, 10 } };

TEST(IdMap, RequestsMapInRepliesMapBack)
{
	struct ms_squash sq = policy(MS_SQUASH_ROOT, site);
	uint32_t uid = 1042, gid = 101, groups[3] = { 100, 109, 7 }, ngroups = 3;

	ASSERT_EQ(ms_squash_check(&sq), 0);
	ms_squash_apply(&sq, &uid, &gid, groups, &ngroups);
	EXPECT_EQ(uid, 51042u);
	EXPECT_EQ(gid, 5101u);
	EXPECT_EQ(ngroups, 3u);
	EXPECT_EQ(groups[0], 5100u);
	EXPECT_EQ(groups[1], 5109u);
	EXPECT_EQ(groups[2], 7u) << "an unmapped id is kept by default";
	EXPECT_EQ(ms_idmap_out(&sq, 0, 51042), 1042u);
	EXPECT_EQ(ms_idmap_out(&sq, 1, 5109), 109u);
	EXPECT_EQ(ms_idmap_out(&sq, 0, 51100), 51100u) << "one past the range is not mapped";
	EXPECT_EQ(ms_idmap_in(&sq, 0, 1100), 1100u);
	/* a uid range does not map gids, nor a gid range uids */
	EXPECT_EQ(ms_idmap_in(&sq, 1, 1000), 1000u);
	EXPECT_EQ(ms_idmap_in(&sq, 0, 100), 100u);
}

TEST(IdMap, SquashComesFirst)
{
	struct ms_squash sq = policy(MS_SQUASH_ROOT, { { 0, 0, 777, 1 }, { 1, 100, 5100, 10 } });
	uint32_t uid = 0, gid = 100, groups[1] = { 100 }, ngroups = 1;

	ms_squash_apply(&sq, &uid, &gid, groups, &ngroups);
	EXPECT_EQ(uid, 65534u) << "root is squashed, not mapped";
	EXPECT_EQ(gid, 65533u);
	EXPECT_EQ(ngroups, 0u);

	sq.mode = MS_SQUASH_NONE;
	uid = 0, gid = 100, ngroups = 1;
	ms_squash_apply(&sq, &uid, &gid, groups, &ngroups);
	EXPECT_EQ(uid, 777u) << "without root squash, a map may name root";
	EXPECT_EQ(gid, 5100u);

	sq.mode = MS_SQUASH_ALL;
	uid = 1000, gid = 100, ngroups = 1;
	ms_squash_apply(&sq, &uid, &gid, groups, &ngroups);
	EXPECT_EQ(uid, 65534u);
	EXPECT_EQ(gid, 65533u);
}

TEST(IdMap, UnmappedSquashReachesOnlyWhatTheMapsGrant)
{
	struct ms_squash sq = policy(MS_SQUASH_NONE, site, 1);
	uint32_t uid = 4242, gid = 4242, groups[2] = { 100, 4242 }, ngroups = 2;

	ms_squash_apply(&sq, &uid, &gid, groups, &ngroups);
	EXPECT_EQ(uid, 65534u);
	EXPECT_EQ(gid, 65533u);
	EXPECT_EQ(groups[0], 5100u);
	EXPECT_EQ(groups[1], 65533u);
	/* a file of an owner the node has no number for shows as the anonymous ids */
	EXPECT_EQ(ms_idmap_out(&sq, 0, 0), 65534u);
	EXPECT_EQ(ms_idmap_out(&sq, 1, 9999), 65533u);
	EXPECT_EQ(ms_idmap_out(&sq, 0, 51000), 1000u);
}

TEST(IdMap, NoPolicyLeavesIdsAlone)
{
	struct ms_squash sq = policy(MS_SQUASH_NONE, {});
	uint32_t uid = 1042, gid = 101, groups[1] = { 7 }, ngroups = 1;

	EXPECT_FALSE(ms_idmap_active(&sq));
	ms_squash_apply(&sq, &uid, &gid, groups, &ngroups);
	EXPECT_EQ(uid, 1042u);
	EXPECT_EQ(gid, 101u);
	EXPECT_EQ(groups[0], 7u);
	EXPECT_EQ(ms_idmap_out(&sq, 0, 1042), 1042u);
}

TEST(IdMap, BadPoliciesAreRefused)
{
	struct ms_squash ok = policy(MS_SQUASH_ROOT, site);

	EXPECT_EQ(ms_squash_check(&ok), 0);
	/* the same client range twice for uids */
	struct ms_squash a = policy(MS_SQUASH_ROOT, { { 0, 1000, 1, 10 }, { 0, 1009, 100, 5 } });
	EXPECT_EQ(ms_squash_check(&a), -EINVAL);
	/* two client ranges onto overlapping fs ranges: not one way back */
	struct ms_squash b = policy(MS_SQUASH_ROOT, { { 0, 1, 500, 10 }, { 0, 100, 505, 10 } });
	EXPECT_EQ(ms_squash_check(&b), -EINVAL);
	/* a uid range and a gid range may share numbers */
	struct ms_squash c = policy(MS_SQUASH_ROOT, { { 0, 1, 500, 10 }, { 1, 1, 500, 10 } });
	EXPECT_EQ(ms_squash_check(&c), 0);
	struct ms_squash empty = policy(MS_SQUASH_ROOT, { { 0, 1, 500, 0 } });
	EXPECT_EQ(ms_squash_check(&empty), -EINVAL);
	struct ms_squash wrap = policy(MS_SQUASH_ROOT, { { 0, 1, UINT32_MAX - 3, 5 } });
	EXPECT_EQ(ms_squash_check(&wrap), -EINVAL);
	struct ms_squash wrap2 = policy(MS_SQUASH_ROOT, { { 0, UINT32_MAX, 1, 2 } });
	EXPECT_EQ(ms_squash_check(&wrap2), -EINVAL);
	struct ms_squash kind = policy(MS_SQUASH_ROOT, { { 2, 1, 1, 1 } });
	EXPECT_EQ(ms_squash_check(&kind), -EINVAL);
	struct ms_squash mode = policy((enum ms_squash_mode)3, {});
	EXPECT_EQ(ms_squash_check(&mode), -EINVAL);
}

std::vector<uint8_t> acl_value(std::vector<struct ms_acl_entry> es)
{
	struct ms_acl a = {};

	for (const auto &e : es)
		a.e[a.n++] = e;
	std::vector<uint8_t> v(acl_xattr_size(&a));
	acl_to_xattr(&a, v.data());
	return v;
}

TEST(IdMap, AclEntriesMapAndStayInOrder)
{
	/* client uid 1000 -> 51000, but client uid 900 -> 60000: the order flips */
	struct ms_squash sq = policy(
		MS_SQUASH_ROOT,
		{ { 0, 1000, 51000, 100 }, { 0, 900, 60000, 1 }, { 1, 100, 5100, 10 } });
	std::vector<uint8_t> v = acl_value({ { MS_ACL_USER_OBJ, 7, MS_ACL_UNDEFINED_ID },
					     { MS_ACL_USER, 4, 900 },
					     { MS_ACL_USER, 6, 1000 },
					     { MS_ACL_GROUP_OBJ, 5, MS_ACL_UNDEFINED_ID },
					     { MS_ACL_GROUP, 4, 100 },
					     { MS_ACL_MASK, 7, MS_ACL_UNDEFINED_ID },
					     { MS_ACL_OTHER, 0, MS_ACL_UNDEFINED_ID } });
	struct ms_acl a;

	ASSERT_EQ(ms_squash_check(&sq), 0);
	ms_idmap_acl_xattr(&sq, 1, v.data(), v.size());
	ASSERT_EQ(acl_from_xattr(v.data(), v.size(), &a), 0);
	ASSERT_EQ(acl_valid(&a), 0) << "named users must stay sorted by id";
	EXPECT_EQ(a.e[1].id, 51000u);
	EXPECT_EQ(a.e[1].perm, 6u) << "the perm moves with its entry";
	EXPECT_EQ(a.e[2].id, 60000u);
	EXPECT_EQ(a.e[2].perm, 4u);
	EXPECT_EQ(a.e[4].id, 5100u);
	EXPECT_EQ(a.e[0].id, MS_ACL_UNDEFINED_ID) << "unnamed entries keep no id";

	ms_idmap_acl_xattr(&sq, 0, v.data(), v.size());
	ASSERT_EQ(acl_from_xattr(v.data(), v.size(), &a), 0);
	ASSERT_EQ(acl_valid(&a), 0);
	EXPECT_EQ(a.e[1].id, 900u);
	EXPECT_EQ(a.e[1].perm, 4u);
	EXPECT_EQ(a.e[2].id, 1000u);
	EXPECT_EQ(a.e[4].id, 100u);

	/* a value that is not an ACL is left as it is, not read past its end */
	std::vector<uint8_t> junk = { 2, 0, 0, 0, 2, 0, 4 };
	std::vector<uint8_t> before = junk;
	ms_idmap_acl_xattr(&sq, 1, junk.data(), junk.size());
	EXPECT_EQ(junk, before);
}

class IdMapNodeTest : public MsTest
{
};

TEST_F(IdMapNodeTest, NodeMapsSurviveARestart)
{
	struct ms_session *srv = ms_session_new(ms, "server");
	struct ms_squash sq = policy(MS_SQUASH_ROOT, site, 1), got;
	struct ms_node n;

	ASSERT_NE(srv, nullptr);
	ASSERT_EQ(ms_node_set(ms, srv, "n1", 1, &sq, &n), 0);
	EXPECT_EQ(n.squash.nmaps, 2);
	struct ms_squash bad = policy(MS_SQUASH_ROOT, { { 0, 1, 5, 2 }, { 0, 2, 50, 2 } });
	EXPECT_EQ(ms_node_set(ms, srv, "n1", 0, &bad, &n), -EINVAL);
	ms_session_close(ms, srv);
	reopen();
	ASSERT_EQ(ms_node_admit(ms, "n1:1", &got), 0);
	EXPECT_EQ(got.mode, MS_SQUASH_ROOT);
	EXPECT_EQ(got.unmapped_squash, 1);
	ASSERT_EQ(got.nmaps, 2);
	EXPECT_EQ(got.maps[0].client, 1000u);
	EXPECT_EQ(got.maps[0].fs, 51000u);
	EXPECT_EQ(got.maps[0].count, 100u);
	EXPECT_EQ(got.maps[1].gid, 1);
	EXPECT_EQ(got.maps[1].fs, 5100u);
}

TEST_F(IdMapNodeTest, ARecordFromBeforeMapsStillLoads)
{
	/* generation 3, active, squash all, 1234:4321: the 14-byte record */
	uint8_t k[] = { MS_TAG_NODE, 'o', 'l', 'd' }, v[14];
	struct ms_squash got;

	put_le32(v, 3);
	v[4] = 0;
	v[5] = MS_SQUASH_ALL;
	put_le32(v + 6, 1234);
	put_le32(v + 10, 4321);
	close_db();
	{
		char *err = nullptr;
		leveldb_options_t *o = leveldb_options_create();
		leveldb_t *db = leveldb_open(o, dir.c_str(), &err);

		ASSERT_EQ(err, nullptr) << err;
		leveldb_writeoptions_t *w = leveldb_writeoptions_create();
		leveldb_put(db, w, (char *)k, sizeof(k), (char *)v, sizeof(v), &err);
		ASSERT_EQ(err, nullptr) << err;
		leveldb_writeoptions_destroy(w);
		leveldb_close(db);
		leveldb_options_destroy(o);
	}
	open_db();
	ASSERT_EQ(ms_node_admit(ms, "old:3", &got), 0);
	EXPECT_EQ(got.mode, MS_SQUASH_ALL);
	EXPECT_EQ(got.anonuid, 1234u);
	EXPECT_EQ(got.anongid, 4321u);
	EXPECT_EQ(got.nmaps, 0);
	EXPECT_EQ(got.unmapped_squash, 0);
}

} // namespace
