// SPDX-License-Identifier: MIT
/*
 * cmd_copies.c - `rdfs setcopies N PATH...` and `rdfs getcopies PATH...`: how
 * many copies of every chunk a file keeps, each on its own I/O server (the
 * rdfs.copies attribute; a directory's is the default of what is created in it).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

/*
 * Parse the options (--help, and --json where @json) of @cmd; -1 to go on,
 * else the exit status.
 */
static int copies_options(const struct tool_cmd *cmd, int argc, char **argv, int *json)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'h') {
			printf("%s", cmd->help);
			return TOOL_OK;
		}
		if (opt == 'j' && json) {
			*json = 1;
			continue;
		}
		return tool_usage(cmd, "unknown option");
	}
	return -1;
}

static int getcopies_run(struct tool *t, int argc, char **argv)
{
	int json = 0, first = 1, status = TOOL_OK;
	int ret = copies_options(&tool_cmd_getcopies, argc, argv, &json);

	if (ret >= 0)
		return ret;
	if (optind >= argc)
		return tool_usage(&tool_cmd_getcopies, "expected at least one PATH");
	if (json)
		printf("{\"entries\": [");
	for (int i = optind; i < argc; i++) {
		struct stat st;
		char v[16];

		ret = tool_resolve(t, argv[i], &st);
		if (!ret)
			ret = rdfs_getxattr(t->client, &t->cred, st.st_ino, RDFS_COPIES_XATTR, v,
					    sizeof(v) - 1);
		if (ret < 0) {
			status = tool_error("getcopies", argv[i],
					    ret == -ENODATA ? -EINVAL : ret);
			continue;
		}
		v[ret] = '\0';
		if (json) {
			printf("%s{\"path\": ", first ? "" : ", ");
			first = 0;
			tool_json_str(argv[i]);
			printf(", \"copies\": %s}", v);
			continue;
		}
		printf("%s: %s\n", argv[i], v);
	}
	if (json)
		printf("]}\n");
	return status;
}

static int setcopies_run(struct tool *t, int argc, char **argv)
{
	int ret = copies_options(&tool_cmd_setcopies, argc, argv, NULL), status = TOOL_OK;
	char *end;
	long n;

	if (ret >= 0)
		return ret;
	if (optind + 2 > argc)
		return tool_usage(&tool_cmd_setcopies, "expected N and at least one PATH");
	n = strtol(argv[optind], &end, 10);
	if (*argv[optind] == '\0' || *end || n < 1 || n > RDFS_MAX_COPIES)
		return tool_usage(&tool_cmd_setcopies,
				  "N must be a number from 1 to " RDFS_MAX_COPIES_STR);
	for (int i = optind + 1; i < argc; i++) {
		struct stat st;

		ret = tool_resolve(t, argv[i], &st);
		if (!ret && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
			ret = -EINVAL;
		if (!ret)
			ret = rdfs_setxattr(t->client, &t->cred, st.st_ino, RDFS_COPIES_XATTR,
					    argv[optind], strlen(argv[optind]), 0);
		if (ret)
			status = tool_error("setcopies", argv[i], ret);
	}
	return status;
}

const struct tool_cmd tool_cmd_getcopies = {
	.name = "getcopies",
	.args = "[--json] PATH...",
	.summary = "copies of every chunk a file keeps",
	.run = getcopies_run,
	.help =
	"usage: rdfs getcopies [--json] PATH...\n"
	"\n"
	"Print how many copies of each of its chunks the file PATH keeps, each on\n"
	"its own I/O server, or for a directory the number what is created in it\n"
	"starts with. Where neither the file nor a directory above it at its\n"
	"creation said otherwise, this is the cluster's default_copies. The same\n"
	"number is the rdfs.copies extended attribute (getfattr -n rdfs.copies).\n"
	"\n"
	"`rdfs layout PATH` shows where the copies are and which are stale.\n"
	"\n"
	"  --json        one JSON object: {\"entries\": [{\"path\", \"copies\"}]}\n",
};

const struct tool_cmd tool_cmd_setcopies = {
	.name = "setcopies",
	.args = "N PATH...",
	.summary = "set the copies of a file, or the default under a directory",
	.run = setcopies_run,
	.help =
	"usage: rdfs setcopies N PATH...\n"
	"\n"
	"Keep N copies (1 to " RDFS_MAX_COPIES_STR ") of every chunk of the file PATH, each on its\n"
	"own I/O server; for a directory, N is what files and directories created\n"
	"in it from now on start with (what exists keeps its own). Only the owner\n"
	"or root may change it. The same as setfattr -n rdfs.copies -v N PATH.\n"
	"\n"
	"Blocks allocated from then on get N copies. Reads fail over to another\n"
	"copy when an I/O server dies or errs, and writes reach every live copy\n"
	"before they are acknowledged; a copy that missed a write is marked stale\n"
	"and never read again. With fewer I/O servers up (or with room) than N,\n"
	"blocks get as many copies as there are, without an error.\n"
	"\n"
	"The metaserver's rebuilder brings existing blocks to N copies in the\n"
	"background (adding or dropping copies, rebuilding stale ones and those of\n"
	"a server down longer than its rebuild_grace); rdfs status shows progress.\n",
};
