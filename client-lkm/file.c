// SPDX-License-Identifier: GPL-2.0
/*
 * file.c - file and directory operations and the address_space operations
 * that move file data between the page cache and the I/O servers.
 *
 * Close-to-open: open refetches the attributes (dropping cached pages when the
 * file changed elsewhere); flush (close) writes the dirty pages, makes them
 * durable on the I/O servers (writeback's WRITEs are unstable: unstable.c)
 * and COMMITs the written blocks and the size through the helper.
 *
 * A page written in part remembers its dirty bytes, and writeback sends only
 * those (as NFS does): the page's other bytes are as this client last read
 * them, and another client may have written them since.
 */
#include <linux/pagemap.h>
#include <linux/falloc.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <linux/writeback.h>

#include "rdfs.h"

/*
 * Pages per writeback batch (one layout, one WRITE per I/O server it
 * touches): 4 MiB; several batches in flight (RDFS_WB_INFLIGHT) reach all
 * the I/O servers at once.
 */
#define RDFS_WB_BATCH	1024
/* Write-behind starts the writeback of every this many pages written in a row. */
#define RDFS_WB_BEHIND	1024
/*
 * Pages per read: a whole default read-ahead window (4 MiB), so its requests
 * (at most 1 MiB each, data.c) go to all the I/O servers at once.
 */
#define RDFS_RA_BATCH	1024

struct rdfs_open_file {
	u64 handle;
	struct list_head link;		/* on the inode's writable opens */
	bool writable;
	loff_t behind;			/* write-behind: the first byte not yet started */
	bool dir_plus;			/* a directory: every page of this listing with attributes */
};

/*
 * The dirty bytes [from, to) of a dirty page written in part, in
 * folio->private (PG_private); none: the whole page is dirty (or it is
 * clean). write_end widens the range, writeback takes it with the dirty bit
 * (under the page lock), so a range never outlives its dirty page.
 */
#define RDFS_RANGE_SHIFT	16

static_assert(PAGE_SIZE < (1ul << RDFS_RANGE_SHIFT));

static void rdfs_dirty_range(struct folio *folio, unsigned int *from, unsigned int *to)
{
	unsigned long v = (unsigned long)folio_get_private(folio);

	if (!folio_test_private(folio)) {
		*from = 0;
		*to = PAGE_SIZE;
		return;
	}
	*from = v & ((1ul << RDFS_RANGE_SHIFT) - 1);
	*to = v >> RDFS_RANGE_SHIFT;
}

/* Whole page dirty (or clean): no range. Under the folio lock. */
static void rdfs_dirty_range_drop(struct folio *folio)
{
	if (folio_test_private(folio))
		folio_detach_private(folio);
}

/* Under the folio lock; to > from, so the value is never NULL. */
static void rdfs_dirty_range_set(struct folio *folio, unsigned int from, unsigned int to)
{
	void *v = (void *)((unsigned long)from | (unsigned long)to << RDFS_RANGE_SHIFT);

	if (!from && to == PAGE_SIZE)
		rdfs_dirty_range_drop(folio);
	else if (folio_test_private(folio))
		folio_change_private(folio, v);
	else
		folio_attach_private(folio, v);
}

static u64 rdfs_file_handle(struct file *file)
{
	struct rdfs_open_file *of = file ? file->private_data : NULL;

	return of ? of->handle : 0;
}

/* A handle for writeback, which has no file: any writable open's. */
u64 rdfs_wb_handle(struct inode *inode)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_open_file *of;
	u64 h = 0;

	spin_lock(&ri->lock);
	of = list_first_entry_or_null(&ri->wr_files, struct rdfs_open_file, link);
	if (of)
		h = of->handle;
	spin_unlock(&ri->lock);
	return h;
}

bool rdfs_dirty_overlaps(struct inode *inode, u64 first, u64 end)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	bool ret;

	spin_lock(&ri->lock);
	ret = ri->dirty_first < end && first < ri->dirty_end;
	spin_unlock(&ri->lock);
	return ret;
}

int rdfs_commit(struct inode *inode, u64 handle)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_dev_commit cm;
	struct rdfs_dev_call c;
	int err;

	/* the bytes durable first: the metadata must never name blocks that could be lost */
	err = rdfs_unstable_commit(inode, handle);
	if (err)
		return err;
	spin_lock(&ri->lock);
	cm.first_block = ri->dirty_first;
	cm.end_block = ri->dirty_end;
	ri->dirty_first = U64_MAX;
	ri->dirty_end = 0;
	/* read after the range is taken: a writer raises the size before it adds to the range */
	cm.size = i_size_read(inode);
	spin_unlock(&ri->lock);
	if (!cm.end_block)
		return 0;
	cm.mtime_ns = timespec64_to_ns(&inode->i_mtime);
	rdfs_call_init(&c, RDFS_DEV_COMMIT, inode->i_ino, handle);
	rdfs_call_arg(&c, &cm, sizeof(cm));
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	/* a read layout kept from before names the blocks just committed as holes */
	rdfs_layout_forget_read(inode);
	if (err) {
		spin_lock(&ri->lock);
		ri->dirty_first = min(ri->dirty_first, cm.first_block);
		ri->dirty_end = max(ri->dirty_end, cm.end_block);
		spin_unlock(&ri->lock);
	}
	return err;
}

