// SPDX-License-Identifier: MIT
/*
 * ms_fsck_test.cc - `rdfs fsck` inside the metaserver (fsck.c): a clean
 * workload (truncate, punch, hard links, an unlinked file still open) reports
 * nothing and repairs nothing; each fault, injected into the allocation maps
 * (ms_debug_map) or into the database behind the metaserver's back, is
 * reported with its exact kind, inode and block run; --repair really changes
 * the state (the maps, the free count, the records, the persisted high-water
 * mark) and the next fsck is clean; leaked blocks wait out their quarantine;
 * only a server session may run it; and, while other threads create,
 * allocate, commit, truncate, punch and unlink, every fsck still sees one
 * consistent moment: no problem, nothing repaired.
 *
 * Startup rebuilds the maps from the layout records, reclaims the inodes
 * with an orphan record and raises a persisted high-water mark the layouts
 * went past, so those faults cannot be injected offline; the map faults are
 * injected in memory, a mark below a layout through a volume whose server
 * record was lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

extern "C" {
#include <leveldb/c.h>

#include "log.h"
#include "../../metaserver/ms_keys.h"
}

#include "ms_fixture.h"

namespace {

/* One fsck's report, its problems copied out. */
struct Fsck {
	int ret = 0;
	struct ms_fsck_report r = {};
	std::vector<struct ms_fsck_problem> p;

	uint64_t count(uint32_t kind) const { return kind < MS_FSCK_KINDS ? r.counts[kind] : 0; }
};

std::string str(const struct ms_fsck_problem &p)
{
	std::ostringstream os;

	os << "{kind " << p.kind << ", ino " << p.ino << ", other " << p.other_ino << ", server "
	   << p.server_id << ", " << p.block << "+" << p.count << (p.repaired ? ", repaired" : "")
	   << "}";
	return os.str();
}

std::string str(const Fsck &f)
{
	std::ostringstream os;

	os << "ret " << f.ret << ", " << f.r.problems << " problems, " << f.r.repaired
	   << " repaired, owned " << f.r.blocks_owned << ", mapped " << f.r.blocks_mapped
	   << ", held " << f.r.blocks_held << ", quarantined " << f.r.blocks_quarantined << ":";
	for (const auto &p : f.p)
		os << " " << str(p);
	return os.str();
}

struct ms_fsck_problem problem(uint32_t kind, uint64_t ino, uint64_t other, uint32_t server,
			       uint64_t block, uint64_t count, int repaired)
{
	struct ms_fsck_problem p = {};

	p.kind = kind;
	p.ino = ino;
	p.other_ino = other;
	p.server_id = server;
	p.block = block;
	p.count = count;
	p.repaired = repaired;
	return p;
}

/* The database itself, while the metaserver has it closed. */
class Db {
public:
	explicit Db(const std::string &dir)
	{
		char *err = nullptr;

		o = leveldb_options_create();
		ro = leveldb_readoptions_create();
		wo = leveldb_writeoptions_create();
		leveldb_writeoptions_set_sync(wo, 1);
		db = leveldb_open(o, dir.c_str(), &err);
		EXPECT_EQ(err, nullptr) << err;
		leveldb_free(err);
	}

	~Db()
	{
		if (db)
			leveldb_close(db);
		leveldb_writeoptions_destroy(wo);
		leveldb_readoptions_destroy(ro);
		leveldb_options_destroy(o);
	}

	bool ok() const { return db != nullptr; }

	bool get(const uint8_t *k, size_t kl, std::string *v)
	{
		char *err = nullptr;
		size_t vl = 0;
		char *val = leveldb_get(db, ro, (const char *)k, kl, &vl, &err);

		EXPECT_EQ(err, nullptr) << err;
		leveldb_free(err);
		if (!val)
			return false;
		v->assign(val, vl);
		leveldb_free(val);
		return true;
	}

	void put(const uint8_t *k, size_t kl, const void *v, size_t vl)
	{
		char *err = nullptr;

		leveldb_put(db, wo, (const char *)k, kl, (const char *)v, vl, &err);
		EXPECT_EQ(err, nullptr) << err;
		leveldb_free(err);
	}

	void del(const uint8_t *k, size_t kl)
	{
		char *err = nullptr;

		leveldb_delete(db, wo, (const char *)k, kl, &err);
		EXPECT_EQ(err, nullptr) << err;
		leveldb_free(err);
	}

	bool has(const uint8_t *k, size_t kl)
	{
		std::string v;

		return get(k, kl, &v);
	}

	/*
	 * Move @in's quota usage by @sign (its blocks and itself) in the usage
	 * records, as the batch that changes an inode record does: the faults
	 * below are the inode's, not its usage's (ms_quota_test.cc has those).
	 */
	void charge(const struct ms_inode &in, int sign)
	{
		uint32_t ids[MS_QUOTA_TYPES] = { in.uid, in.gid, in.project };

		for (uint32_t t = 0; t < MS_QUOTA_TYPES; t++) {
			uint8_t k[MS_KEY_MAX], v[MS_QUOTA_REC];
			size_t kl = key_quota(k, t, ids[t]);
			struct ms_quota q = {};
			std::string cur;

			if (t == MS_QUOTA_PROJECT && !in.project)
				continue;
			if (get(k, kl, &cur)) {
				EXPECT_EQ(quota_decode(cur.data(), cur.size(), &q), 0);
			}
			q.blocks += sign * (int64_t)in.blocks;
			q.inodes += sign;
			if (!q.blocks && !q.inodes && !q.block_soft && !q.block_hard &&
			    !q.inode_soft && !q.inode_hard) {
				del(k, kl);
				continue;
			}
			quota_encode(&q, v);
			put(k, kl, v, sizeof(v));
		}
	}

	/* Edit inode @ino's record with @fn (its usage moves along); false when it has none. */
	bool edit_inode(uint64_t ino, const std::function<void(struct ms_inode *)> &fn)
	{
		uint8_t k[MS_KEY_MAX];
		size_t kl = key_inode(k, ino);
		std::vector<uint8_t> buf(MS_INODE_MAX);
		std::unique_ptr<struct ms_inode> in(new struct ms_inode());
		std::string v;

		if (!get(k, kl, &v))
			return false;
		EXPECT_EQ(inode_decode(ino, v.data(), v.size(), in.get()), 0);
		charge(*in, -1);
		fn(in.get());
		charge(*in, 1);
		put(k, kl, buf.data(), inode_encode(in.get(), buf.data()));
		return true;
	}

