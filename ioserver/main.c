// SPDX-License-Identifier: MIT
/*
 * main.c - rdfs-ioserver: options and configuration, the volume, signals,
 * then the I/O server core (ios.h) until SIGTERM/SIGINT.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "config.h"
#include "ios.h"
#include "log.h"
#include "metrics.h"
#include "metrics_http.h"
#include "rpc.h"
#include "volume.h"

#define PROG			"rdfs-ioserver"
#define PROG_VERSION		"0.1.0"
#define SECTION			"ioserver"
#define DEFAULT_CONFIG		"/etc/rdfs/rdfs.conf"
#define DEFAULT_SECRET		"/etc/rdfs/secret"
#define DEFAULT_CAP_KEY		"/etc/rdfs/cap.key"
#define DEFAULT_METASERVER	"tcp://127.0.0.1:7000"
#define MAX_IO_THREADS		64
#define MAX_PIPELINE_DEPTH	64

enum exit_status { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static const char usage_text[] =
"NAME\n"
"    rdfs-ioserver - rdfs I/O server: exports one volume as 4 KiB blocks\n"
"\n"
"SYNOPSIS\n"
"    rdfs-ioserver [OPTIONS]\n"
"    rdfs-ioserver --volume PATH [--create-size SIZE] [--metaserver URL] [--listen URL]\n"
"                  [--send-mode whole|overlap] [--unit-size SIZE] [--pipeline-depth N]\n"
"                  [--readahead-cache MIB] [--io-threads N]\n"
"\n"
"DESCRIPTION\n"
"    Serves READ and WRITE of block ranges of one volume (a regular file or a\n"
"    block device) to rdfs clients, and ZERO of the blocks the metaserver is\n"
"    about to allocate. Every request must carry a capability that\n"
"    the metaserver signed with the capability key; ranges it does not cover,\n"
"    forged and expired capabilities are refused. On start the server registers\n"
"    with the metaserver (which assigns its server id) and keeps that connection\n"
"    open, reconnecting with backoff when it breaks; until the first registration\n"
"    succeeds, I/O requests get EAGAIN.\n"
"\n"
"    The first MiB of the volume holds the superblock (magic RDFSVOL1, uuid,\n"
"    capacity); block b lives at byte 1 MiB + b * 4096. The volume is opened with\n"
"    O_DIRECT when the file system allows it (else buffered, with a warning).\n"
"\n"
"    All volume I/O goes through io_uring. A READ is cut into units\n"
"    (--unit-size); up to --pipeline-depth unit reads are on the disk at once,\n"
"    into 4 KiB-aligned buffers of a bounded pool, and in overlap send mode each\n"
"    unit is sent as a partial reply the moment it and the units before it are\n"
"    read, while the later units are still coming off the disk (gmblock's\n"
"    synchronized send): disk and network work at the same time inside one\n"
"    request. Requests that continue one another on the volume (within 1 MiB,\n"
"    from any client) form a sequential stream; the server reads ahead of each\n"
"    stream into a bounded cache, further the longer the stream goes on\n"
"    (SuperNBD's adaptive read-ahead). A WRITE or ZERO drops the blocks it\n"
"    touches from the cache before it is acknowledged.\n"
"\n"
"    A WRITE the client marks stable is acknowledged once durable (RWF_DSYNC).\n"
"    An unstable one (write-back, SuperNBD's asynchronous write) is\n"
"    acknowledged on receipt, once it is in line for its blocks: every READ of\n"
"    them that arrives later waits for it. IO_COMMIT waits for every WRITE\n"
"    received before it, then makes them durable (fdatasync). Each reply\n"
"    carries a write verifier that changes every time the server starts (and\n"
"    when an acknowledged write-back write fails on the disk), so a client\n"
"    learns when acknowledged unstable writes may have been lost.\n"
"\n"
"    A volume this server created itself (--create-size) is marked pristine: its\n"
"    blocks read as zeros, so the metaserver it first registers with does not\n"
"    zero them before their first use. The mark is cleared when the server\n"
"    starts serving. Any other volume (--format of an existing file or device,\n"
"    or one served before) has each block zeroed by the metaserver that first\n"
"    sees it before the block's first use (a ZERO request to this server).\n"
"\n"
"OPTIONS\n"
"    --config FILE        INI configuration file (default " DEFAULT_CONFIG ";\n"
"                         a missing default file is fine, a missing given one is\n"
"                         an error). Command-line options override it.\n"
"    --volume PATH        the volume: a regular file or a block device. Required.\n"
"    --create-size SIZE   if PATH does not exist, create it as a sparse file of\n"
"                         SIZE bytes (suffixes k, m, g, t: powers of 1024) and\n"
"                         format it. Ignored when PATH exists. Default: none.\n"
"    --format             format an existing volume that has no rdfs superblock,\n"
"                         destroying what it holds. Without it such a volume is\n"
"                         refused. A volume that already holds an rdfs superblock\n"
"                         is never reformatted.\n"
"    --listen URL[,URL...] where to listen; a comma-separated list listens on\n"
"                         each, e.g. tcp://0.0.0.0:7100,rdma://10.0.2.15:7100;\n"
"                         tls://HOST:PORT speaks only TLS 1.3 (keyed by the\n"
"                         cluster's keys) and makes clients' data go over TLS\n"
"                         when it is the advertised URL\n"
"                         (default " IOS_DEFAULT_LISTEN "). Config key: listen.\n"
"    --advertise URL      the URL clients use to reach this server, sent to the\n"
"                         metaserver (default: the first listen URL, with a\n"
"                         wildcard host such as 0.0.0.0 replaced by 127.0.0.1).\n"
"    --metaserver URL     the metaserver (default " DEFAULT_METASERVER ").\n"
"    --name NAME          a name for tools' listings (default: hostname:port).\n"
"    --domain NAME        the failure domain the server is in (a rack, a power\n"
"                         feed): copies of a chunk go to servers of distinct\n"
"                         domains where there are enough (default: none, a\n"
"                         domain of its own). At most 63 bytes.\n"
"    --secret-file PATH   cluster secret, mode 0600 (default " DEFAULT_SECRET ").\n"
"    --cap-key-file PATH  capability key shared with the metaserver, mode 0600\n"
"                         (default " DEFAULT_CAP_KEY ").\n"
"    --io-threads N       io_uring threads, each with its own ring, 1-64\n"
"                         (default 2). Config key: io_threads.\n"
"    --send-mode MODE     how a READ goes on the wire: overlap (default) sends\n"
"                         each unit as soon as it is read, while later units are\n"
"                         still being read; whole reads the whole request, then\n"
"                         sends it in one reply (the classic way, kept for\n"
"                         comparison). Config key: send_mode.\n"
"    --unit-size SIZE     READ unit: how much is read and sent at a time in\n"
"                         overlap mode, 4k-16m, a multiple of 4k (suffixes k, m;\n"
"                         default 256k). Config key: unit_size.\n"
"    --pipeline-depth N   unit reads in flight per READ, 1-64 (default 1: the\n"
"                         next unit is on the disk while the last one is sent,\n"
"                         and units come off the disk in order, one after\n"
"                         another, which is what lets the network start early;\n"
"                         raise it for a device that reads faster with several\n"
"                         requests queued). Config key: pipeline_depth.\n"
"    --readahead-cache MIB  memory for read-ahead of sequential streams, in MiB\n"
"                         (default 256; 0 turns server read-ahead off).\n"
"                         Config key: readahead_cache_mb.\n"
"    --buffer-pool SIZE   memory for READ buffers between disk and network\n"
"                         (suffixes k, m, g; at least 16m; default: 16 x\n"
"                         io-threads x pipeline-depth x unit-size, at least\n"
"                         32m). READs wait for buffers when it is spent.\n"
"                         Config key: buffer_pool.\n"
"    --stall-close-ms MS  a client that, with replies queued for it, takes less\n"
"                         than 64 KiB/s of them over this long (it does not read\n"
"                         them, or reads a trickle) is disconnected, and the\n"
"                         buffers and range locks its requests held are\n"
"                         returned; 1000-86400000 (default 60000). Config key:\n"
"                         stall_close_ms.\n"
"    --metrics-listen HOST:PORT  serve Prometheus metrics at\n"
"                         http://HOST:PORT/metrics: requests, bytes, errors\n"
"                         and latency by operation, the io_uring pipeline,\n"
"                         read-ahead hits, connections (docs/DESIGN.md,\n"
"                         \"Metrics\"). Default: [ioserver] metrics_listen,\n"
"                         else [metrics] listen, else off. Config key:\n"
"                         metrics_listen.\n"
"    --log-level LEVEL    error, warn, info or debug (default info).\n"
"    --log-file PATH      append the log to PATH instead of stderr.\n"
"    --help               print this help and exit.\n"
"    --version            print the version and exit.\n"
"\n"
"CONFIGURATION\n"
"    Keys of section [ioserver], falling back to [cluster]:\n"
"      volume, create_size, format (bool), listen, advertise, name, domain,\n"
"      io_threads, send_mode, unit_size, pipeline_depth, readahead_cache_mb,\n"
"      buffer_pool, stall_close_ms, metrics_listen, log_level, log_file\n"
"    Keys of section [cluster] (or [ioserver] to override):\n"
"      metaserver, secret_file, cap_key_file\n"
"    Key of section [metrics], shared by every server reading the file:\n"
"      listen (HOST:PORT; a server's own metrics_listen wins, so servers\n"
"      sharing a host and a file can use other ports)\n"
"\n"
"    Example:\n"
"      [cluster]\n"
"      metaserver   = tcp://mds1:7000\n"
"      secret_file  = /etc/rdfs/secret\n"
"      cap_key_file = /etc/rdfs/cap.key\n"
"\n"
"      [ioserver]\n"
"      listen = tcp://0.0.0.0:7100\n"
"      advertise = tcp://io1:7100\n"
"      volume = /srv/rdfs/vol0\n"
"      send_mode = overlap\n"
"      unit_size = 256k\n"
"      pipeline_depth = 1\n"
"      readahead_cache_mb = 256\n"
"\n"
"SIGNALS\n"
"    SIGTERM, SIGINT: stop taking requests, answer every request already\n"
"    accepted, flush the volume (fdatasync) and exit 0.\n"
"\n"
"EXAMPLES\n"
"    Create a 10 GiB sparse volume file and serve it:\n"
"      rdfs-ioserver --volume /srv/rdfs/vol0 --create-size 10g \\\n"
"                    --metaserver tcp://mds1:7000 --advertise tcp://io1:7100\n"
"    A second server on the same host:\n"
"      rdfs-ioserver --volume /srv/rdfs/vol1 --create-size 10g --listen tcp://0.0.0.0:7101\n"
"    Read-then-send, no read-ahead (a benchmark's baseline):\n"
"      rdfs-ioserver --volume /srv/rdfs/vol0 --send-mode whole --readahead-cache 0\n"
"    Listen on TCP and RDMA at once:\n"
"      rdfs-ioserver --volume /srv/rdfs/vol0 \\\n"
"                    --listen tcp://0.0.0.0:7100,rdma://10.0.2.15:7100\n"
"    Serve a block device (its existing rdfs superblock is kept):\n"
"      rdfs-ioserver --volume /dev/nvme0n1p3 --format\n"
"\n"
"EXIT STATUS\n"
"    0  stopped by SIGTERM/SIGINT after flushing the volume\n"
"    1  runtime error (volume, secret files, listen address, final flush)\n"
"    2  usage error (unknown option, bad value, bad configuration file)\n";

enum opt_id {
	OPT_CONFIG = 256, OPT_VOLUME, OPT_CREATE_SIZE, OPT_FORMAT, OPT_LISTEN, OPT_ADVERTISE,
	OPT_METASERVER, OPT_NAME, OPT_SECRET, OPT_CAP_KEY, OPT_IO_THREADS, OPT_SEND_MODE,
	OPT_UNIT_SIZE, OPT_PIPELINE_DEPTH, OPT_READAHEAD, OPT_BUFFER_POOL, OPT_LOG_LEVEL,
	OPT_LOG_FILE, OPT_DOMAIN, OPT_METRICS_LISTEN, OPT_STALL_CLOSE, OPT_HELP, OPT_VERSION,
};

static const struct option long_opts[] = {
	{ "config",	  required_argument, NULL, OPT_CONFIG },
	{ "volume",	  required_argument, NULL, OPT_VOLUME },
	{ "create-size",  required_argument, NULL, OPT_CREATE_SIZE },
	{ "format",	  no_argument,	     NULL, OPT_FORMAT },
	{ "listen",	  required_argument, NULL, OPT_LISTEN },
	{ "advertise",	  required_argument, NULL, OPT_ADVERTISE },
	{ "metaserver",	  required_argument, NULL, OPT_METASERVER },
	{ "name",	  required_argument, NULL, OPT_NAME },
	{ "domain",	  required_argument, NULL, OPT_DOMAIN },
	{ "secret-file",  required_argument, NULL, OPT_SECRET },
	{ "cap-key-file", required_argument, NULL, OPT_CAP_KEY },
	{ "io-threads",	  required_argument, NULL, OPT_IO_THREADS },
	{ "send-mode",	  required_argument, NULL, OPT_SEND_MODE },
	{ "unit-size",	  required_argument, NULL, OPT_UNIT_SIZE },
	{ "pipeline-depth", required_argument, NULL, OPT_PIPELINE_DEPTH },
	{ "readahead-cache", required_argument, NULL, OPT_READAHEAD },
	{ "buffer-pool",  required_argument, NULL, OPT_BUFFER_POOL },
	{ "log-level",	  required_argument, NULL, OPT_LOG_LEVEL },
	{ "log-file",	  required_argument, NULL, OPT_LOG_FILE },
	{ "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
	{ "stall-close-ms", required_argument, NULL, OPT_STALL_CLOSE },
	{ "help",	  no_argument,	     NULL, OPT_HELP },
	{ "version",	  no_argument,	     NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* The config key each option overrides (indexed by opt_id - OPT_CONFIG). */
