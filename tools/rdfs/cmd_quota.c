// SPDX-License-Identifier: MIT
/*
 * cmd_quota.c - `rdfs quota show|set|grace|report` (usage and limits of
 * users, groups and projects) and `rdfs project get|set` (the project id of
 * files and trees, the rdfs.project attribute). The metaserver keeps and
 * enforces the numbers (metaserver/quota.c); this only asks and prints.
 *
 * Threads: one (the tool's). Names come from the local passwd and group
 * databases and /etc/projid, as quota(1) and xfs_quota print them.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "tool.h"

#define BLK	    4096ull
#define PROJID_FILE "/etc/projid"
#define LIST_MAX    65536

static const char *const type_names[RDFS_QUOTA_TYPES] = { "user", "group", "project" };

/* ---------------------------------------------------------------- parsing */

/* "1.5G", "100M", "4096", "0", "none": bytes, powers of 1024. 0 or -1. */
static int parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGTPE";
	char *end;
	double v;

	if (!strcasecmp(s, "none")) {
		*out = 0;
		return 0;
	}
	v = strtod(s, &end);
	if (end == s || v < 0)
		return -1;
	if (*end) {
		const char *u = strchr(units, end[0] >= 'a' ? end[0] - 'a' + 'A' : end[0]);

		if (!u || (end[1] && strcasecmp(end + 1, "B") && strcasecmp(end + 1, "iB")))
			return -1;
		for (const char *p = units; p <= u; p++)
			v *= 1024.0;
	}
	if (v >= 18446744073709551615.0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

/* A count of inodes: a plain number, or "none" (0). */
static int parse_count(const char *s, uint64_t *out)
{
	char *end;

	if (!strcasecmp(s, "none")) {
		*out = 0;
		return 0;
	}
	errno = 0;
	*out = strtoull(s, &end, 10);
	return end == s || *end || errno || s[0] == '-' ? -1 : 0;
}

/* "604800", "7d", "12h", "90m", "30s", "2w": seconds. 0 or -1. */
static int parse_duration(const char *s, uint64_t *out)
{
	char *end;
	uint64_t v, mul = 1;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || errno || s[0] == '-')
		return -1;
	if (*end) {
		switch (*end) {
		case 's':
			mul = 1;
			break;
		case 'm':
			mul = 60;
			break;
		case 'h':
			mul = 3600;
			break;
		case 'd':
			mul = 86400;
			break;
		case 'w':
			mul = 7 * 86400;
			break;
		default:
			return -1;
		}
		if (end[1])
			return -1;
	}
	if (v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

/* The id of /etc/projid's project @name, or -1. */
static int64_t projid_by_name(const char *name)
{
	FILE *f = fopen(PROJID_FILE, "r");
	char line[512];
	int64_t id = -1;

	if (!f)
		return -1;
	while (id < 0 && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (line[0] == '#' || !colon)
			continue;
		*colon = '\0';
		if (!strcmp(line, name))
			id = strtoll(colon + 1, NULL, 10);
	}
	fclose(f);
	return id;
}

/* /etc/projid's name of project @id into @buf, or "". */
static void projid_name(uint32_t id, char *buf, size_t len)
{
	FILE *f = fopen(PROJID_FILE, "r");
	char line[512];

	buf[0] = '\0';
	if (!f)
		return;
	while (!buf[0] && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (line[0] == '#' || !colon)
			continue;
		*colon = '\0';
		if (strtoull(colon + 1, NULL, 10) == id)
			snprintf(buf, len, "%.*s", (int)len - 1, line);
	}
	fclose(f);
}

/* A user, group or project by number or name. 0 or -1. */
static int parse_id(uint32_t type, const char *s, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end != s && !*end && !errno && s[0] != '-' && v < UINT32_MAX) {
		*out = (uint32_t)v;
		return 0;
	}
	if (type == RDFS_QUOTA_USER) {
		struct passwd *pw = getpwnam(s);

		if (!pw)
			return -1;
		*out = pw->pw_uid;
	} else if (type == RDFS_QUOTA_GROUP) {
		struct group *gr = getgrnam(s);

		if (!gr)
			return -1;
		*out = gr->gr_gid;
	} else {
		int64_t id = projid_by_name(s);

		if (id < 0 || id >= UINT32_MAX)
			return -1;
		*out = (uint32_t)id;
	}
	return 0;
}

/* The name of @id of @type, or its number. */
static void id_name(uint32_t type, uint32_t id, char *buf, size_t len)
{
	if (type == RDFS_QUOTA_USER) {
		struct passwd *pw = getpwuid(id);

		if (pw) {
			snprintf(buf, len, "%s", pw->pw_name);
			return;
		}
	} else if (type == RDFS_QUOTA_GROUP) {
		struct group *gr = getgrgid(id);

		if (gr) {
			snprintf(buf, len, "%s", gr->gr_name);
			return;
		}
	} else {
		projid_name(id, buf, len);
		if (buf[0])
			return;
	}
	snprintf(buf, len, "#%u", id);
}

/* ---------------------------------------------------------------- printing */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Seconds of grace left (0: over), or -1 when no grace runs. */
static int64_t grace_left(int64_t grace_ns)
{
	int64_t left;

	if (!grace_ns)
		return -1;
	left = (grace_ns - now_ns()) / 1000000000ll;
	return left > 0 ? left : 0;
}

/* "-", "none" (over: the soft limit refuses) or "6d23h" as quota(1) prints it. */
static void grace_str(int64_t grace_ns, char *buf, size_t len)
{
	int64_t s = grace_left(grace_ns);

	if (s < 0)
		snprintf(buf, len, "-");
	else if (s == 0)
		snprintf(buf, len, "none");
	else if (s >= 86400)
		snprintf(buf, len, "%lldd%lldh", (long long)(s / 86400),
			 (long long)(s % 86400 / 3600));
	else
		snprintf(buf, len, "%02lld:%02lld", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
}

static void limit_str(uint64_t bytes, char *buf, size_t len)
{
	if (!bytes)
		snprintf(buf, len, "-");
	else
		tool_human(bytes, buf, len);
}

static void count_str(uint64_t n, char *buf, size_t len)
{
	if (!n)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%llu", (unsigned long long)n);
}

static void print_header(void)
{
	printf("%-8s %-16s %7s %7s %7s %8s %10s %10s %10s %8s\n", "Type", "Name", "Used", "Soft",
	       "Hard", "Grace", "Files", "Soft", "Hard", "Grace");
}

static void print_row(const struct rdfs_quota *q)
{
	char name[64], used[16], bs[16], bh[16], bg[24], is[24], ih[24], ig[24];
	/* over a limit: the mark quota(1) puts on the number */
	int bover = (q->block_soft && q->blocks > q->block_soft) ||
		    (q->block_hard && q->blocks >= q->block_hard);
	int iover = (q->inode_soft && q->inodes > q->inode_soft) ||
		    (q->inode_hard && q->inodes >= q->inode_hard);

	id_name(q->type, q->id, name, sizeof(name));
	tool_human(q->blocks * BLK, used, sizeof(used));
	limit_str(q->block_soft * BLK, bs, sizeof(bs));
	limit_str(q->block_hard * BLK, bh, sizeof(bh));
	grace_str(q->block_grace_ns, bg, sizeof(bg));
	count_str(q->inode_soft, is, sizeof(is));
	count_str(q->inode_hard, ih, sizeof(ih));
	grace_str(q->inode_grace_ns, ig, sizeof(ig));
	printf("%-8s %-16s %6s%c %7s %7s %8s %9llu%c %10s %10s %8s\n", type_names[q->type], name,
	       used, bover ? '*' : ' ', bs, bh, bg, (unsigned long long)q->inodes,
	       iover ? '*' : ' ', is, ih, ig);
}

static void print_json(const struct rdfs_quota *q, int first)
{
	char name[64];

	id_name(q->type, q->id, name, sizeof(name));
	printf("%s{\"type\": \"%s\", \"id\": %u, \"name\": ", first ? "" : ", ",
	       type_names[q->type], q->id);
	tool_json_str(name);
	printf(", \"blocks\": %llu, \"bytes\": %llu, \"block_soft_bytes\": %llu, "
	       "\"block_hard_bytes\": %llu, \"block_grace_ns\": %lld, \"block_grace_left_s\": %lld, "
	       "\"inodes\": %llu, \"inode_soft\": %llu, \"inode_hard\": %llu, "
	       "\"inode_grace_ns\": %lld, \"inode_grace_left_s\": %lld}",
	       (unsigned long long)q->blocks, (unsigned long long)(q->blocks * BLK),
	       (unsigned long long)(q->block_soft * BLK), (unsigned long long)(q->block_hard * BLK),
	       (long long)q->block_grace_ns, (long long)grace_left(q->block_grace_ns),
	       (unsigned long long)q->inodes, (unsigned long long)q->inode_soft,
	       (unsigned long long)q->inode_hard, (long long)q->inode_grace_ns,
	       (long long)grace_left(q->inode_grace_ns));
}

static void print_grace_json(const uint64_t grace_s[RDFS_QUOTA_TYPES])
{
	printf("\"grace_s\": {\"user\": %llu, \"group\": %llu, \"project\": %llu}",
	       (unsigned long long)grace_s[0], (unsigned long long)grace_s[1],
	       (unsigned long long)grace_s[2]);
}

static int quota_error(const char *what, int err)
{
	if (err == -EPERM)
		fprintf(stderr,
			"rdfs quota: %s: %s (only root, or rdfs --admin with the capability "
			"key, may do that)\n",
			what, strerror(-err));
	else
		tool_error("quota", what, err);
	return TOOL_FAIL;
}

/* ---------------------------------------------------------------- subcommands */

struct quota_args {
	int types; /* 1 << RDFS_QUOTA_*: -u, -g, -p given */
	int have_id[RDFS_QUOTA_TYPES];
	uint32_t id[RDFS_QUOTA_TYPES];
	int json;
	uint32_t valid;						 /* set: which limits */
	uint64_t block_soft, block_hard, inode_soft, inode_hard; /* bytes, inodes */
};

/* One type of -u/-g/-p with an optional ID (show) or a required one (set). */
static int take_id(const struct tool_cmd *cmd, struct quota_args *a, uint32_t type, const char *arg)
{
	a->types |= 1 << type;
	if (!arg)
		return 0;
	if (parse_id(type, arg, &a->id[type])) {
		char msg[320];

		snprintf(msg, sizeof(msg), "no %s '%s'", type_names[type], arg);
		return tool_usage(cmd, msg);
	}
	a->have_id[type] = 1;
	return 0;
}

enum {
	OPT_BSOFT = 256,
	OPT_BHARD,
	OPT_ISOFT,
	OPT_IHARD
};

/*
 * Parse the options of `rdfs quota SUB`; @ids: -u/-g/-p take an argument.
 * -1 to go on, else an exit status.
 */
static int quota_options(const struct tool_cmd *cmd, int argc, char **argv, int ids,
			 struct quota_args *a)
{
	/* show and set name an id after -u, -g, -p; grace and report only types */
	static const struct option with_ids[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "user", required_argument, NULL, 'u' },
		{ "group", required_argument, NULL, 'g' },
		{ "project", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "block-soft", required_argument, NULL, OPT_BSOFT },
		{ "block-hard", required_argument, NULL, OPT_BHARD },
		{ "inode-soft", required_argument, NULL, OPT_ISOFT },
		{ "inode-hard", required_argument, NULL, OPT_IHARD },
		{ NULL, 0, NULL, 0 },
	};
	static const struct option types_only[] = {
		{ "help", no_argument, NULL, 'h' },  { "user", no_argument, NULL, 'u' },
		{ "group", no_argument, NULL, 'g' }, { "project", no_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },  { NULL, 0, NULL, 0 },
	};
	int opt, ret;

	memset(a, 0, sizeof(*a));
	optind = 1;
	while ((opt = getopt_long(argc, argv, ids ? "hu:g:p:j" : "hugpj",
				  ids ? with_ids : types_only, NULL)) != -1) {
		ret = 0;
		switch (opt) {
		case 'h':
			printf("%s", cmd->help);
			return TOOL_OK;
		case 'u':
			ret = take_id(cmd, a, RDFS_QUOTA_USER, optarg);
			break;
		case 'g':
			ret = take_id(cmd, a, RDFS_QUOTA_GROUP, optarg);
			break;
		case 'p':
			ret = take_id(cmd, a, RDFS_QUOTA_PROJECT, optarg);
			break;
		case 'j':
			a->json = 1;
			break;
		case OPT_BSOFT:
		case OPT_BHARD:
			if (parse_size(optarg, opt == OPT_BSOFT ? &a->block_soft : &a->block_hard))
				return tool_usage(cmd, "a size is a number of bytes with an "
						       "optional K, M, G, T or P (powers of "
						       "1024), or none");
			a->valid |= opt == OPT_BSOFT ? RDFS_QUOTA_SET_BLOCK_SOFT :
						       RDFS_QUOTA_SET_BLOCK_HARD;
			break;
		case OPT_ISOFT:
		case OPT_IHARD:
			if (parse_count(optarg, opt == OPT_ISOFT ? &a->inode_soft : &a->inode_hard))
				return tool_usage(cmd, "an inode limit is a number, or none");
			a->valid |= opt == OPT_ISOFT ? RDFS_QUOTA_SET_INODE_SOFT :
						       RDFS_QUOTA_SET_INODE_HARD;
			break;
		default:
			return tool_usage(cmd, "unknown option");
		}
		if (ret)
			return ret;
	}
	return -1;
}

/* The single type -u, -g or -p named (set, grace); -1 if not exactly one. */
static int one_type(const struct quota_args *a)
{
	for (int t = 0; t < RDFS_QUOTA_TYPES; t++)
		if (a->types == 1 << t)
			return t;
	return -1;
}

static int show(struct tool *t, struct quota_args *a)
{
	struct rdfs_quota q[2 + RDFS_MAX_GROUPS];
	uint32_t type[2 + RDFS_MAX_GROUPS], id[2 + RDFS_MAX_GROUPS];
	uint64_t grace[RDFS_QUOTA_TYPES] = { 0 };
	int n = 0, shown = 0, status = TOOL_OK;

	if (a->types) {
		for (int k = 0; k < RDFS_QUOTA_TYPES; k++) {
			if (!(a->types & 1 << k))
				continue;
			type[n] = (uint32_t)k;
			id[n++] = a->id[k];
		}
	} else {
		/* as quota(1): one's user and every group one is in */
		type[n] = RDFS_QUOTA_USER;
		id[n++] = t->cred.uid;
		type[n] = RDFS_QUOTA_GROUP;
		id[n++] = t->cred.gid;
		for (uint32_t i = 0; i < t->cred.ngroups; i++) {
			int dup = 0;

			for (int j = 1; j < n; j++)
				dup |= id[j] == t->cred.groups[i];
			if (!dup) {
				type[n] = RDFS_QUOTA_GROUP;
				id[n++] = t->cred.groups[i];
			}
		}
	}
	for (int i = 0; i < n; i++) {
		int ret = rdfs_quota_get(t->client, &t->cred, type[i], id[i], &q[shown], grace);

		if (ret) {
			char what[64];

			snprintf(what, sizeof(what), "%s %u", type_names[type[i]], id[i]);
			status = quota_error(what, ret);
			continue;
		}
		shown++;
	}
	if (a->json) {
		printf("{");
		print_grace_json(grace);
		printf(", \"quotas\": [");
		for (int i = 0; i < shown; i++)
			print_json(&q[i], i == 0);
		printf("]}\n");
		return status;
	}
	if (shown)
		print_header();
	for (int i = 0; i < shown; i++)
		print_row(&q[i]);
	return status;
}

static int set(struct tool *t, struct quota_args *a)
{
	struct rdfs_quota q = { 0 }, out;
	int type = one_type(a), ret;

	if (type < 0 || !a->have_id[type])
		return tool_usage(&tool_cmd_quota, "set needs one of -u USER, -g GROUP, -p PROJID");
	if (!a->valid)
		return tool_usage(&tool_cmd_quota,
				  "set needs --block-soft, --block-hard, --inode-soft or "
				  "--inode-hard");
	q.type = (uint32_t)type;
	q.id = a->id[type];
	/* bytes to blocks, rounded up: a limit never ends inside a block */
	q.block_soft = (a->block_soft + BLK - 1) / BLK;
	q.block_hard = (a->block_hard + BLK - 1) / BLK;
	q.inode_soft = a->inode_soft;
	q.inode_hard = a->inode_hard;
	ret = rdfs_quota_set(t->client, &t->cred, &q, a->valid, 0, &out);
	if (ret) {
		char what[64];

		snprintf(what, sizeof(what), "%s %u", type_names[type], q.id);
		return quota_error(what, ret);
	}
	if (a->json) {
		printf("{\"quotas\": [");
		print_json(&out, 1);
		printf("]}\n");
	} else {
		print_header();
		print_row(&out);
	}
	return TOOL_OK;
}

static void duration_str(uint64_t s, char *buf, size_t len)
{
	if (s && s % 86400 == 0)
		snprintf(buf, len, "%llud", (unsigned long long)(s / 86400));
	else if (s && s % 3600 == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(s / 3600));
	else
		snprintf(buf, len, "%llus", (unsigned long long)s);
}

static int grace(struct tool *t, struct quota_args *a, int argc, char **argv)
{
	uint64_t g[RDFS_QUOTA_TYPES] = { 0 }, secs;
	struct rdfs_quota q = { 0 }, out;
	int type = one_type(a), ret;

	if (optind == argc) {
		/* no duration: print them all */
		ret = rdfs_quota_get(t->client, &t->cred, RDFS_QUOTA_USER, t->cred.uid, &q, g);
		if (ret)
			return quota_error("grace periods", ret);
		if (a->json) {
			printf("{");
			print_grace_json(g);
			printf("}\n");
			return TOOL_OK;
		}
		for (int k = 0; k < RDFS_QUOTA_TYPES; k++) {
			char d[32];

			if (a->types && !(a->types & 1 << k))
				continue;
			duration_str(g[k], d, sizeof(d));
			printf("%-8s %s\n", type_names[k], d);
		}
		return TOOL_OK;
	}
	if (type < 0 || a->have_id[type])
		return tool_usage(&tool_cmd_quota, "grace takes one of -u, -g, -p (no id)");
	if (optind + 1 != argc || parse_duration(argv[optind], &secs))
		return tool_usage(&tool_cmd_quota,
				  "a duration is seconds, or a number with s, m, h, d or w");
	q.type = (uint32_t)type;
	ret = rdfs_quota_set(t->client, &t->cred, &q, RDFS_QUOTA_SET_GRACE, secs, &out);
	if (ret)
		return quota_error("grace", ret);
	return TOOL_OK;
}

static int id_cmp(const void *x, const void *y)
{
	const struct rdfs_quota *a = x, *b = y;

	return a->id < b->id ? -1 : a->id > b->id;
}

static int report(struct tool *t, struct quota_args *a)
{
	struct rdfs_quota *q = malloc(LIST_MAX * sizeof(*q));
	uint64_t g[RDFS_QUOTA_TYPES] = { 0 };
	int status = TOOL_OK, first = 1, header = 0;

	if (!q)
		return tool_error("quota", "report", -ENOMEM);
	if (a->json)
		printf("{\"quotas\": [");
	for (int k = 0; k < RDFS_QUOTA_TYPES; k++) {
		int more = 0, n;

		if (a->types && !(a->types & 1 << k))
			continue;
		n = rdfs_quota_list(t->client, &t->cred, (uint32_t)k, 0, q, LIST_MAX, &more, g);
		if (n < 0) {
			status = quota_error(type_names[k], n);
			continue;
		}
		qsort(q, (size_t)n, sizeof(*q), id_cmp);
		for (int i = 0; i < n; i++) {
			if (a->json) {
				print_json(&q[i], first);
				first = 0;
				continue;
			}
			if (!header++)
				print_header();
			print_row(&q[i]);
		}
		if (more)
			fprintf(stderr, "rdfs quota: report: more than %d %ss: the first shown\n",
				LIST_MAX, type_names[k]);
	}
	if (a->json) {
		printf("], ");
		print_grace_json(g);
		printf("}\n");
	}
	free(q);
	return status;
}

static int quota_run(struct tool *t, int argc, char **argv)
{
	struct quota_args a;
	const char *sub;
	int ret;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		if (argc < 2)
			return tool_usage(&tool_cmd_quota, "expected show, set, grace or report");
		printf("%s", tool_cmd_quota.help);
		return TOOL_OK;
	}
	sub = argv[1];
	argc--;
	argv++;
	if (!strcmp(sub, "show") || !strcmp(sub, "set")) {
		ret = quota_options(&tool_cmd_quota, argc, argv, 1, &a);
		if (ret >= 0)
			return ret;
		if (optind != argc)
			return tool_usage(&tool_cmd_quota, "unexpected argument");
		if (!strcmp(sub, "set"))
			return set(t, &a);
		if (a.valid)
			return tool_usage(&tool_cmd_quota, "show takes no limits (see set)");
		return show(t, &a);
	}
	if (!strcmp(sub, "grace") || !strcmp(sub, "report")) {
		ret = quota_options(&tool_cmd_quota, argc, argv, 0, &a);
		if (ret >= 0)
			return ret;
		if (a.valid)
			return tool_usage(&tool_cmd_quota, "limits are set with quota set");
		if (!strcmp(sub, "grace"))
			return grace(t, &a, argc, argv);
		if (optind != argc)
			return tool_usage(&tool_cmd_quota, "unexpected argument");
		return report(t, &a);
	}
	return tool_usage(&tool_cmd_quota, "expected show, set, grace or report");
}

