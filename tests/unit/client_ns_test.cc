// SPDX-License-Identifier: MIT
//
// client_ns_test.cc - the client's namespace calls against a real metaserver:
// directory streams with stable indexes, xattr size rules, statfs, server
// list, and the `rdfs` tool's commands.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <set>

#include "client_cluster.h"

extern "C" {
#include "rdfs_client.h"
}

namespace {

const struct rdfs_cred root = {};

class ClientNs : public rdfs_test::ClusterSuite<ClientNs> {
public:
	static constexpr int servers = 2;
	static constexpr const char *volume_size = "64m";

protected:
	std::string tool(const std::string &args, int *status)
	{
		std::string conf = cluster->dir + "/empty.conf";
		fclose(fopen(conf.c_str(), "w"));
		std::string cmd = rdfs_test::bin_dir() + "/rdfs --config " + conf +
				  " --metaserver " + cluster->ms_url +
				  " --secret-file " + cluster->secret_path + " " + args + " 2>&1";
		FILE *p = popen(cmd.c_str(), "r");
		std::string out;
		char buf[4096];
		size_t n;

		while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
			out.append(buf, n);
		int st = pclose(p);
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		return out;
	}
};

TEST_F(ClientNs, DirectoryStreamKeepsIndexesAcrossPages)
{
	struct stat st;
	ASSERT_EQ(rdfs_mkdir(c, &root, RDFS_ROOT_INO, "many", 0755, &st), 0);
	uint64_t dir = st.st_ino;
	std::set<std::string> names;

	for (int i = 0; i < 2500; i++) {
		std::string n = "e" + std::to_string(i);
		ASSERT_EQ(rdfs_mknod(c, &root, dir, n.c_str(), S_IFREG | 0644, 0, &st), 0);
		names.insert(n);
	}
	struct rdfs_dir *d = nullptr;
	ASSERT_EQ(rdfs_opendir(c, &root, dir, &d), 0);
	struct rdfs_dirent ent;
	std::vector<std::string> seen;
	for (uint64_t i = 0;; i++) {
		int r = rdfs_readdir_at(d, i, &ent);
		ASSERT_GE(r, 0);
		if (r == 0)
			break;
		seen.push_back(ent.name);
		EXPECT_EQ(ent.type, (mode_t)S_IFREG);
	}
	EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), names);
	EXPECT_EQ(seen.size(), names.size());
	// seekdir back: the same index names the same entry
	ASSERT_EQ(rdfs_readdir_at(d, 1234, &ent), 1);
	EXPECT_EQ(seen[1234], ent.name);
	EXPECT_EQ(rdfs_readdir_at(d, seen.size(), &ent), 0);
	rdfs_closedir(d);

	EXPECT_EQ(rdfs_opendir(c, &root, 999999, &d), -ENOENT);
}

TEST_F(ClientNs, XattrSizeRules)
{
	struct stat st;
	ASSERT_EQ(rdfs_mknod(c, &root, RDFS_ROOT_INO, "x", S_IFREG | 0644, 0, &st), 0);
	ASSERT_EQ(rdfs_setxattr(c, &root, st.st_ino, "user.a", "hello", 5, 0), 0);
	ASSERT_EQ(rdfs_setxattr(c, &root, st.st_ino, "user.bb", "", 0, 0), 0);
	char buf[64];
	EXPECT_EQ(rdfs_getxattr(c, &root, st.st_ino, "user.a", nullptr, 0), 5);
	EXPECT_EQ(rdfs_getxattr(c, &root, st.st_ino, "user.a", buf, 4), -ERANGE);
	EXPECT_EQ(rdfs_getxattr(c, &root, st.st_ino, "user.a", buf, sizeof(buf)), 5);
	EXPECT_EQ(memcmp(buf, "hello", 5), 0);
	EXPECT_EQ(rdfs_getxattr(c, &root, st.st_ino, "user.none", buf, sizeof(buf)), -ENODATA);
	int need = rdfs_listxattr(c, &root, st.st_ino, nullptr, 0);
	EXPECT_EQ(need, (int)(sizeof("user.a") + sizeof("user.bb")));
	EXPECT_EQ(rdfs_listxattr(c, &root, st.st_ino, buf, need - 1), -ERANGE);
	ASSERT_EQ(rdfs_listxattr(c, &root, st.st_ino, buf, sizeof(buf)), need);
	std::set<std::string> got = { buf, buf + strlen(buf) + 1 };
	EXPECT_EQ(got, (std::set<std::string>{ "user.a", "user.bb" }));
	EXPECT_EQ(rdfs_removexattr(c, &root, st.st_ino, "user.a"), 0);
	EXPECT_EQ(rdfs_getxattr(c, &root, st.st_ino, "user.a", nullptr, 0), -ENODATA);
}

