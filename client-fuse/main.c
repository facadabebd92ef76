// SPDX-License-Identifier: MIT
/*
 * main.c - rdfs-fuse: parse the command line and config, connect to the
 * metaserver, mount, and run libfuse's multithreaded session loop over the
 * operations of ops.c.
 *
 * Daemonizing: the client core starts threads when it connects, and a fork()
 * keeps only the calling thread, so fuse_daemonize() (which forks after the
 * fact) cannot be used. Instead the process forks first; the child connects
 * and mounts with the terminal still its stderr, and the parent exits only
 * when the child reports the mount is up (status 0) or has failed (its exit
 * status). So `rdfs-fuse ...` and mount(8) return when the mount is usable, and
 * every startup error reaches the terminal.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "fuse_metrics.h"
#include "groups_cache.h"
#include "log.h"
#include "metrics.h"
#include "metrics_http.h"
#include "rdfs_fuse.h"
#include "readahead.h"
#include "session_loop.h"

#define PROG			"rdfs-fuse"
#define DEFAULT_CONFIG		"/etc/rdfs/rdfs.conf"
#define DEFAULT_SECRET		"/etc/rdfs/secret"
#define DEFAULT_PORT		"7000"
#define DEFAULT_TIMEOUT_MS	30000
#define DEFAULT_MAX_THREADS	32
#define DEFAULT_READAHEAD	(8u << 20)
#define DEFAULT_WRITE_BEHIND	(32u << 20)
#define RDFS_VERSION		"0.1"

enum exit_status { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* The command line: -o values are strings until they are merged into the config. */
struct cmdline {
	char *attr_timeout;
	char *entry_timeout;
	char *groups_timeout;
	char *secret_file;
	char *config;
	char *log_level;
	char *log_file;
	char *timeout;
	char *max_threads;
	char *readahead;
	char *write_behind;
	char *rdma_mode;
	char *metrics_listen;
	int writeback_cache;
	int no_writeback_cache;
	int splice;
	int direct_io;
	int direct_writes;
	int no_direct_writes;
	int unstable_writes;
	unsigned int max_read;
	int no_allow_other;
	int no_default_permissions;
	int noacl;
	int foreground;
	int debug;
	int single_thread;
	int help;
	int version;
	int nonopts;
	char *spec;
	char *mountpoint;
};

enum { KEY_HELP, KEY_VERSION, KEY_DEBUG };

#define CMD_OPT(t, field) { t, offsetof(struct cmdline, field), 1 }

static const struct fuse_opt cmdline_spec[] = {
	{ "attr_timeout=%s", offsetof(struct cmdline, attr_timeout), 0 },
	{ "entry_timeout=%s", offsetof(struct cmdline, entry_timeout), 0 },
	{ "groups_timeout=%s", offsetof(struct cmdline, groups_timeout), 0 },
	{ "secret_file=%s", offsetof(struct cmdline, secret_file), 0 },
	{ "config=%s", offsetof(struct cmdline, config), 0 },
	{ "log_level=%s", offsetof(struct cmdline, log_level), 0 },
	{ "log_file=%s", offsetof(struct cmdline, log_file), 0 },
	{ "timeout=%s", offsetof(struct cmdline, timeout), 0 },
	{ "max_threads=%s", offsetof(struct cmdline, max_threads), 0 },
	{ "readahead=%s", offsetof(struct cmdline, readahead), 0 },
	{ "write_behind=%s", offsetof(struct cmdline, write_behind), 0 },
	{ "rdma_mode=%s", offsetof(struct cmdline, rdma_mode), 0 },
	{ "metrics_listen=%s", offsetof(struct cmdline, metrics_listen), 0 },
	CMD_OPT("writeback_cache", writeback_cache),
	CMD_OPT("no_writeback_cache", no_writeback_cache),
	CMD_OPT("splice", splice),
	/* libfuse insists that init() and the mount option agree on it */
	{ "max_read=%u", offsetof(struct cmdline, max_read), 0 },
	CMD_OPT("direct_io", direct_io),
	CMD_OPT("direct_writes", direct_writes),
	CMD_OPT("no_direct_writes", no_direct_writes),
	CMD_OPT("unstable_writes", unstable_writes),
	CMD_OPT("no_allow_other", no_allow_other),
	CMD_OPT("no_default_permissions", no_default_permissions),
	CMD_OPT("noacl", noacl),
	CMD_OPT("-f", foreground),
	CMD_OPT("-s", single_thread),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END
};

