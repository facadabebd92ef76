// SPDX-License-Identifier: MIT
/*
 * layout.c - file layouts: the chunk records of a file, allocation of holes
 * (LAYOUT with allocate), clearing unwritten flags (COMMIT), freeing blocks past
 * a new end of file, and rebuilding the allocation maps at startup.
 *
 * Chunk i of a file goes to server (start + i % count) % n of the n up servers
 * sorted by id (ms_stripe_pos: start is stripe_start, or the position of the
 * server whose id it is after rdfs setstripe -i; count the file's stripe
 * count, all n when 0); a chunk that already holds blocks keeps growing on its
 * server while that server is up. Read-only and drained servers are not
 * among the n. A hole right after an unwritten extent first tries
 * to extend that extent in place; otherwise allocation starts where the file's
 * previous extent on that server ended, so streamed files stay contiguous.
 * Allocated blocks that may hold a freed file's data are zeroed on their
 * servers before the allocation is written (high_water.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frame.h"
#include "log.h"
#include "ms_int.h"

#define BLK	4096ull
#define MAX_UP	256

int chunk_reserve(struct ms_chunk *c, int want)
{
	if (want <= c->cap)
		return 0;
	int cap = c->cap ? c->cap : 8;

	while (cap < want)
		cap *= 2;
	struct ms_ext *e = realloc(c->e, cap * sizeof(*e));

	if (!e)
		return -ENOMEM;
	c->e = e;
	c->cap = cap;
	return 0;
}

int chunk_parse(struct ms_chunk *c, const char *v, size_t vl)
{
	int want = (int)(vl / MS_EXTENT_REC);

	if (chunk_reserve(c, want + 1))
		return -ENOMEM;
	c->n = chunk_decode(v, vl, c->e, c->cap);
	if (c->n < 0) {
		c->n = 0;
		return -EIO;
	}
	return 0;
}

int chunk_load(struct ms *ms, uint64_t ino, uint64_t idx, struct ms_chunk *c)
{
	uint8_t k[MS_KEY_MAX];
	char *v;
	size_t vl;
	int ret;

	c->idx = idx;
	c->n = 0;
	c->dirty = 0;
	ret = ns_get(ms, k, key_layout(k, ino, idx), &v, &vl);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	ret = chunk_parse(c, v, vl);
	leveldb_free(v);
	return ret;
}

void chunk_store(leveldb_writebatch_t *b, uint64_t ino, const struct ms_chunk *c)
{
	uint8_t k[MS_KEY_MAX];
	size_t kl = key_layout(k, ino, c->idx);
	uint8_t *v;

	if (c->n == 0) {
		leveldb_writebatch_delete(b, (char *)k, kl);
		return;
	}
	v = malloc((size_t)c->n * MS_EXTENT_REC);
	if (!v)
		return;
	for (int i = 0; i < c->n; i++)
		extent_encode(&c->e[i], v + (size_t)i * MS_EXTENT_REC);
	leveldb_writebatch_put(b, (char *)k, kl, (char *)v, (size_t)c->n * MS_EXTENT_REC);
	free(v);
}

static int ext_cmp(const void *a, const void *b)
{
	const struct ms_ext *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->server_id < y->server_id ? -1 : x->server_id > y->server_id;
}

/*
 * Sort by offset (then server) and merge extents that continue each other on
 * disk with the same flags. With copies, the extents of one server need not be
 * neighbours in that order: each is merged into the last one of its server.
 */
void chunk_normalize(struct ms_chunk *c)
{
	int j = 0;

	if (c->n > 1)
		qsort(c->e, c->n, sizeof(*c->e), ext_cmp);
	for (int i = 0; i < c->n; i++) {
		struct ms_ext *p = NULL;

		if (c->e[i].count == 0)
			continue;
		/* the last kept extent of this server, a few copies back at most */
		for (int k = j - 1; k >= 0 && k >= j - 2 * RDFS_MAX_COPIES; k--) {
			if (c->e[k].server_id == c->e[i].server_id) {
				p = &c->e[k];
				break;
			}
		}
		if (p && p->off + p->count == c->e[i].off && p->block + p->count == c->e[i].block &&
		    p->flags == c->e[i].flags) {
			p->count += c->e[i].count;
			continue;
		}
		c->e[j++] = c->e[i];
	}
	c->n = j;
}

void chunks_free(struct ms_chunk *cs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(cs[i].e);
	free(cs);
}

/* ---------------------------------------------------------------- truncate */

/*
 * Remove the blocks [@lo, @hi) of @in (block numbers in the file; with
 * @unwritten_only, only unwritten ones), splitting the extents that cross
 * either end. Their blocks go to @f.
 */
static int layout_cut(struct ms *ms, leveldb_writebatch_t *b, struct ms_inode *in, uint64_t lo,
		      uint64_t hi, int unwritten_only, struct ms_freelist *f)
{
	uint64_t cs = in->chunk_size / BLK;
	uint8_t k[MS_KEY_MAX];
	size_t plen = key_prefix(k, MS_TAG_LAYOUT, in->ino);
	leveldb_iterator_t *it;
	struct ms_chunk c = { 0 };
	struct ms_ext *out = NULL;
	int ret = 0;

	if (cs == 0)
		return -EIO;
	f->ino = in->ino;
	/* no blocks, no chunk records (see ns_inode_purge): skip the scan */
	if (in->blocks == 0 || lo >= hi)
		return 0;
	it = leveldb_create_iterator(ms->db, ms->ropts);
	for (leveldb_iter_seek(it, (char *)k, key_layout(k, in->ino, lo / cs));
	     leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *key = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v;
		uint64_t base;
		int j = 0, changed = 0;

		if (kl != plen + 8 || memcmp(key, k, plen))
			break;
		c.idx = get_be64(key + plen);
		base = c.idx * cs;
		if (base >= hi)
			break;
		v = leveldb_iter_value(it, &vl);
		ret = chunk_parse(&c, v, vl);
		if (ret)
			break;
		/* one extent may cross both ends: room for it to become two */
		free(out);
		out = malloc(((size_t)c.n + 1) * sizeof(*out));
		if (!out) {
			ret = -ENOMEM;
			break;
		}
		for (int i = 0; i < c.n; i++) {
			struct ms_ext e = c.e[i];
			uint64_t s = base + e.off, t = s + e.count;
			uint64_t a = s > lo ? s : lo, z = t < hi ? t : hi;

			if (a >= z || (unwritten_only && (!(e.flags & MS_EXT_UNWRITTEN) ||
							 (e.flags & MS_EXT_KEPT)))) {
				out[j++] = e;		/* untouched */
				continue;
			}
			freelist_add(f, e.server_id, e.block + (a - s), z - a);
			in->blocks -= z - a;
			changed = 1;
			if (s < a) {			/* the head stays */
				struct ms_ext h = e;

				h.count = (uint32_t)(a - s);
				out[j++] = h;
			}
			if (z < t) {			/* the tail stays */
				struct ms_ext tl = e;

				tl.off = e.off + (uint32_t)(z - s);
				tl.block = e.block + (z - s);
				tl.count = (uint32_t)(t - z);
				out[j++] = tl;
			}
		}
		/* a trim that finds nothing to free writes nothing */
		if (changed) {
			memcpy(c.e, out, (size_t)j * sizeof(*out));
			c.n = j;
			chunk_store(b, in->ino, &c);
		}
	}
	leveldb_iter_destroy(it);
	free(out);
	free(c.e);
	return ret;
}

