// SPDX-License-Identifier: MIT
/*
 * main.c - the `rdfs` command-line tool: global options, configuration, the
 * connection to the metaserver, and dispatch to one command per file.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "tool.h"

#define DEFAULT_CONFIG		"/etc/rdfs/rdfs.conf"
#define DEFAULT_METASERVER	"tcp://127.0.0.1:7000"
#define DEFAULT_SECRET		"/etc/rdfs/secret"
#define DEFAULT_CAP_KEY		"/etc/rdfs/cap.key"
#define DEFAULT_TIMEOUT_MS	10000

static const struct tool_cmd *const commands[] = {
	&tool_cmd_status, &tool_cmd_df, &tool_cmd_ls, &tool_cmd_stat, &tool_cmd_layout,
	&tool_cmd_getcopies, &tool_cmd_setcopies, &tool_cmd_drain, &tool_cmd_rebalance,
	&tool_cmd_node, &tool_cmd_fsck, &tool_cmd_quota, &tool_cmd_project, &tool_cmd_metrics,
	&tool_cmd_top, &tool_cmd_getstripe, &tool_cmd_setstripe, &tool_cmd_du, &tool_cmd_find,
	&tool_cmd_servers, NULL,
};

static void usage(FILE *out)
{
	int i;

	fprintf(out,
"NAME\n"
"    rdfs - inspect an rdfs file system: I/O servers, space, files and layouts\n"
"\n"
"SYNOPSIS\n"
"    rdfs [--config FILE] [--metaserver URL] [--secret-file FILE]\n"
"         [--cap-key-file FILE] [--admin] [--timeout MS] [--log-level LEVEL]\n"
"         COMMAND [ARGS...]\n"
"    rdfs COMMAND --help\n"
"    rdfs help [COMMAND]\n"
"\n"
"DESCRIPTION\n"
"    rdfs talks to the metaserver of an rdfs cluster (authenticating with the\n"
"    cluster secret or a node key, as a client; `node`, `fsck`, `drain`,\n"
"    `rebalance` and the changes of `servers` with the server key) and prints\n"
"    what it asks. Paths are paths inside the rdfs namespace, starting at its\n"
"    root (/dir/file), not paths through a FUSE mount. `rdfs help COMMAND`\n"
"    prints the manual page of COMMAND (rdfs-COMMAND(1)).\n"
"\n"
"COMMANDS\n");
	for (i = 0; commands[i]; i++) {
		if (strlen(commands[i]->args) > 18)
			fprintf(out, "    %-9s %s\n    %-28s %s\n", commands[i]->name,
				commands[i]->args, "", commands[i]->summary);
		else
			fprintf(out, "    %-9s %-18s %s\n", commands[i]->name, commands[i]->args,
				commands[i]->summary);
	}
	fprintf(out,
"\n"
"OPTIONS\n"
"    --config FILE\n"
"        Read the configuration from FILE (default " DEFAULT_CONFIG "; a\n"
"        missing default file is fine, a missing FILE given here is an error).\n"
"    --metaserver URL\n"
"        The metaserver (default: [cluster] metaserver, else " DEFAULT_METASERVER ").\n"
"    --secret-file FILE\n"
"        The cluster secret or this node's key, mode 0600 (default: [cluster]\n"
"        secret_file, else " DEFAULT_SECRET ").\n"
"    --cap-key-file FILE\n"
"        The capability key, for `node` and `fsck` (default: [cluster] cap_key_file,\n"
"        else " DEFAULT_CAP_KEY "): server hosts only.\n"
"    --admin\n"
"        Connect with the server key (from the capability key) whatever the\n"
"        command: the metaserver's administrator, never squashed, for\n"
"        `quota set`, `quota report` and `project set` where root is squashed.\n"
"    --timeout MS\n"
"        Give up on a metaserver request after MS milliseconds (default:\n"
"        [rdfs] timeout, else %d).\n"
"    --log-level LEVEL\n"
"        error, warn, info or debug (default: [rdfs] log_level, else warn).\n"
"    -h, --help\n"
"        Print this help.\n"
"\n"
"CONFIGURATION\n"
"    An INI file; the tool reads section [rdfs], then [cluster]:\n"
"        [cluster]\n"
"        metaserver  = tcp://mds1:7000\n"
"        secret_file = /etc/rdfs/secret\n"
"        [rdfs]\n"
"        timeout     = 10000\n"
"        log_level   = warn\n"
"    Command-line options override the file.\n"
"\n"
"EXAMPLES\n"
"    rdfs status\n"
"    rdfs --metaserver tcp://127.0.0.1:7000 --secret-file ./secret df\n"
"    rdfs ls -l /data\n"
"    rdfs layout /data/big.bin\n"
"    rdfs setcopies 2 /data/results\n"
"    rdfs quota set -u alice --block-hard 1T\n"
"\n"
"EXIT STATUS\n"
"    0  success\n"
"    1  the operation failed (metaserver unreachable, secret unreadable or\n"
"       rejected, no such file, ...)\n"
"    2  bad command line or configuration\n"
"\n"
"SEE ALSO\n",
		DEFAULT_TIMEOUT_MS);
	/* one manual page per command (rdfs help COMMAND, installed as rdfs-COMMAND(1)) */
	for (i = 0; commands[i]; i++)
		fprintf(out, "%srdfs-%s(1)", !i ? "    " : i % 5 ? ", " : ",\n    ",
			commands[i]->name);
	fprintf(out, "\n");
}

