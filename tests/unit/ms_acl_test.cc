// SPDX-License-Identifier: MIT
/*
 * ms_acl_test.cc - POSIX ACLs at the metaserver: the xattr format and its
 * validation (hostile blobs included), access decisions for named users and
 * groups under a mask, chmod and the mask, the mode an ACL implies, default
 * ACL inheritance with and without a umask, and what survives a restart.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "ms_fixture.h"

extern "C" {
#include "../../metaserver/acl.h"
#include "../../metaserver/ms_keys.h"
}

namespace {

struct E {
	uint16_t tag, perm;
	uint32_t id;
};

const uint32_t NOID = MS_ACL_UNDEFINED_ID;

/* An ACL xattr value as setfacl would send it. */
std::string blob(std::initializer_list<E> es, uint32_t version = 2)
{
	std::string s;
	auto le = [&s](uint64_t v, int n) {
		for (int i = 0; i < n; i++)
			s.push_back((char)(v >> (8 * i)));
	};

	le(version, 4);
	for (const E &e : es) {
		le(e.tag, 2);
		le(e.perm, 2);
		le(e.id, 4);
	}
	return s;
}

/* u::rw- u:bob:rw- g::r-- g:101:rw- m::r-- o::--- */
std::string named_acl(uint16_t mask = 4)
{
	return blob({ { MS_ACL_USER_OBJ, 6, NOID },
		      { MS_ACL_USER, 6, 2000 },
		      { MS_ACL_GROUP_OBJ, 4, NOID },
		      { MS_ACL_GROUP, 6, 101 },
		      { MS_ACL_MASK, mask, NOID },
		      { MS_ACL_OTHER, 0, NOID } });
}

int parse(const std::string &b, struct ms_acl *a)
{
	int ret = acl_from_xattr(b.data(), b.size(), a);

	return ret ? ret : acl_valid(a);
}

} // namespace

class AclTest : public MsTest {
protected:
	uint32_t carol_groups[1] = { 101 };
	struct ms_cred carol = { 3000, 3000, 1, carol_groups };	/* in named group 101 */
	struct ms_cred dave = { 4000, 4000, 0, nullptr };	/* in nothing */

	int set(uint64_t ino, const char *name, const std::string &v,
		const struct ms_cred *cr = nullptr)
	{
		return ms_setxattr(ms, cr ? cr : &root, ino, name, v.data(), v.size(), 0);
	}

	std::string get(uint64_t ino, const char *name, int *ret)
	{
		void *v = nullptr;

		*ret = ms_getxattr(ms, &dave, ino, name, &v);
		std::string s = *ret >= 0 ? std::string((char *)v, *ret) : "";
		free(v);
		return s;
	}

	int open_(uint64_t ino, const struct ms_cred *cr, uint32_t flags)
	{
		struct ms_attr a;
		uint64_t h = 0;
		int ret = ms_open_file(ms, sess, cr, ino, flags, &a, &h);

		if (ret == 0)
			ms_release(ms, sess, h);
		return ret;
	}

	uint64_t create(uint64_t parent, const char *name, uint32_t mode, uint32_t umask,
			const struct ms_cred *cr = nullptr)
	{
		struct ms_attr a;
		int ret = ms_mknod(ms, sess, cr ? cr : &root, parent, name, S_IFREG | mode, umask, 0,
				   1, 0, 0, &a, nullptr);

		EXPECT_EQ(ret, 0) << name;
		return ret ? 0 : a.ino;
	}

	uint64_t mkdir_um(uint64_t parent, const char *name, uint32_t mode, uint32_t umask,
			  const struct ms_cred *cr = nullptr)
	{
		struct ms_attr a;
		int ret = ms_mkdir(ms, cr ? cr : &root, parent, name, mode, umask, &a);

		EXPECT_EQ(ret, 0) << name;
		return ret ? 0 : a.ino;
	}

	uint32_t perms(uint64_t ino)
	{
		return attr(ino).mode & 07777;
	}
};

