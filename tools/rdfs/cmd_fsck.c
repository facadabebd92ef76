// SPDX-License-Identifier: MIT
/*
 * cmd_fsck.c - `rdfs fsck [--repair]`: have the metaserver check its layouts
 * against its allocation maps (metaserver/fsck.c does the work, on a live
 * server) and print what it found, as a table or as JSON for scripts.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

/* exit status beyond tool.h's: problems are left (as e2fsck's 4) */
#define FSCK_LEFT	4

/* Names of enum ms_fsck_kind (metaserver/ms.h), by value. */
static const char *const kind_names[] = {
	[1] = "leaked",
	[2] = "doubly-owned",
	[3] = "out-of-range",
	[4] = "above-high-water",
	[5] = "unmapped",
	[6] = "layout-without-inode",
	[7] = "leaked-orphan",
	[8] = "unlinked-without-orphan",
	[9] = "stale-orphan",
	[10] = "block-count",
	[11] = "dangling-entry",
	[12] = "link-count",
	[13] = "corrupt-record",
	[14] = "quota-blocks",
	[15] = "quota-inodes",
	[16] = "quota-corrupt",
};
#define NKINDS	(sizeof(kind_names) / sizeof(kind_names[0]))

static const char *kind_name(uint32_t k)
{
	return k < NKINDS && kind_names[k] ? kind_names[k] : "unknown";
}

static void print_json(const struct rdfs_fsck_report *r, int repair)
{
	printf("{\"repair\": %s, \"inodes\": %llu, \"files\": %llu, \"dirs\": %llu, "
	       "\"extents\": %llu, \"orphans_open\": %llu, \"blocks_owned\": %llu, "
	       "\"blocks_in_use\": %llu, \"blocks_held\": %llu, \"blocks_quarantined\": %llu, "
	       "\"problems\": %llu, \"repaired\": %llu, \"counts\": {",
	       repair ? "true" : "false", (unsigned long long)r->inodes,
	       (unsigned long long)r->files, (unsigned long long)r->dirs,
	       (unsigned long long)r->extents, (unsigned long long)r->orphans_open,
	       (unsigned long long)r->blocks_owned, (unsigned long long)r->blocks_mapped,
	       (unsigned long long)r->blocks_held, (unsigned long long)r->blocks_quarantined,
	       (unsigned long long)r->problems, (unsigned long long)r->repaired);
	for (size_t k = 1, first = 1; k < NKINDS; k++) {
		if (!r->counts[k])
			continue;
		printf("%s\"%s\": %llu", first ? "" : ", ", kind_name((uint32_t)k),
		       (unsigned long long)r->counts[k]);
		first = 0;
	}
	printf("}, \"list\": [");
	for (size_t i = 0; i < r->n; i++) {
		const struct rdfs_fsck_problem *p = &r->list[i];

		printf("%s{\"kind\": \"%s\", \"ino\": %llu, \"other_ino\": %llu, \"server\": %u, "
		       "\"block\": %llu, \"count\": %llu, \"repaired\": %s}", i ? ", " : "",
		       kind_name(p->kind), (unsigned long long)p->ino,
		       (unsigned long long)p->other_ino, p->server_id,
		       (unsigned long long)p->block, (unsigned long long)p->count,
		       p->repaired ? "true" : "false");
	}
	printf("]}\n");
}

