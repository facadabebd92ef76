// SPDX-License-Identifier: MIT
/*
 * cmd_find.c - `rdfs find`: the files under a directory that match an
 * expression of a few of find(1)'s tests, operators and actions, the tree
 * walked by the metaserver (WALK, rdfs_walk), the expression evaluated here
 * on each entry a batch brings.
 *
 * The expression is parsed as find(1) does, by recursive descent with its
 * precedence: ( ) binds first, then ! (-not), then -a (-and, or nothing
 * between two terms), then -o (-or); each operator evaluates left to right
 * and stops as soon as the result is known, so an action runs only when what
 * is left of it passed. Without an action the whole expression is
 * ( EXPR ) -print. -maxdepth, -mindepth and --json are options: they apply
 * to the whole walk wherever they stand, and as terms they are true.
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

/* Terms, operators and actions of one expression, the implicit ones included. */
#define FIND_MAX_NODES 64

enum find_kind {
	/* tests */
	T_TYPE,
	T_NAME,
	T_SIZE,
	T_UID,
	T_GID,
	T_MTIME,
	T_MMIN,
	/* an option as a term: always true */
	N_TRUE,
	/* operators */
	N_NOT,
	N_AND,
	N_OR,
	/* actions */
	N_PRINT,
	N_PRINT0
};

/* A node of the expression tree: a test, an operator over nodes a (and b), or an action. */
struct find_test {
	enum find_kind kind;
	int a, b;	  /* operands: indices in find_state.t */
	int cmp;	  /* -1 less, 0 exactly, 1 more */
	long long n;	  /* the number (sizes: in units) */
	long long unit;	  /* -size: bytes per unit */
	mode_t type;	  /* -type */
	const char *glob; /* -name */
};

