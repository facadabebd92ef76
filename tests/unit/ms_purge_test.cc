// SPDX-License-Identifier: MIT
/*
 * ms_purge_test.cc - removing an inode removes every key it had: its record,
 * chunk records, xattrs and orphan key, whichever way its last link and last
 * handle went (unlink, rename over it, release of an unlinked open file,
 * truncated to nothing first), and a crash right after finds no trace of it:
 * its blocks free in the maps rebuilt from the chunk records, the file count
 * exact. The purge searches for chunk records only when the inode has blocks
 * and deletes the orphan key only when it has one; this checks both shortcuts
 * against the database itself.
 */
#include <errno.h>

#include <leveldb/c.h>

#include "ms_fixture.h"

class MsPurgeTest : public MsTest {
protected:
	uint32_t id = 0;

	void SetUp() override
	{
		MsTest::SetUp();
		id = add_server("vol", 1000);
	}

	/* A file of 10 blocks; its handle stays open when @h is given. */
	uint64_t file_with_blocks(const char *name, uint64_t *h = nullptr)
	{
		struct ms_attr a;
		struct ms_layout l;
		struct ms_range r = { 0, 40960 };
		uint64_t fh;

		EXPECT_EQ(ms_mknod(ms, sess, &root, 1, name, 0644, 0, 0, 1, 1, O_RDWR, &a, &fh), 0);
		EXPECT_EQ(ms_layout(ms, sess, &root, a.ino, 0, 40960, 1, fh, &l), 0);
		ms_layout_free(&l);
		EXPECT_EQ(ms_commit(ms, sess, &root, a.ino, 40960, 0, &r, 1, fh, &a), 0);
		if (h)
			*h = fh;
		else
			EXPECT_EQ(ms_release(ms, sess, fh), 0);
		return a.ino;
	}

	uint64_t used_blocks()
	{
		uint64_t *w, n, used = 0;

		EXPECT_EQ(ms_alloc_bitmap(ms, id, &w, &n), 0);
		for (uint64_t b = 0; b < n; b++)
			used += (w[b / 64] >> (b % 64)) & 1;
		free(w);
		return used;
	}

	uint64_t files()
	{
		struct ms_statfs st;

		ms_statfs(ms, &st);
		return st.files;
	}

	/*
	 * The keys of inodes @inos in the database, as "ino:tags" for each that
	 * has any ('I', 'L', 'X', 'O'), read with LevelDB itself while the
	 * metaserver has it closed; then the metaserver starts again, as after a
	 * crash (its sessions are gone with the old process).
	 */
	std::string keys_of(const std::vector<uint64_t> &inos)
	{
		std::string out;
		char *err = nullptr;

		ms_close(ms);
		ms = nullptr;
		abandon(sess);
		sess = nullptr;
		for (struct ms_session *s : ioservers)
			abandon(s);
		ioservers.clear();
		leveldb_options_t *o = leveldb_options_create();
		leveldb_readoptions_t *ro = leveldb_readoptions_create();
		leveldb_t *db = leveldb_open(o, dir.c_str(), &err);

		EXPECT_EQ(err, nullptr) << err;
		for (uint64_t ino : inos) {
			std::string tags;
			leveldb_iterator_t *it;

			if (!db)
				break;
			it = leveldb_create_iterator(db, ro);
			for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it);
			     leveldb_iter_next(it)) {
				size_t kl;
				const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
				uint64_t v = 0;

				if (kl < 9 || !strchr("ILXO", k[0]))
					continue;
				for (int i = 1; i <= 8; i++)
					v = v << 8 | k[i];
				if (v == ino)
					tags += (char)k[0];
			}
			leveldb_iter_destroy(it);
			if (!tags.empty())
				out += (out.empty() ? "" : " ") + std::to_string(ino) + ":" + tags;
		}
		if (db)
			leveldb_close(db);
		leveldb_free(err);
		leveldb_readoptions_destroy(ro);
		leveldb_options_destroy(o);
		open_db();
		return out;
	}
};

