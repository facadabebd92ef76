// SPDX-License-Identifier: MIT
/*
 * cmd_status.c - `rdfs status`: the I/O servers the metaserver knows, whether
 * they are up, and their space.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "tool.h"

static void print_json(const struct tool *t, const struct rdfs_server_info *srv, int n,
		       const struct rdfs_copies_status *cs)
{
	printf("{\"metaserver\": ");
	tool_json_str(t->metaserver);
	printf(", \"servers\": [");
	for (int i = 0; i < n; i++) {
		uint64_t cap = srv[i].capacity_blocks * RDFS_BLOCK_SIZE;
		uint64_t free_b = srv[i].free_blocks * RDFS_BLOCK_SIZE;

		printf("%s{\"id\": %u, \"name\": ", i ? ", " : "", srv[i].id);
		tool_json_str(srv[i].name);
		printf(", \"url\": ");
		tool_json_str(srv[i].url);
		printf(", \"state\": \"%s\", \"capacity_bytes\": %llu, \"used_bytes\": %llu, "
		       "\"free_bytes\": %llu, \"domain\": ",
		       srv[i].draining ? "drain" : srv[i].up ? "up" : "down",
		       (unsigned long long)cap, (unsigned long long)(cap > free_b ? cap - free_b : 0),
		       (unsigned long long)free_b);
		tool_json_str(srv[i].domain);
		printf("}");
	}
	printf("]");
	if (cs)
		printf(", \"copies\": {\"passes\": %llu, \"chunks_under\": %llu, "
		       "\"chunks_building\": %llu, \"chunks_lost\": %llu, \"bytes_rebuilt\": %llu, "
		       "\"rebalancing\": %s}",
		       (unsigned long long)cs->passes, (unsigned long long)cs->chunks_under,
		       (unsigned long long)cs->chunks_building, (unsigned long long)cs->chunks_lost,
		       (unsigned long long)cs->bytes_rebuilt, cs->rebalancing ? "true" : "false");
	printf("}\n");
}

static int status_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct rdfs_copies_status cs;
	struct rdfs_server_info *srv = NULL;
	int n, max = 64, i, opt, up = 0, json = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
		if (opt == 'h') {
			printf("%s", tool_cmd_status.help);
			return TOOL_OK;
		}
		if (opt == 'j') {
			json = 1;
			continue;
		}
		return tool_usage(&tool_cmd_status, "unknown option");
	}
	if (optind != argc)
		return tool_usage(&tool_cmd_status, "unexpected argument");

	for (;;) {
		free(srv);
		srv = calloc(max, sizeof(*srv));
		if (!srv)
			return tool_error("status", "listing I/O servers", -ENOMEM);
		n = rdfs_server_list(t->client, srv, max);
		if (n < 0) {
			free(srv);
			return tool_error("status", "listing I/O servers", n);
		}
		if (n <= max)
			break;
		max = n;
	}
	if (json) {
		print_json(t, srv, n, rdfs_copies_status(t->client, &cs) == 0 ? &cs : NULL);
		free(srv);
		return TOOL_OK;
	}
	printf("metaserver %s\n", t->metaserver);
	printf("%4s  %-16s  %-28s  %-5s  %9s  %9s  %9s  %4s  %s\n", "ID", "NAME", "URL", "STATE",
	       "CAPACITY", "USED", "FREE", "USE%", "DOMAIN");
	for (i = 0; i < n; i++) {
		uint64_t cap = srv[i].capacity_blocks * RDFS_BLOCK_SIZE;
		uint64_t free_b = srv[i].free_blocks * RDFS_BLOCK_SIZE;
		uint64_t used = cap > free_b ? cap - free_b : 0;
		char c[16], u[16], f[16], pct[16];
		int p = tool_percent(used, cap);

		tool_human(cap, c, sizeof(c));
		tool_human(used, u, sizeof(u));
		tool_human(free_b, f, sizeof(f));
		if (p < 0)
			snprintf(pct, sizeof(pct), "-");
		else
			snprintf(pct, sizeof(pct), "%d%%", p);
		printf("%4u  %-16s  %-28s  %-5s  %9s  %9s  %9s  %4s  %s\n", srv[i].id,
		       srv[i].name[0] ? srv[i].name : "-", srv[i].url,
		       srv[i].draining ? "drain" : srv[i].up ? "up" : "down",
		       c, u, f, pct, srv[i].domain[0] ? srv[i].domain : "-");
		up += srv[i].up;
	}
	printf("%d I/O server%s, %d up\n", n, n == 1 ? "" : "s", up);
	free(srv);
	if (rdfs_copies_status(t->client, &cs) == 0) {
		char b[16];

		tool_human(cs.bytes_rebuilt, b, sizeof(b));
		printf("copies (rebuild pass %llu): %llu chunks under-replicated, %llu being "
		       "rebuilt, %llu lost; %s copied in the pass\n",
		       (unsigned long long)cs.passes, (unsigned long long)cs.chunks_under,
		       (unsigned long long)cs.chunks_building, (unsigned long long)cs.chunks_lost, b);
		if (cs.rebalancing) {
			tool_human(cs.rebalance_bytes_moved, b, sizeof(b));
			printf("rebalance: active, %s moved, %u server%s outside \u00b1%g%%\n", b,
			       cs.rebalance_outside, cs.rebalance_outside == 1 ? "" : "s",
			       cs.rebalance_threshold_pct / 2.0);
		}
	}
	return TOOL_OK;
}

const struct tool_cmd tool_cmd_status = {
	.name = "status",
	.args = "[--json]",
	.summary = "list the I/O servers: id, name, URL, up/down, capacity, used, free",
	.run = status_run,
	.help =
	"usage: rdfs status [--json]\n"
	"\n"
	"Print one line per I/O server registered with the metaserver: its id, name,\n"
	"URL, whether it is connected to the metaserver now (up) or not (down), and\n"
	"the capacity, used and free space of its volume (powers of 1024, as df -h).\n"
	"A down server keeps its id and its data; blocks of files with one copy on it\n"
	"return EIO until it is back, blocks with other copies are read from those.\n"
	"\n"
	"The last line is the rebuilder's last pass over every chunk: chunks with\n"
	"fewer copies than their file's (rdfs setcopies), the one being copied now,\n"
	"and chunks with blocks no copy holds (lost until a down server returns).\n"
	"A server down longer than the metaserver's rebuild_grace no longer counts:\n"
	"its chunks are copied again elsewhere.\n"
	"\n"
	"While an rdfs rebalance is under way, one more line says how much it moved\n"
	"and how many servers are still outside its band.\n"
	"\n"
	"  --json   one JSON object instead: {\"metaserver\", \"servers\": [{\"id\", \"name\",\n"
	"           \"url\", \"state\" (up|down|drain), \"capacity_bytes\", \"used_bytes\",\n"
	"           \"free_bytes\", \"domain\"}], \"copies\": {\"passes\", \"chunks_under\",\n"
	"           \"chunks_building\", \"chunks_lost\", \"bytes_rebuilt\", \"rebalancing\"}}\n",
};