const struct tool_cmd tool_cmd_quota = {
	.name = "quota",
	.args = "show|set|grace|report ...",
	.summary = "usage and limits of users, groups and projects",
	.run = quota_run,
	.help = "usage: rdfs quota show [-u USER] [-g GROUP] [-p PROJID] [--json]\n"
		"       rdfs quota set -u USER|-g GROUP|-p PROJID [--block-soft SIZE]\n"
		"                  [--block-hard SIZE] [--inode-soft N] [--inode-hard N] [--json]\n"
		"       rdfs quota grace [-u|-g|-p] [DURATION] [--json]\n"
		"       rdfs quota report [-u] [-g] [-p] [--json]\n"
		"\n"
		"The metaserver counts, for every user (uid), group (gid) and project\n"
		"(see rdfs project), the space and the inodes (files, directories,\n"
		"symbolic links...) it owns, and refuses with EDQUOT (\"Disk quota\n"
		"exceeded\") what would pass a limit.\n"
		"\n"
		"What counts: an inode's allocated blocks, every copy of every block. A\n"
		"file kept in 2 copies (rdfs setcopies 2) counts twice its space; space\n"
		"allocated ahead of a stream of writes counts until the file is closed.\n"
		"Project 0 is no project: neither counted nor limited.\n"
		"\n"
		"Limits: a hard limit is never passed. Usage may pass a soft limit for a\n"
		"grace period (per type, 7 days unless set), after which the soft limit\n"
		"binds as a hard one until usage is back under it. Writes get EDQUOT when\n"
		"their blocks are allocated, before any data goes out (write, fsync or\n"
		"close report it, as with ENOSPC); creates and chown or chgrp to an owner\n"
		"over a limit get it too. Allocation ahead of a write is cut to what fits\n"
		"and never fails on its own. Requests of root (uid 0 after the\n"
		"metaserver's squash) are never refused, and count.\n"
		"\n"
		"show   Usage, limits and the grace left of your user and every group you\n"
		"       are in, or of the -u USER, -g GROUP and -p PROJID named (names or\n"
		"       numbers). Users see only their own and their groups'; root any. An\n"
		"       over-limit number is marked with *; a grace of \"none\" means it\n"
		"       is over and the soft limit refuses now.\n"
		"set    Set the limits named (the others stay) of one user, group or\n"
		"       project: SIZE in bytes with K, M, G, T or P (powers of 1024),\n"
		"       rounded up to 4 KiB blocks; N in inodes; 0 or none removes a\n"
		"       limit. Root only. Usage above a new soft limit starts its grace.\n"
		"grace  Set the grace period of users (-u), groups (-g) or projects (-p)\n"
		"       to DURATION: seconds, or a number with s, m, h, d or w (7d). It\n"
		"       applies to graces that start from then on. Without DURATION,\n"
		"       print them. Root only to set.\n"
		"report Every user, group and project (or only the types named) with\n"
		"       usage or limits: Type, Name, Used, Soft, Hard, Grace for space,\n"
		"       then Files, Soft, Hard, Grace for inodes. Root only.\n"
		"\n"
		"  --json   one JSON object: {\"quotas\": [{\"type\", \"id\", \"name\", \"blocks\"\n"
		"           (4 KiB), \"bytes\", \"block_soft_bytes\", \"block_hard_bytes\",\n"
		"           \"block_grace_ns\", \"block_grace_left_s\" (-1: none runs),\n"
		"           \"inodes\", \"inode_soft\", \"inode_hard\", \"inode_grace_ns\",\n"
		"           \"inode_grace_left_s\"}], \"grace_s\": {\"user\", \"group\",\n"
		"           \"project\"}} (limits 0: none)\n"
		"\n"
		"Root is root as the metaserver sees it: a node key with root squash\n"
		"makes root nobody; rdfs --admin (the capability key, on a server host)\n"
		"is always allowed. Names come from the local passwd and group databases\n"
		"and /etc/projid (NAME:ID lines); ids work anywhere.\n"
		"\n"
		"Examples:\n"
		"  rdfs quota set -u alice --block-soft 900G --block-hard 1T --inode-hard 1000000\n"
		"  rdfs quota set -p 42 --block-hard 10T\n"
		"  rdfs quota grace -u 3d\n"
		"  rdfs quota report -u --json\n",
};

