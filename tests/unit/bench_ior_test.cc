// SPDX-License-Identifier: MIT
// bench_ior_test.cc - rdfs-bench's own logic: option parsing, the -z and -C
// orders, the verify pattern, the summary statistics and IOR/mdtest's output
// lines. A benchmark that miscounts or misplaces is worse than none.
#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

extern "C" {
#include "../../bench/ior/ior.h"
}

namespace {

// Runs ior_parse_args on a list of arguments (argv[0] added).
struct Parsed {
	int rc;
	ior_params p;
	std::string err;
};

Parsed parse(std::vector<std::string> args)
{
	std::vector<char *> argv;
	static std::vector<std::string> keep;
	Parsed r{};
	char err[512];

	keep = args;
	keep.insert(keep.begin(), "rdfs-bench");
	for (auto &s : keep)
		argv.push_back(&s[0]);
	argv.push_back(nullptr);
	r.rc = ior_parse_args(&r.p, (int)keep.size(), argv.data(), err, sizeof(err));
	r.err = err;
	return r;
}

Parsed parse_md(std::vector<std::string> args, md_params *out)
{
	std::vector<char *> argv;
	static std::vector<std::string> keep;
	Parsed r{};
	char err[512];

	keep = args;
	keep.insert(keep.begin(), "mdtest");
	for (auto &s : keep)
		argv.push_back(&s[0]);
	argv.push_back(nullptr);
	r.rc = md_parse_args(out, (int)keep.size(), argv.data(), err, sizeof(err));
	r.err = err;
	return r;
}

} // namespace

TEST(BenchSize, SuffixesArePowersOf1024)
{
	uint64_t v;

	ASSERT_EQ(ior_parse_size("4096", &v), 0);
	EXPECT_EQ(v, 4096u);
	ASSERT_EQ(ior_parse_size("64k", &v), 0);
	EXPECT_EQ(v, 64u << 10);
	ASSERT_EQ(ior_parse_size("1M", &v), 0);
	EXPECT_EQ(v, 1u << 20);
	ASSERT_EQ(ior_parse_size("2g", &v), 0);
	EXPECT_EQ(v, 2ull << 30);
	ASSERT_EQ(ior_parse_size("3t", &v), 0);
	EXPECT_EQ(v, 3ull << 40);
}

TEST(BenchSize, GarbageIsRefused)
{
	uint64_t v = 77;

	EXPECT_EQ(ior_parse_size("", &v), -EINVAL);
	EXPECT_EQ(ior_parse_size("k", &v), -EINVAL);
	EXPECT_EQ(ior_parse_size("-1k", &v), -EINVAL);
	EXPECT_EQ(ior_parse_size("1kb", &v), -EINVAL);
	EXPECT_EQ(ior_parse_size("1x", &v), -EINVAL);
	EXPECT_EQ(ior_parse_size("1.5m", &v), -EINVAL);
	EXPECT_EQ(ior_parse_size(" 1", &v), -EINVAL);
	EXPECT_EQ(ior_parse_size("99999999999999999t", &v), -ERANGE);
	EXPECT_EQ(ior_parse_size("999999999999999999999", &v), -EINVAL);
	EXPECT_EQ(v, 77u) << "a refused size must not change the output";
}

TEST(BenchOptions, DefaultsAreIors)
{
	Parsed r = parse({});

	ASSERT_EQ(r.rc, 0) << r.err;
	EXPECT_EQ(r.p.api, IOR_API_POSIX);
	EXPECT_EQ(r.p.xfer, 256u << 10);
	EXPECT_EQ(r.p.block, 1u << 20);
	EXPECT_EQ(r.p.segments, 1u);
	EXPECT_EQ(r.p.ntasks, 1);
	EXPECT_EQ(r.p.reps, 1);
	EXPECT_TRUE(r.p.write && r.p.read) << "neither -w nor -r means both";
	EXPECT_STREQ(r.p.path, "./testFile");
	EXPECT_FALSE(r.p.json);
}