struct rdfs_open_file *rdfs_open_file_new(void)
{
	return kzalloc(sizeof(struct rdfs_open_file), GFP_KERNEL);
}

void rdfs_open_file_free(struct rdfs_open_file *of)
{
	kfree(of);
}

void rdfs_file_attach(struct inode *inode, struct file *file, struct rdfs_open_file *of,
		      u64 handle)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);

	of->handle = handle;
	INIT_LIST_HEAD(&of->link);
	if (file->f_mode & FMODE_WRITE) {
		of->writable = true;
		spin_lock(&ri->lock);
		list_add_tail(&of->link, &ri->wr_files);
		spin_unlock(&ri->lock);
	}
	file->private_data = of;
}

static int rdfs_open(struct inode *inode, struct file *file)
{
	struct rdfs_dev_open o = { .flags = file->f_flags & ~(O_CREAT | O_EXCL | O_NOCTTY) };
	struct rdfs_dev_open_reply rep;
	struct rdfs_open_file *of;
	struct rdfs_dev_call c;
	int err;

	of = rdfs_open_file_new();
	if (!of)
		return -ENOMEM;
	rdfs_call_init(&c, RDFS_DEV_OPEN, inode->i_ino, 0);
	rdfs_call_arg(&c, &o, sizeof(o));
	c.out = &rep;
	c.out_size = sizeof(rep);
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (!err && c.out_len < sizeof(rep))
		err = -EIO;
	if (err) {
		rdfs_open_file_free(of);
		return err;
	}
	/* close-to-open: where we saw holes another client may have written */
	rdfs_layout_forget(inode);
	rdfs_attr_apply(inode, &rep.attr);
	rdfs_file_attach(inode, file, of, rep.handle);
	if ((file->f_flags & O_TRUNC) && i_size_read(inode))
		truncate_pagecache(inode, 0);
	return 0;
}

static int rdfs_flush(struct file *file, fl_owner_t id)
{
	struct inode *inode = file_inode(file);
	int err;

	if (!(file->f_mode & FMODE_WRITE))
		return 0;
	err = filemap_write_and_wait(inode->i_mapping);
	if (!err)
		err = rdfs_commit(inode, rdfs_file_handle(file));
	return err;
}

static int rdfs_release(struct inode *inode, struct file *file)
{
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_open_file *of = file->private_data;
	struct rdfs_dev_call c;

	if (of->writable) {
		/* nothing may be left for writeback to send under this handle */
		filemap_write_and_wait(inode->i_mapping);
		rdfs_commit(inode, of->handle);
		spin_lock(&ri->lock);
		list_del(&of->link);
		spin_unlock(&ri->lock);
	}
	rdfs_call_init(&c, RDFS_DEV_RELEASE, inode->i_ino, of->handle);
	rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	kfree(of);
	return 0;
}

static int rdfs_fsync(struct file *file, loff_t start, loff_t end, int datasync)
{
	struct inode *inode = file_inode(file);
	struct rdfs_dev_call c;
	int err;

	err = file_write_and_wait_range(file, start, end);
	if (err)
		return err;
	err = rdfs_commit(inode, rdfs_file_handle(file));
	if (err)
		return err;
	rdfs_call_init(&c, RDFS_DEV_FSYNC, inode->i_ino, rdfs_file_handle(file));
	return rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
}

/* A store through a shared mapping may touch any byte: the whole page is dirty. */
static vm_fault_t rdfs_page_mkwrite(struct vm_fault *vmf)
{
	struct folio *folio = page_folio(vmf->page);
	vm_fault_t ret = filemap_page_mkwrite(vmf);

	if (ret & VM_FAULT_LOCKED)
		rdfs_dirty_range_drop(folio);
	return ret;
}

static const struct vm_operations_struct rdfs_file_vm_ops = {
	.fault		= filemap_fault,
	.map_pages	= filemap_map_pages,
	.page_mkwrite	= rdfs_page_mkwrite,
};

static int rdfs_file_mmap(struct file *file, struct vm_area_struct *vma)
{
	int err = generic_file_mmap(file, vma);

	if (!err)
		vma->vm_ops = &rdfs_file_vm_ops;
	return err;
}

static ssize_t rdfs_file_read_iter(struct kiocb *iocb, struct iov_iter *to)
{
	struct inode *inode = file_inode(iocb->ki_filp);
	int err = rdfs_revalidate_attr(inode, false);

	if (err)
		return err;
	if ((iocb->ki_flags & IOCB_DIRECT) || RDFS_SB(inode->i_sb)->direct_io)
		return rdfs_direct_read(iocb, to, rdfs_file_handle(iocb->ki_filp));
	return generic_file_read_iter(iocb, to);
}