static const char *const opt_keys[] = {
	[OPT_VOLUME - OPT_CONFIG]	= "volume",
	[OPT_CREATE_SIZE - OPT_CONFIG]	= "create_size",
	[OPT_FORMAT - OPT_CONFIG]	= "format",
	[OPT_LISTEN - OPT_CONFIG]	= "listen",
	[OPT_ADVERTISE - OPT_CONFIG]	= "advertise",
	[OPT_METASERVER - OPT_CONFIG]	= "metaserver",
	[OPT_NAME - OPT_CONFIG]		= "name",
	[OPT_SECRET - OPT_CONFIG]	= "secret_file",
	[OPT_CAP_KEY - OPT_CONFIG]	= "cap_key_file",
	[OPT_IO_THREADS - OPT_CONFIG]	= "io_threads",
	[OPT_SEND_MODE - OPT_CONFIG]	= "send_mode",
	[OPT_UNIT_SIZE - OPT_CONFIG]	= "unit_size",
	[OPT_PIPELINE_DEPTH - OPT_CONFIG] = "pipeline_depth",
	[OPT_READAHEAD - OPT_CONFIG]	= "readahead_cache_mb",
	[OPT_BUFFER_POOL - OPT_CONFIG]	= "buffer_pool",
	[OPT_LOG_LEVEL - OPT_CONFIG]	= "log_level",
	[OPT_LOG_FILE - OPT_CONFIG]	= "log_file",
	[OPT_DOMAIN - OPT_CONFIG]	= "domain",
	[OPT_METRICS_LISTEN - OPT_CONFIG] = "metrics_listen",
	[OPT_STALL_CLOSE - OPT_CONFIG]	= "stall_close_ms",
};

