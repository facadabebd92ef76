// SPDX-License-Identifier: GPL-2.0
/*
 * unstable.c - writeback's unstable WRITEs and their IO_COMMIT.
 *
 * Writeback sends its WRITEs unstable: an I/O server acknowledges one on
 * receipt, with its verifier (a value it changes at every start), and an
 * IO_COMMIT later makes everything it received durable with one fdatasync
 * instead of one per WRITE (NFS's UNSTABLE writes and COMMIT; rdfs-fuse's
 * write-back). Until that commit the client must be able to send the bytes
 * again: a server whose verifier at commit is not the one its WRITEs were
 * answered with restarted in between and may have lost them. So each run a
 * writeback batch wrote keeps its pages (a reference each; they may be clean
 * by then, even out of the page cache) until a commit, which then drops them
 * or, where a verifier changed or a server could not commit, sends every run
 * again as stable WRITEs (data.c tries those on a fresh layout and
 * reports copies lost as for any write). Runs it can neither vouch for nor
 * send (the servers still down) stay for the next commit, and its caller
 * gets -EIO.
 *
 * When: rdfs_commit() (flush, fsync, release, truncate, fallocate, a read of
 * blocks not yet committed) commits the data before the metaserver hears of
 * the blocks, as rdfs-fuse does, so the metadata never names blocks whose
 * bytes could still be lost; writeback commits when it runs for data
 * integrity (WB_SYNC_ALL: sync(2), syncfs, fsync) and when an inode holds
 * more than RDFS_UNSTABLE_MAX bytes, which bounds the memory kept; sync_fs
 * (sync(2), syncfs, umount) commits every inode, written back when it may.
 *
 * Locks: ri->lock (a spinlock) covers ri->unstable's contents; a run and the
 * verifiers of its WRITEs enter together under it, so a commit takes both or
 * neither. ri->commit_lock (a mutex, held across the helper call and the
 * resends) makes one inode's commits one at a time: a commit that finds
 * nothing left returns only once the one before it is done, so fsync never
 * returns ahead of the commit that carries its bytes.
 */
#include <linux/bitmap.h>
#include <linux/delay.h>
#include <linux/pagemap.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "rdfs.h"

/* One run a writeback batch wrote unstable: data.c's arguments, kept. */
struct rdfs_unstable_run {
	struct list_head link;
	u64 base;		/* file offset of pages[0] */
	u32 off;		/* first byte written, from base */
	u64 len;
	int npages;
	struct page *pages[];	/* a reference each */
};

struct rdfs_unstable {
	struct rdfs_wverf verf;	/* the servers the runs went to */
	struct list_head runs;	/* oldest first */
	u64 bytes;
};

void rdfs_wverf_note(struct rdfs_wverf *w, u32 server_id, u64 verifier)
{
	if (server_id >= RDFS_MAX_SERVERS)
		return;		/* data.c refuses those before sending */
	if (!__test_and_set_bit(server_id, w->servers))
		w->verifier[server_id] = verifier;
	else if (w->verifier[server_id] != verifier)
		__set_bit(server_id, w->mixed);
}

void rdfs_wverf_clear(struct rdfs_wverf *w)
{
	bitmap_zero(w->servers, RDFS_MAX_SERVERS);
	bitmap_zero(w->mixed, RDFS_MAX_SERVERS);
}

int rdfs_unstable_prepare(struct inode *inode)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_unstable *u;

	if (READ_ONCE(ri->unstable))
		return 0;
	u = kmalloc(sizeof(*u), GFP_NOFS);
	if (!u)
		return -ENOMEM;
	rdfs_wverf_clear(&u->verf);
	INIT_LIST_HEAD(&u->runs);
	u->bytes = 0;
	spin_lock(&ri->lock);
	if (!ri->unstable) {
		ri->unstable = u;
		u = NULL;
	}
	spin_unlock(&ri->lock);
	kfree(u);
	return 0;
}

static void rdfs_run_free(struct rdfs_unstable_run *run)
{
	int i;

	for (i = 0; i < run->npages; i++)
		put_page(run->pages[i]);
	kvfree(run);
}