int layout_truncate(struct ms *ms, leveldb_writebatch_t *b, struct ms_inode *in, uint64_t size,
		    struct ms_freelist *f)
{
	return layout_cut(ms, b, in, (size + BLK - 1) / BLK, UINT64_MAX, 0, f);
}

int layout_trim_unwritten(struct ms *ms, leveldb_writebatch_t *b, struct ms_inode *in,
			  struct ms_freelist *f)
{
	return layout_cut(ms, b, in, (in->size + BLK - 1) / BLK, UINT64_MAX, 1, f);
}


int layout_rebuild_bitmaps(struct ms *ms)
{
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	uint8_t tag = MS_TAG_LAYOUT;
	struct ms_chunk c = { 0 };
	int ret = 0;

	for (leveldb_iter_seek(it, (char *)&tag, 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *key = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v;

		if (kl == 0 || key[0] != MS_TAG_LAYOUT)
			break;
		v = leveldb_iter_value(it, &vl);
		if (kl != 17 || chunk_parse(&c, v, vl)) {
			log_error(1100015, "corrupt layout record");
			ret = -EIO;
			break;
		}
		for (int i = 0; i < c.n; i++) {
			int r = alloc_mark(&ms->alloc, c.e[i].server_id, c.e[i].block, c.e[i].count);

			if (r == -ENOENT)
				log_warn(1100016, "ino=%llu references unknown I/O server %u",
					 (unsigned long long)get_be64(key + 1), c.e[i].server_id);
			else if (r == -EEXIST)
				log_error(1100017,
					  "ino=%llu: blocks %llu+%u on server %u are used twice",
					  (unsigned long long)get_be64(key + 1),
					  (unsigned long long)c.e[i].block, c.e[i].count,
					  c.e[i].server_id);
		}
	}
	leveldb_iter_destroy(it);
	free(c.e);
	return ret;
}

/* ---------------------------------------------------------------- access */

/*
 * May the caller allocate in (@write) or look at the layout of @in, and with
 * which capability rights (*@rights: exactly what it may do, so a writer that
 * may not read gets no READ)? An open handle @h of @s grants what it was opened
 * for; @cr's permission grants the rest. Looking needs some right, allocating
 * WRITE.
 */
static int may_access(const struct ms_inode *in, struct ms_session *s, const struct ms_cred *cr,
		      uint64_t h, int write, uint32_t *rights)
{
	uint32_t flags;
	int err;

	*rights = 0;
	if (h && handle_flags(s, h, in->ino, &flags) == 0) {
		uint32_t acc = flags & O_ACCMODE;

		if (acc != O_WRONLY)
			*rights |= RDFS_CAP_READ;
		if (acc != O_RDONLY)
			*rights |= RDFS_CAP_WRITE;
	}
	if (!(*rights & RDFS_CAP_READ) && perm_check(in, cr, MAY_READ) == 0)
		*rights |= RDFS_CAP_READ;
	if (!(*rights & RDFS_CAP_WRITE)) {
		err = perm_check(in, cr, MAY_WRITE);
		if (!err)
			*rights |= RDFS_CAP_WRITE;
		else if (write || !*rights)
			return err;
	}
	return 0;
}

/* may_access() for a regular file whose chunk size the layout code can work with. */
static int file_access(const struct ms_inode *in, struct ms_session *s, const struct ms_cred *cr,
		       uint64_t h, int write, uint32_t *rights)
{
	if (S_ISDIR(in->mode))
		return -EISDIR;
	if (!S_ISREG(in->mode) || in->chunk_size < BLK || in->chunk_size % BLK)
		return -EINVAL;
	return may_access(in, s, cr, h, write, rights);
}

/* ---------------------------------------------------------------- allocation */

struct alloc_undo {
	size_t n, cap;
	struct ms_ext *e;
};

static int undo_reserve(struct alloc_undo *u)
{
	if (u->n == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 16;
		struct ms_ext *e = realloc(u->e, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		u->e = e;
		u->cap = cap;
	}
	return 0;
}

static void undo_add(struct alloc_undo *u, uint32_t server, uint64_t block, uint64_t count)
{
	u->e[u->n++] = (struct ms_ext){ .server_id = server, .block = block,
					.count = (uint32_t)count };
}

static void undo_run(struct ms *ms, struct alloc_undo *u)
{
	for (size_t i = 0; i < u->n; i++)
		alloc_free(&ms->alloc, u->e[i].server_id, u->e[i].block, u->e[i].count);
}

struct alloc_ctx {
	uint32_t up[MAX_UP];
	int nup;
	uint64_t goal[MAX_UP];		/* per up server: where this file's last extent ended */
	struct alloc_undo undo;		/* every run taken */
	struct alloc_undo reused;	/* the parts of them below the high-water mark */
	uint8_t flags;			/* of new extents: UNWRITTEN, with fallocate's KEPT */
	uint64_t dom[MAX_UP];		/* per up server: its failure domain (registry_domain) */
};

/*
 * Remember run [block, block + got) of server @sid, @reused of them below the
 * high-water mark: both lists or neither (forgetting a run would leave it
 * unzeroed or the mark unraised), else the run is given back and -ENOMEM.
 */
static int note_taken(struct ms *ms, struct alloc_ctx *a, uint32_t sid, uint64_t block,
		      uint64_t got, uint64_t reused)
{
	if (undo_reserve(&a->undo) || undo_reserve(&a->reused)) {
		alloc_free(&ms->alloc, sid, block, got);
		return -ENOMEM;
	}
	undo_add(&a->undo, sid, block, got);
	if (reused)
		undo_add(&a->reused, sid, block, reused);
	return 0;
}

static int up_index(const struct alloc_ctx *a, uint32_t id)
{
	for (int i = 0; i < a->nup; i++)
		if (a->up[i] == id)
			return i;
	return -1;
}

static void note_goal(struct alloc_ctx *a, const struct ms_ext *e)
{
	int i = up_index(a, e->server_id);

	if (i >= 0)
		a->goal[i] = e->block + e->count;
}

int ms_stripe_pos(const struct ms_inode *in, uint64_t idx, const uint32_t *up, int n)
{
	uint64_t start = in->stripe_start, count = in->stripe_count;

	if (n <= 0)
		return 0;
	if (in->flags & MS_INO_STRIPE_ID) {
		int i = 0;

		while (i < n && up[i] < in->stripe_start)
			i++;
		start = i < n ? (uint64_t)i : 0;
	}
	if (count == 0 || count > (uint64_t)n)
		count = (uint64_t)n;
	return (int)((start + idx % count) % (uint64_t)n);
}

/* 1 if chunk @c has an extent on server @sid. */
static int chunk_on_server(const struct ms_chunk *c, uint32_t sid)
{
	for (int i = 0; i < c->n; i++)
		if (c->e[i].server_id == sid)
			return 1;
	return 0;
}

/*
 * Fill blocks [from, to) of chunk @c (offsets in the chunk) with new unwritten
 * extents on up server a->up[@si], spilling what it has no room for to the
 * next up servers that @used (a bitmap over a->up) does not name. Every server
 * it allocates on is added to @used. 0, or -ENOSPC with what could be
 * allocated left in the chunk.
 */
static int alloc_copy(struct ms *ms, struct alloc_ctx *a, struct ms_chunk *c, int si, uint32_t from,
		      uint32_t to, uint8_t *used, uint64_t *allocated)
{
	uint32_t at = from;

	used[si] = 1;
	/* extend the unwritten extent of this server that ends where the hole starts */
	for (int i = 0; i < c->n; i++) {
		struct ms_ext *e = &c->e[i];

		if (e->off + e->count == from && e->server_id == a->up[si] &&
		    e->flags == a->flags) {
			uint64_t reused;
			uint64_t got = alloc_extend(&ms->alloc, e->server_id, e->block + e->count,
						    to - from, &reused);

			if (got) {
				if (note_taken(ms, a, e->server_id, e->block + e->count, got,
					       reused))
					return -ENOMEM;
				e->count += (uint32_t)got;
				at += (uint32_t)got;
				*allocated += got;
				note_goal(a, e);
				c->dirty = 1;
			}
			break;
		}
	}

	while (at < to) {
		uint32_t sid = a->up[si];
		uint64_t block, reused;
		int64_t got = alloc_run(&ms->alloc, sid, to - at, a->goal[si], &block, &reused);

		if (got == -ENOSPC) {
			/* this server is full: spill to the next one no other copy uses */
			int tries;

			for (tries = 0; tries < a->nup && used[si]; tries++)
				si = (si + 1) % a->nup;
			if (used[si])
				return -ENOSPC;
			used[si] = 1;
			continue;
		}
		if (got < 0)
			return (int)got;
		if (chunk_reserve(c, c->n + 1)) {
			alloc_free(&ms->alloc, sid, block, (uint64_t)got);
			return -ENOMEM;
		}
		if (note_taken(ms, a, sid, block, (uint64_t)got, reused))
			return -ENOMEM;
		c->e[c->n] = (struct ms_ext){ .off = at, .count = (uint32_t)got, .server_id = sid,
					      .block = block, .flags = a->flags };
		note_goal(a, &c->e[c->n]);
		c->n++;
		at += (uint32_t)got;
		*allocated += (uint64_t)got;
		c->dirty = 1;
	}
	return 0;
}

/*
 * Fill blocks [from, to) of chunk @c, a hole in every copy, with @copies
 * copies of new unwritten extents, each on another up server, and on another
 * failure domain while there are domains left. The chunk's own servers come
 * first while they are up (a chunk grows where it started), then the servers
 * that follow the file's stripe position. Fewer copies than asked for, when
 * too few servers are up or have room, is not an error (the chunk is
 * under-replicated); no copy at all is -ENOSPC.
 */
static int alloc_hole(struct ms *ms, struct alloc_ctx *a, const struct ms_inode *in,
		      struct ms_chunk *c, uint32_t from, uint32_t to, uint32_t copies,
		      uint64_t *allocated)
{
	uint8_t used[MAX_UP] = { 0 };
	int order[MAX_UP], n = 0, made = 0, ret = 0;
	int first = ms_stripe_pos(in, c->idx, a->up, a->nup);

	for (int i = 0; i < a->nup; i++)
		if (chunk_on_server(c, a->up[i]))
			order[n++] = i;
	for (int k = 0; k < a->nup; k++) {
		int i = (first + k) % a->nup;

		if (!chunk_on_server(c, a->up[i]))
			order[n++] = i;
	}
	uint64_t taken[RDFS_MAX_COPIES];

	/* first round: a domain no copy is in yet; second: any server left */
	for (int round = 0; round < 2; round++) {
		for (int k = 0; k < n && (uint32_t)made < copies; k++) {
			int dup = 0;

			if (used[order[k]])
				continue;
			for (int j = 0; j < made && round == 0; j++)
				dup |= taken[j] == a->dom[order[k]];
			if (dup)
				continue;
			ret = alloc_copy(ms, a, c, order[k], from, to, used, allocated);
			if (ret == 0)
				taken[made++] = a->dom[order[k]];
			else if (ret != -ENOSPC)
				return ret;
		}
	}
	if (made == 0)
		return -ENOSPC;
	if ((uint32_t)made < copies)
		log_debug(1100018, "ino=%llu chunk %llu: %d of %u copies (too few servers up or with room)",
			  (unsigned long long)in->ino, (unsigned long long)c->idx, made, copies);
	return 0;
}

static int chunk_reflag(struct ms_chunk *c, uint64_t base, uint64_t r0, uint64_t r1, uint8_t from,
			uint8_t to);
int chunk_reflag_on(struct ms_chunk *c, uint32_t sid, uint64_t base, uint64_t r0, uint64_t r1,
			   uint8_t from, uint8_t to);

/*
 * Allocate every hole of blocks [b0, b1) of the file in the loaded chunks @cs;
 * for fallocate (a->flags has KEPT) the unwritten blocks already there are
 * kept too.
 */
static int alloc_range(struct ms *ms, struct alloc_ctx *a, struct ms_inode *in,
		       struct ms_chunk *cs, size_t ncs, uint64_t b0, uint64_t b1)
{
	uint64_t cpb = in->chunk_size / BLK, allocated = 0;
	uint32_t copies = ms_copies(ms, in);
	int ret = 0;

	for (size_t i = 0; i < ncs && !ret; i++) {
		struct ms_chunk *c = &cs[i];
		uint64_t base = c->idx * cpb;
		uint32_t lo = (uint32_t)((b0 > base ? b0 : base) - base);
		uint32_t hi = (uint32_t)((b1 < base + cpb ? b1 : base + cpb) - base);
		uint32_t pos = lo;

		/* loaded for the range asked for, which quota_clip may have cut short */
		if (b1 <= base || b0 >= base + cpb)
			continue;
		chunk_normalize(c);
		if (a->flags & MS_EXT_KEPT)
			ret = chunk_reflag(c, base, base + lo, base + hi, MS_EXT_UNWRITTEN, a->flags);
		for (int j = 0; j < c->n; j++)
			note_goal(a, &c->e[j]);
		/*
		 * Walk the extents (sorted by offset; copies overlap) and fill the
		 * gaps no copy covers. A block some copy holds is left alone: the
		 * copies it lacks are rebuilt from one that has it, never allocated
		 * here as unwritten (which would read as zeros).
		 */
		for (int j = 0, n0 = c->n; j <= n0 && pos < hi && !ret; j++) {
			uint32_t es = j < n0 ? c->e[j].off : hi;
			uint32_t ee = j < n0 ? c->e[j].off + c->e[j].count : hi;

			if (es > pos)
				ret = alloc_hole(ms, a, in, c, pos, es < hi ? es : hi, copies,
						 &allocated);
			if (ee > pos)
				pos = ee;
		}
		chunk_normalize(c);
	}
	in->blocks += allocated;
	return ret;
}

/* Load the chunk records covering chunks [first, last] (all of them, empty ones too). */
static int load_chunks(struct ms *ms, uint64_t ino, uint64_t first, uint64_t last,
		       struct ms_chunk **out, size_t *nout)
{
	size_t n = (size_t)(last - first + 1);
	struct ms_chunk *cs = calloc(n, sizeof(*cs));
	int ret = 0;

	if (!cs)
		return -ENOMEM;
	for (size_t i = 0; i < n && !ret; i++)
		ret = chunk_load(ms, ino, first + i, &cs[i]);
	if (ret) {
		chunks_free(cs, n);
		return ret;
	}
	*out = cs;
	*nout = n;
	return 0;
}

/* Load only the existing chunk records in [first, last]. */
static int scan_chunks(struct ms *ms, uint64_t ino, uint64_t first, uint64_t last,
		       struct ms_chunk **out, size_t *nout)
{
	uint8_t k[MS_KEY_MAX];
	size_t plen = key_prefix(k, MS_TAG_LAYOUT, ino), n = 0, cap = 0;
	struct ms_chunk *cs = NULL;
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	int ret = 0;

	for (leveldb_iter_seek(it, (char *)k, key_layout(k, ino, first)); leveldb_iter_valid(it);
	     leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *key = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v;
		uint64_t idx;

		if (kl != plen + 8 || memcmp(key, k, plen))
			break;
		idx = get_be64(key + plen);
		if (idx > last)
			break;
		if (n == cap) {
			struct ms_chunk *nc = realloc(cs, (cap ? cap * 2 : 16) * sizeof(*nc));

			if (!nc) {
				ret = -ENOMEM;
				break;
			}
			cs = nc;
			cap = cap ? cap * 2 : 16;
		}
		memset(&cs[n], 0, sizeof(cs[n]));
		cs[n].idx = idx;
		v = leveldb_iter_value(it, &vl);
		ret = chunk_parse(&cs[n], v, vl);
		n++;
		if (ret)
			break;
	}
	leveldb_iter_destroy(it);
	if (ret) {
		chunks_free(cs, n);
		return ret;
	}
	*out = cs;
	*nout = n;
	return 0;
}

/*
 * Extents of the chunks clipped to file blocks [b0, b1), merged where
 * contiguous, sorted by offset (copies of a range: one extent each, by server).
 * Stale copies only @with_stale (they are never served).
 */
static int build_reply(const struct ms_inode *in, struct ms_chunk *cs, size_t ncs, uint64_t b0,
		       uint64_t b1, int with_stale, struct ms_layout *out)
{
	uint64_t cpb = in->chunk_size / BLK;
	size_t cap = 0;

	out->n = 0;
	out->ext = NULL;
	for (size_t i = 0; i < ncs; i++) {
		uint64_t base = cs[i].idx * cpb;

		chunk_normalize(&cs[i]);
		for (int j = 0; j < cs[i].n; j++) {
			const struct ms_ext *e = &cs[i].e[j];
			uint64_t s = base + e->off, t = s + e->count, blk = e->block;
			int stale = !!(e->flags & MS_EXT_STALE);
			int building = !!(e->flags & MS_EXT_BUILDING);
			struct ms_extent *p = NULL;

			if (t <= b0 || s >= b1 || (stale && !with_stale))
				continue;
			if (s < b0) {
				blk += b0 - s;
				s = b0;
			}
			if (t > b1)
				t = b1;
			/* the last extent of this server, a few copies back at most */
			for (size_t k = out->n; k > 0 && k + 2 * RDFS_MAX_COPIES > out->n; k--) {
				if (out->ext[k - 1].server_id == e->server_id) {
					p = &out->ext[k - 1];
					break;
				}
			}
			if (p && p->file_offset + p->length == s * BLK &&
			    p->block + p->length / BLK == blk &&
			    p->unwritten == !!(e->flags & MS_EXT_UNWRITTEN) && p->stale == stale &&
			    p->building == building) {
				p->length += (t - s) * BLK;
				continue;
			}
			if (out->n == MS_LAYOUT_MAX_EXTENTS) {
				/*
				 * Describe less: up to where the extents stop fitting
				 * (every extent before this one, so every copy of the
				 * blocks before it, is in).
				 */
				out->length = s * BLK - out->offset;
				return 0;
			}
			if (out->n == cap) {
				struct ms_extent *ne;

				cap = cap ? cap * 2 : 16;
				ne = realloc(out->ext, cap * sizeof(*ne));
				if (!ne)
					return -ENOMEM;
				out->ext = ne;
			}
			out->ext[out->n++] = (struct ms_extent){
				.file_offset = s * BLK, .length = (t - s) * BLK,
				.server_id = e->server_id, .block = blk,
				.unwritten = !!(e->flags & MS_EXT_UNWRITTEN), .stale = stale,
				.building = building,
			};
		}
	}
	return 0;
}

/*
 * The blocks of [b0, b1) of the file no copy covers in the loaded chunks @cs
 * (in index order), up to @budget of them: *@cut is where the first hole
 * block past the budget starts (b1 when they all fit). Returns how many
 * holes it counted.
 */
static uint64_t count_holes(struct ms_chunk *cs, size_t ncs, uint64_t cpb, uint64_t b0,
			    uint64_t b1, uint64_t budget, uint64_t *cut)
{
	uint64_t holes = 0;

	*cut = b1;
	for (size_t i = 0; i < ncs; i++) {
		struct ms_chunk *c = &cs[i];
		uint64_t base = c->idx * cpb;
		uint64_t lo = (b0 > base ? b0 : base) - base;
		uint64_t hi = (b1 < base + cpb ? b1 : base + cpb) - base, pos = lo;

		if (b1 <= base || b0 >= base + cpb)
			continue;
		chunk_normalize(c);
		/* sorted by offset, copies overlapping: the gaps no extent covers */
		for (int j = 0; j <= c->n && pos < hi; j++) {
			uint64_t es = j < c->n ? c->e[j].off : hi;
			uint64_t ee = j < c->n ? (uint64_t)c->e[j].off + c->e[j].count : hi;

			if (es > pos) {
				uint64_t gap = (es < hi ? es : hi) - pos;

				if (holes + gap > budget) {
					*cut = base + pos + (budget - holes);
					return budget;
				}
				holes += gap;
			}
			if (ee > pos)
				pos = ee;
		}
	}
	return holes;
}

/*
 * Reserve in @mb what allocating the holes of blocks [b0, b1) costs the
 * quotas of @in's owner, group and project (every copy counts), and cut the
 * range where what fits ends (*@cut): allocate-ahead then gets less, never an
 * error. -EDQUOT when not even its first hole fits.
 */
static int quota_clip(struct ms *ms, struct ms_batch *mb, const struct ms_cred *cr,
		      const struct ms_inode *in, struct ms_chunk *cs, size_t ncs, int nup,
		      uint64_t b0, uint64_t b1, uint64_t *cut)
{
	uint64_t cpb = in->chunk_size / BLK, copies = ms_copies(ms, in), holes, granted;
	struct ms_qids ids;
	int ret;

	/* fewer servers, fewer copies (alloc_hole) */
	if (copies > (uint64_t)nup)
		copies = (uint64_t)nup;
	if (copies == 0)
		copies = 1;
	holes = count_holes(cs, ncs, cpb, b0, b1, UINT64_MAX, cut);
	if (holes == 0)
		return 0;
	quota_ids_of(in, &ids);
	ret = quota_reserve(ms, mb, cr, &ids, holes * copies, 0, MS_QRES_CLAMP, &granted);
	if (ret || granted >= holes * copies)
		return ret;
	count_holes(cs, ncs, cpb, b0, b1, granted / copies, cut);
	if (*cut == b0) {
		log_debug(1100019,
			  "ino=%llu: allocation refused: its owner, group or project is over "
			  "quota",
			  (unsigned long long)in->ino);
		return -EDQUOT;
	}
	return 0;
}

void ms_layout_free(struct ms_layout *l)
{
	free(l->ext);
	l->ext = NULL;
	l->n = 0;
}

static int layout_once(struct ms *ms, struct ms_session *s, const struct ms_cred *cr,
		       uint64_t ino, uint64_t off, uint64_t len, int allocate, uint64_t handle,
		       struct ms_layout *out)
{
	struct ms_lockset ls;
	struct ms_inode *in = malloc(sizeof(*in));
	struct ms_chunk *cs = NULL;
	size_t ncs = 0;
	struct alloc_ctx *a = NULL;
	uint64_t start, end, cpb;
	uint32_t rights;
	int with_stale = !!(allocate & MS_LAYOUT_WITH_STALE), ret;

	allocate &= ~MS_LAYOUT_WITH_STALE;
	memset(out, 0, sizeof(*out));
	if (!in)
		return -ENOMEM;
	lockset_init(&ls);
	/* describing only reads: readers of one file need not queue behind each other */
	if (allocate)
		lockset_add(&ls, ino);
	else
		lockset_add_shared(&ls, ino);
	lockset_lock(&ms->locks, &ls);
	ret = ns_inode_get(ms, ino, in);
	if (ret)
		goto out;
	ret = file_access(in, s, cr, handle, allocate, &rights);
	if (ret)
		goto out;
	cpb = in->chunk_size / BLK;

	if (off >= MS_MAX_FILE_BYTES) {
		if (allocate) {
			ret = -EFBIG;
			goto out;
		}
		off = MS_MAX_FILE_BYTES;
	}
	if (len > MS_MAX_FILE_BYTES - off)
		len = MS_MAX_FILE_BYTES - off;
	start = off / BLK * BLK;
	if (len == 0 && !allocate)
		end = in->size > start ? in->size : start;
	else
		end = off + len;
	end = (end + BLK - 1) / BLK * BLK;
	if (end - start > MS_LAYOUT_MAX_BYTES)
		end = start + MS_LAYOUT_MAX_BYTES;
	out->offset = start;
	out->length = end - start;
	out->chunk_size = in->chunk_size;
	/* a chunk being rebuilt takes no write until its new copy is in (rebuild.c) */
	if (end > start && ms_rebuild_busy(ms, ino, start / BLK / cpb, (end / BLK - 1) / cpb)) {
		if (allocate) {
			ret = -EAGAIN;
			goto out;
		}
		rights &= ~RDFS_CAP_WRITE;
	}
	out->rights = rights;
	/* under the inode lock: a fence of these extents bumps it under that lock too */
	out->gen = ms_file_gen(ms, ino);
	out->incarnation = ms->incarnation;
	if (end == start) {
		out->size = in->size;
		goto out;
	}

	if (allocate) {
		uint64_t first = start / BLK / cpb, last = (end / BLK - 1) / cpb, b1;
		struct ms_batch mb;
		int up, known, dirty = 0;

		a = calloc(1, sizeof(*a));
		if (!a) {
			ret = -ENOMEM;
			goto out;
		}
		/* just restarted: stripe over every known server, not the first back */
		ret = registry_ready(&ms->reg, &up, &known);
		if (ret) {
			log_debug(1100020,
				  "ino=%llu: allocation waits for I/O servers (%d of %d up)",
				  (unsigned long long)ino, up, known);
			goto out;
		}
		a->nup = registry_alloc_ids(&ms->reg, a->up, MAX_UP);
		for (int i = 0; i < a->nup; i++)
			a->dom[i] = registry_domain(&ms->reg, a->up[i]);
		if (a->nup == 0) {
			log_warn(1100021, "ino=%llu: cannot allocate: no I/O server is up",
				 (unsigned long long)ino);
			ret = -EIO;
			goto out;
		}
		for (int i = 0; i < a->nup; i++)
			a->goal[i] = UINT64_MAX;
		a->flags = MS_EXT_UNWRITTEN | (allocate == MS_ALLOC_KEEP ? MS_EXT_KEPT : 0);
		/* the chunks just before the range tell where this file's blocks end */
		for (uint64_t p = first > (uint64_t)a->nup ? first - a->nup : 0; p < first; p++) {
			struct ms_chunk pc = { 0 };

			if (chunk_load(ms, ino, p, &pc) == 0)
				for (int j = 0; j < pc.n; j++)
					note_goal(a, &pc.e[j]);
			free(pc.e);
		}
		ret = load_chunks(ms, ino, first, last, &cs, &ncs);
		if (ret)
			goto out;
		ms_batch_init(&mb);
		/* durable with the COMMIT of what is written there (ms.h) */
		mb.nosync = allocate != MS_ALLOC_KEEP;
		/* within the owner's, group's and project's limits: maybe less of the range */
		ret = quota_clip(ms, &mb, cr, in, cs, ncs, a->nup, start / BLK, end / BLK, &b1);
		if (ret) {
			ms_batch_destroy(ms, &mb);
			goto out;
		}
		end = b1 * BLK;
		out->length = end - start;
		/* from the maps to a durable layout: fsck waits (ms->blocks_rw) */
		pthread_rwlock_rdlock(&ms->blocks_rw);
		quarantine_release_due(ms);
		ret = alloc_range(ms, a, in, cs, ncs, start / BLK, end / BLK);
		/* nobody may see a recycled block before it reads as zeros */
		if (!ret)
			ret = high_water_zero(ms, a->reused.e, a->reused.n);
		for (size_t i = 0; i < ncs && !ret && !dirty; i++)
			dirty = cs[i].dirty;
		if (!ret && dirty) {
			for (size_t i = 0; i < ncs; i++)
				if (cs[i].dirty)
					chunk_store(mb.b, ino, &cs[i]);
			ns_inode_put(&mb, in);
			ret = high_water_write(ms, &mb, a->undo.e, a->undo.n);
		}
		if (ret)
			undo_run(ms, &a->undo);
		pthread_rwlock_unlock(&ms->blocks_rw);
		ms_batch_destroy(ms, &mb);
		if (ret)
			goto out;
	} else {
		ret = scan_chunks(ms, ino, start / BLK / cpb, (end / BLK - 1) / cpb, &cs, &ncs);
		if (ret)
			goto out;
	}
	ret = build_reply(in, cs, ncs, start / BLK, end / BLK, with_stale, out);
	out->size = in->size;
	/*
	 * Just restarted, and a server holding these blocks has not registered
	 * again: its capabilities would carry no epoch it accepts. Retry soon.
	 */
	for (size_t i = 0; !ret && i < out->n; i++) {
		int up, known;

		if (!registry_is_up(&ms->reg, out->ext[i].server_id) &&
		    registry_ready(&ms->reg, &up, &known) == -EAGAIN)
			ret = -EAGAIN;
	}
out:
	lockset_unlock(&ms->locks, &ls);
	if (ret)
		ms_layout_free(out);
	if (a) {
		free(a->undo.e);
		free(a->reused.e);
	}
	free(a);
	chunks_free(cs, ncs);
	free(in);
	return ret;
}

int ms_layout(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	      uint64_t off, uint64_t len, int allocate, uint64_t handle, struct ms_layout *out)
{
	int ret = layout_once(ms, s, cr, ino, off, len, allocate, handle, out);

	/* blocks of removed files on their way back (freeing.c) may be the space */
	if (ret == -ENOSPC && freeing_wait(ms))
		ret = layout_once(ms, s, cr, ino, off, len, allocate, handle, out);
	return ret;
}

/* ---------------------------------------------------------------- commit */

/*
 * Give the blocks [r0, r1) of the file in chunk @c flags @to, where their
 * extent's flags are @from and its server is @sid (MS_ANY_SERVER: any); the
 * rest of each such extent keeps its flags.
 */
int chunk_reflag_on(struct ms_chunk *c, uint32_t sid, uint64_t base, uint64_t r0, uint64_t r1,
			   uint8_t from, uint8_t to)
{
	int n0 = c->n;

	for (int i = 0; i < n0; i++) {
		struct ms_ext e = c->e[i];
		uint64_t s = base + e.off, t = s + e.count, a, b;

		if (e.flags != from || t <= r0 || s >= r1 ||
		    (sid != MS_ANY_SERVER && e.server_id != sid))
			continue;
		a = s > r0 ? s : r0;
		b = t < r1 ? t : r1;
		if (chunk_reserve(c, c->n + 2))
			return -ENOMEM;
		/* split into [s,a) as it was, [a,b) with @to, [b,t) as it was */
		c->e[i].count = (uint32_t)(a - s);
		c->e[c->n++] = (struct ms_ext){ .off = (uint32_t)(a - base), .count = (uint32_t)(b - a),
						.server_id = e.server_id, .block = e.block + (a - s),
						.flags = to };
		if (b < t)
			c->e[c->n++] = (struct ms_ext){ .off = (uint32_t)(b - base),
							.count = (uint32_t)(t - b),
							.server_id = e.server_id,
							.block = e.block + (b - s),
							.flags = from };
		c->dirty = 1;
	}
	chunk_normalize(c);
	return 0;
}

static int chunk_reflag(struct ms_chunk *c, uint64_t base, uint64_t r0, uint64_t r1, uint8_t from,
			uint8_t to)
{
	return chunk_reflag_on(c, MS_ANY_SERVER, base, r0, r1, from, to);
}

/* Mark blocks [r0, r1) of the file written in chunk @c. */
static int chunk_mark_written(struct ms_chunk *c, uint64_t base, uint64_t r0, uint64_t r1)
{
	int ret = chunk_reflag(c, base, r0, r1, MS_EXT_UNWRITTEN, 0);

	return ret ? ret : chunk_reflag(c, base, r0, r1, MS_EXT_UNWRITTEN | MS_EXT_KEPT, 0);
}

/*
 * The chunks one COMMIT touches, each loaded once so several ranges in one
 * chunk add up, sorted by index: the ranges are walked in order with one
 * iterator, so a COMMIT of n ranges costs one pass over its chunk records,
 * not n iterators each rescanning from its range's start.
 */
struct chunk_cache {
	size_t n, cap;
	struct ms_chunk *c;
	uint64_t loaded_to;		/* every record below this chunk index is in c[] */
};

struct block_range {
	uint64_t r0, r1;
};

static int block_range_cmp(const void *a, const void *b)
{
	const struct block_range *x = a, *y = b;

	return x->r0 < y->r0 ? -1 : x->r0 > y->r0;
}

/* The first cached chunk with index >= @idx (cc->n if none). */
static size_t cache_lower_bound(const struct chunk_cache *cc, uint64_t idx)
{
	size_t lo = 0, hi = cc->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cc->c[mid].idx < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Load the records of chunks [@first, @last] (those past cc->loaded_to) into @cc. */
static int cache_load(struct ms *ms, leveldb_iterator_t *it, uint64_t ino,
		      struct chunk_cache *cc, uint64_t first, uint64_t last)
{
	uint8_t k[MS_KEY_MAX];
	size_t plen = key_prefix(k, MS_TAG_LAYOUT, ino);
	int ret = 0;

	if (first < cc->loaded_to)
		first = cc->loaded_to;
	if (first > last)
		return 0;
	for (leveldb_iter_seek(it, (char *)k, key_layout(k, ino, first)); leveldb_iter_valid(it);
	     leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *key = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v;
		uint64_t idx;

		if (kl != plen + 8 || memcmp(key, k, plen))
			break;
		idx = get_be64(key + plen);
		if (idx > last)
			break;
		if (cc->n == cc->cap) {
			size_t cap = cc->cap ? cc->cap * 2 : 16;
			struct ms_chunk *nc = realloc(cc->c, cap * sizeof(*nc));

			if (!nc) {
				ret = -ENOMEM;
				break;
			}
			cc->c = nc;
			cc->cap = cap;
		}
		memset(&cc->c[cc->n], 0, sizeof(cc->c[cc->n]));
		cc->c[cc->n].idx = idx;
		v = leveldb_iter_value(it, &vl);
		ret = chunk_parse(&cc->c[cc->n], v, vl);
		cc->n++;
		if (ret)
			break;
	}
	if (!ret)
		cc->loaded_to = last + 1;
	return ret;
}

/* Mark every written range of @rs[0..@n) (blocks, sorted by start) in @ino's chunk records. */
static int commit_ranges(struct ms *ms, uint64_t ino, uint64_t cpb, const struct block_range *rs,
			 size_t n, struct chunk_cache *cc)
{
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++) {
		uint64_t first = rs[i].r0 / cpb, last = (rs[i].r1 - 1) / cpb;

		ret = cache_load(ms, it, ino, cc, first, last);
		for (size_t j = cache_lower_bound(cc, first); j < cc->n && !ret; j++) {
			if (cc->c[j].idx > last)
				break;
			ret = chunk_mark_written(&cc->c[j], cc->c[j].idx * cpb, rs[i].r0, rs[i].r1);
		}
	}
	leveldb_iter_destroy(it);
	return ret;
}

/* 1 if every block of [r0, r1) lies in some extent of the chunks in @cc. */
static int chunks_cover(const struct chunk_cache *cc, uint64_t cpb, uint64_t r0, uint64_t r1)
{
	uint64_t pos = r0;

	for (size_t j = cache_lower_bound(cc, r0 / cpb); j < cc->n && pos < r1; j++) {
		const struct ms_chunk *c = &cc->c[j];
		uint64_t base = c->idx * cpb;
		int moved = 1;

		if (base > pos)
			return 0;	/* no record for the chunk of pos: a hole */
		/* extents may overlap (copies): step over whichever covers pos */
		while (moved && pos < r1 && pos < base + cpb) {
			moved = 0;
			for (int i = 0; i < c->n; i++) {
				uint64_t s = base + c->e[i].off, t = s + c->e[i].count;

				if (s <= pos && pos < t) {
					pos = t;
					moved = 1;
				}
			}
		}
		if (pos < r1 && pos < base + cpb)
			return 0;
	}
	return pos >= r1;
}

uint64_t ms_incarnation(const struct ms *ms)
{
	return ms->incarnation;
}

int ms_commit(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	      uint64_t size, int64_t mtime_ns, const struct ms_range *written, size_t n,
	      uint64_t handle, struct ms_attr *out)
{
	return ms_commit_from(ms, s, cr, ino, size, mtime_ns, written, n, handle, 0, out);
}

int ms_commit_from(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
		   uint64_t size, int64_t mtime_ns, const struct ms_range *written, size_t n,
		   uint64_t handle, uint64_t incarnation, struct ms_attr *out)
{
	struct ms_lockset ls;
	struct ms_inode *in;
	struct chunk_cache cc = { 0 };
	struct block_range *rs = NULL;
	size_t nrs = 0;
	struct ms_batch mb;
	uint32_t rights;
	int ret;

	ms_batch_init(&mb);
	if (n > MS_COMMIT_MAX_RANGES || size > MS_MAX_FILE_BYTES) {
		ms_batch_destroy(ms, &mb);
		return n > MS_COMMIT_MAX_RANGES ? -EINVAL : -EFBIG;
	}
	in = malloc(sizeof(*in));
	if (!in) {
		ms_batch_destroy(ms, &mb);
		return -ENOMEM;
	}
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (ret)
		goto out;
	ret = file_access(in, s, cr, handle, 1, &rights);
	if (ret)
		goto out;

	rs = malloc((n ? n : 1) * sizeof(*rs));
	if (!rs) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (written[i].length == 0 || written[i].offset >= MS_MAX_FILE_BYTES)
			continue;
		rs[nrs].r0 = written[i].offset / BLK;
		if (written[i].length > MS_MAX_FILE_BYTES - written[i].offset)
			rs[nrs].r1 = MS_MAX_FILE_BYTES / BLK;
		else
			rs[nrs].r1 = (written[i].offset + written[i].length + BLK - 1) / BLK;
		nrs++;
	}
	if (nrs > 1)
		qsort(rs, nrs, sizeof(*rs), block_range_cmp);
	if (nrs && in->chunk_size / BLK == 0) {
		ret = -EIO;
		goto out;
	}
	ret = commit_ranges(ms, ino, in->chunk_size / BLK, rs, nrs, &cc);
	if (ret)
		goto out;
	/* written under an earlier start: was their allocation lost with the machine? */
	for (size_t i = 0; incarnation && incarnation != ms->incarnation && i < nrs; i++) {
		if (chunks_cover(&cc, in->chunk_size / BLK, rs[i].r0, rs[i].r1))
			continue;
		log_error(1100069,
			  "ino=%llu: a COMMIT names blocks %llu-%llu written under an earlier "
			  "start of the metaserver, and they are a hole now: their allocation "
			  "was lost (a crash of this machine); the client reports the writes "
			  "lost", (unsigned long long)ino, (unsigned long long)rs[i].r0,
			  (unsigned long long)rs[i].r1 - 1);
		ret = -ESTALE;
		goto out;
	}
	for (size_t i = 0; i < cc.n; i++)
		if (cc.c[i].dirty)
			chunk_store(mb.b, ino, &cc.c[i]);
	if (size > in->size)
		in->size = size;
	in->mtime_ns = mtime_ns ? mtime_ns : ns_now();
	in->ctime_ns = ns_now();
	ns_inode_put(&mb, in);
	ret = ns_write(ms, &mb);
	if (!ret)
		ns_attr_from_inode(in, out);
out:
	ms_batch_destroy(ms, &mb);
	chunks_free(cc.c, cc.n);
	free(rs);
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret;
}

/* ---------------------------------------------------------------- punch */

/* ---------------------------------------------------------------- stale copies */

/* 1 if every block of [r0, r1) (in the chunk) has a current copy on a server other than @sid. */
static int chunk_covered_elsewhere(const struct ms_chunk *c, uint32_t sid, uint32_t r0, uint32_t r1)
{
	uint32_t pos = r0;
	int moved = 1;

	/* extents are sorted by offset, but copies overlap: sweep until no progress */
	while (pos < r1 && moved) {
		moved = 0;
		for (int i = 0; i < c->n && pos < r1; i++) {
			const struct ms_ext *e = &c->e[i];

			if (e->server_id == sid || (e->flags & MS_EXT_STALE))
				continue;
			if (e->off <= pos && pos < e->off + e->count) {
				pos = e->off + e->count;
				moved = 1;
			}
		}
	}
	return pos >= r1;
}

/*
 * Mark the current extents of server @sid in file blocks [r0, r1) of chunk @c
 * stale. -EIO, changing nothing, where one of them is the last current copy.
 */
static int chunk_mark_stale(struct ms_chunk *c, uint32_t sid, uint64_t base, uint64_t r0, uint64_t r1)
{
	static const uint8_t kinds[] = { 0, MS_EXT_UNWRITTEN, MS_EXT_UNWRITTEN | MS_EXT_KEPT };
	int ret = 0;

	for (int i = 0; i < c->n; i++) {
		const struct ms_ext *e = &c->e[i];
		uint64_t s = base + e->off, t = s + e->count;
		uint64_t a = s > r0 ? s : r0, b = t < r1 ? t : r1;

		if (e->server_id != sid || (e->flags & MS_EXT_STALE) || a >= b)
			continue;
		if (!chunk_covered_elsewhere(c, sid, (uint32_t)(a - base), (uint32_t)(b - base)))
			return -EIO;
	}
	for (size_t k = 0; k < sizeof(kinds) && !ret; k++)
		ret = chunk_reflag_on(c, sid, base, r0, r1, kinds[k], kinds[k] | MS_EXT_STALE);
	return ret;
}

int ms_stale(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	     uint64_t handle, uint32_t server_id, const struct ms_range *ranges, size_t n)
{
	struct ms_lockset ls;
	struct ms_inode *in = malloc(sizeof(*in));
	struct ms_chunk *cs = NULL;
	size_t ncs = 0;
	uint64_t cpb;
	uint32_t rights;
	int ret, dirty = 0, changed = 0;

	if (!in)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (ranges[i].length == 0 || ranges[i].offset >= MS_MAX_FILE_BYTES ||
		    ranges[i].length > MS_MAX_FILE_BYTES - ranges[i].offset) {
			free(in);
			return -EINVAL;
		}
	}
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (!ret)
		ret = file_access(in, s, cr, handle, 1, &rights);
	if (ret)
		goto out;
	cpb = in->chunk_size / BLK;
	for (size_t i = 0; i < n && !ret; i++) {
		uint64_t r0 = ranges[i].offset / BLK;
		uint64_t r1 = (ranges[i].offset + ranges[i].length + BLK - 1) / BLK;

		ret = scan_chunks(ms, ino, r0 / cpb, (r1 - 1) / cpb, &cs, &ncs);
		for (size_t j = 0; j < ncs && !ret; j++)
			ret = chunk_mark_stale(&cs[j], server_id, cs[j].idx * cpb, r0, r1);
		for (size_t j = 0; j < ncs && !ret && !changed; j++)
			changed = cs[j].dirty;
		if (!ret && changed) {
			leveldb_writebatch_t *b = leveldb_writebatch_create();

			/* flags only: the blocks stay the file's until the range leaves it */
			for (size_t j = 0; j < ncs; j++)
				if (cs[j].dirty)
					chunk_store(b, ino, &cs[j]);
			ret = ns_write_plain(ms, b);
			leveldb_writebatch_destroy(b);
			dirty |= !ret;
		}
		changed = 0;
		chunks_free(cs, ncs);
		cs = NULL;
		ncs = 0;
	}
	/* capabilities that name the stale copy are refused from now on */
	if (dirty) {
		log_warn(1100022,
			 "ino=%llu: the copy on I/O server %u missed writes: marked stale",
			 (unsigned long long)ino, server_id);
		fence_file(ms, ino);
	}
out:
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret;
}