static void usage(FILE *out)
{
	fprintf(out,
"Usage: " PROG " [OPTIONS] [tcp://]HOST[:PORT] MOUNTPOINT\n"
"       " PROG " [OPTIONS] -o config=FILE MOUNTPOINT\n"
"Try '" PROG " --help' for more information.\n");
}

static void help(void)
{
	printf(
"NAME\n"
"    " PROG " - mount an rdfs file system through FUSE\n"
"\n"
"SYNOPSIS\n"
"    " PROG " [-f] [-d] [-s] [-o OPTION[,OPTION...]] [SCHEME://]HOST[:PORT] MOUNTPOINT\n"
"    mount -t fuse.rdfs HOST:PORT MOUNTPOINT [-o OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"    Connects to the rdfs metaserver at HOST:PORT (port " DEFAULT_PORT " if omitted),\n"
"    authenticates with the cluster secret and mounts the file system on\n"
"    MOUNTPOINT. File data moves directly between this client and the I/O\n"
"    servers; consistency between clients is close-to-open.\n"
"\n"
"    SCHEME is how the metaserver is reached: tcp (the default), tls (TCP\n"
"    inside TLS 1.3, keyed by the same cluster secret or node key: no\n"
"    certificates; for networks that are not private) or rdma. I/O servers\n"
"    are reached by the URL each one advertises.\n"
"\n"
"    Unless -f is given, " PROG " returns once the mount is up and keeps serving\n"
"    it in the background; startup errors are printed before it returns. The\n"
"    metaserver may also come from the config file ([cluster] metaserver), in\n"
"    which case HOST:PORT can be left out. Unmount with `fusermount3 -u\n"
"    MOUNTPOINT` or `umount MOUNTPOINT`.\n"
"\n"
"OPTIONS\n"
"    -f                    stay in the foreground (log to stderr)\n"
"    -d, -o debug          foreground, and log every FUSE request (libfuse debug)\n"
"    -s                    single-threaded session loop (default: multithreaded;\n"
"                          -s also turns direct_writes off)\n"
"    -h, --help            print this help and exit\n"
"    -V, --version         print the version and exit\n"
"\n"
"  rdfs options (-o NAME=VALUE; each overrides the same key of the config file):\n"
"    config=FILE           config file (default " DEFAULT_CONFIG "; a missing\n"
"                          default file is fine, a missing given one is an error)\n"
"    secret_file=FILE      cluster secret, mode 0600 (default " DEFAULT_SECRET ")\n"
"    attr_timeout=SEC      seconds the kernel caches attributes (default 1)\n"
"    entry_timeout=SEC     seconds the kernel caches name lookups, found or not\n"
"                          (default 1)\n"
"    groups_timeout=SEC    seconds a calling thread's supplementary groups are\n"
"                          remembered (default 1; 0 reads them for every request).\n"
"                          FUSE requests carry only uid and gid; the groups come\n"
"                          from /proc, read again at once when the thread's uid\n"
"                          or gid changes. A thread that drops groups with\n"
"                          setgroups(2) alone keeps them here up to SEC. Only a\n"
"                          process's main thread is remembered, and only while\n"
"                          that process lives (a reused id is read afresh)\n"
"    direct_io             bypass the page cache for every file (default off;\n"
"                          O_DIRECT does the same per file)\n"
"    direct_writes, no_direct_writes\n"
"                          a file opened write-only (O_WRONLY: cp, dd, tar,\n"
"                          most writers) bypasses the page cache: its writes\n"
"                          reach " PROG " straight from the writer's buffer,\n"
"                          not first copied into cached pages that nothing\n"
"                          would read (default on; off with no_direct_writes\n"
"                          or the config key direct_writes = false). Pages\n"
"                          other opens of the file cache here are dropped\n"
"                          before each such write, so they read what it\n"
"                          wrote. Not used with writeback_cache or -s, for\n"
"                          files with set-user-ID or set-group-ID bits, or\n"
"                          for opens that may read\n"
"    unstable_writes       I/O servers acknowledge writes before they are durable;\n"
"                          fsync(2) makes them durable (default off: every\n"
"                          write is durable once the I/O servers answered it)\n"
"    write_behind=SIZE     write-behind per file (default 32m; 0 turns it off):\n"
"                          write(2) returns once its data is copied, and up to\n"
"                          SIZE of WRITEs are in flight to the I/O servers. All\n"
"                          of a file's writes are on the servers when close(2)\n"
"                          or fsync(2) returns, and a failed one makes that\n"
"                          close/fsync (and the next write) fail with EIO or\n"
"                          ENOSPC, as with NFS. With 0, write(2) returns only\n"
"                          when the servers have the data, and reports errors\n"
"                          itself\n"
"    writeback_cache       let the kernel gather writes in its page cache and\n"
"                          send them in the background (FUSE writeback cache;\n"
"                          default off, or no_writeback_cache). Caveat: while\n"
"                          this mount caches a file, it takes the file's size\n"
"                          from its own writes, so another client's truncate\n"
"                          is not seen here until the file leaves the cache\n"
"                          (growth is: it is pushed to the kernel at open)\n"
"    rdma_mode=MODE        how READ data moves over rdma:// I/O servers: read\n"
"                          (default: this client RDMA-READs each unit from the\n"
"                          server's buffer) or write (the server RDMA-WRITEs each\n"
"                          unit into a buffer of this client's, exposed for that\n"
"                          request only). Over tcp:// write costs one copy\n"
"    splice                send read replies to the kernel with vmsplice and\n"
"                          splice(2) instead of writev(2) (default off: the\n"
"                          kernel copies from the pipe just the same, so it\n"
"                          saves no copy)\n"
"    timeout=MS            milliseconds before an unanswered request fails with\n"
"                          EIO (default %d)\n"
"    max_threads=N         most request threads of the session loop (default %d)\n"
"    readahead=SIZE        kernel read-ahead window of the mount (default 8m; 0\n"
"                          keeps the kernel's 128k). Needs root: it is set in\n"
"                          /sys/class/bdi/MAJOR:MINOR/read_ahead_kb\n"
"    metrics_listen=HOST:PORT\n"
"                          serve Prometheus metrics at http://HOST:PORT/metrics\n"
"                          (\":PORT\" for every address, port 0 picks a free one,\n"
"                          logged at level info as \"metrics at URL\"): FUSE\n"
"                          requests, errors by errno and latency by operation,\n"
"                          requests in flight, bytes read and written, and the\n"
"                          client core's counters (metaserver requests by\n"
"                          operation, layout cache hits and misses, capability\n"
"                          refusals, write-behind and read-ahead bytes); see\n"
"                          docs/DESIGN.md, \"Metrics\". Default: [fuse]\n"
"                          metrics_listen, else [metrics] listen, else off. An\n"
"                          address of its own that cannot be served fails the\n"
"                          mount; the shared [metrics] listen only warns (a\n"
"                          server or another mount on the host may hold it)\n"
"    log_level=LEVEL       error, warn, info or debug (default warn)\n"
"    log_file=FILE         append log lines to FILE (default stderr; discarded\n"
"                          once daemonized unless set)\n"
"    no_allow_other        only the mounting user may access the mount\n"
"                          (allow_other is on by default; for non-root users it\n"
"                          needs user_allow_other in /etc/fuse.conf)\n"
"    no_default_permissions  leave all permission checks to the metaserver;\n"
"                          access(2) then always succeeds, the operations\n"
"                          themselves are still checked. (default_permissions\n"
"                          is on by default: the kernel checks mode bits, then\n"
"                          the metaserver checks again with the caller's uid,\n"
"                          gid and groups)\n"
"    noacl                 no POSIX ACLs through this mount: getfacl/setfacl\n"
"                          get EOPNOTSUPP (system.posix_acl_* xattrs) and new\n"
"                          files take the umask. The metaserver still enforces\n"
"                          the ACLs other mounts set. (By default ACLs are on:\n"
"                          the kernel checks and caches them, and the umask is\n"
"                          ignored under a directory with a default ACL; with\n"
"                          no_default_permissions only the metaserver checks)\n"
"\n"
"  FUSE options passed to libfuse unchanged, for example:\n"
"    ro, rw, nosuid, nodev, noexec, noatime, fsname=NAME, subtype=TYPE,\n"
"    auto_unmount, max_read=N (default and most 1048576)\n"
"    (fsname defaults to rdfs#HOST:PORT and subtype to rdfs, so df(1) and\n"
"    /proc/mounts show the type fuse.rdfs)\n"
"\n"
"CONFIG FILE\n"
"    INI format; " PROG " reads section [fuse], then [cluster]:\n"
"      [cluster]  metaserver = tcp://HOST:PORT, secret_file, log_level\n"
"      [fuse]     attr_timeout, entry_timeout, direct_io, direct_writes,\n"
"                 unstable_writes, writeback_cache (true/false), timeout,\n"
"                 max_threads, readahead, write_behind, rdma_mode,\n"
"                 metrics_listen, log_level, log_file\n"
"      [metrics]  listen (HOST:PORT, shared with the servers reading the\n"
"                 file; [fuse] metrics_listen wins)\n"
"\n"
"EXAMPLES\n"
"    " PROG " mds1:7000 /mnt/rdfs\n"
"    " PROG " -f -o secret_file=/tmp/c/secret,attr_timeout=0 127.0.0.1:7000 /mnt/rdfs\n"
"    mount -t fuse.rdfs mds1:7000 /mnt/rdfs -o secret_file=/etc/rdfs/secret\n"
"    /etc/fstab:\n"
"      mds1:7000 /mnt/rdfs fuse.rdfs defaults,_netdev,secret_file=/etc/rdfs/secret 0 0\n"
"\n"
"EXIT STATUS\n"
"    0  mounted (or, with -f, unmounted cleanly)\n"
"    1  runtime error: cannot read the secret, connect or mount\n"
"    2  usage error: bad option or argument\n",
	       DEFAULT_TIMEOUT_MS, DEFAULT_MAX_THREADS);
}

