// SPDX-License-Identifier: MIT
/*
 * main.c - rdfs-sweep's command line: options and configuration, the
 * connection to the cluster, and one subcommand per measurement.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "sweep.h"

#define PROG			"rdfs-sweep"
#define SECTION			"sweep"
#define DEFAULT_CONFIG		"/etc/rdfs/rdfs.conf"
#define DEFAULT_METASERVER	"tcp://127.0.0.1:7000"
#define DEFAULT_SECRET		"/etc/rdfs/secret"
#define DEFAULT_FILE		"/sweep.dat"
#define DEFAULT_SIZES		"4K-4M"
#define DEFAULT_BYTES		"16M"
#define DEFAULT_MIN_REQUESTS	16
#define DEFAULT_TIMEOUT_MS	60000
#define DEFAULT_SEED		0x72646673u	/* "rdfs" */

static void usage(FILE *out)
{
	fprintf(out,
"NAME\n"
"    rdfs-sweep - request-size sweep against one rdfs I/O server, and the disk\n"
"    and network limits it is judged by\n"
"\n"
"SYNOPSIS\n"
"    rdfs-sweep [OPTIONS] prepare [--passes N]\n"
"    rdfs-sweep [OPTIONS] ioserver|disk|net|net-rpc [--pass K] [--label NAME]\n"
"    rdfs-sweep [OPTIONS] fs-write|fs-read|disk-write FILE...\n"
"    rdfs-sweep --help\n"
"\n"
"DESCRIPTION\n"
"    The measurement of gmblock's figures 2 and 5 (papers/gmblock-synchronized-\n"
"    sends.txt) for rdfs: throughput against request size, one request\n"
"    outstanding (--depth), every request read from the disk.\n"
"\n"
"    prepare   Create the test file (--file) through the client library and fill\n"
"              it with a pattern that is a function of the file offset: N passes'\n"
"              worth of bytes (see PASSES), fsynced and committed.\n"
"    ioserver  For each request size: READ requests straight to the I/O server\n"
"              holding the file (rdfs protocol, this program's own connection,\n"
"              the capability of the file's layout), walking the file forward\n"
"              in pass K's region. Every byte read is checked against the\n"
"              pattern. Run it once per I/O server send mode and label the\n"
"              records with --label whole / --label overlap.\n"
"    disk      The same requests as pread(2) on the I/O server's volume file\n"
"              (--volume), O_DIRECT, at the volume offsets of the file's blocks:\n"
"              the volume's own read rate at each size (buffered after dropping\n"
"              the cache where the file system refuses O_DIRECT; said on stderr\n"
"              and in the record's \"io\").\n"
"    net       A responder thread in this program answers each 104-byte request\n"
"              with a 24-byte header and N bytes from memory over one loopback\n"
"              TCP connection: the network's rate for the same request/reply\n"
"              pattern, without disk and without rdfs's protocol stack. With\n"
"              --net-ns the responder listens inside that network namespace on\n"
"              --net-addr, so the replies cross the link that leads there (a\n"
"              rate-limited veth: bench/sweep/run's net-ratelimited).\n"
"    net-rpc   The same through rdfs's own stack: an rpc_server thread answers\n"
"              READs with N bytes from memory (zero-copy reply) over lib/xport\n"
"              TCP; the sweep calls it as it calls the I/O server. The gap to\n"
"              net is the protocol stack's cost, the gap to whole/overlap the\n"
"              disk path's.\n"
"    fs-write  Through any file system (the FUSE mount): write each FILE\n"
"              sequentially with write(2) of each size in turn, one thread per\n"
"              FILE, all at once; each size's pass ends with fsync(2) (timed).\n"
"              Size i writes region i of every file (the same budget as a pass:\n"
"              see PASSES), so a file ends up holding the pattern throughout.\n"
"    fs-read   Read FILEs written by fs-write (same --sizes, --bytes-per-size,\n"
"              --min-requests, --seed) the same way, checking every byte. The\n"
"              files' pages are first dropped from the client page cache\n"
"              (POSIX_FADV_DONTNEED: after fs-write's fsync they are clean).\n"
"              With several FILEs the figure is all bytes over the slowest\n"
"              reader's time.\n"
"    disk-write  fs-write with O_DIRECT into the holes of FILE, made a sparse\n"
"              file of the plan's size first (as the I/O server's volume is):\n"
"              point it at a scratch file on the file system that holds the\n"
"              volume for the disk's own write rate. With --depth N, N threads\n"
"              write each FILE at once, each taking the next request (the I/O\n"
"              server's many WRITEs in flight); the fsync ends it.\n"
"\n"
"    Each measured point is printed as a table row (mode, request bytes,\n"
"    requests, seconds, MiB/s) and, with --json, appended to FILE as one JSON\n"
"    object per line: {\"mode\", \"request_bytes\", \"mib_per_s\", \"requests\",\n"
"    \"bytes\", \"seconds\", \"depth\", \"run\", \"verified\", ...}.\n"
"    Time spent checking data is excluded from the seconds.\n"
"\n"
"COLD CACHE\n"
"    The I/O server must run with O_DIRECT on its volume and --readahead-cache=0\n"
"    for a cold-cache sweep (bench/sweep/run does this). Within a pass no block\n"
"    is read twice; pass K reads only region K of the file; with --volume, the\n"
"    volume's page cache is dropped (fdatasync + POSIX_FADV_DONTNEED) before\n"
"    each pass, which covers an I/O server that fell back to buffered I/O.\n"
"\n"
"PASSES\n"
"    One pass reads, for every size, max(--bytes-per-size, size * --min-requests)\n"
"    bytes (rounded up to whole requests), plus one request per size of slack,\n"
"    rounded up to whole MiB. prepare writes N such regions; every measuring\n"
"    subcommand must be given the same --sizes, --bytes-per-size and\n"
"    --min-requests as prepare, and a --pass below N.\n"
"\n"
"OPTIONS\n"
"    --config FILE          INI file (default " DEFAULT_CONFIG "; a missing default\n"
"                           file is fine, a missing FILE given here is not)\n"
"    --metaserver URL       metaserver (default: [cluster] metaserver, else\n"
"                           " DEFAULT_METASERVER ")\n"
"    --secret-file FILE     cluster secret, mode 0600 (default: [cluster]\n"
"                           secret_file, else " DEFAULT_SECRET ")\n"
"    --timeout MS           per request (default %d)\n"
"    --file PATH            the test file, in the rdfs root directory (default\n"
"                           " DEFAULT_FILE ")\n"
"    --volume FILE          the I/O server's volume file (disk: required;\n"
"                           ioserver: drop its page cache before the pass)\n"
"    --sizes LIST           request sizes: comma-separated sizes and ranges of\n"
"                           powers of two, K/M suffixes, multiples of 4K, at most\n"
"                           16M (default " DEFAULT_SIZES ")\n"
"    --bytes-per-size SIZE  bytes read per size at least (default " DEFAULT_BYTES ")\n"
"    --min-requests N       requests per size at least (default %d)\n"
"    --depth N              requests outstanding (default 1; disk, disk-write:\n"
"                           1..64 threads; fs-read, fs-write: one per FILE,\n"
"                           each its own thread)\n"
"    --streams N            ioserver: N sequential readers at once, each on its\n"
"                           own connection and its own slice of the pass's\n"
"                           region, splitting each size's requests (default 1;\n"
"                           prepare must be given the same N)\n"
"    --shared-connection    ioserver: all streams on one connection, as one\n"
"                           FUSE client carries all its readers (default: one\n"
"                           connection each, as separate clients)\n"
"    --passes N             prepare: regions to write (default 1)\n"
"    --pass K               the region to read, 0..N-1 (default 0)\n"
"    --run N                recorded as \"run\" (default 0)\n"
"    --label NAME           the records' \"mode\" (default: the subcommand)\n"
"    --net-ns NS            net: the responder's network namespace, a name under\n"
"                           /run/netns or a path (default: ours; needs root)\n"
"    --net-addr ADDR        net: the IPv4 address the responder listens on and\n"
"                           the sweep connects to (default 127.0.0.1)\n"
"    --json FILE            append JSON Lines records to FILE\n"
"    --seed N               pattern seed (default %u; prepare and reads must agree)\n"
"    --no-verify            do not check the bytes read (never for results)\n"
"    --log-level LEVEL      error, warn, info, debug (default warn)\n"
"    -h, --help             this help\n"
"\n"
"CONFIGURATION\n"
"    Section [sweep], then [cluster]: metaserver, secret_file, timeout, file,\n"
"    volume, sizes, bytes_per_size, min_requests, depth, streams, log_level.\n"
"    Command-line options override the file.\n"
"\n"
"EXAMPLES\n"
"    C=build/bench/sweep-cluster\n"
"    rdfs-sweep --config $C/rdfs.conf --passes 3 prepare\n"
"    rdfs-sweep --config $C/rdfs.conf --volume $C/vol/io0 --pass 0 \\\n"
"               --label whole --json out.jsonl ioserver\n"
"    rdfs-sweep --config $C/rdfs.conf --volume $C/vol/io0 --pass 2 disk\n"
"    rdfs-sweep --sizes 64K,1M net\n"
"    rdfs-sweep --sizes 1M --net-ns rdfs-sweep-1234 --net-addr 198.19.7.2 \\\n"
"               --label net-ratelimited net\n"
"    rdfs-sweep --sizes 1M --bytes-per-size 256M fs-write $C/mnt/a $C/mnt/b\n"
"    rdfs-sweep --sizes 1M --bytes-per-size 256M --label fuse-cold fs-read \\\n"
"               $C/mnt/a $C/mnt/b\n"
"    (bench/sweep/run drives all of this: make bench-sweep)\n"
"\n"
"EXIT STATUS\n"
"    0  success\n"
"    1  failure: cluster unreachable, I/O error, or DATA MISMATCH (the bytes\n"
"       read are not the bytes written; the message says where)\n"
"    2  bad command line or configuration\n",
		DEFAULT_TIMEOUT_MS, DEFAULT_MIN_REQUESTS, DEFAULT_SEED);
}