	/* Delete inode @ino's record (its usage goes with it). */
	void del_inode(uint64_t ino)
	{
		uint8_t k[MS_KEY_MAX];
		size_t kl = key_inode(k, ino);
		std::unique_ptr<struct ms_inode> in(new struct ms_inode());
		std::string v;

		ASSERT_TRUE(get(k, kl, &v));
		ASSERT_EQ(inode_decode(ino, v.data(), v.size(), in.get()), 0);
		charge(*in, -1);
		del(k, kl);
	}

	/* The persisted high-water mark of server @id; ~0 when it has none. */
	uint64_t high_water(uint32_t id)
	{
		uint8_t k[MS_KEY_MAX];
		std::string v;

		if (!get(k, key_high_water(k, id), &v) || v.size() != 8)
			return ~0ull;
		return get_le64((const uint8_t *)v.data());
	}

	void set_high_water(uint32_t id, uint64_t mark)
	{
		uint8_t k[MS_KEY_MAX], v[8];

		put_le64(v, mark);
		put(k, key_high_water(k, id), v, 8);
	}

	/* How many layout (chunk) records inode @ino has. */
	int layout_records(uint64_t ino)
	{
		uint8_t k[MS_KEY_MAX];
		size_t kl = key_prefix(k, MS_TAG_LAYOUT, ino);
		leveldb_iterator_t *it = leveldb_create_iterator(db, ro);
		int n = 0;

		for (leveldb_iter_seek(it, (const char *)k, kl); leveldb_iter_valid(it);
		     leveldb_iter_next(it)) {
			size_t l;
			const char *key = leveldb_iter_key(it, &l);

			if (l < kl || memcmp(key, k, kl))
				break;
			n++;
		}
		leveldb_iter_destroy(it);
		return n;
	}

private:
	leveldb_t *db = nullptr;
	leveldb_options_t *o;
	leveldb_readoptions_t *ro;
	leveldb_writeoptions_t *wo;
};

}  // namespace

class MsFsckTest : public MsTest {
protected:
	static constexpr uint64_t kBlocks = 1000;
	uint32_t id = 0;

	void SetUp() override
	{
		MsTest::SetUp();
		id = add_server("vol", kBlocks);
	}

	/* ms_fsck through a server session of its own. */
	Fsck fsck(int repair = 0, int64_t quarantine_ns = 3600ll * 1000000000ll, size_t max = 1000)
	{
		struct ms_session *s = ms_session_new(ms, "server");
		Fsck f;

		f.ret = ms_fsck(ms, s, repair, quarantine_ns, max, &f.r);
		if (f.ret == 0 && f.r.p)
			f.p.assign(f.r.p, f.r.p + f.r.n);
		size_t n = f.r.n;
		ms_fsck_report_free(&f.r);
		f.r.n = n;		/* p: copied into f.p */
		ms_session_close(ms, s);
		return f;
	}

	/* Assert a clean report: no problem, nothing repaired, maps == layouts. */
	void expect_clean(const Fsck &f, const char *what)
	{
		EXPECT_EQ(f.ret, 0) << what;
		EXPECT_EQ(f.r.problems, 0u) << what << ": " << str(f);
		EXPECT_EQ(f.r.repaired, 0u) << what << ": " << str(f);
		EXPECT_EQ(f.r.n, 0u) << what;
		EXPECT_EQ(f.r.blocks_mapped,
			  f.r.blocks_owned + f.r.blocks_held + f.r.blocks_quarantined)
			<< what << ": " << str(f);
	}

	/* Exactly one problem, @want. */
	void expect_one(const Fsck &f, const struct ms_fsck_problem &want, const char *what)
	{
		EXPECT_EQ(f.ret, 0) << what;
		EXPECT_EQ(f.r.problems, 1u) << what << ": " << str(f);
		EXPECT_EQ(f.count(want.kind), 1u) << what << ": " << str(f);
		EXPECT_EQ(f.r.repaired, want.repaired ? 1u : 0u) << what << ": " << str(f);
		ASSERT_EQ(f.p.size(), 1u) << what << ": " << str(f);
		EXPECT_EQ(str(f.p[0]), str(want)) << what;
	}

	/*
	 * A regular file in @parent with @nblocks blocks allocated and written
	 * (COMMIT), its size @nblocks blocks; its handle stays open when @h is given.
	 */
	uint64_t write_file(uint64_t parent, const char *name, uint64_t nblocks,
			    uint64_t *h = nullptr)
	{
		struct ms_attr a;
		struct ms_layout l;
		struct ms_range r = { 0, nblocks * 4096 };
		uint64_t fh = 0;

		EXPECT_EQ(ms_mknod(ms, sess, &root, parent, name, S_IFREG | 0644, 0, 0, 1, 1, O_RDWR,
				   &a, &fh), 0) << name;
		EXPECT_EQ(ms_layout(ms, sess, &root, a.ino, 0, nblocks * 4096, 1, fh, &l), 0)
			<< name;
		ms_layout_free(&l);
		EXPECT_EQ(ms_commit(ms, sess, &root, a.ino, nblocks * 4096, 0, &r, 1, fh, &a), 0)
			<< name;
		if (h)
			*h = fh;
		else
			EXPECT_EQ(ms_release(ms, sess, fh), 0);
		return a.ino;
	}

	/* The volume runs of @ino, in file order, adjacent ones merged. */
	std::vector<std::pair<uint64_t, uint64_t>> runs_of(uint64_t ino)
	{
		std::vector<std::pair<uint64_t, uint64_t>> out;
		struct ms_layout l;

		EXPECT_EQ(ms_layout(ms, sess, &root, ino, 0, MS_LAYOUT_MAX_BYTES, 0, 0, &l), 0);
		for (size_t i = 0; i < l.n; i++) {
			uint64_t b = l.ext[i].block, n = l.ext[i].length / 4096;

			if (!out.empty() && out.back().first + out.back().second == b)
				out.back().second += n;
			else
				out.push_back({ b, n });
		}
		ms_layout_free(&l);
		return out;
	}

	std::set<uint64_t> blocks_of(uint64_t ino)
	{
		std::set<uint64_t> s;

		for (auto &r : runs_of(ino))
			for (uint64_t b = r.first; b < r.first + r.second; b++)
				s.insert(b);
		return s;
	}

