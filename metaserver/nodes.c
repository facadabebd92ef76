// SPDX-License-Identifier: MIT
/*
 * nodes.c - the client nodes: name, key generation, revoked flag and squash
 * policy, persisted under MS_TAG_NODE and mirrored in memory for the
 * handshake's admit check (rpc main loop) and the admin operations (any
 * thread). Changes are rare, so the one mutex is held across their small
 * synced write, as the registry does.
 *
 * A node's key derives from the capability key and "NAME:GEN" (auth.h), so
 * the metaserver never stores or sends a key: it only says which generation
 * of which node it admits. Revoking (or a new key) moves the generation on,
 * and every older key stops proving anything here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "log.h"
#include "ms_int.h"

/*
 * value: generation (4), revoked (1), squash mode (1), anonuid (4), anongid (4);
 * since id maps: unmapped squash (1), map count (1), then per map gid (1),
 * client (4), fs (4), count (4). A record of 14 bytes has no maps.
 */
#define NODE_VAL_OLD	14
#define NODE_MAP_LEN	13
#define NODE_VAL_MAX	(NODE_VAL_OLD + 2 + MS_IDMAP_MAX * NODE_MAP_LEN)

static size_t node_key(uint8_t *k, const char *name)
{
	size_t l = strlen(name);

	k[0] = MS_TAG_NODE;
	memcpy(k + 1, name, l);
	return 1 + l;
}

/* Returns the value's length. */
static size_t node_encode(const struct ms_node *n, uint8_t *v)
{
	const struct ms_squash *sq = &n->squash;
	uint8_t *p = v + NODE_VAL_OLD + 2;

	put_le32(v, n->generation);
	v[4] = (uint8_t)n->revoked;
	v[5] = (uint8_t)sq->mode;
	put_le32(v + 6, sq->anonuid);
	put_le32(v + 10, sq->anongid);
	v[14] = sq->unmapped_squash;
	v[15] = sq->nmaps;
	for (int i = 0; i < sq->nmaps; i++, p += NODE_MAP_LEN) {
		p[0] = sq->maps[i].gid;
		put_le32(p + 1, sq->maps[i].client);
		put_le32(p + 5, sq->maps[i].fs);
		put_le32(p + 9, sq->maps[i].count);
	}
	return (size_t)(p - v);
}

static int node_decode(const uint8_t *v, size_t len, struct ms_node *n)
{
	struct ms_squash *sq = &n->squash;
	const uint8_t *p = v + NODE_VAL_OLD + 2;

	if (len < NODE_VAL_OLD || v[4] > 1 || v[5] > MS_SQUASH_ALL)
		return -EIO;
	n->generation = get_le32(v);
	n->revoked = v[4];
	sq->mode = (enum ms_squash_mode)v[5];
	sq->anonuid = get_le32(v + 6);
	sq->anongid = get_le32(v + 10);
	if (len == NODE_VAL_OLD)
		return 0;
	if (len < NODE_VAL_OLD + 2 || v[15] > MS_IDMAP_MAX ||
	    len != NODE_VAL_OLD + 2 + (size_t)v[15] * NODE_MAP_LEN)
		return -EIO;
	sq->unmapped_squash = v[14];
	sq->nmaps = v[15];
	for (int i = 0; i < sq->nmaps; i++, p += NODE_MAP_LEN) {
		sq->maps[i].gid = p[0];
		sq->maps[i].client = get_le32(p + 1);
		sq->maps[i].fs = get_le32(p + 5);
		sq->maps[i].count = get_le32(p + 9);
	}
	return ms_squash_check(sq) ? -EIO : 0;
}

/* Caller holds t->mu. */
static struct ms_node *node_find(struct ms_nodes *t, const char *name)
{
	for (int i = 0; i < t->n; i++)
		if (strcmp(t->nodes[i].name, name) == 0)
			return &t->nodes[i];
	return NULL;
}

static int node_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ms_node *)a)->name, ((const struct ms_node *)b)->name);
}

/* Insert keeping names sorted. Caller holds t->mu (or is single-threaded). */
static struct ms_node *node_insert(struct ms_nodes *t, const struct ms_node *n)
{
	struct ms_node *a = realloc(t->nodes, (t->n + 1) * sizeof(*a));

	if (!a)
		return NULL;
	t->nodes = a;
	t->nodes[t->n++] = *n;
	qsort(t->nodes, t->n, sizeof(*a), node_cmp);
	return node_find(t, n->name);
}