/*
 * Write-behind: a writer that has dirtied RDFS_WB_BEHIND pages in a row
 * starts their writeback itself (WB_SYNC_NONE, the whole pages
 * only), so the network takes the bytes while the writer copies the next
 * ones, instead of the flusher finding them at the dirty background limit
 * or fsync finding them all at once. The writer waits only when its file
 * has RDFS_WB_INFLIGHT batches in flight (rdfs_wb_submit): the same pace as
 * the I/O servers. A write elsewhere in the file starts the count again.
 */
static void rdfs_write_behind(struct file *file, loff_t pos, loff_t end)
{
	struct rdfs_open_file *of = file->private_data;
	loff_t from = READ_ONCE(of->behind), to = round_down(end, PAGE_SIZE);
	struct writeback_control wbc = {
		.sync_mode = WB_SYNC_NONE,
		.nr_to_write = LONG_MAX,
	};

	if (pos < from || pos > from + ((loff_t)RDFS_WB_BEHIND << PAGE_SHIFT))
		from = round_down(pos, PAGE_SIZE);
	if (to - from < ((loff_t)RDFS_WB_BEHIND << PAGE_SHIFT)) {
		WRITE_ONCE(of->behind, from);
		return;
	}
	wbc.range_start = from;
	wbc.range_end = to - 1;
	WRITE_ONCE(of->behind, to);
	atomic64_add(to - from, &rdfs_stats.write_behind_bytes);
	/* an error is the mapping's, for fsync and close to report */
	filemap_fdatawrite_wbc(file->f_mapping, &wbc);
}

static ssize_t rdfs_file_write_iter(struct kiocb *iocb, struct iov_iter *from)
{
	struct file *file = iocb->ki_filp;
	struct inode *inode = file_inode(file);
	ssize_t ret;

	if (!(iocb->ki_flags & IOCB_DIRECT) && !RDFS_SB(inode->i_sb)->direct_io) {
		ret = generic_file_write_iter(iocb, from);
		if (ret > 0)
			rdfs_write_behind(file, iocb->ki_pos - ret, iocb->ki_pos);
		return ret;
	}
	inode_lock(inode);
	ret = generic_write_checks(iocb, from);
	if (ret > 0)
		ret = file_modified(file);
	if (!ret)
		ret = rdfs_direct_write(iocb, from, rdfs_file_handle(file));
	inode_unlock(inode);
	if (ret > 0)
		ret = generic_write_sync(iocb, ret);
	return ret;
}

/*
 * Before the helper looks at the file's layout or size: what this client
 * wrote is on the I/O servers and committed to the metaserver.
 */
static int rdfs_settle(struct inode *inode, loff_t start, loff_t end)
{
	int err = filemap_write_and_wait_range(inode->i_mapping, start, end);

	return err ? err : rdfs_commit(inode, rdfs_wb_handle(inode));
}

static long rdfs_file_fallocate(struct file *file, int mode, loff_t offset, loff_t len)
{
	struct inode *inode = file_inode(file);
	struct rdfs_dev_fallocate fa = { .mode = mode, .offset = offset, .length = len };
	struct rdfs_dev_attr attr;
	struct rdfs_dev_call c;
	int err;

	bool shift = mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE);

	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE |
		     FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE))
		return -EOPNOTSUPP;
	/* the metaserver moves whole blocks only, as ext4 its own */
	if (shift && ((offset | len) & (RDFS_BLOCK_SIZE - 1)))
		return -EINVAL;
	inode_lock(inode);
	/* no page fault may map a page of the old layout while it moves */
	if (shift)
		filemap_invalidate_lock(inode->i_mapping);
	/* as a write: set-ID bits go, times move (the metaserver sets its own too) */
	err = file_modified(file);
	if (!err)
		err = rdfs_settle(inode, 0, LLONG_MAX);
	if (err)
		goto out;
	/* every page from the range on will hold other bytes */
	if (shift)
		truncate_pagecache(inode, offset);
	rdfs_call_init(&c, RDFS_DEV_FALLOCATE, inode->i_ino, rdfs_file_handle(file));
	rdfs_call_arg(&c, &fa, sizeof(fa));
	c.out = &attr;
	c.out_size = sizeof(attr);
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (!err && c.out_len < sizeof(attr))
		err = -EIO;
	rdfs_layout_forget(inode);
	/* the helper zeroed and punched on the servers: the cached pages are stale */
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		truncate_pagecache_range(inode, offset, offset + len - 1);
	if (!err)
		rdfs_attr_apply(inode, &attr);
	/*
	 * The size moved either way; an open writer makes rdfs_attr_apply() keep
	 * ours, but nothing of ours is unwritten now (settled, locked out).
	 */
	if (!err && shift)
		i_size_write(inode, attr.size);
	/* read-ahead may have cached the old layout's pages meanwhile */
	if (shift)
		truncate_pagecache(inode, offset);
