// SPDX-License-Identifier: GPL-2.0
/*
 * layout.c - file layouts from the helper, and the last ones kept for reuse.
 *
 * A read or write asks the helper (RDFS_DEV_LAYOUT) for the extents and
 * capabilities of its range. So that a steady stream does not cross to the
 * helper for every read-ahead window or writeback batch, each inode keeps its
 * last read layout and its last write layout, each asked for ahead of the
 * request: reads up to RDFS_LAYOUT_READ_AHEAD past it (never past the end of
 * the file), writes that continue the last one (a stream past its first
 * batch) up to RDFS_LAYOUT_WRITE_AHEAD: allocated ahead, as rdfs-fuse's
 * streams are, and what is left past the end of the file is freed by the
 * metaserver at the last close. A kept layout serves any range inside it until:
 *   - its capabilities near their expiry (the helper's ttl_ms, which keeps
 *     the helper's own margin);
 *   - an I/O server refused a capability as fenced or failed (the caller asks
 *     again with RDFS_DEV_LAYOUT_REFRESH/FAILED, and that answer is kept);
 *   - the file is opened (close-to-open: another client may have written
 *     where this one saw holes), its data changed elsewhere (attributes),
 *     it was truncated, punched, allocated or copied into here, or a copy
 *     of it was reported lost (rdfs_layout_forget);
 *   - for the read layout: any write layout asked for or used, and any
 *     commit, since this client's own writes turn holes and unwritten blocks
 *     into data that only a layout asked for after their commit names (the
 *     helper describes what the module wrote and has not committed as holes,
 *     and a layout asked for ahead may cover such blocks).
 *
 * Threads and ownership: a kept layout is immutable and reference counted;
 * ri->lock guards the two pointers and layout_gen, which every forget
 * bumps: a layout fetched across a forget serves its own request but is not
 * kept. Callers hold a reference while their
 * requests use the capabilities inside it (rdfs_layout_put when done).
 */
#include <linux/jiffies.h>
#include <linux/refcount.h>
#include <linux/slab.h>

#include "rdfs.h"

#define RDFS_LAYOUT_READ_AHEAD	(64ull << 20)
#define RDFS_LAYOUT_WRITE_AHEAD	(16ull << 20)

struct rdfs_layout {
	refcount_t ref;
	u64 lo, hi;			/* the bytes it describes */
	unsigned long expires;		/* jiffies */
	size_t len;			/* of the reply */
	u64 rep[];			/* struct rdfs_dev_layout_reply, 8-aligned */
};

const struct rdfs_dev_layout_reply *rdfs_layout_reply(const struct rdfs_layout *l)
{
	return (const void *)l->rep;
}

void rdfs_layout_put(struct rdfs_layout *l)
{
	if (l && refcount_dec_and_test(&l->ref))
		kvfree(l);
}

/* Under ri->lock: take *@slot, to be put after the lock is dropped. */
static struct rdfs_layout *rdfs_layout_take(struct rdfs_layout **slot)
{
	struct rdfs_layout *l = *slot;

	*slot = NULL;
	return l;
}

void rdfs_layout_forget_read(struct inode *inode)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_layout *r;

	spin_lock(&ri->lock);
	r = rdfs_layout_take(&ri->layout_read);
	ri->layout_gen++;
	spin_unlock(&ri->lock);
	rdfs_layout_put(r);
}

void rdfs_layout_forget(struct inode *inode)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_layout *r, *w;

	spin_lock(&ri->lock);
	r = rdfs_layout_take(&ri->layout_read);
	w = rdfs_layout_take(&ri->layout_write);
	ri->layout_write_next = 0;
	ri->layout_gen++;
	spin_unlock(&ri->lock);
	rdfs_layout_put(r);
	rdfs_layout_put(w);
}

/* The kept layout of @slot if it covers [pos, end) and is fresh, referenced. */
static struct rdfs_layout *rdfs_layout_lookup(struct rdfs_inode_info *ri,
					      struct rdfs_layout **slot, u64 pos, u64 end)
{
	struct rdfs_layout *l;

	spin_lock(&ri->lock);
	l = *slot;
	if (l && (l->lo > pos || l->hi < end || time_after_eq(jiffies, l->expires)))
		l = NULL;
	if (l)
		refcount_inc(&l->ref);
	spin_unlock(&ri->lock);
	return l;
}