/*
 * `rdfs help COMMAND`: COMMAND's --help laid out as a manual page (NAME,
 * SYNOPSIS from its usage lines, DESCRIPTION from the rest), which `make
 * man` turns into rdfs-COMMAND(1) with deploy/help2roff.
 */
static void print_man(const struct tool_cmd *cmd)
{
	const char *p = cmd->help;

	printf("NAME\n    rdfs-%s - %s\n\nSYNOPSIS\n", cmd->name, cmd->summary);
	/* the usage lines, up to the first blank line */
	while (*p && *p != '\n') {
		const char *eol = strchrnul(p, '\n'), *l = p;

		if (!strncmp(l, "usage: ", 7))
			l += 7;
		else
			while (*l == ' ')
				l++;
		printf("    %s%.*s\n", *l == '[' ? "    " : "", (int)(eol - l), l);
		p = *eol ? eol + 1 : eol;
	}
	printf("\nDESCRIPTION\n");
	while (*p == '\n')
		p++;
	while (*p) {
		const char *eol = strchrnul(p, '\n');

		printf("%s%.*s\n", eol > p ? "    " : "", (int)(eol - p), p);
		p = *eol ? eol + 1 : eol;
	}
	printf("\nSEE ALSO\n    rdfs(1)\n");
}

static const struct tool_cmd *find_command(const char *name)
{
	int i;

	for (i = 0; commands[i]; i++)
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	return NULL;
}

