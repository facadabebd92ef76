// SPDX-License-Identifier: GPL-2.0
/*
 * data_tcp.c - one kernel TCP connection per I/O server, many READs and
 * WRITEs in flight on it.
 *
 * Senders (read-ahead, writeback workers, O_DIRECT callers) write whole
 * frames under the connection's send_lock, each with a new tag; a receiver
 * thread per connection reads the replies in whatever order the I/O server
 * sends them, finds each one's request by its tag, places a READ's bulk data
 * straight into the request's pages and completes it. Receiving never waits
 * for a sender, so a sender blocked on a full socket can never hold back the
 * replies the I/O server is blocked sending (the deadlock of a connection
 * where each caller reads its own reply).
 *
 * A request's life (enum rdfs_tcp_req_state, transitions asserted):
 *   NEW -> SENT    the sender, under tc->lock, as it takes a tag (before its
 *                  frame is on the wire: the reply may come at once)
 *   SENT -> DONE   the receiver, under tc->lock, when its last frame is in or
 *                  the connection broke; complete(&req->done) after
 * While SENT only the receiver touches its pages and fields; once DONE only
 * its owner, who waits in rdfs_tcp_finish() and frees it there.
 *
 * A socket error, a frame that breaks the protocol or a reply missing for
 * RDFS_TCP_TIMEOUT breaks the connection: every request on it is done with
 * -EIO, it is marked dead, and the next request makes a new one (through the
 * helper's RDFS_DEV_CONNECT). References: sbi->conns[] holds one on the
 * current connection (under its mutex), each request one on its own; the
 * receiver holds none (the last put stops it and waits for it, so it must
 * never be the one to drop the last).
 */
#include <linux/bvec.h>
#include <linux/kthread.h>
#include <linux/net.h>
#include <linux/sched/mm.h>
#include <linux/signal.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <net/sock.h>

#include "rdfs.h"

/* An I/O server silent this long about a request is dead: its requests get EIO. */
#define RDFS_TCP_TIMEOUT	(30 * HZ)
#define RDFS_TCP_MAX_BODY	4096

enum rdfs_tcp_req_state {
	RDFS_TCP_REQ_NEW,
	RDFS_TCP_REQ_SENT,
	RDFS_TCP_REQ_DONE,
};

struct rdfs_tcp_conn {
	struct kref ref;
	u32 server_id;
	struct socket *sock;
	struct task_struct *rx;		/* the receiver */
	u8 *rxbuf;			/* the receiver's frame header and body */
	struct mutex send_lock;		/* one frame at a time onto the socket */

	spinlock_t lock;		/* everything below */
	bool dead;
	bool closing;			/* the last reference is gone: errors are expected */
	u32 tag;
	struct list_head pending;	/* SENT requests, oldest first */
};

struct rdfs_tcp_req {
	struct rdfs_tcp_conn *tc;
	struct list_head link;		/* on tc->pending while SENT */
	enum rdfs_tcp_req_state state;
	u32 tag;
	u16 op;
	struct page **pages;
	size_t off;
	u32 data_len;			/* READ: bytes expected */
	u32 got;			/* READ: bytes placed so far */
	int status;
	u64 verifier;			/* the IoReply's */
	struct completion done;
	u8 frame[RDFS_TCP_MAX_BODY];	/* the request's header and IoReq */
};

static void rdfs_tcp_req_set(struct rdfs_tcp_req *req, enum rdfs_tcp_req_state to)
{
	WARN_ON_ONCE(to != req->state + 1);
	req->state = to;
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
	if (ret > 0)
		atomic64_add(ret, &rdfs_stats.copy_read_bytes);
	return ret == len ? 0 : ret < 0 ? ret : -EIO;
}

/*
 * Send @hdr (header + body) then the @len bytes of @bv (@nr entries). With
 * every signal blocked: a sender interrupted halfway would leave a partial
 * frame, which breaks the connection for every request on it (a fatal
 * signal still does, as it must).
 */
static int rdfs_sock_send(struct socket *sock, void *hdr, size_t hlen, struct bio_vec *bv, int nr,
			  size_t len)
{
	struct kvec iov = { .iov_base = hdr, .iov_len = hlen };
	struct msghdr msg = { .msg_flags = len ? MSG_MORE : 0 };
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	ret = kernel_sendmsg(sock, &msg, &iov, 1, hlen);
	if (ret != hlen) {
		ret = ret < 0 ? ret : -EIO;
		goto out;
	}
	ret = 0;
	if (!len)
		goto out;
	memset(&msg, 0, sizeof(msg));
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, nr, len);
	ret = sock_sendmsg(sock, &msg);
	if (ret > 0)
		atomic64_add(ret, &rdfs_stats.copy_write_bytes);
	ret = ret == len ? 0 : ret < 0 ? ret : -EIO;