struct override {
	const char *key;
	const char *value;
};

static bool log_to_file;

/* Startup errors go to stderr, and to the log file too when there is one. */
static void startup_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void startup_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, PROG ": %s\n", msg);
	if (log_to_file)
		log_error(1200011, "%s", msg);
}

/*
 * Parse argv: --config goes to *@config, every other option to @ov (in order,
 * so a later one wins). Returns -1 to continue, else an exit status.
 */
static int parse_args(int argc, char **argv, const char **config, struct override *ov, int *nov)
{
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_HELP:
			fputs(usage_text, stdout);
			return EXIT_OK;
		case OPT_VERSION:
			printf(PROG " " PROG_VERSION "\n");
			return EXIT_OK;
		case OPT_CONFIG:
			*config = optarg;
			break;
		case OPT_FORMAT:
			ov[(*nov)++] = (struct override){ "format", "true" };
			break;
		default:
			if (c < OPT_CONFIG || c > OPT_VERSION || !opt_keys[c - OPT_CONFIG]) {
				fprintf(stderr, PROG ": %s option '%s'\n"
					"Try '" PROG " --help' for more information.\n",
					c == ':' ? "missing argument of" : "unknown",
					argv[optind - 1]);
				return EXIT_USAGE;
			}
			ov[(*nov)++] = (struct override){ opt_keys[c - OPT_CONFIG], optarg };
			break;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n"
			"Try '" PROG " --help' for more information.\n", argv[optind]);
		return EXIT_USAGE;
	}
	return -1;
}

