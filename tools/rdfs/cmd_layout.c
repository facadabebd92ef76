// SPDX-License-Identifier: MIT
/*
 * cmd_layout.c - `rdfs layout PATH`: where a file's blocks are.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "tool.h"

static int layout_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct rdfs_extent_info *ext = NULL;
	struct stat st;
	int opt, n, max = 1024, i, ret, copies, json = 0;
	uint64_t span;
	char v[16];

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'h') {
			printf("%s", tool_cmd_layout.help);
			return TOOL_OK;
		}
		if (opt == 'j') {
			json = 1;
			continue;
		}
		return tool_usage(&tool_cmd_layout, "unknown option");
	}
	if (optind + 1 != argc)
		return tool_usage(&tool_cmd_layout, "expected one PATH");
	ret = tool_resolve(t, argv[optind], &st);
	if (ret)
		return tool_error("layout", argv[optind], ret);
	if (!S_ISREG(st.st_mode))
		return tool_error("layout", argv[optind], S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL);

	/* blocks allocated past the committed size (writes in progress) count too */
	span = (uint64_t)st.st_size + (uint64_t)st.st_blocks * 512;
	for (;;) {
		free(ext);
		ext = calloc(max, sizeof(*ext));
		if (!ext)
			return tool_error("layout", argv[optind], -ENOMEM);
		n = span ? rdfs_layout(t->client, &t->cred, st.st_ino, 0, span, ext, max) : 0;
		if (n < 0) {
			free(ext);
			return tool_error("layout", argv[optind], n);
		}
		if (n <= max)
			break;
		max = n;
	}
	copies = rdfs_getxattr(t->client, &t->cred, st.st_ino, RDFS_COPIES_XATTR, v, sizeof(v) - 1);
	if (copies > 0)
		v[copies] = '\0';
	if (json) {
		printf("{\"path\": ");
		tool_json_str(argv[optind]);
		printf(", \"ino\": %llu, \"size\": %llu, \"chunk_size\": %lu, \"blocks\": %llu, "
		       "\"copies\": %s, \"extents\": [", (unsigned long long)st.st_ino,
		       (unsigned long long)st.st_size, (unsigned long)st.st_blksize,
		       (unsigned long long)st.st_blocks / 8, copies > 0 ? v : "null");
		for (i = 0; i < n; i++)
			printf("%s{\"file_offset\": %llu, \"length\": %llu, \"server\": %u, "
			       "\"block\": %llu, \"state\": \"%s\"}", i ? ", " : "",
			       (unsigned long long)ext[i].file_offset,
			       (unsigned long long)ext[i].length, ext[i].server_id,
			       (unsigned long long)ext[i].block,
			       ext[i].building ? "building" : ext[i].stale ? "stale" :
			       ext[i].unwritten ? "unwritten" : "written");
		printf("]}\n");
		free(ext);
		return TOOL_OK;
	}
	printf("path:        %s\n", argv[optind]);
	printf("inode:       %llu\n", (unsigned long long)st.st_ino);
	printf("size:        %llu\n", (unsigned long long)st.st_size);
	printf("chunk size:  %lu\n", (unsigned long)st.st_blksize);
	printf("blocks:      %llu (4 KiB)\n", (unsigned long long)st.st_blocks / 8);
	if (copies > 0)
		printf("copies:      %s\n", v);
	printf("extents:     %d\n", n);
	if (n)
		printf("%14s  %12s  %6s  %12s  %s\n", "FILE_OFFSET", "LENGTH", "SERVER", "BLOCK",
		       "STATE");
	for (i = 0; i < n; i++) {
		const char *state = ext[i].building ? "building" : ext[i].stale ? "stale" :
				    ext[i].unwritten ? "unwritten" : "written";

		printf("%14llu  %12llu  %6u  %12llu  %s\n",
		       (unsigned long long)ext[i].file_offset, (unsigned long long)ext[i].length,
		       ext[i].server_id, (unsigned long long)ext[i].block, state);
	}
	free(ext);
	return TOOL_OK;
}

const struct tool_cmd tool_cmd_layout = {
	.name = "layout",
	.args = "[--json] PATH",
	.summary = "chunk size, size and extents (offset, length, server, block) of a file",
	.run = layout_run,
	.help =
	"usage: rdfs layout [--json] PATH\n"
	"\n"
	"Print the layout of the regular file PATH: its chunk size, size, and every\n"
	"extent: the file offset and length it covers, the I/O server id and the\n"
	"first volume block (4 KiB) where it lives, and whether it is written or still\n"
	"unwritten (allocated by a writer that has not committed yet; it reads as\n"
	"zeros). Ranges without an extent are holes.\n"
	"\n"
	"A file with several copies (rdfs setcopies) has one extent per copy of a\n"
	"range, each on another server, listed by offset. A copy whose server\n"
	"missed a write is \"stale\": it is never read, and the metaserver frees it\n"
	"once the range has its copies elsewhere. A copy the metaserver is making\n"
	"(rebuilding a lost or stale one, adding one after rdfs setcopies) is\n"
	"\"building\" until its bytes are all in; it is never read either.\n"
	"\n"
	"PATH is a path inside the rdfs namespace starting at its root, e.g.\n"
	"/dir/file (not a path through a mount point). Symbolic links are not\n"
	"followed.\n"
	"\n"
	"  --json        one JSON object: {\"path\", \"ino\", \"size\", \"chunk_size\",\n"
	"                \"blocks\" (4 KiB), \"copies\", \"extents\": [{\"file_offset\",\n"
	"                \"length\", \"server\", \"block\", \"state\" (written, unwritten,\n"
	"                stale, building)}]}\n",
};