out:
	sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/* Wake the receiver out of its socket: it fails what is in flight. */
static void rdfs_tcp_break(struct rdfs_tcp_conn *tc)
{
	kernel_sock_shutdown(tc->sock, SHUT_RDWR);
}

/* Under tc->lock: @req answered (or failed) with @status. */
static void rdfs_tcp_req_done(struct rdfs_tcp_req *req, int status)
{
	list_del_init(&req->link);
	req->status = status;
	rdfs_tcp_req_set(req, RDFS_TCP_REQ_DONE);
}

/* The receiver, once its socket failed: no request on it will be answered. */
static void rdfs_tcp_fail_all(struct rdfs_tcp_conn *tc, int err)
{
	struct rdfs_tcp_req *req, *next;
	LIST_HEAD(failed);
	bool closing;

	spin_lock(&tc->lock);
	tc->dead = true;
	closing = tc->closing;
	list_splice_init(&tc->pending, &failed);
	list_for_each_entry(req, &failed, link)
		req->status = -EIO;
	spin_unlock(&tc->lock);
	if (!closing)
		pr_warn_ratelimited(RDFS_MSG(1500009) "connection to I/O server %u failed: %d\n",
				    tc->server_id, err);
	list_for_each_entry_safe(req, next, &failed, link) {
		list_del_init(&req->link);
		rdfs_tcp_req_set(req, RDFS_TCP_REQ_DONE);
		complete(&req->done);
	}
}

static struct rdfs_tcp_req *rdfs_tcp_find(struct rdfs_tcp_conn *tc, u32 tag)
{
	struct rdfs_tcp_req *req, *found = NULL;

	spin_lock(&tc->lock);
	list_for_each_entry(req, &tc->pending, link) {
		if (req->tag == tag) {
			found = req;
			break;
		}
	}
	spin_unlock(&tc->lock);
	return found;
}

/*
 * Receive one frame and place it. Partial frames (RDFS_FRAME_MORE) carry data
 * only, the last one the status and IoReply. Any error breaks the connection.
 */
static int rdfs_tcp_rx_frame(struct rdfs_tcp_conn *tc)
{
	struct rdfs_tcp_req *req;
	struct rdfs_ioreply rep;
	struct rdfs_frame_hdr f;
	int err, status;

	err = rdfs_sock_recv_kvec(tc->sock, tc->rxbuf, RDFS_FRAME_HDR_LEN);
	if (err)
		return err;
	err = rdfs_frame_hdr_decode(tc->rxbuf, &f);
	if (err || !(f.flags & RDFS_FRAME_REPLY) || f.body_len > RDFS_TCP_MAX_BODY)
		return -EPROTO;
	req = rdfs_tcp_find(tc, f.tag);
	if (!req || f.data_len > req->data_len - req->got)
		return -EPROTO;
	if (!(f.flags & RDFS_FRAME_MORE)) {
		err = rdfs_sock_recv_kvec(tc->sock, tc->rxbuf, f.body_len);
		if (err)
			return err;
	}
	err = rdfs_sock_recv_pages(tc->sock, req->pages, req->off + req->got, f.data_len);
	if (err)
		return err;
	req->got += f.data_len;
	if (f.flags & RDFS_FRAME_MORE)
		return 0;
	status = f.status;
	if (status) {
		pr_warn_ratelimited(RDFS_MSG(1500008) "%s on I/O server %u: %d\n",
				    req->op == RDFS_OP_READ ? "READ" : "WRITE", tc->server_id,
				    status);
	} else {
		if (rdfs_ioreply_decode(tc->rxbuf, f.body_len, &rep) ||
		    (req->op == RDFS_OP_READ && req->got != req->data_len))
			return -EPROTO;
		req->verifier = rep.verifier;
	}
	spin_lock(&tc->lock);
	rdfs_tcp_req_done(req, status);
	spin_unlock(&tc->lock);
	complete(&req->done);
	return 0;
}