TEST(AclFormat, RoundTripWritesUndefinedIdsForUnnamedEntries)
{
	struct ms_acl a;
	/* an id on an unnamed entry means nothing: it comes back as -1 */
	std::string in = blob({ { MS_ACL_USER_OBJ, 7, 55 },
				{ MS_ACL_USER, 5, 2000 },
				{ MS_ACL_GROUP_OBJ, 4, 66 },
				{ MS_ACL_MASK, 5, 77 },
				{ MS_ACL_OTHER, 0, 88 } });

	ASSERT_EQ(parse(in, &a), 0);
	ASSERT_EQ(a.n, 5u);
	std::vector<uint8_t> out(acl_xattr_size(&a));
	ASSERT_EQ(acl_to_xattr(&a, out.data()), out.size());
	std::string want = blob({ { MS_ACL_USER_OBJ, 7, NOID },
				  { MS_ACL_USER, 5, 2000 },
				  { MS_ACL_GROUP_OBJ, 4, NOID },
				  { MS_ACL_MASK, 5, NOID },
				  { MS_ACL_OTHER, 0, NOID } });
	EXPECT_EQ(std::string(out.begin(), out.end()), want);
	/* a bare header is "no ACL" */
	ASSERT_EQ(acl_from_xattr(blob({}).data(), 4, &a), 0);
	EXPECT_EQ(a.n, 0u);
}

TEST(AclFormat, MalformedIsRefused)
{
	struct ms_acl a;
	const E uo = { MS_ACL_USER_OBJ, 6, NOID }, go = { MS_ACL_GROUP_OBJ, 4, NOID };
	const E o = { MS_ACL_OTHER, 0, NOID }, m = { MS_ACL_MASK, 4, NOID };

	EXPECT_EQ(parse(blob({ uo, go, o }), &a), 0);
	EXPECT_EQ(parse(blob({ uo, go, m, o }), &a), 0);	/* a mask alone is allowed */
	/* as Linux: another version is not a format we know */
	EXPECT_EQ(parse(blob({ uo, go, o }, 1), &a), -EOPNOTSUPP);
	EXPECT_EQ(parse(blob({ uo, go, o }, 3), &a), -EOPNOTSUPP);
	/* sizes that are not a header plus whole entries */
	std::string ok = blob({ uo, go, o });
	EXPECT_EQ(acl_from_xattr(ok.data(), 3, &a), -EINVAL);
	EXPECT_EQ(acl_from_xattr(ok.data(), ok.size() - 1, &a), -EINVAL);
	EXPECT_EQ(acl_from_xattr(nullptr, 0, &a), -EINVAL);
	/* unknown tag, perms beyond rwx */
	EXPECT_EQ(parse(blob({ uo, go, { 0x40, 0, NOID }, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, { MS_ACL_GROUP_OBJ, 8, NOID }, o }), &a), -EINVAL);
	/* required entries missing, repeated or out of order */
	EXPECT_EQ(parse(blob({ go, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, go }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, uo, go, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ go, uo, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, go, o, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, go, m, m, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, go, o, m }), &a), -EINVAL);
	/* named entries need a mask */
	EXPECT_EQ(parse(blob({ uo, { MS_ACL_USER, 4, 7 }, go, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, go, { MS_ACL_GROUP, 4, 7 }, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, { MS_ACL_USER, 4, 7 }, go, m, o }), &a), 0);
	/* named entries: sorted, unique, with an id, in their own section */
	EXPECT_EQ(parse(blob({ uo, { MS_ACL_USER, 4, 7 }, { MS_ACL_USER, 4, 7 }, go, m, o }), &a),
		  -EINVAL);
	EXPECT_EQ(parse(blob({ uo, { MS_ACL_USER, 4, 9 }, { MS_ACL_USER, 4, 7 }, go, m, o }), &a),
		  -EINVAL);
	EXPECT_EQ(parse(blob({ uo, go, { MS_ACL_GROUP, 4, 9 }, { MS_ACL_GROUP, 4, 7 }, m, o }), &a),
		  -EINVAL);
	EXPECT_EQ(parse(blob({ uo, { MS_ACL_USER, 4, NOID }, go, m, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, go, { MS_ACL_USER, 4, 7 }, m, o }), &a), -EINVAL);
	EXPECT_EQ(parse(blob({ uo, { MS_ACL_GROUP, 4, 7 }, go, m, o }), &a), -EINVAL);
	/* more entries than an inode holds */
	std::string big = blob({ uo });
	for (uint32_t i = 0; i < MS_ACL_MAX; i++)
		big += blob({ { MS_ACL_USER, 4, i } }).substr(4);
	EXPECT_EQ(acl_from_xattr(big.data(), big.size(), &a), -ENOSPC);
}

