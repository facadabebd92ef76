// SPDX-License-Identifier: MIT
/*
 * ms_rename_test.cc - rename(2): plain moves, replacing targets with POSIX's
 * rules, RENAME_NOREPLACE, RENAME_EXCHANGE, loops, hard links to one inode,
 * and the nlink and time bookkeeping of the directories involved.
 */
#include <errno.h>
#include <time.h>

#include "ms_fixture.h"

static void tick()
{
	struct timespec ts = { 0, 2000000 };

	nanosleep(&ts, nullptr);
}

TEST_F(MsTest, RenameWithinDirectory)
{
	uint64_t f = mkfile(1, "a"), ino;
	struct ms_attr before = attr(f), r0 = attr(1);

	tick();
	ASSERT_EQ(ms_rename(ms, &root, 1, "a", 1, "b", 0), 0);
	EXPECT_EQ(lookup(1, "a"), -ENOENT);
	ASSERT_EQ(lookup(1, "b", &ino), 0);
	EXPECT_EQ(ino, f);
	EXPECT_GT(attr(f).ctime_ns, before.ctime_ns);
	EXPECT_GT(attr(1).mtime_ns, r0.mtime_ns);
	EXPECT_EQ(ms_rename(ms, &root, 1, "nope", 1, "x", 0), -ENOENT);
}

TEST_F(MsTest, RenameDirectoryAcrossParentsFixesNlinkAndDotDot)
{
	uint64_t a = mkdir_(1, "a"), b = mkdir_(1, "b"), d = mkdir_(a, "d"), ino;

	EXPECT_EQ(attr(a).nlink, 3u);
	ASSERT_EQ(ms_rename(ms, &root, a, "d", b, "d2", 0), 0);
	EXPECT_EQ(attr(a).nlink, 2u);
	EXPECT_EQ(attr(b).nlink, 3u);
	ASSERT_EQ(lookup(d, "..", &ino), 0);
	EXPECT_EQ(ino, b);
	reopen();
	EXPECT_EQ(attr(a).nlink, 2u);
	EXPECT_EQ(attr(b).nlink, 3u);
}

TEST_F(MsTest, RenameReplaceRules)
{
	uint64_t f = mkfile(1, "f"), g = mkfile(1, "g");
	uint64_t d = mkdir_(1, "d"), e = mkdir_(1, "e"), full = mkdir_(1, "full");
	uint64_t ino;
	struct ms_attr a;

	mkfile(full, "x");
	EXPECT_EQ(ms_rename(ms, &root, 1, "f", 1, "d", 0), -EISDIR);
	EXPECT_EQ(ms_rename(ms, &root, 1, "d", 1, "f", 0), -ENOTDIR);
	EXPECT_EQ(ms_rename(ms, &root, 1, "d", 1, "full", 0), -ENOTEMPTY);
	/* file over file: the old target is gone */
	ASSERT_EQ(ms_rename(ms, &root, 1, "f", 1, "g", 0), 0);
	ASSERT_EQ(lookup(1, "g", &ino), 0);
	EXPECT_EQ(ino, f);
	EXPECT_EQ(ms_getattr(ms, g, &a), -ENOENT);
	/* dir over empty dir */
	uint32_t nl = attr(1).nlink;
	ASSERT_EQ(ms_rename(ms, &root, 1, "d", 1, "e", 0), 0);
	EXPECT_EQ(ms_getattr(ms, e, &a), -ENOENT);
	EXPECT_EQ(attr(1).nlink, nl - 1);
	ASSERT_EQ(lookup(1, "e", &ino), 0);
	EXPECT_EQ(ino, d);
}

TEST_F(MsTest, RenameNoreplace)
{
	mkfile(1, "a");
	mkfile(1, "b");
	EXPECT_EQ(ms_rename(ms, &root, 1, "a", 1, "b", MS_RENAME_NOREPLACE), -EEXIST);
	EXPECT_EQ(ms_rename(ms, &root, 1, "a", 1, "c", MS_RENAME_NOREPLACE), 0);
	EXPECT_EQ(lookup(1, "c"), 0);
	EXPECT_EQ(ms_rename(ms, &root, 1, "c", 1, "d", 3), -EINVAL);
	EXPECT_EQ(ms_rename(ms, &root, 1, "c", 1, "d", 4), -EINVAL);
}