	uint64_t free_blocks()
	{
		struct ms_statfs st;

		ms_statfs(ms, &st);
		return st.free_blocks;
	}

	uint64_t files()
	{
		struct ms_statfs st;

		ms_statfs(ms, &st);
		return st.files;
	}

	/* How many of [block, block + n) are in use in server @sid's map. */
	uint64_t mapped(uint64_t block, uint64_t n, uint32_t sid = 0)
	{
		uint64_t *w = nullptr, nb = 0, used = 0;

		EXPECT_EQ(ms_alloc_bitmap(ms, sid ? sid : id, &w, &nb), 0);
		for (uint64_t b = block; b < block + n && b < nb; b++)
			used += (w[b / 64] >> (b % 64)) & 1;
		free(w);
		return used;
	}

	/* A run of @n blocks free in the map, from the top of the volume down. */
	uint64_t free_run(uint64_t n)
	{
		for (uint64_t b = kBlocks - n; b > 0; b--)
			if (mapped(b, n) == 0)
				return b;
		ADD_FAILURE() << "no free run of " << n;
		return 0;
	}

	int truncate(uint64_t ino, uint64_t size)
	{
		struct ms_setattr sa = {};
		struct ms_attr a;

		sa.valid = MS_SET_SIZE;
		sa.size = size;
		return ms_setattr(ms, sess, &root, ino, &sa, &a);
	}

	/*
	 * Edit the database behind the metaserver's back: close it, run @fn on
	 * LevelDB itself, open it again (startup runs) and register the volume again.
	 */
	void offline(const std::function<void(Db &)> &fn, bool reregister = true)
	{
		close_db();
		{
			Db db(dir);

			ASSERT_TRUE(db.ok());
			fn(db);
		}
		open_db();
		if (reregister) {
			EXPECT_EQ(add_server("vol", kBlocks), id);
		}
	}
};

/* ------------------------------------------------------------ who may, and a clean state */

TEST_F(MsFsckTest, OnlyAServerSessionMayRunIt)
{
	const char *ids[] = { "client", "node:n1:1" };

	for (const char *who : ids) {
		struct ms_session *s = ms_session_new(ms, who);
		struct ms_fsck_report r;

		ASSERT_NE(s, nullptr);
		EXPECT_EQ(ms_fsck(ms, s, 0, 0, 10, &r), -EPERM) << who;
		EXPECT_EQ(r.p, nullptr) << who;
		EXPECT_EQ(r.n, 0u) << who;
		EXPECT_EQ(r.problems, 0u) << who;
		ms_fsck_report_free(&r);
		EXPECT_EQ(ms_fsck(ms, s, 1, 0, 10, &r), -EPERM) << who << " --repair";
		ms_fsck_report_free(&r);
		ms_session_close(ms, s);
	}
	expect_clean(fsck(), "as a server");
}

TEST_F(MsFsckTest, ACleanWorkloadHasNoProblems)
{
	struct ms_attr a;
	uint64_t h;
	uint64_t d = mkdir_(1, "d");
	uint64_t fa = write_file(1, "a", 10);
	uint64_t fb = write_file(d, "b", 300);		/* two chunks */
	uint64_t fc = write_file(1, "c", 20);
	uint64_t fo = write_file(1, "o", 8, &h);

	ASSERT_EQ(truncate(fc, 5 * 4096 + 100), 0);			/* 6 blocks left */
	ASSERT_EQ(ms_punch(ms, sess, &root, fb, 10 * 4096, 10 * 4096, 0, &a), 0);
	EXPECT_EQ(a.blocks, 290u);
	ASSERT_EQ(ms_link(ms, &root, fa, d, "a2", &a), 0);
	ASSERT_EQ(ms_symlink(ms, &root, 1, "s", "a", &a), 0);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "o"), 0);	/* open: an orphan until released */
	ASSERT_EQ(ms_getattr(ms, fo, &a), 0);
	EXPECT_EQ(a.nlink, 0u);

	const uint64_t owned = 10 + 290 + 6 + 8;
	ASSERT_EQ(free_blocks(), kBlocks - owned);

	Fsck f = fsck();
	expect_clean(f, "open orphan");
	EXPECT_EQ(f.r.orphans_open, 1u);
	EXPECT_EQ(f.r.blocks_owned, owned);
	EXPECT_EQ(f.r.blocks_mapped, owned);
	EXPECT_EQ(f.r.blocks_held, 0u);
	EXPECT_EQ(f.r.blocks_quarantined, 0u);
	EXPECT_EQ(f.r.inodes, 7u);		/* root, d, a, b, c, o, s */
	EXPECT_EQ(f.r.dirs, 2u);
	EXPECT_EQ(f.r.files, 4u);
	/* a; b: 0..9 and 20..255 in chunk 0, 256..299 in chunk 1; c; o */
	EXPECT_EQ(f.r.extents, 6u);

	/* a repair of a clean state changes nothing */
	f = fsck(1);
	expect_clean(f, "repair of a clean state");
	EXPECT_EQ(f.r.orphans_open, 1u);
	EXPECT_EQ(free_blocks(), kBlocks - owned);
	ASSERT_EQ(ms_getattr(ms, fo, &a), 0);

	/* the last release reclaims the orphan */
	ASSERT_EQ(ms_release(ms, sess, h), 0);
	ASSERT_EQ(ms_getattr(ms, fo, &a), -ENOENT);
	f = fsck();
	expect_clean(f, "after the release");
	EXPECT_EQ(f.r.orphans_open, 0u);
	EXPECT_EQ(f.r.blocks_owned, owned - 8);
	EXPECT_EQ(f.r.files, 3u);
	EXPECT_EQ(free_blocks(), kBlocks - owned + 8);

	/* and the maps rebuilt at a restart agree too */
	reopen();
	f = fsck();
	expect_clean(f, "after a restart");
	EXPECT_EQ(f.r.blocks_owned, owned - 8);
}

/* ------------------------------------------------------------ map faults */