struct find_state {
	const char *arg;
	struct find_test t[FIND_MAX_NODES];
	int n;
	int root;		/* the expression, its implicit -print included */
	int has_action;		/* the expression names -print or -print0 */
	int maxdepth, mindepth; /* -1: none */
	int json, first_json, status;
	time_t now;
	/* the parser: argv[pos] is the next token, why the first error */
	int argc, pos;
	char **argv;
	const char *why;
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

static int test_ok(const struct find_state *s, const struct find_test *t, const char *name,
		   const struct stat *st)
{
	long long v;

	switch (t->kind) {
	case T_TYPE:
		return (st->st_mode & S_IFMT) == t->type;
	case T_NAME:
		return !fnmatch(t->glob, name, 0);
	case T_SIZE:
		/* as find: the size in units, rounded up */
		v = (long long)((st->st_size + t->unit - 1) / t->unit);
		return cmp_ok(t, v);
	case T_UID:
		return cmp_ok(t, st->st_uid);
	case T_GID:
		return cmp_ok(t, st->st_gid);
	case T_MTIME:
	case T_MMIN:
		v = (long long)(s->now - st->st_mtim.tv_sec);
		if (v < 0)
			v = 0;
		v /= t->kind == T_MTIME ? 86400 : 60;
		return cmp_ok(t, v);
	default:
		return 1;
	}
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

/* -print (@nul 0) or -print0 (1); with --json either is one entry. */
static void find_emit(struct find_state *s, const char *rel, size_t len, const struct stat *st,
		      int nul)
{
	if (!s->json) {
		print_full(s->arg, rel, len, stdout, 0);
		putchar(nul ? '\0' : '\n');
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

/* Node @k on an entry (@rel, @len under the PATH; @name its last component): true or false. */
static int eval(struct find_state *s, int k, const char *rel, size_t len, const char *name,
		const struct stat *st)
{
	const struct find_test *t = &s->t[k];

	switch (t->kind) {
	case N_NOT:
		return !eval(s, t->a, rel, len, name, st);
	case N_AND:
		return eval(s, t->a, rel, len, name, st) && eval(s, t->b, rel, len, name, st);
	case N_OR:
		return eval(s, t->a, rel, len, name, st) || eval(s, t->b, rel, len, name, st);
	case N_PRINT:
	case N_PRINT0:
		find_emit(s, rel, len, st, t->kind == N_PRINT0);
		return 1;
	default:
		return test_ok(s, t, name, st);
	}
}

static int find_entry(void *arg, const struct rdfs_walk_entry *e)
{
	struct find_state *s = arg;
	const char *name = memrchr(e->path, '/', e->path_len);
	int depth = 1;

	for (size_t i = 0; i < e->path_len; i++)
		depth += e->path[i] == '/';
	name = name ? name + 1 : e->path;
	if ((s->maxdepth < 0 || depth <= s->maxdepth) && depth >= s->mindepth)
		eval(s, s->root, e->path, e->path_len, name, &e->st);
	if (e->denied) {
		fflush(stdout);
		fprintf(stderr, "rdfs find: '");
		print_full(s->arg, e->path, e->path_len, stderr, 0);
		fprintf(stderr, "': %s\n", strerror(EACCES));
		s->status = TOOL_FAIL;
	}
	return 0;
}

/* A new node of @kind over @a and @b; -1 when the expression is too long. */
static int node_new(struct find_state *s, enum find_kind kind, int a, int b)
{
	struct find_test *t;

	if (s->n == FIND_MAX_NODES) {
		s->why = "too many tests";
		return -1;
	}
	t = &s->t[s->n];
	memset(t, 0, sizeof(*t));
	t->kind = kind;
	t->a = a;
	t->b = b;
	return s->n++;
}

/* argv[pos], NULL at the end. */
static const char *token(const struct find_state *s)
{
	return s->pos < s->argc ? s->argv[s->pos] : NULL;
}

static int is(const char *tok, const char *a, const char *b)
{
	return tok && (!strcmp(tok, a) || (b && !strcmp(tok, b)));
}

/* The tests and options that take an argument. */
static int is_test(const char *p)
{
	static const char *const names[] = { "-type",  "-name", "-size",     "-uid",	 "-gid",
					     "-mtime", "-mmin", "-maxdepth", "-mindepth" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(p, names[i]))
			return 1;
	return 0;
}

/* A test, option or action at argv[pos], into node @k; NULL, or what is wrong. */
static const char *parse_test(struct find_state *s, int k)
{
	const char *p = token(s), *v = s->pos + 1 < s->argc ? s->argv[s->pos + 1] : NULL;
	struct find_test *t = &s->t[k];
	char *end = NULL;

	s->pos++;
	t->kind = N_TRUE;
	if (!strcmp(p, "--json")) {
		s->json = 1;
		return NULL;
	}
	if (!strcmp(p, "-print") || !strcmp(p, "-print0")) {
		t->kind = p[6] ? N_PRINT0 : N_PRINT;
		s->has_action = 1;
		return NULL;
	}
	if (!is_test(p))
		return "unknown test";
	if (!v)
		return "a test lacks its argument";
	s->pos++;
	if (!strcmp(p, "-maxdepth") || !strcmp(p, "-mindepth")) {
		long d = strtol(v, &end, 10);

		if (!*v || *end || d < 0 || d > 1000000)
			return "-maxdepth and -mindepth take a number";
		*(p[2] == 'a' ? &s->maxdepth : &s->mindepth) = (int)d;
		return NULL;
	}
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
	}
	return NULL;
}

static int parse_or(struct find_state *s);

/* ( EXPR ), a test, an option or an action; the node, or -1 with s->why. */
static int parse_primary(struct find_state *s)
{
	const char *tok = token(s);
	int k, at = s->pos;

	if (!tok) {
		s->why = "an operator lacks its operand";
		return -1;
	}
	if (is(tok, "(", NULL)) {
		s->pos++;
		if (is(token(s), ")", NULL)) {
			s->why = "( ) holds no expression";
			return -1;
		}
		k = parse_or(s);
		if (k < 0)
			return -1;
		if (!is(token(s), ")", NULL)) {
			s->why = "( without its )";
			return -1;
		}
		s->pos++;
		return k;
	}
	if (is(tok, ")", NULL) || is(tok, "-o", "-or") || is(tok, "-a", "-and")) {
		s->why = "an operator with nothing before it";
		return -1;
	}
	k = node_new(s, N_TRUE, 0, 0);
	if (k < 0)
		return -1;
	s->why = parse_test(s, k);
	if (s->why) {
		s->pos = at; /* the message names the term */
		return -1;
	}
	return k;
}

/* ! TERM (-not TERM), which binds tighter than -a and -o. */
static int parse_not(struct find_state *s)
{
	int a;

	if (!is(token(s), "!", "-not"))
		return parse_primary(s);
	s->pos++;
	a = parse_not(s);
	return a < 0 ? -1 : node_new(s, N_NOT, a, 0);
}

/* TERM [-a] TERM ...: -a, -and or nothing between two terms. */
static int parse_and(struct find_state *s)
{
	int a = parse_not(s), b;

	while (a >= 0 && token(s) && !is(token(s), "-o", "-or") && !is(token(s), ")", NULL)) {
		if (is(token(s), "-a", "-and"))
			s->pos++;
		b = parse_not(s);
		a = b < 0 ? -1 : node_new(s, N_AND, a, b);
	}
	return a;
}

/* AND-EXPR -o AND-EXPR ... */
static int parse_or(struct find_state *s)
{
	int a = parse_and(s), b;

	while (a >= 0 && is(token(s), "-o", "-or")) {
		s->pos++;
		b = parse_and(s);
		a = b < 0 ? -1 : node_new(s, N_OR, a, b);
	}
	return a;
}

/* The expression argv[first..argc) into s->root; NULL, or what is wrong (at argv[s->pos]). */
static const char *parse_expr(struct find_state *s, int argc, char **argv, int first)
{
	int k = -1;

	s->argc = argc;
	s->argv = argv;
	s->pos = first;
	if (first < argc) {
		k = parse_or(s);
		if (k < 0)
			return s->why;
		if (s->pos < argc)
			return "a ) without its (";
	}
	/* no action: ( EXPR ) -print */
	if (!s->has_action) {
		int p = node_new(s, N_PRINT, 0, 0);

		if (p < 0)
			return s->why;
		k = k < 0 ? p : node_new(s, N_AND, k, p);
		if (k < 0)
			return s->why;
	}
	s->root = k;
	return NULL;
}

/* Where the expression starts: the first argument that begins with -, or is (, ) or !. */
static int expr_start(const char *a)
{
	return a[0] == '-' || !strcmp(a, "(") || !strcmp(a, ")") || !strcmp(a, "!");
}

static int find_run(struct tool *t, int argc, char **argv)
{
	struct find_state s = { 0 };
	int first_test = 1, status = TOOL_OK;
	const char *why;

	s.maxdepth = -1;
	s.first_json = 1;
	s.now = time(NULL);
	while (first_test < argc && !expr_start(argv[first_test]))
		first_test++;
	why = parse_expr(&s, argc, argv, first_test);
	if (why) {
		if (s.pos < argc)
			fprintf(stderr, "rdfs find: %s: %s\n", argv[s.pos], why);
		else
			fprintf(stderr, "rdfs find: %s\n", why);
		return tool_usage(&tool_cmd_find, "bad expression");
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
		if (s.mindepth <= 0)
			eval(&s, s.root, "", 0, arg_name(argv[i], buf, sizeof(buf)), &st);
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
	.args = "PATH... [EXPRESSION] [--json]",
	.summary = "files under directories matching an expression, found by the metaserver",
	.run = find_run,
	.help = "usage: rdfs find PATH... [EXPRESSION] [--json]\n"
		"\n"
		"Print each file under each PATH (PATH itself included) for which the\n"
		"EXPRESSION is true, as find(1) does with the same expression: the PATH as\n"
		"given, then the path under it. The metaserver walks the tree itself, in\n"
		"batches of thousands of entries with their attributes (no lookup and stat\n"
		"per file through a mount); the expression is evaluated here. Entries of a\n"
		"directory come in byte order of their names, a directory before what it\n"
		"holds.\n"
		"\n"
		"The EXPRESSION starts at the first argument that begins with - or is (, )\n"
		"or !. It is made of tests, operators and actions; without any, every file\n"
		"is printed.\n"
		"\n"
		"Tests:\n"
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
		"\n"
		"Operators, from the tightest binding to the loosest:\n"
		"  ( EXPR )      EXPR itself: for grouping (quote the parentheses: \\( \\))\n"
		"  ! EXPR, -not EXPR   true if EXPR is false\n"
		"  EXPR1 EXPR2, EXPR1 -a EXPR2, EXPR1 -and EXPR2\n"
		"                both; EXPR2 is not evaluated if EXPR1 is false\n"
		"  EXPR1 -o EXPR2, EXPR1 -or EXPR2\n"
		"                either; EXPR2 is not evaluated if EXPR1 is true\n"
		"\n"
		"Actions (always true):\n"
		"  -print        print the path and a newline\n"
		"  -print0       print the path and a NUL byte (for xargs -0)\n"
		"  An expression without an action is taken as ( EXPRESSION ) -print; one\n"
		"  with actions prints only where they are evaluated: PATH -name '*.c'\n"
		"  -print0 -o -name '*.h' -print prints .c files with a NUL, .h files with\n"
		"  a newline.\n"
		"\n"
		"Options (for the whole walk, wherever they stand; as terms, true):\n"
		"  -maxdepth N, -mindepth N   only entries at most / at least N levels below\n"
		"                PATH (PATH is level 0)\n"
		"  --json        one JSON object: {\"entries\": [{\"path\", \"ino\", \"type\" (file,\n"
		"                dir, symlink, fifo, socket, char, block), \"mode\" (permission\n"
		"                bits), \"nlink\", \"uid\", \"gid\", \"size\", \"allocated_bytes\",\n"
		"                \"mtime_ns\"}]}, an entry wherever -print or -print0 would print\n"
		"\n"
		"Examples:\n"
		"  rdfs find /proj -name '*.tmp' -o -name core\n"
		"  rdfs find /proj -type f ! \\( -name '*.dat' -o -size -1k \\)\n"
		"  rdfs find /proj -mtime +30 -type f -print0 | xargs -0 rdfs stat\n"
		"\n"
		"Only what you could list is searched: a directory you may not read and\n"
		"search is tested itself but not what it holds, with an error (exit status\n"
		"1), as find(1) does. Symbolic links are not followed. PATH is a path inside\n"
		"the rdfs namespace, from its root (/dir).\n"
		"\n"
		"Exit status: 0, 1 if a PATH or a directory under it could not be read,\n"
		"2 usage error.\n",
};