TEST(BenchOptions, EveryIorOptionLands)
{
	Parsed r = parse({"-a", "posix", "-w", "-W", "-t", "1m", "-b", "4m", "-s", "3", "-F", "-e", "-Y",
			  "-C", "-z", "-D", "2.5", "-k", "-N", "4", "-i", "5", "-o", "/x/y",
			  "-O", "/tmp/r.json", "--drop-cache", "--drop-cache-cmd", "sync",
			  "--seed", "9"});

	ASSERT_EQ(r.rc, 0) << r.err;
	EXPECT_TRUE(r.p.write);
	EXPECT_FALSE(r.p.read) << "-w alone: no read phase";
	EXPECT_TRUE(r.p.check_write);
	EXPECT_EQ(r.p.xfer, 1u << 20);
	EXPECT_EQ(r.p.block, 4u << 20);
	EXPECT_EQ(r.p.segments, 3u);
	EXPECT_TRUE(r.p.file_per_proc);
	EXPECT_TRUE(r.p.fsync);
	EXPECT_TRUE(r.p.fsync_per_write);
	EXPECT_TRUE(r.p.reorder);
	EXPECT_TRUE(r.p.random);
	EXPECT_DOUBLE_EQ(r.p.stonewall, 2.5);
	EXPECT_TRUE(r.p.keep);
	EXPECT_EQ(r.p.ntasks, 4);
	EXPECT_EQ(r.p.reps, 5);
	EXPECT_STREQ(r.p.path, "/x/y");
	EXPECT_TRUE(r.p.json);
	EXPECT_STREQ(r.p.json_file, "/tmp/r.json");
	EXPECT_TRUE(r.p.drop_cache);
	EXPECT_STREQ(r.p.drop_cache_cmd, "sync");
	EXPECT_EQ(r.p.seed, 9u);
	EXPECT_EQ(ior_aggregate_bytes(&r.p), 4ull * 3 * (4 << 20));
}

TEST(BenchOptions, ErrorsSayWhatIsWrong)
{
	struct {
		std::vector<std::string> args;
		const char *says;
	} cases[] = {
		{{"-t", "3"}, "multiple of 8"},
		{{"-t", "4k", "-b", "6k"}, "multiple of the transfer size"},
		{{"-t", "0"}, "transfer size"},
		{{"-t", "12q"}, "bad transfer size '12q'"},
		{{"-b", "-1"}, "bad block size"},
		{{"-a", "MPIIO"}, "unsupported API 'MPIIO'"},
		{{"-N", "0"}, "number of tasks"},
		{{"-N", "100000"}, "number of tasks"},
		{{"-i", "x"}, "repetition"},
		{{"-s", "0"}, "segment"},
		{{"-D", "-3"}, "stonewall"},
		{{"-W", "-r"}, "-W needs a write phase"},
		{{"-R", "-w"}, "-R needs a read phase"},
		{{"--direct", "-t", "1000", "-b", "8000"}, "multiples of 4k"},
		{{"-Q"}, "unknown option '-Q'"},
		{{"--frob"}, "unknown option '--frob'"},
		{{"--drop-cache-cmd"}, "option '--drop-cache-cmd' needs a value"},
		{{"-t"}, "option '-t' needs a value"},
		{{"stray"}, "unexpected argument 'stray'"},
		{{"-a", "RDFS", "-o", "relative"}, "absolute path"},
		{{"--config", "/nonexistent/rdfs.conf"}, "are for -a RDFS"},
		{{"-a", "RDFS", "-o", "/f", "--config", "/nonexistent/rdfs.conf"}, "cannot read config"},
	};

	for (auto &c : cases) {
		Parsed r = parse(c.args);

		EXPECT_EQ(r.rc, -EINVAL) << c.args[0];
		EXPECT_NE(r.err.find(c.says), std::string::npos)
			<< "args " << c.args[0] << ": error '" << r.err << "' lacks '" << c.says << "'";
	}
	EXPECT_EQ(parse({"--help"}).rc, 1);
	Parsed b = parse({"-B", "-t", "4k", "-b", "8k"});
	EXPECT_EQ(b.rc, 0);
	EXPECT_TRUE(b.p.direct) << "-B is IOR's O_DIRECT";
	EXPECT_EQ(parse({"-h"}).rc, 1);
}