int rdfs_unstable_keep(struct inode *inode, const struct rdfs_wverf *w, struct page **pages,
		       int npages, u32 off, u64 len)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_unstable_run *run;
	struct rdfs_unstable *u;
	unsigned int s;
	int i;

	run = kvmalloc(struct_size(run, pages, npages), GFP_NOFS);
	if (!run)
		return -ENOMEM;
	run->base = page_offset(pages[0]);
	run->off = off;
	run->len = len;
	run->npages = npages;
	for (i = 0; i < npages; i++) {
		get_page(pages[i]);
		run->pages[i] = pages[i];
	}
	spin_lock(&ri->lock);
	u = ri->unstable;	/* rdfs_unstable_prepare() made it; it lives until eviction */
	for_each_set_bit(s, w->servers, RDFS_MAX_SERVERS) {
		rdfs_wverf_note(&u->verf, s, w->verifier[s]);
		if (test_bit(s, w->mixed))
			__set_bit(s, u->verf.mixed);
	}
	list_add_tail(&run->link, &u->runs);
	u->bytes += len;
	spin_unlock(&ri->lock);
	return 0;
}

u64 rdfs_unstable_bytes(struct inode *inode)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	u64 n = 0;

	spin_lock(&ri->lock);
	if (ri->unstable)
		n = ri->unstable->bytes;
	spin_unlock(&ri->lock);
	return n;
}

/*
 * IO_COMMIT through the helper on every server of @w: 0 if each vouches for
 * the WRITEs (committed, its verifier still theirs), 1 if some cannot (the
 * runs must go again), or -errno if the helper could not be asked.
 */
static int rdfs_io_commit(struct inode *inode, const struct rdfs_wverf *w)
{
	struct rdfs_dev_io_commit_result *res;
	struct rdfs_dev_io_commit *ic;
	struct rdfs_dev_call c;
	unsigned int s, n = 0, i;
	int err;

	ic = kmalloc(struct_size(ic, server_id, RDFS_MAX_SERVERS), GFP_NOFS);
	res = kmalloc_array(RDFS_MAX_SERVERS, sizeof(*res), GFP_NOFS);
	if (!ic || !res) {
		err = -ENOMEM;
		goto out;
	}
	for_each_set_bit(s, w->servers, RDFS_MAX_SERVERS)
		ic->server_id[n++] = s;
	err = 0;
	if (!n)
		goto out;
	ic->nservers = n;
	ic->pad = 0;
	rdfs_call_init(&c, RDFS_DEV_IO_COMMIT, inode->i_ino, 0);
	rdfs_call_arg(&c, ic, struct_size(ic, server_id, n));
	c.out = res;
	c.out_size = n * sizeof(*res);
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (err)
		goto out;
	atomic64_inc(&rdfs_stats.io_commits);
	if (c.out_len != n * sizeof(*res)) {
		err = -EIO;
		goto out;
	}
	for (i = 0; i < n && !err; i++) {
		s = ic->server_id[i];
		if (res[i].error || test_bit(s, w->mixed) || res[i].verifier != w->verifier[s]) {
			pr_warn_ratelimited(RDFS_MSG(1500018)
					    "ino=%lu: I/O server %u %s; sending its unstable writes again\n",
					    inode->i_ino, s,
					    res[i].error ? "could not commit" :
					    "restarted before committing");
			err = 1;
		}
	}
out:
	kfree(ic);
	kfree(res);
	return err;
}

/*
 * Tries of a resend, RDFS_RESEND_WAIT_MS << i apart (7.75 s in all): the
 * server whose verifier changed has just restarted and may not serve yet
 * (its registration with the metaserver comes after it listens).
 */
#define RDFS_RESEND_TRIES	6
#define RDFS_RESEND_WAIT_MS	250

/* Send @run again, stable; never past the end of the file (truncated since). */
static int rdfs_run_resend(struct inode *inode, u64 handle, struct rdfs_unstable_run *run)
{
	u64 start = run->base + run->off, size = i_size_read(inode), len = run->len;
	int err, i;

	if (start >= size)
		return 0;
	len = min(len, size - start);
	atomic64_inc(&rdfs_stats.unstable_resends);
	for (i = 0;; i++) {
		err = rdfs_data_write_at(inode, handle, run->pages, run->npages, run->base,
					 run->off, len, NULL);
		if (err != -EIO || i + 1 == RDFS_RESEND_TRIES || fatal_signal_pending(current))
			return err;
		msleep(RDFS_RESEND_WAIT_MS << i);
	}
}

