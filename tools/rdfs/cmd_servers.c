// SPDX-License-Identifier: MIT
/*
 * cmd_servers.c - `rdfs servers list|label|set`: the I/O servers, their
 * state and space, an admin's label, and the read-only flag that keeps new
 * blocks off a server.
 *
 * Contract: run on the tool's one thread, with the tool's connected client
 * (the server key for label and set: tool_cmd_servers.server_key_for);
 * everything allocated here is freed before the command returns.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static const char *state_of(const struct rdfs_server_info *s)
{
	return !s->up ? "down" : s->draining ? "draining" : s->read_only ? "read-only" : "up";
}

static int parse_server_id(const char *s, uint32_t *id)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || !*s || *end || v == 0 || v > UINT32_MAX)
		return -EINVAL;
	*id = (uint32_t)v;
	return 0;
}

static int servers_list(struct tool *t, int json, int human)
{
	struct rdfs_server_info *srv = NULL;
	int n, max = 64;

	for (;;) {
		free(srv);
		srv = calloc(max, sizeof(*srv));
		if (!srv)
			return tool_error("servers", "list", -ENOMEM);
		n = rdfs_server_list(t->client, srv, max);
		if (n < 0) {
			free(srv);
			return tool_error("servers", "list", n);
		}
		if (n <= max)
			break;
		max = n;
	}
	if (json) {
		printf("{\"servers\": [");
		for (int i = 0; i < n; i++) {
			const struct rdfs_server_info *s = &srv[i];
			uint64_t cap = s->capacity_blocks * RDFS_BLOCK_SIZE;
			uint64_t used = (s->capacity_blocks - s->free_blocks) * RDFS_BLOCK_SIZE;

			printf("%s{\"id\": %u, \"url\": ", i ? ", " : "", s->id);
			tool_json_str(s->url);
			printf(", \"name\": ");
			tool_json_str(s->name);
			printf(", \"label\": ");
			tool_json_str(s->label);
			printf(", \"domain\": ");
			tool_json_str(s->domain);
			printf(", \"state\": \"%s\", \"up\": %s, \"draining\": %s, \"read_only\": %s, "
			       "\"capacity_bytes\": %llu, \"used_bytes\": %llu}",
			       state_of(s), s->up ? "true" : "false",
			       s->draining ? "true" : "false", s->read_only ? "true" : "false",
			       (unsigned long long)cap, (unsigned long long)used);
		}
		printf("]}\n");
		free(srv);
		return TOOL_OK;
	}
	printf("%4s  %-28s %-9s %10s %10s %4s  %s\n", "ID", "URL", "STATE", "CAPACITY", "USED",
	       "USE%", "LABEL");
	for (int i = 0; i < n; i++) {
		const struct rdfs_server_info *s = &srv[i];
		uint64_t cap = s->capacity_blocks * RDFS_BLOCK_SIZE;
		uint64_t used = (s->capacity_blocks - s->free_blocks) * RDFS_BLOCK_SIZE;
		int p = tool_percent(used, cap);
		char c[32], u[32], pct[8];

		if (human) {
			tool_human(cap, c, sizeof(c));
			tool_human(used, u, sizeof(u));
		} else {
			snprintf(c, sizeof(c), "%llu", (unsigned long long)(cap >> 10));
			snprintf(u, sizeof(u), "%llu", (unsigned long long)(used >> 10));
		}
		snprintf(pct, sizeof(pct), p < 0 ? "-" : "%d%%", p);
		printf("%4u  %-28s %-9s %10s %10s %4s  %s\n", s->id, s->url, state_of(s), c, u, pct,
		       s->label[0] ? s->label : "-");
	}
	free(srv);
	return TOOL_OK;
}

static int servers_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'H' },
		{ "json", no_argument, NULL, 'j' },
		{ "human-readable", no_argument, NULL, 'h' },
		{ "read-only", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sub;
	int opt, ret, json = 0, human = 0, ro = -1;
	uint32_t id;

	/* 0, not 1: glibc starts over and permutes, so options may follow "set ID" */
	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'H':
			printf("%s", tool_cmd_servers.help);
			return TOOL_OK;
		case 'j':
			json = 1;
			break;
		case 'h':
			human = 1;
			break;
		case 'r':
			ro = !strcmp(optarg, "on") ? 1 : !strcmp(optarg, "off") ? 0 : -2;
			if (ro == -2)
				return tool_usage(&tool_cmd_servers, "--read-only is on or off");
			break;
		default:
			return tool_usage(&tool_cmd_servers, "unknown option");
		}
	}
	/* the words after the options: SUBCOMMAND [ID [TEXT]] */
	argv += optind - 1;
	argc -= optind - 1;
	sub = argc > 1 ? argv[1] : "list";
	if (!strcmp(sub, "list")) {
		if (argc > 2 || ro != -1)
			return tool_usage(&tool_cmd_servers, "list takes only --json and -h");
		return servers_list(t, json, human);
	}
	if (json || human)
		return tool_usage(&tool_cmd_servers, "--json and -h are for list");
	if (!strcmp(sub, "label")) {
		if (argc != 4 || ro != -1)
			return tool_usage(&tool_cmd_servers, "expected label ID TEXT");
		if (parse_server_id(argv[2], &id))
			return tool_usage(&tool_cmd_servers, "ID is a server id (servers list)");
		ret = rdfs_server_set(t->client, id, argv[3], -1);
	} else if (!strcmp(sub, "set")) {
		if (argc != 3 || ro == -1)
			return tool_usage(&tool_cmd_servers, "expected set ID --read-only on|off");
		if (parse_server_id(argv[2], &id))
			return tool_usage(&tool_cmd_servers, "ID is a server id (servers list)");
		ret = rdfs_server_set(t->client, id, NULL, ro);
	} else {
		return tool_usage(&tool_cmd_servers, "expected list, label or set");
	}
	if (ret == -EPERM) {
		fprintf(stderr, "rdfs servers: the metaserver refused: changing a server needs the "
				"server key (run it on a server host, with the capability key)\n");
		return TOOL_FAIL;
	}
	if (ret == -ENOENT) {
		fprintf(stderr, "rdfs servers: no I/O server has id %s (rdfs servers list)\n",
			argv[2]);
		return TOOL_FAIL;
	}
	if (ret == -EINVAL) {
		fprintf(stderr, "rdfs servers: a label is at most 127 bytes, without control "
				"characters\n");
		return TOOL_FAIL;
	}
	if (ret)
		return tool_error("servers", sub, ret);
	return TOOL_OK;
}

