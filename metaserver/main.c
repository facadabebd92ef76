// SPDX-License-Identifier: MIT
/*
 * main.c - rdfs-metaserver: options and configuration, then the server.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "auth.h"
#include "config.h"
#include "frame.h"
#include "log.h"
#include "metrics.h"
#include "metrics_http.h"
#include "ms.h"
#include "rpc.h"
#include "server.h"

#define PROG		"rdfs-metaserver"
#define VERSION		"0.1"
#define SECTION		"metaserver"
#define DEF_CONFIG	"/etc/rdfs/rdfs.conf"
#define DEF_LISTEN	"tcp://0.0.0.0:7000"
#define DEF_DB		"/var/lib/rdfs/metaserver"
#define DEF_SECRET	"/etc/rdfs/secret"
#define DEF_CAPKEY	"/etc/rdfs/cap.key"
#define MAX_LISTEN	16

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	stop_requested = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
"NAME\n"
"    rdfs-metaserver - the rdfs metadata server\n"
"\n"
"SYNOPSIS\n"
"    rdfs-metaserver [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"    Serves the rdfs namespace (directories, attributes, permissions), file\n"
"    layouts and block allocation, and the registry of I/O servers, from one\n"
"    LevelDB database. Every change is durable (synced) before it is\n"
"    acknowledged; concurrent changes share one sync (group commit). Clients\n"
"    authenticate with the cluster secret or a key of their own (`rdfs node`),\n"
"    I/O servers with the server key derived from the capability key; layouts\n"
"    carry capabilities signed with the capability key and bound to the peer\n"
"    that asked, which I/O servers check.\n"
"\n"
"    Blocks freed by one file are zeroed before another file gets them: when\n"
"    a layout allocates blocks that were in use before, the metaserver sends\n"
"    ZERO to their I/O server (connecting to the URL it registered, with the\n"
"    server key) and answers only once they read as zeros. An I/O server\n"
"    that is unreachable from the metaserver therefore fails such allocations\n"
"    with EIO.\n"
"\n"
"OPTIONS\n"
"    --config FILE        configuration file (default " DEF_CONFIG "; a missing\n"
"                         default file is fine, a missing given one is an error)\n"
"    --db DIR             database directory, created if missing\n"
"                         (default " DEF_DB ")\n"
"    --listen URL         listen on URL; repeat for several (default " DEF_LISTEN ").\n"
"                         tcp://HOST:PORT, tls://HOST:PORT (TLS 1.3 keyed by the\n"
"                         cluster's keys; only TLS there) or rdma://ADDR:PORT\n"
"    --secret-file FILE   cluster secret, mode 0600 (default " DEF_SECRET ")\n"
"    --cap-key-file FILE  capability key, mode 0600 (default " DEF_CAPKEY ")\n"
"    --threads N          worker threads (default 8)\n"
"    --cap-lifetime SEC   lifetime of issued capabilities (default 600)\n"
"    --log-level LEVEL    error, warn, info or debug (default info)\n"
"    --log-file FILE      append the log to FILE instead of stderr\n"
"    --chunk-size SIZE    stripe chunk size of the root directory of a new\n"
"                         database, inherited by everything created in it;\n"
"                         k/m suffixes (default 1m; ignored for an existing db)\n"
"    --rebuild-grace SEC  a down I/O server's copies still count this long;\n"
"                         then the rebuilder makes new ones on other servers\n"
"                         (default 300; 0: at once)\n"
"    --rebuild-interval SEC\n"
"                         between the rebuilder's passes over all chunks, when\n"
"                         the last found nothing more to do (default 10)\n"
"    --ioserver-timeout MS\n"
"                         an I/O server that sent nothing (its PINGs come at\n"
"                         least 3 times per timeout) for this long is down, as\n"
"                         if its registration connection had closed; it must\n"
"                         register again, and stops serving until it has\n"
"                         (default 6000; 0: only a closed connection)\n"
"    --rebuild-rate MIB   MiB per second the rebuilder copies at most\n"
"                         (default 100; 0: no limit)\n"
"    --default-copies N   copies of every chunk of a file, on distinct I/O\n"
"                         servers, where neither the file nor a directory\n"
"                         above it at its creation said otherwise (rdfs\n"
"                         setcopies); 1 to " RDFS_MAX_COPIES_STR " (default 1)\n"
"    --root-squash        requests of uid 0 from clients of the cluster secret\n"
"                         run as uid/gid 65534, whatever role they name\n"
"                         (default off; a node key has its own policy, see\n"
"                         rdfs node --help)\n"
"    --metrics-listen HOST:PORT\n"
"                         serve Prometheus metrics at http://HOST:PORT/metrics\n"
"                         (requests, errors and latency by operation, queue,\n"
"                         synced writes, fences, I/O servers' capacity; see\n"
"                         docs/DESIGN.md, \"Metrics\"). Default: [metaserver]\n"
"                         metrics_listen, else [metrics] listen, else off\n"
"    --startup-wait SEC   after a start, allocation waits this long at most for\n"
"                         the known I/O servers to register again: clients are\n"
"                         told to retry (EAGAIN) instead of failing (default 30;\n"
"                         0: allocate on whatever has registered)\n"
"    --stall-close-ms MS  a peer that, with replies queued for it, takes less than\n"
"                         64 KiB/s of them over this long (it does not read\n"
"                         them, or reads a trickle) is disconnected and its\n"
"                         memory returned; 1000 to 86400000 (default 60000)\n"
"    --help               print this help and exit\n"
"    --version            print the version and exit\n"
"\n"
"CONFIGURATION\n"
"    An INI file; command-line options override it.\n"
"      [cluster]     secret_file, cap_key_file, log_level\n"
"      [metaserver]  listen (URLs separated by spaces or commas), db, threads,\n"
"                    cap_lifetime, chunk_size, default_copies, root_squash,\n"
"                    startup_wait, rebuild_grace, rebuild_interval,\n"
"                    rebuild_rate, ioserver_timeout, stall_close_ms,\n"
"                    metrics_listen, log_level, log_file\n"
"      [metrics]     listen: HOST:PORT of the metrics endpoint, for every server\n"
"                    reading the file (a server's own metrics_listen wins, so\n"
"                    servers sharing a host and a file can use other ports)\n"
"\n"
"EXAMPLES\n"
"    rdfs-metaserver --db /srv/rdfs/mds --listen tcp://0.0.0.0:7000\n"
"    rdfs-metaserver --config /etc/rdfs/rdfs.conf --log-level debug\n"
"\n"
"SIGNALS\n"
"    SIGTERM, SIGINT: stop accepting requests, finish those in progress, close\n"
"    the database cleanly and exit 0.\n"
"\n"
"EXIT STATUS\n"
"    0 clean shutdown, 1 runtime error (database in use or unreadable, secret\n"
"    unreadable, cannot listen), 2 usage or configuration error.\n");
}

/* mkdir -p: the database's parent directories, so a fresh machine needs no setup. */
static int make_dirs(const char *path)
{
	char buf[4096];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

static int load_secret(const char *what, const char *path, struct auth_secret *out)
{
	int ret = auth_secret_load(path, out);

	if (ret == -EPERM)
		fprintf(stderr, PROG ": %s %s must not be accessible by group or others (chmod 600)\n",
			what, path);
	else if (ret == -EINVAL)
		fprintf(stderr, PROG ": %s %s is shorter than %d bytes\n", what, path,
			AUTH_SECRET_MIN);
	else if (ret)
		fprintf(stderr, PROG ": cannot read %s %s: %s\n", what, path, strerror(-ret));
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "db", required_argument, NULL, 'd' },
		{ "listen", required_argument, NULL, 'l' },
		{ "secret-file", required_argument, NULL, 's' },
		{ "cap-key-file", required_argument, NULL, 'k' },
		{ "threads", required_argument, NULL, 't' },
		{ "cap-lifetime", required_argument, NULL, 'T' },
		{ "log-level", required_argument, NULL, 'L' },
		{ "log-file", required_argument, NULL, 'F' },
		{ "chunk-size", required_argument, NULL, 'C' },
		{ "default-copies", required_argument, NULL, 'N' },
		{ "rebuild-grace", required_argument, NULL, 'G' },
		{ "rebuild-interval", required_argument, NULL, 'I' },
		{ "rebuild-rate", required_argument, NULL, 'P' },
		{ "ioserver-timeout", required_argument, NULL, 'O' },
		{ "root-squash", no_argument, NULL, 'R' },
		{ "startup-wait", required_argument, NULL, 'W' },
		{ "metrics-listen", required_argument, NULL, 'M' },
		{ "stall-close-ms", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL, *listen_cli[MAX_LISTEN + 1] = { 0 };
	const char *listen[MAX_LISTEN + 1] = { 0 };
	struct rdfs_config *cfg = config_new();
	struct auth_secret *secret = NULL, *cap_key = NULL;
	struct ms_server_opts so = { 0 };
	struct ms_server *srv = NULL;
	struct metrics *metrics = NULL;
	struct metrics_http *http = NULL;
	const char *metrics_listen;
	struct ms_options mo = { 0 };
	struct ms *ms = NULL;
	char *listen_buf = NULL, err[512];
	int nlisten_cli = 0, nlisten = 0, opt, errline, ret, status = 1, lvl;
	int64_t threads, lifetime, startup_wait, copies, grace, interval, rate, ioserver_timeout;
	int64_t stall_close;
	int root_squash;
	uint64_t chunk_size;
	struct sigaction sa;

	if (!cfg) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config_path = optarg;
			break;
		case 'd':
			config_set(cfg, SECTION, "db", optarg);
			break;
		case 'l':
			if (nlisten_cli == MAX_LISTEN) {
				fprintf(stderr, PROG ": at most %d --listen options\n", MAX_LISTEN);
				return 2;
			}
			listen_cli[nlisten_cli++] = optarg;
			break;
		case 's':
			config_set(cfg, SECTION, "secret_file", optarg);
			break;
		case 'k':
			config_set(cfg, SECTION, "cap_key_file", optarg);
			break;
		case 't':
			config_set(cfg, SECTION, "threads", optarg);
			break;
		case 'T':
			config_set(cfg, SECTION, "cap_lifetime", optarg);
			break;
		case 'L':
			config_set(cfg, SECTION, "log_level", optarg);
			break;
		case 'F':
			config_set(cfg, SECTION, "log_file", optarg);
			break;
		case 'C':
			config_set(cfg, SECTION, "chunk_size", optarg);
			break;
		case 'N':
			config_set(cfg, SECTION, "default_copies", optarg);
			break;
		case 'G':
			config_set(cfg, SECTION, "rebuild_grace", optarg);
			break;
		case 'I':
			config_set(cfg, SECTION, "rebuild_interval", optarg);
			break;
		case 'P':
			config_set(cfg, SECTION, "rebuild_rate", optarg);
			break;
		case 'O':
			config_set(cfg, SECTION, "ioserver_timeout", optarg);
			break;
		case 'R':
			config_set(cfg, SECTION, "root_squash", "true");
			break;
		case 'W':
			config_set(cfg, SECTION, "startup_wait", optarg);
			break;
		case 'M':
			config_set(cfg, SECTION, "metrics_listen", optarg);
			break;
		case 'S':
			config_set(cfg, SECTION, "stall_close_ms", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf(PROG " " VERSION "\n");
			return 0;
		default:
			fprintf(stderr, "Try '" PROG " --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\nTry '" PROG " --help'.\n",
			argv[optind]);
		return 2;
	}

	/* The file is loaded into a fresh config and the command line set again on top. */
	{
		struct rdfs_config *file = config_new();

		ret = config_load(file, config_path ? config_path : DEF_CONFIG, &errline);
		if (ret == -ENOENT && !config_path) {
			ret = 0;
		} else if (ret == -EINVAL) {
			fprintf(stderr, PROG ": %s:%d: syntax error\n",
				config_path ? config_path : DEF_CONFIG, errline);
			return 2;
		} else if (ret) {
			fprintf(stderr, PROG ": cannot read %s: %s\n",
				config_path ? config_path : DEF_CONFIG, strerror(-ret));
			return 2;
		}
		static const char *const keys[] = { "db", "secret_file", "cap_key_file", "threads",
						     "cap_lifetime", "log_level", "log_file",
						     "chunk_size", "root_squash", "startup_wait",
						     "default_copies", "rebuild_grace",
						     "rebuild_interval", "rebuild_rate",
						     "ioserver_timeout", "metrics_listen",
						     "stall_close_ms" };
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			const char *v = config_get(cfg, SECTION, keys[i], NULL);

			if (v)
				config_set(file, SECTION, keys[i], v);
		}
		config_free(cfg);
		cfg = file;
	}

	lvl = log_parse_level(config_get(cfg, SECTION, "log_level", "info"));
	if (lvl < 0) {
		fprintf(stderr, PROG ": bad log level '%s' (error, warn, info, debug)\n",
			config_get(cfg, SECTION, "log_level", "info"));
		return 2;
	}
	log_init(PROG, (enum log_level)lvl);
	if (config_get(cfg, SECTION, "log_file", NULL)) {
		ret = log_open_file(config_get(cfg, SECTION, "log_file", NULL));
		if (ret) {
			fprintf(stderr, PROG ": cannot open log file %s: %s\n",
				config_get(cfg, SECTION, "log_file", NULL), strerror(-ret));
			return 1;
		}
	}
	if (config_get_int(cfg, SECTION, "threads", 8, &threads) || threads < 1 || threads > 1024) {
		fprintf(stderr, PROG ": threads must be a number from 1 to 1024\n");
		return 2;
	}
	if (config_get_int(cfg, SECTION, "cap_lifetime", 600, &lifetime) || lifetime < 1 ||
	    lifetime > 7 * 86400) {
		fprintf(stderr, PROG ": cap_lifetime must be a number of seconds from 1 to 604800\n");
		return 2;
	}
	if (config_get_size(cfg, SECTION, "chunk_size", MS_DEFAULT_CHUNK, &chunk_size) ||
	    chunk_size < 4096 || chunk_size % 4096 || chunk_size > RDFS_MAX_CHUNK) {
		fprintf(stderr, PROG ": chunk_size must be a multiple of 4k from 4k to 64m\n");
		return 2;
	}
	if (config_get_int(cfg, SECTION, "default_copies", 1, &copies) || copies < 1 ||
	    copies > RDFS_MAX_COPIES) {
		fprintf(stderr, PROG ": default_copies must be a number from 1 to %d\n",
			RDFS_MAX_COPIES);
		return 2;
	}
	if (config_get_int(cfg, SECTION, "rebuild_grace", 300, &grace) || grace < 0 ||
	    grace > 30 * 86400) {
		fprintf(stderr, PROG ": rebuild_grace must be a number of seconds from 0 to "
			"2592000\n");
		return 2;
	}
	if (config_get_int(cfg, SECTION, "rebuild_interval", 10, &interval) || interval < 1 ||
	    interval > 86400) {
		fprintf(stderr, PROG ": rebuild_interval must be a number of seconds from 1 to "
			"86400\n");
		return 2;
	}
	if (config_get_int(cfg, SECTION, "rebuild_rate", 100, &rate) || rate < 0 ||
	    rate > 1000000) {
		fprintf(stderr, PROG ": rebuild_rate must be MiB per second from 0 to 1000000\n");
		return 2;
	}
	if (config_get_int(cfg, SECTION, "ioserver_timeout", MS_DEFAULT_IOSERVER_TIMEOUT_MS,
			   &ioserver_timeout) ||
	    (ioserver_timeout != 0 && (ioserver_timeout < 300 || ioserver_timeout > 3600000))) {
		fprintf(stderr, PROG ": ioserver_timeout must be 0 or milliseconds from 300 to "
			"3600000\n");
		return 2;
	}
	if (config_get_int(cfg, SECTION, "stall_close_ms", RPC_STALL_CLOSE_DEFAULT_MS,
			   &stall_close) ||
	    stall_close < 1000 || stall_close > 86400000) {
		fprintf(stderr, PROG ": stall_close_ms must be milliseconds from 1000 to 86400000\n");
		return 2;
	}
	if (config_get_bool(cfg, SECTION, "root_squash", 0, &root_squash)) {
		fprintf(stderr, PROG ": root_squash must be true or false\n");
		return 2;
	}
	if (config_get_int(cfg, SECTION, "startup_wait", 30, &startup_wait) || startup_wait < 0 ||
	    startup_wait > 3600) {
		fprintf(stderr, PROG ": startup_wait must be a number of seconds from 0 to 3600\n");
		return 2;
	}
	if (nlisten_cli) {
		memcpy(listen, listen_cli, sizeof(listen));
		nlisten = nlisten_cli;
	} else {
		char *tok, *save = NULL;

		listen_buf = strdup(config_get(cfg, SECTION, "listen", DEF_LISTEN));
		for (tok = strtok_r(listen_buf, " ,\t", &save); tok && nlisten < MAX_LISTEN;
		     tok = strtok_r(NULL, " ,\t", &save))
			listen[nlisten++] = tok;
		if (nlisten == 0) {
			fprintf(stderr, PROG ": no listen URL configured\n");
			return 2;
		}
	}

	secret = calloc(1, sizeof(*secret));
	cap_key = calloc(1, sizeof(*cap_key));
	if (!secret || !cap_key)
		goto out;
	if (load_secret("cluster secret", config_get(cfg, SECTION, "secret_file", DEF_SECRET),
			secret) ||
	    load_secret("capability key", config_get(cfg, SECTION, "cap_key_file", DEF_CAPKEY),
			cap_key))
		goto out;

	mo.db_dir = config_get(cfg, SECTION, "db", DEF_DB);
	mo.chunk_size = (uint32_t)chunk_size;
	mo.startup_wait_ms = (int)startup_wait * 1000;
	mo.default_copies = (uint32_t)copies;
	mo.rebuild_grace_ms = grace * 1000;
	mo.rebuild_rate = (uint64_t)rate << 20;
	ret = make_dirs(mo.db_dir);
	if (ret) {
		fprintf(stderr, PROG ": cannot create database directory %s: %s\n", mo.db_dir,
			strerror(-ret));
		goto out;
	}
	ret = ms_open(&mo, &ms, err, sizeof(err));
	if (ret) {
		fprintf(stderr, PROG ": %s\n", err);
		goto out;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* the program's own key first: a metaserver and an I/O server may share a host and a file */
	metrics_listen = config_get(cfg, SECTION, "metrics_listen",
				    config_get(cfg, "metrics", "listen", NULL));
	if (metrics_listen && *metrics_listen) {
		metrics = metrics_new();
		if (!metrics || ms_metrics_register(ms, metrics)) {
			fprintf(stderr, PROG ": cannot set up metrics: out of memory\n");
			goto out;
		}
		so.metrics = metrics;
	}
	so.listen = listen;
	so.secret = secret;
	so.cap_key = cap_key;
	so.threads = (int)threads;
	so.cap_lifetime_ns = lifetime * 1000000000ll;
	so.stop = &stop_requested;
	so.root_squash = root_squash;
	so.rebuild_interval_ms = interval * 1000;
	so.ioserver_timeout_ms = ioserver_timeout ? (int)ioserver_timeout : -1;
	so.stall_close_ms = (int)stall_close;
	ret = ms_server_create(ms, &so, &srv);
	if (ret) {
		fprintf(stderr, PROG ": cannot listen on %s: %s\n", listen[0], strerror(-ret));
		goto out;
	}
	for (int i = 0; i < nlisten; i++)
		log_info(1100023, "listening on %s", ms_server_listen_url(srv, i));
	if (metrics) {
		if (metrics_http_start(metrics, metrics_listen, &http))
			goto out;	/* logged there */
		log_info(1100024, "metrics at %s", metrics_http_url(http));
	}
	log_info(1100025, "database %s, %d worker threads", mo.db_dir, (int)threads);
	ms_server_run(srv);
	status = 0;
	log_info(1100026, "stopped");
out:
	/* the endpoint reads the server and the core: it goes first */
	metrics_http_stop(http);
	ms_server_destroy(srv);
	ms_close(ms);
	if (secret)
		memset(secret, 0, sizeof(*secret));
	if (cap_key)
		memset(cap_key, 0, sizeof(*cap_key));
	free(secret);
	free(cap_key);
	free(listen_buf);
	config_free(cfg);
	metrics_free(metrics);
	return status;
}
