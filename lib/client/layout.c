// SPDX-License-Identifier: MIT
/*
 * layout.c - the layout cache of one file and fetching layouts from the
 * metaserver.
 *
 * The cache tiles the ranges it knows with segments (extents and holes) cut
 * from LayoutReplies; each segment keeps its reply alive, because the reply
 * holds the capability an I/O request must carry. A segment is used only while
 * its capabilities are valid for RDFS_CAP_MARGIN_NS more.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "client_internal.h"
#include "frame.h"

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
	if (!s->hole)
		s->block += b - s->start;
	s->start = b;
}

void layout_cache_forget(struct layout_cache *lc, uint64_t start, uint64_t end)
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

static const Rdfs__Capability *reply_cap(const Rdfs__LayoutReply *r, uint32_t server_id)
{
	size_t i;

	for (i = 0; i < r->n_caps; i++)
		if (r->caps[i]->server_id == server_id)
			return r->caps[i];
	return NULL;
}

int layout_cache_insert(struct layout_cache *lc, Rdfs__LayoutReply *reply)
{
	uint64_t start = BLK_DOWN(reply->offset);
	uint64_t end = BLK_DOWN(reply->offset + reply->length);
	struct layout_seg *segs;
	struct layout_piece *piece;
	uint64_t pos = start;
	size_t i, n = 0, at;
	int ret;

	if (end <= start) {
		protobuf_c_message_free_unpacked(&reply->base, NULL);
		return 0;
	}
	piece = calloc(1, sizeof(*piece));
	segs = calloc(2 * reply->n_extents + 1, sizeof(*segs));
	if (!piece || !segs) {
		free(piece);
		free(segs);
		protobuf_c_message_free_unpacked(&reply->base, NULL);
		return -ENOMEM;
	}
	piece->reply = reply;
	piece->expiry_ns = INT64_MAX;
	for (i = 0; i < reply->n_caps; i++)
		if (reply->caps[i]->expiry_ns < piece->expiry_ns)
			piece->expiry_ns = reply->caps[i]->expiry_ns;

	for (i = 0; i < reply->n_extents && pos < end; i++) {
		const Rdfs__Extent *e = reply->extents[i];
		uint64_t es = BLK_DOWN(e->file_offset), ee = BLK_DOWN(e->file_offset + e->length);
		struct layout_seg *s;

		if (ee <= pos || es >= end || es >= ee)
			continue;
		if (es > pos) {
			s = &segs[n++];
			s->start = pos;
			s->end = es;
			s->hole = 1;
		}
		s = &segs[n++];
		s->start = es;
		s->end = ee < end ? ee : end;
		s->block = e->block;
		s->server_id = e->server_id;
		s->unwritten = e->unwritten;
		s->cap = reply_cap(reply, e->server_id);
		if (es < pos)
			seg_trim_front(s, pos);
		pos = s->end;
	}
	if (pos < end) {
		segs[n].start = pos;
		segs[n].end = end;
		segs[n].hole = 1;
		n++;
	}
	for (i = 0; i < n; i++)
		segs[i].piece = piece;
	piece->refs = (int)n;

	layout_cache_forget(lc, start, end);
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
		if (for_write && (s->hole || !s->cap || !(s->cap->rights & RDFS_CAP_WRITE)))
			return -ENOENT;
		if (!s->hole && !s->cap)
			return -ENOENT;
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

/* Ask the metaserver for blocks [start, end); store the reply. Returns its end block. */
static int layout_fetch(struct rdfs_client *c, struct rdfs_inode *in, struct rdfs_file *f,
			const struct rdfs_cred *cr, uint64_t start, uint64_t end, int allocate,
			uint64_t *reply_end)
{
	Rdfs__LayoutReq req = RDFS__LAYOUT_REQ__INIT;
	Rdfs__LayoutReply *rep = NULL;
	Rdfs__Cred cred;
	uint64_t commits;
	size_t i;
	int ret;

	pthread_mutex_lock(&in->lock);
	commits = in->commits;
	pthread_mutex_unlock(&in->lock);
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
	in->ms_size = rep->size;
	if (!in->dirty)
		in->pending_size = rep->size;
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
		if (n != -ENOENT)
			return n;
	}

	if (fetch_end < end)
		fetch_end = end;
	while (pos < end) {
		ret = layout_fetch(c, in, f, cr, pos, fetch_end, allocate, &got);
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
