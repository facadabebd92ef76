// SPDX-License-Identifier: MIT
/*
 * ms_ns_test.cc - namespace operations of the metaserver core against a real
 * LevelDB: create, lookup, link, symlink, unlink, rmdir, their errno cases,
 * nlink and time updates, and what survives a reopen.
 */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <thread>

#include "ms_fixture.h"

TEST_F(MsTest, RootIsCreatedOnEmptyDatabase)
{
	struct ms_attr a = attr(MS_ROOT_INO);

	EXPECT_EQ(a.mode, (uint32_t)(S_IFDIR | 0755));
	EXPECT_EQ(a.uid, 0u);
	EXPECT_EQ(a.gid, 0u);
	EXPECT_EQ(a.nlink, 2u);
	EXPECT_EQ(a.chunk_size, MS_DEFAULT_CHUNK);
}

TEST_F(MsTest, MknodLookupGetattr)
{
	struct ms_attr a, b;

	ASSERT_EQ(ms_mknod(ms, sess, &alice, MS_ROOT_INO, "f", S_IFREG | 0640, 0, 0, 1, 0, 0, &a,
			   nullptr), -EACCES);
	ASSERT_EQ(ms_mknod(ms, sess, &root, MS_ROOT_INO, "f", S_IFREG | 0640, 0, 0, 1, 0, 0, &a,
			   nullptr), 0);
	EXPECT_EQ(a.mode, (uint32_t)(S_IFREG | 0640));
	EXPECT_EQ(a.nlink, 1u);
	EXPECT_EQ(a.size, 0u);
	ASSERT_EQ(ms_lookup(ms, &root, MS_ROOT_INO, "f", &b), 0);
	EXPECT_EQ(b.ino, a.ino);
	EXPECT_EQ(ms_lookup(ms, &root, MS_ROOT_INO, "g", &b), -ENOENT);
	EXPECT_EQ(ms_lookup(ms, &root, a.ino, "x", &b), -ENOTDIR);
	EXPECT_EQ(ms_getattr(ms, 999999, &b), -ENOENT);
	/* type 0 means a regular file */
	ASSERT_EQ(ms_mknod(ms, sess, &root, MS_ROOT_INO, "g", 0600, 0, 0, 0, 0, 0, &b, nullptr), 0);
	EXPECT_TRUE(S_ISREG(b.mode));
}

TEST_F(MsTest, MknodKinds)
{
	struct ms_attr a;

	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, "fifo", S_IFIFO | 0644, 0, 0, 1, 0, 0, &a, nullptr), 0);
	EXPECT_TRUE(S_ISFIFO(a.mode));
	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, "sock", S_IFSOCK | 0644, 0, 0, 1, 0, 0, &a, nullptr), 0);
	EXPECT_TRUE(S_ISSOCK(a.mode));
	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, "chr", S_IFCHR | 0644, 0, 0x0103, 1, 0, 0, &a, nullptr), 0);
	EXPECT_EQ(a.rdev, 0x0103u);
	uint64_t d = mkdir_(1, "d", 0777);
	EXPECT_EQ(ms_mknod(ms, sess, &alice, d, "blk", S_IFBLK | 0644, 0, 1, 1, 0, 0, &a, nullptr), -EPERM);
	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, "dir", S_IFDIR | 0755, 0, 0, 1, 0, 0, &a, nullptr), -EPERM);
	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, "lnk", S_IFLNK | 0755, 0, 0, 1, 0, 0, &a, nullptr), -EINVAL);
}

TEST_F(MsTest, CreateExclusiveAndOpenExisting)
{
	struct ms_attr a, b;
	uint64_t h1 = 0, h2 = 0;

	ASSERT_EQ(ms_mknod(ms, sess, &root, 1, "f", S_IFREG | 0644, 0, 0, 1, 1, O_RDWR, &a, &h1), 0);
	EXPECT_NE(h1, 0u);
	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, "f", S_IFREG | 0644, 0, 0, 1, 1, O_RDWR, &b, &h2), -EEXIST);
	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, "f", S_IFREG | 0644, 0, 0, 1, 0, 0, &b, nullptr), -EEXIST);
	ASSERT_EQ(ms_mknod(ms, sess, &root, 1, "f", S_IFREG | 0644, 0, 0, 0, 1, O_RDWR, &b, &h2), 0);
	EXPECT_EQ(b.ino, a.ino);
	EXPECT_NE(h2, h1);
	mkdir_(1, "d");
	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, "d", S_IFREG | 0644, 0, 0, 0, 1, O_RDONLY, &b, &h2), -EISDIR);
	EXPECT_EQ(ms_release(ms, sess, h1), 0);
	EXPECT_EQ(ms_release(ms, sess, h1), -EBADF);
}