/* What fuse_opt_parse() and cmdline_proc() strdup'ed into @cl. */
static void cmdline_free(struct cmdline *cl)
{
	char **strs[] = {
		&cl->attr_timeout, &cl->entry_timeout, &cl->groups_timeout, &cl->secret_file,
		&cl->config,
		&cl->log_level, &cl->log_file, &cl->timeout, &cl->max_threads, &cl->readahead,
		&cl->write_behind, &cl->rdma_mode, &cl->metrics_listen, &cl->spec, &cl->mountpoint,
	};
	size_t i;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
}

static int cmdline_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct cmdline *cl = data;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		/* [spec] mountpoint: which is which is settled once all are seen. */
		if (cl->nonopts == 0)
			cl->spec = strdup(arg);
		else if (cl->nonopts == 1)
			cl->mountpoint = strdup(arg);
		cl->nonopts++;
		return 0;
	case KEY_HELP:
		cl->help = 1;
		return 0;
	case KEY_VERSION:
		cl->version = 1;
		return 0;
	case KEY_DEBUG:
		cl->debug = 1;
		cl->foreground = 1;
		return 1;	/* libfuse's own request tracing */
	default:
		return 1;	/* a FUSE option: left for fuse_session_new() */
	}
}

/* "HOST:PORT", "HOST", "tcp://HOST:PORT" or "rdfs#HOST:PORT" -> URL and fsname. */
static int parse_spec(const char *spec, char **url, char **fsname)
{
	const char *hostport = spec;
	const char *scheme = "tcp://";
	const char *colon;
	int n;

	if (strncmp(hostport, "rdfs#", 5) == 0)
		hostport += 5;
	if (strncmp(hostport, "tcp://", 6) == 0) {
		hostport += 6;
	} else if (strncmp(hostport, "tls://", 6) == 0) {
		hostport += 6;
		scheme = "tls://";
	} else if (strncmp(hostport, "rdma://", 7) == 0) {
		hostport += 7;
		scheme = "rdma://";
	} else if (strstr(hostport, "://")) {
		return -EINVAL;		/* no other transport */
	}
	if (!*hostport || strchr(hostport, ',') || strchr(hostport, '/'))
		return -EINVAL;
	colon = strrchr(hostport, ':');
	/* A bare IPv6 address has colons but no port: "[::1]" or "::1". */
	if (!colon || (hostport[0] == '[' && strchr(colon, ']')) ||
	    (hostport[0] != '[' && strchr(hostport, ':') != colon))
		n = asprintf(url, "%s%s:" DEFAULT_PORT, scheme, hostport);
	else
		n = asprintf(url, "%s%s", scheme, hostport);
	if (n < 0)
		return -ENOMEM;
	if (asprintf(fsname, "rdfs#%s", *url + strlen(scheme)) < 0)
		return -ENOMEM;
	return 0;
}