TEST_F(MsFsckTest, LeakedBlocksWaitOutALongQuarantine)
{
	write_file(1, "f", 10);
	const uint64_t before = free_blocks();
	const uint64_t b = free_run(7);

	ASSERT_EQ(ms_debug_map(ms, id, b, 7, 1), 0);
	ASSERT_EQ(free_blocks(), before - 7);

	Fsck f = fsck();
	expect_one(f, problem(MS_FSCK_LEAKED, 0, 0, id, b, 7, 0), "check");
	EXPECT_EQ(f.r.blocks_mapped, f.r.blocks_owned + 7);
	EXPECT_EQ(free_blocks(), before - 7) << "a check changed the map";

	f = fsck(1, 3600ll * 1000000000ll);
	expect_one(f, problem(MS_FSCK_LEAKED, 0, 0, id, b, 7, 1), "repair");
	EXPECT_EQ(free_blocks(), before - 7) << "freed before the quarantine is over";
	EXPECT_EQ(mapped(b, 7), 7u);

	/* quarantined: accounted for, not leaked, and not free */
	f = fsck();
	expect_clean(f, "in quarantine");
	EXPECT_EQ(f.r.blocks_quarantined, 7u);
	f = fsck(1, 0);
	expect_clean(f, "a second repair");
	EXPECT_EQ(f.r.blocks_quarantined, 7u);
	EXPECT_EQ(free_blocks(), before - 7);

	/* an allocation does not get them either */
	uint64_t g = mkfile(1, "g");
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, g, 0, 4096, 1, 0, &l), 0);
	ms_layout_free(&l);
	EXPECT_EQ(free_blocks(), before - 8);
	EXPECT_EQ(mapped(b, 7), 7u);
	for (uint64_t x : blocks_of(g))
		EXPECT_TRUE(x < b || x >= b + 7) << "quarantined block " << x << " handed out";
}

TEST_F(MsFsckTest, LeakedBlocksWithoutQuarantineAreFreeAfterTheRepair)
{
	write_file(1, "f", 10);
	const uint64_t before = free_blocks();
	const uint64_t b = free_run(5);

	ASSERT_EQ(ms_debug_map(ms, id, b, 5, 1), 0);
	Fsck f = fsck(1, 0);
	expect_one(f, problem(MS_FSCK_LEAKED, 0, 0, id, b, 5, 1), "repair");
	EXPECT_EQ(free_blocks(), before);
	EXPECT_EQ(mapped(b, 5), 0u);
	f = fsck();
	expect_clean(f, "after");
	EXPECT_EQ(f.r.blocks_quarantined, 0u);
}

TEST_F(MsFsckTest, LeakedBlocksAreFreedByTheFirstAllocationAfterTheirQuarantine)
{
	write_file(1, "f", 10);
	const uint64_t before = free_blocks();
	const uint64_t b = free_run(6);

	ASSERT_EQ(ms_debug_map(ms, id, b, 6, 1), 0);
	Fsck f = fsck(1, 50 * 1000000ll);
	expect_one(f, problem(MS_FSCK_LEAKED, 0, 0, id, b, 6, 1), "repair");
	EXPECT_EQ(free_blocks(), before - 6);
	std::this_thread::sleep_for(std::chrono::milliseconds(120));
	/* due, but only an allocation (or a repair) frees them */
	f = fsck();
	expect_clean(f, "due");
	EXPECT_EQ(f.r.blocks_quarantined, 6u);
	EXPECT_EQ(free_blocks(), before - 6);

	uint64_t g = mkfile(1, "g");
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, g, 0, 4096, 1, 0, &l), 0);
	ms_layout_free(&l);
	EXPECT_EQ(free_blocks(), before - 1);
	EXPECT_EQ(mapped(b, 6), blocks_of(g).count(b) ? 1u : 0u);
	f = fsck();
	expect_clean(f, "after the allocation");
	EXPECT_EQ(f.r.blocks_quarantined, 0u);
}

TEST_F(MsFsckTest, UnmappedBlocksAreMarkedAgainAndNeverHandedOut)
{
	uint64_t fa = write_file(1, "f", 10);
	auto runs = runs_of(fa);
	ASSERT_EQ(runs.size(), 1u);
	const uint64_t b = runs[0].first + 2, before = free_blocks();
	std::set<uint64_t> fb = blocks_of(fa);

	ASSERT_EQ(ms_debug_map(ms, id, b, 3, 0), 0);
	ASSERT_EQ(free_blocks(), before + 3);

	Fsck f = fsck();
	expect_one(f, problem(MS_FSCK_UNMAPPED, 0, 0, id, b, 3, 0), "check");
	EXPECT_EQ(f.r.blocks_mapped + 3, f.r.blocks_owned);
	EXPECT_EQ(mapped(b, 3), 0u) << "a check changed the map";

	f = fsck(1);
	expect_one(f, problem(MS_FSCK_UNMAPPED, 0, 0, id, b, 3, 1), "repair");
	EXPECT_EQ(mapped(b, 3), 3u);
	EXPECT_EQ(free_blocks(), before);
	expect_clean(fsck(), "after");

	/* every block left goes to g, none of f's */
	uint64_t g = mkfile(1, "g");
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, g, 0, before * 4096, 1, 0, &l), 0);
	ms_layout_free(&l);
	EXPECT_EQ(free_blocks(), 0u);
	std::set<uint64_t> gb = blocks_of(g);
	EXPECT_EQ(gb.size(), before);
	for (uint64_t x : fb)
		EXPECT_EQ(gb.count(x), 0u) << "block " << x << " of f handed out again";
	uint64_t g2 = mkfile(1, "g2");
	EXPECT_EQ(ms_layout(ms, sess, &root, g2, 0, 4096, 1, 0, &l), -ENOSPC);
	expect_clean(fsck(), "full");
}

/* ------------------------------------------------------------ database faults */

TEST_F(MsFsckTest, ALayoutWithoutItsInodeIsFreed)
{
	uint64_t keep = write_file(1, "keep", 5);
	uint64_t fa = write_file(1, "f", 300);	/* two chunk records */
	std::set<uint64_t> fb = blocks_of(fa);

	offline([&](Db &db) {
		uint8_t k[MS_KEY_MAX];

		ASSERT_EQ(db.layout_records(fa), 2);
		db.del_inode(fa);
		db.del(k, key_dirent(k, 1, "f", 1));
	});
	const uint64_t before = free_blocks();
	ASSERT_EQ(before, kBlocks - 305) << "startup maps the blocks of every layout record";

	Fsck f = fsck();
	expect_one(f, problem(MS_FSCK_LAYOUT_NO_INODE, fa, 0, 0, 300, 0, 0), "check");
	EXPECT_EQ(f.r.blocks_owned, 305u);
	EXPECT_EQ(free_blocks(), before);

	f = fsck(1);
	expect_one(f, problem(MS_FSCK_LAYOUT_NO_INODE, fa, 0, 0, 300, 0, 1), "repair");
	EXPECT_EQ(free_blocks(), before + 300);
	EXPECT_EQ(mapped(*fb.begin(), 1), 0u);
	f = fsck();
	expect_clean(f, "after");
	EXPECT_EQ(f.r.blocks_owned, 5u);
	EXPECT_EQ(runs_of(keep).size(), 1u);

	close_db();
	{
		Db db(dir);

		EXPECT_EQ(db.layout_records(fa), 0);
	}
	open_db();
}

