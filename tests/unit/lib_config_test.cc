// SPDX-License-Identifier: MIT
/*
 * lib_config_test.cc - INI loading, section fallback, overrides and typed values.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include <string.h>
#include <algorithm>

#include <map>
#include <string>

#include <gtest/gtest.h>

extern "C" {
#include "config.h"
#include "log.h"
}

namespace {

class Config : public ::testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/rdfs-config-XXXXXX";
		ASSERT_NE(nullptr, mkdtemp(tmpl));
		dir_ = tmpl;
		cfg_ = config_new();
		ASSERT_NE(nullptr, cfg_);
	}
	void TearDown() override
	{
		config_free(cfg_);
		for (auto &p : files_)
			unlink(p.c_str());
		rmdir(dir_.c_str());
	}
	std::string write_file(const std::string &name, const std::string &content)
	{
		std::string path = dir_ + "/" + name;
		FILE *f = fopen(path.c_str(), "w");

		EXPECT_NE(nullptr, f);
		fputs(content.c_str(), f);
		fclose(f);
		files_.push_back(path);
		return path;
	}
	std::string dir_;
	std::vector<std::string> files_;
	struct rdfs_config *cfg_;
};

const char kConf[] =
	"# rdfs test configuration\n"
	"[cluster]\n"
	"secret_file = /etc/rdfs/secret\n"
	"metaserver  = tcp://mds1:7000\n"
	"log_level = info\n"
	"\n"
	"[ioserver]\n"
	"listen = tcp://0.0.0.0:7100\n"
	"create_size = 2G\n"
	"log_level = debug   ; inline comment\n"
	"\n"
	"[metaserver]\n"
	"threads = 8\n"
	"Threads = 3\n";

TEST_F(Config, SectionThenClusterThenDefault)
{
	ASSERT_EQ(0, config_load(cfg_, write_file("a.conf", kConf).c_str(), nullptr));
	EXPECT_STREQ("tcp://0.0.0.0:7100", config_get(cfg_, "ioserver", "listen", "x"));
	EXPECT_STREQ("debug", config_get(cfg_, "ioserver", "log_level", "x"));
	EXPECT_STREQ("info", config_get(cfg_, "metaserver", "log_level", "x"));
	EXPECT_STREQ("tcp://mds1:7000", config_get(cfg_, "fuse", "metaserver", "x"));
	EXPECT_STREQ("fallback", config_get(cfg_, "fuse", "attr_timeout", "fallback"));
	EXPECT_EQ(nullptr, config_get(cfg_, "fuse", "attr_timeout", nullptr));
}

TEST_F(Config, KeysAndSectionsAreCaseSensitive)
{
	int64_t v;

	ASSERT_EQ(0, config_load(cfg_, write_file("a.conf", kConf).c_str(), nullptr));
	ASSERT_EQ(0, config_get_int(cfg_, "metaserver", "threads", 1, &v));
	EXPECT_EQ(8, v);
	ASSERT_EQ(0, config_get_int(cfg_, "metaserver", "Threads", 1, &v));
	EXPECT_EQ(3, v);
	EXPECT_EQ(nullptr, config_get(cfg_, "IOSERVER", "listen", nullptr));
}

TEST_F(Config, SetOverridesFileAndLaterLoadsMerge)
{
	ASSERT_EQ(0, config_load(cfg_, write_file("a.conf", kConf).c_str(), nullptr));
	ASSERT_EQ(0, config_set(cfg_, "ioserver", "listen", "tcp://127.0.0.1:7200"));
	ASSERT_EQ(0, config_set(cfg_, "ioserver", "volume", "/srv/vol0"));
	EXPECT_STREQ("tcp://127.0.0.1:7200", config_get(cfg_, "ioserver", "listen", nullptr));
	EXPECT_STREQ("/srv/vol0", config_get(cfg_, "ioserver", "volume", nullptr));
	ASSERT_EQ(0, config_load(cfg_, write_file("b.conf", "[ioserver]\nname = ios7\n").c_str(),
				 nullptr));
	EXPECT_STREQ("ios7", config_get(cfg_, "ioserver", "name", nullptr));
	EXPECT_STREQ("tcp://127.0.0.1:7200", config_get(cfg_, "ioserver", "listen", nullptr));
}

TEST_F(Config, MissingFileIsEnoent)
{
	EXPECT_EQ(-ENOENT, config_load(cfg_, (dir_ + "/nope.conf").c_str(), nullptr));
}

TEST_F(Config, SyntaxErrorReportsLineAndChangesNothing)
{
	int line = -1;
	std::string path = write_file("bad.conf", "[ioserver]\nlisten = tcp://x:1\nthis line is bad\n"
						  "name = late\n");

	EXPECT_EQ(-EINVAL, config_load(cfg_, path.c_str(), &line));
	EXPECT_EQ(3, line);
	EXPECT_EQ(nullptr, config_get(cfg_, "ioserver", "listen", nullptr));
	EXPECT_EQ(nullptr, config_get(cfg_, "ioserver", "name", nullptr));

	path = write_file("bad2.conf", "[ioserver\nlisten = 1\n");
	EXPECT_EQ(-EINVAL, config_load(cfg_, path.c_str(), &line));
	EXPECT_EQ(1, line);
}

TEST_F(Config, Sizes)
{
	uint64_t v;

	EXPECT_EQ(0, config_parse_size("1048576", &v));
	EXPECT_EQ(1048576u, v);
	EXPECT_EQ(0, config_parse_size("4k", &v));
	EXPECT_EQ(4096u, v);
	EXPECT_EQ(0, config_parse_size("1M", &v));
	EXPECT_EQ(1u << 20, v);
	EXPECT_EQ(0, config_parse_size("2G", &v));
	EXPECT_EQ(2ull << 30, v);
	EXPECT_EQ(0, config_parse_size("3t", &v));
	EXPECT_EQ(3ull << 40, v);
	EXPECT_EQ(0, config_parse_size("64KiB", &v));
	EXPECT_EQ(65536u, v);
	EXPECT_EQ(0, config_parse_size("0", &v));
	EXPECT_EQ(0u, v);
	EXPECT_EQ(-EINVAL, config_parse_size("", &v));
	EXPECT_EQ(-EINVAL, config_parse_size("k", &v));
	EXPECT_EQ(-EINVAL, config_parse_size("12x", &v));
	EXPECT_EQ(-EINVAL, config_parse_size("-1", &v));
	EXPECT_EQ(-EINVAL, config_parse_size("1.5G", &v));
	EXPECT_EQ(-EINVAL, config_parse_size("99999999999999999999", &v));
	EXPECT_EQ(-EINVAL, config_parse_size("16777216T", &v));	/* 2^64 */

	ASSERT_EQ(0, config_load(cfg_, write_file("a.conf", kConf).c_str(), nullptr));
	ASSERT_EQ(0, config_get_size(cfg_, "ioserver", "create_size", 7, &v));
	EXPECT_EQ(2ull << 30, v);
	ASSERT_EQ(0, config_get_size(cfg_, "ioserver", "absent", 7, &v));
	EXPECT_EQ(7u, v);
	EXPECT_EQ(-EINVAL, config_get_size(cfg_, "ioserver", "listen", 7, &v));
	EXPECT_EQ(7u, v);
}