TEST(AclFormat, ModeAlgebra)
{
	struct ms_acl a;
	uint32_t mode = S_IFREG | 04000;

	ASSERT_EQ(parse(named_acl(7), &a), 0);
	/* the group class is the mask, not GROUP_OBJ; other bits are kept */
	EXPECT_EQ(acl_equiv_mode(&a, &mode), 1);
	EXPECT_EQ(mode, (uint32_t)(S_IFREG | 04670));
	ASSERT_EQ(parse(blob({ { MS_ACL_USER_OBJ, 7, NOID },
			       { MS_ACL_GROUP_OBJ, 5, NOID },
			       { MS_ACL_OTHER, 1, NOID } }),
			&a),
		  0);
	EXPECT_EQ(acl_equiv_mode(&a, &mode), 0);
	EXPECT_EQ(mode, (uint32_t)(S_IFREG | 04751));
	/* chmod: the mask (not GROUP_OBJ) takes the group bits */
	ASSERT_EQ(parse(named_acl(7), &a), 0);
	acl_chmod(&a, 0751);
	EXPECT_EQ(a.e[0].perm, 7);	/* u:: */
	EXPECT_EQ(a.e[2].perm, 4);	/* g:: unchanged */
	EXPECT_EQ(a.e[4].perm, 5);	/* m:: */
	EXPECT_EQ(a.e[5].perm, 1);	/* o:: */
}

TEST_F(AclTest, NamedUsersAndGroupsUnderTheMask)
{
	uint64_t f = mkfile(1, "f", 0600);

	ASSERT_EQ(set(f, MS_ACL_XATTR_ACCESS, named_acl(4)), 0);
	/* the mode's group bits are the mask now */
	EXPECT_EQ(perms(f), 0640u);
	/* named user bob: rw- masked to r-- */
	EXPECT_EQ(open_(f, &bob, O_RDONLY), 0);
	EXPECT_EQ(open_(f, &bob, O_WRONLY), -EACCES);
	/* carol by named group 101: rw- masked to r-- */
	EXPECT_EQ(open_(f, &carol, O_RDONLY), 0);
	EXPECT_EQ(open_(f, &carol, O_WRONLY), -EACCES);
	/* dave matches nothing: other, --- */
	EXPECT_EQ(open_(f, &dave, O_RDONLY), -EACCES);
	/* a wider mask lets the named entries through, not GROUP_OBJ beyond r */
	ASSERT_EQ(set(f, MS_ACL_XATTR_ACCESS, named_acl(6)), 0);
	EXPECT_EQ(perms(f), 0660u);
	EXPECT_EQ(open_(f, &bob, O_RDWR), 0);
	EXPECT_EQ(open_(f, &carol, O_RDWR), 0);
	struct ms_cred owning = { 5000, 0, 0, nullptr };	/* in the owning group 0 */
	EXPECT_EQ(open_(f, &owning, O_RDONLY), 0);
	EXPECT_EQ(open_(f, &owning, O_WRONLY), -EACCES);
	EXPECT_EQ(open_(f, &dave, O_RDONLY), -EACCES);
	/* the owner goes by the owner bits only */
	ASSERT_EQ(chown_(f, 2000, -1, &root), 0);
	ASSERT_EQ(chmod_(f, 0460, &root), 0);
	EXPECT_EQ(open_(f, &bob, O_WRONLY), -EACCES);
	EXPECT_EQ(open_(f, &bob, O_RDONLY), 0);
}

TEST_F(AclTest, GroupEntriesAnyThatGrantsThenOtherIsNotTried)
{
	uint64_t f = mkfile(1, "f", 0604);
	uint32_t groups[2] = { 101, 102 };
	struct ms_cred two = { 6000, 6000, 2, groups };

	/* g:101:r-- g:102:-w- m::rw- o::r-- */
	ASSERT_EQ(set(f, MS_ACL_XATTR_ACCESS,
		      blob({ { MS_ACL_USER_OBJ, 6, NOID },
			     { MS_ACL_GROUP_OBJ, 0, NOID },
			     { MS_ACL_GROUP, 4, 101 },
			     { MS_ACL_GROUP, 2, 102 },
			     { MS_ACL_MASK, 6, NOID },
			     { MS_ACL_OTHER, 4, NOID } })),
		  0);
	EXPECT_EQ(open_(f, &two, O_RDONLY), 0);
	EXPECT_EQ(open_(f, &two, O_WRONLY), 0);
	/* no single entry grants rw: denied, though each grants a part */
	EXPECT_EQ(open_(f, &two, O_RDWR), -EACCES);
	/* a matching group entry that denies does not fall back to other's r-- */
	struct ms_cred only102 = { 6001, 6001, 1, &groups[1] };
	EXPECT_EQ(open_(f, &only102, O_RDONLY), -EACCES);
	EXPECT_EQ(open_(f, &dave, O_RDONLY), 0);
}