static int parse_seconds(const char *key, const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || *out < 0) {
		fprintf(stderr, PROG ": invalid %s '%s': expected a number of seconds >= 0\n",
			key, s);
		return -EINVAL;
	}
	return 0;
}

/* Command-line values override the config file's [fuse] section. */
static int merge_cmdline(struct rdfs_config *cfg, const struct cmdline *cl)
{
	const struct {
		const char *key;
		const char *value;
	} kv[] = {
		{ "attr_timeout", cl->attr_timeout },
		{ "entry_timeout", cl->entry_timeout },
		{ "groups_timeout", cl->groups_timeout },
		{ "secret_file", cl->secret_file },
		{ "log_level", cl->log_level },
		{ "log_file", cl->log_file },
		{ "timeout", cl->timeout },
		{ "max_threads", cl->max_threads },
		{ "readahead", cl->readahead },
		{ "write_behind", cl->write_behind },
		{ "rdma_mode", cl->rdma_mode },
		{ "metrics_listen", cl->metrics_listen },
		{ "writeback_cache", cl->writeback_cache ? "true" :
				     cl->no_writeback_cache ? "false" : NULL },
		{ "direct_io", cl->direct_io ? "true" : NULL },
		{ "direct_writes", cl->direct_writes ? "true" :
				   cl->no_direct_writes ? "false" : NULL },
		{ "unstable_writes", cl->unstable_writes ? "true" : NULL },
	};

	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		if (kv[i].value && config_set(cfg, "fuse", kv[i].key, kv[i].value) < 0)
			return -ENOMEM;
	return 0;
}