out:
	if (shift)
		filemap_invalidate_unlock(inode->i_mapping);
	inode_unlock(inode);
	return err;
}

/* SEEK_DATA/SEEK_HOLE from the layout (the helper's), the rest as usual. */
static loff_t rdfs_file_llseek(struct file *file, loff_t offset, int whence)
{
	struct inode *inode = file_inode(file);
	struct rdfs_dev_seek sk = { .offset = offset, .whence = whence };
	struct rdfs_dev_call c;
	int err;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return generic_file_llseek(file, offset, whence);
	if (offset < 0)
		return -ENXIO;
	err = rdfs_settle(inode, 0, LLONG_MAX);
	if (err)
		return err;
	rdfs_call_init(&c, RDFS_DEV_SEEK, inode->i_ino, rdfs_file_handle(file));
	rdfs_call_arg(&c, &sk, sizeof(sk));
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (err)
		return err;
	return vfs_setpos(file, c.val, inode->i_sb->s_maxbytes);
}

/* The I/O servers copy the blocks between themselves (COPY); no byte comes here. */
static ssize_t rdfs_copy_file_range(struct file *fin, loff_t pos_in, struct file *fout,
				    loff_t pos_out, size_t len, unsigned int flags)
{
	struct inode *in = file_inode(fin), *out = file_inode(fout);
	struct rdfs_dev_copy cp = { .dst_handle = rdfs_file_handle(fout), .off_in = pos_in,
				    .off_out = pos_out, .length = len };
	struct rdfs_dev_attr attr;
	struct rdfs_dev_call c;
	ssize_t err;

	if (flags)
		return -EINVAL;
	/* another mount (another helper): the kernel copies, as FUSE and NFS do */
	if (in->i_sb != out->i_sb)
		return generic_copy_file_range(fin, pos_in, fout, pos_out, len, flags);
	err = rdfs_settle(in, pos_in, pos_in + len - 1);
	if (err)
		return err;
	inode_lock(out);
	err = file_modified(fout);
	if (!err)
		err = rdfs_settle(out, 0, LLONG_MAX);
	if (err)
		goto out;
	rdfs_call_init(&c, RDFS_DEV_COPY_RANGE, in->i_ino, rdfs_file_handle(fin));
	rdfs_call_arg(&c, &cp, sizeof(cp));
	c.out = &attr;
	c.out_size = sizeof(attr);
	err = rdfs_call(RDFS_SB(in->i_sb)->chan, &c);
	if (!err && c.out_len < sizeof(attr))
		err = -EIO;
	rdfs_layout_forget(out);
	if (err)
		goto out;
	if (c.val) {
		/* dropped whole (clean since rdfs_settle): truncating would zero partial pages */
		invalidate_inode_pages2_range(out->i_mapping, pos_out >> PAGE_SHIFT,
					      (pos_out + c.val - 1) >> PAGE_SHIFT);
		rdfs_attr_apply(out, &attr);
	}
	err = c.val;
out:
	inode_unlock(out);
	return err;
}

const struct file_operations rdfs_file_fops = {
	.llseek		= rdfs_file_llseek,
	.fallocate	= rdfs_file_fallocate,
	.copy_file_range = rdfs_copy_file_range,
	.read_iter	= rdfs_file_read_iter,
	.write_iter	= rdfs_file_write_iter,
	.mmap		= rdfs_file_mmap,
	.open		= rdfs_open,
	.flush		= rdfs_flush,
	.release	= rdfs_release,
	.fsync		= rdfs_fsync,
	.splice_read	= generic_file_splice_read,
	.splice_write	= iter_file_splice_write,
};

/* ---------------------------------------------------------------- directories */

static int rdfs_opendir(struct inode *inode, struct file *file)
{
	struct rdfs_dev_open_reply rep;
	struct rdfs_open_file *of;
	struct rdfs_dev_call c;
	int err;

	of = kzalloc(sizeof(*of), GFP_KERNEL);
	if (!of)
		return -ENOMEM;
	rdfs_call_init(&c, RDFS_DEV_OPENDIR, inode->i_ino, 0);
	c.out = &rep;
	c.out_size = sizeof(rep);
	err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	if (!err && c.out_len < sizeof(rep.handle))
		err = -EIO;
	if (err) {
		kfree(of);
		return err;
	}
	of->handle = rep.handle;
	file->private_data = of;
	return 0;
}

static int rdfs_releasedir(struct inode *inode, struct file *file)
{
	struct rdfs_open_file *of = file->private_data;
	struct rdfs_dev_call c;

	rdfs_call_init(&c, RDFS_DEV_RELEASEDIR, inode->i_ino, of->handle);
	rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
	kfree(of);
	return 0;
}

/*
 * A listed name with its attributes, as if it had been looked up (NFS's
 * nfs_prime_dcache), for names this mount does not know yet: the page the
 * helper answers from may be older than what this mount learned since (its
 * own writes, a rewinddir of a long-open stream), so a cached dentry, and a
 * cached inode's attributes, are left as they are.
 */