static int load_config(struct rdfs_config *cfg, const char *path)
{
	int line = 0;
	int ret = config_load(cfg, path ? path : DEFAULT_CONFIG, &line);

	if (ret == -ENOENT && !path)
		return 0;
	if (ret == -EINVAL) {
		startup_error("%s:%d: syntax error", path ? path : DEFAULT_CONFIG, line);
		return EXIT_USAGE;
	}
	if (ret) {
		startup_error("cannot read configuration %s: %s", path ? path : DEFAULT_CONFIG,
			      strerror(-ret));
		return EXIT_USAGE;
	}
	return 0;
}

static int load_secret(const char *what, const char *path, struct auth_secret *out)
{
	int ret = auth_secret_load(path, out);

	if (ret == -EPERM)
		startup_error("%s %s is readable or writable by group or others; chmod 600 it",
			      what, path);
	else if (ret == -EINVAL)
		startup_error("%s %s is shorter than %d bytes", what, path, AUTH_SECRET_MIN);
	else if (ret)
		startup_error("cannot load %s %s: %s", what, path, strerror(-ret));
	return ret;
}

static void format_uuid(const uint8_t *u, char out[37])
{
	static const int dash_after[] = { 4, 6, 8, 10 };
	int p = 0, d = 0;

	for (int i = 0; i < VOLUME_UUID_LEN; i++) {
		if (d < 4 && i == dash_after[d]) {
			out[p++] = '-';
			d++;
		}
		p += sprintf(out + p, "%02x", u[i]);
	}
	out[p] = '\0';
}

