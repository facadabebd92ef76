/* SPDX-License-Identifier: MIT */
/*
 * tool.h - what the commands of the `rdfs` tool share: the connected client,
 * the caller's credentials, path resolution and number formatting.
 */
#ifndef RDFS_TOOL_H
#define RDFS_TOOL_H

#include <stdint.h>
#include <sys/stat.h>

#include "config.h"
#include "frame.h"
#include "rdfs_client.h"

/* exit status */
#define TOOL_OK		0
#define TOOL_FAIL	1	/* the operation failed (server unreachable, no such file...) */
#define TOOL_USAGE	2	/* bad command line or configuration */

struct tool {
	struct rdfs_client *client;
	struct auth_secret cap_key;	/* only for commands with server_key */
	struct rdfs_cred cred;
	const char *metaserver;
	const struct rdfs_config *cfg;	/* the configuration, for commands that need more */
	int timeout_ms;
};

struct tool_cmd {
	const char *name;
	const char *args;		/* synopsis after the name */
	const char *summary;
	int (*run)(struct tool *t, int argc, char **argv);
	const char *help;		/* long description, options */
	/* connect with the server key (from the capability key), not the secret */
	int server_key;
	/* talks to no metaserver: run without a client (t->client NULL) */
	int offline;
	/* or: does this command line (argv[0] the command) need the server key? */
	int (*server_key_for)(int argc, char **argv);
	/* -h is an option of the command (du -h): only --help asks for the help */
	int own_h;
};

extern const struct tool_cmd tool_cmd_status;
extern const struct tool_cmd tool_cmd_df;
extern const struct tool_cmd tool_cmd_layout;
extern const struct tool_cmd tool_cmd_ls;
extern const struct tool_cmd tool_cmd_stat;
extern const struct tool_cmd tool_cmd_node;
extern const struct tool_cmd tool_cmd_fsck;
extern const struct tool_cmd tool_cmd_getcopies;
extern const struct tool_cmd tool_cmd_setcopies;
extern const struct tool_cmd tool_cmd_drain;
extern const struct tool_cmd tool_cmd_rebalance;
extern const struct tool_cmd tool_cmd_metrics;
extern const struct tool_cmd tool_cmd_top;
extern const struct tool_cmd tool_cmd_getstripe;
extern const struct tool_cmd tool_cmd_setstripe;
extern const struct tool_cmd tool_cmd_servers;
extern const struct tool_cmd tool_cmd_du;
extern const struct tool_cmd tool_cmd_find;
extern const struct tool_cmd tool_cmd_quota;
extern const struct tool_cmd tool_cmd_project;

/* metrics_fetch.c: for `rdfs metrics` and `rdfs top` */
#include <curl/curl.h>
/* The metrics URL the configuration implies (see `rdfs metrics --help`); 0 or -1. */
int metrics_default_url(const struct rdfs_config *cfg, char *buf, size_t len);
/* GET @url into *@body (NUL-terminated, malloc'd); 0, or -1 with @why said. */
int metrics_get(CURL *c, const char *url, int timeout_ms, char **body, size_t *len,
		char *why, size_t whylen);

/*
 * Resolve an absolute rdfs path ("/dir/file", relative to the root of the rdfs
 * namespace) by LOOKUPs from the root. Symbolic links are not followed.
 * Returns 0 with *@st filled, or -errno (-ENOTDIR, -ENOENT, ...).
 */
int tool_resolve(struct tool *t, const char *path, struct stat *st);

/* "1.5G"-style size with powers of 1024, as df -h prints them. */
void tool_human(uint64_t bytes, char *buf, size_t len);
/* Percentage of @used in @total, rounded up as df does; -1 when @total is 0. */
int tool_percent(uint64_t used, uint64_t total);
/* "drwxr-xr-x" for @mode. */
void tool_mode_string(mode_t mode, char out[11]);

/* Print "rdfs CMD: WHAT: strerror(-err)" to stderr; returns TOOL_FAIL. */
/* @s as a JSON string literal on stdout (bytes that are not UTF-8 as \u00XX). */
void tool_json_str(const char *s);
/* "file", "dir", "symlink", ... for JSON listings. */
const char *tool_type_name(mode_t mode);
int tool_error(const char *cmd, const char *what, int err);
/* Print a usage error for CMD and return TOOL_USAGE. */
int tool_usage(const struct tool_cmd *cmd, const char *msg);

#endif