/*
 * A commit that could neither vouch for @runs nor send them again (the
 * servers still down, say) puts them back in front, their servers marked
 * mixed so that the next commit sends them again whatever it hears; the
 * caller reports the error, and whoever commits next (a later fsync, close)
 * may succeed.
 */
static void rdfs_unstable_requeue(struct inode *inode, const struct rdfs_wverf *w,
				  struct list_head *runs)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_unstable_run *run;
	struct rdfs_unstable *u;
	u64 bytes = 0;

	list_for_each_entry(run, runs, link)
		bytes += run->len;
	spin_lock(&ri->lock);
	u = ri->unstable;
	bitmap_or(u->verf.servers, u->verf.servers, w->servers, RDFS_MAX_SERVERS);
	bitmap_or(u->verf.mixed, u->verf.mixed, w->servers, RDFS_MAX_SERVERS);
	list_splice_init(runs, &u->runs);
	u->bytes += bytes;
	spin_unlock(&ri->lock);
}

/*
 * sync(2) and syncfs(2) end here (sync_fs, after writeback has waited): the
 * data-integrity writeback commits only the inodes it still found dirty
 * pages in, not the runs its first pass or the flusher wrote, so every
 * inode that ever wrote unstable is committed here (one with nothing kept
 * costs no helper call).
 */
int rdfs_unstable_sync_sb(struct super_block *sb)
{
	struct inode *inode, *prev = NULL;
	int err = 0, e;

	spin_lock(&sb->s_inode_list_lock);
	list_for_each_entry(inode, &sb->s_inodes, i_sb_list) {
		if (!READ_ONCE(RDFS_I(inode)->unstable) || !igrab(inode))
			continue;
		/* our reference keeps @inode on the list: the walk goes on from it */
		spin_unlock(&sb->s_inode_list_lock);
		iput(prev);
		prev = inode;
		e = rdfs_unstable_commit(inode, 0);
		if (e && !err)
			err = e;
		cond_resched();
		spin_lock(&sb->s_inode_list_lock);
	}
	spin_unlock(&sb->s_inode_list_lock);
	iput(prev);
	return err;
}

int rdfs_unstable_commit(struct inode *inode, u64 handle)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_unstable_run *run, *next;
	struct rdfs_wverf *w;
	LIST_HEAD(runs);
	int err = 0, res;

	if (!READ_ONCE(ri->unstable))
		return 0;	/* never written unstable */
	w = kmalloc(sizeof(*w), GFP_NOFS);
	if (!w)
		return -ENOMEM;
	mutex_lock(&ri->commit_lock);
	spin_lock(&ri->lock);
	*w = ri->unstable->verf;
	rdfs_wverf_clear(&ri->unstable->verf);
	list_splice_init(&ri->unstable->runs, &runs);
	ri->unstable->bytes = 0;
	spin_unlock(&ri->lock);
	if (list_empty(&runs))
		goto out;
	res = rdfs_io_commit(inode, w);
	if (res) {
		if (!handle)
			handle = rdfs_wb_handle(inode);
		list_for_each_entry_safe(run, next, &runs, link) {
			err = handle ? rdfs_run_resend(inode, handle, run) : -EBADF;
			if (err)
				break;
			list_del(&run->link);
			rdfs_run_free(run);
		}
		if (err) {
			pr_warn_ratelimited(RDFS_MSG(1500019)
					    "ino=%lu: unstable writes not committed (%d), sending them again failed (%d): kept for the next commit\n",
					    inode->i_ino, res, err);
			rdfs_unstable_requeue(inode, w, &runs);
			err = -EIO;
		}
	}
	list_for_each_entry_safe(run, next, &runs, link)
		rdfs_run_free(run);
out:
	mutex_unlock(&ri->commit_lock);
	kfree(w);
	return err;
}

void rdfs_unstable_free(struct inode *inode)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_unstable_run *run, *next;

	if (!ri->unstable)
		return;
	list_for_each_entry_safe(run, next, &ri->unstable->runs, link)
		rdfs_run_free(run);
	kfree(ri->unstable);
	ri->unstable = NULL;
}