static int bad(const char *what, const char *value)
{
	fprintf(stderr, PROG ": bad %s '%s'\nTry '" PROG " --help'.\n", what, value ? value : "");
	return SWEEP_USAGE;
}

static int load_config(struct rdfs_config **cfgp, const char *path)
{
	static const char *const keys[] = {
		"metaserver", "secret_file", "timeout", "file", "volume", "sizes",
		"bytes_per_size", "min_requests", "depth", "streams", "log_level",
	};
	struct rdfs_config *file = config_new();
	int errline = 0, ret;
	size_t i;

	if (!file)
		return -ENOMEM;
	ret = config_load(file, path ? path : DEFAULT_CONFIG, &errline);
	if (ret == -ENOENT && !path)
		ret = 0;
	else if (ret == -EINVAL)
		fprintf(stderr, PROG ": %s:%d: syntax error\n", path ? path : DEFAULT_CONFIG,
			errline);
	else if (ret)
		fprintf(stderr, PROG ": cannot read config %s: %s\n",
			path ? path : DEFAULT_CONFIG, strerror(-ret));
	if (ret) {
		config_free(file);
		return ret;
	}
	/* the command line wins over the file */
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = config_get(*cfgp, SECTION, keys[i], NULL);

		if (v)
			config_set(file, SECTION, keys[i], v);
	}
	config_free(*cfgp);
	*cfgp = file;
	return 0;
}