TEST_F(AclTest, DirectoryAclGovernsLookupCreateUnlinkRename)
{
	uint64_t d = mkdir_(1, "d", 0700);
	struct ms_attr a;

	/* u:bob:rwx m::rwx: bob may work in root's private directory, alice not */
	ASSERT_EQ(set(d, MS_ACL_XATTR_ACCESS,
		      blob({ { MS_ACL_USER_OBJ, 7, NOID },
			     { MS_ACL_USER, 7, 2000 },
			     { MS_ACL_GROUP_OBJ, 0, NOID },
			     { MS_ACL_MASK, 7, NOID },
			     { MS_ACL_OTHER, 0, NOID } })),
		  0);
	uint64_t f = mkfile(d, "f", 0644, &bob);
	ASSERT_NE(f, 0u);
	EXPECT_EQ(ms_lookup(ms, &bob, d, "f", &a), 0);
	EXPECT_EQ(ms_lookup(ms, &alice, d, "f", &a), -EACCES);
	EXPECT_EQ(ms_mknod(ms, sess, &alice, d, "g", S_IFREG | 0644, 0, 0, 1, 0, 0, &a, nullptr),
		  -EACCES);
	EXPECT_EQ(ms_rename(ms, &alice, d, "f", 1, "stolen", 0), -EACCES);
	EXPECT_EQ(ms_rename(ms, &bob, d, "f", d, "f2", 0), 0);
	EXPECT_EQ(ms_unlink(ms, &alice, d, "f2"), -EACCES);
	/* the mask takes write away from bob: lookup stays, unlink goes */
	ASSERT_EQ(chmod_(d, 0750, &root), 0);
	EXPECT_EQ(ms_lookup(ms, &bob, d, "f2", &a), 0);
	EXPECT_EQ(ms_unlink(ms, &bob, d, "f2"), -EACCES);
	ASSERT_EQ(chmod_(d, 0770, &root), 0);
	EXPECT_EQ(ms_unlink(ms, &bob, d, "f2"), 0);
}

TEST_F(AclTest, EquivalentAclBecomesTheMode)
{
	uint64_t f = mkfile(1, "f", 0644);
	int ret;

	ASSERT_EQ(set(f, MS_ACL_XATTR_ACCESS,
		      blob({ { MS_ACL_USER_OBJ, 7, NOID },
			     { MS_ACL_GROUP_OBJ, 5, NOID },
			     { MS_ACL_OTHER, 0, NOID } })),
		  0);
	EXPECT_EQ(perms(f), 0750u);
	get(f, MS_ACL_XATTR_ACCESS, &ret);
	EXPECT_EQ(ret, -ENODATA);
	/* setfacl -b of a named ACL: removing it keeps the mode */
	ASSERT_EQ(set(f, MS_ACL_XATTR_ACCESS, named_acl(6)), 0);
	EXPECT_EQ(perms(f), 0660u);
	EXPECT_EQ(ms_removexattr(ms, &root, f, MS_ACL_XATTR_ACCESS), 0);
	EXPECT_EQ(perms(f), 0660u);
	get(f, MS_ACL_XATTR_ACCESS, &ret);
	EXPECT_EQ(ret, -ENODATA);
	EXPECT_EQ(open_(f, &bob, O_RDONLY), -EACCES);
	/* removing what is not there succeeds, as on ext4 */
	EXPECT_EQ(ms_removexattr(ms, &root, f, MS_ACL_XATTR_ACCESS), 0);
	/* a bare header removes too */
	ASSERT_EQ(set(f, MS_ACL_XATTR_ACCESS, named_acl(6)), 0);
	ASSERT_EQ(set(f, MS_ACL_XATTR_ACCESS, blob({})), 0);
	get(f, MS_ACL_XATTR_ACCESS, &ret);
	EXPECT_EQ(ret, -ENODATA);
}