static int load_config(struct rdfs_config *cfg, const struct cmdline *cl)
{
	const char *path = cl->config ? cl->config : DEFAULT_CONFIG;
	int errline = 0;
	int ret;

	ret = config_load(cfg, path, &errline);
	if (ret == -ENOENT && !cl->config)
		return 0;
	if (ret == -EINVAL) {
		fprintf(stderr, PROG ": %s:%d: syntax error\n", path, errline);
		return ret;
	}
	if (ret < 0) {
		fprintf(stderr, PROG ": cannot read config file %s: %s\n", path, strerror(-ret));
		return ret;
	}
	return 0;
}

/* The effective settings, after config file and command line. */
struct settings {
	struct rdfs_fuse fs;
	const char *secret_file;
	const char *log_file;
	int log_level;
	int64_t timeout_ms;
	int64_t max_threads;
	uint64_t readahead;
	uint64_t write_behind;
	int unstable_writes;
	int rdma_mode;
	double groups_timeout;
};

static int read_settings(const struct rdfs_config *cfg, struct settings *s)
{
	const char *v;
	int direct_io;

	v = config_get(cfg, "fuse", "attr_timeout", "1");
	if (parse_seconds("attr_timeout", v, &s->fs.attr_timeout) < 0)
		return -EINVAL;
	v = config_get(cfg, "fuse", "entry_timeout", "1");
	if (parse_seconds("entry_timeout", v, &s->fs.entry_timeout) < 0)
		return -EINVAL;
	v = config_get(cfg, "fuse", "groups_timeout", "1");
	if (parse_seconds("groups_timeout", v, &s->groups_timeout) < 0)
		return -EINVAL;
	if (config_get_bool(cfg, "fuse", "direct_io", 0, &direct_io) < 0) {
		fprintf(stderr, PROG ": invalid direct_io '%s': expected true or false\n",
			config_get(cfg, "fuse", "direct_io", ""));
		return -EINVAL;
	}
	s->fs.direct_io = direct_io;
	if (config_get_bool(cfg, "fuse", "direct_writes", 1, &s->fs.direct_writes) < 0) {
		fprintf(stderr, PROG ": invalid direct_writes '%s': expected true or false\n",
			config_get(cfg, "fuse", "direct_writes", ""));
		return -EINVAL;
	}
	if (config_get_bool(cfg, "fuse", "unstable_writes", 0, &s->unstable_writes) < 0) {
		fprintf(stderr, PROG ": invalid unstable_writes '%s': expected true or false\n",
			config_get(cfg, "fuse", "unstable_writes", ""));
		return -EINVAL;
	}
	s->fs.max_io = RDFS_FUSE_MAX_IO;
	if (config_get_int(cfg, "fuse", "timeout", DEFAULT_TIMEOUT_MS, &s->timeout_ms) < 0 ||
	    s->timeout_ms < 100 || s->timeout_ms > 86400000) {
		fprintf(stderr, PROG ": invalid timeout '%s': expected 100..86400000 milliseconds\n",
			config_get(cfg, "fuse", "timeout", ""));
		return -EINVAL;
	}
	if (config_get_int(cfg, "fuse", "max_threads", DEFAULT_MAX_THREADS,
			   &s->max_threads) < 0 || s->max_threads < 1 || s->max_threads > 1024) {
		fprintf(stderr, PROG ": invalid max_threads '%s': expected 1..1024\n",
			config_get(cfg, "fuse", "max_threads", ""));
		return -EINVAL;
	}
	if (config_get_size(cfg, "fuse", "readahead", DEFAULT_READAHEAD, &s->readahead) < 0 ||
	    s->readahead > (1ull << 30)) {
		fprintf(stderr, PROG ": invalid readahead '%s': expected a size up to 1g\n",
			config_get(cfg, "fuse", "readahead", ""));
		return -EINVAL;
	}
	if (config_get_size(cfg, "fuse", "write_behind", DEFAULT_WRITE_BEHIND,
			    &s->write_behind) < 0 || s->write_behind > (1ull << 30)) {
		fprintf(stderr, PROG ": invalid write_behind '%s': expected a size up to 1g\n",
			config_get(cfg, "fuse", "write_behind", ""));
		return -EINVAL;
	}
	if (config_get_bool(cfg, "fuse", "writeback_cache", 0, &s->fs.writeback_cache) < 0) {
		fprintf(stderr, PROG ": invalid writeback_cache '%s': expected true or false\n",
			config_get(cfg, "fuse", "writeback_cache", ""));
		return -EINVAL;
	}
	v = config_get(cfg, "fuse", "rdma_mode", "read");
	if (!strcmp(v, "read")) {
		s->rdma_mode = RDFS_RDMA_READ;
	} else if (!strcmp(v, "write")) {
		s->rdma_mode = RDFS_RDMA_WRITE;
	} else {
		fprintf(stderr, PROG ": invalid rdma_mode '%s': expected read or write\n", v);
		return -EINVAL;
	}
	v = config_get(cfg, "fuse", "log_level", "warn");
	s->log_level = log_parse_level(v);
	if (s->log_level < 0) {
		fprintf(stderr, PROG ": invalid log_level '%s': expected error, warn, info or debug\n",
			v);
		return -EINVAL;
	}
	s->secret_file = config_get(cfg, "fuse", "secret_file", DEFAULT_SECRET);
	s->log_file = config_get(cfg, "fuse", "log_file", NULL);
	return 0;
}