TEST_F(MsFsckTest, AnUnlinkedInodeWithoutOrphanRecordIsReclaimed)
{
	uint64_t fa = write_file(1, "f", 10);

	offline([&](Db &db) {
		uint8_t k[MS_KEY_MAX];

		ASSERT_TRUE(db.edit_inode(fa, [](struct ms_inode *in) { in->nlink = 0; }));
		db.del(k, key_dirent(k, 1, "f", 1));
		ASSERT_FALSE(db.has(k, key_orphan(k, fa)));
	});
	struct ms_attr a;
	ASSERT_EQ(ms_getattr(ms, fa, &a), 0) << "startup reclaimed it: the test injects nothing";
	const uint64_t before = free_blocks(), nfiles = files();
	ASSERT_EQ(before, kBlocks - 10);

	Fsck f = fsck();
	expect_one(f, problem(MS_FSCK_UNLINKED_NO_ORPHAN, fa, 0, 0, 0, 0, 0), "check");
	ASSERT_EQ(ms_getattr(ms, fa, &a), 0);

	f = fsck(1);
	expect_one(f, problem(MS_FSCK_UNLINKED_NO_ORPHAN, fa, 0, 0, 0, 0, 1), "repair");
	EXPECT_EQ(ms_getattr(ms, fa, &a), -ENOENT);
	EXPECT_EQ(free_blocks(), kBlocks);
	EXPECT_EQ(files(), nfiles - 1);
	f = fsck();
	expect_clean(f, "after");
	EXPECT_EQ(f.r.blocks_owned, 0u);
}

TEST_F(MsFsckTest, AWrongBlockCountIsCorrected)
{
	uint64_t fa = write_file(1, "f", 10);

	offline([&](Db &db) {
		ASSERT_TRUE(db.edit_inode(fa, [](struct ms_inode *in) { in->blocks += 5; }));
	});
	EXPECT_EQ(attr(fa).blocks, 15u);

	Fsck f = fsck();
	expect_one(f, problem(MS_FSCK_BLOCK_COUNT, fa, 0, 0, 15, 10, 0), "check");
	EXPECT_EQ(attr(fa).blocks, 15u);

	f = fsck(1);
	expect_one(f, problem(MS_FSCK_BLOCK_COUNT, fa, 0, 0, 15, 10, 1), "repair");
	EXPECT_EQ(attr(fa).blocks, 10u);
	expect_clean(fsck(), "after");

	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(free_blocks(), kBlocks);
	expect_clean(fsck(), "after the unlink");
}

/*
 * A count of 0 is worse than a wrong one: the purge of an inode without
 * blocks does not look for layout records, so an unlink would leave them.
 */
TEST_F(MsFsckTest, ABlockCountOfZeroIsCorrectedSoThatTheUnlinkFreesEverything)
{
	uint64_t fa = write_file(1, "f", 12);

	offline([&](Db &db) {
		ASSERT_TRUE(db.edit_inode(fa, [](struct ms_inode *in) { in->blocks = 0; }));
	});
	Fsck f = fsck(1);
	expect_one(f, problem(MS_FSCK_BLOCK_COUNT, fa, 0, 0, 0, 12, 1), "repair");
	EXPECT_EQ(attr(fa).blocks, 12u);
	ASSERT_EQ(ms_unlink(ms, &root, 1, "f"), 0);
	EXPECT_EQ(free_blocks(), kBlocks);
	expect_clean(fsck(), "after the unlink");
}

TEST_F(MsFsckTest, DoublyOwnedBlocksAreReportedNotRepaired)
{
	uint64_t fa = write_file(1, "f", 10);
	uint64_t g = mkfile(1, "g");
	auto runs = runs_of(fa);
	ASSERT_EQ(runs.size(), 1u);

	/* g's chunk 0 is a copy of f's; its record counts the blocks, so only they are wrong */
	offline([&](Db &db) {
		uint8_t k[MS_KEY_MAX];
		std::string v;

		ASSERT_TRUE(db.get(k, key_layout(k, fa, 0), &v));
		db.put(k, key_layout(k, g, 0), v.data(), v.size());
		ASSERT_TRUE(db.edit_inode(g, [](struct ms_inode *in) {
			in->blocks = 10;
			in->size = 10 * 4096;
		}));
	});
	Fsck f = fsck();
	expect_one(f, problem(MS_FSCK_DOUBLE, g, 0, id, runs[0].first, 10, 0), "check");
	EXPECT_EQ(f.r.blocks_owned, 20u);
	EXPECT_EQ(f.r.blocks_mapped, 10u);

	const uint64_t before = free_blocks();
	f = fsck(1);
	expect_one(f, problem(MS_FSCK_DOUBLE, g, 0, id, runs[0].first, 10, 0), "repair");
	EXPECT_EQ(free_blocks(), before);
	EXPECT_EQ(blocks_of(g), blocks_of(fa)) << "a repair touched a doubly owned layout";
	f = fsck();
	EXPECT_EQ(f.count(MS_FSCK_DOUBLE), 1u) << str(f);
}

/*
 * Extents no volume holds: f's straddles the end of its volume (4 blocks in,
 * 6 past), g's names a server the metaserver does not know. fsck reports each
 * once with its run; the repair leaves them (no block to free: where the data
 * is, is unknown), and f's 4 blocks inside the volume stay owned: never
 * reported as leaked, never handed out.
 */
