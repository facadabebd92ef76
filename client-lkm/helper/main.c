// SPDX-License-Identifier: MIT
/*
 * main.c - rdfs-lkm-helper: connect to the metaserver, open /dev/rdfs, mount
 * the kernel file system on it and serve it until it is unmounted.
 * mount.rdfs runs it; see --help.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "helper.h"
#include "log.h"
#include "rdfs_dev_abi.h"

#define PROG			"rdfs-lkm-helper"
#define DEFAULT_CONFIG		"/etc/rdfs/rdfs.conf"
#define DEFAULT_SECRET		"/etc/rdfs/secret"
#define DEFAULT_PORT		"7000"
#define DEFAULT_TIMEOUT_MS	30000

static const char usage_text[] =
"NAME\n"
"    " PROG " - the user-space helper of the rdfs kernel client\n"
"\n"
"SYNOPSIS\n"
"    " PROG " [-f] [-o OPTION[,OPTION...]] [tcp://|tls://]HOST[:PORT] MOUNTPOINT\n"
"    mount.rdfs HOST:PORT MOUNTPOINT [-o OPTIONS]   (what mount -t rdfs runs)\n"
"\n"
"DESCRIPTION\n"
"    Connects to the rdfs metaserver at HOST:PORT (port " DEFAULT_PORT " if omitted),\n"
"    authenticates with the cluster secret, opens /dev/rdfs (load rdfs.ko first)\n"
"    and mounts the kernel file system `rdfs` on MOUNTPOINT with the device's\n"
"    file descriptor in the mount data. It then answers the module's namespace,\n"
"    layout and connect requests until the file system is unmounted, and exits.\n"
"    File data does not pass through it: the module moves it between the page\n"
"    cache and the I/O servers on sockets this helper authenticated. With\n"
"    tls:// (the metaserver's, and I/O servers that advertise tls://), the\n"
"    helper runs the TLS 1.3 handshake and hands the traffic keys to kernel TLS\n"
"    (the tls module): the module's data is encrypted, the key stays here.\n"
"    Unless -f is given it returns once the mount is up (errors are printed\n"
"    first). If the helper dies, the mount's operations fail with EIO and\n"
"    umount still works.\n"
"\n"
"OPTIONS\n"
"    -f                    stay in the foreground\n"
"    -h, --help            print this help and exit\n"
"    -s, -n, -v            accepted and ignored (mount(8) passes them)\n"
"\n"
"  helper options (-o NAME=VALUE; override the same key of [lkm] in the config):\n"
"    config=FILE           config file (default " DEFAULT_CONFIG "; a missing default\n"
"                          file is fine, a missing given one is an error)\n"
"    secret_file=FILE      cluster secret, mode 0600 (default " DEFAULT_SECRET ")\n"
"    timeout=MS            milliseconds before a metaserver request fails with\n"
"                          EIO (default 30000)\n"
"    log_level=LEVEL       error, warn, info or debug (default warn)\n"
"    log_file=FILE         append log lines to FILE (default: stderr, discarded\n"
"                          once daemonized)\n"
"\n"
"  kernel options (passed to the module, same meaning as rdfs-fuse's):\n"
"    attr_timeout=SEC      seconds attributes are cached (default 1)\n"
"    entry_timeout=SEC     seconds name lookups are cached (default 1)\n"
"    readahead=SIZE        read-ahead window of the mount (default 4m)\n"
"    transport=tcp|rdma    data path to the I/O servers: kernel TCP sockets, or\n"
"                          the module's own RDMA queue pairs to I/O servers that\n"
"                          advertise rdma:// (default tcp; this helper always\n"
"                          reaches the metaserver over tcp)\n"
"    rdma_mode=write|read  with rdma: servers RDMA-WRITE into the page cache, or\n"
"                          the module RDMA-READs (default write)\n"
"    direct_io             every read(2) and write(2) as with O_DIRECT: no page\n"
"                          cache for them (mmap still uses it)\n"
"    noacl                 no POSIX ACLs through this mount (system.posix_acl_*\n"
"                          get EOPNOTSUPP, new files take the umask); the\n"
"                          metaserver still enforces the ACLs set elsewhere\n"
"\n"
"  mount flags: ro, rw, nosuid, suid, nodev, dev, noexec, exec, sync, dirsync,\n"
"    noatime, relatime; defaults, auto, noauto, _netdev, nofail, user are ignored.\n"
"\n"
"CONFIG FILE\n"
"    [cluster]  metaserver = tcp://HOST:PORT, secret_file\n"
"    [lkm]      secret_file, timeout, log_level, log_file\n"
"\n"
"EXAMPLES\n"
"    insmod build/lkm/rdfs.ko\n"
"    " PROG " -o secret_file=/tmp/lc/secret 127.0.0.1:7300 /mnt/rdfs\n"
"    mount -t rdfs -o secret_file=/etc/rdfs/secret mds1:7000 /mnt/rdfs\n"
"    /etc/fstab:\n"
"      mds1:7000 /mnt/rdfs rdfs defaults,_netdev,secret_file=/etc/rdfs/secret 0 0\n"
"\n"
"EXIT STATUS\n"
"    0  mounted (and, with -f, later unmounted)\n"
"    1  runtime error: cannot read the secret, connect, open /dev/rdfs or mount\n"
"    2  usage error\n";

struct mount_flag {
	const char *name;
	unsigned long set;
	unsigned long clear;
};

static const struct mount_flag mount_flags[] = {
	{ "ro", MS_RDONLY, 0 }, { "rw", 0, MS_RDONLY },
	{ "nosuid", MS_NOSUID, 0 }, { "suid", 0, MS_NOSUID },
	{ "nodev", MS_NODEV, 0 }, { "dev", 0, MS_NODEV },
	{ "noexec", MS_NOEXEC, 0 }, { "exec", 0, MS_NOEXEC },
	{ "sync", MS_SYNCHRONOUS, 0 }, { "async", 0, MS_SYNCHRONOUS },
	{ "dirsync", MS_DIRSYNC, 0 }, { "noatime", MS_NOATIME, 0 },
	{ "relatime", MS_RELATIME, 0 }, { "defaults", 0, 0 }, { "auto", 0, 0 },
	{ "noauto", 0, 0 }, { "_netdev", 0, 0 }, { "nofail", 0, 0 }, { "user", 0, 0 },
	{ "nouser", 0, 0 },
};

static const char *const kernel_opts[] = {
	"attr_timeout", "entry_timeout", "readahead", "transport", "rdma_mode", "direct_io",
	"noacl",
};

static const char *const helper_opts[] = {
	"config", "secret_file", "timeout", "log_level", "log_file",
};

struct cmdline {
	int foreground;
	const char *spec;
	const char *mountpoint;
	unsigned long mflags;
	char kdata[512];		/* options for the module */
	struct rdfs_config *cl;		/* helper options given with -o */
};

