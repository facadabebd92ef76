// SPDX-License-Identifier: MIT
/*
 * cmd_df.c - `rdfs df`: the space of the whole file system, as df -h shows it.
 */
#include <getopt.h>
#include <stdio.h>
#include <sys/statvfs.h>

#include "tool.h"

static int df_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "inodes", no_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct statvfs st;
	int opt, inodes = 0, ret, p, json = 0;
	char size[16], used[16], avail[16], pct[16];

	optind = 1;
	while ((opt = getopt_long(argc, argv, "hij", opts, NULL)) != -1) {
		if (opt == 'h') {
			printf("%s", tool_cmd_df.help);
			return TOOL_OK;
		}
		if (opt == 'i') {
			inodes = 1;
			continue;
		}
		if (opt == 'j') {
			json = 1;
			continue;
		}
		return tool_usage(&tool_cmd_df, "unknown option");
	}
	if (optind != argc)
		return tool_usage(&tool_cmd_df, "unexpected argument");
	ret = rdfs_statfs(t->client, &t->cred, &st);
	if (ret)
		return tool_error("df", "statfs", ret);
	if (json) {
		uint64_t total = (uint64_t)st.f_blocks * st.f_frsize;
		uint64_t free_b = (uint64_t)st.f_bfree * st.f_frsize;

		printf("{\"metaserver\": ");
		tool_json_str(t->metaserver);
		printf(", \"size_bytes\": %llu, \"used_bytes\": %llu, \"avail_bytes\": %llu, "
		       "\"inodes\": %llu, \"inodes_used\": %llu, \"inodes_free\": %llu}\n",
		       (unsigned long long)total,
		       (unsigned long long)(total > free_b ? total - free_b : 0),
		       (unsigned long long)st.f_bavail * st.f_frsize, (unsigned long long)st.f_files,
		       (unsigned long long)(st.f_files > st.f_ffree ? st.f_files - st.f_ffree : 0),
		       (unsigned long long)st.f_ffree);
		return TOOL_OK;
	}

	if (inodes) {
		uint64_t iused = st.f_files > st.f_ffree ? st.f_files - st.f_ffree : 0;

		p = tool_percent(iused, st.f_files);
		snprintf(pct, sizeof(pct), p < 0 ? "-" : "%d%%", p);
		printf("%-28s %12s %12s %12s %5s\n", "Filesystem", "Inodes", "IUsed", "IFree",
		       "IUse%");
		printf("%-28s %12llu %12llu %12llu %5s\n", t->metaserver,
		       (unsigned long long)st.f_files, (unsigned long long)iused,
		       (unsigned long long)st.f_ffree, pct);
		return TOOL_OK;
	}
	{
		uint64_t total = (uint64_t)st.f_blocks * st.f_frsize;
		uint64_t free_b = (uint64_t)st.f_bfree * st.f_frsize;
		uint64_t used_b = total > free_b ? total - free_b : 0;

		tool_human(total, size, sizeof(size));
		tool_human(used_b, used, sizeof(used));
		tool_human((uint64_t)st.f_bavail * st.f_frsize, avail, sizeof(avail));
		p = tool_percent(used_b, total);
		snprintf(pct, sizeof(pct), p < 0 ? "-" : "%d%%", p);
	}
	printf("%-28s %6s %6s %6s %5s\n", "Filesystem", "Size", "Used", "Avail", "Use%");
	printf("%-28s %6s %6s %6s %5s\n", t->metaserver, size, used, avail, pct);
	return TOOL_OK;
}

const struct tool_cmd tool_cmd_df = {
	.name = "df",
	.args = "[-i] [--json]",
	.summary = "space (or with -i, inodes) of the whole file system",
	.run = df_run,
	.help =
	"usage: rdfs df [-i] [--json]\n"
	"\n"
	"Print the size, used and available space of the whole file system (all\n"
	"registered I/O servers' volumes, in powers of 1024 as df -h does) and the\n"
	"percentage used.\n"
	"\n"
	"  -i, --inodes   print inode counts instead of space\n"
	"  --json         one JSON object with both: {\"metaserver\", \"size_bytes\",\n"
	"                 \"used_bytes\", \"avail_bytes\", \"inodes\", \"inodes_used\",\n"
	"                 \"inodes_free\"}\n",
};