TEST_F(MsTest, CreatorMayOpenForWriteWhateverTheMode)
{
	struct ms_attr a;
	uint64_t d = mkdir_(1, "d", 0777), h;

	ASSERT_EQ(ms_mknod(ms, sess, &alice, d, "ro", S_IFREG | 0444, 0, 0, 1, 1, O_WRONLY, &a, &h), 0);
	EXPECT_EQ(a.uid, 1000u);
	EXPECT_EQ(a.gid, 1000u);
	/* but opening again is checked */
	EXPECT_EQ(ms_open_file(ms, sess, &alice, a.ino, O_WRONLY, &a, &h), -EACCES);
}

TEST_F(MsTest, NameLengthLimits)
{
	std::string n255(255, 'a'), n256(256, 'b');
	struct ms_attr a;

	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, n255.c_str(), 0644, 0, 0, 1, 0, 0, &a, nullptr), 0);
	EXPECT_EQ(lookup(1, n255.c_str()), 0);
	EXPECT_EQ(ms_mknod(ms, sess, &root, 1, n256.c_str(), 0644, 0, 0, 1, 0, 0, &a, nullptr), -ENAMETOOLONG);
	EXPECT_EQ(ms_mkdir(ms, &root, 1, n256.c_str(), 0755, 0, &a), -ENAMETOOLONG);
	EXPECT_EQ(lookup(1, n256.c_str()), -ENAMETOOLONG);
	EXPECT_EQ(ms_unlink(ms, &root, 1, n256.c_str()), -ENAMETOOLONG);
	EXPECT_EQ(ms_rmdir(ms, &root, 1, n256.c_str()), -ENAMETOOLONG);
	EXPECT_EQ(ms_symlink(ms, &root, 1, n256.c_str(), "t", &a), -ENAMETOOLONG);
	EXPECT_EQ(ms_rename(ms, &root, 1, n255.c_str(), 1, n256.c_str(), 0), -ENAMETOOLONG);
	EXPECT_EQ(ms_link(ms, &root, a.ino, 1, n256.c_str(), &a), -ENAMETOOLONG);
	EXPECT_EQ(ms_mkdir(ms, &root, 1, "a/b", 0755, 0, &a), -EINVAL);
	EXPECT_EQ(ms_mkdir(ms, &root, 1, "", 0755, 0, &a), -ENOENT);
}

TEST_F(MsTest, MkdirNlinkAndTimes)
{
	struct ms_attr before = attr(1);
	struct timespec ts = { 0, 2000000 };

	nanosleep(&ts, nullptr);
	uint64_t d = mkdir_(1, "d");
	struct ms_attr r = attr(1), a = attr(d);

	EXPECT_EQ(r.nlink, 3u);
	EXPECT_EQ(a.nlink, 2u);
	EXPECT_GT(r.mtime_ns, before.mtime_ns);
	EXPECT_GT(r.ctime_ns, before.ctime_ns);
	mkdir_(d, "sub");
	EXPECT_EQ(attr(d).nlink, 3u);
	mkfile(d, "file");
	EXPECT_EQ(attr(d).nlink, 3u);
	struct ms_attr x;
	EXPECT_EQ(ms_mkdir(ms, &root, 1, "d", 0755, 0, &x), -EEXIST);
	EXPECT_EQ(ms_mkdir(ms, &root, 1, ".", 0755, 0, &x), -EEXIST);
	EXPECT_EQ(ms_mkdir(ms, &root, 1, "..", 0755, 0, &x), -EEXIST);
	EXPECT_EQ(ms_mkdir(ms, &root, 424242, "z", 0755, 0, &x), -ENOENT);
	/* lookup of . and .. */
	uint64_t ino;
	EXPECT_EQ(lookup(d, ".", &ino), 0);
	EXPECT_EQ(ino, d);
	EXPECT_EQ(lookup(d, "..", &ino), 0);
	EXPECT_EQ(ino, 1u);
}