/* allow_other needs user_allow_other in /etc/fuse.conf when not run as root. */
static int allow_other_permitted(void)
{
	char line[256];
	FILE *f;
	int ok = 0;

	if (geteuid() == 0)
		return 1;
	f = fopen("/etc/fuse.conf", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "user_allow_other", 16) == 0 &&
		    (line[16] == '\n' || line[16] == '\0' || line[16] == ' '))
			ok = 1;
	fclose(f);
	return ok;
}

/* The options libfuse mounts with: our defaults first, so the user's win. */
static int add_mount_opts(struct fuse_args *args, const struct cmdline *cl, const char *fsname,
			  unsigned int max_read)
{
	char opt[PATH_MAX + 64];

	if (!cl->no_default_permissions && fuse_opt_add_arg(args, "-odefault_permissions") < 0)
		return -ENOMEM;
	if (!cl->no_allow_other) {
		if (allow_other_permitted()) {
			if (fuse_opt_add_arg(args, "-oallow_other") < 0)
				return -ENOMEM;
		} else {
			fprintf(stderr, PROG ": warning: not mounting with allow_other: "
				"/etc/fuse.conf lacks user_allow_other\n");
		}
	}
	snprintf(opt, sizeof(opt), "-ofsname=%s,subtype=rdfs,max_read=%u", fsname, max_read);
	if (fuse_opt_insert_arg(args, 1, opt) < 0)
		return -ENOMEM;
	return 0;
}

/* ---------------------------------------------------------------- daemon */

/*
 * Fork before any thread exists. Returns in the child with *@notify_fd set;
 * the parent waits for one status byte (or the child's death) and exits.
 */
static void daemon_fork(int *notify_fd)
{
	int pfd[2];
	pid_t pid;

	if (pipe(pfd) < 0) {
		fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
		exit(EXIT_RUNTIME);
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
		exit(EXIT_RUNTIME);
	}
	if (pid > 0) {
		unsigned char status;
		int wst;

		close(pfd[1]);
		if (read(pfd[0], &status, 1) == 1)
			_exit(status);
		if (waitpid(pid, &wst, 0) == pid && WIFEXITED(wst))
			_exit(WEXITSTATUS(wst) ? WEXITSTATUS(wst) : EXIT_RUNTIME);
		_exit(EXIT_RUNTIME);
	}
	close(pfd[0]);
	setsid();
	*notify_fd = pfd[1];
}

/* The mount is up: detach from the terminal and release the waiting parent. */
static void daemon_ready(int notify_fd)
{
	unsigned char status = EXIT_OK;
	int fd;

	if (chdir("/") < 0)
		log_warn(1300001, "chdir /: %s", strerror(errno));
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	if (write(notify_fd, &status, 1) != 1)
		log_warn(1300002, "cannot notify the parent process: %s", strerror(errno));
	close(notify_fd);
}

/* ---------------------------------------------------------------- main */

static int check_mountpoint(const char *path, char *resolved)
{
	struct stat st;

	if (!realpath(path, resolved) || stat(resolved, &st) < 0) {
		int err = errno;

		fprintf(stderr, PROG ": bad mount point %s: %s%s\n", path, strerror(err),
			err == ENOTCONN ? " (a stale mount: fusermount3 -u it first)" : "");
		return -err;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, PROG ": bad mount point %s: Not a directory\n", path);
		return -ENOTDIR;
	}
	return 0;
}