TEST_F(AclTest, ChmodRewritesMaskOwnerAndOther)
{
	uint64_t f = mkfile(1, "f", 0600);
	int ret;

	ASSERT_EQ(set(f, MS_ACL_XATTR_ACCESS, named_acl(6)), 0);
	ASSERT_EQ(chmod_(f, 0741, &root), 0);
	EXPECT_EQ(get(f, MS_ACL_XATTR_ACCESS, &ret),
		  blob({ { MS_ACL_USER_OBJ, 7, NOID },
			 { MS_ACL_USER, 6, 2000 },
			 { MS_ACL_GROUP_OBJ, 4, NOID },
			 { MS_ACL_GROUP, 6, 101 },
			 { MS_ACL_MASK, 4, NOID },
			 { MS_ACL_OTHER, 1, NOID } }));
	/* the new mask binds at once */
	EXPECT_EQ(open_(f, &bob, O_WRONLY), -EACCES);
	/* and survives a restart, with the flag that says it exists */
	reopen();
	EXPECT_EQ(open_(f, &bob, O_RDONLY), 0);
	EXPECT_EQ(open_(f, &bob, O_WRONLY), -EACCES);
	EXPECT_EQ(perms(f), 0741u);
	ASSERT_EQ(chmod_(f, 0771, &root), 0);
	EXPECT_EQ(open_(f, &bob, O_RDWR), 0);
}

TEST_F(AclTest, SetRulesAsLinux)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	struct ms_attr a;
	int ret;

	/* only the owner (or root) */
	EXPECT_EQ(set(f, MS_ACL_XATTR_ACCESS, named_acl(), &bob), -EPERM);
	EXPECT_EQ(ms_removexattr(ms, &bob, f, MS_ACL_XATTR_ACCESS), -EPERM);
	EXPECT_EQ(set(f, MS_ACL_XATTR_ACCESS, named_acl(), &alice), 0);
	/* a default ACL only on directories; removing one elsewhere is a no-op */
	EXPECT_EQ(set(f, MS_ACL_XATTR_DEFAULT, named_acl(), &alice), -EACCES);
	EXPECT_EQ(ms_removexattr(ms, &alice, f, MS_ACL_XATTR_DEFAULT), 0);
	/* no ACLs on symlinks */
	ASSERT_EQ(ms_symlink(ms, &alice, d, "l", "f", &a), 0);
	EXPECT_EQ(set(a.ino, MS_ACL_XATTR_ACCESS, named_acl(), &alice), -EOPNOTSUPP);
	/* the owner not in the file's group loses set-gid, as chmod would */
	ASSERT_EQ(chown_(f, -1, 555, &root), 0);
	ASSERT_EQ(chmod_(f, 02644, &root), 0);
	EXPECT_EQ(set(f, MS_ACL_XATTR_ACCESS, named_acl(), &alice), 0);
	EXPECT_FALSE(attr(f).mode & S_ISGID);
	/* anyone may read an ACL, as the mode */
	EXPECT_EQ(get(f, MS_ACL_XATTR_ACCESS, &ret), named_acl());
}

TEST_F(AclTest, HostileBlobsChangeNothing)
{
	uint64_t f = mkfile(1, "f", 0640);
	std::string ok = named_acl(6);
	int ret;

	ASSERT_EQ(set(f, MS_ACL_XATTR_ACCESS, ok), 0);
	struct ms_attr before = attr(f);
	const std::string hostile[] = {
		"", "\x02", std::string("\x02\0\0\0", 4) + "abc", ok.substr(0, ok.size() - 3),
		std::string(ok).replace(0, 1, "\x07"),
		std::string(ok).replace(4, 1, "\x80"),		/* bad tag */
		std::string(ok).replace(6, 1, "\x09"),		/* perm beyond rwx */
		blob({ { MS_ACL_USER_OBJ, 6, NOID },
		       { MS_ACL_USER, 6, 2000 },
		       { MS_ACL_GROUP_OBJ, 4, NOID },
		       { MS_ACL_OTHER, 0, NOID } }),		/* no mask */
		std::string(70000, '\xff'),
	};
	for (const std::string &h : hostile) {
		int r = set(f, MS_ACL_XATTR_ACCESS, h);

		EXPECT_TRUE(r == -EINVAL || r == -EOPNOTSUPP || r == -ENOSPC || r == -E2BIG)
			<< r << " size " << h.size();
		EXPECT_EQ(get(f, MS_ACL_XATTR_ACCESS, &ret), ok);
		EXPECT_EQ(attr(f).mode, before.mode);
		EXPECT_EQ(attr(f).ctime_ns, before.ctime_ns);
	}
	EXPECT_EQ(ms_setxattr(ms, &root, f, MS_ACL_XATTR_ACCESS, ok.data(), ok.size(), 0x80),
		  -EINVAL);
	EXPECT_EQ(open_(f, &bob, O_RDWR), 0);
}

