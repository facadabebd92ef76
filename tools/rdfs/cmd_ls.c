// SPDX-License-Identifier: MIT
/*
 * cmd_ls.c - `rdfs ls PATH`: a directory's entries (or one file), optionally
 * in long format.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tool.h"

static void print_long(const char *name, const struct stat *st)
{
	char mode[11], when[32];
	struct tm tm;

	tool_mode_string(st->st_mode, mode);
	localtime_r(&st->st_mtim.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
	printf("%s %3lu %6u %6u %12llu %s %s\n", mode, (unsigned long)st->st_nlink, st->st_uid,
	       st->st_gid, (unsigned long long)st->st_size, when, name);
}

/* One entry of --json; @st NULL: name, inode and type only. */
static void print_json_entry(int first, const char *name, uint64_t ino, mode_t type,
			     const struct stat *st)
{
	printf("%s{\"name\": ", first ? "" : ", ");
	tool_json_str(name);
	printf(", \"ino\": %llu, \"type\": \"%s\"", (unsigned long long)ino,
	       tool_type_name(type));
	if (st)
		printf(", \"mode\": %u, \"nlink\": %lu, \"uid\": %u, \"gid\": %u, "
		       "\"size\": %llu, \"mtime_ns\": %lld",
		       (unsigned int)(st->st_mode & 07777), (unsigned long)st->st_nlink, st->st_uid,
		       st->st_gid, (unsigned long long)st->st_size,
		       (long long)st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec);
	printf("}");
}

static int ls_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "long", no_argument, NULL, 'l' },
		{ "inode", no_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = "/";
	struct rdfs_dir *d;
	struct rdfs_dirent ent;
	struct stat st;
	uint64_t i;
	int opt, ret, lng = 0, inode = 0, json = 0, status = TOOL_OK;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "hlij", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			printf("%s", tool_cmd_ls.help);
			return TOOL_OK;
		case 'l':
			lng = 1;
			break;
		case 'i':
			inode = 1;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return tool_usage(&tool_cmd_ls, "unknown option");
		}
	}
	if (optind + 1 < argc)
		return tool_usage(&tool_cmd_ls, "expected at most one PATH");
	if (optind < argc)
		path = argv[optind];
	ret = tool_resolve(t, path, &st);
	if (ret)
		return tool_error("ls", path, ret);
	if (json) {
		printf("{\"path\": ");
		tool_json_str(path);
		printf(", \"entries\": [");
	}
	if (!S_ISDIR(st.st_mode)) {
		if (json) {
			print_json_entry(1, path, st.st_ino, st.st_mode, lng ? &st : NULL);
			printf("]}\n");
			return TOOL_OK;
		}
		if (inode)
			printf("%llu ", (unsigned long long)st.st_ino);
		if (lng)
			print_long(path, &st);
		else
			printf("%s\n", path);
		return TOOL_OK;
	}
	/* -l: the attributes come with the listing's pages (readdirplus) */
	ret = rdfs_opendir_flags(t->client, &t->cred, st.st_ino, lng ? RDFS_DIR_PLUS : 0, &d);
	if (ret) {
		if (json)
			printf("]}\n");
		return tool_error("ls", path, ret);
	}
	for (i = 0; (ret = rdfs_readdir_at(d, i, &ent)) == 1; i++) {
		if (lng && !ent.has_attr &&
		    rdfs_lookup(t->client, &t->cred, st.st_ino, ent.name, &ent.st) == 0)
			ent.has_attr = 1;
		if (json) {
			/* -l of an entry removed since the listing was read: no attributes */
			print_json_entry(i == 0, ent.name, ent.ino, ent.type,
					 lng && ent.has_attr ? &ent.st : NULL);
			continue;
		}
		if (inode)
			printf("%llu ", (unsigned long long)ent.ino);
		if (!lng) {
			printf("%s\n", ent.name);
			continue;
		}
		if (!ent.has_attr) {
			/* removed since the listing was read: say so, keep going */
			printf("?????????? %s\n", ent.name);
			continue;
		}
		print_long(ent.name, &ent.st);
	}
	if (json)
		printf("]}\n");
	if (ret < 0)
		status = tool_error("ls", path, ret);
	rdfs_closedir(d);
	return status;
}

const struct tool_cmd tool_cmd_ls = {
	.name = "ls",
	.args = "[-l] [-i] [--json] [PATH]",
	.summary = "list a directory of the rdfs namespace",
	.run = ls_run,
	.help =
	"usage: rdfs ls [-l] [-i] [--json] [PATH]\n"
	"\n"
	"List the entries of directory PATH (default /, the root of the rdfs\n"
	"namespace) in name order, or PATH itself if it is not a directory.\n"
	"\n"
	"  -l, --long    mode, links, uid, gid, size, mtime and name\n"
	"  -i, --inode   print each entry's inode number first\n"
	"  --json        one JSON object: {\"path\", \"entries\": [{\"name\", \"ino\", \"type\"\n"
	"                (file, dir, symlink, fifo, socket, char, block)}]}; with -l each\n"
	"                entry also has \"mode\" (permission bits), \"nlink\", \"uid\",\n"
	"                \"gid\", \"size\" and \"mtime_ns\"\n",
};