static const char *connect_error(int err)
{
	switch (err) {
	case -EACCES:
		return "authentication failed (wrong secret_file?)";
	case -ECONNREFUSED:
		return "connection refused (is rdfs-metaserver running?)";
	case -ETIMEDOUT:
		return "connection timed out";
	default:
		return strerror(-err);
	}
}

/*
 * Serve metrics (fuse_metrics.h) when an address is set: [fuse] metrics_listen
 * (or -o metrics_listen=), else the [metrics] listen the servers share. After
 * the fork (the HTTP server is a thread) and before the parent is released,
 * so a failure reaches the terminal. 0; -EINVAL for an address of our own
 * that does not parse, another -errno when it cannot be served. The shared
 * address may be held by a server or another mount on this host: that only
 * costs the metrics.
 */
static int metrics_start(const struct rdfs_config *cfg, struct rdfs_client *c,
			 struct metrics **metrics, struct metrics_http **http)
{
	const char *own = config_get(cfg, "fuse", "metrics_listen", NULL);
	const char *listen = own && *own ? own : config_get(cfg, "metrics", "listen", NULL);
	int ret;

	if (!listen || !*listen)
		return 0;
	*metrics = metrics_new();
	if (!*metrics || fuse_metrics_register(*metrics, c)) {
		fprintf(stderr, PROG ": cannot set up metrics: out of memory\n");
		return -ENOMEM;
	}
	ret = metrics_http_start(*metrics, listen, http);	/* logged there */
	if (ret && !(own && *own)) {
		log_warn(1300012, "no metrics: [metrics] listen %s cannot be served; give this mount "
			 "its own metrics_listen", listen);
		return 0;
	}
	if (ret)
		return ret;
	log_info(1300013, "metrics at %s", metrics_http_url(*http));
	return 0;
}