TEST_F(MsTest, MkdirInsideExistingNameInReadonlyDirIsEexist)
{
	uint64_t d = mkdir_(1, "d", 0555);
	struct ms_attr a;

	mkdir_(d, "x");
	EXPECT_EQ(ms_mkdir(ms, &alice, d, "x", 0755, 0, &a), -EEXIST);
	EXPECT_EQ(ms_mkdir(ms, &alice, d, "y", 0755, 0, &a), -EACCES);
}

TEST_F(MsTest, SymlinkReadlink)
{
	struct ms_attr a;
	char buf[4096];
	std::string t4095(4095, 'x'), t4096(4096, 'y');

	ASSERT_EQ(ms_symlink(ms, &root, 1, "l", "../target", &a), 0);
	EXPECT_TRUE(S_ISLNK(a.mode));
	EXPECT_EQ(a.size, 9u);
	EXPECT_EQ(ms_readlink(ms, &root, a.ino, buf), 9);
	EXPECT_STREQ(buf, "../target");
	EXPECT_EQ(ms_symlink(ms, &root, 1, "long", t4095.c_str(), &a), 0);
	EXPECT_EQ(ms_readlink(ms, &root, a.ino, buf), 4095);
	EXPECT_EQ(ms_symlink(ms, &root, 1, "toolong", t4096.c_str(), &a), -ENAMETOOLONG);
	EXPECT_EQ(ms_symlink(ms, &root, 1, "empty", "", &a), -ENOENT);
	EXPECT_EQ(ms_symlink(ms, &root, 1, "l", "x", &a), -EEXIST);
	EXPECT_EQ(ms_readlink(ms, &root, mkfile(1, "f"), buf), -EINVAL);
	reopen();
	EXPECT_EQ(lookup(1, "l", &a.ino), 0);
	EXPECT_EQ(ms_readlink(ms, &root, a.ino, buf), 9);
	EXPECT_STREQ(buf, "../target");
}

TEST_F(MsTest, LinkRules)
{
	uint64_t f = mkfile(1, "f"), d = mkdir_(1, "d");
	struct ms_attr a, before = attr(f);
	struct timespec ts = { 0, 2000000 };

	nanosleep(&ts, nullptr);
	ASSERT_EQ(ms_link(ms, &root, f, d, "g", &a), 0);
	EXPECT_EQ(a.nlink, 2u);
	EXPECT_GT(a.ctime_ns, before.ctime_ns);
	EXPECT_EQ(ms_link(ms, &root, d, 1, "dl", &a), -EPERM);
	EXPECT_EQ(ms_link(ms, &root, f, d, "g", &a), -EEXIST);
	EXPECT_EQ(ms_link(ms, &root, f, f, "x", &a), -ENOTDIR);
	EXPECT_EQ(ms_link(ms, &root, 77777, d, "x", &a), -ENOENT);
	EXPECT_EQ(ms_link(ms, &alice, f, d, "x", &a), -EACCES);
	uint64_t ino;
	ASSERT_EQ(lookup(d, "g", &ino), 0);
	EXPECT_EQ(ino, f);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(attr(f).nlink, 1u);
	ASSERT_EQ(ms_unlink(ms, &root, d, "g"), 0);
	EXPECT_EQ(ms_getattr(ms, f, &a), -ENOENT);
}

TEST_F(MsTest, UnlinkRmdirErrors)
{
	uint64_t d = mkdir_(1, "d"), f = mkfile(1, "f");
	struct ms_attr before = attr(1);
	struct timespec ts = { 0, 2000000 };

	mkfile(d, "inner");
	EXPECT_EQ(ms_unlink(ms, &root, 1, "d"), -EISDIR);
	EXPECT_EQ(ms_rmdir(ms, &root, 1, "f"), -ENOTDIR);
	EXPECT_EQ(ms_rmdir(ms, &root, 1, "d"), -ENOTEMPTY);
	EXPECT_EQ(ms_unlink(ms, &root, 1, "nope"), -ENOENT);
	EXPECT_EQ(ms_rmdir(ms, &root, 1, "nope"), -ENOENT);
	EXPECT_EQ(ms_rmdir(ms, &root, d, "."), -EINVAL);
	EXPECT_EQ(ms_rmdir(ms, &root, d, ".."), -ENOTEMPTY);
	EXPECT_EQ(ms_unlink(ms, &root, f, "x"), -ENOTDIR);
	EXPECT_EQ(ms_unlink(ms, &alice, 1, "f"), -EACCES);
	nanosleep(&ts, nullptr);
	ASSERT_EQ(ms_unlink(ms, &root, d, "inner"), 0);
	ASSERT_EQ(ms_rmdir(ms, &root, 1, "d"), 0);
	struct ms_attr r = attr(1);
	EXPECT_EQ(r.nlink, 2u);
	EXPECT_GT(r.mtime_ns, before.mtime_ns);
	EXPECT_EQ(lookup(1, "d"), -ENOENT);
	struct ms_attr a;
	EXPECT_EQ(ms_getattr(ms, d, &a), -ENOENT);
	/* a removed directory cannot get new entries */
	EXPECT_EQ(ms_mkdir(ms, &root, d, "x", 0755, 0, &a), -ENOENT);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(ms_getattr(ms, f, &a), -ENOENT);
}

