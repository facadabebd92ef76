// SPDX-License-Identifier: MIT
/*
 * walk.c - the subtree walk behind `rdfs du` and `rdfs find` (WALK): one
 * bounded batch of a depth-first walk per request, resumed from a cursor.
 *
 * Contract: ms_walk() is called from any worker thread; it takes no inode
 * lock and no mutex (it reads with one LevelDB iterator, whose snapshot the
 * dirents of the batch come from, and point reads of the inodes), so a walk
 * never holds anything a writer waits for, and a batch is bounded by
 * MS_WALK_VISIT entries looked at. Everything the batch returns is owned by
 * the caller's struct ms_walk (ms_walk_free()); nothing outlives the call
 * on the server: the cursor is the path of the last entry visited, relative
 * to the start, so any metaserver thread (or a restarted metaserver) resumes
 * it by looking the path up again.
 *
 * Resuming: each component of the cursor is looked up from the start; a
 * directory found (and listable) is walked into, and in each directory the
 * walk goes on strictly after the component's name. A component gone since
 * (removed, renamed) resumes after where its name was, so a walk always
 * ends, skipping or seeing twice only what moved while it ran.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ms_int.h"

struct walk_frame {
	uint64_t ino;
	size_t plen; /* the path up to this directory's entries: "a/b/" */
	size_t afterlen;
	char after[256]; /* the last name visited here ("": none yet) */
};

struct walker {
	struct ms *ms;
	const struct ms_cred *cr;
	struct ms_inode *in; /* scratch: the entry being visited */
	struct walk_frame *f;
	int depth, cap;
	char path[MS_WALK_PATH_MAX + 1];
};