TEST_F(MsFsckTest, ExtentsOutsideEveryVolumeAreReportedNotRepaired)
{
	uint64_t fa = write_file(1, "f", 10);
	uint64_t fg = write_file(1, "g", 10);
	auto ga = runs_of(fg);
	ASSERT_EQ(runs_of(fa).size(), 1u);
	ASSERT_EQ(ga.size(), 1u);
	const uint64_t edge = kBlocks - 4;
	const uint32_t unknown = id + 1000;

	/* move the extents in the records (offset 8: server, 12: volume block) */
	offline([&](Db &db) {
		uint8_t k[MS_KEY_MAX];
		std::string v;

		ASSERT_TRUE(db.get(k, key_layout(k, fa, 0), &v));
		ASSERT_EQ(v.size(), (size_t)MS_EXTENT_REC);
		put_le64((uint8_t *)&v[12], edge);
		db.put(k, key_layout(k, fa, 0), v.data(), v.size());
		ASSERT_TRUE(db.get(k, key_layout(k, fg, 0), &v));
		ASSERT_EQ(v.size(), (size_t)MS_EXTENT_REC);
		put_le32((uint8_t *)&v[8], unknown);
		db.put(k, key_layout(k, fg, 0), v.data(), v.size());
	});
	ASSERT_EQ(free_blocks(), kBlocks - 4) << "startup maps the part inside the volume";
	ASSERT_EQ(mapped(edge, 4), 4u);

	Fsck f = fsck();
	EXPECT_EQ(f.ret, 0);
	EXPECT_EQ(f.r.problems, 2u) << str(f);
	EXPECT_EQ(f.count(MS_FSCK_OUT_OF_RANGE), 2u) << str(f);
	EXPECT_EQ(f.r.repaired, 0u) << str(f);
	ASSERT_EQ(f.p.size(), 2u) << str(f);
	EXPECT_EQ(str(f.p[0]), str(problem(MS_FSCK_OUT_OF_RANGE, fa, 0, id, edge, 10, 0)));
	EXPECT_EQ(str(f.p[1]),
		  str(problem(MS_FSCK_OUT_OF_RANGE, fg, 0, unknown, ga[0].first, 10, 0)));
	EXPECT_EQ(f.r.blocks_owned, 20u) << "every extent's blocks count as the file's";
	EXPECT_EQ(f.r.blocks_mapped, 4u);

	f = fsck(1, 0);
	EXPECT_EQ(f.r.problems, 2u) << str(f);
	EXPECT_EQ(f.count(MS_FSCK_OUT_OF_RANGE), 2u) << str(f);
	EXPECT_EQ(f.r.repaired, 0u) << "nothing to repair them with: " << str(f);
	EXPECT_EQ(free_blocks(), kBlocks - 4);
	EXPECT_EQ(mapped(edge, 4), 4u);
	EXPECT_EQ(attr(fa).blocks, 10u);
	EXPECT_EQ(attr(fg).blocks, 10u);

	/* every free block goes to h, none of f's 4 inside the volume */
	uint64_t h = mkfile(1, "h");
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, h, 0, (kBlocks - 4) * 4096, 1, 0, &l), 0);
	ms_layout_free(&l);
	EXPECT_EQ(free_blocks(), 0u);
	for (uint64_t x : blocks_of(h))
		EXPECT_LT(x, edge) << "block " << x << " of f handed out again";

	f = fsck();
	EXPECT_EQ(f.r.problems, 2u) << "still there, and nothing else: " << str(f);
	EXPECT_EQ(f.count(MS_FSCK_OUT_OF_RANGE), 2u) << str(f);
}

TEST_F(MsFsckTest, ADanglingEntryIsReportedNotRepaired)
{
	uint64_t d = mkdir_(1, "d");
	uint64_t e = mkfile(d, "e");

	offline([&](Db &db) { db.del_inode(e); });
	Fsck f = fsck();
	expect_one(f, problem(MS_FSCK_DANGLING_ENTRY, d, e, 0, 0, 0, 0), "check");
	f = fsck(1);
	expect_one(f, problem(MS_FSCK_DANGLING_ENTRY, d, e, 0, 0, 0, 0), "repair");
	EXPECT_EQ(list(d), std::vector<std::string>{ "e" });
}

/* ------------------------------------------------------------ high-water marks */

/* Why the next tests inject the fault another way: startup repairs this one. */
TEST_F(MsFsckTest, AMarkLoweredOfflineIsRaisedAgainAtStartup)
{
	uint64_t fa = write_file(1, "f", 10);
	auto runs = runs_of(fa);
	ASSERT_EQ(runs.size(), 1u);
	const uint64_t end = runs[0].first + runs[0].second;

	offline([&](Db &db) { db.set_high_water(id, end - 5); });
	uint64_t mark = 0;
	ASSERT_EQ(ms_high_water(ms, id, &mark), 0);
	EXPECT_GE(mark, end);
	expect_clean(fsck(), "after the restart");
	close_db();
	{
		Db db(dir);

		EXPECT_EQ(db.high_water(id), end);
	}
	open_db();
}

class MsFsckMarkTest : public MsFsckTest {
protected:
	uint64_t fa = 0, fb = 0;

	/*
	 * Files f and g of 10 blocks each on a volume whose server record was
	 * lost: registered again, it starts afresh (pristine: mark 0, an empty
	 * map) under the same id, below layouts that use blocks 0..19. The map
	 * is corrected by hand, so the mark is the only fault.
	 */
	void lose_server_record()
	{
		fa = write_file(1, "f", 10);
		fb = write_file(1, "g", 10);
		ASSERT_EQ(runs_of(fa), (std::vector<std::pair<uint64_t, uint64_t>>{ { 0, 10 } }));
		ASSERT_EQ(runs_of(fb), (std::vector<std::pair<uint64_t, uint64_t>>{ { 10, 10 } }));
		offline([&](Db &db) {
			uint8_t k[MS_KEY_MAX];

			db.del(k, key_server(k, id));
			db.del(k, key_high_water(k, id));
			k[0] = MS_TAG_UUID;
			memcpy(k + 1, "vol", 3);
			db.del(k, 4);
		}, false);
		ASSERT_EQ(add_server("vol", kBlocks), id) << "not the id the layouts name";
		uint64_t mark = ~0ull;
		ASSERT_EQ(ms_high_water(ms, id, &mark), 0);
		ASSERT_EQ(mark, 0u);
		ASSERT_EQ(ms_debug_map(ms, id, 0, 20, 1), 0);
	}

	uint64_t persisted_mark()
	{
		uint64_t m;

		close_db();
		{
			Db db(dir);

			m = db.high_water(id);
		}
		open_db();
		EXPECT_EQ(add_server("vol", kBlocks), id);
		return m;
	}
};