/* The plan's settings from the configuration; SWEEP_USAGE after saying what is wrong. */
static int plan_from_config(const struct rdfs_config *cfg, struct sweep_plan *p)
{
	const char *sizes = config_get(cfg, SECTION, "sizes", DEFAULT_SIZES);
	int64_t v;

	if (plan_parse_sizes(p, sizes))
		return bad("--sizes", sizes);
	if (config_get_size(cfg, SECTION, "bytes_per_size", 16u << 20, &p->bytes_per_size) ||
	    p->bytes_per_size == 0)
		return bad("--bytes-per-size", config_get(cfg, SECTION, "bytes_per_size", ""));
	if (config_get_int(cfg, SECTION, "min_requests", DEFAULT_MIN_REQUESTS, &v) || v < 1 ||
	    v > 1000000)
		return bad("--min-requests", config_get(cfg, SECTION, "min_requests", ""));
	p->min_requests = (uint64_t)v;
	if (config_get_int(cfg, SECTION, "depth", 1, &v) || v < 1 || v > 1024)
		return bad("--depth", config_get(cfg, SECTION, "depth", ""));
	p->depth = (int)v;
	if (config_get_int(cfg, SECTION, "streams", 1, &v) || v < 1 || v > 64)
		return bad("--streams", config_get(cfg, SECTION, "streams", ""));
	p->streams = (int)v;
	return 0;
}