TEST_F(AclTest, DefaultAclReplacesTheUmaskForFiles)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t plain = mkdir_(1, "plain", 0777);
	int ret;

	/* d:u::rwx d:u:bob:rwx d:g::r-x d:m::rwx d:o::--- */
	std::string def = blob({ { MS_ACL_USER_OBJ, 7, NOID },
				 { MS_ACL_USER, 7, 2000 },
				 { MS_ACL_GROUP_OBJ, 5, NOID },
				 { MS_ACL_MASK, 7, NOID },
				 { MS_ACL_OTHER, 0, NOID } });
	ASSERT_EQ(set(d, MS_ACL_XATTR_DEFAULT, def), 0);
	EXPECT_EQ(get(d, MS_ACL_XATTR_DEFAULT, &ret), def);
	EXPECT_EQ(perms(d), 0777u);	/* a default ACL leaves the mode alone */

	/* umask 022 ignored; each class gets what both mode 0666 and the ACL allow */
	uint64_t f = create(d, "f", 0666, 022, &alice);
	EXPECT_EQ(perms(f), 0660u);
	EXPECT_EQ(get(f, MS_ACL_XATTR_ACCESS, &ret),
		  blob({ { MS_ACL_USER_OBJ, 6, NOID },
			 { MS_ACL_USER, 7, 2000 },
			 { MS_ACL_GROUP_OBJ, 5, NOID },
			 { MS_ACL_MASK, 6, NOID },
			 { MS_ACL_OTHER, 0, NOID } }));
	get(f, MS_ACL_XATTR_DEFAULT, &ret);
	EXPECT_EQ(ret, -ENODATA);	/* files inherit no default */
	EXPECT_EQ(open_(f, &bob, O_RDWR), 0);
	EXPECT_EQ(open_(f, &dave, O_RDONLY), -EACCES);

	/* without a default ACL the umask applies */
	EXPECT_EQ(perms(create(plain, "f", 0666, 022)), 0644u);
	EXPECT_EQ(perms(create(plain, "g", 0666, 077)), 0600u);
	/* a client that masked the mode itself sends no umask */
	EXPECT_EQ(perms(create(plain, "h", 0640, 0)), 0640u);

	/* a minimal default ACL gives a plain mode, still without the umask */
	uint64_t m = mkdir_(1, "m", 0777);
	ASSERT_EQ(set(m, MS_ACL_XATTR_DEFAULT,
		      blob({ { MS_ACL_USER_OBJ, 7, NOID },
			     { MS_ACL_GROUP_OBJ, 5, NOID },
			     { MS_ACL_OTHER, 5, NOID } })),
		  0);
	uint64_t g = create(m, "g", 0666, 077);
	EXPECT_EQ(perms(g), 0644u);
	get(g, MS_ACL_XATTR_ACCESS, &ret);
	EXPECT_EQ(ret, -ENODATA);
	/* symlinks get nothing, and have no ACLs to ask for */
	struct ms_attr a;
	ASSERT_EQ(ms_symlink(ms, &root, d, "l", "f", &a), 0);
	EXPECT_EQ(attr(a.ino).mode, (uint32_t)(S_IFLNK | 0777));
	get(a.ino, MS_ACL_XATTR_ACCESS, &ret);
	EXPECT_EQ(ret, -EOPNOTSUPP);
}

