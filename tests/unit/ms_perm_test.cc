// SPDX-License-Identifier: MIT
/*
 * ms_perm_test.cc - POSIX permission rules as a non-root caller: search and
 * write permission, sticky directories, set-gid directories, chmod/chown/utimes
 * EPERM vs EACCES, truncate and open access checks.
 */
#include <errno.h>

#include "ms_fixture.h"

TEST_F(MsTest, SearchPermissionNeededForLookup)
{
	uint64_t d = mkdir_(1, "d", 0700);
	struct ms_attr a;

	mkfile(d, "f");
	EXPECT_EQ(lookup(d, "f", nullptr, &alice), -EACCES);
	EXPECT_EQ(lookup(d, "nope", nullptr, &alice), -EACCES);
	ASSERT_EQ(chmod_(d, 0711, &root), 0);
	EXPECT_EQ(lookup(d, "f", nullptr, &alice), 0);
	EXPECT_EQ(lookup(d, "nope", nullptr, &alice), -ENOENT);
	/* no read permission: listing is refused, lookups work */
	struct ms_dirent ents[4];
	int eof;
	EXPECT_EQ(ms_readdir(ms, &alice, d, nullptr, 0, 4, ents, &eof), -EACCES);
	/* x but no w: cannot create or remove */
	EXPECT_EQ(ms_mkdir(ms, &alice, d, "x", 0755, 0, &a), -EACCES);
	EXPECT_EQ(ms_unlink(ms, &alice, d, "f"), -EACCES);
	/* root bypasses r/w, and x on directories */
	ASSERT_EQ(chmod_(d, 0, &root), 0);
	EXPECT_EQ(lookup(d, "f"), 0);
	EXPECT_EQ(ms_mkdir(ms, &root, d, "x", 0755, 0, &a), 0);
}

TEST_F(MsTest, GroupClassUsesSupplementaryGroups)
{
	uint64_t d = mkdir_(1, "d", 0770);

	ASSERT_EQ(chown_(d, 0, 101, &root), 0);
	EXPECT_NE(mkfile(d, "byalice", 0644, &alice), 0u);
	struct ms_attr a;
	EXPECT_EQ(ms_mknod(ms, sess, &bob, d, "bybob", 0644, 0, 0, 1, 0, 0, &a, nullptr), -EACCES);
	/* the owner class applies even when it grants less than the group class */
	ASSERT_EQ(chown_(d, 1000, 101, &root), 0);
	ASSERT_EQ(chmod_(d, 0070, &root), 0);
	EXPECT_EQ(ms_mknod(ms, sess, &alice, d, "x", 0644, 0, 0, 1, 0, 0, &a, nullptr), -EACCES);
}

TEST_F(MsTest, StickyDirectory)
{
	uint64_t t = mkdir_(1, "tmp", 01777), d;
	struct ms_attr a;

	mkfile(t, "alices", 0644, &alice);
	d = mkdir_(t, "alicedir", 0755, &alice);
	mkfile(t, "bobs", 0644, &bob);
	EXPECT_EQ(ms_unlink(ms, &bob, t, "alices"), -EPERM);
	EXPECT_EQ(ms_rmdir(ms, &bob, t, "alicedir"), -EPERM);
	EXPECT_EQ(ms_rename(ms, &bob, t, "alices", t, "stolen", 0), -EPERM);
	EXPECT_EQ(ms_rename(ms, &bob, t, "bobs", t, "alices", 0), -EPERM);
	EXPECT_EQ(ms_unlink(ms, &bob, t, "bobs"), 0);
	EXPECT_EQ(ms_unlink(ms, &alice, t, "alices"), 0);
	EXPECT_EQ(ms_rmdir(ms, &alice, t, "alicedir"), 0);
	/* the directory's owner may remove anything in it */
	uint64_t own = mkdir_(1, "own", 01777, &root);
	ASSERT_EQ(chown_(own, 2000, 2000, &root), 0);
	mkfile(own, "a", 0644, &alice);
	EXPECT_EQ(ms_unlink(ms, &bob, own, "a"), 0);
	(void)d;
	(void)a;
}