/* ---------------------------------------------------------------- rdfs project */

/* Set rdfs.project of @ino (and with @recursive of everything under it). */
static int project_set_tree(struct tool *t, const char *path, uint64_t ino, mode_t mode,
			    const char *id, int recursive, int depth)
{
	struct rdfs_dir *d;
	struct rdfs_dirent ent;
	int ret, status = TOOL_OK;

	ret = rdfs_setxattr(t->client, &t->cred, ino, RDFS_PROJECT_XATTR, id, strlen(id), 0);
	if (ret)
		return quota_error(path, ret);
	if (!recursive || !S_ISDIR(mode))
		return TOOL_OK;
	if (depth > 4096)
		return tool_error("project", path, -ELOOP);
	ret = rdfs_opendir(t->client, &t->cred, ino, &d);
	if (ret)
		return tool_error("project", path, ret);
	for (uint64_t i = 0; (ret = rdfs_readdir_at(d, i, &ent)) == 1; i++) {
		size_t len = strlen(path) + strlen(ent.name) + 2;
		char *sub = malloc(len);

		if (!sub) {
			ret = -ENOMEM;
			break;
		}
		snprintf(sub, len, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/",
			 ent.name);
		if (project_set_tree(t, sub, ent.ino, ent.type, id, 1, depth + 1))
			status = TOOL_FAIL;
		free(sub);
	}
	if (ret < 0)
		status = tool_error("project", path, ret);
	rdfs_closedir(d);
	return status;
}