static int rdfs_tcp_rx(void *arg)
{
	struct rdfs_tcp_conn *tc = arg;
	unsigned int nofs = memalloc_nofs_save();
	int err;

	do {
		err = rdfs_tcp_rx_frame(tc);
	} while (!err);
	rdfs_tcp_fail_all(tc, err);
	memalloc_nofs_restore(nofs);
	/* the last reference stops us */
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

static void rdfs_tcp_release(struct kref *ref)
{
	struct rdfs_tcp_conn *tc = container_of(ref, struct rdfs_tcp_conn, ref);

	spin_lock(&tc->lock);
	WARN_ON_ONCE(!list_empty(&tc->pending));
	tc->closing = true;
	spin_unlock(&tc->lock);
	rdfs_tcp_break(tc);
	kthread_stop(tc->rx);
	sockfd_put(tc->sock);
	kfree(tc->rxbuf);
	kfree(tc);
	atomic64_dec(&rdfs_stats.tcp_conns);
}

static void rdfs_tcp_put(struct rdfs_tcp_conn *tc)
{
	kref_put(&tc->ref, rdfs_tcp_release);
}

/* A connection over @sock (ours from now on, whatever happens). */
static struct rdfs_tcp_conn *rdfs_tcp_conn_new(struct socket *sock, u32 server_id)
{
	struct rdfs_tcp_conn *tc = kzalloc(sizeof(*tc), GFP_NOFS);
	int err = -ENOMEM;

	if (!tc)
		goto fail;
	tc->rxbuf = kmalloc(RDFS_TCP_MAX_BODY, GFP_NOFS);
	if (!tc->rxbuf)
		goto fail;
	kref_init(&tc->ref);
	tc->server_id = server_id;
	tc->sock = sock;
	mutex_init(&tc->send_lock);
	spin_lock_init(&tc->lock);
	INIT_LIST_HEAD(&tc->pending);
	/* the receiver waits as long as it takes; requests time out in rdfs_tcp_finish */
	sock->sk->sk_rcvtimeo = MAX_SCHEDULE_TIMEOUT;
	sock->sk->sk_sndtimeo = RDFS_TCP_TIMEOUT;
	sock->sk->sk_allocation = GFP_NOFS;
	tc->rx = kthread_run(rdfs_tcp_rx, tc, "rdfs-tcp/%u", server_id);
	if (IS_ERR(tc->rx)) {
		err = PTR_ERR(tc->rx);
		goto fail;
	}
	atomic64_inc(&rdfs_stats.tcp_conns);
	return tc;
fail:
	if (tc)
		kfree(tc->rxbuf);
	kfree(tc);
	sockfd_put(sock);
	return ERR_PTR(err);
}

/* The live connection to @server_id, referenced; made (through the helper) if need be. */
static struct rdfs_tcp_conn *rdfs_tcp_conn_get(struct rdfs_sb_info *sbi, u32 server_id)
{
	struct rdfs_conn *cn = &sbi->conns[server_id];
	struct rdfs_dev_connect arg = { .server_id = server_id };
	struct rdfs_tcp_conn *tc;
	struct rdfs_dev_call c;
	int err;

	mutex_lock(&cn->lock);
	tc = cn->tc;
	if (tc && READ_ONCE(tc->dead)) {
		cn->tc = NULL;
		rdfs_tcp_put(tc);
		tc = NULL;
	}
	if (!tc) {
		rdfs_call_init(&c, RDFS_DEV_CONNECT, 0, 0);
		rdfs_call_arg(&c, &arg, sizeof(arg));
		err = rdfs_call(sbi->chan, &c);
		tc = err ? ERR_PTR(err) : rdfs_tcp_conn_new(c.sock, server_id);
		if (!IS_ERR(tc))
			cn->tc = tc;
	}
	if (!IS_ERR(tc))
		kref_get(&tc->ref);
	mutex_unlock(&cn->lock);
	return tc;
}

void rdfs_conns_close(struct rdfs_sb_info *sbi)
{
	int i;

	for (i = 0; i < RDFS_MAX_SERVERS; i++) {
		struct rdfs_conn *cn = &sbi->conns[i];

		mutex_lock(&cn->lock);
		if (cn->tc) {
			rdfs_tcp_put(cn->tc);
			cn->tc = NULL;
		}
		mutex_unlock(&cn->lock);
	}
}

int rdfs_tcp_start(struct rdfs_sb_info *sbi, u16 op, u32 server_id, const u8 *cap, u32 cap_len,
		   u64 first_block, struct page **pages, size_t off, u32 len, u32 data_len,
		   bool stable, struct rdfs_tcp_req **out)
{
	u32 head = off % RDFS_BLOCK_SIZE;
	struct rdfs_ioreq r = {
		.cap = cap, .cap_len = cap_len, .first_block = first_block,
		.block_count = DIV_ROUND_UP(head + len, RDFS_BLOCK_SIZE), .head = head,
		.length = len, .stable = op == RDFS_OP_WRITE && stable,
	};
	u32 wlen = op == RDFS_OP_WRITE ? len : 0;
	struct rdfs_tcp_conn *tc;
	struct rdfs_tcp_req *req;
	struct rdfs_frame_hdr f;
	struct bio_vec *bv = NULL;
	int nr = 0, err;
	bool dead;

	if (server_id >= RDFS_MAX_SERVERS ||
	    RDFS_FRAME_HDR_LEN + rdfs_ioreq_size(&r) > RDFS_TCP_MAX_BODY)
		return -EIO;
	req = kmalloc(sizeof(*req), GFP_NOFS);
	/* what can fail here fails before the frame takes a tag */
	if (req && wlen)
		bv = rdfs_pages_bvec(pages, off, wlen, &nr);
	if (!req || (wlen && !bv)) {
		kfree(req);
		return -ENOMEM;
	}
	tc = rdfs_tcp_conn_get(sbi, server_id);
	if (IS_ERR(tc)) {
		kfree(bv);
		kfree(req);
		return PTR_ERR(tc);
	}
	*req = (struct rdfs_tcp_req){ .tc = tc, .state = RDFS_TCP_REQ_NEW, .op = op,
				      .pages = pages, .off = off,
				      .data_len = op == RDFS_OP_READ ? data_len : 0 };
	INIT_LIST_HEAD(&req->link);
	init_completion(&req->done);
	f = (struct rdfs_frame_hdr){
		.magic = RDFS_FRAME_MAGIC, .version = RDFS_FRAME_VERSION, .opcode = op,
		.body_len = rdfs_ioreq_encode(&r, req->frame + RDFS_FRAME_HDR_LEN),
		.data_len = wlen,
	};

	mutex_lock(&tc->send_lock);
	spin_lock(&tc->lock);
	dead = tc->dead;
	if (!dead) {
		if (!list_empty(&tc->pending))
			atomic64_inc(&rdfs_stats.tcp_pipelined);
		f.tag = req->tag = ++tc->tag;
		list_add_tail(&req->link, &tc->pending);
		rdfs_tcp_req_set(req, RDFS_TCP_REQ_SENT);
		atomic64_inc(&rdfs_stats.tcp_reqs);
	}
	spin_unlock(&tc->lock);
	if (dead) {
		mutex_unlock(&tc->send_lock);
		rdfs_tcp_put(tc);
		kfree(bv);
		kfree(req);
		return -EIO;
	}
	rdfs_frame_hdr_encode(&f, req->frame);
	err = rdfs_sock_send(tc->sock, req->frame, RDFS_FRAME_HDR_LEN + f.body_len, bv, nr, wlen);
	mutex_unlock(&tc->send_lock);
	kfree(bv);
	if (err) {
		/* the receiver fails it, with everything else on the connection */
		pr_warn_ratelimited(RDFS_MSG(1500007) "connection to I/O server %u failed: %d\n",
				    server_id, err);
		rdfs_tcp_break(tc);
	}
	*out = req;
	return 0;
}

int rdfs_tcp_finish(struct rdfs_tcp_req *req, u64 *verifier)
{
	struct rdfs_tcp_conn *tc = req->tc;
	int err;

	if (!wait_for_completion_timeout(&req->done, RDFS_TCP_TIMEOUT)) {
		pr_warn_ratelimited(RDFS_MSG(1500020) "I/O server %u: no reply in %d s\n",
				    tc->server_id, RDFS_TCP_TIMEOUT / HZ);
		rdfs_tcp_break(tc);
		/* the receiver completes it: only then are its pages ours again */
		wait_for_completion(&req->done);
	}
	WARN_ON_ONCE(req->state != RDFS_TCP_REQ_DONE);
	err = req->status;
	if (err > 0 || err < -MAX_ERRNO)
		err = -EIO;
	*verifier = req->verifier;
	kfree(req);
	atomic64_dec(&rdfs_stats.tcp_reqs);
	rdfs_tcp_put(tc);
	return err;
}