static int is_one_of(const char *key, size_t klen, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strlen(list[i]) == klen && !strncmp(list[i], key, klen))
			return 1;
	return 0;
}

static int parse_o(struct cmdline *cl, char *opts)
{
	char *tok, *save = NULL;
	size_t i;

	for (tok = strtok_r(opts, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		size_t klen = eq ? (size_t)(eq - tok) : strlen(tok);

		if (is_one_of(tok, klen, kernel_opts, sizeof(kernel_opts) / sizeof(*kernel_opts))) {
			if (strlen(cl->kdata) + strlen(tok) + 2 > sizeof(cl->kdata))
				return -1;
			strcat(cl->kdata, ",");
			strcat(cl->kdata, tok);
			continue;
		}
		if (eq && is_one_of(tok, klen, helper_opts, sizeof(helper_opts) / sizeof(*helper_opts))) {
			*eq = '\0';
			config_set(cl->cl, "lkm", tok, eq + 1);
			continue;
		}
		for (i = 0; i < sizeof(mount_flags) / sizeof(*mount_flags); i++) {
			if (!strcmp(tok, mount_flags[i].name)) {
				cl->mflags |= mount_flags[i].set;
				cl->mflags &= ~mount_flags[i].clear;
				break;
			}
		}
		if (i == sizeof(mount_flags) / sizeof(*mount_flags)) {
			fprintf(stderr, PROG ": unknown option %s (see --help)\n", tok);
			return -1;
		}
	}
	return 0;
}

/* [tcp://|tls://]HOST[:PORT] -> SCHEME://HOST:PORT (tcp by default) */
static int spec_to_url(const char *spec, char *url, size_t size)
{
	const char *scheme = !strncmp(spec, "tls://", 6) ? "tls" : "tcp";
	const char *host = strncmp(spec, "tcp://", 6) && strncmp(spec, "tls://", 6) ? spec :
			   spec + 6;
	const char *colon = strrchr(host, ':');
	int n;

	if (!*host)
		return -1;
	if (colon && !strchr(host, ']') && strchr(host, ':') != colon)
		colon = NULL;	/* a bare IPv6 address */
	n = snprintf(url, size, "%s://%s%s", scheme, host, colon ? "" : ":" DEFAULT_PORT);
	return n > 0 && (size_t)n < size ? 0 : -1;
}

static void report(int fd, int status)
{
	unsigned char b = status;

	if (fd < 0)
		return;
	/* a parent that died has nobody to tell */
	(void)!write(fd, &b, 1);
	close(fd);
}

/* Fork; the parent returns the child's startup status, the child gets the pipe. */
static int daemonize(int *report_fd)
{
	int p[2];
	unsigned char b = 1;
	pid_t pid;

	if (pipe(p))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &b, 1) != 1)
			b = 1;
		exit(b);
	}
	close(p[0]);
	setsid();
	*report_fd = p[1];
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct cmdline cl = { 0 };
	struct rdfs_client_opts copts = { 0 };
	struct helper h = { .dev_fd = -1 };
	struct rdfs_config *cfg;
	const char *cfgpath, *v, *secret;
	char url[300], data[600];
	int64_t timeout;
	int opt, err, level, report_fd = -1, errline = 0;

	cl.cl = config_new();
	cfg = config_new();
	if (!cl.cl || !cfg)
		return 1;
	while ((opt = getopt_long(argc, argv, "+fhsnvo:", longopts, NULL)) != -1 ||
	       optind < argc) {
		if (opt == -1) {
			/* mount(8) puts options after the operands */
			if (!cl.spec)
				cl.spec = argv[optind];
			else if (!cl.mountpoint)
				cl.mountpoint = argv[optind];
			else {
				fprintf(stderr, PROG ": too many arguments (see --help)\n");
				return 2;
			}
			optind++;
			continue;
		}
		switch (opt) {
		case 'f':
			cl.foreground = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 's':
		case 'n':
		case 'v':
			break;
		case 'o':
			if (parse_o(&cl, optarg))
				return 2;
			break;
		default:
			fprintf(stderr, PROG ": see --help\n");
			return 2;
		}
	}

	cfgpath = config_get(cl.cl, "lkm", "config", NULL);
	err = config_load(cfg, cfgpath ? cfgpath : DEFAULT_CONFIG, &errline);
	if (err && (cfgpath || err != -ENOENT)) {
		fprintf(stderr, PROG ": config %s: %s (line %d)\n",
			cfgpath ? cfgpath : DEFAULT_CONFIG, strerror(-err), errline);
		return 2;
	}
	for (opt = 0; opt < (int)(sizeof(helper_opts) / sizeof(*helper_opts)); opt++) {
		v = config_get(cl.cl, "lkm", helper_opts[opt], NULL);
		if (v)
			config_set(cfg, "lkm", helper_opts[opt], v);
	}
	if (!cl.spec)
		cl.spec = config_get(cfg, "cluster", "metaserver", NULL);
	if (!cl.spec || !cl.mountpoint || spec_to_url(cl.spec, url, sizeof(url))) {
		fprintf(stderr, PROG ": need HOST[:PORT] and MOUNTPOINT (see --help)\n");
		return 2;
	}
	if (config_get_int(cfg, "lkm", "timeout", DEFAULT_TIMEOUT_MS, &timeout) < 0 ||
	    timeout <= 0) {
		fprintf(stderr, PROG ": bad timeout %s\n", config_get(cfg, "lkm", "timeout", ""));
		return 2;
	}
	level = log_parse_level(config_get(cfg, "lkm", "log_level", "warn"));
	if (level < 0) {
		fprintf(stderr, PROG ": bad log_level %s\n", config_get(cfg, "lkm", "log_level", ""));
		return 2;
	}
	log_init(PROG, level);
	v = config_get(cfg, "lkm", "log_file", NULL);
	if (v && log_open_file(v) < 0) {
		fprintf(stderr, PROG ": cannot open log file %s\n", v);
		return 1;
	}
	secret = config_get(cfg, "lkm", "secret_file",
			    config_get(cfg, "cluster", "secret_file", DEFAULT_SECRET));
	err = rdfs_client_opts_load_key(&copts, secret);
	if (err) {
		fprintf(stderr, PROG ": cannot load secret file %s: %s\n", secret,
			rdfs_key_error(err));
		return 1;
	}

	if (!cl.foreground && daemonize(&report_fd))
		return 1;
	h.timeout_ms = timeout;
	pthread_mutex_init(&h.lock, NULL);
	h.dev_fd = open("/dev/" RDFS_DEV_NAME, O_RDWR | O_CLOEXEC);
	if (h.dev_fd < 0) {
		fprintf(stderr, PROG ": cannot open /dev/" RDFS_DEV_NAME ": %s%s\n", strerror(errno),
			errno == ENOENT ? " (load rdfs.ko first)" : "");
		report(report_fd, 1);
		return 1;
	}
	copts.metaserver_url = url;
	copts.timeout_ms = timeout;
	err = rdfs_client_open(&copts, &h.client);
	memset(&copts.secret, 0, sizeof(copts.secret));
	if (err) {
		fprintf(stderr, PROG ": cannot connect to %s: %s\n", url,
			err == -EACCES ? "authentication failed (wrong secret_file?)" : strerror(-err));
		report(report_fd, 1);
		return 1;
	}
	err = helper_start(&h);
	if (err) {
		fprintf(stderr, PROG ": cannot start threads: %s\n", strerror(-err));
		report(report_fd, 1);
		return 1;
	}
	snprintf(data, sizeof(data), "fd=%d%s", h.dev_fd, cl.kdata);
	if (mount(cl.spec, cl.mountpoint, "rdfs", cl.mflags, data)) {
		fprintf(stderr, PROG ": mount %s on %s: %s\n", cl.spec, cl.mountpoint,
			strerror(errno));
		report(report_fd, 1);
		return 1;
	}
	if (report_fd >= 0) {
		int null = open("/dev/null", O_RDWR);

		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			if (!v)
				dup2(null, 2);
			close(null);
		}
		report(report_fd, 0);
	}
	err = helper_join(&h);
	rdfs_client_close(h.client);
	config_free(cfg);
	config_free(cl.cl);
	return err ? 1 : 0;
}
