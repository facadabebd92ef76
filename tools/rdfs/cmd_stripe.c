// SPDX-License-Identifier: MIT
/*
 * cmd_stripe.c - `rdfs getstripe` and `rdfs setstripe`: a file's layout
 * (chunk size, stripe count, first I/O server), or a directory's default
 * for what is created in it, as Lustre's lfs getstripe/setstripe -S -c -i.
 * Both go through the rdfs.stripe attribute (metaserver/ns_xattr.c).
 *
 * Contract: run on the tool's one thread, with the tool's connected client;
 * everything allocated here is freed before the command returns.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tool.h"

struct stripe {
	long long chunk_size, count, index;
};

/* "chunk_size=N stripe_count=N stripe_index=N" into @s: 0 or -EPROTO. */
static int stripe_parse(const char *v, struct stripe *s)
{
	return sscanf(v, "chunk_size=%lld stripe_count=%lld stripe_index=%lld", &s->chunk_size,
		      &s->count, &s->index) == 3 ?
		       0 :
		       -EPROTO;
}

static int stripe_get(struct tool *t, uint64_t ino, struct stripe *s)
{
	char v[128];
	int n = rdfs_getxattr(t->client, &t->cred, ino, RDFS_STRIPE_XATTR, v, sizeof(v) - 1);

	if (n < 0)
		return n == -ENODATA ? -EINVAL : n;
	v[n] = '\0';
	return stripe_parse(v, s);
}

/*
 * The ids of the servers holding the first copy of each chunk of @st, in
 * chunk order, each once (at most @max); their count.
 */
static int chunk_servers(struct tool *t, const struct stat *st, uint32_t *ids, int max)
{
	struct rdfs_extent_info *ext;
	uint64_t span = (uint64_t)st->st_size + (uint64_t)st->st_blocks * 512;
	int n, k = 0;

	if (!span || !S_ISREG(st->st_mode))
		return 0;
	ext = calloc(4096, sizeof(*ext));
	if (!ext)
		return -ENOMEM;
	n = rdfs_layout(t->client, &t->cred, st->st_ino, 0, span, ext, 4096);
	for (int i = 0; i < n && i < 4096 && k < max; i++) {
		int seen = 0;

		if (ext[i].stale)
			continue;
		for (int j = 0; j < k; j++)
			seen |= ids[j] == ext[i].server_id;
		if (!seen)
			ids[k++] = ext[i].server_id;
	}
	free(ext);
	return n < 0 ? n : k;
}

static int getstripe_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "stripe-size", no_argument, NULL, 'S' },
		{ "stripe-count", no_argument, NULL, 'c' },
		{ "stripe-index", no_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, ret, json = 0, only = 0, status = TOOL_OK, first = 1;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "hSci", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			printf("%s", tool_cmd_getstripe.help);
			return TOOL_OK;
		case 'S':
		case 'c':
		case 'i':
			if (only && only != opt)
				return tool_usage(&tool_cmd_getstripe,
						  "-S, -c and -i each print one value: give one");
			only = opt;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return tool_usage(&tool_cmd_getstripe, "unknown option");
		}
	}
	if (optind >= argc)
		return tool_usage(&tool_cmd_getstripe, "expected at least one PATH");
	if (json)
		printf("{\"entries\": [");
	for (int i = optind; i < argc; i++) {
		struct stripe s;
		struct stat st;
		uint32_t ids[256];
		int n = 0;

		ret = tool_resolve(t, argv[i], &st);
		if (!ret && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
			ret = -EINVAL;
		if (!ret)
			ret = stripe_get(t, st.st_ino, &s);
		if (!ret && !only)
			n = chunk_servers(t, &st, ids, 256);
		if (ret || n < 0) {
			status = tool_error("getstripe", argv[i], ret ? ret : n);
			continue;
		}
		if (json) {
			printf("%s{\"path\": ", first ? "" : ", ");
			tool_json_str(argv[i]);
			printf(", \"type\": \"%s\", \"chunk_size\": %lld, \"stripe_count\": %lld, "
			       "\"stripe_index\": %lld",
			       tool_type_name(st.st_mode), s.chunk_size, s.count, s.index);
			if (S_ISREG(st.st_mode)) {
				printf(", \"servers\": [");
				for (int k = 0; k < n; k++)
					printf("%s%u", k ? ", " : "", ids[k]);
				printf("]");
			}
			printf("}");
			first = 0;
			continue;
		}
		if (only) {
			printf("%lld\n", only == 'S' ? s.chunk_size :
					 only == 'c' ? s.count :
						       s.index);
			continue;
		}
		printf("%s\n", argv[i]);
		printf("chunk_size:    %lld\n", s.chunk_size);
		printf("stripe_count:  %lld\n", s.count);
		printf("stripe_index:  %lld\n", s.index);
		if (S_ISREG(st.st_mode)) {
			printf("servers:      ");
			for (int k = 0; k < n; k++)
				printf(" %u", ids[k]);
			printf("%s\n", n ? "" : " -");
		}
	}
	if (json)
		printf("]}\n");
	return status;
}