static int open_volume(const struct rdfs_config *cfg, struct volume **vol)
{
	struct volume_open_opts o = { 0 };
	const char *path = config_get(cfg, SECTION, "volume", NULL);
	char uuid[37];
	int format = 0;
	int ret;

	if (!path || !path[0]) {
		startup_error("no volume given (--volume PATH or [ioserver] volume)");
		return EXIT_USAGE;
	}
	if (config_get_size(cfg, SECTION, "create_size", 0, &o.create_size)) {
		startup_error("bad create_size '%s' (a size like 10g)",
			      config_get(cfg, SECTION, "create_size", ""));
		return EXIT_USAGE;
	}
	if (config_get_bool(cfg, SECTION, "format", 0, &format)) {
		startup_error("bad format value '%s' (true or false)",
			      config_get(cfg, SECTION, "format", ""));
		return EXIT_USAGE;
	}
	o.path = path;
	o.format = format;

	ret = volume_open(&o, vol);
	switch (ret) {
	case 0:
		break;
	case -ENOENT:
		if (o.create_size)
			startup_error("cannot create volume %s: its directory does not exist",
				      path);
		else
			startup_error("cannot open volume %s: %s (give --create-size to create it)",
				      path, strerror(ENOENT));
		return EXIT_FAIL;
	case -EMEDIUMTYPE:
		startup_error("volume %s has no rdfs superblock; refusing to use it "
			      "(--format formats it, destroying its contents)", path);
		return EXIT_FAIL;
	case -EUCLEAN:
		startup_error("volume %s: superblock is corrupt, of an unknown version, or "
			      "larger than the volume; refusing to use it", path);
		return EXIT_FAIL;
	case -EFBIG:
		startup_error("volume %s is too small: it needs at least 1 MiB + 4 KiB", path);
		return EXIT_FAIL;
	case -ENOTBLK:
		startup_error("volume %s is neither a regular file nor a block device", path);
		return EXIT_FAIL;
	case -EBUSY:
		startup_error("volume %s is in use by another process", path);
		return EXIT_FAIL;
	default:
		startup_error("cannot open volume %s: %s", path, strerror(-ret));
		return EXIT_FAIL;
	}

	format_uuid(volume_uuid(*vol), uuid);
	log_info(1200012, "%s volume %s: %llu blocks of 4 KiB (%llu MiB), uuid %s%s%s",
		 volume_was_formatted(*vol) ? "formatted" : "opened", path,
		 (unsigned long long)volume_capacity(*vol),
		 (unsigned long long)(volume_capacity(*vol) / 256), uuid,
		 volume_is_direct(*vol) ? ", O_DIRECT" : "",
		 volume_is_pristine(*vol) ? ", pristine" : "");
	if (!volume_is_direct(*vol))
		log_warn(1200013,
			 "volume %s: the file system refuses O_DIRECT; using buffered I/O", path);
	return 0;
}