TEST_F(Config, IntsAndBools)
{
	int64_t i;
	int b;

	config_set(cfg_, "fuse", "attr_timeout", "-5");
	config_set(cfg_, "fuse", "direct_io", "yes");
	config_set(cfg_, "fuse", "bad_int", "12abc");
	config_set(cfg_, "fuse", "bad_bool", "maybe");
	ASSERT_EQ(0, config_get_int(cfg_, "fuse", "attr_timeout", 1, &i));
	EXPECT_EQ(-5, i);
	EXPECT_EQ(-EINVAL, config_get_int(cfg_, "fuse", "bad_int", 1, &i));
	EXPECT_EQ(1, i);
	ASSERT_EQ(0, config_get_bool(cfg_, "fuse", "direct_io", 0, &b));
	EXPECT_EQ(1, b);
	EXPECT_EQ(-EINVAL, config_get_bool(cfg_, "fuse", "bad_bool", 0, &b));
	EXPECT_EQ(0, b);
	config_set(cfg_, "fuse", "direct_io", "Off");
	ASSERT_EQ(0, config_get_bool(cfg_, "fuse", "direct_io", 1, &b));
	EXPECT_EQ(0, b);
}

TEST_F(Config, ForeachListsOneSectionInOrder)
{
	std::vector<std::pair<std::string, std::string>> seen;

	ASSERT_EQ(0, config_load(cfg_, write_file("a.conf", kConf).c_str(), nullptr));
	config_foreach(cfg_, "ioserver", [](const char *k, const char *v, void *arg) {
		((std::vector<std::pair<std::string, std::string>> *)arg)->emplace_back(k, v);
	}, &seen);
	ASSERT_EQ(3u, seen.size());
	EXPECT_EQ("listen", seen[0].first);
	EXPECT_EQ("create_size", seen[1].first);
	EXPECT_EQ("log_level", seen[2].first);
	EXPECT_EQ("debug", seen[2].second);
}

TEST(Log, ParsesLevels)
{
	EXPECT_EQ(LOG_LVL_ERROR, log_parse_level("error"));
	EXPECT_EQ(LOG_LVL_WARN, log_parse_level("warn"));
	EXPECT_EQ(LOG_LVL_INFO, log_parse_level("INFO"));
	EXPECT_EQ(LOG_LVL_DEBUG, log_parse_level("debug"));
	EXPECT_EQ(-EINVAL, log_parse_level("verbose"));
	EXPECT_EQ(-EINVAL, log_parse_level(nullptr));
}