int nodes_load(struct ms *ms)
{
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	uint8_t tag = MS_TAG_NODE;
	int ret = 0;

	for (leveldb_iter_seek(it, (char *)&tag, 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const uint8_t *v = (const uint8_t *)leveldb_iter_value(it, &vl);
		struct ms_node n = { 0 };

		if (kl == 0 || k[0] != MS_TAG_NODE)
			break;
		if (kl - 1 > MS_NODE_NAME_MAX || node_decode(v, vl, &n)) {
			log_error(1100027, "corrupt client node record in the database");
			ret = -EIO;
			break;
		}
		memcpy(n.name, k + 1, kl - 1);
		n.name[kl - 1] = '\0';
		if (!node_insert(&ms->nodes, &n)) {
			ret = -ENOMEM;
			break;
		}
	}
	leveldb_iter_destroy(it);
	return ret;
}

void nodes_destroy(struct ms_nodes *t)
{
	free(t->nodes);
	t->nodes = NULL;
	t->n = 0;
	pthread_mutex_destroy(&t->mu);
}

static int node_store(struct ms *ms, const struct ms_node *n)
{
	uint8_t k[1 + MS_NODE_NAME_MAX], v[NODE_VAL_MAX];
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	size_t vl = node_encode(n, v);
	int ret;

	leveldb_writebatch_put(b, (char *)k, node_key(k, n->name), (char *)v, vl);
	ret = ns_write_plain(ms, b);
	leveldb_writebatch_destroy(b);
	return ret;
}

int ms_node_set(struct ms *ms, struct ms_session *s, const char *name, int new_key,
		const struct ms_squash *policy, struct ms_node *out)
{
	struct ms_nodes *t = &ms->nodes;
	struct ms_node *cur, tmp = { 0 };
	int ret;

	if (!ms_session_is_server(s))
		return -EPERM;
	if (auth_node_name_check(name) || strlen(name) > MS_NODE_NAME_MAX)
		return -EINVAL;
	if (policy && ms_squash_check(policy))
		return -EINVAL;
	pthread_mutex_lock(&t->mu);
	cur = node_find(t, name);
	if (cur && cur->revoked && !new_key) {
		/* only a new key lets a revoked node back in */
		ret = -EKEYREVOKED;
		goto out;
	}
	if (cur) {
		tmp = *cur;
	} else {
		snprintf(tmp.name, sizeof(tmp.name), "%s", name);
		/* a new node's root is nobody unless the admin says otherwise */
		tmp.squash = (struct ms_squash){ MS_SQUASH_ROOT, 65534, 65534 };
	}
	if (new_key || !cur || tmp.revoked) {
		if (tmp.generation >= 999999999) {
			ret = -EOVERFLOW;
			goto out;
		}
		tmp.generation++;
		tmp.revoked = 0;
	}
	if (policy)
		tmp.squash = *policy;
	ret = node_store(ms, &tmp);
	if (ret)
		goto out;
	if (cur)
		*cur = tmp;
	else if (!node_insert(t, &tmp))
		ret = -ENOMEM;
	if (!ret) {
		*out = tmp;
		log_info(1100028, "client node %s: generation %u, squash %s, %u id maps%s", name,
			 tmp.generation,
			 tmp.squash.mode == MS_SQUASH_ALL ? "all" :
			 tmp.squash.mode == MS_SQUASH_ROOT ? "root" : "none",
			 tmp.squash.nmaps, tmp.squash.unmapped_squash ? ", unmapped ids squashed" : "");
	}
out:
	pthread_mutex_unlock(&t->mu);
	return ret;
}

int ms_node_revoke(struct ms *ms, struct ms_session *s, const char *name, struct ms_node *out)
{
	struct ms_nodes *t = &ms->nodes;
	struct ms_node *cur, tmp;
	int ret;

	if (!ms_session_is_server(s))
		return -EPERM;
	if (auth_node_name_check(name))
		return -EINVAL;
	pthread_mutex_lock(&t->mu);
	cur = node_find(t, name);
	if (!cur) {
		ret = -ENOENT;
		goto out;
	}
	tmp = *cur;
	tmp.revoked = 1;
	ret = node_store(ms, &tmp);
	if (!ret) {
		*cur = tmp;
		*out = tmp;
		log_info(1100029,
			 "client node %s: key of generation %u revoked", name, tmp.generation);
	}
out:
	pthread_mutex_unlock(&t->mu);
	return ret;
}

int ms_node_list(struct ms *ms, struct ms_session *s, struct ms_node **out)
{
	struct ms_nodes *t = &ms->nodes;
	int n;

	if (!ms_session_is_server(s))
		return -EPERM;
	pthread_mutex_lock(&t->mu);
	n = t->n;
	*out = malloc((n ? n : 1) * sizeof(**out));
	if (*out)
		memcpy(*out, t->nodes, n * sizeof(**out));
	pthread_mutex_unlock(&t->mu);
	return *out ? n : -ENOMEM;
}

int ms_node_admit(struct ms *ms, const char *id, struct ms_squash *squash)
{
	struct ms_nodes *t = &ms->nodes;
	const char *colon = strrchr(id, ':');
	char name[MS_NODE_NAME_MAX + 1];
	struct ms_node *n;
	unsigned long gen;
	int ret = -EACCES;

	if (!colon || (size_t)(colon - id) > MS_NODE_NAME_MAX)
		return -EACCES;
	memcpy(name, id, (size_t)(colon - id));
	name[colon - id] = '\0';
	gen = strtoul(colon + 1, NULL, 10);
	pthread_mutex_lock(&t->mu);
	n = node_find(t, name);
	if (n && !n->revoked && n->generation == gen) {
		*squash = n->squash;
		ret = 0;
	}
	pthread_mutex_unlock(&t->mu);
	return ret;
}