static int project_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "recursive", no_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, recursive = 0, status = TOOL_OK, set_;
	uint32_t id = 0;
	const char *sub;
	char idbuf[16];

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		if (argc < 2)
			return tool_usage(&tool_cmd_project, "expected get or set");
		printf("%s", tool_cmd_project.help);
		return TOOL_OK;
	}
	sub = argv[1];
	argc--;
	argv++;
	set_ = !strcmp(sub, "set");
	if (!set_ && strcmp(sub, "get"))
		return tool_usage(&tool_cmd_project, "expected get or set");
	optind = 1;
	while ((opt = getopt_long(argc, argv, "hr", opts, NULL)) != -1) {
		if (opt == 'h') {
			printf("%s", tool_cmd_project.help);
			return TOOL_OK;
		}
		if (opt == 'r' && set_) {
			recursive = 1;
			continue;
		}
		return tool_usage(&tool_cmd_project, "unknown option");
	}
	if (set_) {
		if (optind + 2 > argc)
			return tool_usage(&tool_cmd_project, "set needs ID and at least one PATH");
		if (parse_id(RDFS_QUOTA_PROJECT, argv[optind], &id))
			return tool_usage(&tool_cmd_project,
					  "ID is a number below 4294967295 or a name of "
					  "/etc/projid");
		snprintf(idbuf, sizeof(idbuf), "%u", id);
		optind++;
	} else if (optind >= argc) {
		return tool_usage(&tool_cmd_project, "get needs at least one PATH");
	}
	for (int i = optind; i < argc; i++) {
		struct stat st;
		char v[16];
		int ret = tool_resolve(t, argv[i], &st);

		if (ret) {
			status = tool_error("project", argv[i], ret);
			continue;
		}
		if (set_) {
			if (project_set_tree(t, argv[i], st.st_ino, st.st_mode, idbuf, recursive,
					     0))
				status = TOOL_FAIL;
			continue;
		}
		ret = rdfs_getxattr(t->client, &t->cred, st.st_ino, RDFS_PROJECT_XATTR, v,
				    sizeof(v) - 1);
		if (ret < 0) {
			status = tool_error("project", argv[i], ret);
			continue;
		}
		v[ret] = '\0';
		printf("%s: %s\n", argv[i], v);
	}
	return status;
}