static void rdfs_prime_dentry(struct dentry *parent, const struct rdfs_dev_dirent *d,
			      const struct rdfs_dev_attr *a)
{
	DECLARE_WAIT_QUEUE_HEAD_ONSTACK(wq);
	struct qstr name = QSTR_INIT(d->name, d->namelen);
	struct dentry *dentry, *alias;
	struct inode *inode;

	if (a->ino != d->ino || !a->ino)
		return;
	name.hash = full_name_hash(parent, name.name, name.len);
	dentry = d_lookup(parent, &name);
	if (dentry) {
		dput(dentry);
		return;
	}
	dentry = d_alloc_parallel(parent, &name, &wq);
	if (IS_ERR(dentry))
		return;
	if (!d_in_lookup(dentry)) {
		dput(dentry);
		return;
	}
	inode = rdfs_iget_keep(parent->d_sb, a);
	if (IS_ERR(inode)) {
		d_lookup_done(dentry);
		dput(dentry);
		return;
	}
	alias = d_splice_alias(inode, dentry);
	d_lookup_done(dentry);
	if (alias) {
		if (!IS_ERR(alias)) {
			alias->d_time = jiffies;
			dput(alias);
		}
	} else {
		dentry->d_time = jiffies;
	}
	dput(dentry);
	atomic64_inc(&rdfs_stats.readdir_plus_entries);
}

/* A name a helper may hand to the dcache: one component, not "." or "..". */
static bool rdfs_dirent_name_ok(const struct rdfs_dev_dirent *d)
{
	if (d->namelen == 0 || d->namelen > NAME_MAX || memchr(d->name, '/', d->namelen) ||
	    memchr(d->name, '\0', d->namelen))
		return false;
	return !(d->name[0] == '.' &&
		 (d->namelen == 1 || (d->namelen == 2 && d->name[1] == '.')));
}

/*
 * ctx->pos: 0 ".", 1 "..", 2 + i the helper's entry i. The first page comes
 * with attributes, and so does every page of a listing begun after names of
 * the directory were used (RDFS_I_NAMES_USED): they prime the dentry cache,
 * so `ls -l` asks nothing per name. A listing nobody stats (find, ls -f)
 * costs the metaserver one page of attributes.
 */
static int rdfs_readdir(struct file *file, struct dir_context *ctx)
{
	struct rdfs_open_file *of = file->private_data;
	struct inode *inode = file_inode(file);
	struct rdfs_dev_readdir rd = {};
	struct rdfs_dev_call c;
	size_t off;
	void *buf;
	int err = 0;

	if (!dir_emit_dots(file, ctx))
		return 0;
	buf = kvmalloc(RDFS_DEV_MAX_MSG, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		rd.index = ctx->pos - 2;
		if (rd.index == 0)
			of->dir_plus = test_and_clear_bit(RDFS_I_NAMES_USED, &RDFS_I(inode)->flags);
		rd.flags = rd.index == 0 || of->dir_plus ? RDFS_DEV_READDIR_PLUS : 0;
		rdfs_call_init(&c, RDFS_DEV_READDIR, inode->i_ino, rdfs_file_handle(file));
		rdfs_call_arg(&c, &rd, sizeof(rd));
		c.out = buf;
		c.out_size = RDFS_DEV_MAX_MSG;
		err = rdfs_call(RDFS_SB(inode->i_sb)->chan, &c);
		if (err)
			break;
		for (off = 0; off + sizeof(struct rdfs_dev_dirent) <= c.out_len;) {
			struct rdfs_dev_dirent *d = buf + off;
			size_t attr_off = RDFS_DEV_DIRENT_ATTR_OFF(d->namelen);

			if (d->reclen < attr_off || d->reclen % 8 || off + d->reclen > c.out_len ||
			    ((d->flags & RDFS_DEV_DIRENT_ATTR) &&
			     d->reclen < attr_off + sizeof(struct rdfs_dev_attr)) ||
			    !rdfs_dirent_name_ok(d)) {
				err = -EIO;
				goto out;
			}
			if (!dir_emit(ctx, d->name, d->namelen, d->ino, d->type))
				goto out;
			if (d->flags & RDFS_DEV_DIRENT_ATTR)
				rdfs_prime_dentry(file->f_path.dentry, d, (void *)d + attr_off);
			ctx->pos++;
			off += d->reclen;
		}
		if (c.val || !c.out_len)
			break;
	}
out:
	kvfree(buf);
	return err;
}

const struct file_operations rdfs_dir_fops = {
	.llseek		= generic_file_llseek,
	.read		= generic_read_dir,
	.iterate_shared	= rdfs_readdir,
	.open		= rdfs_opendir,
	.release	= rdfs_releasedir,
	.fsync		= noop_fsync,
};

/* ---------------------------------------------------------------- address space */

