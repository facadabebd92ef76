// SPDX-License-Identifier: MIT
/*
 * ms_fixture.h - the metaserver unit tests' fixture: a real LevelDB in a fresh
 * mkdtemp directory, a few credentials and sessions, and reopen() to check
 * what survives a restart.
 */
#ifndef RDFS_TEST_MS_FIXTURE_H
#define RDFS_TEST_MS_FIXTURE_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "../../metaserver/ms.h"
}

/* Stands in for the I/O servers: records the blocks it is asked to zero. */
struct ZeroLog {
	std::mutex mu;
	std::set<uint64_t> blocks;

	static int fn(void *arg, const struct ms_zero_range *r, size_t n)
	{
		ZeroLog *z = static_cast<ZeroLog *>(arg);
		std::lock_guard<std::mutex> g(z->mu);

		for (size_t i = 0; i < n; i++)
			for (uint64_t b = r[i].block; b < r[i].block + r[i].count; b++)
				z->blocks.insert(b);
		return 0;
	}
};

class MsTest : public ::testing::Test {
protected:
	std::string dir;
	struct ms *ms = nullptr;
	struct ms_session *sess = nullptr;
	uint64_t epoch_ = 0;		/* of the last registration */
	uint32_t alice_groups[2] = { 100, 101 };
	struct ms_cred root = { 0, 0, 0, nullptr };
	struct ms_cred alice = { 1000, 1000, 2, alice_groups };
	struct ms_cred bob = { 2000, 2000, 0, nullptr };

	void SetUp() override
	{
		char tmpl[] = "/tmp/ms_test.XXXXXX";

		ASSERT_NE(mkdtemp(tmpl), nullptr);
		dir = tmpl;
		open_db();
	}

	void TearDown() override
	{
		close_db();
		for (struct ms_session *s : dead)
			ms_session_discard(s);
		dead.clear();
		std::string cmd = "rm -rf '" + dir + "'";
		(void)system(cmd.c_str());
	}

	/* Options of every open (db_dir is set there). */
	struct ms_options options = {};

	void open_db()
	{
		struct ms_options o = options;
		char err[256];

		o.db_dir = dir.c_str();
		ASSERT_EQ(ms_open(&o, &ms, err, sizeof(err)), 0) << err;
		sess = ms_session_new(ms, "client");
		ASSERT_NE(sess, nullptr);
	}

	void close_db()
	{
		if (sess)
			ms_session_close(ms, sess);
		sess = nullptr;
		for (struct ms_session *s : ioservers)
			ms_session_close(ms, s);
		ioservers.clear();
		ms_close(ms);
		ms = nullptr;
	}

	/* A restart: sessions end, the database is closed and opened again. */
	void reopen()
	{
		close_db();
		open_db();
	}

	/* Sessions of a process that died: nothing released, freed at TearDown. */
	std::vector<struct ms_session *> dead;

	void abandon(struct ms_session *s)
	{
		if (s)
			dead.push_back(s);
	}

	/*
	 * A crash: the process dies with open handles, nothing is released.
	 * With @disk_as_of (a copy of the database taken after a sync), the
	 * machine crashed too: the database comes back as that copy.
	 */
	void crash_reopen(const std::string &disk_as_of = "")
	{
		abandon(sess);
		sess = nullptr;
		for (struct ms_session *s : ioservers)
			abandon(s);
		ioservers.clear();
		ms_close(ms);
		ms = nullptr;
		if (!disk_as_of.empty()) {
			std::string cmd = "rm -rf '" + dir + "' && mv '" + disk_as_of + "' '" + dir + "'";

			ASSERT_EQ(system(cmd.c_str()), 0);
		}
		open_db();
	}

	uint64_t mkfile(uint64_t parent, const char *name, uint32_t mode = 0644,
			const struct ms_cred *cr = nullptr)
	{
		struct ms_attr a;
		int ret = ms_mknod(ms, sess, cr ? cr : &root, parent, name, S_IFREG | mode, 0, 0, 1, 0,
				   0, &a, nullptr);

		EXPECT_EQ(ret, 0) << name;
		return ret ? 0 : a.ino;
	}