TEST_F(MsPurgeTest, EveryWayOfRemovingLeavesNoKeys)
{
	struct ms_setattr sa = {};
	struct ms_attr a;
	uint64_t h;
	uint64_t unlinked = file_with_blocks("unlinked");
	uint64_t emptied = file_with_blocks("emptied");
	uint64_t orphan = file_with_blocks("orphan", &h);
	uint64_t replaced = file_with_blocks("replaced");
	uint64_t keep = file_with_blocks("keep");
	uint64_t bare = mkfile(1, "bare");

	ASSERT_EQ(ms_setxattr(ms, &root, unlinked, "user.a", "1", 1, 0), 0);
	ASSERT_EQ(ms_setxattr(ms, &root, bare, "user.b", "2", 1, 0), 0);
	ASSERT_EQ(ms_setxattr(ms, &root, orphan, "user.c", "3", 1, 0), 0);
	EXPECT_EQ(used_blocks(), 50u);

	ASSERT_EQ(ms_unlink(ms, &root, 1, "unlinked"), 0);
	/* truncated to nothing first: no blocks, so no chunk record is looked for */
	sa.valid = MS_SET_SIZE;
	sa.size = 0;
	ASSERT_EQ(ms_setattr(ms, sess, &root, emptied, &sa, &a), 0);
	EXPECT_EQ(a.blocks, 0u);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "emptied"), 0);
	/* an inode without blocks still has its xattrs removed */
	ASSERT_EQ(ms_unlink(ms, &root, 1, "bare"), 0);
	/* unlinked while open: an orphan until its release */
	ASSERT_EQ(ms_unlink(ms, &root, 1, "orphan"), 0);
	ASSERT_EQ(ms_getattr(ms, orphan, &a), 0);
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	ASSERT_EQ(ms_rename(ms, &root, 1, "keep", 1, "replaced", 0), 0);
	EXPECT_EQ(used_blocks(), 10u);
	EXPECT_EQ(files(), 2u);

	EXPECT_EQ(keys_of({ unlinked, emptied, bare, orphan, replaced, keep }),
		  std::to_string(keep) + ":IL");
	/* the rebuilt maps agree, and no orphan key was left to be reclaimed twice */
	EXPECT_EQ(used_blocks(), 10u);
	EXPECT_EQ(files(), 2u);
	uint64_t k;
	ASSERT_EQ(lookup(1, "replaced", &k), 0);
	EXPECT_EQ(k, keep);
}

TEST_F(MsPurgeTest, OrphanSurvivesCrashWithItsKeysThenGoes)
{
	uint64_t h;
	uint64_t orphan = file_with_blocks("orphan", &h);
	struct ms_attr a;

	ASSERT_EQ(ms_unlink(ms, &root, 1, "orphan"), 0);
	/* a crash with the handle open: the orphan key is what finds it at the next start */
	crash_reopen();
	EXPECT_EQ(ms_getattr(ms, orphan, &a), -ENOENT);
	EXPECT_EQ(used_blocks(), 0u);
	EXPECT_EQ(files(), 1u);
	EXPECT_EQ(keys_of({ orphan }), "");
	EXPECT_EQ(files(), 1u);
}

TEST_F(MsPurgeTest, ManyCreatesAndRemovesStayConsistent)
{
	/* many unlinks in a row (each one left a tombstone before) change nothing visible */
	for (int round = 0; round < 3; round++) {
		std::vector<uint64_t> inos;

		for (int i = 0; i < 200; i++) {
			char name[32];

			snprintf(name, sizeof(name), "f%d", i);
			inos.push_back(mkfile(1, name));
		}
		EXPECT_EQ(files(), 201u);
		for (int i = 0; i < 200; i++) {
			char name[32];

			snprintf(name, sizeof(name), "f%d", i);
			ASSERT_EQ(ms_unlink(ms, &root, 1, name), 0);
		}
		EXPECT_EQ(files(), 1u);
		EXPECT_EQ(keys_of(inos), "");
		EXPECT_EQ(files(), 1u);
		EXPECT_TRUE(list(1).empty());
	}
}
