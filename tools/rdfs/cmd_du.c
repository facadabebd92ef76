// SPDX-License-Identifier: MIT
/*
 * cmd_du.c - `rdfs du`: the space a tree uses, as du(1) prints it, counted
 * by the metaserver (WALK, rdfs_walk) instead of a stat per file through a
 * mount: -s asks it for sums only.
 *
 * Contract: run on the tool's one thread, with the tool's connected client;
 * everything allocated here (the directory stack, the table of inodes with
 * several links) is freed before the command returns.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

struct du_use {
	uint64_t apparent;  /* bytes of st_size */
	uint64_t allocated; /* bytes of allocated blocks */
	uint64_t files, dirs, others;
};

/* A directory being summed: its path (relative to the argument) and its total. */
struct du_dir {
	size_t len; /* of its path in du_state.rel */
	struct du_use use;
};

struct du_state {
	const char *arg; /* the argument as given */
	int summary, human, bytes, apparent, json;
	int first_json;
	int status;
	/* inodes with several links seen, to count once (sorted on insertion) */
	uint64_t *linked;
	size_t nlinked, caplinked;
	struct du_dir *stack;
	int depth, cap;
	char *rel; /* the path of the top directory */
	size_t rel_cap;
	struct du_use total; /* of every argument (-c) */
};

/* 1 if @ino was seen before (and now it is), 0 if not, -ENOMEM. */
static int seen_linked(struct du_state *s, uint64_t ino)
{
	size_t lo = 0, hi = s->nlinked;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->linked[mid] == ino)
			return 1;
		if (s->linked[mid] < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (s->nlinked == s->caplinked) {
		size_t cap = s->caplinked ? s->caplinked * 2 : 64;
		uint64_t *l = realloc(s->linked, cap * sizeof(*l));

		if (!l)
			return -ENOMEM;
		s->linked = l;
		s->caplinked = cap;
	}
	memmove(s->linked + lo + 1, s->linked + lo, (s->nlinked - lo) * sizeof(*s->linked));
	s->linked[lo] = ino;
	s->nlinked++;
	return 0;
}

static void use_add(struct du_use *to, const struct du_use *u)
{
	to->apparent += u->apparent;
	to->allocated += u->allocated;
	to->files += u->files;
	to->dirs += u->dirs;
	to->others += u->others;
}

static void use_of(const struct stat *st, struct du_use *u)
{
	memset(u, 0, sizeof(*u));
	u->apparent = (uint64_t)st->st_size;
	u->allocated = (uint64_t)st->st_blocks * 512;
	if (S_ISDIR(st->st_mode))
		u->dirs = 1;
	else if (S_ISREG(st->st_mode))
		u->files = 1;
	else
		u->others = 1;
}

/* "ARG" or "ARG/REL", as du and find print a path under their argument. */
static void print_path(const char *arg, const char *rel, size_t len, int json)
{
	size_t al = strlen(arg);
	char *p = malloc(al + len + 2);

	if (!p)
		return;
	memcpy(p, arg, al);
	if (len) {
		if (!al || arg[al - 1] != '/')
			p[al++] = '/';
		memcpy(p + al, rel, len);
		al += len;
	}
	p[al] = '\0';
	if (json)
		tool_json_str(p);
	else
		fputs(p, stdout);
	free(p);
}

static void du_print(struct du_state *s, const char *rel, size_t len, const struct du_use *u)
{
	uint64_t v = s->apparent ? u->apparent : u->allocated;
	char buf[32];

	if (s->json) {
		printf("%s{\"path\": ", s->first_json ? "" : ", ");
		s->first_json = 0;
		print_path(s->arg, rel, len, 1);
		printf(", \"apparent_bytes\": %llu, \"allocated_bytes\": %llu, \"files\": %llu, "
		       "\"dirs\": %llu, \"others\": %llu}",
		       (unsigned long long)u->apparent, (unsigned long long)u->allocated,
		       (unsigned long long)u->files, (unsigned long long)u->dirs,
		       (unsigned long long)u->others);
		return;
	}
	if (s->human)
		tool_human(v, buf, sizeof(buf));
	else if (s->bytes)
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	else
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)((v + 1023) / 1024));
	printf("%s\t", buf);
	print_path(s->arg, rel, len, 0);
	putchar('\n');
}

