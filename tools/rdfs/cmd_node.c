// SPDX-License-Identifier: MIT
/*
 * cmd_node.c - `rdfs node add|set|revoke|list`: the client nodes, each with a
 * key of its own. Runs on a server host: it proves the server key (derived
 * from the capability key) to the metaserver, and derives a node's key from
 * the capability key itself, so no key ever crosses the network.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

static const char *squash_name(int s)
{
	return s == 2 ? "all" : s == 1 ? "root" : "none";
}

static int parse_id(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || !*s || *end || v > 0xffffffffUL)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/*
 * "CLIENT[-LAST]:FS" into @m: the node's ids CLIENT..LAST are the file
 * system's FS.. on.
 */
static int parse_map(const char *s, int gid, struct rdfs_idmap *m)
{
	char buf[64], *colon, *dash;
	uint32_t first, last;

	if (snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
		return -EINVAL;
	colon = strchr(buf, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	dash = strchr(buf, '-');
	if (dash)
		*dash = '\0';
	if (parse_id(buf, &first) || parse_id(dash ? dash + 1 : buf, &last) || last < first ||
	    parse_id(colon + 1, &m->fs) || last - first == UINT32_MAX)
		return -EINVAL;
	m->gid = gid;
	m->client = first;
	m->count = last - first + 1;
	return m->fs > UINT32_MAX - (m->count - 1) ? -EINVAL : 0;
}

/* @n's maps as "u1000-1999:51000,g100:5100", "-" for none. */
static void format_maps(const struct rdfs_node_info *n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < n->nmaps && off < len; i++) {
		const struct rdfs_idmap *m = &n->maps[i];

		if (m->count == 1)
			off += snprintf(buf + off, len - off, "%s%c%u:%u", i ? "," : "",
					m->gid ? 'g' : 'u', m->client, m->fs);
		else
			off += snprintf(buf + off, len - off, "%s%c%u-%u:%u", i ? "," : "",
					m->gid ? 'g' : 'u', m->client, m->client + m->count - 1,
					m->fs);
	}
	if (!n->nmaps)
		snprintf(buf, len, "-");
}

static void print_node(const struct rdfs_node_info *n)
{
	char maps[RDFS_IDMAP_MAX * 36];

	format_maps(n, maps, sizeof(maps));
	printf("%-24s %10u %-8s %-6s %8u %8u %-8s %s\n", n->name, n->generation,
	       n->revoked ? "revoked" : "active", squash_name(n->squash), n->anonuid, n->anongid,
	       n->unmapped_squash ? "squash" : "keep", maps);
}

static void print_header(void)
{
	printf("%-24s %10s %-8s %-6s %8s %8s %-8s %s\n", "NODE", "GENERATION", "STATE", "SQUASH",
	       "ANONUID", "ANONGID", "UNMAPPED", "MAPS");
}

/* `node list --json`: {"nodes": [...]}. */
static void print_json(const struct rdfs_node_info *all, int n)
{
	printf("{\"nodes\": [");
	for (int i = 0; i < n; i++) {
		const struct rdfs_node_info *p = &all[i];

		printf("%s{\"name\": ", i ? ", " : "");
		tool_json_str(p->name);
		printf(", \"generation\": %u, \"state\": \"%s\", \"squash\": \"%s\", "
		       "\"anonuid\": %u, \"anongid\": %u, \"unmapped\": \"%s\", \"maps\": [",
		       p->generation, p->revoked ? "revoked" : "active", squash_name(p->squash),
		       p->anonuid, p->anongid, p->unmapped_squash ? "squash" : "keep");
		for (int k = 0; k < p->nmaps; k++)
			printf("%s{\"kind\": \"%s\", \"client\": %u, \"fs\": %u, \"count\": %u}",
			       k ? ", " : "", p->maps[k].gid ? "gid" : "uid", p->maps[k].client,
			       p->maps[k].fs, p->maps[k].count);
		printf("]}");
	}
	printf("]}\n");
}

/* Replace @p's maps of one kind (@gid) with @add's @nadd. */
static int set_maps(struct rdfs_node_info *p, int gid, const struct rdfs_idmap *add, int nadd)
{
	int n = 0;

	for (int i = 0; i < p->nmaps; i++)
		if (p->maps[i].gid != gid)
			p->maps[n++] = p->maps[i];
	if (n + nadd > RDFS_IDMAP_MAX)
		return -E2BIG;
	memcpy(p->maps + n, add, nadd * sizeof(*add));
	p->nmaps = n + nadd;
	return 0;
}

/* Write the key of @n's current generation to @path. */
static int write_key(struct tool *t, const struct rdfs_node_info *n, const char *path)
{
	char id[64];
	struct auth_secret key;
	int ret;

	snprintf(id, sizeof(id), "%s:%u", n->name, n->generation);
	auth_node_key(&t->cap_key, id, &key);
	ret = auth_node_key_write(path, id, &key);
	memset(&key, 0, sizeof(key));
	return ret;
}

/* Node @name into *@out: 1 if it exists, 0 if not, or -errno. */
static int node_find(struct tool *t, const char *name, struct rdfs_node_info *out)
{
	struct rdfs_node_info *all;
	int n = rdfs_node_list(t->client, NULL, 0), found = 0;

	if (n <= 0)
		return n;
	all = calloc(n, sizeof(*all));
	if (!all)
		return -ENOMEM;
	n = rdfs_node_list(t->client, all, n);
	for (int i = 0; i < n && !found; i++)
		if (strcmp(all[i].name, name) == 0) {
			*out = all[i];
			found = 1;
		}
	free(all);
	return n < 0 ? n : found;
}

static int node_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "squash", required_argument, NULL, 's' },
		{ "anonuid", required_argument, NULL, 'u' },
		{ "anongid", required_argument, NULL, 'g' },
		{ "key-file", required_argument, NULL, 'k' },
		{ "new-key", no_argument, NULL, 'n' },
		{ "map-uid", required_argument, NULL, 'U' },
		{ "map-gid", required_argument, NULL, 'G' },
		{ "no-maps", no_argument, NULL, 'N' },
		{ "unmapped", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct rdfs_node_info n, pol, *all = NULL;
	struct rdfs_idmap umaps[RDFS_IDMAP_MAX], gmaps[RDFS_IDMAP_MAX];
	const char *sub, *name = NULL, *key_file = NULL;
	uint32_t anonuid = 65534, anongid = 65534;
	int opt, ret, squash = -1, new_key = 0, policy = 0, uid_given = 0, gid_given = 0;
	int nu = 0, ng = 0, no_maps = 0, unmapped = -1, json = 0;
	char default_key[64];

	/* 0, not 1: glibc starts over, so options may follow "add NODE" */
	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			printf("%s", tool_cmd_node.help);
			return TOOL_OK;
		case 's':
			squash = !strcmp(optarg, "none") ? 0 : !strcmp(optarg, "root") ? 1 :
				 !strcmp(optarg, "all") ? 2 : -2;
			if (squash == -2)
				return tool_usage(&tool_cmd_node, "--squash is none, root or all");
			policy = 1;
			break;
		case 'u':
		case 'g':
			if (parse_id(optarg, opt == 'u' ? &anonuid : &anongid))
				return tool_usage(&tool_cmd_node, "--anonuid/--anongid take a number");
			*(opt == 'u' ? &uid_given : &gid_given) = 1;
			policy = 1;
			break;
		case 'U':
		case 'G':
			if ((opt == 'U' ? nu : ng) == RDFS_IDMAP_MAX)
				return tool_usage(&tool_cmd_node, "at most 16 maps of each kind");
			if (parse_map(optarg, opt == 'G', opt == 'U' ? &umaps[nu] : &gmaps[ng]))
				return tool_usage(&tool_cmd_node,
						  "--map-uid/--map-gid take CLIENT[-LAST]:FS");
			*(opt == 'U' ? &nu : &ng) += 1;
			policy = 1;
			break;
		case 'N':
			no_maps = 1;
			policy = 1;
			break;
		case 'm':
			unmapped = !strcmp(optarg, "keep") ? 0 : !strcmp(optarg, "squash") ? 1 : -2;
			if (unmapped == -2)
				return tool_usage(&tool_cmd_node, "--unmapped is keep or squash");
			policy = 1;
			break;
		case 'k':
			key_file = optarg;
			break;
		case 'n':
			new_key = 1;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return tool_usage(&tool_cmd_node, "unknown option");
		}
	}
	if (optind >= argc)
		return tool_usage(&tool_cmd_node, "missing add, set, revoke or list");
	sub = argv[optind++];
	if (strcmp(sub, "list") != 0) {
		if (optind != argc - 1)
			return tool_usage(&tool_cmd_node, "expected one NODE name");
		name = argv[optind];
		if (auth_node_name_check(name))
			return tool_usage(&tool_cmd_node,
					  "a NODE name is 1-40 of A-Z a-z 0-9 . _ -");
	} else if (optind != argc) {
		return tool_usage(&tool_cmd_node, "list takes no argument");
	}
	/* what the options leave out of the policy stays as the node has it */
	if (policy && strcmp(sub, "list") != 0) {
		ret = node_find(t, name, &n);
		if (ret < 0)
			return tool_error("node", "list", ret);
		if (!ret) {
			/* a new node: root squash, nobody, no maps */
			memset(&n, 0, sizeof(n));
			n.squash = 1;
			n.anonuid = n.anongid = 65534;
		}
		pol = n;
		if (squash >= 0)
			pol.squash = squash;
		if (uid_given)
			pol.anonuid = anonuid;
		if (gid_given)
			pol.anongid = anongid;
		if (unmapped >= 0)
			pol.unmapped_squash = unmapped;
		if (no_maps)
			pol.nmaps = 0;
		if ((nu && set_maps(&pol, 0, umaps, nu)) || (ng && set_maps(&pol, 1, gmaps, ng)))
			return tool_usage(&tool_cmd_node, "at most 16 maps in all");
	}

	if (!strcmp(sub, "add") || !strcmp(sub, "set")) {
		int adding = !strcmp(sub, "add");

		if (!adding && key_file && !new_key)
			return tool_usage(&tool_cmd_node, "set writes a key only with --new-key");
		if (adding || new_key) {
			if (!key_file) {
				snprintf(default_key, sizeof(default_key), "%s.key", name);
				key_file = default_key;
			}
			/* refuse before the metaserver moves the generation on */
			if (access(key_file, F_OK) == 0) {
				fprintf(stderr, "rdfs node: %s exists; remove it or give --key-file\n",
					key_file);
				return TOOL_FAIL;
			}
		}
		ret = rdfs_node_set(t->client, name, adding || new_key, policy ? &pol : NULL, &n);
		if (ret == -EKEYREVOKED) {
			fprintf(stderr, "rdfs node: %s is revoked; `rdfs node add %s` lets it back "
				"in with a new key\n", name, name);
			return TOOL_FAIL;
		}
		if (ret)
			return tool_error("node", sub, ret);
		if (adding || new_key) {
			ret = write_key(t, &n, key_file);
			if (ret)
				return tool_error("node", key_file, ret);
			printf("node %s: generation %u; key written to %s (mode 0600)\n"
			       "install it on the node and name it in secret_file=; "
			       "every older key of the node no longer works\n",
			       n.name, n.generation, key_file);
		} else {
			print_header();
			print_node(&n);
		}
		return TOOL_OK;
	}
	if (!strcmp(sub, "revoke")) {
		if (policy || key_file || new_key)
			return tool_usage(&tool_cmd_node, "revoke takes no options");
		ret = rdfs_node_revoke(t->client, name, &n);
		if (ret)
			return tool_error("node", "revoke", ret);
		printf("node %s: key of generation %u revoked; its connections to the "
		       "metaserver are closed\n", n.name, n.generation);
		return TOOL_OK;
	}
	if (json && strcmp(sub, "list") != 0)
		return tool_usage(&tool_cmd_node, "--json is for list");
	if (!strcmp(sub, "list")) {
		if (policy || key_file || new_key)
			return tool_usage(&tool_cmd_node, "list takes only --json");
		ret = rdfs_node_list(t->client, NULL, 0);
		if (ret < 0)
			return tool_error("node", "list", ret);
		all = calloc(ret ? ret : 1, sizeof(*all));
		if (!all)
			return tool_error("node", "list", -ENOMEM);
		ret = rdfs_node_list(t->client, all, ret);
		if (ret < 0) {
			free(all);
			return tool_error("node", "list", ret);
		}
		if (json) {
			print_json(all, ret);
			free(all);
			return TOOL_OK;
		}
		print_header();
		for (int i = 0; i < ret; i++)
			print_node(&all[i]);
		free(all);
		return TOOL_OK;
	}
	return tool_usage(&tool_cmd_node, "expected add, set, revoke or list");
}

