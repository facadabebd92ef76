// SPDX-License-Identifier: GPL-2.0
/*
 * data_tcp.c - file data to and from the I/O servers over kernel TCP sockets.
 *
 * The helper asks the metaserver for the layout (extents + capabilities) and
 * hands over an authenticated socket per I/O server (RDFS_DEV_CONNECT); from
 * then on READ/WRITE frames go straight between the page cache and the socket:
 * a READ's bulk data is received into the folios themselves (sock_recvmsg on a
 * bio_vec iterator over the pages), a WRITE's is sent from them. One request
 * at a time per connection (stage 1); a socket error drops the connection and
 * fails the request with EIO, and the next request reconnects.
 */
#include <linux/bvec.h>
#include <linux/highmem.h>
#include <linux/net.h>
#include <linux/pagemap.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <net/sock.h>

#include "rdfs.h"

/* An I/O server silent this long is dead: its readers get EIO. */
#define RDFS_IO_TIMEOUT		(30 * HZ)
#define RDFS_IO_MAX_BODY	4096

void rdfs_conns_close(struct rdfs_sb_info *sbi)
{
	int i;

	for (i = 0; i < RDFS_MAX_SERVERS; i++) {
		struct rdfs_conn *cn = &sbi->conns[i];

		mutex_lock(&cn->lock);
		if (cn->sock) {
			kernel_sock_shutdown(cn->sock, SHUT_RDWR);
			sockfd_put(cn->sock);
			cn->sock = NULL;
		}
		mutex_unlock(&cn->lock);
	}
}

/* Under cn->lock: a connected socket to @server_id, from the helper if need be. */
static int rdfs_conn_get(struct rdfs_sb_info *sbi, struct rdfs_conn *cn, u32 server_id)
{
	struct rdfs_dev_connect req = { .server_id = server_id };
	struct rdfs_dev_call c;
	int err;

	if (cn->sock)
		return 0;
	rdfs_call_init(&c, RDFS_DEV_CONNECT, 0, 0);
	rdfs_call_arg(&c, &req, sizeof(req));
	err = rdfs_call(sbi->chan, &c);
	if (err)
		return err;
	cn->sock = c.sock;
	cn->sock->sk->sk_rcvtimeo = RDFS_IO_TIMEOUT;
	cn->sock->sk->sk_sndtimeo = RDFS_IO_TIMEOUT;
	cn->sock->sk->sk_allocation = GFP_NOFS;
	return 0;
}

static void rdfs_conn_drop(struct rdfs_conn *cn)
{
	if (cn->sock) {
		sockfd_put(cn->sock);
		cn->sock = NULL;
	}
}

/* Pages @pages from byte @off for @len bytes as a bio_vec array (caller frees). */
static struct bio_vec *rdfs_pages_bvec(struct page **pages, size_t off, size_t len, int *nr)
{
	size_t first = off >> PAGE_SHIFT, last = (off + len - 1) >> PAGE_SHIFT, i;
	struct bio_vec *bv;

	bv = kmalloc_array(last - first + 1, sizeof(*bv), GFP_NOFS);
	if (!bv)
		return NULL;
	for (i = first; i <= last; i++) {
		size_t s = i == first ? off & ~PAGE_MASK : 0;
		size_t e = i == last ? ((off + len - 1) & ~PAGE_MASK) + 1 : PAGE_SIZE;

		bv[i - first].bv_page = pages[i];
		bv[i - first].bv_offset = s;
		bv[i - first].bv_len = e - s;
	}
	*nr = last - first + 1;
	return bv;
}

static int rdfs_sock_recv_kvec(struct socket *sock, void *buf, size_t len)
{
	struct kvec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_flags = MSG_WAITALL };
	int ret;

	if (!len)
		return 0;
	ret = kernel_recvmsg(sock, &msg, &iov, 1, len, MSG_WAITALL);
	return ret == len ? 0 : ret < 0 ? ret : -EIO;
}

/* Receive @len bytes straight into @pages at byte @off. */
static int rdfs_sock_recv_pages(struct socket *sock, struct page **pages, size_t off, size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_WAITALL };
	struct bio_vec *bv;
	int nr, ret;

	if (!len)
		return 0;
	bv = rdfs_pages_bvec(pages, off, len, &nr);
	if (!bv)
		return -ENOMEM;
	iov_iter_bvec(&msg.msg_iter, ITER_DEST, bv, nr, len);
	ret = sock_recvmsg(sock, &msg, MSG_WAITALL);
	kfree(bv);
	return ret == len ? 0 : ret < 0 ? ret : -EIO;
}

/* Send @hdr (header + body) then @len bytes of @pages from byte @off. */
static int rdfs_sock_send(struct socket *sock, void *hdr, size_t hlen, struct page **pages,
			  size_t off, size_t len)
{
	struct kvec iov = { .iov_base = hdr, .iov_len = hlen };
	struct msghdr msg = { .msg_flags = len ? MSG_MORE : 0 };
	struct bio_vec *bv;
	int nr, ret;

	ret = kernel_sendmsg(sock, &msg, &iov, 1, hlen);
	if (ret != hlen)
		return ret < 0 ? ret : -EIO;
	if (!len)
		return 0;
	bv = rdfs_pages_bvec(pages, off, len, &nr);
	if (!bv)
		return -ENOMEM;
	memset(&msg, 0, sizeof(msg));
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, nr, len);
	ret = sock_sendmsg(sock, &msg);
	kfree(bv);
	return ret == len ? 0 : ret < 0 ? ret : -EIO;
}

