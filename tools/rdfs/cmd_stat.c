// SPDX-License-Identifier: MIT
/*
 * cmd_stat.c - `rdfs stat PATH`: a file's attributes, as stat(1) prints them.
 */
#include <getopt.h>
#include <stdio.h>
#include <time.h>

#include "frame.h"
#include "tool.h"

static const char *type_name(mode_t mode)
{
	if (S_ISREG(mode))
		return "regular file";
	if (S_ISDIR(mode))
		return "directory";
	if (S_ISLNK(mode))
		return "symbolic link";
	if (S_ISCHR(mode))
		return "character special file";
	if (S_ISBLK(mode))
		return "block special file";
	if (S_ISFIFO(mode))
		return "fifo";
	if (S_ISSOCK(mode))
		return "socket";
	return "unknown";
}

static void print_time(const char *label, const struct timespec *ts)
{
	struct tm tm;
	char buf[64], zone[16];

	localtime_r(&ts->tv_sec, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);
	printf("%s: %s.%09ld %s\n", label, buf, ts->tv_nsec, zone);
}

static int stat_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct stat st;
	char mode[11], target[RDFS_SYMLINK_MAX + 1];
	int opt, ret, i, status = TOOL_OK, json = 0, first = 1;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'h') {
			printf("%s", tool_cmd_stat.help);
			return TOOL_OK;
		}
		if (opt == 'j') {
			json = 1;
			continue;
		}
		return tool_usage(&tool_cmd_stat, "unknown option");
	}
	if (optind >= argc)
		return tool_usage(&tool_cmd_stat, "expected PATH");
	if (json)
		printf("{\"entries\": [");
	for (i = optind; i < argc; i++) {
		ret = tool_resolve(t, argv[i], &st);
		if (ret) {
			status = tool_error("stat", argv[i], ret);
			continue;
		}
		if (json) {
			printf("%s{\"path\": ", first ? "" : ", ");
			first = 0;
			tool_json_str(argv[i]);
			printf(", \"ino\": %llu, \"type\": \"%s\", \"mode\": %u, \"nlink\": %lu, "
			       "\"uid\": %u, \"gid\": %u, \"size\": %llu, \"blocks\": %llu, "
			       "\"blksize\": %lu, \"atime_ns\": %lld, \"mtime_ns\": %lld, "
			       "\"ctime_ns\": %lld", (unsigned long long)st.st_ino,
			       tool_type_name(st.st_mode), (unsigned int)(st.st_mode & 07777),
			       (unsigned long)st.st_nlink, st.st_uid, st.st_gid,
			       (unsigned long long)st.st_size, (unsigned long long)st.st_blocks,
			       (unsigned long)st.st_blksize,
			       (long long)st.st_atim.tv_sec * 1000000000ll + st.st_atim.tv_nsec,
			       (long long)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec,
			       (long long)st.st_ctim.tv_sec * 1000000000ll + st.st_ctim.tv_nsec);
			if (S_ISLNK(st.st_mode) &&
			    rdfs_readlink(t->client, &t->cred, st.st_ino, target, sizeof(target)) >= 0) {
				printf(", \"target\": ");
				tool_json_str(target);
			}
			printf("}");
			continue;
		}
		tool_mode_string(st.st_mode, mode);
		if (S_ISLNK(st.st_mode) &&
		    rdfs_readlink(t->client, &t->cred, st.st_ino, target, sizeof(target)) >= 0)
			printf("  File: %s -> %s\n", argv[i], target);
		else
			printf("  File: %s\n", argv[i]);
		printf("  Size: %-15llu Blocks: %-10llu IO Block: %-6lu %s\n",
		       (unsigned long long)st.st_size, (unsigned long long)st.st_blocks,
		       (unsigned long)st.st_blksize, type_name(st.st_mode));
		printf(" Inode: %-15llu Links: %lu\n", (unsigned long long)st.st_ino,
		       (unsigned long)st.st_nlink);
		printf("Access: (%04o/%s)  Uid: %u  Gid: %u\n", st.st_mode & 07777, mode,
		       st.st_uid, st.st_gid);
		print_time("Access", &st.st_atim);
		print_time("Modify", &st.st_mtim);
		print_time("Change", &st.st_ctim);
	}
	if (json)
		printf("]}\n");
	return status;
}

const struct tool_cmd tool_cmd_stat = {
	.name = "stat",
	.args = "[--json] PATH...",
	.summary = "attributes of files, as stat(1) prints them",
	.run = stat_run,
	.help =
	"usage: rdfs stat [--json] PATH...\n"
	"\n"
	"Print the attributes the metaserver holds for each PATH (a path from the\n"
	"root of the rdfs namespace, e.g. /dir/file): size, allocated 512-byte\n"
	"blocks, the chunk size as IO Block, type, inode, link count, mode, owner\n"
	"and times. Symbolic links are not followed.\n"
	"\n"
	"  --json        one JSON object: {\"entries\": [{\"path\", \"ino\", \"type\" (file,\n"
	"                dir, symlink, fifo, socket, char, block), \"mode\" (permission\n"
	"                bits), \"nlink\", \"uid\", \"gid\", \"size\", \"blocks\" (512 bytes),\n"
	"                \"blksize\", \"atime_ns\", \"mtime_ns\", \"ctime_ns\", and for a\n"
	"                symbolic link \"target\"}]}\n",
};