/* ---------------------------------------------------------- collapse / insert */

/* An extent at file block @fb, on its way into the chunk that holds @fb. */
struct shift_piece {
	uint64_t fb;
	struct ms_ext e;
};

struct shift_pieces {
	struct shift_piece *v;
	size_t n, cap;
};

static int pieces_add(struct shift_pieces *p, uint64_t fb, const struct ms_ext *e)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		struct shift_piece *v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n].fb = fb;
	p->v[p->n++].e = *e;
	return 0;
}

static int piece_cmp(const void *a, const void *b)
{
	const struct shift_piece *x = a, *y = b;

	if (x->fb != y->fb)
		return x->fb < y->fb ? -1 : 1;
	return x->e.server_id < y->e.server_id ? -1 : x->e.server_id > y->e.server_id;
}

/*
 * Move the extents of @in at file blocks >= @from by @delta blocks (down when
 * negative: collapse has cut [@from + @delta, @from) out first, in @b, so the
 * records read here still hold that range: it is left out). Every chunk
 * record from the lower of the two positions on is rewritten in @b, extents
 * split at chunk boundaries and at @from; the blocks stay where they are, on
 * the same servers, with the same flags. -EBUSY while the rebuilder is making
 * a copy there (its work names chunks by index).
 */
static int layout_shift(struct ms *ms, leveldb_writebatch_t *b, struct ms_inode *in,
			uint64_t from, int64_t delta)
{
	uint64_t cs = in->chunk_size / BLK;
	/* [gap, from) is what collapse cut out (empty for insert) */
	uint64_t gap = delta < 0 ? from - (uint64_t)-delta : from, start = gap;
	uint8_t k[MS_KEY_MAX];
	size_t plen = key_prefix(k, MS_TAG_LAYOUT, in->ino);
	struct shift_pieces p = { 0 };
	struct ms_chunk c = { 0 };
	leveldb_iterator_t *it;
	int ret = 0;

	if (cs == 0)
		return -EIO;
	if (in->blocks == 0)
		return 0;
	it = leveldb_create_iterator(ms->db, ms->ropts);
	for (leveldb_iter_seek(it, (char *)k, key_layout(k, in->ino, start / cs));
	     !ret && leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *key = (const uint8_t *)leveldb_iter_key(it, &kl);
		const char *v;
		uint64_t base;
		struct ms_chunk gone = { 0 };

		if (kl != plen + 8 || memcmp(key, k, plen))
			break;
		c.idx = get_be64(key + plen);
		base = c.idx * cs;
		v = leveldb_iter_value(it, &vl);
		ret = chunk_parse(&c, v, vl);
		/* the record goes; what it held comes back below, moved or not */
		gone.idx = c.idx;
		chunk_store(b, in->ino, &gone);
		for (int i = 0; !ret && i < c.n; i++) {
			struct ms_ext e = c.e[i];
			uint64_t s0 = base + e.off, t = s0 + e.count;

			uint64_t a = s0 < gap ? s0 : gap, z = t < gap ? t : gap;

			if (e.flags & MS_EXT_BUILDING) {
				ret = -EBUSY;
				break;
			}
			/* what lies before the gap stays; what lies in it was cut */
			if (a < z) {
				struct ms_ext head = e;

				head.count = (uint32_t)(z - a);
				ret = pieces_add(&p, a, &head);
			}
			a = s0 > from ? s0 : from;
			if (!ret && a < t) {		/* from @from on: moved */
				struct ms_ext tail = e;

				tail.block += a - s0;
				tail.count = (uint32_t)(t - a);
				ret = pieces_add(&p, (uint64_t)((int64_t)a + delta), &tail);
			}
		}
	}
	leveldb_iter_destroy(it);
	/* cut at chunk boundaries (what is cut off is looked at in its turn) */
	for (size_t i = 0; !ret && i < p.n; i++) {
		uint32_t room = (uint32_t)(cs - p.v[i].fb % cs);

		if (p.v[i].e.count > room) {
			struct ms_ext rest = p.v[i].e;

			rest.block += room;
			rest.count -= room;
			p.v[i].e.count = room;
			ret = pieces_add(&p, p.v[i].fb + room, &rest);
		}
	}
	if (!ret && p.n > 1)
		qsort(p.v, p.n, sizeof(*p.v), piece_cmp);
	/* each run of one chunk's pieces is its new record */
	for (size_t i = 0; !ret && i < p.n;) {
		size_t j = i;

		c.idx = p.v[i].fb / cs;
		c.n = 0;
		for (; j < p.n && p.v[j].fb / cs == c.idx; j++) {
			ret = chunk_reserve(&c, c.n + 1);
			if (ret)
				break;
			c.e[c.n] = p.v[j].e;
			c.e[c.n++].off = (uint32_t)(p.v[j].fb % cs);
		}
		if (ret)
			break;
		chunk_normalize(&c);
		chunk_store(b, in->ino, &c);
		i = j;
	}
	free(c.e);
	free(p.v);
	return ret;
}