TEST(BenchOptions, RdfsApiTakesClusterFromConfigWithOverrides)
{
	char path[] = "/tmp/bench_ior_test_XXXXXX";
	int fd = mkstemp(path);
	const char conf[] = "[cluster]\nmetaserver = tcp://10.0.0.1:7000\nsecret_file = /s/secret\n"
			    "[rdfs-bench]\ntimeout = 1234\n";

	ASSERT_GE(fd, 0);
	ASSERT_EQ(write(fd, conf, sizeof(conf) - 1), (ssize_t)sizeof(conf) - 1);
	close(fd);
	Parsed r = parse({"-a", "RDFS", "-o", "/bench/f", "--config", path});
	ASSERT_EQ(r.rc, 0) << r.err;
	EXPECT_EQ(r.p.api, IOR_API_RDFS);
	EXPECT_STREQ(r.p.cluster.metaserver, "tcp://10.0.0.1:7000");
	EXPECT_STREQ(r.p.cluster.secret_file, "/s/secret");
	EXPECT_EQ(r.p.cluster.timeout_ms, 1234);
	r = parse({"-a", "rdfs", "-o", "/f", "--config", path, "--metaserver", "tcp://h:1",
		   "--secret-file", "/other"});
	ASSERT_EQ(r.rc, 0) << r.err;
	EXPECT_STREQ(r.p.cluster.metaserver, "tcp://h:1");
	EXPECT_STREQ(r.p.cluster.secret_file, "/other");
	r = parse({"-a", "RDFS", "-o", "/f", "--drop-cache", "--config", path});
	EXPECT_EQ(r.rc, -EINVAL);
	unlink(path);
}

TEST(BenchLayout, SharedFileAndFilePerProcessOffsets)
{
	Parsed r = parse({"-t", "4k", "-b", "16k", "-s", "3", "-N", "2"});

	ASSERT_EQ(r.rc, 0);
	// segment 1, task 1, transfer 2: 1 * (2 * 16k) + 1 * 16k + 2 * 4k
	EXPECT_EQ(ior_xfer_offset(&r.p, 1, 1, 2), 32768u + 16384u + 8192u);
	EXPECT_EQ(ior_xfers_per_task(&r.p), 12u);
	EXPECT_EQ(ior_index_offset(&r.p, 1, 6), ior_xfer_offset(&r.p, 1, 1, 2));
	char buf[64];
	ior_task_path(&r.p, 3, buf, sizeof(buf));
	EXPECT_STREQ(buf, "./testFile");

	r = parse({"-t", "4k", "-b", "16k", "-s", "3", "-N", "2", "-F", "-o", "/d/f"});
	ASSERT_EQ(r.rc, 0);
	EXPECT_EQ(ior_xfer_offset(&r.p, 1, 1, 2), 16384u + 8192u);
	ior_task_path(&r.p, 3, buf, sizeof(buf));
	EXPECT_STREQ(buf, "/d/f.00000003");
}

TEST(BenchLayout, RandomOrderIsAPermutationAndRepeatable)
{
	Parsed r = parse({"-z", "-t", "4k", "-b", "1m", "-s", "3", "-N", "3"});
	ASSERT_EQ(r.rc, 0);
	uint64_t n = ior_xfers_per_task(&r.p);
	std::vector<uint64_t> a(n), b(n), c(n), seq(n);

	ior_xfer_order(&r.p, 1, a.data());
	ior_xfer_order(&r.p, 1, b.data());
	ior_xfer_order(&r.p, 2, c.data());
	EXPECT_EQ(a, b) << "writer and reader of task 1's data must use the same order";
	EXPECT_NE(a, c) << "each task its own order";

	// Every transfer exactly once, and every offset in the task's own blocks.
	std::set<uint64_t> seen(a.begin(), a.end()), offsets;
	EXPECT_EQ(seen.size(), n);
	EXPECT_EQ(*seen.rbegin(), n - 1);
	for (uint64_t idx : a) {
		uint64_t off = ior_index_offset(&r.p, 1, idx);

		EXPECT_EQ(off / r.p.block % 3, 1u) << "offset " << off << " is not in task 1's blocks";
		offsets.insert(off);
	}
	EXPECT_EQ(offsets.size(), n);
	for (uint64_t i = 0; i < n; i++)
		seq[i] = i;
	EXPECT_NE(a, seq) << "-z must not be sequential";

	r.p.seed = 2;
	ior_xfer_order(&r.p, 1, b.data());
	EXPECT_NE(a, b) << "another seed, another order";

	r.p.random = 0;
	ior_xfer_order(&r.p, 1, a.data());
	EXPECT_EQ(a, seq) << "without -z the order is sequential";
}

TEST(BenchLayout, ReorderReadsTheNextTasksData)
{
	Parsed r = parse({"-N", "4", "-C"});
	ASSERT_EQ(r.rc, 0);
	std::set<int> sources;

	for (int t = 0; t < 4; t++) {
		int src = ior_read_source(&r.p, t);

		EXPECT_NE(src, t) << "with -C no task reads its own data";
		EXPECT_EQ(src, (t + 1) % 4);
		sources.insert(src);
	}
	EXPECT_EQ(sources.size(), 4u) << "every task's data is read by someone";
	r = parse({"-N", "4"});
	for (int t = 0; t < 4; t++)
		EXPECT_EQ(ior_read_source(&r.p, t), t);
}