const struct tool_cmd tool_cmd_node = {
	.name = "node",
	.args = "add|set|revoke|list ...",
	.summary = "client nodes: their own keys, revocation, root/all squash",
	.run = node_run,
	.server_key = 1,
	.help =
	"usage: rdfs node add NODE [--key-file FILE] [POLICY]\n"
	"       rdfs node set NODE [--new-key [--key-file FILE]] [POLICY]\n"
	"       rdfs node revoke NODE\n"
	"       rdfs node list [--json]\n"
	"\n"
	"Manage the client nodes that hold a key of their own instead of the shared\n"
	"cluster secret. A node's key proves only that node: the metaserver applies\n"
	"the node's squash policy to every request it sends, capabilities it is\n"
	"granted are bound to it (another node cannot use them), and revoking it\n"
	"shuts it out at once without changing any other host's key.\n"
	"\n"
	"Run it on a server host, as root: it proves the server key to the\n"
	"metaserver, which derives from the capability key ([cluster] cap_key_file,\n"
	"default /etc/rdfs/cap.key, or --cap-key-file), and it derives the node's\n"
	"key from the capability key itself, so no key crosses the network.\n"
	"\n"
	"  add NODE      register NODE (1-40 of A-Z a-z 0-9 . _ -) and write its key\n"
	"                to FILE (default ./NODE.key, mode 0600, never overwritten).\n"
	"                Copy it to the node and give it as secret_file (rdfs-fuse\n"
	"                -o secret_file=, mount.rdfs, [cluster] secret_file). Adding\n"
	"                a known node again issues a new key and voids the old one.\n"
	"  set NODE      change the policy; with --new-key also issue a new\n"
	"                key (the old one stops working at once). A policy change\n"
	"                holds at once, for the requests its live connections\n"
	"                send from then on.\n"
	"  revoke NODE   refuse the node's key from now on and close its\n"
	"                connections to the metaserver. Capabilities it already holds\n"
	"                keep working at the I/O servers until they expire\n"
	"                ([metaserver] cap_lifetime). `add` lets it back in, with a\n"
	"                new key.\n"
	"  list          every node: generation, state, squash, anonuid, anongid,\n"
	"                what happens to unmapped ids, and its maps (u for uids, g\n"
	"                for gids: CLIENT[-LAST]:FS). --json: one JSON object,\n"
	"                {\"nodes\": [{\"name\", \"generation\", \"state\" (active,\n"
	"                revoked), \"squash\" (none, root, all), \"anonuid\", \"anongid\",\n"
	"                \"unmapped\" (keep, squash), \"maps\": [{\"kind\" (uid, gid),\n"
	"                \"client\", \"fs\", \"count\"}]}]}\n"
	"\n"
	"POLICY (what is not given stays as the node has it):\n"
	"  --squash none|root|all   none: uids as sent; root (default for a new node):\n"
	"                uid 0 acts as ANONUID:ANONGID; all: every uid does (as NFS's\n"
	"                root_squash and all_squash)\n"
	"  --anonuid UID, --anongid GID   who a squashed user becomes (default 65534)\n"
	"  --map-uid CLIENT[-LAST]:FS, --map-gid CLIENT[-LAST]:FS\n"
	"                the node's ids CLIENT..LAST are the file system's FS, FS+1,\n"
	"                ... (as Lustre's nodemap idmap). Repeat for more ranges (16\n"
	"                in all); the ranges given replace the node's ranges of that\n"
	"                kind. Ranges of one kind may not overlap on either side.\n"
	"                The metaserver maps every id a request of the node carries\n"
	"                (its user and groups, chown, ACL entries) and maps them back\n"
	"                in what it answers (owners, ACLs), so the node sees its own\n"
	"                numbers. The squash comes first: a squashed user is\n"
	"                ANONUID:ANONGID, unmapped.\n"
	"  --no-maps     drop the node's maps (before any --map-* given with it)\n"
	"  --unmapped keep|squash   an id no map covers: kept as sent (default), or\n"
	"                acting as ANONUID/ANONGID, so the node reaches only what its\n"
	"                maps grant; files of unmapped owners show as ANONUID:ANONGID\n"
	"  --key-file FILE   where to write the new key\n"
	"  --new-key     (set) issue a new key\n"
	"\n"
	"Clients with the shared cluster secret keep working beside nodes; they get\n"
	"the metaserver's root_squash setting and share one identity.\n",
};
