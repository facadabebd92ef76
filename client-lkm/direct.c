// SPDX-License-Identifier: GPL-2.0
/*
 * direct.c - O_DIRECT reads and writes: file data between the caller's buffer
 * and the I/O servers, past the page cache.
 *
 * A request at a page-aligned offset whose every buffer segment starts and
 * ends on a page boundary (what dd, IOR and databases do) moves its whole
 * pages straight between the caller's pages and the I/O servers: the pages
 * are taken with iov_iter_get_pages2(), as NFS's direct.c does, and the same
 * READs and WRITEs the page cache sends fill or send them (over RDMA, the NIC
 * then touches the caller's memory and the CPU copies nothing). Everything
 * else goes through bounce pages of this module, at most RDFS_DIO_BATCH pages
 * per step, which hold the file from a page boundary: any offset, length and
 * buffer alignment works (O_DIRECT here asks for no alignment, as NFS). A
 * write sends exactly its bytes (the I/O server merges partial blocks), so it
 * never rewrites bytes it did not get from the caller. A read fills whole
 * pages, which is why only whole pages of the caller's buffer go direct.
 * direct_bounced_bytes counts what went through bounce pages.
 *
 * Coherence with the page cache: dirty cached pages of the range are written
 * back first (a direct read sees them; a direct write lands after them), and
 * after a direct write the cached pages of its range are dropped. Written
 * blocks are committed at fsync/close like the page cache's (ri->dirty_*).
 *
 * Locks: the caller of rdfs_direct_write holds the inode lock (file.c's
 * write_iter); reads take none (as every O_DIRECT read, racing writers may be
 * seen in part).
 */
#include <linux/pagemap.h>
#include <linux/slab.h>
#include <linux/uio.h>

#include "rdfs.h"

/* Pages per step: a read-ahead window's worth, so that every server is busy. */
#define RDFS_DIO_BATCH	1024

struct rdfs_dio {
	struct page **pages;
	int npages;		/* allocated so far */
	struct page **user;	/* of the caller's buffer, taken for one step */
	int nuser;
	bool zero_copy;		/* the whole request is page-aligned */
};

static void rdfs_dio_free(struct rdfs_dio *d)
{
	while (d->npages)
		__free_page(d->pages[--d->npages]);
	kvfree(d->pages);
	kvfree(d->user);
}

static void rdfs_dio_init(struct rdfs_dio *d, loff_t pos, struct iov_iter *iter)
{
	d->zero_copy = user_backed_iter(iter) && !(pos & ~PAGE_MASK) &&
		       !(iov_iter_alignment(iter) & ~PAGE_MASK);
}

/*
 * Take the caller's pages for the next @max bytes of @iter (a multiple of
 * PAGE_SIZE, at most RDFS_DIO_BATCH pages), advancing it: the bytes taken,
 * 0 if none could be (the step then bounces, and reports the fault).
 */
static size_t rdfs_dio_take(struct rdfs_dio *d, struct iov_iter *iter, size_t max)
{
	size_t got = 0;

	if (!d->user) {
		d->user = kvcalloc(RDFS_DIO_BATCH, sizeof(*d->user), GFP_KERNEL);
		if (!d->user)
			return 0;
	}
	while (got < max && d->nuser < RDFS_DIO_BATCH) {
		size_t start;
		ssize_t n = iov_iter_get_pages2(iter, d->user + d->nuser, max - got,
						RDFS_DIO_BATCH - d->nuser, &start);

		if (n <= 0)
			break;
		/* rdfs_dio_init saw every segment start and end on a page boundary */
		WARN_ON_ONCE(start || (n & ~PAGE_MASK));
		d->nuser += DIV_ROUND_UP(n, PAGE_SIZE);
		got += n;
	}
	return got;
}

/* Give the caller's pages back; @filled: a read wrote into them. */
static void rdfs_dio_give_back(struct rdfs_dio *d, bool filled)
{
	while (d->nuser) {
		struct page *page = d->user[--d->nuser];

		if (filled)
			set_page_dirty_lock(page);
		put_page(page);
	}
}

/* Whole pages of @left bytes at most, for one step. */
static size_t rdfs_dio_whole(size_t left)
{
	return min_t(size_t, round_down(left, PAGE_SIZE), (size_t)RDFS_DIO_BATCH * PAGE_SIZE);
}

/* At least @n bounce pages in @d. */
static int rdfs_dio_pages(struct rdfs_dio *d, int n)
{
	if (!d->pages) {
		d->pages = kvcalloc(RDFS_DIO_BATCH, sizeof(*d->pages), GFP_KERNEL);
		if (!d->pages)
			return -ENOMEM;
	}
	while (d->npages < n) {
		d->pages[d->npages] = alloc_page(GFP_KERNEL);
		if (!d->pages[d->npages])
			return -ENOMEM;
		d->npages++;
	}
	return 0;
}

/* The step of at most RDFS_DIO_BATCH pages starting at @pos, @left bytes wanted. */
static size_t rdfs_dio_step(loff_t pos, size_t left, u64 *base, int *npages)
{
	size_t n;

	*base = round_down(pos, PAGE_SIZE);
	n = min_t(u64, left, (u64)RDFS_DIO_BATCH * PAGE_SIZE - (pos - *base));
	*npages = DIV_ROUND_UP(pos - *base + n, PAGE_SIZE);
	return n;
}

