// SPDX-License-Identifier: MIT
/*
 * ior_options.c - rdfs-bench's IOR command line and config file: IOR's option
 * letters with IOR's meaning, checked up front so a run never starts with a
 * layout that cannot work.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "ior.h"

void ior_usage(FILE *f)
{
	fprintf(f,
"NAME\n"
"    rdfs-bench - IOR- and mdtest-like I/O benchmark with data verification\n"
"\n"
"SYNOPSIS\n"
"    rdfs-bench [-a POSIX|RDFS] [-w] [-r] [-W] [-R] [-t SIZE] [-b SIZE] [-s N] [-F] [-e]\n"
"               [-Y] [-C] [-z] [-D SECS] [-k] [-N TASKS] [-i REPS] [-o PATH] [-O FILE]\n"
"               [-B|--direct] [--drop-cache] [--drop-cache-cmd CMD] [--json[=FILE]]\n"
"               [--config FILE] [--metaserver URL] [--secret-file FILE]\n"
"    rdfs-bench mdtest [options]      (see rdfs-bench mdtest --help)\n"
"\n"
"DESCRIPTION\n"
"    Runs TASKS processes (forked on this host; no MPI is needed or used) that write\n"
"    and read a test file the way IOR does, and prints IOR's result table and\n"
"    summary. Options have IOR's meaning. Each task writes a block of -b bytes per\n"
"    segment in transfers of -t bytes. With a shared file, transfer k of segment s\n"
"    of task t is at offset s*(TASKS*block) + t*block + k*xfer; with -F each task has\n"
"    its own file PATH.<t> (PATH.00000000, ...) at offset s*block + k*xfer.\n"
"\n"
"    The data is a pattern of (file offset, writing task): every 8-byte word is a\n"
"    hash of both, so verification catches misplaced, stale or missing blocks and\n"
"    reports the first wrong byte's file and offset.\n"
"\n"
"    Per repetition: remove the old file(s) and write (-w), check the written data\n"
"    (-W), drop the client cache, read (-r, checked with -R), then remove the\n"
"    file(s) unless -k. The header says how the cache was dropped.\n"
"\n"
"OPTIONS\n"
"    -a API        I/O interface (default POSIX):\n"
"                  POSIX  open/pread/pwrite/fsync on PATH in any mounted file system;\n"
"                  RDFS   rdfs's client library (rdfs_client.h) straight to the\n"
"                         metaserver and I/O servers, no FUSE; PATH is a path inside\n"
"                         the rdfs namespace (\"/dir/file\"); needs the cluster's\n"
"                         address and secret (--config/--metaserver/--secret-file).\n"
"    -w            Write phase (default: -w and -r when neither is given).\n"
"    -r            Read phase. Without -w the file must exist (written with -k).\n"
"    -W            Check write: after the write phase read the data back (task i\n"
"                  reads task i+1's with -C) and verify it (not timed).\n"
"    -R            Check read: verify the data of the timed read phase.\n"
"    -t SIZE       Transfer size, bytes per read/write call; a multiple of 8\n"
"                  (default 256k).\n"
"    -b SIZE       Block size: contiguous bytes per task per segment, a multiple of\n"
"                  the transfer size (default 1m).\n"
"    -s N          Segments (default 1).\n"
"    -F            File per process instead of one shared file.\n"
"    -e            fsync after the writes, inside the timed write (as IOR).\n"
"    -Y            fsync after every write call (timed as part of the call).\n"
"    -C            Reorder tasks for the read back: task i reads what task i+1 wrote,\n"
"                  so no task reads data it wrote itself.\n"
"    -z            Random offsets: each task moves its transfers in a random order\n"
"                  (a permutation: every transfer exactly once), the same order for\n"
"                  the writer and whoever reads its data back.\n"
"    --seed N      Seed of -z's permutations (default 1).\n"
"    -D SECS       Stonewall: stop each phase after SECS seconds (0: off, default).\n"
"                  Bandwidth then counts the bytes moved; a read phase reads only\n"
"                  what the write phase of the same repetition got to write.\n"
"    -k            Keep the test file(s) after the run.\n"
"    -N TASKS      Number of processes (default 1, at most %d).\n"
"    -i REPS       Repetitions (default 1).\n"
"    -o PATH       Test file (default ./testFile).\n"
"    -O FILE       Write the results as JSON to FILE (same as --json=FILE; not IOR's\n"
"                  -O directive string).\n"
"    -q            With a JSON file: do not print the table.\n"
"    -B, --direct  Open with O_DIRECT (sizes must then be multiples of 4 KiB).\n"
"    --drop-cache  After the write phase and before the read phase, fdatasync and\n"
"                  posix_fadvise(POSIX_FADV_DONTNEED) the file so reads go to the\n"
"                  file system, not the page cache (not needed with -a RDFS: the\n"
"                  client library keeps no file data past a close).\n"
"    --drop-cache-cmd CMD\n"
"                  Run CMD with /bin/sh between the write and the read phase (task 0,\n"
"                  the others wait), e.g. a remount; it must exit 0.\n"
"    --json[=FILE] Print the results as JSON instead of the table; with FILE, print\n"
"                  the table and write the JSON to FILE.\n"
"    --config FILE rdfs config for -a RDFS (default %s if it exists).\n"
"    --metaserver URL\n"
"                  Metaserver for -a RDFS (default: config, else %s).\n"
"    --secret-file FILE\n"
"                  Cluster secret for -a RDFS (default: config, else %s).\n"
"    -h, --help    This text.\n"
"\n"
"    SIZE takes a k, m, g or t suffix (powers of 1024).\n"
"\n"
"CONFIG\n"
"    Only -a RDFS reads the config; keys in [rdfs-bench], else [cluster]:\n"
"        metaserver  = tcp://HOST:PORT\n"
"        secret_file = /etc/rdfs/secret\n"
"        timeout     = 30000           (ms per request)\n"
"    deploy/local-cluster writes a suitable DIR/rdfs.conf.\n"
"\n"
"OUTPUT\n"
"    One row per phase and repetition: bw(MiB/s) = bytes moved / total time;\n"
"    IOPS = transfers / wr/rd time; Latency(s) = mean time of one read/write call;\n"
"    open, wr/rd and close are each measured from the first task starting the step\n"
"    to the last task finishing it (tasks meet at a barrier between steps); total is\n"
"    from the first open to the last close. The summary gives Max/Min/Mean/StdDev\n"
"    (population) over the repetitions.\n"
"\n"
"EXAMPLES\n"
"    rdfs-bench -w -r -W -R -t 1m -b 64m -N 4 -o /mnt/rdfs/ior.dat\n"
"    rdfs-bench -w -r -R -F -C -e --drop-cache -t 1m -b 256m -N 2 -i 3 -o /mnt/rdfs/f\n"
"    rdfs-bench -a RDFS --config /tmp/lc/rdfs.conf -w -r -W -R -t 1m -b 16m -o /ior.dat\n"
"    rdfs-bench -r -R -z -t 4k -b 64m -D 10 -o /mnt/rdfs/ior.dat   (after a -w -k run)\n"
"    rdfs-bench mdtest -n 1000 -N 2 -u -d /mnt/rdfs/md\n"
"\n"
"EXIT STATUS\n"
"    0  every phase ran and all checked data was right\n"
"    1  verification found wrong data, an I/O error stopped a task, or the\n"
"       cluster could not be reached\n"
"    2  bad usage\n", IOR_MAX_TASKS, IOR_DEFAULT_CONFIG, IOR_DEFAULT_METASERVER,
		IOR_DEFAULT_SECRET);
}

int ior_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-' || isspace((unsigned char)*s))
		return -EINVAL;
	if (*end) {
		const char *units = "kmgt";
		const char *u = strchr(units, tolower((unsigned char)*end));

		if (!u || end[1] != '\0')
			return -EINVAL;
		shift = 10 * (unsigned int)(u - units + 1);
		if (v > (~0ull >> shift))
			return -ERANGE;
		v <<= shift;
	}
	*out = v;
	return 0;
}

int ior_usage_error(char *err, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, size, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int ior_parse_count(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int ior_load_cluster(struct ior_cluster *c, const char *config_path, const char *metaserver,
		     const char *secret_file, const char *timeout, char *err, size_t errsize)
{
	struct rdfs_config *cfg = config_new();
	const char *path = config_path ? config_path : IOR_DEFAULT_CONFIG;
	int64_t ms;
	int errline = 0, ret;

	if (!cfg)
		return ior_usage_error(err, errsize, "out of memory");
	ret = config_load(cfg, path, &errline);
	if (ret == -ENOENT && !config_path) {
		ret = 0;
	} else if (ret == -EINVAL) {
		config_free(cfg);
		return ior_usage_error(err, errsize, "%s:%d: syntax error", path, errline);
	} else if (ret) {
		config_free(cfg);
		return ior_usage_error(err, errsize, "cannot read config %s: %s", path, strerror(-ret));
	}
	if (metaserver)
		config_set(cfg, "rdfs-bench", "metaserver", metaserver);
	if (secret_file)
		config_set(cfg, "rdfs-bench", "secret_file", secret_file);
	if (timeout)
		config_set(cfg, "rdfs-bench", "timeout", timeout);
	snprintf(c->metaserver, sizeof(c->metaserver), "%s",
		 config_get(cfg, "rdfs-bench", "metaserver", IOR_DEFAULT_METASERVER));
	snprintf(c->secret_file, sizeof(c->secret_file), "%s",
		 config_get(cfg, "rdfs-bench", "secret_file", IOR_DEFAULT_SECRET));
	if (config_get_int(cfg, "rdfs-bench", "timeout", 30000, &ms) || ms <= 0 || ms > 3600000) {
		ret = ior_usage_error(err, errsize, "bad timeout '%s' (milliseconds)",
			   config_get(cfg, "rdfs-bench", "timeout", ""));
		config_free(cfg);
		return ret;
	}
	c->timeout_ms = (int)ms;
	config_free(cfg);
	return 0;
}

static void save_cmdline(char *out, size_t size, int argc, char **argv)
{
	size_t used = 0;
	int i;

	out[0] = '\0';
	for (i = 0; i < argc && used < size; i++)
		used += (size_t)snprintf(out + used, size - used, "%s%s", i ? " " : "", argv[i]);
}

int ior_parse_args(struct ior_params *p, int argc, char **argv, char *err, size_t errsize)
{
	enum { OPT_DIRECT = 256, OPT_DROP, OPT_DROP_CMD, OPT_JSON, OPT_CONFIG, OPT_MS,
	       OPT_SECRET, OPT_SEED };
	static const struct option longopts[] = {
		{ "direct", no_argument, NULL, OPT_DIRECT },
		{ "drop-cache", no_argument, NULL, OPT_DROP },
		{ "drop-cache-cmd", required_argument, NULL, OPT_DROP_CMD },
		{ "json", optional_argument, NULL, OPT_JSON },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "metaserver", required_argument, NULL, OPT_MS },
		{ "secret-file", required_argument, NULL, OPT_SECRET },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL, *ms = NULL, *secret = NULL;
	char *end;
	long v;
	int c;

	*p = (struct ior_params){
		.api = IOR_API_POSIX, .path = "./testFile", .xfer = 256 << 10, .block = 1 << 20,
		.segments = 1, .ntasks = 1, .reps = 1, .seed = 1,
	};
	err[0] = '\0';
	save_cmdline(p->cmdline, sizeof(p->cmdline), argc, argv);
	optind = 0;	/* 0: full reinitialisation, so the parser can run more than once */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":a:wrWRt:b:s:FeYCzD:kN:i:o:O:qBh", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (strcasecmp(optarg, "POSIX") == 0)
				p->api = IOR_API_POSIX;
			else if (strcasecmp(optarg, "RDFS") == 0)
				p->api = IOR_API_RDFS;
			else
				return ior_usage_error(err, errsize, "unsupported API '%s' (POSIX or RDFS)", optarg);
			break;
		case 'w':
			p->write = 1;
			break;
		case 'r':
			p->read = 1;
			break;
		case 'W':
			p->check_write = 1;
			break;
		case 'R':
			p->check_read = 1;
			break;
		case 'F':
			p->file_per_proc = 1;
			break;
		case 'e':
			p->fsync = 1;
			break;
		case 'Y':
			p->fsync_per_write = 1;
			break;
		case 'C':
			p->reorder = 1;
			break;
		case 'z':
			p->random = 1;
			break;
		case 'k':
			p->keep = 1;
			break;
		case 'q':
			p->quiet = 1;
			break;
		case 'B':
		case OPT_DIRECT:
			p->direct = 1;
			break;
		case OPT_DROP:
			p->drop_cache = 1;
			break;
		case OPT_DROP_CMD:
			p->drop_cache_cmd = optarg;
			break;
		case OPT_JSON:
			p->json = 1;
			p->json_file = optarg;
			break;
		case 'O':
			p->json = 1;
			p->json_file = optarg;
			break;
		case OPT_CONFIG:
			config_path = optarg;
			break;
		case OPT_MS:
			ms = optarg;
			break;
		case OPT_SECRET:
			secret = optarg;
			break;
		case OPT_SEED:
			errno = 0;
			p->seed = strtoull(optarg, &end, 0);
			if (errno || end == optarg || *end)
				return ior_usage_error(err, errsize, "bad seed '%s'", optarg);
			break;
		case 'o':
			p->path = optarg;
			break;
		case 't':
			if (ior_parse_size(optarg, &p->xfer) < 0 || p->xfer == 0)
				return ior_usage_error(err, errsize, "bad transfer size '%s'", optarg);
			break;
		case 'b':
			if (ior_parse_size(optarg, &p->block) < 0 || p->block == 0)
				return ior_usage_error(err, errsize, "bad block size '%s'", optarg);
			break;
		case 's':
			if (ior_parse_count(optarg, 1, 1L << 30, &v) < 0)
				return ior_usage_error(err, errsize, "bad segment count '%s'", optarg);
			p->segments = (uint64_t)v;
			break;
		case 'N':
			if (ior_parse_count(optarg, 1, IOR_MAX_TASKS, &v) < 0)
				return ior_usage_error(err, errsize, "bad number of tasks '%s' (1-%d)", optarg,
					    IOR_MAX_TASKS);
			p->ntasks = (int)v;
			break;
		case 'i':
			if (ior_parse_count(optarg, 1, 100000, &v) < 0)
				return ior_usage_error(err, errsize, "bad repetition count '%s'", optarg);
			p->reps = (int)v;
			break;
		case 'D':
			errno = 0;
			p->stonewall = strtod(optarg, &end);
			if (errno || end == optarg || *end || p->stonewall < 0)
				return ior_usage_error(err, errsize, "bad stonewall time '%s' (seconds)", optarg);
			break;
		case 'h':
			return 1;
		case ':':
			if (optopt > 0 && optopt < 256)
				return ior_usage_error(err, errsize, "option '-%c' needs a value", optopt);
			return ior_usage_error(err, errsize, "option '%s' needs a value", argv[optind - 1]);
		default:
			/* optopt names a bad short option; a bad long one is only in argv */
			if (optopt > 0 && optopt < 256)
				return ior_usage_error(err, errsize, "unknown option '-%c'", optopt);
			return ior_usage_error(err, errsize, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return ior_usage_error(err, errsize, "unexpected argument '%s'", argv[optind]);
	if (!p->write && !p->read)
		p->write = p->read = 1;
	if (p->xfer % 8)
		return ior_usage_error(err, errsize, "transfer size must be a multiple of 8 bytes");
	if (p->block % p->xfer)
		return ior_usage_error(err, errsize, "block size must be a multiple of the transfer size");
	if (p->xfer > (1ull << 30))
		return ior_usage_error(err, errsize, "transfer size over 1 GiB");
	if (p->direct && (p->xfer % 4096 || p->block % 4096))
		return ior_usage_error(err, errsize, "--direct needs transfer and block sizes that are multiples of 4k");
	if (p->check_write && !p->write)
		return ior_usage_error(err, errsize, "-W needs a write phase (-w)");
	if (p->check_read && !p->read)
		return ior_usage_error(err, errsize, "-R needs a read phase (-r)");
	if (p->api == IOR_API_RDFS) {
		if (p->path[0] != '/')
			return ior_usage_error(err, errsize, "-a RDFS needs -o with an absolute path inside rdfs ('%s')",
				    p->path);
		if (p->direct || p->drop_cache)
			return ior_usage_error(err, errsize, "--direct/--drop-cache are for -a POSIX (the client "
				    "library keeps no file data past a close)");
		if (ior_load_cluster(&p->cluster, config_path, ms, secret, NULL, err, errsize) < 0)
			return -EINVAL;
	} else if (config_path || ms || secret) {
		return ior_usage_error(err, errsize, "--config/--metaserver/--secret-file are for -a RDFS");
	}
	return 0;
}