/* One problem in words. */
static void print_problem(const struct rdfs_fsck_problem *p)
{
	unsigned long long ino = p->ino, other = p->other_ino, b = p->block, n = p->count;
	const char *state = p->repaired ? "repaired" : "left";

	switch (p->kind) {
	case 1:
		printf("%-9s leaked: blocks %llu+%llu of I/O server %u are in use but no file "
		       "owns them%s\n", state, b, n, p->server_id,
		       p->repaired ? " (freed once no capability can reach them)" : "");
		break;
	case 2:
		if (ino)
			printf("%-9s doubly owned: blocks %llu+%llu of I/O server %u belong to "
			       "inode %llu and to another file\n", state, b, n, p->server_id, ino);
		else
			printf("%-9s doubly owned: blocks %llu+%llu of I/O server %u are both "
			       "held (freed, awaiting the server) and owned\n", state, b, n,
			       p->server_id);
		break;
	case 3:
		printf("%-9s out of range: inode %llu has blocks %llu+%llu on I/O server %u, "
		       "past its end or an unknown server\n", state, ino, b, n, p->server_id);
		break;
	case 4:
		printf("%-9s above the high-water mark: inode %llu, blocks %llu+%llu on I/O "
		       "server %u\n", state, ino, b, n, p->server_id);
		break;
	case 5:
		printf("%-9s unmapped: blocks %llu+%llu of I/O server %u are owned but free in "
		       "the allocator\n", state, b, n, p->server_id);
		break;
	case 6:
		printf("%-9s layout without inode: inode %llu does not exist but owns %llu "
		       "blocks\n", state, ino, b);
		break;
	case 7:
		printf("%-9s leaked orphan: inode %llu is unlinked and open nowhere\n", state,
		       ino);
		break;
	case 8:
		printf("%-9s unlinked without orphan record: inode %llu\n", state, ino);
		break;
	case 9:
		printf("%-9s stale orphan record: inode %llu is linked or gone\n", state, ino);
		break;
	case 10:
		printf("%-9s block count: inode %llu records %llu blocks, its extents hold "
		       "%llu\n", state, ino, b, n);
		break;
	case 11:
		printf("%-9s dangling entry: directory %llu names inode %llu, which does not "
		       "exist\n", state, ino, other);
		break;
	case 12:
		printf("%-9s link count: inode %llu has nlink %llu but %llu entries\n", state,
		       ino, b, n);
		break;
	case 13:
		printf("%-9s corrupt record of inode %llu\n", state, ino);
		break;
	case 14:
	case 15:
		printf("%-9s quota usage: %s %llu is recorded with %llu %s, its inodes hold %llu\n",
		       state, p->server_id == 0 ? "user" : p->server_id == 1 ? "group" : "project",
		       ino, b, p->kind == 14 ? "blocks" : "inodes", n);
		break;
	case 16:
		printf("%-9s corrupt quota usage record of %s %llu%s\n", state,
		       p->server_id == 0 ? "user" : p->server_id == 1 ? "group" : "project", ino,
		       p->repaired ? " (counted again from its inodes; its limits are lost)" : "");
		break;
	default:
		printf("%-9s problem %u: inode %llu, server %u, %llu+%llu\n", state, p->kind,
		       ino, p->server_id, b, n);
	}
}

static int fsck_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "repair", no_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "max-problems", required_argument, NULL, 'm' },
		{ "wait", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	struct rdfs_fsck_report r;
	unsigned long max = 1000, wait_s = 3600;
	int opt, ret, repair = 0, json = 0;
	char *end;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			printf("%s", tool_cmd_fsck.help);
			return TOOL_OK;
		case 'r':
			repair = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'm':
			errno = 0;
			max = strtoul(optarg, &end, 10);
			if (errno || !*optarg || *end || max > 100000)
				return tool_usage(&tool_cmd_fsck, "--max-problems is 0 to 100000");
			break;
		case 'w':
			errno = 0;
			wait_s = strtoul(optarg, &end, 10);
			if (errno || !*optarg || *end || wait_s < 1 || wait_s > 86400)
				return tool_usage(&tool_cmd_fsck, "--wait is 1 to 86400 seconds");
			break;
		default:
			return tool_usage(&tool_cmd_fsck, "unknown option");
		}
	}
	if (optind != argc)
		return tool_usage(&tool_cmd_fsck, "fsck takes no arguments");

	ret = rdfs_fsck(t->client, repair, max ? (uint32_t)max : 1, (int)(wait_s * 1000), &r);
	if (ret == -EPERM) {
		fprintf(stderr, "rdfs fsck: the metaserver refused: fsck needs the server key "
			"(run it on a server host, with the capability key)\n");
		return TOOL_FAIL;
	}
	if (ret)
		return tool_error("fsck", "check", ret);
	if (!max)
		r.n = 0;
	if (json) {
		print_json(&r, repair);
	} else {
		printf("inodes: %llu (%llu files, %llu directories), extents: %llu, "
		       "open unlinked files: %llu\n", (unsigned long long)r.inodes,
		       (unsigned long long)r.files, (unsigned long long)r.dirs,
		       (unsigned long long)r.extents, (unsigned long long)r.orphans_open);
		printf("blocks: %llu owned by files, %llu in use in the allocator, %llu held for "
		       "a server's next registration, %llu quarantined\n",
		       (unsigned long long)r.blocks_owned, (unsigned long long)r.blocks_mapped,
		       (unsigned long long)r.blocks_held,
		       (unsigned long long)r.blocks_quarantined);
		for (size_t i = 0; i < r.n; i++)
			print_problem(&r.list[i]);
		if (r.problems > r.n)
			printf("... and %llu more (--max-problems)\n",
			       (unsigned long long)(r.problems - r.n));
		if (r.problems == 0)
			printf("clean\n");
		else
			printf("%llu problems, %llu repaired\n", (unsigned long long)r.problems,
			       (unsigned long long)r.repaired);
	}
	ret = r.problems > r.repaired ? FSCK_LEFT : TOOL_OK;
	rdfs_fsck_report_free(&r);
	return ret;
}