static int run_session(struct fuse_session *se, const struct cmdline *cl,
		       const struct settings *s)
{
	return session_loop_run(se, cl->single_thread ? 1 : (unsigned int)s->max_threads);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct rdfs_client_opts copts;
	struct cmdline cl;
	struct settings s;
	struct rdfs_config *cfg;
	struct fuse_session *se = NULL;
	struct metrics *metrics = NULL;
	struct metrics_http *http = NULL;
	char mountpoint[PATH_MAX];
	char *url = NULL, *fsname = NULL;
	const char *spec = NULL;
	int notify_fd = -1;
	int status = EXIT_RUNTIME;
	int ret;

	memset(&cl, 0, sizeof(cl));
	memset(&s, 0, sizeof(s));
	if (fuse_opt_parse(&args, &cl, cmdline_spec, cmdline_proc) < 0) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (cl.help) {
		help();
		return EXIT_OK;
	}
	if (cl.version) {
		printf(PROG " " RDFS_VERSION " (libfuse %s)\n", fuse_pkgversion());
		return EXIT_OK;
	}
	if (cl.nonopts == 1) {
		cl.mountpoint = cl.spec;
		cl.spec = NULL;
	} else if (cl.nonopts != 2) {
		fprintf(stderr, PROG ": %s\n", cl.nonopts ? "too many arguments" :
			"missing HOST:PORT and MOUNTPOINT");
		usage(stderr);
		return EXIT_USAGE;
	}

	cfg = config_new();
	if (!cfg) {
		fprintf(stderr, PROG ": out of memory\n");
		return EXIT_RUNTIME;
	}
	if (load_config(cfg, &cl) < 0 || merge_cmdline(cfg, &cl) < 0 ||
	    read_settings(cfg, &s) < 0) {
		status = EXIT_USAGE;
		goto out_config;
	}
	spec = cl.spec ? cl.spec : config_get(cfg, "fuse", "metaserver", NULL);
	if (!spec) {
		fprintf(stderr, PROG ": no metaserver: give HOST:PORT or set [cluster] metaserver\n");
		usage(stderr);
		status = EXIT_USAGE;
		goto out_config;
	}
	if (parse_spec(spec, &url, &fsname) < 0) {
		fprintf(stderr, PROG ": invalid metaserver address '%s': expected "
			"[tcp://|tls://|rdma://]HOST[:PORT]\n", spec);
		status = EXIT_USAGE;
		goto out_config;
	}
	if (check_mountpoint(cl.mountpoint, mountpoint) < 0) {
		status = EXIT_USAGE;
		goto out_config;
	}

	log_init(PROG, s.log_level);
	if (s.log_file && (ret = log_open_file(s.log_file)) < 0) {
		fprintf(stderr, PROG ": cannot open log file %s: %s\n", s.log_file,
			strerror(-ret));
		goto out_config;
	}

	memset(&copts, 0, sizeof(copts));
	ret = rdfs_client_opts_load_key(&copts, s.secret_file);
	if (ret < 0) {
		fprintf(stderr, PROG ": cannot load secret file %s: %s\n", s.secret_file,
			rdfs_key_error(ret));
		goto out_config;
	}
	s.fs.default_permissions = !cl.no_default_permissions;
	s.fs.acl = !cl.noacl;
	s.fs.splice = cl.splice;
	/*
	 * A write-only open's write first drops other opens' cached pages, which
	 * writes a dirty mapped page back through us: one thread cannot serve
	 * both.
	 */
	if (cl.single_thread)
		s.fs.direct_writes = 0;
	s.fs.max_read = RDFS_FUSE_MAX_IO;
	if (cl.max_read)
		s.fs.max_read = cl.max_read < 4096 ? 4096 :
				cl.max_read > RDFS_FUSE_MAX_IO ? RDFS_FUSE_MAX_IO : cl.max_read;
	if (add_mount_opts(&args, &cl, fsname, s.fs.max_read) < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out_config;
	}

	/* Before forking and connecting, so bad FUSE options fail fast. */
	se = fuse_session_new(&args, &rdfs_fuse_ops, sizeof(rdfs_fuse_ops), &s.fs);
	if (!se) {
		fprintf(stderr, PROG ": invalid FUSE options\n");
		status = EXIT_USAGE;
		goto out_config;
	}
	s.fs.se = se;

	if (!cl.foreground)
		daemon_fork(&notify_fd);

	copts.metaserver_url = url;
	copts.timeout_ms = (int)s.timeout_ms;
	copts.write_stable = !s.unstable_writes;
	/* the kernel reads ahead for FUSE (readahead=); the core's would only add a copy */
	copts.readahead_kb = -1;
	copts.write_behind_kb = (int)(s.write_behind >> 10);
	copts.rdma_mode = s.rdma_mode;
	/*
	 * The kernel asks for a directory's attributes right after each name we
	 * add or remove there (its permission check): answer that once from the
	 * change's reply, as if the kernel had cached it for attr_timeout.
	 */
	copts.dir_attr_ms = (int)(s.fs.attr_timeout * 1000);
	ret = rdfs_client_open(&copts, &s.fs.client);
	memset(&copts.secret, 0, sizeof(copts.secret));
	if (ret < 0) {
		fprintf(stderr, PROG ": cannot connect to metaserver %s: %s\n", url,
			connect_error(ret));
		goto out_session;
	}

	ret = metrics_start(cfg, s.fs.client, &metrics, &http);
	if (ret < 0) {
		if (ret == -EINVAL)
			status = EXIT_USAGE;
		goto out_client;
	}
	if (fuse_set_signal_handlers(se) < 0) {
		fprintf(stderr, PROG ": cannot install signal handlers\n");
		goto out_client;
	}
	if (fuse_session_mount(se, mountpoint) < 0) {
		fprintf(stderr, PROG ": cannot mount on %s\n", mountpoint);
		goto out_signals;
	}
	if (notify_fd >= 0)
		daemon_ready(notify_fd);
	notify_fd = -1;
	log_info(1300003, "mounted %s on %s", url, mountpoint);
	if (s.readahead && (ret = readahead_set_async(mountpoint, s.readahead >> 10)) < 0)
		log_warn(1300004, "cannot start the read-ahead thread: %s", strerror(-ret));

	groups_cache_set_timeout(s.groups_timeout);
	/* A positive return is the signal that ended the loop: a clean unmount. */
	ret = run_session(se, &cl, &s);
	status = ret < 0 ? EXIT_RUNTIME : EXIT_OK;
	if (ret < 0)
		log_error(1300005, "session loop ended: %s", strerror(-ret));
	fuse_session_unmount(se);
	log_info(1300006, "unmounted %s", mountpoint);
out_signals:
	fuse_remove_signal_handlers(se);
out_client:
	/* the endpoint's collectors read the client: it goes first */
	metrics_http_stop(http);
	rdfs_client_close(s.fs.client);
out_session:
	fuse_session_destroy(se);
out_config:
	/* The waiting parent takes a closed pipe as failure and reports our status. */
	config_free(cfg);
	metrics_free(metrics);
	fuse_opt_free_args(&args);
	cmdline_free(&cl);
	free(url);
	free(fsname);
	return status;
}