TEST_F(MsFsckMarkTest, ExtentsAboveTheMarkRaiseIt)
{
	lose_server_record();
	Fsck f = fsck();
	EXPECT_EQ(f.r.problems, 2u) << str(f);
	EXPECT_EQ(f.count(MS_FSCK_ABOVE_HIGH_WATER), 2u) << str(f);
	ASSERT_EQ(f.p.size(), 2u) << str(f);
	EXPECT_EQ(str(f.p[0]), str(problem(MS_FSCK_ABOVE_HIGH_WATER, fa, 0, id, 0, 10, 0)));
	EXPECT_EQ(str(f.p[1]), str(problem(MS_FSCK_ABOVE_HIGH_WATER, fb, 0, id, 10, 10, 0)));

	f = fsck(1);
	EXPECT_EQ(f.r.problems, 2u) << str(f);
	EXPECT_EQ(f.r.repaired, 2u) << str(f);
	expect_clean(fsck(), "after");
	uint64_t mark = 0;
	ASSERT_EQ(ms_high_water(ms, id, &mark), 0);
	EXPECT_GE(mark, 20u);
	EXPECT_GE(persisted_mark(), 20u) << "the repair did not persist the mark";
	ASSERT_EQ(ms_high_water(ms, id, &mark), 0);
	EXPECT_GE(mark, 20u);
	expect_clean(fsck(), "after a restart");
}

/*
 * The repair writes the mark it computed from its snapshot. An allocation
 * that raised the persisted mark further after the snapshot must not be
 * undone: the blocks it took would count as never used after a restart and
 * be handed out again without being zeroed.
 *
 * fsck is stopped between its snapshot and its repair of the mark through
 * its log: the log goes to a FIFO whose one page has room for the first
 * problem's line but not the second's.
 */
TEST_F(MsFsckMarkTest, TheRepairNeverLowersAMarkRaisedSinceItsSnapshot)
{
	lose_server_record();
	uint64_t g = mkfile(1, "new");

	log_init("test_metaserver", LOG_LVL_WARN);
	std::string fifo = dir + "/log.fifo";
	ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
	int rfd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
	ASSERT_GE(rfd, 0);
	int wfd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
	ASSERT_GE(wfd, 0);
	ASSERT_GT(fcntl(rfd, F_SETPIPE_SZ, 4096), 0);
	const int cap = fcntl(rfd, F_GETPIPE_SZ);
	ASSERT_EQ(cap, (int)sysconf(_SC_PAGESIZE)) << "needs a pipe of one page";

	/* the first line fsck writes, but for the timestamp */
	char line[512];
	int l1 = snprintf(line, sizeof(line),
			  "2000-01-01T00:00:00.000Z test_metaserver[%d] warn RDFS1100005: fsck: "
			  "problem %u: ino=%llu (0), server %u, 0+10: repaired\n", (int)getpid(),
			  MS_FSCK_ABOVE_HIGH_WATER, (unsigned long long)fa, id);
	std::string fill(cap - l1 - 16, '.');
	ASSERT_EQ(write(wfd, fill.data(), fill.size()), (ssize_t)fill.size());
	close(wfd);
	ASSERT_EQ(log_open_file(fifo.c_str()), 0);

	Fsck f;
	std::thread t([&] { f = fsck(1); });
	/* fsck's first line is in: it has its snapshot, and waits to write the second */
	int queued = 0;
	for (int i = 0; i < 10000 && queued <= (int)fill.size(); i++) {
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
		ASSERT_EQ(ioctl(rfd, FIONREAD, &queued), 0);
	}
	EXPECT_EQ(queued, (int)fill.size() + l1) << "fsck did not stop after its first line";

	/* meanwhile an allocation past the persisted mark raises it */
	struct ms_layout l;
	ASSERT_EQ(ms_layout(ms, sess, &root, g, 0, 5 * 4096, 1, 0, &l), 0);
	ms_layout_free(&l);
	EXPECT_EQ(blocks_of(g), (std::set<uint64_t>{ 20, 21, 22, 23, 24 }));

	/* let fsck go on: drain the log until it is done */
	std::atomic<bool> done{ false };
	std::thread drain([&] {
		char buf[4096];

		while (!done) {
			struct pollfd p = { rfd, POLLIN, 0 };

			if (poll(&p, 1, 10) > 0 && read(rfd, buf, sizeof(buf)) <= 0)
				std::this_thread::sleep_for(std::chrono::milliseconds(1));
		}
	});
	t.join();
	ASSERT_EQ(log_open_file("/dev/stderr"), 0);
	done = true;
	drain.join();
	close(rfd);
	EXPECT_EQ(f.count(MS_FSCK_ABOVE_HIGH_WATER), 2u) << str(f);

	/* g's blocks go back to the allocator; the mark must still cover them */
	ASSERT_EQ(ms_unlink(ms, &root, 1, "new"), 0);
	EXPECT_GE(persisted_mark(), 25u) << "the repair lowered the persisted mark";

	/* so that the next file to get them gets them zeroed */
	ZeroLog zeros;
	ms_set_zeroer(ms, ZeroLog::fn, &zeros);
	uint64_t h = mkfile(1, "h");
	ASSERT_EQ(ms_layout(ms, sess, &root, h, 0, 5 * 4096, 1, 0, &l), 0);
	ms_layout_free(&l);
	for (uint64_t b : blocks_of(h))
		EXPECT_EQ(zeros.blocks.count(b), b < 25 ? 1u : 0u)
			<< "block " << b << " of a removed file handed out unzeroed";
}

/* ------------------------------------------------------------ the report */

TEST_F(MsFsckTest, MaxLimitsTheListNotTheCounts)
{
	uint64_t d = mkdir_(1, "d");
	uint64_t e = mkfile(d, "e");
	uint64_t fa = write_file(1, "f", 10);

	offline([&](Db &db) { db.del_inode(e); });
	auto runs = runs_of(fa);
	ASSERT_EQ(runs.size(), 1u);
	const uint64_t lb = free_run(4);
	ASSERT_EQ(ms_debug_map(ms, id, lb, 4, 1), 0);
	ASSERT_EQ(ms_debug_map(ms, id, runs[0].first, 2, 0), 0);

	Fsck all = fsck();
	EXPECT_EQ(all.r.problems, 3u) << str(all);
	ASSERT_EQ(all.p.size(), 3u);
	EXPECT_EQ(all.count(MS_FSCK_LEAKED), 1u);
	EXPECT_EQ(all.count(MS_FSCK_UNMAPPED), 1u);
	EXPECT_EQ(all.count(MS_FSCK_DANGLING_ENTRY), 1u);

	Fsck one = fsck(0, 0, 1);
	EXPECT_EQ(one.r.n, 1u);
	ASSERT_EQ(one.p.size(), 1u);
	EXPECT_EQ(str(one.p[0]), str(all.p[0]));
	EXPECT_EQ(one.r.problems, 3u);
	for (uint32_t k = 0; k < MS_FSCK_KINDS; k++)
		EXPECT_EQ(one.r.counts[k], all.r.counts[k]) << "kind " << k;

	Fsck none = fsck(0, 0, 0);
	EXPECT_EQ(none.ret, 0);
	EXPECT_EQ(none.r.n, 0u);
	EXPECT_EQ(none.r.problems, 3u);
}