TEST(BenchPattern, RoundTripsAtAnyAlignment)
{
	std::vector<uint8_t> buf(10000);
	uint8_t expected;

	for (uint64_t off : {0ull, 1ull, 7ull, 4096ull, 1000003ull}) {
		ior_pattern_fill(buf.data(), buf.size(), off, 3);
		EXPECT_EQ(ior_pattern_check(buf.data(), buf.size(), off, 3, &expected), -1);
		// A part read from the middle checks as well.
		EXPECT_EQ(ior_pattern_check(buf.data() + 13, 100, off + 13, 3, &expected), -1);
	}
}

TEST(BenchPattern, SingleFlippedByteIsFoundAtItsOffset)
{
	std::vector<uint8_t> buf(65536);
	uint8_t expected = 0;

	for (size_t bad : {0ul, 1ul, 8191ul, 8192ul, 65535ul}) {
		ior_pattern_fill(buf.data(), buf.size(), 1 << 20, 0);
		uint8_t good = buf[bad];
		buf[bad] ^= 0x01;
		EXPECT_EQ(ior_pattern_check(buf.data(), buf.size(), 1 << 20, 0, &expected), (long)bad);
		EXPECT_EQ(expected, good);
	}
}

TEST(BenchPattern, WrongWriterOrWrongOffsetOrZerosFail)
{
	std::vector<uint8_t> buf(4096), zeros(4096, 0);
	uint8_t expected;

	ior_pattern_fill(buf.data(), buf.size(), 8192, 1);
	EXPECT_EQ(ior_pattern_check(buf.data(), buf.size(), 8192, 2, &expected), 0)
		<< "another task's data must not pass";
	EXPECT_EQ(ior_pattern_check(buf.data(), buf.size(), 4096, 1, &expected), 0)
		<< "a block at the wrong offset must not pass";
	EXPECT_EQ(ior_pattern_check(zeros.data(), zeros.size(), 8192, 1, &expected), 0)
		<< "a hole must not pass";
}

TEST(BenchStats, MaxMinMeanPopulationStdDev)
{
	double v[] = {2, 4, 4, 4, 5, 5, 7, 9};
	ior_stats s = ior_stats_of(v, 8);

	EXPECT_DOUBLE_EQ(s.max, 9);
	EXPECT_DOUBLE_EQ(s.min, 2);
	EXPECT_DOUBLE_EQ(s.mean, 5);
	EXPECT_DOUBLE_EQ(s.sd, 2) << "IOR prints the population standard deviation";
	double one[] = {3.5};
	s = ior_stats_of(one, 1);
	EXPECT_DOUBLE_EQ(s.sd, 0);
	EXPECT_DOUBLE_EQ(s.mean, 3.5);
	EXPECT_DOUBLE_EQ(ior_median(v, 8), 4.5);
	double odd[] = {9, 1, 5};
	EXPECT_DOUBLE_EQ(ior_median(odd, 3), 5);
	EXPECT_DOUBLE_EQ(odd[0], 9) << "the median must not reorder its input";
}

TEST(BenchOutput, ResultRowHasIorsColumns)
{
	ior_result r = {1234.5678, 4938.27, 0.000202, 0.0001, 0.8, 0.00005, 0.81};
	char line[512];

	ior_format_row(line, sizeof(line), "write", &r, 1 << 20, 256 << 10, 0);
	EXPECT_STREQ(line, "write     1234.57    4938.27    0.000202    1024       256.00     "
			   "0.000100   0.800000   0.000050   0.810000   0");
}

TEST(BenchOutput, SummaryLineHasIorsColumns)
{
	Parsed r = parse({"-t", "1m", "-b", "4m", "-N", "2", "-i", "3", "-C"});
	ASSERT_EQ(r.rc, 0);
	ior_stats bw = {300, 100, 200, 81.65}, ops = {300, 100, 200, 81.65};
	char line[512];

	ior_format_summary(line, sizeof(line), "read", &r.p, &bw, &ops, 0.04);
	EXPECT_STREQ(line, "read          300.00     100.00     200.00      81.65     300.00     "
			   "100.00     200.00      81.65    0.04000      2    3   0     1      1    "
			   "4194304    1048576        8.0 POSIX");
}