static int rdfs_read_folio(struct file *file, struct folio *folio)
{
	struct inode *inode = folio->mapping->host;
	struct page *page = &folio->page;
	u64 h = rdfs_file_handle(file);
	int err;

	err = rdfs_data_read(inode, h ? h : rdfs_wb_handle(inode), &page, 1);
	if (!err)
		folio_mark_uptodate(folio);
	folio_unlock(folio);
	return err;
}

/*
 * Read-ahead runs (consecutive locked pages) are read on rdfs_ra_wq while
 * their reader goes on: a reader that reaches the window's marker page starts
 * the next window and keeps consuming this one instead of waiting for the
 * next to arrive; a reader that needs a page now waits on its page lock.
 * Each run holds its inode (igrab) until its pages are unlocked, and the
 * handle is checked against the inode by the helper, so a run that outlives
 * its open reads nothing of another file (its pages stay not uptodate).
 */
struct rdfs_ra {
	struct work_struct work;
	struct inode *inode;
	u64 handle;
	int n;
	struct page *pages[];
};

struct workqueue_struct *rdfs_ra_wq;

static void rdfs_ra_read(struct inode *inode, u64 handle, struct page **pages, int n)
{
	int err = rdfs_data_read(inode, handle, pages, n), i;

	for (i = 0; i < n; i++) {
		if (!err)
			SetPageUptodate(pages[i]);
		unlock_page(pages[i]);
	}
}

static void rdfs_ra_work(struct work_struct *work)
{
	struct rdfs_ra *ra = container_of(work, struct rdfs_ra, work);

	rdfs_ra_read(ra->inode, ra->handle, ra->pages, ra->n);
	iput(ra->inode);
	kfree(ra);
}

static void rdfs_readahead(struct readahead_control *rac)
{
	struct inode *inode = rac->mapping->host;
	u64 h = rdfs_file_handle(rac->file);
	unsigned int max = min_t(unsigned int, readahead_count(rac), RDFS_RA_BATCH);
	struct folio *next = readahead_folio(rac);
	struct rdfs_ra *ra;

	if (!h)
		h = rdfs_wb_handle(inode);
	while (next) {
		ra = kmalloc(struct_size(ra, pages, max), GFP_NOFS);
		if (!ra) {
			/* this one is ours to unlock; read_pages() drops the rest */
			folio_unlock(next);
			return;
		}
		ra->n = 0;
		do {
			ra->pages[ra->n++] = &next->page;
			next = readahead_folio(rac);
		} while (next && next->index == ra->pages[ra->n - 1]->index + 1 && ra->n < max);
		ra->handle = h;
		ra->inode = igrab(inode);
		if (!ra->inode) {
			rdfs_ra_read(inode, h, ra->pages, ra->n);
			kfree(ra);
			continue;
		}
		INIT_WORK(&ra->work, rdfs_ra_work);
		queue_work(rdfs_ra_wq, &ra->work);
	}
}

static int rdfs_write_begin(struct file *file, struct address_space *mapping, loff_t pos,
			    unsigned int len, struct page **pagep, void **fsdata)
{
	struct inode *inode = mapping->host;
	loff_t ppos = pos & PAGE_MASK;
	struct page *page;
	unsigned int from = pos & ~PAGE_MASK, dfrom, dto;
	int err;

retry:
	page = grab_cache_page_write_begin(mapping, pos >> PAGE_SHIFT);
	if (!page)
		return -ENOMEM;
	if (PageDirty(page)) {
		rdfs_dirty_range(page_folio(page), &dfrom, &dto);
		if (from > dto || from + len < dfrom) {
			/*
			 * Apart from the bytes already dirty: send those first,
			 * so that the range stays one run and the bytes between
			 * (maybe another client's) are never sent.
			 */
			unlock_page(page);
			put_page(page);
			err = filemap_write_and_wait_range(mapping, ppos, ppos + PAGE_SIZE - 1);
			if (err)
				return err;
			goto retry;
		}
	}
	*pagep = page;
	/*
	 * A page not in the cache is read even for a partial write: the cache
	 * only holds uptodate pages, so read_folio, mmap and readers never meet
	 * a page of dirty bytes and unknown others; writeback still sends only
	 * the bytes written.
	 */
	if (PageUptodate(page) || len == PAGE_SIZE)
		return 0;
	if (page_offset(page) >= i_size_read(inode)) {
		zero_user_segments(page, 0, from, from + len, PAGE_SIZE);
		return 0;
	}
	err = rdfs_data_read(inode, rdfs_file_handle(file), &page, 1);
	if (err) {
		unlock_page(page);
		put_page(page);
		return err;
	}
	SetPageUptodate(page);
	return 0;
}