TEST(Log, WritesTimestampedLinesToFile)
{
	char path[] = "/tmp/rdfs-log-XXXXXX";
	int fd = mkstemp(path);
	char buf[512] = {};

	ASSERT_GE(fd, 0);
	log_init("/usr/bin/rdfs-test", LOG_LVL_INFO);
	ASSERT_EQ(0, log_open_file(path));
	log_info(1900001, "hello %d", 42);
	log_debug(1900002, "filtered out");
	log_warn(1900003, "multi\n");
	ASSERT_GT(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	unlink(path);
	/* Restore stderr logging for the other tests. */
	ASSERT_EQ(0, log_open_file("/dev/stderr"));
	log_init("rdfs", LOG_LVL_INFO);

	std::string s(buf);
	std::string pid = std::to_string(getpid());
	/* 2026-11-22T02:40:00.123Z rdfs-test[pid] info RDFS1900001: hello 42 */
	ASSERT_GE(s.size(), 25u);
	EXPECT_EQ('T', s[10]);
	EXPECT_EQ('.', s[19]);
	EXPECT_EQ('Z', s[23]);
	EXPECT_EQ(' ', s[24]);
	EXPECT_EQ(0u, s.find_first_of("0123456789"));
	EXPECT_NE(std::string::npos, s.find(" rdfs-test[" + pid + "] info RDFS1900001: hello 42\n"));
	EXPECT_EQ(std::string::npos, s.find("filtered"));
	EXPECT_NE(std::string::npos, s.find("] warn RDFS1900003: multi\n"));
	EXPECT_EQ(2, std::count(s.begin(), s.end(), '\n'));
}

/*
 * Logs to a temporary file standing in for stderr, with JOURNAL_STREAM set to
 * @journal_stream (or to the file's own DEV:INODE if "self"), as systemd runs
 * a service whose stderr is the journal; what was logged.
 */
static std::string log_as_service(const char *journal_stream)
{
	char path[] = "/tmp/rdfs-log-XXXXXX";
	int fd = mkstemp(path);
	int saved = dup(STDERR_FILENO);
	char buf[512] = {};
	struct stat st;

	EXPECT_GE(fd, 0);
	EXPECT_GE(saved, 0);
	EXPECT_EQ(0, fstat(fd, &st));
	std::string self = std::to_string((unsigned long long)st.st_dev) + ":" +
			   std::to_string((unsigned long long)st.st_ino);
	EXPECT_EQ(STDERR_FILENO, dup2(fd, STDERR_FILENO));
	setenv("JOURNAL_STREAM", strcmp(journal_stream, "self") ? journal_stream : self.c_str(), 1);
	/* as a server starts: stderr is the stream (log_open_file reopens it by name here) */
	EXPECT_EQ(0, log_open_file("/dev/stderr"));
	log_init("rdfs-test", LOG_LVL_DEBUG);
	log_error(1900004, "e %d", 1);
	log_warn(1900005, "w");
	log_info(1900006, "ino=%d: i", 42);
	log_debug(1900007, "d\n%s\n", "two lines");

	dup2(saved, STDERR_FILENO);
	close(saved);
	unsetenv("JOURNAL_STREAM");
	EXPECT_EQ(0, log_open_file("/dev/stderr"));
	log_init("rdfs", LOG_LVL_INFO);
	EXPECT_GT(pread(fd, buf, sizeof(buf) - 1, 0), 0);
	close(fd);
	unlink(path);
	return buf;
}

TEST(Log, JournalStreamGetsPriorityPrefixesAndNoTimestamp)
{
	/* sd-daemon(3): <3> error, <4> warning, <6> info, <7> debug; journald adds the rest */
	EXPECT_EQ("<3>RDFS1900004: e 1\n"
		  "<4>RDFS1900005: w\n"
		  "<6>RDFS1900006: ino=42: i\n"
		  "<7>RDFS1900007: d two lines\n",
		  log_as_service("self"));
}

TEST(Log, OtherJournalStreamKeepsTimestamps)
{
	/* stderr redirected elsewhere by the service, or JOURNAL_STREAM inherited */
	for (const char *other : { "1:1", "garbage", "" }) {
		std::string s = log_as_service(other);

		EXPECT_EQ(std::string::npos, s.find("<3>")) << other;
		EXPECT_NE(std::string::npos, s.find("] error RDFS1900004: e 1\n")) << other;
		EXPECT_EQ(4, std::count(s.begin(), s.end(), '\n')) << other;
	}
}

TEST(Log, FileLogEvenUnderTheJournal)
{
	char path[] = "/tmp/rdfs-log-XXXXXX";
	int fd = mkstemp(path);
	char buf[256] = {};
	struct stat st;

	ASSERT_GE(fd, 0);
	ASSERT_EQ(0, fstat(STDERR_FILENO, &st));
	std::string self = std::to_string((unsigned long long)st.st_dev) + ":" +
			   std::to_string((unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", self.c_str(), 1);
	log_init("rdfs-test", LOG_LVL_INFO);
	/* log_file= in the config: the file gets whole lines */
	ASSERT_EQ(0, log_open_file(path));
	log_warn(1900008, "to the file");
	unsetenv("JOURNAL_STREAM");
	ASSERT_EQ(0, log_open_file("/dev/stderr"));
	log_init("rdfs", LOG_LVL_INFO);
	ASSERT_GT(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	unlink(path);
	std::string s(buf);
	EXPECT_EQ('Z', s[23]);
	EXPECT_NE(std::string::npos, s.find("] warn RDFS1900008: to the file\n"));
}

} // namespace