static void tool_cred(struct rdfs_cred *cr)
{
	gid_t groups[RDFS_MAX_GROUPS];
	int n, i;

	memset(cr, 0, sizeof(*cr));
	cr->uid = getuid();
	cr->gid = getgid();
	n = getgroups(RDFS_MAX_GROUPS, groups);
	for (i = 0; i < n; i++)
		cr->groups[i] = groups[i];
	cr->ngroups = n > 0 ? n : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "metaserver", required_argument, NULL, 'm' },
		{ "secret-file", required_argument, NULL, 's' },
		{ "cap-key-file", required_argument, NULL, 'k' },
		{ "timeout", required_argument, NULL, 't' },
		{ "log-level", required_argument, NULL, 'L' },
		{ "admin", no_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rdfs_client_opts copts = { 0 };
	const char *config_path = NULL, *secret_path, *level_s;
	const struct tool_cmd *cmd;
	struct rdfs_config *cfg;
	struct tool t = { 0 };
	int64_t timeout;
	int opt, ret, errline = 0, level, server_key, admin = 0;

	cfg = config_new();
	if (!cfg) {
		fprintf(stderr, "rdfs: out of memory\n");
		return TOOL_FAIL;
	}
	/* "+": options after COMMAND belong to the command */
	while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config_path = optarg;
			break;
		case 'm':
			config_set(cfg, "rdfs", "metaserver", optarg);
			break;
		case 's':
			config_set(cfg, "rdfs", "secret_file", optarg);
			break;
		case 'k':
			config_set(cfg, "rdfs", "cap_key_file", optarg);
			break;
		case 't':
			config_set(cfg, "rdfs", "timeout", optarg);
			break;
		case 'L':
			config_set(cfg, "rdfs", "log_level", optarg);
			break;
		case 'A':
			admin = 1;
			break;
		case 'h':
			usage(stdout);
			config_free(cfg);
			return TOOL_OK;
		default:
			fprintf(stderr, "Try 'rdfs --help'.\n");
			config_free(cfg);
			return TOOL_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "rdfs: missing COMMAND\nTry 'rdfs --help'.\n");
		config_free(cfg);
		return TOOL_USAGE;
	}
	if (strcmp(argv[optind], "help") == 0) {
		cmd = optind + 1 < argc ? find_command(argv[optind + 1]) : NULL;
		config_free(cfg);
		if (optind + 1 == argc) {
			usage(stdout);
			return TOOL_OK;
		}
		if (!cmd || optind + 2 != argc) {
			fprintf(stderr, "rdfs help: expected one COMMAND\nTry 'rdfs --help'.\n");
			return TOOL_USAGE;
		}
		print_man(cmd);
		return TOOL_OK;
	}
	cmd = find_command(argv[optind]);
	if (!cmd) {
		fprintf(stderr, "rdfs: unknown command '%s'\nTry 'rdfs --help'.\n", argv[optind]);
		config_free(cfg);
		return TOOL_USAGE;
	}
	/* `rdfs CMD --help` works without a cluster */
	for (int i = optind + 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || (strcmp(argv[i], "-h") == 0 && !cmd->own_h)) {
			printf("%s", cmd->help);
			config_free(cfg);
			return TOOL_OK;
		}
	}

	/* command-line values were set above; the file fills in the rest */
	{
		struct rdfs_config *file = config_new();
		const char *keys[] = { "metaserver", "secret_file", "cap_key_file", "timeout",
				       "log_level" };

		ret = config_load(file, config_path ? config_path : DEFAULT_CONFIG, &errline);
		if (ret == -ENOENT && !config_path) {
			ret = 0;
		} else if (ret == -EINVAL) {
			fprintf(stderr, "rdfs: %s:%d: syntax error\n",
				config_path ? config_path : DEFAULT_CONFIG, errline);
		} else if (ret) {
			fprintf(stderr, "rdfs: cannot read config %s: %s\n",
				config_path ? config_path : DEFAULT_CONFIG, strerror(-ret));
		}
		if (ret) {
			config_free(file);
			config_free(cfg);
			return TOOL_USAGE;
		}
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			const char *v = config_get(cfg, "rdfs", keys[i], NULL);

			if (v)
				config_set(file, "rdfs", keys[i], v);
		}
		config_free(cfg);
		cfg = file;
	}

	level_s = config_get(cfg, "rdfs", "log_level", "warn");
	level = log_parse_level(level_s);
	if (level < 0) {
		fprintf(stderr, "rdfs: bad log level '%s' (error, warn, info, debug)\n", level_s);
		config_free(cfg);
		return TOOL_USAGE;
	}
	log_init("rdfs", level);
	if (config_get_int(cfg, "rdfs", "timeout", DEFAULT_TIMEOUT_MS, &timeout) || timeout <= 0 ||
	    timeout > 3600000) {
		fprintf(stderr, "rdfs: bad timeout '%s' (milliseconds)\n",
			config_get(cfg, "rdfs", "timeout", ""));
		config_free(cfg);
		return TOOL_USAGE;
	}
	t.metaserver = config_get(cfg, "rdfs", "metaserver", DEFAULT_METASERVER);
	t.cfg = cfg;
	t.timeout_ms = (int)timeout;
	if (cmd->offline) {
		ret = cmd->run(&t, argc - optind, argv + optind);
		config_free(cfg);
		return ret;
	}
	secret_path = config_get(cfg, "rdfs", "secret_file", DEFAULT_SECRET);
	copts.role = "tool";
	server_key = admin || cmd->server_key ||
		     (cmd->server_key_for && cmd->server_key_for(argc - optind, argv + optind));
	if (server_key) {
		struct auth_identity id;

		secret_path = config_get(cfg, "rdfs", "cap_key_file", DEFAULT_CAP_KEY);
		ret = auth_secret_load(secret_path, &t.cap_key);
		if (!ret) {
			auth_identity_server(&t.cap_key, &id);
			copts.secret = id.key;
			copts.role = "server";
			memset(&id, 0, sizeof(id));
		}
	} else {
		ret = rdfs_client_opts_load_key(&copts, secret_path);
	}
	if (ret) {
		fprintf(stderr, "rdfs: cannot load %s %s: %s\n",
			server_key ? "capability key" : "secret file", secret_path,
			rdfs_key_error(ret));
		config_free(cfg);
		return TOOL_FAIL;
	}
	copts.metaserver_url = t.metaserver;
	copts.timeout_ms = (int)timeout;
	copts.write_stable = 1;
	copts.reconnect_ms = (int)timeout;
	ret = rdfs_client_open(&copts, &t.client);
	if (ret) {
		if (ret == -EACCES)
			fprintf(stderr, "rdfs: metaserver %s rejected the %s from %s\n",
				t.metaserver,
				server_key ? "server key derived" : "key", secret_path);
		else
			fprintf(stderr, "rdfs: cannot reach metaserver %s: %s\n", t.metaserver,
				strerror(-ret));
		config_free(cfg);
		return ret == -EINVAL ? TOOL_USAGE : TOOL_FAIL;
	}
	tool_cred(&t.cred);
	ret = cmd->run(&t, argc - optind, argv + optind);
	rdfs_client_close(t.client);
	memset(&t.cap_key, 0, sizeof(t.cap_key));
	config_free(cfg);
	return ret;
}
