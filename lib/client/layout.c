// SPDX-License-Identifier: MIT
/*
 * layout.c - the layout cache of one file and fetching layouts from the
 * metaserver.
 *
 * The cache tiles the ranges it knows with segments (extents and holes) cut
 * from LayoutReplies; each segment keeps its reply alive, because the reply
 * holds the capability an I/O request must carry. A segment is used only while
 * its capabilities are valid for RDFS_CAP_MARGIN_NS more.
 *
 * With copies, a reply's extents overlap (one per copy of a range, each on
 * another server): the cache cuts them at every extent boundary, so each
 * segment is a run where every copy is one contiguous extent.
 *
 * A reply is stored only if this client changed nothing of the file's layout
 * while it was on its way (layout_cache.changes): a read-ahead thread's LAYOUT
 * answered before a punch and stored after it would name freed blocks as data,
 * or one answered before an allocation would name written blocks as a hole,
 * and holes and unwritten extents are read as zeros without an I/O server, so
 * no fence would catch it. Such a reply is asked for again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "client_internal.h"
#include "frame.h"

/* Fetches of one range thrown away as stale before the next is stored anyway. */
#define LAYOUT_STALE_TRIES	4

void layout_piece_put(struct layout_piece *p)
{
	if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		protobuf_c_message_free_unpacked(&p->reply->base, NULL);
		free(p);
	}
}

void layout_seg_get(struct layout_seg *s)
{
	__atomic_add_fetch(&s->piece->refs, 1, __ATOMIC_RELAXED);
}

void layout_segs_put(struct layout_seg *segs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		layout_piece_put(segs[i].piece);
	free(segs);
}

void layout_cache_init(struct layout_cache *lc)
{
	memset(lc, 0, sizeof(*lc));
}

void layout_cache_free(struct layout_cache *lc)
{
	layout_segs_put(lc->seg, lc->n);
	layout_cache_init(lc);
}

static int layout_cache_reserve(struct layout_cache *lc, size_t n)
{
	struct layout_seg *seg;
	size_t cap;

	if (n <= lc->cap)
		return 0;
	cap = lc->cap ? lc->cap * 2 : 16;
	while (cap < n)
		cap *= 2;
	seg = realloc(lc->seg, cap * sizeof(*seg));
	if (!seg)
		return -ENOMEM;
	lc->seg = seg;
	lc->cap = cap;
	return 0;
}