TEST_F(MsTest, UnlinkUpdatesTargetCtime)
{
	uint64_t f = mkfile(1, "f");
	struct ms_attr a, before = attr(f);
	struct timespec ts = { 0, 2000000 };

	ASSERT_EQ(ms_link(ms, &root, f, 1, "g", &a), 0);
	before = attr(f);
	nanosleep(&ts, nullptr);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "g"), 0);
	a = attr(f);
	EXPECT_EQ(a.nlink, 1u);
	EXPECT_GT(a.ctime_ns, before.ctime_ns);
}

TEST_F(MsTest, StatfsCountsFiles)
{
	struct ms_statfs st;

	ASSERT_EQ(ms_statfs(ms, &st), 0);
	EXPECT_EQ(st.files, 1u);
	mkfile(1, "a");
	mkdir_(1, "b");
	ASSERT_EQ(ms_statfs(ms, &st), 0);
	EXPECT_EQ(st.files, 3u);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "a"), 0);
	ASSERT_EQ(ms_statfs(ms, &st), 0);
	EXPECT_EQ(st.files, 2u);
	reopen();
	ASSERT_EQ(ms_statfs(ms, &st), 0);
	EXPECT_EQ(st.files, 2u);
	EXPECT_GT(st.free_files, 0u);
}

TEST_F(MsTest, DurableAcrossReopen)
{
	uint64_t d = mkdir_(1, "dir", 0750), f = mkfile(d, "file", 0600), ino;
	struct ms_attr a;
	uint64_t h;

	ASSERT_EQ(chown_(f, 1000, 100, &root), 0);
	ASSERT_EQ(ms_setxattr(ms, &root, f, "user.k", "v", 1, 0), 0);
	ASSERT_EQ(ms_symlink(ms, &root, d, "ln", "file", &a), 0);
	ASSERT_EQ(ms_open_file(ms, sess, &root, f, O_RDWR, &a, &h), 0);
	reopen();
	ASSERT_EQ(lookup(1, "dir", &ino), 0);
	EXPECT_EQ(ino, d);
	a = attr(d);
	EXPECT_EQ(a.mode, (uint32_t)(S_IFDIR | 0750));
	EXPECT_EQ(a.nlink, 2u);
	ASSERT_EQ(lookup(d, "file", &ino), 0);
	a = attr(ino);
	EXPECT_EQ(a.uid, 1000u);
	EXPECT_EQ(a.gid, 100u);
	void *v = nullptr;
	ASSERT_EQ(ms_getxattr(ms, &root, f, "user.k", &v), 1);
	free(v);
	EXPECT_EQ(list(d), (std::vector<std::string>{ "file", "ln" }));
	/* inode numbers are never handed out twice, even across restarts */
	uint64_t g = mkfile(1, "new");
	EXPECT_GT(g, f);
	EXPECT_NE(g, d);
}

TEST_F(MsTest, ConcurrentCreatesInOneDirectory)
{
	const int nthreads = 8, per = 200;
	std::vector<std::thread> ts;

	for (int t = 0; t < nthreads; t++)
		ts.emplace_back([this, t]() {
			for (int i = 0; i < per; i++) {
				char name[32];
				struct ms_attr a;

				snprintf(name, sizeof(name), "t%d-%d", t, i);
				EXPECT_EQ(ms_mknod(ms, sess, &root, 1, name, 0644, 0, 0, 1, 0, 0, &a,
						   nullptr), 0);
			}
		});
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(list(1).size(), (size_t)(nthreads * per));
	struct ms_statfs st;
	ms_statfs(ms, &st);
	EXPECT_EQ(st.files, (uint64_t)(nthreads * per + 1));
}
