// SPDX-License-Identifier: MIT
/*
 * cmd_find.c - `rdfs find`: the files under a directory that match a few of
 * find(1)'s tests, the tree walked by the metaserver (WALK, rdfs_walk), the
 * tests applied here to what each batch brings.
 *
 * Contract: run on the tool's one thread, with the tool's connected client;
 * the parsed expression lives on the stack of find_run(), nothing outlives
 * the command.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

#define FIND_MAX_TESTS 32

enum find_kind {
	T_TYPE,
	T_NAME,
	T_SIZE,
	T_UID,
	T_GID,
	T_MTIME,
	T_MMIN
};

struct find_test {
	enum find_kind kind;
	int cmp;	  /* -1 less, 0 exactly, 1 more */
	long long n;	  /* the number (sizes: in units) */
	long long unit;	  /* -size: bytes per unit */
	mode_t type;	  /* -type */
	const char *glob; /* -name */
};

struct find_state {
	const char *arg;
	struct find_test t[FIND_MAX_TESTS];
	int n;
	int maxdepth, mindepth; /* -1: none */
	int json, first_json, status;
	time_t now;
};

/* [+-]N into @t: 0 or -EINVAL. */
static int parse_num(const char *s, struct find_test *t, char **end)
{
	t->cmp = *s == '+' ? 1 : *s == '-' ? -1 : 0;
	if (t->cmp)
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	t->n = strtoll(s, end, 10);
	return errno ? -EINVAL : 0;
}

static int cmp_ok(const struct find_test *t, long long v)
{
	return t->cmp > 0 ? v > t->n : t->cmp < 0 ? v < t->n : v == t->n;
}

/* The last component of the argument as given: what -name matches at depth 0. */
static const char *arg_name(const char *arg, char *buf, size_t len)
{
	size_t l = strlen(arg);
	const char *s;

	while (l > 1 && arg[l - 1] == '/')
		l--;
	if (l >= len)
		l = len - 1;
	memcpy(buf, arg, l);
	buf[l] = '\0';
	s = strrchr(buf, '/');
	return s && s[1] ? s + 1 : buf;
}

static int matches(const struct find_state *s, const char *name, const struct stat *st)
{
	for (int i = 0; i < s->n; i++) {
		const struct find_test *t = &s->t[i];
		long long v;

		switch (t->kind) {
		case T_TYPE:
			if ((st->st_mode & S_IFMT) != t->type)
				return 0;
			break;
		case T_NAME:
			if (fnmatch(t->glob, name, 0))
				return 0;
			break;
		case T_SIZE:
			/* as find: the size in units, rounded up */
			v = (long long)((st->st_size + t->unit - 1) / t->unit);
			if (!cmp_ok(t, v))
				return 0;
			break;
		case T_UID:
			if (!cmp_ok(t, st->st_uid))
				return 0;
			break;
		case T_GID:
			if (!cmp_ok(t, st->st_gid))
				return 0;
			break;
		case T_MTIME:
		case T_MMIN:
			v = (long long)(s->now - st->st_mtim.tv_sec);
			if (v < 0)
				v = 0;
			v /= t->kind == T_MTIME ? 86400 : 60;
			if (!cmp_ok(t, v))
				return 0;
			break;
		}
	}
	return 1;
}

static void print_full(const char *arg, const char *rel, size_t len, FILE *out, int json)
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
		fputs(p, out);
	free(p);
}

static void find_emit(struct find_state *s, const char *rel, size_t len, const struct stat *st)
{
	if (!s->json) {
		print_full(s->arg, rel, len, stdout, 0);
		putchar('\n');
		return;
	}
	printf("%s{\"path\": ", s->first_json ? "" : ", ");
	s->first_json = 0;
	print_full(s->arg, rel, len, stdout, 1);
	printf(", \"ino\": %llu, \"type\": \"%s\", \"mode\": %u, \"nlink\": %lu, \"uid\": %u, "
	       "\"gid\": %u, \"size\": %llu, \"allocated_bytes\": %llu, \"mtime_ns\": %lld}",
	       (unsigned long long)st->st_ino, tool_type_name(st->st_mode),
	       (unsigned int)(st->st_mode & 07777), (unsigned long)st->st_nlink, st->st_uid,
	       st->st_gid, (unsigned long long)st->st_size, (unsigned long long)st->st_blocks * 512,
	       (long long)st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec);
}

