// SPDX-License-Identifier: MIT
/*
 * cmd_rebalance.c - `rdfs rebalance [--threshold PCT] [--wait] [--cancel]`:
 * even out the I/O servers' usage (after a server was added), online. The
 * metaserver does the work (its rebuilder moves copies, and ends the request
 * itself once every server is in the band); this asks for it or cancels it
 * and, with --wait, follows it in SERVER_LIST until it ends. Runs on a server
 * host: it proves the server key.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

/* "5" or "2.5": half the band's width, as rdfs status prints it. */
static void half_band(uint32_t pct, char *buf, size_t len)
{
	snprintf(buf, len, "%g", pct / 2.0);
}

/* The progress line rdfs status prints too. */
static void print_progress(const struct rdfs_copies_status *cs)
{
	char moved[16], half[16];

	tool_human(cs->rebalance_bytes_moved, moved, sizeof(moved));
	half_band(cs->rebalance_threshold_pct, half, sizeof(half));
	printf("rebalance: active, %s moved, %u server%s outside \u00b1%s%%\n", moved,
	       cs->rebalance_outside, cs->rebalance_outside == 1 ? "" : "s", half);
}

/* Until the metaserver ends the rebalance: TOOL_OK when every server is in the band. */
static int wait_done(struct tool *t)
{
	struct rdfs_copies_status cs, last = { 0 };
	char moved[16], half[16];
	int ret;

	for (int first = 1;; first = 0) {
		ret = rdfs_copies_status(t->client, &cs);
		if (ret)
			return tool_error("rebalance", "asking the metaserver how far it is", ret);
		if (!cs.rebalancing)
			break;
		if (first || cs.rebalance_bytes_moved != last.rebalance_bytes_moved ||
		    cs.rebalance_outside != last.rebalance_outside) {
			print_progress(&cs);
			fflush(stdout);
		}
		last = cs;
		sleep(2);
	}
	tool_human(cs.rebalance_bytes_moved, moved, sizeof(moved));
	half_band(cs.rebalance_threshold_pct, half, sizeof(half));
	if (!cs.rebalance_outside) {
		printf("balanced: every I/O server within \u00b1%s%% of the cluster's usage; %s "
		       "moved\n", half, moved);
		return TOOL_OK;
	}
	fprintf(stderr, "rdfs rebalance: ended with %u I/O server%s outside \u00b1%s%% (%s "
		"moved): cancelled, or no copy can move closer (no room, failure domains, "
		"or files too few for the band); see the metaserver's log\n",
		cs.rebalance_outside, cs.rebalance_outside == 1 ? "" : "s", half, moved);
	return TOOL_FAIL;
}

static int rebalance_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threshold", required_argument, NULL, 't' },
		{ "cancel", no_argument, NULL, 'c' },
		{ "wait", no_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rdfs_copies_status cs;
	unsigned long pct = 0;
	int opt, cancel = 0, wait = 0, ret;
	char *end;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "t:cwh", opts, NULL)) != -1) {
		switch (opt) {
		case 't':
			errno = 0;
			pct = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || pct < 1 ||
			    pct > 100)
				return tool_usage(&tool_cmd_rebalance,
						  "--threshold takes a whole number of percentage "
						  "points from 1 to 100");
			break;
		case 'c':
			cancel = 1;
			break;
		case 'w':
			wait = 1;
			break;
		case 'h':
			printf("%s", tool_cmd_rebalance.help);
			return TOOL_OK;
		default:
			return tool_usage(&tool_cmd_rebalance, "unknown option");
		}
	}
	if (optind != argc)
		return tool_usage(&tool_cmd_rebalance, "unexpected argument");
	if (cancel && (wait || pct))
		return tool_usage(&tool_cmd_rebalance,
				  "--cancel stops a rebalance; not with --wait or --threshold");

	ret = rdfs_rebalance(t->client, !cancel, (uint32_t)pct);
	if (ret)
		return tool_error("rebalance", cancel ? "cancelling" : "starting", ret);
	if (cancel) {
		printf("rebalance cancelled: what was moved stays where it went\n");
		return TOOL_OK;
	}
	if (wait)
		return wait_done(t);
	ret = rdfs_copies_status(t->client, &cs);
	if (ret)
		return tool_error("rebalance", "asking the metaserver how far it is", ret);
	if (cs.rebalancing)
		print_progress(&cs);
	return TOOL_OK;
}

const struct tool_cmd tool_cmd_rebalance = {
	.name = "rebalance",
	.args = "[--threshold PCT] [--wait] [--cancel]",
	.summary = "even out the I/O servers' usage (after adding one), or stop",
	.run = rebalance_run,
	.server_key = 1,
	.help =
	"usage: rdfs rebalance [--threshold PCT] [--wait] [--cancel]\n"
	"\n"
	"Even out how full the I/O servers are, online: files stay open and in use.\n"
	"The metaserver's rebuilder moves chunk copies from the servers whose used\n"
	"fraction is above the cluster's (all used space over all capacity of the\n"
	"servers that are up and not drained) to the emptiest ones below it, server\n"
	"to server at its rebuild_rate, until every server is within PCT/2\n"
	"percentage points of the cluster's fraction; then it stops by itself. A\n"
	"move makes a new copy on the target and then drops the old one, for files\n"
	"with one copy too; copies of one chunk stay on distinct servers and, where\n"
	"the servers name failure domains, in no fewer domains than before. Writes\n"
	"to a chunk being moved wait for it (a moment), reads go on. rdfs status\n"
	"shows the progress. A rebalance is remembered across restarts of the\n"
	"metaserver.\n"
	"\n"
	"It stops short of the band when no copy can move closer: no server below\n"
	"the cluster's fraction has room, failure domains forbid it, or a chunk is\n"
	"larger than the gap left.\n"
	"\n"
	"  --threshold PCT  the band's width in percentage points, 1 to 100\n"
	"                   (default 10: every server within +-5 of the cluster)\n"
	"  --wait           return only when the rebalance has ended, printing its\n"
	"                   progress every 2 s while it changes; exit status 1 when\n"
	"                   it ended with servers still outside the band\n"
	"  --cancel         stop a rebalance (what was moved stays where it went)\n"
	"\n"
	"Runs on a server host: it proves the server key derived from the capability\n"
	"key (--cap-key-file).\n",
};