static int rdfs_write_end(struct file *file, struct address_space *mapping, loff_t pos,
			  unsigned int len, unsigned int copied, struct page *page, void *fsdata)
{
	struct inode *inode = mapping->host;
	struct folio *folio = page_folio(page);
	unsigned int from = pos & ~PAGE_MASK, to = from + copied, dfrom, dto;

	if (!PageUptodate(page)) {
		if (copied < len) {
			copied = 0;	/* a short copy into a page we never read: retry */
			goto out;
		}
		SetPageUptodate(page);
	}
	if (!copied)
		goto out;
	/*
	 * write_begin made the new bytes touch the dirty ones; only a short
	 * copy can leave a gap, and then the gap goes as this page holds it.
	 */
	if (PageDirty(page)) {
		rdfs_dirty_range(folio, &dfrom, &dto);
		from = min(from, dfrom);
		to = max(to, dto);
	}
	rdfs_dirty_range_set(folio, from, to);
	if (pos + copied > i_size_read(inode))
		i_size_write(inode, pos + copied);
	inode->i_mtime = inode->i_ctime = current_time(inode);
	set_page_dirty(page);
out:
	unlock_page(page);
	put_page(page);
	return copied;
}

/*
 * Writeback batches are written on rdfs_wb_wq while writepages collects the
 * next, up to RDFS_WB_INFLIGHT batches of an inode at once, so the WRITEs of
 * several batches (and the helper's layout calls for them) overlap instead
 * of each waiting for the one before. A batch's pages stay under writeback
 * until it is written and its run kept for the commit (unstable.c), so
 * everything that waits on writeback (fsync, sync, truncate, eviction,
 * umount) waits for it; that is also what keeps the inode alive under a
 * batch: the worker touches the inode only before it ends the writeback of
 * its pages. Errors reach the mapping (mapping_set_error), where fsync and
 * close find them.
 */
#define RDFS_WB_INFLIGHT	4

struct workqueue_struct *rdfs_wb_wq;

/* One batch: a contiguous run of dirty bytes, [from in pages[0], to in pages[n - 1]). */
struct rdfs_wb {
	struct work_struct work;
	struct inode *inode;
	u64 handle;
	int n;
	unsigned int from, to;
	struct rdfs_wverf verf;		/* of the batch's unstable WRITEs */
	struct page *pages[RDFS_WB_BATCH];
};

/* What one writepages call is collecting. */
struct rdfs_wb_ctx {
	struct inode *inode;
	u64 handle;
	struct rdfs_wb *cur;		/* the batch being filled, if any */
};

/*
 * Send pages [i, j) of the batch: unstable, kept for the commit (stable if
 * they cannot be kept); on success they join the inode's dirty range, for
 * the commit to name.
 */
static int rdfs_wb_write(struct rdfs_wb *wb, int i, int j)
{
	struct rdfs_inode_info *ri = RDFS_I(wb->inode);
	unsigned int from = i ? 0 : wb->from, to = j == wb->n ? wb->to : PAGE_SIZE;
	u64 len = ((u64)(j - i - 1) << PAGE_SHIFT) + to - from;
	struct page **pages = wb->pages + i;
	int err;

	if (!wb->handle)
		return -EBADF;
	if (rdfs_unstable_prepare(wb->inode)) {
		err = rdfs_data_write(wb->inode, wb->handle, pages, j - i, from, len, NULL);
	} else {
		rdfs_wverf_clear(&wb->verf);
		err = rdfs_data_write(wb->inode, wb->handle, pages, j - i, from, len, &wb->verf);
		if (!err && rdfs_unstable_keep(wb->inode, &wb->verf, pages, j - i, from, len))
			err = rdfs_data_write(wb->inode, wb->handle, pages, j - i, from, len,
					      NULL);
	}
	if (!err) {
		spin_lock(&ri->lock);
		ri->dirty_first = min_t(u64, ri->dirty_first, pages[0]->index);
		ri->dirty_end = max_t(u64, ri->dirty_end, pages[j - i - 1]->index + 1);
		spin_unlock(&ri->lock);
	}
	return err;
}

/*
 * Write the batch. Where a quota or the space runs out inside it, the pages
 * before the limit are still written (found by halving: [0, ok) written,
 * [ok, bad) does not fit), as rdfs-fuse's write-behind does: the writer was
 * told they were taken. Returns the pages written in *@done.
 */
static int rdfs_wb_write_fitting(struct rdfs_wb *wb, int *done)
{
	int ok = 0, bad = wb->n, err, mid;

	err = rdfs_wb_write(wb, 0, wb->n);
	*done = err ? 0 : wb->n;
	if (err != -EDQUOT && err != -ENOSPC)
		return err;
	while (bad - ok > 1) {
		mid = ok + (bad - ok) / 2;
		switch (rdfs_wb_write(wb, ok, mid)) {
		case 0:
			ok = mid;
			break;
		case -EDQUOT:
		case -ENOSPC:
			bad = mid;
			break;
		default:
			bad = ok;	/* another error: what is not written stays so */
			break;
		}
	}
	*done = ok;
	return err;
}