/* ------------------------------------------------------------ on a busy metaserver */

TEST_F(MsFsckTest, ALiveMetaserverIsSeenConsistent)
{
	constexpr int kThreads = 3, kRuns = 40;
	std::atomic<bool> stop{ false };
	std::atomic<uint64_t> ops{ 0 }, errors{ 0 };
	std::mutex err_mu;
	std::string first_error;
	std::vector<std::thread> threads;

	/* a volume large enough that nobody runs out */
	ms_session_close(ms, ioservers.back());
	ioservers.pop_back();
	id = add_server("big", 1 << 16);

	auto fail = [&](const std::string &what, int ret) {
		std::lock_guard<std::mutex> g(err_mu);

		if (errors++ == 0)
			first_error = what + ": " + std::to_string(ret);
	};

	for (int t = 0; t < kThreads; t++)
		threads.emplace_back([&, t] {
			struct ms_session *s = ms_session_new(ms, "client");
			std::mt19937 rng(1234 + t);
			uint64_t dir_ino = 0;
			struct ms_attr a;
			std::string dn = "t" + std::to_string(t);

			if (ms_mkdir(ms, &root, 1, dn.c_str(), 0755, 0, &a)) {
				fail("mkdir", -1);
				ms_session_close(ms, s);
				return;
			}
			dir_ino = a.ino;
			for (uint64_t n = 0; !stop; n++) {
				std::string name = "f" + std::to_string(n % 4);
				uint64_t h = 0, off = rng() % 300, len = 1 + rng() % 40;
				struct ms_layout l;
				struct ms_range w;
				int ret, unlinked = 0;

				ret = ms_mknod(ms, s, &root, dir_ino, name.c_str(), S_IFREG | 0644, 0, 0,
					       0, 1, O_RDWR, &a, &h);
				if (ret) {
					fail("mknod", ret);
					break;
				}
				uint64_t ino = a.ino;
				ret = ms_layout(ms, s, &root, ino, off * 4096, len * 4096, 1, h, &l);
				if (ret)
					fail("layout", ret);
				ms_layout_free(&l);
				w.offset = off * 4096;
				w.length = (1 + rng() % len) * 4096;
				ret = ms_commit(ms, s, &root, ino, w.offset + w.length, 0, &w, 1, h,
						&a);
				if (ret)
					fail("commit", ret);
				switch (rng() % 5) {
				case 0: {
					struct ms_setattr sa = {};

					sa.valid = MS_SET_SIZE;
					sa.size = rng() % ((off + len) * 4096);
					sa.handle = h;
					ret = ms_setattr(ms, s, &root, ino, &sa, &a);
					if (ret)
						fail("truncate", ret);
					break;
				}
				case 1:
					ret = ms_punch(ms, s, &root, ino, off * 4096,
						       (1 + rng() % len) * 4096, h, &a);
					if (ret)
						fail("punch", ret);
					break;
				case 2:
					/* unlinked while open: an orphan until the release */
					ret = ms_unlink(ms, &root, dir_ino, name.c_str());
					if (ret)
						fail("unlink open", ret);
					unlinked = 1;
					std::this_thread::sleep_for(std::chrono::milliseconds(1));
					break;
				case 3: {
					uint64_t h2;

					ret = ms_open_file(ms, s, &root, ino, O_RDWR | O_TRUNC, &a,
							   &h2);
					if (ret)
						fail("O_TRUNC", ret);
					else
						ms_release(ms, s, h2);
					break;
				}
				default:
					break;
				}
				ret = ms_release(ms, s, h);
				if (ret)
					fail("release", ret);
				if (!unlinked && rng() % 3 == 0) {
					ret = ms_unlink(ms, &root, dir_ino, name.c_str());
					if (ret)
						fail("unlink", ret);
				}
				ops++;
			}
			ms_session_close(ms, s);
		});

	while (ops < 20 && errors == 0)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	uint64_t ops0 = ops, orphans_seen = 0;
	for (int i = 0; i < kRuns; i++) {
		Fsck f = fsck(i == kRuns / 2 ? 1 : 0);

		EXPECT_EQ(f.ret, 0) << "run " << i;
		EXPECT_EQ(f.r.problems, 0u) << "run " << i << ": " << str(f);
		EXPECT_EQ(f.r.repaired, 0u) << "run " << i << ": " << str(f);
		EXPECT_EQ(f.r.blocks_mapped,
			  f.r.blocks_owned + f.r.blocks_held + f.r.blocks_quarantined)
			<< "run " << i << ": " << str(f);
		orphans_seen += f.r.orphans_open;
		std::this_thread::sleep_for(std::chrono::milliseconds(2));
	}
	/* and a few repairs in a row, under load: nothing to repair */
	for (int i = 0; i < 5; i++) {
		Fsck f = fsck(1, 0);

		EXPECT_EQ(f.r.problems, 0u) << "repair " << i << ": " << str(f);
		EXPECT_EQ(f.r.repaired, 0u) << "repair " << i << ": " << str(f);
	}
	uint64_t ops1 = ops;
	stop = true;
	for (auto &t : threads)
		t.join();
	EXPECT_EQ(errors.load(), 0u) << first_error;
	EXPECT_GT(ops1 - ops0, (uint64_t)kRuns) << "the workload hardly ran during the checks";
	Fsck f = fsck();
	expect_clean(f, "after the workload");
	struct ms_statfs st;
	ms_statfs(ms, &st);
	EXPECT_EQ(f.r.blocks_mapped, st.total_blocks - st.free_blocks);
	std::cerr << "[          ] " << ops1 - ops0 << " operations during " << kRuns + 5
		  << " checks; " << orphans_seen << " open orphans seen\n";
}