TEST_F(AclTest, DirectoriesInheritTheDefaultAsBoth)
{
	uint64_t d = mkdir_(1, "d", 0755);
	std::string def = blob({ { MS_ACL_USER_OBJ, 7, NOID },
				 { MS_ACL_GROUP_OBJ, 5, NOID },
				 { MS_ACL_GROUP, 7, 101 },
				 { MS_ACL_MASK, 7, NOID },
				 { MS_ACL_OTHER, 0, NOID } });
	int ret;

	ASSERT_EQ(set(d, MS_ACL_XATTR_DEFAULT, def), 0);
	uint64_t sub = mkdir_um(d, "sub", 0755, 077);
	/* the mask narrowed by the mode's group bits, the umask ignored */
	EXPECT_EQ(perms(sub), 0750u);
	EXPECT_EQ(get(sub, MS_ACL_XATTR_ACCESS, &ret),
		  blob({ { MS_ACL_USER_OBJ, 7, NOID },
			 { MS_ACL_GROUP_OBJ, 5, NOID },
			 { MS_ACL_GROUP, 7, 101 },
			 { MS_ACL_MASK, 5, NOID },
			 { MS_ACL_OTHER, 0, NOID } }));
	EXPECT_EQ(get(sub, MS_ACL_XATTR_DEFAULT, &ret), def);
	/* and passes it on */
	uint64_t subsub = mkdir_um(sub, "x", 0777, 0);
	EXPECT_EQ(get(subsub, MS_ACL_XATTR_DEFAULT, &ret), def);
	EXPECT_EQ(perms(subsub), 0770u);
	/* carol (group 101) may create in it through the inherited ACL */
	EXPECT_NE(create(subsub, "c", 0644, 022, &carol), 0u);
	/* removing the parent's default stops inheritance; the children keep theirs */
	ASSERT_EQ(ms_removexattr(ms, &root, d, MS_ACL_XATTR_DEFAULT), 0);
	EXPECT_EQ(perms(mkdir_um(d, "after", 0777, 022)), 0755u);
	reopen();
	EXPECT_EQ(get(subsub, MS_ACL_XATTR_DEFAULT, &ret), def);
	get(d, MS_ACL_XATTR_DEFAULT, &ret);
	EXPECT_EQ(ret, -ENODATA);
}

TEST_F(AclTest, RecordsCarryTheFlagOnlyWhenNeeded)
{
	struct ms_inode in = {}, out = {};
	uint8_t buf[MS_INODE_FIXED_V3 + 4096];

	in.mode = S_IFREG | 0644;
	memcpy(in.target, "", 1);
	/* no ACL: the version 2 record older metaservers read */
	EXPECT_EQ(inode_encode(&in, buf), (size_t)MS_INODE_FIXED);
	EXPECT_EQ(buf[0], 2);
	in.flags = MS_INO_ACL | MS_INO_DEFACL;
	size_t n = inode_encode(&in, buf);
	EXPECT_EQ(n, (size_t)MS_INODE_FIXED_V3);
	EXPECT_EQ(buf[0], 3);
	ASSERT_EQ(inode_decode(7, buf, n, &out), 0);
	EXPECT_EQ(out.flags, MS_INO_ACL | MS_INO_DEFACL);
	EXPECT_EQ(out.mode, in.mode);
	EXPECT_EQ(inode_decode(7, buf, MS_INODE_FIXED_V3 - 1, &out), -EIO);
	buf[0] = 4;
	EXPECT_EQ(inode_decode(7, buf, n, &out), -EIO);
}

TEST_F(AclTest, RemovedFileTakesItsAclWithIt)
{
	uint64_t d = mkdir_(1, "d", 0777);
	struct ms_attr a;
	int ret;

	ASSERT_EQ(set(d, MS_ACL_XATTR_DEFAULT, named_acl(6)), 0);
	uint64_t f = create(d, "f", 0666, 0);
	ASSERT_EQ(ms_unlink(ms, &root, d, "f"), 0);
	get(f, MS_ACL_XATTR_ACCESS, &ret);
	EXPECT_EQ(ret, -ENOENT);
	/* a new file under the same name starts from the default again */
	uint64_t g = create(d, "f", 0600, 0);
	EXPECT_EQ(ms_lookup(ms, &root, d, "f", &a), 0);
	EXPECT_EQ(perms(g), 0600u);
	EXPECT_EQ(open_(g, &bob, O_RDONLY), -EACCES);	/* mask --- from mode 0600 */
}