static void rdfs_wb_work(struct work_struct *work)
{
	struct rdfs_wb *wb = container_of(work, struct rdfs_wb, work);
	struct inode *inode = wb->inode;
	struct rdfs_inode_info *ri = RDFS_I(inode);
	int err, i, done;

	err = rdfs_wb_write_fitting(wb, &done);
	if (err) {
		pr_warn_ratelimited(RDFS_MSG(1500017) "ino=%lu: writeback failed: %d\n",
				    inode->i_ino, err);
		mapping_set_error(inode->i_mapping, err);
	}
	atomic_dec(&ri->wb_inflight);
	wake_up_all(&ri->wb_wait);
	/* the inode may go once the last page's writeback ends: not touched after */
	for (i = 0; i < wb->n; i++) {
		if (i >= done)
			SetPageError(wb->pages[i]);
		end_page_writeback(wb->pages[i]);
	}
	kvfree(wb);
}

/* Queue the batch being filled, once fewer than RDFS_WB_INFLIGHT are in flight. */
static void rdfs_wb_submit(struct rdfs_wb_ctx *c)
{
	struct rdfs_inode_info *ri = RDFS_I(c->inode);
	struct rdfs_wb *wb = c->cur;

	if (!wb)
		return;
	c->cur = NULL;
	wait_event(ri->wb_wait,
		   atomic_add_unless(&ri->wb_inflight, 1, RDFS_WB_INFLIGHT));
	INIT_WORK(&wb->work, rdfs_wb_work);
	queue_work(rdfs_wb_wq, &wb->work);
}

static int rdfs_writepage_cb(struct page *page, struct writeback_control *wbc, void *data)
{
	struct rdfs_wb_ctx *c = data;
	struct folio *folio = page_folio(page);
	loff_t isize = i_size_read(c->inode);
	struct rdfs_wb *wb = c->cur;
	unsigned int from, to;

	if (page_offset(page) >= isize) {
		rdfs_dirty_range_drop(folio);
		unlock_page(page);
		return 0;
	}
	rdfs_dirty_range(folio, &from, &to);
	/* a run of bytes continues only from a page's end into the next's start */
	if (wb && (wb->n == RDFS_WB_BATCH || wb->to != PAGE_SIZE || from ||
		   page->index != wb->pages[wb->n - 1]->index + 1)) {
		rdfs_wb_submit(c);
		wb = NULL;
	}
	if (!wb) {
		wb = kvmalloc(sizeof(*wb), GFP_NOFS);
		if (!wb) {
			/* still dirty, range and all: the next writeback takes it */
			redirty_page_for_writepage(wbc, page);
			unlock_page(page);
			return -ENOMEM;
		}
		wb->inode = c->inode;
		wb->handle = c->handle;
		wb->n = 0;
		wb->from = from;
		c->cur = wb;
	}
	/* the dirty bit is gone (under the page lock): its range goes with it */
	rdfs_dirty_range_drop(folio);
	wb->to = to;
	set_page_writeback(page);
	unlock_page(page);
	wb->pages[wb->n++] = page;
	return 0;
}

static int rdfs_writepages(struct address_space *mapping, struct writeback_control *wbc)
{
	struct inode *inode = mapping->host;
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_wb_ctx c = { .inode = inode, .handle = rdfs_wb_handle(inode) };
	int err;

	err = write_cache_pages(mapping, wbc, rdfs_writepage_cb, &c);
	rdfs_wb_submit(&c);
	if (err)
		return err;
	/*
	 * Durable when asked (sync, fsync): every batch written and kept
	 * first. And no more kept than the bound.
	 */
	if (wbc->sync_mode == WB_SYNC_ALL)
		wait_event(ri->wb_wait, !atomic_read(&ri->wb_inflight));
	if (wbc->sync_mode == WB_SYNC_ALL ||
	    rdfs_unstable_bytes(inode) > RDFS_UNSTABLE_MAX)
		err = rdfs_unstable_commit(inode, c.handle);
	return err;
}

/* Truncated or dropped whole: its dirty bytes are gone. */
static void rdfs_invalidate_folio(struct folio *folio, size_t offset, size_t len)
{
	if (!offset && len == folio_size(folio))
		rdfs_dirty_range_drop(folio);
}

static bool rdfs_release_folio(struct folio *folio, gfp_t gfp)
{
	if (folio_test_dirty(folio))
		return false;
	rdfs_dirty_range_drop(folio);
	return true;
}

const struct address_space_operations rdfs_aops = {
	.read_folio	= rdfs_read_folio,
	.readahead	= rdfs_readahead,
	.write_begin	= rdfs_write_begin,
	.write_end	= rdfs_write_end,
	.writepages	= rdfs_writepages,
	.dirty_folio	= filemap_dirty_folio,
	.invalidate_folio = rdfs_invalidate_folio,
	.release_folio	= rdfs_release_folio,
	/* lets O_DIRECT opens through: read_iter/write_iter do them (direct.c) */
	.direct_IO	= noop_direct_IO,
};