/* Copy @n bytes between the bounce pages (from byte @off) and @iter. */
static size_t rdfs_dio_copy(struct rdfs_dio *d, size_t off, size_t n, struct iov_iter *iter,
			    bool to_iter)
{
	size_t done = 0;

	while (done < n) {
		size_t o = (off + done) & ~PAGE_MASK, len = min(n - done, PAGE_SIZE - o);
		struct page *page = d->pages[(off + done) >> PAGE_SHIFT];
		size_t got = to_iter ? copy_page_to_iter(page, o, len, iter) :
				       copy_page_from_iter(page, o, len, iter);

		done += got;
		if (got < len)
			break;		/* a fault in the caller's buffer */
	}
	return done;
}

ssize_t rdfs_direct_read(struct kiocb *iocb, struct iov_iter *to, u64 handle)
{
	struct inode *inode = file_inode(iocb->ki_filp);
	struct rdfs_dio d = {};
	loff_t pos = iocb->ki_pos, isize;
	size_t left = iov_iter_count(to), done = 0;
	int err;

	if (!left)
		return 0;
	err = filemap_write_and_wait_range(inode->i_mapping, pos, pos + left - 1);
	if (err)
		return err;
	rdfs_dio_init(&d, pos, to);
	while (left) {
		size_t n, got;
		int npages;
		u64 base;

		isize = i_size_read(inode);
		if (pos >= isize)
			break;
		got = d.zero_copy ? rdfs_dio_take(&d, to, rdfs_dio_whole(left)) : 0;
		if (got) {
			/* pages past the end are zeroed, but only what the file has counts */
			n = min_t(u64, got, isize - pos);
			err = rdfs_data_read_at(inode, handle, d.user, DIV_ROUND_UP(n, PAGE_SIZE),
						pos);
			rdfs_dio_give_back(&d, !err);
			iov_iter_revert(to, err ? got : got - n);
			if (err)
				break;
			pos += n;
			done += n;
			left -= n;
			continue;
		}
		n = rdfs_dio_step(pos, min_t(u64, left, isize - pos), &base, &npages);
		err = rdfs_dio_pages(&d, npages);
		if (!err)
			err = rdfs_data_read_at(inode, handle, d.pages, npages, base);
		if (err)
			break;
		got = rdfs_dio_copy(&d, pos - base, n, to, true);
		atomic64_add(got, &rdfs_stats.direct_bounced_bytes);
		pos += got;
		done += got;
		left -= got;
		if (got < n) {
			err = -EFAULT;
			break;
		}
	}
	rdfs_dio_free(&d);
	iocb->ki_pos = pos;
	return done ? done : err;
}

ssize_t rdfs_direct_write(struct kiocb *iocb, struct iov_iter *from, u64 handle)
{
	struct inode *inode = file_inode(iocb->ki_filp);
	struct rdfs_inode_info *ri = RDFS_I(inode);
	struct rdfs_dio d = {};
	loff_t pos = iocb->ki_pos, start = pos;
	size_t left = iov_iter_count(from), done = 0;
	int err;

	if (!left)
		return 0;
	err = filemap_write_and_wait_range(inode->i_mapping, pos, pos + left - 1);
	if (err)
		return err;
	rdfs_dio_init(&d, pos, from);
	while (left) {
		size_t n, got;
		int npages;
		u64 base;

		got = d.zero_copy ? rdfs_dio_take(&d, from, rdfs_dio_whole(left)) : 0;
		if (got) {
			n = got;
			err = rdfs_data_write_at(inode, handle, d.user, d.nuser, pos, 0, got, NULL);
			rdfs_dio_give_back(&d, false);
			if (err) {
				iov_iter_revert(from, got);
				break;
			}
		} else {
			n = rdfs_dio_step(pos, left, &base, &npages);
			err = rdfs_dio_pages(&d, npages);
			if (err)
				break;
			got = rdfs_dio_copy(&d, pos - base, n, from, false);
			if (!got) {
				err = -EFAULT;
				break;
			}
			err = rdfs_data_write_at(inode, handle, d.pages, npages, base, pos - base,
						 got, NULL);
			if (err)
				break;
			atomic64_add(got, &rdfs_stats.direct_bounced_bytes);
		}
		/*
		 * The size first, then the range: a commit that takes the range
		 * (rdfs_commit, from any context) reads the size after it and so
		 * sends the size that covers the range's bytes.
		 */
		if (pos + got > i_size_read(inode))
			i_size_write(inode, pos + got);
		spin_lock(&ri->lock);
		ri->dirty_first = min_t(u64, ri->dirty_first, pos >> PAGE_SHIFT);
		ri->dirty_end = max_t(u64, ri->dirty_end, DIV_ROUND_UP(pos + got, PAGE_SIZE));
		spin_unlock(&ri->lock);
		pos += got;
		done += got;
		left -= got;
		if (got < n) {
			err = -EFAULT;
			break;
		}
	}
	rdfs_dio_free(&d);
	/* what the cache held of the range is older than what was just written */
	if (done)
		invalidate_inode_pages2_range(inode->i_mapping, start >> PAGE_SHIFT,
					      (start + done - 1) >> PAGE_SHIFT);
	iocb->ki_pos = pos;
	return done ? done : err;
}