/*
 * One READ or WRITE of blocks [first_block, first_block + len / 4096) on
 * @server_id, data in @pages from byte @off. Returns 0 or -errno; socket and
 * protocol errors drop the connection.
 */
static int rdfs_io(struct rdfs_sb_info *sbi, u16 op, u32 server_id, const u8 *cap, u32 cap_len,
		   u64 first_block, struct page **pages, size_t off, u32 len, u32 data_len)
{
	struct rdfs_ioreq r = {
		.cap = cap, .cap_len = cap_len, .first_block = first_block,
		.block_count = DIV_ROUND_UP(len, RDFS_BLOCK_SIZE), .length = len,
		.stable = op == RDFS_OP_WRITE,
	};
	struct rdfs_conn *cn;
	struct rdfs_frame f;
	struct rdfs_ioreply rep;
	size_t got = 0;
	u8 *buf;
	int err;

	if (server_id >= RDFS_MAX_SERVERS)
		return -EIO;
	cn = &sbi->conns[server_id];
	if (RDFS_FRAME_HDR_LEN + rdfs_ioreq_size(&r) > RDFS_IO_MAX_BODY)
		return -EIO;
	buf = kmalloc(RDFS_IO_MAX_BODY, GFP_NOFS);
	if (!buf)
		return -ENOMEM;

	mutex_lock(&cn->lock);
	err = rdfs_conn_get(sbi, cn, server_id);
	if (err)
		goto out;
	f = (struct rdfs_frame){
		.magic = RDFS_FRAME_MAGIC, .version = RDFS_FRAME_VERSION, .opcode = op,
		.tag = ++cn->tag, .body_len = rdfs_ioreq_encode(&r, buf + RDFS_FRAME_HDR_LEN),
		.data_len = op == RDFS_OP_WRITE ? len : 0,
	};
	rdfs_frame_encode(&f, buf);
	err = rdfs_sock_send(cn->sock, buf, RDFS_FRAME_HDR_LEN + f.body_len, pages, off,
			     op == RDFS_OP_WRITE ? len : 0);
	if (err)
		goto broken;

	/* partial frames (RDFS_FRAME_MORE) carry data only, the last one the status */
	for (;;) {
		err = rdfs_sock_recv_kvec(cn->sock, buf, RDFS_FRAME_HDR_LEN);
		if (err)
			goto broken;
		err = rdfs_frame_decode(buf, &f);
		if (err || !(f.flags & RDFS_FRAME_REPLY) || f.tag != cn->tag ||
		    f.body_len > RDFS_IO_MAX_BODY || got + f.data_len > data_len) {
			err = -EIO;
			goto broken;
		}
		if (!(f.flags & RDFS_FRAME_MORE)) {
			err = rdfs_sock_recv_kvec(cn->sock, buf, f.body_len);
			if (err)
				goto broken;
		}
		err = rdfs_sock_recv_pages(cn->sock, pages, off + got, f.data_len);
		if (err)
			goto broken;
		got += f.data_len;
		if (!(f.flags & RDFS_FRAME_MORE))
			break;
	}
	if (f.status) {
		err = f.status;
		pr_warn_ratelimited("rdfs: %s on I/O server %u: %d\n",
				    op == RDFS_OP_READ ? "READ" : "WRITE", server_id, err);
		goto out;
	}
	if (rdfs_ioreply_decode(buf, f.body_len, &rep) ||
	    (op == RDFS_OP_READ && got != data_len)) {
		err = -EIO;
		goto broken;
	}
	err = 0;
	goto out;
broken:
	pr_warn_ratelimited("rdfs: connection to I/O server %u failed: %d\n", server_id, err);
	rdfs_conn_drop(cn);
	err = -EIO;
out:
	mutex_unlock(&cn->lock);
	kfree(buf);
	return err;
}

/* The layout of [pos, pos + len) of @inode from the helper, in a new buffer. */
static struct rdfs_dev_layout_reply *rdfs_layout(struct inode *inode, u64 handle, u64 pos,
						 u64 len, bool allocate, size_t *rlen)
{
	struct rdfs_dev_layout_req lr = { .offset = pos, .length = len, .allocate = allocate };
	struct rdfs_dev_layout_reply *rep;
	struct rdfs_dev_call c;
	u32 i;
	int err;

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
		pr_warn_ratelimited("rdfs: layout reply of %zu bytes, %u segments\n",
				    c.out_len, rep->nsegs);
		err = -EIO;
	}
	for (i = 0; !err && i < rep->nsegs; i++) {
		struct rdfs_dev_seg *s = &rep->segs[i];

		if ((s->offset | s->length) & (RDFS_BLOCK_SIZE - 1) ||
		    (u64)s->cap_off + s->cap_len > c.out_len) {
			pr_warn_ratelimited("rdfs: bad layout segment %llu+%llu cap %u+%u\n",
					    s->offset, s->length, s->cap_off, s->cap_len);
			err = -EIO;
		}
	}
	if (err) {
		pr_warn_ratelimited("rdfs: layout of inode %lu [%llu, +%llu): %d\n",
				    inode->i_ino, pos, len, err);
		kvfree(rep);
		return ERR_PTR(err);
	}
	*rlen = c.out_len;
	return rep;
}

