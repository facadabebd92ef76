// SPDX-License-Identifier: MIT
//
// client_dir_attr_test.cc - the replies of changes to a directory carry its
// attributes, and the first rdfs_getattr() of it after the change is answered
// from them (dir_attr.c): what it answers, and when it must ask again.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <thread>

#include "client_cluster.h"

extern "C" {
#include "rdfs_client.h"
}

namespace {

const struct rdfs_cred root = {};

class ClientDirAttr : public rdfs_test::ClusterSuite<ClientDirAttr> {
public:
	static constexpr int servers = 1;
	static constexpr const char *volume_size = "64m";

protected:
	struct rdfs_client *fresh_client(int ms)
	{
		struct rdfs_client_opts o = cluster->opts();
		struct rdfs_client *k = nullptr;

		o.dir_attr_ms = ms;
		EXPECT_EQ(rdfs_client_open(&o, &k), 0);
		return k;
	}
	uint64_t hits(struct rdfs_client *k)
	{
		struct rdfs_client_stats s;

		rdfs_client_stats(k, &s);
		return s.dir_attr_hits;
	}
	// The directory's attributes as the metaserver has them now.
	struct stat truth(uint64_t ino)
	{
		struct stat st;

		EXPECT_EQ(rdfs_getattr(c, &root, ino, &st), 0);	// c: dir_attr_ms 0
		return st;
	}
	uint64_t mkdir(struct rdfs_client *k, const char *name)
	{
		struct stat st;

		EXPECT_EQ(rdfs_mkdir(k, &root, RDFS_ROOT_INO, name, 0755, &st), 0);
		return st.st_ino;
	}
};

void expect_same(const struct stat &a, const struct stat &b)
{
	EXPECT_EQ(a.st_ino, b.st_ino);
	EXPECT_EQ(a.st_mode, b.st_mode);
	EXPECT_EQ(a.st_nlink, b.st_nlink);
	EXPECT_EQ(a.st_mtim.tv_sec, b.st_mtim.tv_sec);
	EXPECT_EQ(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec);
	EXPECT_EQ(a.st_ctim.tv_nsec, b.st_ctim.tv_nsec);
}

// Each change answers exactly one getattr of its directory, with the
// directory's attributes after the change (new mtime, nlink of a mkdir).
TEST_F(ClientDirAttr, EachChangeAnswersOneGetattrWithTheNewAttributes)
{
	struct rdfs_client *k = fresh_client(60000);
	uint64_t dir = mkdir(k, "d1");
	struct stat st, before = truth(dir);
	struct rdfs_file *f = nullptr;

	std::this_thread::sleep_for(std::chrono::milliseconds(2));
	ASSERT_EQ(rdfs_create(k, &root, dir, "f", 0644, O_WRONLY, &st, &f), 0);
	ASSERT_EQ(rdfs_release(f), 0);
	uint64_t h = hits(k);
	ASSERT_EQ(rdfs_getattr(k, &root, dir, &st), 0);
	EXPECT_EQ(hits(k), h + 1);
	expect_same(st, truth(dir));
	EXPECT_NE(st.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
	// used up: the next one asks
	ASSERT_EQ(rdfs_getattr(k, &root, dir, &st), 0);
	EXPECT_EQ(hits(k), h + 1);

	ASSERT_EQ(rdfs_mkdir(k, &root, dir, "sub", 0755, &st), 0);
	ASSERT_EQ(rdfs_getattr(k, &root, dir, &st), 0);
	EXPECT_EQ(hits(k), h + 2);
	EXPECT_EQ(st.st_nlink, 3u);
	expect_same(st, truth(dir));

	ASSERT_EQ(rdfs_rmdir(k, &root, dir, "sub"), 0);
	ASSERT_EQ(rdfs_getattr(k, &root, dir, &st), 0);
	EXPECT_EQ(hits(k), h + 3);
	EXPECT_EQ(st.st_nlink, 2u);
	expect_same(st, truth(dir));

	ASSERT_EQ(rdfs_symlink(k, &root, dir, "l", "f", &st), 0);
	ASSERT_EQ(rdfs_getattr(k, &root, dir, &st), 0);
	expect_same(st, truth(dir));
	ASSERT_EQ(rdfs_unlink(k, &root, dir, "l"), 0);
	ASSERT_EQ(rdfs_getattr(k, &root, dir, &st), 0);
	expect_same(st, truth(dir));
	EXPECT_EQ(hits(k), h + 5);
	rdfs_client_close(k);
}

// A rename answers for both directories, and forgets the moved directory.
TEST_F(ClientDirAttr, RenameAnswersForBothDirectories)
{
	struct rdfs_client *k = fresh_client(60000);
	uint64_t a = mkdir(k, "ra"), b = mkdir(k, "rb");
	struct stat st, moved;

	ASSERT_EQ(rdfs_mkdir(k, &root, a, "m", 0755, &moved), 0);
	ASSERT_EQ(rdfs_mkdir(k, &root, moved.st_ino, "x", 0755, &st), 0);	// keeps m
	ASSERT_EQ(rdfs_rename(k, &root, a, "m", b, "m", 0), 0);
	uint64_t h = hits(k);
	ASSERT_EQ(rdfs_getattr(k, &root, a, &st), 0);
	expect_same(st, truth(a));
	EXPECT_EQ(st.st_nlink, 2u);
	ASSERT_EQ(rdfs_getattr(k, &root, b, &st), 0);
	expect_same(st, truth(b));
	EXPECT_EQ(st.st_nlink, 3u);
	EXPECT_EQ(hits(k), h + 2);
	// m's own attributes (its ctime moved) come from the metaserver
	ASSERT_EQ(rdfs_getattr(k, &root, moved.st_ino, &st), 0);
	EXPECT_EQ(hits(k), h + 2);
	expect_same(st, truth(moved.st_ino));
	rdfs_client_close(k);
}

// setattr and xattr changes of the directory itself forget it; so does the
// window's end; and a client without the option always asks.
TEST_F(ClientDirAttr, ChangesWithoutAttributesAndTimeForgetIt)
{
	struct rdfs_client *k = fresh_client(60000);
	uint64_t dir = mkdir(k, "d3");
	struct stat st, set = {};

	ASSERT_EQ(rdfs_mknod(k, &root, dir, "n1", S_IFREG | 0644, 0, &st), 0);
	set.st_mode = 0700;
	ASSERT_EQ(rdfs_setattr(k, &root, dir, &set, RDFS_SET_MODE, nullptr, &st), 0);
	uint64_t h = hits(k);
	ASSERT_EQ(rdfs_getattr(k, &root, dir, &st), 0);
	EXPECT_EQ(hits(k), h);
	EXPECT_EQ(st.st_mode & 07777, 0700u);

	ASSERT_EQ(rdfs_mknod(k, &root, dir, "n2", S_IFREG | 0644, 0, &st), 0);
	ASSERT_EQ(rdfs_setxattr(k, &root, dir, "user.a", "v", 1, 0), 0);
	ASSERT_EQ(rdfs_getattr(k, &root, dir, &st), 0);
	EXPECT_EQ(hits(k), h);
	expect_same(st, truth(dir));
	rdfs_client_close(k);

	k = fresh_client(1);
	ASSERT_EQ(rdfs_mknod(k, &root, dir, "n3", S_IFREG | 0644, 0, &st), 0);
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	ASSERT_EQ(rdfs_getattr(k, &root, dir, &st), 0);
	EXPECT_EQ(hits(k), 0u);
	rdfs_client_close(k);

	ASSERT_EQ(rdfs_mknod(c, &root, dir, "n4", S_IFREG | 0644, 0, &st), 0);
	ASSERT_EQ(rdfs_getattr(c, &root, dir, &st), 0);
	EXPECT_EQ(hits(c), 0u);
}

} // namespace