	uint64_t mkdir_(uint64_t parent, const char *name, uint32_t mode = 0755,
			const struct ms_cred *cr = nullptr)
	{
		struct ms_attr a;
		int ret = ms_mkdir(ms, cr ? cr : &root, parent, name, mode, 0, &a);

		EXPECT_EQ(ret, 0) << name;
		return ret ? 0 : a.ino;
	}

	struct ms_attr attr(uint64_t ino)
	{
		struct ms_attr a = {};

		EXPECT_EQ(ms_getattr(ms, ino, &a), 0) << ino;
		return a;
	}

	int lookup(uint64_t parent, const char *name, uint64_t *ino = nullptr,
		   const struct ms_cred *cr = nullptr)
	{
		struct ms_attr a;
		int ret = ms_lookup(ms, cr ? cr : &root, parent, name, &a);

		if (!ret && ino)
			*ino = a.ino;
		return ret;
	}

	int chmod_(uint64_t ino, uint32_t mode, const struct ms_cred *cr)
	{
		struct ms_setattr sa = {};
		struct ms_attr a;

		sa.valid = MS_SET_MODE;
		sa.mode = mode;
		return ms_setattr(ms, sess, cr, ino, &sa, &a);
	}

	int chown_(uint64_t ino, int64_t uid, int64_t gid, const struct ms_cred *cr)
	{
		struct ms_setattr sa = {};
		struct ms_attr a;

		if (uid >= 0) {
			sa.valid |= MS_SET_UID;
			sa.uid = (uint32_t)uid;
		}
		if (gid >= 0) {
			sa.valid |= MS_SET_GID;
			sa.gid = (uint32_t)gid;
		}
		return ms_setattr(ms, sess, cr, ino, &sa, &a);
	}

	std::vector<std::string> list(uint64_t ino)
	{
		std::vector<std::string> names;
		struct ms_dirent *ents = new struct ms_dirent[MS_READDIR_MAX];
		std::string after;
		int eof = 0;

		while (!eof) {
			int n = ms_readdir(ms, &root, ino, after.data(), after.size(), 0, ents, &eof);

			EXPECT_GE(n, 0);
			if (n <= 0)
				break;
			for (int i = 0; i < n; i++)
				names.push_back(std::string(ents[i].name, ents[i].namelen));
			after = names.back();
		}
		delete[] ents;
		return names;
	}

	/*
	 * Register an I/O server with @blocks blocks, a pristine volume unless
	 * told otherwise; its session stays open (up).
	 */
	uint32_t add_server(const char *uuid, uint64_t blocks, struct ms_session **out = nullptr,
			    bool pristine = true, const char *domain = "")
	{
		struct ms_session *s = ms_session_new(ms, "server");
		uint32_t id = 0;
		std::string url = std::string("tcp://127.0.0.1:71") + uuid;

		EXPECT_EQ(ms_register(ms, s, url.c_str(), uuid, strlen(uuid), blocks, uuid, domain,
				      pristine, &id, &epoch_), 0);
		if (out)
			*out = s;
		else
			ioservers.push_back(s);
		return id;
	}

	std::vector<struct ms_session *> ioservers;

	/* Free blocks of server @id, as SERVER_LIST reports them. */
	uint64_t free_blocks(uint32_t id)
	{
		struct ms_server_info *si = nullptr;
		int n = ms_server_list(ms, &si);
		uint64_t f = 0;

		for (int i = 0; i < n; i++)
			if (si[i].id == id)
				f = si[i].free_blocks;
		free(si);
		return f;
	}

	/* Sum of extent lengths per server in @l. */
	static uint64_t bytes_on(const struct ms_layout &l, uint32_t id)
	{
		uint64_t sum = 0;

		for (size_t i = 0; i < l.n; i++)
			if (l.ext[i].server_id == id)
				sum += l.ext[i].length;
		return sum;
	}
};

#endif