const struct tool_cmd tool_cmd_fsck = {
	.name = "fsck",
	.args = "[--repair]",
	.summary = "check layouts against the allocator, on a live metaserver",
	.run = fsck_run,
	.server_key = 1,
	.help =
	"usage: rdfs fsck [--repair] [--json] [--max-problems N] [--wait SEC]\n"
	"\n"
	"Check every file's layout against the metaserver's allocation maps, the\n"
	"I/O servers' high-water marks, the unlinked-but-open files (orphans) and the\n"
	"namespace, while the metaserver keeps serving: it looks at one consistent\n"
	"moment (a database snapshot taken with the maps), pausing allocation only for\n"
	"the copy of the maps. What it finds:\n"
	"\n"
	"  leaked                  blocks in use that no file owns\n"
	"  doubly-owned            blocks two files (or a file and a freed range) own\n"
	"  out-of-range            extents past a volume's end or on an unknown server\n"
	"  above-high-water        extents at or above the mark below which blocks are\n"
	"                          zeroed before reuse\n"
	"  unmapped                owned blocks the allocator has free\n"
	"  layout-without-inode    blocks of a file that no longer exists\n"
	"  leaked-orphan           an unlinked file open nowhere that kept its blocks\n"
	"  unlinked-without-orphan a file with no links that nothing will reclaim\n"
	"  stale-orphan            an orphan record of a linked or missing file\n"
	"  block-count             a file's block count that differs from its extents\n"
	"  dangling-entry          a directory entry naming no file\n"
	"  link-count              a file's link count that differs from its entries\n"
	"  corrupt-record          a database record that does not decode\n"
	"\n"
	"Every file-level finding is checked again under the file's lock before it\n"
	"is reported, so work in progress is not reported as a problem.\n"
	"\n"
	"  --repair        fix what is safe to fix: leaked orphans, unlinked files and\n"
	"                  layouts without a file are reclaimed (their blocks fenced on\n"
	"                  the I/O servers first, as any freed blocks); block counts,\n"
	"                  high-water marks and stale orphan records are corrected;\n"
	"                  unmapped blocks are marked in use; leaked blocks are freed\n"
	"                  once every capability granted before the repair has expired\n"
	"                  ([metaserver] cap_lifetime). Doubly owned and out-of-range\n"
	"                  blocks, dangling entries and link counts are reported only.\n"
	"  --json          one JSON object: the totals, counts by kind, and the list\n"
	"  --max-problems N   list at most N problems (default 1000; all are counted)\n"
	"  --wait SEC      how long to wait for the answer (default 3600)\n"
	"\n"
	"Run it on a server host, as root: it proves the server key, derived from the\n"
	"capability key ([cluster] cap_key_file, default /etc/rdfs/cap.key, or\n"
	"--cap-key-file).\n"
	"\n"
	"Exit status: 0 clean (or everything found was repaired), 1 the check could\n"
	"not run, 2 usage error, 4 problems are left.\n",
};