TEST_F(MsTest, SetgidDirectoryInheritance)
{
	uint64_t d = mkdir_(1, "shared", 02777);
	struct ms_attr a;

	ASSERT_EQ(chown_(d, 0, 555, &root), 0);
	ASSERT_EQ(chmod_(d, 02777, &root), 0);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	a = attr(f);
	EXPECT_EQ(a.gid, 555u);
	EXPECT_EQ(a.uid, 1000u);
	uint64_t sub = mkdir_(d, "sub", 0777, &alice);
	a = attr(sub);
	EXPECT_EQ(a.gid, 555u);
	EXPECT_TRUE(a.mode & S_ISGID);
	uint64_t f2 = mkfile(sub, "g", 0644, &bob);
	EXPECT_EQ(attr(f2).gid, 555u);
	/* a set-gid executable for a group the creator is not in loses the bit */
	uint64_t x = mkfile(d, "x", 02755, &alice);
	EXPECT_FALSE(attr(x).mode & S_ISGID);
	/* outside set-gid directories the creator's gid is used */
	uint64_t plain = mkdir_(1, "plain", 0777);
	EXPECT_EQ(attr(mkfile(plain, "p", 0644, &alice)).gid, 1000u);
}

TEST_F(MsTest, ChmodRules)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);

	EXPECT_EQ(chmod_(f, 0600, &bob), -EPERM);
	EXPECT_EQ(chmod_(f, 0600, &alice), 0);
	EXPECT_EQ(attr(f).mode, (uint32_t)(S_IFREG | 0600));
	/* owner not in the file's group: S_ISGID silently cleared */
	ASSERT_EQ(chown_(f, -1, 555, &root), 0);
	EXPECT_EQ(chmod_(f, 02755, &alice), 0);
	EXPECT_EQ(attr(f).mode, (uint32_t)(S_IFREG | 0755));
	/* in the group: kept */
	ASSERT_EQ(chown_(f, -1, 100, &root), 0);
	EXPECT_EQ(chmod_(f, 02755, &alice), 0);
	EXPECT_EQ(attr(f).mode, (uint32_t)(S_IFREG | 02755));
	/* root keeps it regardless */
	ASSERT_EQ(chown_(f, -1, 555, &root), 0);
	EXPECT_EQ(chmod_(f, 02755, &root), 0);
	EXPECT_TRUE(attr(f).mode & S_ISGID);
	/* file type bits cannot be changed */
	EXPECT_EQ(chmod_(f, S_IFDIR | 0755, &root), 0);
	EXPECT_TRUE(S_ISREG(attr(f).mode));
}

TEST_F(MsTest, ChownRules)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 06755, &alice);

	ASSERT_EQ(chmod_(f, 06755, &root), 0);
	EXPECT_EQ(chown_(f, 2000, -1, &alice), -EPERM);
	EXPECT_EQ(chown_(f, -1, 555, &alice), -EPERM);
	EXPECT_EQ(chown_(f, -1, 555, &bob), -EPERM);
	EXPECT_EQ(chown_(f, 1000, -1, &alice), 0);	/* to itself: allowed */
	/* chown clears set-uid and (with group exec) set-gid on non-directories */
	EXPECT_FALSE(attr(f).mode & S_ISUID);
	EXPECT_FALSE(attr(f).mode & S_ISGID);
	ASSERT_EQ(chmod_(f, 06755, &root), 0);
	EXPECT_EQ(chown_(f, -1, 101, &alice), 0);	/* a group alice is in */
	struct ms_attr a = attr(f);
	EXPECT_EQ(a.gid, 101u);
	EXPECT_FALSE(a.mode & (S_ISUID | S_ISGID));
	EXPECT_EQ(chown_(f, 2000, 2000, &root), 0);
	EXPECT_EQ(attr(f).uid, 2000u);
	/* directories keep their set-gid bit */
	uint64_t sd = mkdir_(1, "sd", 0755);
	ASSERT_EQ(chmod_(sd, 02755, &root), 0);
	EXPECT_EQ(chown_(sd, 1000, 1000, &root), 0);
	EXPECT_TRUE(attr(sd).mode & S_ISGID);
}

TEST_F(MsTest, UtimesRules)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0666, &alice);
	uint64_t ro = mkfile(d, "ro", 0644, &alice);
	struct ms_setattr sa = {};
	struct ms_attr a;

	sa.valid = MS_SET_ATIME | MS_SET_MTIME;
	sa.atime_ns = 1000000000;
	sa.mtime_ns = 2000000000;
	EXPECT_EQ(ms_setattr(ms, sess, &bob, f, &sa, &a), -EPERM);
	ASSERT_EQ(ms_setattr(ms, sess, &alice, f, &sa, &a), 0);
	EXPECT_EQ(a.atime_ns, 1000000000);
	EXPECT_EQ(a.mtime_ns, 2000000000);
	EXPECT_GT(a.ctime_ns, 2000000000);
	/* _NOW: owner or write access */
	sa.valid = MS_SET_ATIME | MS_SET_MTIME | MS_SET_ATIME_NOW | MS_SET_MTIME_NOW;
	EXPECT_EQ(ms_setattr(ms, sess, &bob, f, &sa, &a), 0);
	EXPECT_GT(a.mtime_ns, 2000000000);
	EXPECT_EQ(ms_setattr(ms, sess, &bob, ro, &sa, &a), -EACCES);
	EXPECT_EQ(ms_setattr(ms, sess, &alice, ro, &sa, &a), 0);
	EXPECT_EQ(ms_setattr(ms, sess, &root, ro, &sa, &a), 0);
}