// The caller's umask travels with mknod, mkdir and create; a default ACL on
// the parent replaces it (the metaserver decides: only it knows the parent).
TEST_F(ClientNs, UmaskTravelsWithCreates)
{
	struct rdfs_cred um = {};
	struct rdfs_file *f = nullptr;
	struct stat st, d;

	um.umask = 027;
	ASSERT_EQ(rdfs_mkdir(c, &um, RDFS_ROOT_INO, "um", 0777, &d), 0);
	EXPECT_EQ(d.st_mode & 07777, 0750u);
	ASSERT_EQ(rdfs_mknod(c, &um, d.st_ino, "n", S_IFREG | 0666, 0, &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0640u);
	ASSERT_EQ(rdfs_create(c, &um, d.st_ino, "c", 0666, O_RDWR | O_CREAT, &st, &f), 0);
	EXPECT_EQ(st.st_mode & 07777, 0640u);
	EXPECT_EQ(rdfs_release(f), 0);
	/* d:u::rwx d:g::r-x d:o::r-x */
	const uint8_t def[] = { 2, 0, 0, 0, 1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
				4, 0, 5, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 5, 0, 0xff, 0xff, 0xff, 0xff };
	ASSERT_EQ(rdfs_setxattr(c, &root, d.st_ino, "system.posix_acl_default", def, sizeof(def), 0),
		  0);
	ASSERT_EQ(rdfs_mknod(c, &um, d.st_ino, "n2", S_IFREG | 0666, 0, &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0644u);	/* umask 027 would give 0640 */
	ASSERT_EQ(rdfs_mkdir(c, &um, d.st_ino, "d2", 0777, &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0755u);
}

TEST_F(ClientNs, StatfsAndServerListAgree)
{
	struct statvfs sv;
	struct rdfs_server_info s[8];

	ASSERT_EQ(rdfs_statfs(c, &root, &sv), 0);
	int n = rdfs_server_list(c, s, 8);
	ASSERT_EQ(n, 2);
	uint64_t total = 0;
	for (int i = 0; i < n; i++) {
		EXPECT_TRUE(s[i].up);
		EXPECT_GT(s[i].capacity_blocks, 0u);
		total += s[i].capacity_blocks;
	}
	EXPECT_EQ(sv.f_frsize, 4096u);
	EXPECT_EQ(sv.f_blocks, total);
	EXPECT_EQ(sv.f_namemax, 255u);
	EXPECT_EQ(rdfs_server_list(c, s, 1), 2);
}

TEST_F(ClientNs, SymlinkAndReadlink)
{
	struct stat st;
	char buf[8];
	ASSERT_EQ(rdfs_symlink(c, &root, RDFS_ROOT_INO, "ln", "target/path", &st), 0);
	EXPECT_TRUE(S_ISLNK(st.st_mode));
	EXPECT_EQ(rdfs_readlink(c, &root, st.st_ino, buf, sizeof(buf)), 11);
	EXPECT_STREQ(buf, "target/");
	std::string longname(256, 'n');
	EXPECT_EQ(rdfs_lookup(c, &root, RDFS_ROOT_INO, longname.c_str(), &st), -ENAMETOOLONG);
}

TEST_F(ClientNs, ToolCommands)
{
	int status;
	struct stat st;
	struct rdfs_file *f = nullptr;

	std::string out = tool("status", &status);
	EXPECT_EQ(status, 0) << out;
	EXPECT_NE(out.find("ios0"), std::string::npos) << out;
	EXPECT_NE(out.find("ios1"), std::string::npos) << out;
	EXPECT_NE(out.find("2 I/O servers, 2 up"), std::string::npos) << out;

	out = tool("df", &status);
	EXPECT_EQ(status, 0) << out;
	EXPECT_NE(out.find("Size"), std::string::npos) << out;

	ASSERT_EQ(rdfs_mkdir(c, &root, RDFS_ROOT_INO, "tooldir", 0755, &st), 0);
	ASSERT_EQ(rdfs_create(c, &root, st.st_ino, "file", 0644, O_RDWR | O_CREAT, &st, &f), 0);
	std::vector<uint8_t> data(3 << 20, 1);
	ASSERT_EQ(rdfs_pwrite(f, data.data(), data.size(), 0), (ssize_t)data.size());
	ASSERT_EQ(rdfs_release(f), 0);

	out = tool("layout /tooldir/file", &status);
	EXPECT_EQ(status, 0) << out;
	EXPECT_NE(out.find("size:        3145728"), std::string::npos) << out;
	EXPECT_NE(out.find("chunk size:  1048576"), std::string::npos) << out;
	EXPECT_NE(out.find("written"), std::string::npos) << out;

	out = tool("ls -l /tooldir", &status);
	EXPECT_EQ(status, 0) << out;
	EXPECT_NE(out.find("3145728"), std::string::npos) << out;
	out = tool("stat /tooldir/file", &status);
	EXPECT_EQ(status, 0) << out;
	EXPECT_NE(out.find("regular file"), std::string::npos) << out;

	out = tool("stat /tooldir/nothing", &status);
	EXPECT_EQ(status, 1) << out;
	EXPECT_NE(out.find("No such file or directory"), std::string::npos) << out;
	out = tool("bogus", &status);
	EXPECT_EQ(status, 2) << out;
}

} // namespace

namespace {

// Readdirplus: pages carry each entry's attributes, the same as GETATTR
// answers; only the last page's are kept, and a plain stream has none.
TEST_F(ClientNs, ReaddirPlusCarriesEachEntrysAttributes)
{
	struct stat st;
	ASSERT_EQ(rdfs_mkdir(c, &root, RDFS_ROOT_INO, "plus", 0755, &st), 0);
	uint64_t dir = st.st_ino;
	const int n = 1500;	// two pages

	for (int i = 0; i < n; i++) {
		std::string name = "p" + std::to_string(10000 + i);
		if (i % 7 == 0)
			ASSERT_EQ(rdfs_mkdir(c, &root, dir, name.c_str(), 0700, &st), 0);
		else
			ASSERT_EQ(rdfs_mknod(c, &root, dir, name.c_str(), S_IFREG | (0600 + i % 64),
					     0, &st), 0);
	}
	struct rdfs_dir *d = nullptr;
	struct rdfs_dirent ent;
	ASSERT_EQ(rdfs_opendir_flags(c, &root, dir, RDFS_DIR_PLUS, &d), 0);
	int with = 0;
	for (uint64_t i = 0;; i++) {
		int r = rdfs_readdir_at(d, i, &ent);
		ASSERT_GE(r, 0);
		if (r == 0)
			break;
		ASSERT_TRUE(ent.has_attr) << ent.name;
		with++;
		ASSERT_EQ(rdfs_getattr(c, &root, ent.ino, &st), 0);
		EXPECT_EQ(ent.st.st_ino, st.st_ino);
		EXPECT_EQ(ent.st.st_mode, st.st_mode) << ent.name;
		EXPECT_EQ(ent.st.st_nlink, st.st_nlink);
		EXPECT_EQ(ent.st.st_mtim.tv_nsec, st.st_mtim.tv_nsec);
		EXPECT_EQ(ent.st.st_mode & S_IFMT, ent.type);
	}
	EXPECT_EQ(with, n);
	// an entry of the first page, asked for again after the second: no attributes kept
	ASSERT_EQ(rdfs_readdir_at(d, 3, &ent), 1);
	EXPECT_FALSE(ent.has_attr);
	rdfs_closedir(d);

	ASSERT_EQ(rdfs_opendir(c, &root, dir, &d), 0);
	ASSERT_EQ(rdfs_readdir_at(d, 0, &ent), 1);
	EXPECT_FALSE(ent.has_attr);
	EXPECT_STREQ(ent.name, "p10000");
	rdfs_closedir(d);
}

} // namespace

namespace {

// A NULL credential is root's (rdfs-sweep, rdfs-bench -a RDFS use it): every
// call that takes one accepts it, including those that carry the umask.
TEST_F(ClientNs, NullCredIsRootForEveryCreate)
{
	struct stat st;
	struct rdfs_file *f = nullptr;

	ASSERT_EQ(rdfs_mkdir(c, nullptr, RDFS_ROOT_INO, "nullcred", 0755, &st), 0);
	uint64_t dir = st.st_ino;
	EXPECT_EQ(st.st_uid, 0u);
	ASSERT_EQ(rdfs_create(c, nullptr, dir, "f", 0644, O_WRONLY | O_EXCL, &st, &f), 0);
	EXPECT_EQ(st.st_mode & 07777, 0644u);
	EXPECT_EQ(rdfs_release(f), 0);
	ASSERT_EQ(rdfs_mknod(c, nullptr, dir, "n", S_IFREG | 0600, 0, &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0600u);
	ASSERT_EQ(rdfs_symlink(c, nullptr, dir, "l", "f", &st), 0);
	EXPECT_EQ(rdfs_unlink(c, nullptr, dir, "l"), 0);
}

} // namespace
