// SPDX-License-Identifier: MIT
/*
 * cmd_drain.c - `rdfs drain [--cancel] [--wait] SERVER...`: move every copy
 * off an I/O server (decommission), or stop doing so. The metaserver does the
 * work (its rebuilder); this asks for it and, with --wait, watches the
 * server's used space go to zero. Runs on a server host: it proves the server
 * key.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

#define MAX_SERVERS	1024

/* The servers, sorted by id; their count, or -errno. *@out is malloc'ed. */
static int list_servers(struct tool *t, struct rdfs_server_info **out)
{
	struct rdfs_server_info *srv = calloc(MAX_SERVERS, sizeof(*srv));
	int n;

	if (!srv)
		return -ENOMEM;
	n = rdfs_server_list(t->client, srv, MAX_SERVERS);
	if (n < 0) {
		free(srv);
		return n;
	}
	*out = srv;
	return n < MAX_SERVERS ? n : MAX_SERVERS;
}

/* Server @arg (an id or a name) in @srv; its index, or -ENOENT. */
static int find_server(const struct rdfs_server_info *srv, int n, const char *arg)
{
	char *end;
	unsigned long id = strtoul(arg, &end, 10);

	for (int i = 0; i < n; i++)
		if ((*arg && !*end && srv[i].id == id) || !strcmp(srv[i].name, arg))
			return i;
	return -ENOENT;
}

static uint64_t used_bytes(const struct rdfs_server_info *s)
{
	return (s->capacity_blocks - s->free_blocks) * RDFS_BLOCK_SIZE;
}

static int drain_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cancel", no_argument, NULL, 'c' },
		{ "wait", no_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rdfs_server_info *srv = NULL;
	int opt, cancel = 0, wait = 0, n, ret, status = TOOL_OK;
	uint32_t ids[64];
	int nids = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "cwh", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			cancel = 1;
			break;
		case 'w':
			wait = 1;
			break;
		case 'h':
			printf("%s", tool_cmd_drain.help);
			return TOOL_OK;
		default:
			return tool_usage(&tool_cmd_drain, "unknown option");
		}
	}
	if (optind >= argc)
		return tool_usage(&tool_cmd_drain, "expected at least one SERVER (id or name)");
	if (argc - optind > 64)
		return tool_usage(&tool_cmd_drain, "at most 64 SERVERs at once");
	if (cancel && wait)
		return tool_usage(&tool_cmd_drain, "--wait waits for a drain; not with --cancel");
	n = list_servers(t, &srv);
	if (n < 0)
		return tool_error("drain", "listing I/O servers", n);
	for (int i = optind; i < argc; i++) {
		int k = find_server(srv, n, argv[i]);

		if (k < 0) {
			free(srv);
			return tool_error("drain", argv[i], -ENOENT);
		}
		ids[nids++] = srv[k].id;
	}
	for (int i = 0; i < nids; i++) {
		ret = rdfs_drain(t->client, ids[i], !cancel);
		if (ret) {
			status = tool_error("drain", argv[optind + i], ret);
			continue;
		}
		printf("I/O server %u: %s\n", ids[i],
		       cancel ? "no longer draining" : "draining: its copies are being moved");
	}
	free(srv);
	if (!wait || status != TOOL_OK)
		return status;

	/* until every drained server holds no block */
	for (;;) {
		int left = 0;

		n = list_servers(t, &srv);
		if (n < 0)
			return tool_error("drain", "listing I/O servers", n);
		for (int i = 0; i < nids; i++) {
			int k = find_server(srv, n, argv[optind + i]);
			char u[16];

			if (k < 0 || !used_bytes(&srv[k]))
				continue;
			left++;
			tool_human(used_bytes(&srv[k]), u, sizeof(u));
			printf("I/O server %u (%s): %s still used%s\n", srv[k].id, srv[k].name, u,
			       srv[k].up ? "" : " (down: what only it holds waits for it)");
		}
		free(srv);
		if (!left)
			break;
		fflush(stdout);
		sleep(2);
	}
	printf("drained: the server%s hold%s no block; stop %s, or rdfs drain --cancel to use "
	       "%s again\n", nids > 1 ? "s" : "", nids > 1 ? "" : "s", nids > 1 ? "them" : "it",
	       nids > 1 ? "them" : "it");
	return TOOL_OK;
}

const struct tool_cmd tool_cmd_drain = {
	.name = "drain",
	.args = "[--cancel] [--wait] SERVER...",
	.summary = "move every copy off I/O servers (decommission), or stop",
	.run = drain_run,
	.server_key = 1,
	.help =
	"usage: rdfs drain [--cancel] [--wait] SERVER...\n"
	"\n"
	"Move every block off the I/O servers SERVER (an id or a name, as rdfs status\n"
	"shows them), online: files stay open and in use. From now on no new block\n"
	"goes to them, and their copies no longer count, so the metaserver's\n"
	"rebuilder copies each of their chunks to the other servers (server to\n"
	"server, at its rebuild_rate) and then drops it from them. rdfs status shows\n"
	"them as \"drain\". A drain is remembered across restarts of the metaserver.\n"
	"\n"
	"A block whose only copy is on a drained server that is down waits for it to\n"
	"come back. Blocks need room on the other servers; where none has room, they\n"
	"stay.\n"
	"\n"
	"  --wait     return only when the servers hold no block (printing how much\n"
	"             they still hold every 2 s); then they may be stopped for good\n"
	"  --cancel   stop draining: the servers take new blocks again (what was moved\n"
	"             stays where it went)\n"
	"\n"
	"Runs on a server host: it proves the server key derived from the capability\n"
	"key (--cap-key-file).\n",
};