/* "4M", "65536", "64k" (powers of 1024) into *@out: 0 or -EINVAL. */
static int parse_size(const char *s, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || v < 0)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	}
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Is @id the id of an I/O server the metaserver knows? 1, 0 or -errno. */
static int server_exists(struct tool *t, long long id)
{
	struct rdfs_server_info *srv;
	int n = rdfs_server_list(t->client, NULL, 0), found = 0;

	if (n <= 0)
		return n;
	srv = calloc(n, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	n = rdfs_server_list(t->client, srv, n);
	for (int i = 0; i < n; i++)
		found |= srv[i].id == id;
	free(srv);
	return n < 0 ? n : found;
}

/* Resolve @path, creating it as an empty regular file if it does not exist. */
static int resolve_or_create(struct tool *t, const char *path, struct stat *st, int *created)
{
	char dir[4096];
	const char *name = strrchr(path, '/');
	struct stat pst;
	mode_t mask;
	int ret = tool_resolve(t, path, st);

	*created = 0;
	if (ret != -ENOENT || !name || !name[1] || strlen(path) >= sizeof(dir))
		return ret;
	memcpy(dir, path, (size_t)(name - path));
	dir[name - path] = '\0';
	ret = tool_resolve(t, dir[0] ? dir : "/", &pst);
	if (ret)
		return ret;
	mask = umask(0);
	umask(mask);
	ret = rdfs_mknod(t->client, &t->cred, pst.st_ino, name + 1, S_IFREG | (0666 & ~mask), 0,
			 st);
	*created = ret == 0;
	return ret;
}

static int setstripe_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "stripe-size", required_argument, NULL, 'S' },
		{ "stripe-count", required_argument, NULL, 'c' },
		{ "stripe-index", required_argument, NULL, 'i' },
		{ "delete", no_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	struct stripe want = { -2, -2, -2 };
	int opt, ret, del = 0, status = TOOL_OK;
	char value[128], *end;
	size_t len = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "hS:c:i:d", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			printf("%s", tool_cmd_setstripe.help);
			return TOOL_OK;
		case 'S':
			if (parse_size(optarg, &want.chunk_size) || want.chunk_size < 4096 ||
			    want.chunk_size > RDFS_MAX_CHUNK || want.chunk_size % 4096)
				return tool_usage(&tool_cmd_setstripe,
						  "-S is a multiple of 4K from 4K to 64M");
			break;
		case 'c':
			errno = 0;
			want.count = strtoll(optarg, &end, 10);
			if (errno || !*optarg || *end || want.count < -1 ||
			    want.count > RDFS_MAX_STRIPE_COUNT)
				return tool_usage(&tool_cmd_setstripe,
						  "-c is -1 or 0 (all servers) or 1 to 256");
			if (want.count == 0)
				want.count = -1;
			break;
		case 'i':
			errno = 0;
			want.index = strtoll(optarg, &end, 10);
			if (errno || !*optarg || *end || want.index < -1 || want.index > UINT32_MAX)
				return tool_usage(&tool_cmd_setstripe,
						  "-i is an I/O server id, or -1 for any");
			break;
		case 'd':
			del = 1;
			break;
		default:
			return tool_usage(&tool_cmd_setstripe, "unknown option");
		}
	}
	if (optind >= argc)
		return tool_usage(&tool_cmd_setstripe, "expected at least one PATH");
	if (del && (want.chunk_size != -2 || want.count != -2 || want.index != -2))
		return tool_usage(&tool_cmd_setstripe, "-d takes no -S, -c or -i");
	if (!del && want.chunk_size == -2 && want.count == -2 && want.index == -2)
		return tool_usage(&tool_cmd_setstripe, "expected -S, -c, -i or -d");
	if (want.index >= 0) {
		ret = server_exists(t, want.index);
		if (ret < 0)
			return tool_error("setstripe", "server list", ret);
		if (!ret) {
			fprintf(stderr,
				"rdfs setstripe: no I/O server has id %lld (rdfs servers list)\n",
				want.index);
			return TOOL_FAIL;
		}
	}
	value[0] = '\0';
	if (want.chunk_size != -2)
		len += snprintf(value + len, sizeof(value) - len, "chunk_size=%lld ",
				want.chunk_size);
	if (want.count != -2)
		len += snprintf(value + len, sizeof(value) - len, "stripe_count=%lld ", want.count);
	if (want.index != -2)
		len += snprintf(value + len, sizeof(value) - len, "stripe_index=%lld ", want.index);
	for (int i = optind; i < argc; i++) {
		struct stat st;
		int created = 0;

		ret = del ? tool_resolve(t, argv[i], &st) :
			    resolve_or_create(t, argv[i], &st, &created);
		if (!ret && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
			ret = -EINVAL;
		if (!ret && del)
			ret = rdfs_removexattr(t->client, &t->cred, st.st_ino, RDFS_STRIPE_XATTR);
		else if (!ret)
			ret = rdfs_setxattr(t->client, &t->cred, st.st_ino, RDFS_STRIPE_XATTR,
					    value, len, 0);
		if (ret == -EBUSY) {
			fprintf(stderr,
				"rdfs setstripe: %s: the file has blocks already; a file takes a "
				"layout only while it has none (set it on a new file, or as the "
				"directory's default before the files are written)\n",
				argv[i]);
			status = TOOL_FAIL;
		} else if (ret == -EPERM) {
			fprintf(stderr,
				"rdfs setstripe: %s: only the owner or root may change the layout\n",
				argv[i]);
			status = TOOL_FAIL;
		} else if (ret) {
			status = tool_error("setstripe", argv[i], ret);
		}
		if (ret && created)
			fprintf(stderr, "rdfs setstripe: %s was created empty\n", argv[i]);
	}
	return status;
}