TEST_F(MsTest, RenameExchange)
{
	uint64_t f = mkfile(1, "f"), p = mkdir_(1, "p"), d = mkdir_(p, "d"), ino;

	EXPECT_EQ(ms_rename(ms, &root, 1, "f", 1, "none", MS_RENAME_EXCHANGE), -ENOENT);
	/* a file and a directory in different parents swap places */
	ASSERT_EQ(ms_rename(ms, &root, 1, "f", p, "d", MS_RENAME_EXCHANGE), 0);
	ASSERT_EQ(lookup(1, "f", &ino), 0);
	EXPECT_EQ(ino, d);
	ASSERT_EQ(lookup(p, "d", &ino), 0);
	EXPECT_EQ(ino, f);
	EXPECT_EQ(attr(p).nlink, 2u);
	EXPECT_EQ(attr(1).nlink, 4u);	/* root: ., .., p, d */
	ASSERT_EQ(lookup(d, "..", &ino), 0);
	EXPECT_EQ(ino, 1u);
	/* exchanging a directory into its own subtree */
	uint64_t sub = mkdir_(d, "sub");
	(void)sub;
	EXPECT_EQ(ms_rename(ms, &root, 1, "f", d, "sub", MS_RENAME_EXCHANGE), -EINVAL);
}

TEST_F(MsTest, RenameIntoOwnSubtreeIsEinval)
{
	uint64_t a = mkdir_(1, "a"), b = mkdir_(a, "b"), c = mkdir_(b, "c");

	EXPECT_EQ(ms_rename(ms, &root, 1, "a", c, "a", 0), -EINVAL);
	EXPECT_EQ(ms_rename(ms, &root, 1, "a", a, "x", 0), -EINVAL);
	/* the target is an ancestor of the source: not empty */
	EXPECT_EQ(ms_rename(ms, &root, b, "c", 1, "a", 0), -ENOTEMPTY);
	/* moving up is fine */
	EXPECT_EQ(ms_rename(ms, &root, b, "c", 1, "c", 0), 0);
}

TEST_F(MsTest, RenameOfHardLinksToOneInodeIsNoop)
{
	uint64_t f = mkfile(1, "a");
	struct ms_attr a;

	ASSERT_EQ(ms_link(ms, &root, f, 1, "b", &a), 0);
	EXPECT_EQ(ms_rename(ms, &root, 1, "a", 1, "b", 0), 0);
	EXPECT_EQ(lookup(1, "a"), 0);
	EXPECT_EQ(lookup(1, "b"), 0);
	EXPECT_EQ(attr(f).nlink, 2u);
	EXPECT_EQ(ms_rename(ms, &root, 1, "a", 1, "b", MS_RENAME_NOREPLACE), -EEXIST);
}

TEST_F(MsTest, RenamePermissions)
{
	uint64_t mine = mkdir_(1, "mine", 0777), ro = mkdir_(1, "ro", 0755);
	uint64_t d = mkdir_(mine, "d", 0555, &alice);

	mkfile(mine, "f", 0644, &alice);
	mkfile(ro, "r", 0644);
	EXPECT_EQ(ms_rename(ms, &alice, mine, "f", ro, "f", 0), -EACCES);
	EXPECT_EQ(ms_rename(ms, &alice, ro, "r", mine, "r", 0), -EACCES);
	/* a directory moving to a new parent needs write access to itself (for ..) */
	uint64_t other = mkdir_(1, "other", 0777);
	EXPECT_EQ(ms_rename(ms, &alice, mine, "d", other, "d", 0), -EACCES);
	EXPECT_EQ(ms_rename(ms, &alice, mine, "d", mine, "d2", 0), 0);
	(void)d;
}

TEST_F(MsTest, RenameOverOpenFileKeepsItAsOrphan)
{
	uint64_t victim = mkfile(1, "victim"), h;
	struct ms_attr a;

	mkfile(1, "new");
	ASSERT_EQ(ms_open_file(ms, sess, &root, victim, O_RDWR, &a, &h), 0);
	ASSERT_EQ(ms_rename(ms, &root, 1, "new", 1, "victim", 0), 0);
	ASSERT_EQ(ms_getattr(ms, victim, &a), 0);
	EXPECT_EQ(a.nlink, 0u);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	EXPECT_EQ(ms_getattr(ms, victim, &a), -ENOENT);
}