int ms_shift(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	     uint64_t off, uint64_t len, int insert, uint64_t handle, struct ms_attr *out)
{
	struct ms_freelist f = { 0 };
	struct ms_lockset ls;
	struct ms_inode *in = malloc(sizeof(*in));
	struct ms_batch mb;
	uint32_t rights;
	int ret;

	if (!in)
		return -ENOMEM;
	/* whole blocks only, as ext4 and XFS want their block size */
	if (len == 0 || off % BLK || len % BLK || off > MS_MAX_FILE_BYTES ||
	    len > MS_MAX_FILE_BYTES - off) {
		free(in);
		return -EINVAL;
	}
	ms_batch_init(&mb);
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (!ret)
		ret = file_access(in, s, cr, handle, 1, &rights);
	if (ret)
		goto out;
	/* collapse must leave some of the file after the range; insert start inside it */
	if (insert ? off >= in->size : off + len >= in->size) {
		ret = -EINVAL;
		goto out;
	}
	if (insert && in->size > MS_MAX_FILE_BYTES - len) {
		ret = -EFBIG;
		goto out;
	}
	if (!insert)
		ret = layout_cut(ms, mb.b, in, off / BLK, (off + len) / BLK, 0, &f);
	if (!ret)
		ret = layout_shift(ms, mb.b, in, insert ? off / BLK : (off + len) / BLK,
				   insert ? (int64_t)(len / BLK) : -(int64_t)(len / BLK));
	if (ret)
		goto out;
	in->size = insert ? in->size + len : in->size - len;
	in->mtime_ns = in->ctime_ns = ns_now();
	ns_inode_put(&mb, in);
	ret = ns_write_freeing(ms, &mb, &f);
	if (!ret)
		ns_attr_from_inode(in, out);
out:
	ms_batch_destroy(ms, &mb);
	freelist_release(ms, &f, ret == 0);
	/* every block of the tail now means another offset: no old capability may write it */
	if (!ret)
		fence_file(ms, ino);
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret;
}