const struct tool_cmd tool_cmd_getstripe = {
	.name = "getstripe",
	.args = "[-S|-c|-i] [--json] PATH...",
	.summary = "chunk size, stripe count and first server of files or directories",
	.run = getstripe_run,
	.help = "usage: rdfs getstripe [-S | -c | -i] [--json] PATH...\n"
		"\n"
		"Print the layout of each regular file or directory PATH, as Lustre's\n"
		"lfs getstripe does:\n"
		"\n"
		"  chunk_size    bytes of a file that go to one I/O server before the next\n"
		"                chunk goes to the next server (Lustre's stripe size)\n"
		"  stripe_count  how many I/O servers the chunks spread over; -1: all of\n"
		"                the servers taking blocks at the time a chunk is allocated\n"
		"  stripe_index  the id of the I/O server chunk 0 goes to; -1: the\n"
		"                metaserver's choice (files are spread round the servers)\n"
		"  servers       (files) the servers holding chunks now, first copies, in\n"
		"                chunk order\n"
		"\n"
		"For a directory, these are the defaults what is created in it from now on\n"
		"starts with (rdfs setstripe on the directory). Chunk i of a file goes to\n"
		"the server stripe_index + (i modulo stripe_count) in the list of I/O\n"
		"servers that take blocks, sorted by id; copies (rdfs setcopies) go to the\n"
		"servers after it. The same text is the rdfs.stripe extended attribute\n"
		"(getfattr -n rdfs.stripe).\n"
		"\n"
		"  -S, --stripe-size   print only the chunk size\n"
		"  -c, --stripe-count  print only the stripe count\n"
		"  -i, --stripe-index  print only the first server\n"
		"  --json        one JSON object: {\"entries\": [{\"path\", \"type\" (file, dir),\n"
		"                \"chunk_size\", \"stripe_count\", \"stripe_index\", and for files\n"
		"                \"servers\": [ids]}]}\n"
		"\n"
		"PATH is a path inside the rdfs namespace, from its root (/dir/file).\n"
		"Exit status: 0, or 1 if a PATH could not be read.\n",
};