struct signal_waiter {
	sigset_t set;
	struct ios_server *server;
};

static void *signal_thread(void *arg)
{
	struct signal_waiter *w = arg;
	int sig = 0;

	if (sigwait(&w->set, &sig) == 0) {
		log_info(1200014, "%s: finishing in-flight requests and stopping", strsignal(sig));
		ios_server_stop(w->server);
	}
	return NULL;
}

/* Everything after the volume is open: secrets, the core, the main loop. */
/*
 * Everything that can be wrong with the settings, checked before the volume is
 * touched (so a typo never leaves a freshly created volume behind).
 */
/* The READ pipeline and read-ahead settings into @o; an exit status on a bad one. */
static int prepare_pipeline(const struct rdfs_config *cfg, struct ios_options *o)
{
	const char *mode = config_get(cfg, SECTION, "send_mode", "overlap");
	int64_t depth, ra_mb;
	uint64_t unit, pool;

	if (!strcmp(mode, "overlap")) {
		o->send_mode = IOS_SEND_OVERLAP;
	} else if (!strcmp(mode, "whole")) {
		o->send_mode = IOS_SEND_WHOLE;
	} else {
		startup_error("bad send_mode '%s' (whole or overlap)", mode);
		return EXIT_USAGE;
	}
	if (config_get_size(cfg, SECTION, "unit_size", IOS_DEFAULT_UNIT_SIZE, &unit) ||
	    unit < 4096 || unit > (16u << 20) || unit % 4096) {
		startup_error("bad unit_size '%s' (4k-16m, a multiple of 4k)",
			      config_get(cfg, SECTION, "unit_size", ""));
		return EXIT_USAGE;
	}
	if (config_get_int(cfg, SECTION, "pipeline_depth", IOS_DEFAULT_PIPELINE_DEPTH, &depth) ||
	    depth < 1 || depth > MAX_PIPELINE_DEPTH) {
		startup_error("bad pipeline_depth '%s' (1-%d)",
			      config_get(cfg, SECTION, "pipeline_depth", ""), MAX_PIPELINE_DEPTH);
		return EXIT_USAGE;
	}
	if (config_get_int(cfg, SECTION, "readahead_cache_mb", IOS_DEFAULT_READAHEAD_MB, &ra_mb) ||
	    ra_mb < 0 || ra_mb > (1 << 20)) {
		startup_error("bad readahead_cache_mb '%s' (MiB, 0 for none)",
			      config_get(cfg, SECTION, "readahead_cache_mb", ""));
		return EXIT_USAGE;
	}
	if (config_get_size(cfg, SECTION, "buffer_pool", 0, &pool) ||
	    (pool && pool < (16u << 20))) {
		startup_error("bad buffer_pool '%s' (a size of at least 16m)",
			      config_get(cfg, SECTION, "buffer_pool", ""));
		return EXIT_USAGE;
	}
	o->unit_size = (uint32_t)unit;
	o->pipeline_depth = (int)depth;
	o->readahead_cache_mb = ra_mb ? (int)ra_mb : IOS_READAHEAD_OFF;
	o->buffer_pool_bytes = pool;
	return 0;
}