/* Ask the helper for [pos, end) of @inode. */
static struct rdfs_layout *rdfs_layout_fetch(struct inode *inode, u64 handle, u64 pos, u64 end,
					     bool allocate, u32 flags, u32 failed_server)
{
	struct rdfs_dev_layout_req lr = {
		.offset = pos, .length = end - pos, .allocate = allocate, .flags = flags,
		.failed_server = failed_server,
	};
	struct rdfs_dev_layout_reply *rep;
	struct rdfs_layout *l;
	struct rdfs_dev_call c;
	u32 i;
	int err;

	atomic64_inc(&rdfs_stats.layout_calls);
	rep = kvmalloc(RDFS_DEV_MAX_MSG, GFP_NOFS);
	if (!rep)
		return ERR_PTR(-ENOMEM);
	rdfs_call_init(&c, RDFS_DEV_LAYOUT, inode->i_ino, handle);
	rdfs_call_arg(&c, &lr, sizeof(lr));
	c.out = rep;
	c.out_size = RDFS_DEV_MAX_MSG;
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (!err && (c.out_len < sizeof(*rep) ||
		     rep->nsegs > (c.out_len - sizeof(*rep)) / sizeof(rep->segs[0]))) {
		pr_warn_ratelimited(RDFS_MSG(1500010) "layout reply of %zu bytes, %u segments\n",
				    c.out_len, rep->nsegs);
		err = -EIO;
	}
	for (i = 0; !err && i < rep->nsegs; i++) {
		struct rdfs_dev_seg *s = &rep->segs[i];

		if ((s->offset | s->length) & (RDFS_BLOCK_SIZE - 1) ||
		    (u64)s->cap_off + s->cap_len > c.out_len) {
			pr_warn_ratelimited(RDFS_MSG(1500011)
					    "bad layout segment %llu+%llu cap %u+%u\n",
					    s->offset, s->length, s->cap_off, s->cap_len);
			err = -EIO;
		}
	}
	l = NULL;
	if (!err) {
		l = kvmalloc(struct_size(l, rep, DIV_ROUND_UP(c.out_len, sizeof(u64))), GFP_NOFS);
		if (!l)
			err = -ENOMEM;
	}
	if (err) {
		/* too big to describe ahead of the request is the caller's to handle */
		if (err != -E2BIG)
			pr_warn_ratelimited(RDFS_MSG(1500012)
					    "ino=%lu: layout [%llu, +%llu): %d\n",
					    inode->i_ino, pos, end - pos, err);
		kvfree(rep);
		return ERR_PTR(err);
	}
	refcount_set(&l->ref, 1);
	l->lo = pos;
	l->hi = end;
	l->len = c.out_len;
	l->expires = jiffies + msecs_to_jiffies(rep->ttl_ms);
	memcpy(l->rep, rep, c.out_len);
	kvfree(rep);
	return l;
}

struct rdfs_layout *rdfs_layout_get(struct inode *inode, u64 handle, u64 pos, u64 len,
				    bool allocate, u32 flags, u32 failed_server)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_layout **slot = allocate ? &ri->layout_write : &ri->layout_read;
	u64 end = pos + len, isize = round_up(i_size_read(inode), RDFS_BLOCK_SIZE), ahead = end;
	struct rdfs_layout *l = NULL, *old, *stale_read = NULL;
	u64 gen;
	int err;

	if (!flags) {
		l = rdfs_layout_lookup(ri, slot, pos, end);
		if (l)
			atomic64_inc(&rdfs_stats.layout_hits);
	}
	if (!l) {
		spin_lock(&ri->lock);
		gen = ri->layout_gen;
		spin_unlock(&ri->lock);
		if (!allocate)
			ahead = max(end, min(pos + RDFS_LAYOUT_READ_AHEAD, isize));
		else if (pos && pos == READ_ONCE(ri->layout_write_next))
			ahead = max(end, pos + RDFS_LAYOUT_WRITE_AHEAD);
		l = rdfs_layout_fetch(inode, handle, pos, ahead, allocate, flags, failed_server);
		/*
		 * Too big to describe, or (allocating ahead) past a quota or the
		 * space: what was asked for alone may still be fine.
		 */
		err = PTR_ERR_OR_ZERO(l);
		if ((err == -E2BIG || err == -EDQUOT || err == -ENOSPC) && ahead > end)
			l = rdfs_layout_fetch(inode, handle, pos, end, allocate, flags,
					      failed_server);
		if (IS_ERR(l))
			return l;
		/*
		 * Kept only if nothing was forgotten meanwhile: asked for
		 * before a commit, open or change elsewhere, it may name as
		 * holes what is data now (this request may still use it).
		 */
		old = NULL;
		spin_lock(&ri->lock);
		if (ri->layout_gen == gen) {
			refcount_inc(&l->ref);
			old = *slot;
			*slot = l;
		}
		spin_unlock(&ri->lock);
		rdfs_layout_put(old);
	}
	if (allocate) {
		spin_lock(&ri->lock);
		if (end > ri->layout_write_next)
			ri->layout_write_next = end;
		stale_read = rdfs_layout_take(&ri->layout_read);
		ri->layout_gen++;
		spin_unlock(&ri->lock);
		rdfs_layout_put(stale_read);
	}
	return l;
}