const struct tool_cmd tool_cmd_setstripe = {
	.name = "setstripe",
	.args = "[-S SIZE] [-c COUNT] [-i ID] [-d] PATH...",
	.summary = "set the layout of a new file, or a directory's default",
	.run = setstripe_run,
	.help = "usage: rdfs setstripe [-S CHUNK_SIZE] [-c STRIPE_COUNT] [-i FIRST_SERVER] PATH...\n"
		"       rdfs setstripe -d DIRECTORY...\n"
		"\n"
		"Set the layout of each PATH, as Lustre's lfs setstripe -S -c -i does. What\n"
		"is not given stays as it is.\n"
		"\n"
		"A regular file takes a layout only while it has no blocks: a PATH that does\n"
		"not exist is created, empty, with the layout; an empty (or truncated to\n"
		"nothing) file takes it; a file with data is refused (its chunks are where\n"
		"they are: copy it into a new file to move them). For a directory the layout\n"
		"is the default of what is created in it from now on, files and directories\n"
		"alike (so subdirectories pass it on); what exists keeps its own.\n"
		"\n"
		"  -S, --stripe-size CHUNK_SIZE\n"
		"                bytes of the file on one I/O server before the next chunk:\n"
		"                a multiple of 4K from 4K to 64M (suffixes K, M)\n"
		"  -c, --stripe-count STRIPE_COUNT\n"
		"                how many I/O servers the file's chunks spread over: 1 to 256;\n"
		"                -1 or 0: all that take blocks (a count above the servers\n"
		"                there are is all of them)\n"
		"  -i, --stripe-index FIRST_SERVER\n"
		"                the id of the I/O server of chunk 0 (rdfs servers list); the\n"
		"                next chunks go to the servers after it by id. -1: the\n"
		"                metaserver's choice, a different first server per file. A\n"
		"                first server that is down, read-only or drained when a chunk\n"
		"                is allocated is passed over for the next one.\n"
		"  -d, --delete  back to the defaults: the cluster's chunk size, all\n"
		"                servers, the metaserver's choice of first server\n"
		"\n"
		"Only the owner of PATH or root may change it. It is the rdfs.stripe\n"
		"extended attribute: setfattr -n rdfs.stripe -v \"stripe_count=2\" PATH does\n"
		"the same through a mount. Copies (rdfs setcopies) are kept on distinct\n"
		"servers whatever the stripe count: the second copy of a chunk goes to the\n"
		"server after the first's, also outside the stripe.\n"
		"\n"
		"Examples:\n"
		"  rdfs setstripe -c 2 -S 4M /data/results     (a directory's default)\n"
		"  rdfs setstripe -c 1 -i 3 /data/one-server.bin   (a new, empty file)\n"
		"\n"
		"Exit status: 0, 1 if a PATH was refused, 2 usage error.\n",
};