/* Close the top directory: print it, add it to its parent. */
static void du_pop(struct du_state *s)
{
	struct du_dir *d = &s->stack[s->depth];

	if (!s->summary)
		du_print(s, s->rel, d->len, &d->use);
	if (s->depth > 0)
		use_add(&s->stack[s->depth - 1].use, &d->use);
	s->depth--;
}

static int du_push(struct du_state *s, const char *rel, size_t len, const struct du_use *u)
{
	if (s->depth + 1 == s->cap) {
		int cap = s->cap ? s->cap * 2 : 32;
		struct du_dir *d = realloc(s->stack, (size_t)cap * sizeof(*d));

		if (!d)
			return -ENOMEM;
		s->stack = d;
		s->cap = cap;
	}
	if (len + 1 > s->rel_cap) {
		size_t cap = s->rel_cap ? s->rel_cap * 2 : 4096;
		char *r;

		while (cap < len + 1)
			cap *= 2;
		r = realloc(s->rel, cap);
		if (!r)
			return -ENOMEM;
		s->rel = r;
		s->rel_cap = cap;
	}
	memcpy(s->rel, rel, len);
	s->rel[len] = '\0';
	s->depth++;
	s->stack[s->depth].len = len;
	s->stack[s->depth].use = *u;
	return 0;
}

static int du_entry(void *arg, const struct rdfs_walk_entry *e)
{
	struct du_state *s = arg;
	struct du_use u;
	int ret;

	if (e->denied) {
		fprintf(stderr, "rdfs du: cannot read directory '");
		print_path(s->arg, e->path, e->path_len, 0);
		fflush(stdout);
		fprintf(stderr, "': %s\n", strerror(EACCES));
		s->status = TOOL_FAIL;
	}
	/* a file with several links counts once, where it is seen first */
	if (!S_ISDIR(e->st.st_mode) && e->st.st_nlink > 1) {
		ret = seen_linked(s, e->st.st_ino);
		if (ret < 0)
			return ret;
		if (ret)
			return 0;
	}
	use_of(&e->st, &u);
	if (s->summary) {
		/* only what the sums leave out comes here (and denied directories, counted) */
		if (!e->denied)
			use_add(&s->stack[0].use, &u);
		return 0;
	}
	/* leave the directories this entry is not under */
	while (s->depth > 0) {
		size_t dl = s->stack[s->depth].len;

		if (e->path_len > dl && !memcmp(e->path, s->rel, dl) && e->path[dl] == '/')
			break;
		du_pop(s);
		s->rel[s->stack[s->depth].len] = '\0';
	}
	if (S_ISDIR(e->st.st_mode))
		return du_push(s, e->path, e->path_len, &u);
	use_add(&s->stack[s->depth].use, &u);
	return 0;
}

static int du_one(struct tool *t, struct du_state *s, const char *path)
{
	struct rdfs_walk_sums sums = { 0 };
	struct du_use u;
	struct stat st;
	int ret = tool_resolve(t, path, &st);

	if (ret)
		return tool_error("du", path, ret);
	s->arg = path;
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		ret = seen_linked(s, st.st_ino);
		if (ret < 0)
			return tool_error("du", path, ret);
		if (ret)
			return TOOL_OK;
	}
	use_of(&st, &u);
	s->depth = -1;
	ret = du_push(s, "", 0, &u);
	if (!ret && S_ISDIR(st.st_mode))
		ret = rdfs_walk(t->client, &t->cred, st.st_ino, s->summary, du_entry, s, &sums);
	if (ret) {
		s->depth = -1;
		return tool_error("du", path, ret);
	}
	if (s->summary) {
		struct du_use *top = &s->stack[0].use;

		top->apparent += sums.bytes;
		top->allocated += sums.blocks * RDFS_BLOCK_SIZE;
		top->files += sums.files;
		top->dirs += sums.dirs;
		top->others += sums.others;
		use_add(&s->total, top);
		du_print(s, "", 0, top);
		s->depth = -1;
		return TOOL_OK;
	}
	while (s->depth > 0) {
		du_pop(s);
		s->rel[s->stack[s->depth].len] = '\0';
	}
	use_add(&s->total, &s->stack[0].use);
	du_pop(s);
	return TOOL_OK;
}