TEST(BenchMdtest, OptionsAndPaths)
{
	md_params p;
	Parsed r = parse_md({"-n", "10", "-N", "3", "-u", "-w", "4k", "-i", "2", "-d", "/m/"}, &p);

	ASSERT_EQ(r.rc, 0) << r.err;
	EXPECT_EQ(p.files, 10u);
	EXPECT_EQ(p.ntasks, 3);
	EXPECT_EQ(p.write_bytes, 4096u);
	EXPECT_EQ(p.read_bytes, 4096u) << "-e defaults to -w";
	EXPECT_TRUE(p.unique_dir);
	char buf[256];
	md_file_path(&p, 2, 7, buf, sizeof(buf));
	EXPECT_STREQ(buf, "/m/mdtest.0/task.2/file.mdtest.2.7");
	p.unique_dir = 0;
	md_file_path(&p, 2, 7, buf, sizeof(buf));
	EXPECT_STREQ(buf, "/m/mdtest.0/file.mdtest.2.7");

	EXPECT_EQ(parse_md({"-n", "10"}, &p).rc, -EINVAL) << "-d is required";
	r = parse_md({"-d", "/m", "-w", "1k", "-e", "2k"}, &p);
	EXPECT_EQ(r.rc, -EINVAL);
	EXPECT_NE(r.err.find("reads past"), std::string::npos) << r.err;
	EXPECT_EQ(parse_md({"-d", "/m", "-n", "0"}, &p).rc, -EINVAL);
	EXPECT_EQ(parse_md({"-d", "/m", "-a", "HDF5"}, &p).rc, -EINVAL);
	EXPECT_EQ(parse_md({"--help"}, &p).rc, 1);
}

TEST(BenchMdtest, SummaryLineIsMdtests)
{
	ior_stats s = {12345.678, 1000, 6672.839, 5672.839};
	char line[256];

	md_format_summary(line, sizeof(line), md_phase_name[MD_CREATE], &s);
	EXPECT_STREQ(line, "   File creation             :      12345.678       1000.000       "
			   "6672.839       5672.839");
}

TEST(BenchOutput, PhaseResultSpansAllTasksAsIor)
{
	Parsed r = parse({"-t", "1m", "-b", "4m", "-N", "2"});
	ASSERT_EQ(r.rc, 0);
	ior_shared *sh = ior_shared_create(&r.p);
	ASSERT_NE(sh, nullptr);
	// Task 0 opens first and closes first; task 1 finishes last.
	double s0[IOR_NSTAMPS] = {10.0, 10.1, 10.2, 11.2, 11.3, 11.4};
	double s1[IOR_NSTAMPS] = {10.05, 10.3, 10.3, 12.2, 12.3, 12.5};
	memcpy(ior_stamps(&r.p, &sh->task[0], 0, IOR_PHASE_WRITE), s0, sizeof(s0));
	memcpy(ior_stamps(&r.p, &sh->task[1], 0, IOR_PHASE_WRITE), s1, sizeof(s1));
	sh->task[0].moved[IOR_PHASE_WRITE] = 4;
	sh->task[1].moved[IOR_PHASE_WRITE] = 4;
	sh->task[0].xfer_sum[IOR_PHASE_WRITE] = 0.8;	// 0.2 s per call
	sh->task[1].xfer_sum[IOR_PHASE_WRITE] = 1.6;	// 0.4 s per call

	ior_result res = ior_phase_result(&r.p, sh, 0, IOR_PHASE_WRITE);
	EXPECT_NEAR(res.open_s, 0.3, 1e-9) << "last open end - first open start";
	EXPECT_NEAR(res.xfer_s, 2.0, 1e-9);
	EXPECT_NEAR(res.close_s, 1.2, 1e-9);
	EXPECT_NEAR(res.total_s, 2.5, 1e-9) << "last close end - first open start";
	EXPECT_NEAR(res.bw_mib, 8.0 / 2.5, 1e-9) << "8 MiB moved in 2.5 s";
	EXPECT_NEAR(res.iops, 8 / 2.0, 1e-9);
	EXPECT_NEAR(res.latency, 0.3, 1e-9) << "mean of the tasks' mean call times";

	// A stonewalled phase counts what was moved, not what was planned.
	sh->task[1].moved[IOR_PHASE_WRITE] = 1;
	sh->task[1].xfer_sum[IOR_PHASE_WRITE] = 0.4;
	res = ior_phase_result(&r.p, sh, 0, IOR_PHASE_WRITE);
	EXPECT_NEAR(res.bw_mib, 5.0 / 2.5, 1e-9);
	ior_shared_destroy(sh, &r.p);
}