int ms_punch(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	     uint64_t off, uint64_t len, uint64_t handle, struct ms_attr *out)
{
	struct ms_freelist f = { 0 };
	struct ms_lockset ls;
	struct ms_inode *in = malloc(sizeof(*in));
	struct ms_batch mb;
	uint64_t lo, hi;
	uint32_t rights;
	int ret;

	if (!in)
		return -ENOMEM;
	if (len == 0 || off > MS_MAX_FILE_BYTES || len > MS_MAX_FILE_BYTES - off) {
		free(in);
		return -EINVAL;
	}
	ms_batch_init(&mb);
	/* whole blocks only: the caller zeroes the bytes of partial ones */
	lo = (off + BLK - 1) / BLK;
	hi = (off + len) / BLK;
	ret = ns_inode_lock_get(ms, &ls, ino, in);
	if (!ret)
		ret = file_access(in, s, cr, handle, 1, &rights);
	if (ret)
		goto out;
	ret = layout_cut(ms, mb.b, in, lo, hi, 0, &f);
	if (ret)
		goto out;
	in->mtime_ns = in->ctime_ns = ns_now();
	ns_inode_put(&mb, in);
	ret = ns_write_freeing(ms, &mb, &f);
	if (!ret)
		ns_attr_from_inode(in, out);
out:
	ms_batch_destroy(ms, &mb);
	/* fenced first, then free (fence.c) */
	freelist_release(ms, &f, ret == 0);
	lockset_unlock(&ms->locks, &ls);
	free(in);
	return ret;
}