static int prepare(const struct rdfs_config *cfg, struct ios_options *o,
		   struct auth_secret *secret, struct auth_secret *cap_key)
{
	int64_t threads = IOS_DEFAULT_IO_THREADS, stall_close;
	int ret;

	if (config_get_int(cfg, SECTION, "io_threads", IOS_DEFAULT_IO_THREADS, &threads) ||
	    threads < 1 || threads > MAX_IO_THREADS) {
		startup_error("bad io_threads '%s' (1-%d)",
			      config_get(cfg, SECTION, "io_threads", ""), MAX_IO_THREADS);
		return EXIT_USAGE;
	}
	if (config_get_int(cfg, SECTION, "stall_close_ms", RPC_STALL_CLOSE_DEFAULT_MS,
			   &stall_close) ||
	    stall_close < 1000 || stall_close > 86400000) {
		startup_error("bad stall_close_ms '%s' (milliseconds, 1000-86400000)",
			      config_get(cfg, SECTION, "stall_close_ms", ""));
		return EXIT_USAGE;
	}
	ret = prepare_pipeline(cfg, o);
	if (ret)
		return ret;
	if (load_secret("secret file", config_get(cfg, SECTION, "secret_file", DEFAULT_SECRET),
			secret) ||
	    load_secret("capability key file",
			config_get(cfg, SECTION, "cap_key_file", DEFAULT_CAP_KEY), cap_key))
		return EXIT_FAIL;

	o->listen = config_get(cfg, SECTION, "listen", IOS_DEFAULT_LISTEN);
	o->advertise = config_get(cfg, SECTION, "advertise", NULL);
	o->metaserver = config_get(cfg, SECTION, "metaserver", DEFAULT_METASERVER);
	o->name = config_get(cfg, SECTION, "name", NULL);
	o->domain = config_get(cfg, SECTION, "domain", NULL);
	if (o->domain && strlen(o->domain) > 63) {
		fprintf(stderr, PROG ": domain must be at most 63 bytes\n");
		return EXIT_USAGE;
	}
	o->secret = secret;
	o->cap_key = cap_key;
	o->io_threads = (int)threads;
	o->stall_close_ms = (int)stall_close;
	return 0;
}