/* Only the changes need the server key: list works with a client's key. */
static int servers_server_key(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (argv[i][0] != '-')
			return strcmp(argv[i], "list") != 0;
	return 0;
}

const struct tool_cmd tool_cmd_servers = {
	.name = "servers",
	.args = "list|label|set ...",
	.summary = "I/O servers: state, space, labels, read-only",
	.run = servers_run,
	.server_key_for = servers_server_key,
	.own_h = 1,
	.help = "usage: rdfs servers [list] [-h] [--json]\n"
		"       rdfs servers label ID TEXT\n"
		"       rdfs servers set ID --read-only on|off\n"
		"\n"
		"The I/O servers the metaserver knows, and what an admin says about them.\n"
		"\n"
		"  list          every server by id: its URL, state, capacity and space used\n"
		"                (KiB; -h: human-readable), and label. The state is down (not\n"
		"                registered now), draining (rdfs drain), read-only, or up.\n"
		"  label ID TEXT give server ID a label (at most 127 bytes, printable): where\n"
		"                it is, why it is read-only; \"\" removes it. Kept by the\n"
		"                metaserver across restarts and the server's registrations.\n"
		"  set ID --read-only on|off\n"
		"                on: server ID gets no new blocks, as a Lustre OST set to\n"
		"                no-create (degraded): new files and the growth of existing\n"
		"                ones go to the other servers (a setstripe -i naming it goes\n"
		"                to the next one), and the rebuilder and rdfs rebalance make\n"
		"                no copies there. What it holds stays readable, and writable\n"
		"                in place (an overwrite of allocated blocks is not a new\n"
		"                block), and its copies keep counting: nothing moves off it\n"
		"                (that is rdfs drain). Off: an ordinary server again. Kept by\n"
		"                the metaserver across restarts.\n"
		"\n"
		"  -h, --human-readable   sizes as 1.5G\n"
		"  --json        (list) one JSON object: {\"servers\": [{\"id\", \"url\", \"name\",\n"
		"                \"label\", \"domain\", \"state\", \"up\", \"draining\", \"read_only\",\n"
		"                \"capacity_bytes\", \"used_bytes\"}]}\n"
		"\n"
		"list needs only the cluster secret or a node key; label and set need the\n"
		"server key: run them on a server host, as root (the capability key,\n"
		"[cluster] cap_key_file, default /etc/rdfs/cap.key, or --cap-key-file).\n"
		"\n"
		"Exit status: 0, 1 the metaserver refused or is unreachable, 2 usage error.\n",
};