static int du_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'H' },
		{ "summarize", no_argument, NULL, 's' },
		{ "human-readable", no_argument, NULL, 'h' },
		{ "bytes", no_argument, NULL, 'b' },
		{ "apparent-size", no_argument, NULL, 'A' },
		{ "total", no_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct du_state s = { 0 };
	int opt, total = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "shbc", opts, NULL)) != -1) {
		switch (opt) {
		case 'H':
			printf("%s", tool_cmd_du.help);
			return TOOL_OK;
		case 's':
			s.summary = 1;
			break;
		case 'h':
			s.human = 1;
			break;
		case 'b':
			s.bytes = s.apparent = 1;
			break;
		case 'A':
			s.apparent = 1;
			break;
		case 'c':
			total = 1;
			break;
		case 'j':
			s.json = 1;
			break;
		default:
			return tool_usage(&tool_cmd_du, "unknown option");
		}
	}
	if (optind >= argc)
		return tool_usage(&tool_cmd_du, "expected at least one PATH");
	s.first_json = 1;
	if (s.json)
		printf("{\"entries\": [");
	for (int i = optind; i < argc; i++)
		if (du_one(t, &s, argv[i]) != TOOL_OK)
			s.status = TOOL_FAIL;
	if (total) {
		s.arg = "total";
		du_print(&s, "", 0, &s.total);
	}
	if (s.json)
		printf("]}\n");
	free(s.linked);
	free(s.stack);
	free(s.rel);
	return s.status;
}

const struct tool_cmd tool_cmd_du = {
	.name = "du",
	.args = "[-s] [-h] [-b] [--json] PATH...",
	.summary = "space used under directories, counted by the metaserver",
	.run = du_run,
	.own_h = 1,
	.help = "usage: rdfs du [-s] [-h | -b] [--apparent-size] [-c] [--json] PATH...\n"
		"\n"
		"Print the space each directory under each PATH uses, with everything below\n"
		"it, as du(1) does: after what it holds, one line each, the size then a TAB\n"
		"and the path (the PATH as given, then the path under it). The metaserver\n"
		"walks the tree itself, in batches (no stat per file through a mount, so a\n"
		"million files take seconds); with -s it only adds up, and sends just the\n"
		"sums.\n"
		"\n"
		"Sizes are the blocks allocated to the files (every copy: rdfs setcopies),\n"
		"in KiB rounded up, unless -h, -b or --apparent-size says otherwise. A file\n"
		"with several hard links is counted once. Only what you could list is\n"
		"counted: a directory you may not read and search is counted itself but not\n"
		"what it holds, with an error (exit status 1), as du(1) does.\n"
		"\n"
		"  -s, --summarize   one line per PATH, its total\n"
		"  -h, --human-readable   sizes as 1.5K, 12M, 3.0G (powers of 1024)\n"
		"  --apparent-size   the files' sizes (st_size) instead of the blocks they use\n"
		"  -b, --bytes       apparent sizes, in bytes (du -b)\n"
		"  -c, --total       a last line with the total of every PATH\n"
		"  --json        one JSON object: {\"entries\": [{\"path\", \"apparent_bytes\",\n"
		"                \"allocated_bytes\", \"files\", \"dirs\", \"others\"}]} for the\n"
		"                lines it would print, whatever the units asked for\n"
		"\n"
		"PATH is a path inside the rdfs namespace, from its root (/dir). The\n"
		"numbers match du --apparent-size -B1 and du -B1 on a mount, except for what\n"
		"changes while the walk runs.\n"
		"\n"
		"Exit status: 0, 1 if a PATH or a directory under it could not be read,\n"
		"2 usage error.\n",
};