static int find_entry(void *arg, const struct rdfs_walk_entry *e)
{
	struct find_state *s = arg;
	const char *name = memrchr(e->path, '/', e->path_len);
	int depth = 1;

	for (size_t i = 0; i < e->path_len; i++)
		depth += e->path[i] == '/';
	name = name ? name + 1 : e->path;
	if ((s->maxdepth < 0 || depth <= s->maxdepth) && depth >= s->mindepth &&
	    matches(s, name, &e->st))
		find_emit(s, e->path, e->path_len, &e->st);
	if (e->denied) {
		fflush(stdout);
		fprintf(stderr, "rdfs find: '");
		print_full(s->arg, e->path, e->path_len, stderr, 0);
		fprintf(stderr, "': %s\n", strerror(EACCES));
		s->status = TOOL_FAIL;
	}
	return 0;
}

/* One test from argv[*i]; 0, or a usage message. */
static const char *parse_test(struct find_state *s, int argc, char **argv, int *i)
{
	const char *p = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	struct find_test *t = &s->t[s->n];
	char *end = NULL;

	if (!strcmp(p, "--json")) {
		s->json = 1;
		return NULL;
	}
	if (!v)
		return "a test lacks its argument";
	(*i)++;
	if (!strcmp(p, "-maxdepth") || !strcmp(p, "-mindepth")) {
		long d = strtol(v, &end, 10);

		if (!*v || *end || d < 0 || d > 1000000)
			return "-maxdepth and -mindepth take a number";
		*(p[2] == 'a' ? &s->maxdepth : &s->mindepth) = (int)d;
		return NULL;
	}
	if (s->n == FIND_MAX_TESTS)
		return "too many tests";
	memset(t, 0, sizeof(*t));
	if (!strcmp(p, "-type")) {
		static const char types[] = "fdlpscb";
		static const mode_t modes[] = { S_IFREG,  S_IFDIR, S_IFLNK, S_IFIFO,
						S_IFSOCK, S_IFCHR, S_IFBLK };
		const char *c = strchr(types, v[0]);

		if (!v[0] || v[1] || !c)
			return "-type is one of f d l p s c b";
		t->kind = T_TYPE;
		t->type = modes[c - types];
	} else if (!strcmp(p, "-name")) {
		t->kind = T_NAME;
		t->glob = v;
	} else if (!strcmp(p, "-size")) {
		t->kind = T_SIZE;
		if (parse_num(v, t, &end))
			return "-size is [+-]N[cwbkMG]";
		t->unit = 512;
		if (*end) {
			const char *u = strchr("cwbkMG", *end);
			static const long long units[] = { 1, 2, 512, 1024, 1 << 20, 1 << 30 };

			if (!u || end[1])
				return "-size is [+-]N[cwbkMG]";
			t->unit = units[u - "cwbkMG"];
		}
	} else if (!strcmp(p, "-uid") || !strcmp(p, "-gid")) {
		t->kind = p[1] == 'u' ? T_UID : T_GID;
		if (parse_num(v, t, &end) || *end)
			return "-uid and -gid take [+-]N";
	} else if (!strcmp(p, "-mtime") || !strcmp(p, "-mmin")) {
		t->kind = p[2] == 't' ? T_MTIME : T_MMIN;
		if (parse_num(v, t, &end) || *end)
			return "-mtime and -mmin take [+-]N";
	} else {
		(*i)--;
		return "unknown test";
	}
	s->n++;
	return NULL;
}