TEST_F(MsTest, TruncateNeedsWriteAccessOrWriteHandle)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0644, &alice);
	struct ms_setattr sa = {};
	struct ms_attr a;
	uint64_t h;

	sa.valid = MS_SET_SIZE;
	sa.size = 100;
	EXPECT_EQ(ms_setattr(ms, sess, &bob, f, &sa, &a), -EACCES);
	ASSERT_EQ(ms_setattr(ms, sess, &alice, f, &sa, &a), 0);
	EXPECT_EQ(a.size, 100u);
	/* ftruncate on a handle opened for writing before the mode changed */
	ASSERT_EQ(chmod_(f, 0666, &alice), 0);
	ASSERT_EQ(ms_open_file(ms, sess, &bob, f, O_WRONLY, &a, &h), 0);
	ASSERT_EQ(chmod_(f, 0644, &alice), 0);
	sa.size = 10;
	EXPECT_EQ(ms_setattr(ms, sess, &bob, f, &sa, &a), -EACCES);
	sa.handle = h;
	EXPECT_EQ(ms_setattr(ms, sess, &bob, f, &sa, &a), 0);
	EXPECT_EQ(a.size, 10u);
	/* directories and others */
	sa.handle = 0;
	EXPECT_EQ(ms_setattr(ms, sess, &root, d, &sa, &a), -EISDIR);
	struct ms_attr fifo;
	ASSERT_EQ(ms_mknod(ms, sess, &root, 1, "p", S_IFIFO | 0666, 0, 0, 1, 0, 0, &fifo, nullptr), 0);
	EXPECT_EQ(ms_setattr(ms, sess, &root, fifo.ino, &sa, &a), -EINVAL);
}

TEST_F(MsTest, OpenAccessChecks)
{
	uint64_t d = mkdir_(1, "d", 0777);
	uint64_t f = mkfile(d, "f", 0640, &alice);
	struct ms_attr a;
	uint64_t h;

	ASSERT_EQ(chown_(f, -1, 100, &root), 0);
	EXPECT_EQ(ms_open_file(ms, sess, &alice, f, O_RDWR, &a, &h), 0);
	EXPECT_EQ(ms_open_file(ms, sess, &bob, f, O_RDONLY, &a, &h), -EACCES);
	struct ms_cred grp = { 3000, 3000, 1, alice_groups };	/* in group 100 */
	EXPECT_EQ(ms_open_file(ms, sess, &grp, f, O_RDONLY, &a, &h), 0);
	EXPECT_EQ(ms_open_file(ms, sess, &grp, f, O_WRONLY, &a, &h), -EACCES);
	EXPECT_EQ(ms_open_file(ms, sess, &grp, f, O_RDONLY | O_TRUNC, &a, &h), -EACCES);
	EXPECT_EQ(ms_open_file(ms, sess, &root, d, O_RDONLY, &a, &h), 0);
	EXPECT_EQ(ms_open_file(ms, sess, &root, d, O_WRONLY, &a, &h), -EISDIR);
	EXPECT_EQ(ms_open_file(ms, sess, &root, 99999, O_RDONLY, &a, &h), -ENOENT);
	/* O_TRUNC truncates */
	struct ms_setattr sa = {};
	sa.valid = MS_SET_SIZE;
	sa.size = 5000;
	ASSERT_EQ(ms_setattr(ms, sess, &root, f, &sa, &a), 0);
	ASSERT_EQ(ms_open_file(ms, sess, &alice, f, O_WRONLY | O_TRUNC, &a, &h), 0);
	EXPECT_EQ(a.size, 0u);
	EXPECT_EQ(attr(f).size, 0u);
}

TEST_F(MsTest, RootNeedsSomeExecBitToExecute)
{
	uint64_t f = mkfile(1, "f", 0644);
	uint64_t h;
	struct ms_attr a;

	/* root reads and writes a 0000 file */
	ASSERT_EQ(chmod_(f, 0, &root), 0);
	EXPECT_EQ(ms_open_file(ms, sess, &root, f, O_RDWR, &a, &h), 0);
	/* and searches a 0000 directory */
	uint64_t d = mkdir_(1, "d", 0);
	EXPECT_EQ(lookup(d, "x"), -ENOENT);
}