static int connect_cluster(const struct rdfs_config *cfg, struct sweep_env *env)
{
	struct rdfs_client_opts o = { 0 };
	const char *secret = config_get(cfg, SECTION, "secret_file", DEFAULT_SECRET);
	int ret;

	ret = auth_secret_load(secret, &env->secret);
	if (ret) {
		fprintf(stderr, PROG ": cannot load secret file %s: %s\n", secret, strerror(-ret));
		return SWEEP_FAIL;
	}
	o.metaserver_url = env->metaserver;
	o.secret = env->secret;
	o.timeout_ms = env->timeout_ms;
	o.role = "tool";
	o.write_stable = 1;
	o.reconnect_ms = env->timeout_ms;
	ret = rdfs_client_open(&o, &env->client);
	if (ret) {
		fprintf(stderr, PROG ": cannot reach metaserver %s: %s\n", env->metaserver,
			ret == -EACCES ? "it rejected the cluster secret" : strerror(-ret));
		return ret == -EINVAL ? SWEEP_USAGE : SWEEP_FAIL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "metaserver", required_argument, NULL, 'm' },
		{ "secret-file", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "file", required_argument, NULL, 'f' },
		{ "volume", required_argument, NULL, 'V' },
		{ "sizes", required_argument, NULL, 'S' },
		{ "bytes-per-size", required_argument, NULL, 'B' },
		{ "min-requests", required_argument, NULL, 'n' },
		{ "depth", required_argument, NULL, 'd' },
		{ "streams", required_argument, NULL, 'T' },
		{ "shared-connection", no_argument, NULL, 'C' },
		{ "passes", required_argument, NULL, 'P' },
		{ "pass", required_argument, NULL, 'p' },
		{ "run", required_argument, NULL, 'r' },
		{ "label", required_argument, NULL, 'l' },
		{ "json", required_argument, NULL, 'j' },
		{ "seed", required_argument, NULL, 'e' },
		{ "no-verify", no_argument, NULL, 'N' },
		{ "log-level", required_argument, NULL, 'L' },
		{ "net-ns", required_argument, NULL, 'z' },
		{ "net-addr", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sweep_plan plan = { .verify = 1, .seed = DEFAULT_SEED };
	struct sweep_env env = { 0 };
	const char *config_path = NULL, *json_path = NULL, *cmd, *level_s;
	long passes = 1, num;
	int64_t timeout;
	struct rdfs_config *cfg = config_new();
	char *end;
	int opt, ret, level, fs_cmd;

	if (!cfg) {
		fprintf(stderr, PROG ": out of memory\n");
		return SWEEP_FAIL;
	}
	/* options may come before or after the subcommand */
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config_path = optarg;
			break;
		case 'm':
			config_set(cfg, SECTION, "metaserver", optarg);
			break;
		case 's':
			config_set(cfg, SECTION, "secret_file", optarg);
			break;
		case 't':
			config_set(cfg, SECTION, "timeout", optarg);
			break;
		case 'f':
			config_set(cfg, SECTION, "file", optarg);
			break;
		case 'V':
			config_set(cfg, SECTION, "volume", optarg);
			break;
		case 'S':
			config_set(cfg, SECTION, "sizes", optarg);
			break;
		case 'B':
			config_set(cfg, SECTION, "bytes_per_size", optarg);
			break;
		case 'n':
			config_set(cfg, SECTION, "min_requests", optarg);
			break;
		case 'd':
			config_set(cfg, SECTION, "depth", optarg);
			break;
		case 'T':
			config_set(cfg, SECTION, "streams", optarg);
			break;
		case 'C':
			plan.shared_connection = 1;
			break;
		case 'L':
			config_set(cfg, SECTION, "log_level", optarg);
			break;
		case 'l':
			plan.label = optarg;
			break;
		case 'z':
			env.net_ns = optarg;
			break;
		case 'a':
			env.net_addr = optarg;
			break;
		case 'j':
			json_path = optarg;
			break;
		case 'N':
			plan.verify = 0;
			break;
		case 'P':
		case 'p':
		case 'r':
			errno = 0;
			num = strtol(optarg, &end, 0);
			if (errno || *end || num < 0 || num > 1000000 || (opt == 'P' && num < 1)) {
				config_free(cfg);
				return bad("number", optarg);
			}
			if (opt == 'P')
				passes = num;
			else if (opt == 'p')
				plan.pass = (int)num;
			else
				plan.run = (int)num;
			break;
		case 'e':
			errno = 0;
			plan.seed = strtoull(optarg, &end, 0);
			if (errno || *end || !*optarg) {
				config_free(cfg);
				return bad("--seed", optarg);
			}
			break;
		case 'h':
			usage(stdout);
			config_free(cfg);
			return SWEEP_OK;
		default:
			fprintf(stderr, "Try '" PROG " --help'.\n");
			config_free(cfg);
			return SWEEP_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, PROG ": missing subcommand (prepare, ioserver, disk, net, net-rpc, "
			"fs-write, fs-read, disk-write)\nTry '" PROG " --help'.\n");
		config_free(cfg);
		return SWEEP_USAGE;
	}
	cmd = argv[optind];
	fs_cmd = !strcmp(cmd, "fs-write") || !strcmp(cmd, "fs-read") || !strcmp(cmd, "disk-write");
	if (strcmp(cmd, "prepare") && strcmp(cmd, "ioserver") && strcmp(cmd, "disk") &&
	    strcmp(cmd, "net") && strcmp(cmd, "net-rpc") && !fs_cmd) {
		fprintf(stderr, PROG ": unknown subcommand '%s'\nTry '" PROG " --help'.\n", cmd);
		config_free(cfg);
		return SWEEP_USAGE;
	}
	if (fs_cmd ? optind + 1 >= argc : optind + 1 != argc) {
		fprintf(stderr, PROG ": %s: %s\nTry '" PROG " --help'.\n", cmd,
			fs_cmd ? "name at least one FILE" : "takes no arguments");
		config_free(cfg);
		return SWEEP_USAGE;
	}
	if (load_config(&cfg, config_path)) {
		config_free(cfg);
		return SWEEP_USAGE;
	}
	ret = plan_from_config(cfg, &plan);
	if (ret)
		goto out;
	level_s = config_get(cfg, SECTION, "log_level", "warn");
	level = log_parse_level(level_s);
	if (level < 0) {
		ret = bad("--log-level", level_s);
		goto out;
	}
	log_init(PROG, level);
	if (config_get_int(cfg, SECTION, "timeout", DEFAULT_TIMEOUT_MS, &timeout) || timeout <= 0 ||
	    timeout > 3600000) {
		ret = bad("--timeout", config_get(cfg, SECTION, "timeout", ""));
		goto out;
	}
	env.timeout_ms = (int)timeout;
	env.metaserver = config_get(cfg, SECTION, "metaserver", DEFAULT_METASERVER);
	env.path = config_get(cfg, SECTION, "file", DEFAULT_FILE);
	env.volume = config_get(cfg, SECTION, "volume", NULL);
	if (!plan.label)
		plan.label = cmd;
	if (json_path) {
		env.json = fopen(json_path, "a");
		if (!env.json) {
			fprintf(stderr, PROG ": cannot open %s: %s\n", json_path, strerror(errno));
			ret = SWEEP_FAIL;
			goto out;
		}
	}
	if (strcmp(cmd, "net") && strcmp(cmd, "net-rpc") && !fs_cmd) {
		ret = connect_cluster(cfg, &env);
		if (ret)
			goto out;
	}
	if (strcmp(cmd, "prepare") == 0) {
		ret = target_prepare(&env, (uint64_t)passes * plan_pass_bytes(&plan), plan.seed) ?
		      SWEEP_FAIL : SWEEP_OK;
		goto out;
	}
	printf("%-10s %9s %9s %10s %10s\n", "mode", "request", "requests", "seconds", "MiB/s");
	if (strcmp(cmd, "ioserver") == 0)
		ret = sweep_ioserver(&env, &plan);
	else if (strcmp(cmd, "disk") == 0)
		ret = sweep_disk(&env, &plan);
	else if (strcmp(cmd, "net-rpc") == 0)
		ret = sweep_netrpc(&env, &plan);
	else if (fs_cmd)
		ret = sweep_fs(&env, &plan, argv + optind + 1, strcmp(cmd, "fs-read") != 0,
			       strcmp(cmd, "disk-write") == 0);
	else
		ret = sweep_net(&env, &plan);
out:
	if (env.client)
		rdfs_client_close(env.client);
	if (env.json && fclose(env.json) && !ret) {
		fprintf(stderr, PROG ": writing %s: %s\n", json_path, strerror(errno));
		ret = SWEEP_FAIL;
	}
	config_free(cfg);
	return ret;
}