static void rdfs_zero_pages(struct page **pages, int from, int to)
{
	for (; from < to; from++)
		zero_user(pages[from], 0, PAGE_SIZE);
}

/*
 * Fill @npages consecutive page-cache pages (locked, not uptodate) from the
 * I/O servers: holes and what lies past the end of the file read as zeros.
 */
int rdfs_data_read(struct inode *inode, u64 handle, struct page **pages, int npages)
{
	struct rdfs_sb_info *sbi = RDFS_SB(inode->i_sb);
	u64 pos = page_offset(pages[0]), end = pos + ((u64)npages << PAGE_SHIFT);
	u64 isize = i_size_read(inode), done = pos;
	struct rdfs_dev_layout_reply *rep;
	size_t rlen;
	u32 i;
	int err = 0;

	if (isize < end)
		end = round_up(isize, PAGE_SIZE);
	if (end <= pos) {
		rdfs_zero_pages(pages, 0, npages);
		return 0;
	}
	rep = rdfs_layout(inode, handle, pos, end - pos, false, &rlen);
	if (IS_ERR(rep))
		return PTR_ERR(rep);
	for (i = 0; i < rep->nsegs && !err; i++) {
		struct rdfs_dev_seg *s = &rep->segs[i];
		u64 a = max(s->offset, pos), b = min(s->offset + s->length, end);

		if (a >= b)
			continue;
		if (a > done)
			rdfs_zero_pages(pages, (done - pos) >> PAGE_SHIFT, (a - pos) >> PAGE_SHIFT);
		if (s->flags & RDFS_DEV_SEG_HOLE)
			rdfs_zero_pages(pages, (a - pos) >> PAGE_SHIFT, (b - pos) >> PAGE_SHIFT);
		else
			err = rdfs_io(sbi, RDFS_OP_READ, s->server_id, (u8 *)rep + s->cap_off,
				      s->cap_len, s->block + ((a - s->offset) / RDFS_BLOCK_SIZE),
				      pages, a - pos, b - a, b - a);
		done = b;
	}
	kvfree(rep);
	if (err) {
		pr_warn_ratelimited("rdfs: read of inode %lu [%llu, %llu) failed: %d\n",
				    inode->i_ino, pos, end, err);
		return err;
	}
	rdfs_zero_pages(pages, (done - pos) >> PAGE_SHIFT, npages);
	/* the tail of the last block past the end of the file */
	if (isize > pos && isize < pos + ((u64)npages << PAGE_SHIFT) && (isize & ~PAGE_MASK))
		zero_user_segment(pages[(isize - pos) >> PAGE_SHIFT], isize & ~PAGE_MASK,
				  PAGE_SIZE);
	return 0;
}

/*
 * Write @npages consecutive pages (under writeback) to the I/O servers,
 * allocating blocks as needed; @size is the file size (the last page is sent
 * whole: its blocks are the file's, past-EOF bytes are never read back).
 */
int rdfs_data_write(struct inode *inode, u64 handle, struct page **pages, int npages,
		    loff_t size)
{
	struct rdfs_sb_info *sbi = RDFS_SB(inode->i_sb);
	u64 pos = page_offset(pages[0]), end = pos + ((u64)npages << PAGE_SHIFT);
	struct rdfs_dev_layout_reply *rep;
	size_t rlen;
	u64 covered = pos;
	u32 i;
	int err = 0;

	rep = rdfs_layout(inode, handle, pos, end - pos, true, &rlen);
	if (IS_ERR(rep))
		return PTR_ERR(rep);
	for (i = 0; i < rep->nsegs && !err; i++) {
		struct rdfs_dev_seg *s = &rep->segs[i];
		u64 a = max(s->offset, pos), b = min(s->offset + s->length, end);

		if (a >= b)
			continue;
		if (a != covered || (s->flags & RDFS_DEV_SEG_HOLE)) {
			err = -EIO;
			break;
		}
		err = rdfs_io(sbi, RDFS_OP_WRITE, s->server_id, (u8 *)rep + s->cap_off,
			      s->cap_len, s->block + ((a - s->offset) / RDFS_BLOCK_SIZE),
			      pages, a - pos, b - a, 0);
		covered = b;
	}
	kvfree(rep);
	if (!err && covered < end)
		err = -EIO;
	if (err)
		pr_warn_ratelimited("rdfs: write of inode %lu [%llu, %llu) failed at %llu: %d\n",
				    inode->i_ino, pos, end, covered, err);
	return err;
}