static int walker_push(struct walker *w, uint64_t ino, size_t plen)
{
	if (w->depth + 1 == w->cap) {
		int cap = w->cap ? w->cap * 2 : 16;
		struct walk_frame *f = realloc(w->f, (size_t)cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		w->f = f;
		w->cap = cap;
	}
	w->depth++;
	w->f[w->depth].ino = ino;
	w->f[w->depth].plen = plen;
	w->f[w->depth].afterlen = 0;
	return 0;
}

/* May the caller list directory @in (read its names and search it)? */
static int may_list(struct walker *w, const struct ms_inode *in)
{
	return perm_check(in, w->cr, MAY_READ | MAY_EXEC) == 0;
}

/* Walk into directory @ino, whose path is w->path[0..@plen). 0, or -errno. */
static int walk_into(struct walker *w, uint64_t ino, size_t plen)
{
	if (plen + 1 > MS_WALK_PATH_MAX)
		return -ENAMETOOLONG;
	w->path[plen] = '/';
	return walker_push(w, ino, plen + 1);
}

/* Rebuild the frames for @cursor: each component found and listable is walked into. */
static int walk_resume(struct walker *w, const char *cursor, size_t len)
{
	size_t at = 0;

	if (len > MS_WALK_PATH_MAX)
		return -ENAMETOOLONG;
	while (at < len) {
		struct walk_frame *top = &w->f[w->depth];
		const char *c = cursor + at;
		const char *slash = memchr(c, '/', len - at);
		size_t cl = slash ? (size_t)(slash - c) : len - at;
		uint64_t child;
		uint32_t type;
		char name[256];

		if (cl == 0 || cl > 255)
			return -EINVAL;
		memcpy(name, c, cl);
		name[cl] = '\0';
		memcpy(top->after, name, cl);
		top->afterlen = cl;
		memcpy(w->path + top->plen, name, cl);
		at += cl + (slash ? 1 : 0);
		if (ns_dirent_get(w->ms, top->ino, name, &child, &type))
			break; /* gone: go on after its name */
		if (((type << 12) & S_IFMT) != S_IFDIR || ns_inode_get(w->ms, child, w->in) ||
		    !S_ISDIR(w->in->mode) || !may_list(w, w->in))
			break;
		if (walk_into(w, child, top->plen + cl))
			return -ENAMETOOLONG;
	}
	return 0;
}

static int walk_reserve(struct ms_walk *out, size_t path_len)
{
	if (out->n == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 64;
		struct ms_walk_entry *e = realloc(out->e, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		out->e = e;
		out->cap = cap;
	}
	if (out->paths_len + path_len + 1 > out->paths_cap) {
		size_t cap = out->paths_cap ? out->paths_cap : 4096;
		char *p;

		while (cap < out->paths_len + path_len + 1)
			cap *= 2;
		p = realloc(out->paths, cap);
		if (!p)
			return -ENOMEM;
		out->paths = p;
		out->paths_cap = cap;
	}
	return 0;
}

/* List the entry at w->path[0..@plen) with attributes @in. */
static int walk_list(struct walker *w, struct ms_walk *out, size_t plen, const struct ms_inode *in,
		     int denied)
{
	struct ms_walk_entry *e;
	int ret = walk_reserve(out, plen);

	if (ret)
		return ret;
	e = &out->e[out->n++];
	e->path_off = out->paths_len;
	e->path_len = plen;
	memcpy(out->paths + out->paths_len, w->path, plen);
	out->paths[out->paths_len + plen] = '\0';
	out->paths_len += plen + 1;
	ns_attr_from_inode(in, &e->attr);
	e->denied = denied;
	return 0;
}

/* Count @in into the sums (unless it is listed for the caller to count). */
static void walk_sum(struct ms_walk *out, const struct ms_inode *in)
{
	if (S_ISDIR(in->mode))
		out->dirs++;
	else if (S_ISREG(in->mode))
		out->files++;
	else
		out->others++;
	out->bytes += in->size;
	out->blocks += in->blocks;
}

/* The batch from the frames as walk_resume() left them. */
static int walk_batch(struct walker *w, struct ms_walk *out, uint32_t max, int summary)
{
	leveldb_iterator_t *it = leveldb_create_iterator(w->ms->db, w->ms->ropts);
	uint8_t k[MS_KEY_MAX];
	size_t visited = 0, last = 0;
	int positioned = 0, ret = 0;

	while (w->depth >= 0) {
		struct walk_frame *top = &w->f[w->depth];
		size_t plen = key_prefix(k, MS_TAG_DIRENT, top->ino), kl, vl, nl;
		const char *key, *val;
		uint64_t child;
		uint32_t type;
		int denied = 0, listed;

		if (positioned) {
			leveldb_iter_next(it);
		} else {
			leveldb_iter_seek(it, (char *)k,
					  key_dirent(k, top->ino, top->after, top->afterlen));
			/* strictly after the last name visited */
			if (top->afterlen && leveldb_iter_valid(it)) {
				key = leveldb_iter_key(it, &kl);
				if (kl == plen + top->afterlen && !memcmp(key, k, plen) &&
				    !memcmp(key + plen, top->after, top->afterlen))
					leveldb_iter_next(it);
			}
			positioned = 1;
		}
		key = leveldb_iter_valid(it) ? leveldb_iter_key(it, &kl) : NULL;
		if (!key || kl < plen || memcmp(key, k, plen)) {
			w->depth--; /* this directory is done: on in its parent */
			positioned = 0;
			continue;
		}
		nl = kl - plen;
		val = leveldb_iter_value(it, &vl);
		if (nl == 0 || nl > 255 || dirent_decode(val, vl, &child, &type))
			continue;
		memcpy(top->after, key + plen, nl);
		top->afterlen = nl;
		if (top->plen + nl > MS_WALK_PATH_MAX) {
			ret = -ENAMETOOLONG;
			break;
		}
		memcpy(w->path + top->plen, key + plen, nl);
		last = top->plen + nl;
		if (ns_inode_get(w->ms, child, w->in))
			continue; /* removed since the snapshot: as if never seen */
		visited++;
		if (S_ISDIR(w->in->mode))
			denied = !may_list(w, w->in);
		/* a summary lists what the caller has to see: links to count once, denials */
		listed = !summary || denied || (!S_ISDIR(w->in->mode) && w->in->nlink > 1);
		if (!summary || S_ISDIR(w->in->mode) || w->in->nlink <= 1)
			walk_sum(out, w->in);
		out->denied += denied;
		if (listed) {
			ret = walk_list(w, out, last, w->in, denied);
			if (ret)
				break;
		}
		if (S_ISDIR(w->in->mode) && !denied) {
			ret = walk_into(w, child, last);
			if (ret)
				break;
			positioned = 0;
		}
		if (out->n >= max || visited >= MS_WALK_VISIT ||
		    out->paths_len >= MS_WALK_PATH_BYTES)
			break;
	}
	leveldb_iter_destroy(it);
	if (ret)
		return ret;
	out->eof = w->depth < 0;
	if (!out->eof) {
		out->cursor = malloc(last + 1);
		if (!out->cursor)
			return -ENOMEM;
		memcpy(out->cursor, w->path, last);
		out->cursor[last] = '\0';
		out->cursor_len = last;
	}
	return 0;
}

int ms_walk(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const void *cursor,
	    size_t cursor_len, uint32_t max, int summary, struct ms_walk *out)
{
	struct walker *w = calloc(1, sizeof(*w));
	int ret;

	memset(out, 0, sizeof(*out));
	if (!w)
		return -ENOMEM;
	w->ms = ms;
	w->cr = cr;
	w->depth = -1;
	w->in = malloc(sizeof(*w->in));
	ret = w->in ? ns_get_dir(ms, ino, w->in) : -ENOMEM;
	if (!ret && !may_list(w, w->in))
		ret = -EACCES;
	if (!ret)
		ret = walker_push(w, ino, 0);
	if (max == 0 || max > MS_WALK_MAX)
		max = MS_WALK_MAX;
	if (!ret && cursor && cursor_len)
		ret = walk_resume(w, cursor, cursor_len);
	if (!ret)
		ret = walk_batch(w, out, max, summary);
	if (ret)
		ms_walk_free(out);
	free(w->in);
	free(w->f);
	free(w);
	return ret;
}

void ms_walk_free(struct ms_walk *w)
{
	free(w->e);
	free(w->paths);
	free(w->cursor);
	memset(w, 0, sizeof(*w));
}