/* Run the core on @vol until a signal stops it; metrics at @metrics_listen unless NULL. */
static int serve(struct ios_options *o, struct volume *vol, const char *metrics_listen)
{
	struct metrics_http *http = NULL;
	struct signal_waiter waiter;
	struct ios_server *server;
	pthread_t sig_thread;
	int ret;

	o->vol = vol;
	if (metrics_listen && *metrics_listen) {
		o->metrics = metrics_new();
		if (!o->metrics) {
			startup_error("cannot set up metrics: out of memory");
			return EXIT_FAIL;
		}
	}

	/* Signals go to the waiter thread only; every thread created later inherits the mask. */
	sigemptyset(&waiter.set);
	sigaddset(&waiter.set, SIGTERM);
	sigaddset(&waiter.set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &waiter.set, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = ios_server_create(o, &server);
	if (ret) {
		startup_error("cannot start serving on %s: %s", o->listen, strerror(-ret));
		metrics_free(o->metrics);
		return EXIT_FAIL;
	}
	if (o->metrics) {
		ret = metrics_http_start(o->metrics, metrics_listen, &http);
		if (ret) {
			startup_error("cannot serve metrics on %s: %s", metrics_listen,
				      strerror(-ret));
			ios_server_destroy(server);
			metrics_free(o->metrics);
			return EXIT_FAIL;
		}
		log_info(1200015, "metrics at %s", metrics_http_url(http));
	}
	log_info(1200016, "listening on %s%s, advertised as %s, metaserver %s",
		 ios_server_url(server, 0), ios_server_url(server, 1) ? " and more" : "",
		 ios_server_advertise_url(server), o->metaserver);
	log_info(1200017, "%d io_uring threads, send mode %s, %u KiB units, pipeline depth %d, "
		 "read-ahead cache %d MiB", o->io_threads,
		 o->send_mode == IOS_SEND_WHOLE ? "whole" : "overlap", o->unit_size >> 10,
		 o->pipeline_depth, o->readahead_cache_mb > 0 ? o->readahead_cache_mb : 0);

	waiter.server = server;
	if (pthread_create(&sig_thread, NULL, signal_thread, &waiter)) {
		startup_error("cannot start the signal thread");
		metrics_http_stop(http);
		ios_server_destroy(server);
		metrics_free(o->metrics);
		return EXIT_FAIL;
	}
	ret = ios_server_run(server);
	pthread_join(sig_thread, NULL);
	/* the endpoint reads the server: it goes first */
	metrics_http_stop(http);
	ios_server_destroy(server);
	metrics_free(o->metrics);
	log_info(1200018, "stopped%s", ret ? " (the final volume flush failed)" : "");
	return ret ? EXIT_FAIL : EXIT_OK;
}

int main(int argc, char **argv)
{
	static struct auth_secret secret, cap_key;
	struct ios_options opts = { 0 };
	struct override *ov;
	const char *config_path = NULL;
	struct rdfs_config *cfg;
	struct volume *vol = NULL;
	const char *level_name, *log_file;
	int nov = 0, level, ret, i;

	/* At most one override per argument. */
	ov = calloc((size_t)argc, sizeof(*ov));
	cfg = config_new();
	if (!ov || !cfg) {
		fprintf(stderr, PROG ": out of memory\n");
		return EXIT_FAIL;
	}
	ret = parse_args(argc, argv, &config_path, ov, &nov);
	if (ret >= 0)
		goto out;

	ret = load_config(cfg, config_path);
	if (ret)
		goto out;
	for (i = 0; i < nov; i++)
		config_set(cfg, SECTION, ov[i].key, ov[i].value);

	level_name = config_get(cfg, SECTION, "log_level", "info");
	level = log_parse_level(level_name);
	if (level < 0) {
		startup_error("bad log level '%s' (error, warn, info, debug)", level_name);
		ret = EXIT_USAGE;
		goto out;
	}
	log_init(PROG, (enum log_level)level);
	log_file = config_get(cfg, SECTION, "log_file", NULL);
	if (log_file && log_file[0]) {
		ret = log_open_file(log_file);
		if (ret) {
			startup_error("cannot open log file %s: %s", log_file, strerror(-ret));
			ret = EXIT_FAIL;
			goto out;
		}
		log_to_file = true;
	}

	ret = prepare(cfg, &opts, &secret, &cap_key);
	if (ret)
		goto out;
	ret = open_volume(cfg, &vol);
	if (ret)
		goto out;
	ret = serve(&opts, vol, config_get(cfg, SECTION, "metrics_listen",
					   config_get(cfg, "metrics", "listen", NULL)));
	volume_close(vol);
out:
	config_free(cfg);
	free(ov);
	return ret;
}