const struct tool_cmd tool_cmd_project = {
	.name = "project",
	.args = "get|set [-r] ...",
	.summary = "the quota project of files and directory trees",
	.run = project_run,
	.help = "usage: rdfs project get PATH...\n"
		"       rdfs project set [-r] ID PATH...\n"
		"\n"
		"A project is a number that directory trees share so that their space\n"
		"and inodes are counted and limited together, whoever owns the files\n"
		"(rdfs quota -p; as project quotas of XFS and ext4). It is the\n"
		"rdfs.project attribute of an inode (getfattr -n rdfs.project), and 0\n"
		"is no project.\n"
		"\n"
		"get   Print the project of each PATH.\n"
		"set   Give each PATH project ID (a number, or a name of /etc/projid). A\n"
		"      directory is also marked so that what is created in it from then on\n"
		"      takes ID, subdirectories the mark too; with -r (--recursive) what\n"
		"      is in it already changes as well. Usage moves to the new project\n"
		"      at once. Root only (EPERM otherwise); 0 removes it.\n"
		"\n"
		"A rename or hard link into a marked directory of another project fails\n"
		"with EXDEV, as on ext4, so mv copies the file and its usage moves with\n"
		"the copy; what is moved out of a tree keeps its project.\n"
		"\n"
		"PATHs are paths in the rdfs namespace from its root (/data/x), not\n"
		"through a mount; through a mount the same is setfattr -n rdfs.project\n"
		"-v ID DIR.\n",
};