/* Index of the first segment ending after @b. */
static size_t layout_cache_find(const struct layout_cache *lc, uint64_t b)
{
	size_t lo = 0, hi = lc->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (lc->seg[mid].end <= b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Cut @s so that it starts at @b (inside it). */
static void seg_trim_front(struct layout_seg *s, uint64_t b)
{
	for (int k = 0; k < s->ncopies; k++)
		s->copy[k].block += b - s->start;
	s->start = b;
}

int seg_pick_copy(struct rdfs_client *c, const struct layout_seg *s)
{
	int64_t now = io_mono_ms(), best_until = 0;
	int best = -1, best_load = 0;
	/*
	 * Ties go round the copies by MiB of the file: the segments of one read
	 * are planned before any is sent, so loads alone would send them all to
	 * the first copy, where striping spreads a one-copy file over its servers.
	 */
	int first;

	/* one copy (most files): nothing to choose, no peer to look up */
	if (s->ncopies <= 1)
		return 0;
	first = (int)((s->start >> 8) % (uint64_t)s->ncopies);
	for (int i = 0; i < s->ncopies; i++) {
		int k = (first + i) % s->ncopies;
		struct rdfs_peer *p;
		int load;

		if (!s->copy[k].cap)
			continue;
		p = ios_peer(c, s->copy[k].server_id, NULL);
		if (!p)
			continue;
		if (__atomic_load_n(&p->suspect_until_ms, __ATOMIC_RELAXED) > now)
			continue;
		load = __atomic_load_n(&p->inflight, __ATOMIC_RELAXED);
		if (best < 0 || load < best_load) {
			best = k;
			best_load = load;
		}
	}
	if (best >= 0)
		return best;
	/*
	 * Every server with a copy failed lately: try the one that failed the
	 * longest ago. The first would do for one failure, but a server that
	 * came back after a partition stays suspect while another copy's server
	 * is cut off now; asking that one again and again fails the read.
	 */
	best = -1;
	for (int k = 0; k < s->ncopies; k++) {
		struct rdfs_peer *p;
		int64_t until;

		if (!s->copy[k].cap)
			continue;
		p = ios_peer(c, s->copy[k].server_id, NULL);
		until = p ? __atomic_load_n(&p->suspect_until_ms, __ATOMIC_RELAXED) : 0;
		if (best < 0 || until < best_until) {
			best = k;
			best_until = until;
		}
	}
	return best >= 0 ? best : 0;
}

static void cache_drop(struct layout_cache *lc, uint64_t start, uint64_t end)
{
	size_t i = layout_cache_find(lc, start);

	while (i < lc->n && lc->seg[i].start < end) {
		struct layout_seg *s = &lc->seg[i];

		if (s->start < start && s->end > end) {
			struct layout_seg tail = *s;

			/* a split: both halves keep the reply */
			if (layout_cache_reserve(lc, lc->n + 1)) {
				/* cannot split: forget the whole segment */
				layout_piece_put(s->piece);
				memmove(s, s + 1, (lc->n - i - 1) * sizeof(*s));
				lc->n--;
				return;
			}
			s = &lc->seg[i];
			layout_seg_get(&tail);
			seg_trim_front(&tail, end);
			s->end = start;
			memmove(&lc->seg[i + 2], &lc->seg[i + 1], (lc->n - i - 1) * sizeof(*s));
			lc->seg[i + 1] = tail;
			lc->n++;
			return;
		}
		if (s->start < start) {
			s->end = start;
			i++;
		} else if (s->end > end) {
			seg_trim_front(s, end);
			i++;
		} else {
			layout_piece_put(s->piece);
			memmove(s, s + 1, (lc->n - i - 1) * sizeof(*s));
			lc->n--;
		}
	}
}

void layout_cache_forget(struct layout_cache *lc, uint64_t start, uint64_t end)
{
	lc->changes++;
	cache_drop(lc, start, end);
}

static const Rdfs__Capability *reply_cap(const Rdfs__LayoutReply *r, uint32_t server_id)
{
	size_t i;

	for (i = 0; i < r->n_caps; i++)
		if (r->caps[i]->server_id == server_id)
			return r->caps[i];
	return NULL;
}

/* 1 if @b continues @a: the same copies, each contiguous on disk, same flags. */
static int seg_continues(const struct layout_seg *a, const struct layout_seg *b)
{
	if (a->end != b->start || a->hole != b->hole || a->unwritten != b->unwritten ||
	    a->ncopies != b->ncopies)
		return 0;
	for (int k = 0; k < a->ncopies; k++)
		if (a->copy[k].server_id != b->copy[k].server_id ||
		    a->copy[k].block + (a->end - a->start) != b->copy[k].block ||
		    a->copy[k].cap != b->copy[k].cap)
			return 0;
	return 1;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Extents that may cover one cut: copies, and a few more from a sloppy reply. */
#define SEG_ACTIVE_MAX	(4 * RDFS_MAX_COPIES)

/*
 * The segment of blocks [a, b), which no extent boundary crosses: each extent
 * of @act (indices into @reply's) that covers it is a copy. Where some copies
 * are written and others not (a copy being rebuilt), only the written ones count.
 */
static void seg_at(const Rdfs__LayoutReply *reply, const size_t *act, int nact, uint64_t a,
		   uint64_t b, struct layout_seg *s)
{
	int written = 0;

	memset(s, 0, sizeof(*s));
	s->start = a;
	s->end = b;
	for (int i = 0; i < nact; i++)
		if (!reply->extents[act[i]]->unwritten)
			written = 1;
	for (int i = 0; i < nact && s->ncopies < RDFS_MAX_COPIES; i++) {
		const Rdfs__Extent *e = reply->extents[act[i]];
		int k, dup = 0;

		if (written && e->unwritten)
			continue;
		for (k = 0; k < s->ncopies; k++)
			dup |= s->copy[k].server_id == e->server_id;
		if (dup)
			continue;
		s->copy[s->ncopies].server_id = e->server_id;
		s->copy[s->ncopies].block = e->block + (a - BLK_DOWN(e->file_offset));
		s->copy[s->ncopies].cap = reply_cap(reply, e->server_id);
		s->ncopies++;
	}
	s->hole = s->ncopies == 0;
	s->unwritten = !s->hole && !written;
}

int layout_cache_insert(struct layout_cache *lc, Rdfs__LayoutReply *reply)
{
	uint64_t start = BLK_DOWN(reply->offset);
	uint64_t end = BLK_DOWN(reply->offset + reply->length);
	struct layout_seg *segs;
	struct layout_piece *piece;
	uint64_t *cut;
	size_t i, n = 0, ncut = 0, at, next = 0, act[SEG_ACTIVE_MAX];
	int ret, nact = 0;

	if (end <= start) {
		protobuf_c_message_free_unpacked(&reply->base, NULL);
		return 0;
	}
	piece = calloc(1, sizeof(*piece));
	cut = calloc(2 * reply->n_extents + 2, sizeof(*cut));
	segs = calloc(2 * reply->n_extents + 1, sizeof(*segs));
	if (!piece || !segs || !cut) {
		free(piece);
		free(segs);
		free(cut);
		protobuf_c_message_free_unpacked(&reply->base, NULL);
		return -ENOMEM;
	}
	piece->reply = reply;
	piece->expiry_ns = INT64_MAX;
	for (i = 0; i < reply->n_caps; i++)
		if (reply->caps[i]->expiry_ns < piece->expiry_ns)
			piece->expiry_ns = reply->caps[i]->expiry_ns;
	/*
	 * Expiry is on the metaserver's clock: on ours it is as far from now as it
	 * was from issued_ns there (a little later: the reply's trip), so clocks
	 * that disagree neither expire a fresh capability nor keep a dead one.
	 */
	if (reply->issued_ns && piece->expiry_ns != INT64_MAX)
		piece->expiry_ns = cap_now_ns() + (piece->expiry_ns - reply->issued_ns);

	/* every extent boundary inside [start, end) cuts a segment */
	cut[ncut++] = start;
	cut[ncut++] = end;
	for (i = 0; i < reply->n_extents; i++) {
		const Rdfs__Extent *e = reply->extents[i];
		uint64_t es = BLK_DOWN(e->file_offset), ee = BLK_DOWN(e->file_offset + e->length);

		/* sorted by offset, or blocks could be taken for holes */
		if (i && es < BLK_DOWN(reply->extents[i - 1]->file_offset)) {
			free(cut);
			free(segs);
			free(piece);
			protobuf_c_message_free_unpacked(&reply->base, NULL);
			return -EPROTO;
		}
		if (es > start && es < end)
			cut[ncut++] = es;
		if (ee > start && ee < end)
			cut[ncut++] = ee;
	}
	qsort(cut, ncut, sizeof(*cut), u64_cmp);
	for (i = 0; i + 1 < ncut; i++) {
		uint64_t a = cut[i];
		struct layout_seg s;
		int j, k;

		if (a == cut[i + 1])
			continue;
		/* the extents covering a: those begun by now that have not ended */
		for (; next < reply->n_extents &&
		       BLK_DOWN(reply->extents[next]->file_offset) <= a; next++)
			if (nact < SEG_ACTIVE_MAX && !reply->extents[next]->stale)
				act[nact++] = next;
		for (j = 0, k = 0; j < nact; j++) {
			const Rdfs__Extent *e = reply->extents[act[j]];

			if (BLK_DOWN(e->file_offset + e->length) > a)
				act[k++] = act[j];
		}
		nact = k;
		seg_at(reply, act, nact, a, cut[i + 1], &s);
		if (n > 0 && seg_continues(&segs[n - 1], &s))
			segs[n - 1].end = s.end;
		else
			segs[n++] = s;
	}
	free(cut);
	for (i = 0; i < n; i++)
		segs[i].piece = piece;
	piece->refs = (int)n;

	cache_drop(lc, start, end);
	ret = layout_cache_reserve(lc, lc->n + n);
	if (ret) {
		layout_segs_put(segs, n);
		return ret;
	}
	at = layout_cache_find(lc, start);
	memmove(&lc->seg[at + n], &lc->seg[at], (lc->n - at) * sizeof(*segs));
	memcpy(&lc->seg[at], segs, n * sizeof(*segs));
	lc->n += n;
	free(segs);
	return 0;
}

int layout_cache_lookup(struct layout_cache *lc, uint64_t start, uint64_t end, int for_write,
			int64_t now_ns, struct layout_seg **out)
{
	size_t i = layout_cache_find(lc, start), first = i, n = 0;
	struct layout_seg *segs;
	uint64_t pos = start;

	for (; pos < end; i++) {
		const struct layout_seg *s = &lc->seg[i];

		if (i >= lc->n || s->start > pos)
			return -ENOENT;
		if (s->piece->expiry_ns < now_ns + RDFS_CAP_MARGIN_NS)
			return -ENOENT;
		if (for_write && s->hole)
			return -ENOENT;
		/* a write goes to every copy; a read needs one */
		for (int k = 0, usable = 0; k < s->ncopies; k++) {
			usable += seg_copy_usable(s, k, for_write ? RDFS_CAP_WRITE : 0);
			if (k == s->ncopies - 1 && (for_write ? usable < s->ncopies : !usable))
				return -ENOENT;
		}
		pos = s->end;
		n++;
	}
	segs = malloc((n ? n : 1) * sizeof(*segs));
	if (!segs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		segs[i] = lc->seg[first + i];
		layout_seg_get(&segs[i]);
		if (segs[i].start < start)
			seg_trim_front(&segs[i], start);
		if (segs[i].end > end)
			segs[i].end = end;
	}
	*out = segs;
	return (int)n;
}

/*
 * Ask the metaserver for blocks [start, end); store the reply. Returns its end
 * block in *@reply_end, or -EAGAIN (nothing stored) when this client changed
 * the file's layout while the reply was on its way, unless @store_stale.
 */
static int layout_fetch(struct rdfs_client *c, struct rdfs_inode *in, struct rdfs_file *f,
			const struct rdfs_cred *cr, uint64_t start, uint64_t end, int allocate,
			int store_stale, uint64_t *reply_end)
{
	Rdfs__LayoutReq req = RDFS__LAYOUT_REQ__INIT;
	Rdfs__LayoutReply *rep = NULL;
	Rdfs__Cred cred;
	uint64_t commits, changes, then;
	size_t i;
	int ret;

	pthread_mutex_lock(&in->lock);
	commits = in->commits;
	changes = in->layout.changes;
	pthread_mutex_unlock(&in->lock);
	then = size_clock_now(c);
	cred_to_pb(f ? &f->cred : cr, &cred);
	req.cred = &cred;
	req.ino = in->ino;
	req.offset = start * BLK;
	req.length = (end - start) * BLK;
	req.allocate = allocate != 0;
	req.prealloc = allocate == LAYOUT_ALLOC_KEEP;
	__atomic_add_fetch(&c->stats.layout_fetches, 1, __ATOMIC_RELAXED);
	if (allocate)
		__atomic_add_fetch(&c->stats.layout_allocs, 1, __ATOMIC_RELAXED);
	if (f)
		ret = ms_file_call(f, RDFS_OP_LAYOUT, &req.base, &req.handle,
				   &rdfs__layout_reply__descriptor, &rep, MS_IDEMPOTENT);
	else
		ret = ms_call(c, RDFS_OP_LAYOUT, &req.base, &rdfs__layout_reply__descriptor, &rep,
			      MS_IDEMPOTENT);
	if (ret)
		return ret;
	for (i = 0; i < rep->n_servers; i++)
		ios_peer(c, rep->servers[i]->server_id, rep->servers[i]->url);
	*reply_end = BLK_DOWN(rep->offset + rep->length);
	if (BLK_DOWN(rep->offset) > start || *reply_end <= start) {
		protobuf_c_message_free_unpacked(&rep->base, NULL);
		return -EPROTO;
	}

	pthread_mutex_lock(&in->lock);
	/*
	 * A punch, truncate or refused capability here (or another allocation)
	 * since we asked: the reply may name as a hole what is written now, or
	 * as data what was freed. Reads trust holes and unwritten extents
	 * without asking an I/O server, so such a reply is asked for again.
	 */
	if (in->layout.changes != changes && !store_stale) {
		pthread_mutex_unlock(&in->lock);
		protobuf_c_message_free_unpacked(&rep->base, NULL);
		return -EAGAIN;
	}
	if (allocate)
		in->layout.changes++;
	if (rep->incarnation) {
		if (!in->layout_inc)
			in->layout_inc = rep->incarnation;
		else if (in->layout_inc != rep->incarnation)
			in->layout_inc = RDFS_INCARNATION_MIXED;
		in->layout_inc_seq++;
	}
	inode_note_ms_size(in, rep->size, then);
	if (rep->chunk_size)
		in->chunk_size = rep->chunk_size;
	/*
	 * The reply knows which of the blocks we committed are written now,
	 * unless one of our COMMITs finished while it was on its way.
	 */
	if (in->commits == commits)
		range_set_remove(&in->committed, BLK_DOWN(rep->offset), *reply_end);
	ret = layout_cache_insert(&in->layout, rep);
	pthread_mutex_unlock(&in->lock);
	return ret;
}

void rdfs_client_stats(struct rdfs_client *c, struct rdfs_client_stats *out)
{
	out->layout_fetches = __atomic_load_n(&c->stats.layout_fetches, __ATOMIC_RELAXED);
	out->layout_allocs = __atomic_load_n(&c->stats.layout_allocs, __ATOMIC_RELAXED);
	out->prealloc_bytes = __atomic_load_n(&c->stats.prealloc_bytes, __ATOMIC_RELAXED);
	out->readahead_bytes = __atomic_load_n(&c->stats.readahead_bytes, __ATOMIC_RELAXED);
	out->readahead_hit_bytes = __atomic_load_n(&c->stats.readahead_hit_bytes,
						   __ATOMIC_RELAXED);
	out->write_behind_writes = __atomic_load_n(&c->stats.write_behind_writes,
						   __ATOMIC_RELAXED);
	out->write_behind_bytes = __atomic_load_n(&c->stats.write_behind_bytes,
						  __ATOMIC_RELAXED);
	out->write_behind_lent_bytes = __atomic_load_n(&c->stats.write_behind_lent_bytes,
						       __ATOMIC_RELAXED);
	out->dir_attr_hits = __atomic_load_n(&c->stats.dir_attr_hits, __ATOMIC_RELAXED);
	out->layout_hits = __atomic_load_n(&c->stats.layout_hits, __ATOMIC_RELAXED);
	out->layout_misses = __atomic_load_n(&c->stats.layout_misses, __ATOMIC_RELAXED);
	out->cap_refused_fenced = __atomic_load_n(&c->stats.cap_refused_fenced, __ATOMIC_RELAXED);
	out->cap_refused_expired = __atomic_load_n(&c->stats.cap_refused_expired,
						   __ATOMIC_RELAXED);
	out->cap_refused_other = __atomic_load_n(&c->stats.cap_refused_other, __ATOMIC_RELAXED);
	for (int op = 0; op < RDFS_OP_MAX; op++)
		out->ms_requests[op] = __atomic_load_n(&c->stats.ms_requests[op], __ATOMIC_RELAXED);
}

int layout_get(struct rdfs_client *c, struct rdfs_inode *in, struct rdfs_file *f,
	       const struct rdfs_cred *cr, uint64_t start, uint64_t end, uint64_t fetch_end,
	       int allocate, struct layout_seg **out)
{
	uint64_t pos = start, got;
	int n, ret;

	/* fallocate asks the metaserver even when the blocks are there: to keep them */
	if (allocate != LAYOUT_ALLOC_KEEP) {
		pthread_mutex_lock(&in->lock);
		n = layout_cache_lookup(&in->layout, start, end, allocate, cap_now_ns(), out);
		pthread_mutex_unlock(&in->lock);
		if (n >= 0)
			__atomic_add_fetch(&c->stats.layout_hits, 1, __ATOMIC_RELAXED);
		if (n != -ENOENT)
			return n;
	}
	__atomic_add_fetch(&c->stats.layout_misses, 1, __ATOMIC_RELAXED);

	if (fetch_end < end)
		fetch_end = end;
	for (int stale = 0; pos < end;) {
		/* after a few changes in a row, stored anyway: fences guard its I/O */
		ret = layout_fetch(c, in, f, cr, pos, fetch_end, allocate,
				   stale >= LAYOUT_STALE_TRIES, &got);
		if (ret == -EAGAIN) {
			stale++;
			continue;
		}
		if (ret)
			return ret;
		pos = got;
	}
	/*
	 * What we just fetched is used even if its capabilities are short-lived
	 * (a metaserver with a lifetime below our margin must still work).
	 */
	pthread_mutex_lock(&in->lock);
	n = layout_cache_lookup(&in->layout, start, end, allocate, INT64_MIN / 2, out);
	pthread_mutex_unlock(&in->lock);
	return n == -ENOENT ? -EIO : n;
}