static int find_run(struct tool *t, int argc, char **argv)
{
	struct find_state s = { 0 };
	int first_test = 1, status = TOOL_OK;

	s.maxdepth = -1;
	s.first_json = 1;
	s.now = time(NULL);
	while (first_test < argc && argv[first_test][0] != '-')
		first_test++;
	for (int i = first_test; i < argc; i++) {
		const char *why = parse_test(&s, argc, argv, &i);

		if (why) {
			fprintf(stderr, "rdfs find: %s: %s\n", argv[i], why);
			return tool_usage(&tool_cmd_find, "bad expression");
		}
	}
	if (first_test == 1)
		return tool_usage(&tool_cmd_find, "expected at least one PATH");
	if (s.json)
		printf("{\"entries\": [");
	for (int i = 1; i < first_test; i++) {
		struct stat st;
		char buf[4096];
		int ret = tool_resolve(t, argv[i], &st);

		if (ret) {
			status = tool_error("find", argv[i], ret);
			continue;
		}
		s.arg = argv[i];
		s.status = TOOL_OK;
		if (s.mindepth <= 0 && matches(&s, arg_name(argv[i], buf, sizeof(buf)), &st))
			find_emit(&s, "", 0, &st);
		if (S_ISDIR(st.st_mode) && s.maxdepth != 0)
			ret = rdfs_walk(t->client, &t->cred, st.st_ino, 0, find_entry, &s, NULL);
		if (ret) {
			fflush(stdout);
			status = tool_error("find", argv[i], ret);
		} else if (s.status != TOOL_OK) {
			status = s.status;
		}
	}
	if (s.json)
		printf("]}\n");
	return status;
}

const struct tool_cmd tool_cmd_find = {
	.name = "find",
	.args = "PATH... [TEST...] [--json]",
	.summary = "files under directories matching tests, found by the metaserver",
	.run = find_run,
	.help = "usage: rdfs find PATH... [-type f|d|l|p|s|c|b] [-name GLOB] [-size [+-]N[cwbkMG]]\n"
		"                 [-uid [+-]N] [-gid [+-]N] [-mtime [+-]N] [-mmin [+-]N]\n"
		"                 [-maxdepth N] [-mindepth N] [--json]\n"
		"\n"
		"Print each file under each PATH (PATH itself included) that passes every\n"
		"test given, as find(1) does with those tests and -print: the PATH as given,\n"
		"then the path under it. The metaserver walks the tree itself, in batches\n"
		"of thousands of entries with their attributes (no lookup and stat per file\n"
		"through a mount); the tests are applied here. Entries of a directory come\n"
		"in byte order of their names, a directory before what it holds.\n"
		"\n"
		"  -type C       the file's type: f regular, d directory, l symbolic link,\n"
		"                p fifo, s socket, c and b devices\n"
		"  -name GLOB    its name (the last component) matches the shell pattern GLOB\n"
		"                (quote it: '*.dat')\n"
		"  -size [+-]N[cwbkMG]   its size in units of 512 bytes (or c bytes, w 2, k\n"
		"                KiB, M MiB, G GiB), rounded up, is more than (+), less than\n"
		"                (-) or exactly N, as find(1) counts it\n"
		"  -uid [+-]N, -gid [+-]N   its owner or group id\n"
		"  -mtime [+-]N  modified N days ago (whole days, rounded down)\n"
		"  -mmin [+-]N   modified N minutes ago (whole minutes, rounded down)\n"
		"  -maxdepth N, -mindepth N   only entries at most / at least N levels below\n"
		"                PATH (PATH is level 0)\n"
		"  --json        one JSON object: {\"entries\": [{\"path\", \"ino\", \"type\" (file,\n"
		"                dir, symlink, fifo, socket, char, block), \"mode\" (permission\n"
		"                bits), \"nlink\", \"uid\", \"gid\", \"size\", \"allocated_bytes\",\n"
		"                \"mtime_ns\"}]}\n"
		"\n"
		"Only what you could list is searched: a directory you may not read and\n"
		"search is tested itself but not what it holds, with an error (exit status\n"
		"1), as find(1) does. Symbolic links are not followed. PATH is a path inside\n"
		"the rdfs namespace, from its root (/dir).\n"
		"\n"
		"Exit status: 0, 1 if a PATH or a directory under it could not be read,\n"
		"2 usage error.\n",
};
