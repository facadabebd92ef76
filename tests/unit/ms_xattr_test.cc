// SPDX-License-Identifier: MIT
/*
 * ms_xattr_test.cc - extended attributes: flags, size and name limits,
 * namespaces, permissions and ctime.
 */
#include <errno.h>
#include <time.h>

#include <algorithm>

#include "ms_fixture.h"

static std::string get(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name,
		       int *ret)
{
	void *v = nullptr;

	*ret = ms_getxattr(ms, cr, ino, name, &v);
	std::string s = *ret >= 0 ? std::string((char *)v, *ret) : "";
	free(v);
	return s;
}

static std::vector<std::string> names(struct ms *ms, const struct ms_cred *cr, uint64_t ino)
{
	char **n = nullptr;
	int c = ms_listxattr(ms, cr, ino, &n);
	std::vector<std::string> v;

	for (int i = 0; i < c; i++)
		v.push_back(n[i]);
	if (c > 0)
		ms_names_free(n, c);
	std::sort(v.begin(), v.end());
	return v;
}

TEST_F(MsTest, XattrSetGetListRemove)
{
	uint64_t f = mkfile(1, "f");
	struct ms_attr before = attr(f);
	struct timespec ts = { 0, 2000000 };
	int ret;

	nanosleep(&ts, nullptr);
	ASSERT_EQ(ms_setxattr(ms, &root, f, "user.a", "hello", 5, 0), 0);
	EXPECT_GT(attr(f).ctime_ns, before.ctime_ns);
	EXPECT_EQ(get(ms, &root, f, "user.a", &ret), "hello");
	EXPECT_EQ(ret, 5);
	ASSERT_EQ(ms_setxattr(ms, &root, f, "user.empty", "", 0, 0), 0);
	EXPECT_EQ(get(ms, &root, f, "user.empty", &ret), "");
	EXPECT_EQ(ret, 0);
	get(ms, &root, f, "user.none", &ret);
	EXPECT_EQ(ret, -ENODATA);
	EXPECT_EQ(names(ms, &root, f), (std::vector<std::string>{ "user.a", "user.empty" }));
	ASSERT_EQ(ms_removexattr(ms, &root, f, "user.a"), 0);
	EXPECT_EQ(ms_removexattr(ms, &root, f, "user.a"), -ENODATA);
	EXPECT_EQ(names(ms, &root, f), (std::vector<std::string>{ "user.empty" }));
	reopen();
	EXPECT_EQ(names(ms, &root, f), (std::vector<std::string>{ "user.empty" }));
	/* removing the file removes its xattrs */
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	get(ms, &root, f, "user.empty", &ret);
	EXPECT_EQ(ret, -ENOENT);
}

TEST_F(MsTest, XattrFlags)
{
	uint64_t f = mkfile(1, "f");
	int ret;

	EXPECT_EQ(ms_setxattr(ms, &root, f, "user.a", "1", 1, MS_XATTR_REPLACE), -ENODATA);
	EXPECT_EQ(ms_setxattr(ms, &root, f, "user.a", "1", 1, MS_XATTR_CREATE), 0);
	EXPECT_EQ(ms_setxattr(ms, &root, f, "user.a", "2", 1, MS_XATTR_CREATE), -EEXIST);
	EXPECT_EQ(ms_setxattr(ms, &root, f, "user.a", "3", 1, MS_XATTR_REPLACE), 0);
	EXPECT_EQ(get(ms, &root, f, "user.a", &ret), "3");
	EXPECT_EQ(ms_setxattr(ms, &root, f, "user.a", "3", 1, 4), -EINVAL);
}

TEST_F(MsTest, XattrLimitsAndNamespaces)
{
	uint64_t f = mkfile(1, "f");
	std::string big(65537, 'v'), max(65536, 'w'), longname = "user." + std::string(251, 'n');
	int ret;

	EXPECT_EQ(ms_setxattr(ms, &root, f, "user.big", big.data(), big.size(), 0), -E2BIG);
	EXPECT_EQ(ms_setxattr(ms, &root, f, "user.max", max.data(), max.size(), 0), 0);
	EXPECT_EQ(get(ms, &root, f, "user.max", &ret).size(), 65536u);
	EXPECT_EQ(ms_setxattr(ms, &root, f, longname.c_str(), "v", 1, 0), -ERANGE);
	EXPECT_EQ(ms_setxattr(ms, &root, f, longname.substr(1).c_str(), "v", 1, 0), -ENOTSUP);
	EXPECT_EQ(ms_setxattr(ms, &root, f, ("user." + std::string(250, 'n')).c_str(), "v", 1, 0), 0);
	EXPECT_EQ(ms_setxattr(ms, &root, f, "", "v", 1, 0), -ERANGE);
	EXPECT_EQ(ms_setxattr(ms, &root, f, "noprefix", "v", 1, 0), -ENOTSUP);
	EXPECT_EQ(ms_setxattr(ms, &root, f, "user.", "v", 1, 0), -ENOTSUP);
	get(ms, &root, f, "other.x", &ret);
	EXPECT_EQ(ret, -ENOTSUP);
	EXPECT_EQ(ms_setxattr(ms, &root, f, "security.selinux", "ctx", 3, 0), 0);
	EXPECT_EQ(ms_setxattr(ms, &root, f, "system.foo", "x", 1, 0), 0);
}

TEST_F(MsTest, XattrPermissions)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	struct ms_attr a;
	int ret;

	EXPECT_EQ(ms_setxattr(ms, &alice, f, "user.a", "1", 1, 0), 0);
	EXPECT_EQ(ms_setxattr(ms, &bob, f, "user.a", "2", 1, 0), -EACCES);
	EXPECT_EQ(get(ms, &bob, f, "user.a", &ret), "1");
	ASSERT_EQ(chmod_(f, 0600, &alice), 0);
	get(ms, &bob, f, "user.a", &ret);
	EXPECT_EQ(ret, -EACCES);
	/* trusted.*: root only; others see nothing */
	EXPECT_EQ(ms_setxattr(ms, &alice, f, "trusted.t", "1", 1, 0), -EPERM);
	ASSERT_EQ(ms_setxattr(ms, &root, f, "trusted.t", "1", 1, 0), 0);
	get(ms, &alice, f, "trusted.t", &ret);
	EXPECT_EQ(ret, -ENODATA);
	EXPECT_EQ(get(ms, &root, f, "trusted.t", &ret), "1");
	EXPECT_EQ(names(ms, &alice, f), (std::vector<std::string>{ "user.a" }));
	EXPECT_EQ(names(ms, &root, f), (std::vector<std::string>{ "trusted.t", "user.a" }));
	/* security.*: writable by the owner only */
	EXPECT_EQ(ms_setxattr(ms, &bob, f, "security.x", "1", 1, 0), -EPERM);
	/* user.* only on regular files and directories */
	ASSERT_EQ(ms_symlink(ms, &root, d, "l", "f", &a), 0);
	EXPECT_EQ(ms_setxattr(ms, &root, a.ino, "user.a", "1", 1, 0), -EPERM);
	get(ms, &root, a.ino, "user.a", &ret);
	EXPECT_EQ(ret, -ENODATA);
	/* sticky directories: only the owner writes user.* */
	uint64_t t = mkdir_(1, "t", 01777);
	EXPECT_EQ(ms_setxattr(ms, &alice, t, "user.a", "1", 1, 0), -EPERM);
	EXPECT_EQ(ms_setxattr(ms, &root, t, "user.a", "1", 1, 0), 0);
	EXPECT_EQ(ms_setxattr(ms, &root, 98765, "user.a", "1", 1, 0), -ENOENT);
}
