/* SPDX-License-Identifier: MIT */
/*
 * client_internal.h - the structures shared by the files of lib/client.
 *
 * Lock order (outer first): rdfs_file.ra_lock -> rdfs_inode.wb_lock ->
 * rdfs_inode.commit_lock -> rdfs_file.lock ->
 * rdfs_inode.lock -> inode_table.lock
 * -> rdfs_client.lock -> rdfs_peer.connect_lock -> rdfs_peer.lock. No lock is held
 * across an RPC except rdfs_peer.connect_lock (held while connecting),
 * rdfs_file.lock (held while re-opening a handle after a metaserver reconnect),
 * rdfs_inode.commit_lock (held across a COMMIT), rdfs_inode.wb_lock (held while
 * waiting for write-behind WRITEs) and rdfs_file.ra_lock (held while waiting
 * for read-ahead READs).
 */
#ifndef RDFS_CLIENT_INTERNAL_H
#define RDFS_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "frame.h"
#include "rdfs.pb-c.h"
#include "range_set.h"
#include "rdfs_client.h"
#include "rpc.h"

/* Largest data payload of one READ/WRITE we send to an I/O server. */
#define RDFS_IO_MAX		(4u << 20)
/* A cached layout whose capabilities expire within this is refetched. */
#define RDFS_CAP_MARGIN_NS	(10LL * 1000000000LL)
/* Read layouts ahead of the request, so sequential reads rarely ask the metaserver. */
#define RDFS_LAYOUT_READAHEAD	(64ull << 20)
/*
 * Speculative preallocation: a write that allocates at or past the end of the
 * file asks for at least this much, doubling while the stream goes on, up to
 * the max; the metaserver frees what is left past EOF at the last release.
 */
#define RDFS_PREALLOC_MIN	(4ull << 20)
#define RDFS_PREALLOC_MAX	(64ull << 20)
/* How far a write may start from where the last one ended and still continue the stream. */
#define RDFS_STREAM_SLACK	(4ull << 20)
/* Longest a call waits for a lost metaserver to come back, unless opts say otherwise. */
#define RDFS_RECONNECT_MS	10000
/* Connection attempts to an I/O server give up after this (a dead server fails fast). */
#define RDFS_IOS_CONNECT_MS	5000

#define BLK			RDFS_BLOCK_SIZE
#define BLK_DOWN(x)		((uint64_t)(x) / BLK)
#define BLK_UP(x)		(((uint64_t)(x) + BLK - 1) / BLK)

/* ---------------------------------------------------------------- connections */

/* One rpc_client; replaced (not repaired) when it breaks. */
struct rdfs_conn {
	struct rpc_client *rpc;
	uint64_t gen;			/* which connection of the peer this is */
	int refs;			/* protected by the peer's lock */
};

/* A server we talk to: the metaserver or one I/O server. */
struct rdfs_peer {
	pthread_mutex_t lock;		/* url, conn, gen */
	pthread_mutex_t connect_lock;	/* one connection attempt at a time */
	char url[256];
	uint32_t server_id;
	struct rdfs_conn *conn;
	uint64_t gen;
	/*
	 * I/O servers: a request to it failed (not a refused capability) before
	 * this time (monotonic ms): reads prefer another copy until then.
	 */
	int64_t suspect_until_ms;	/* atomic */
	int inflight;			/* atomic: its requests in flight from here */
};

/* How long a failed I/O server is passed over when another copy has the blocks. */
#define RDFS_SUSPECT_MS		30000

/* ---------------------------------------------------------------- layouts */

/* One LayoutReply, shared by the cached segments cut from it. */
struct layout_piece {
	Rdfs__LayoutReply *reply;
	int refs;			/* atomic */
	int64_t expiry_ns;		/* earliest capability expiry of the reply */
};

/* One copy of a segment's blocks: where they are on one I/O server. */
struct seg_copy {
	uint64_t block;			/* volume block of the segment's start */
	uint32_t server_id;
	const Rdfs__Capability *cap;	/* in the segment's piece->reply; NULL: none granted */
};

/*
 * A run of file blocks [start, end): a hole (no copy), or the same blocks in
 * @ncopies copies, each a contiguous extent on another I/O server. A read
 * takes one copy (seg_pick_copy), a write goes to all of them.
 */
struct layout_seg {
	uint64_t start;
	uint64_t end;
	int hole;
	int unwritten;
	int ncopies;
	struct seg_copy copy[RDFS_MAX_COPIES];
	struct layout_piece *piece;	/* holds a reference */
};

/* Copy @k of @s has a capability (with @rights, if not 0). */
static inline int seg_copy_usable(const struct layout_seg *s, int k, uint32_t rights)
{
	return s->copy[k].cap && (s->copy[k].cap->rights & rights) == rights;
}

/* The cached layout of one file: segments sorted by start, never overlapping. */
struct layout_cache {
	struct layout_seg *seg;
	size_t n;
	size_t cap;
	/*
	 * Bumped by every layout_cache_forget() and every allocating fetch: a
	 * reply that was on its way meanwhile may describe blocks as they were
	 * before (a hole now written, data now punched), and is not stored.
	 */
	uint64_t changes;
};

void layout_piece_put(struct layout_piece *p);
void layout_seg_get(struct layout_seg *s);
void layout_segs_put(struct layout_seg *segs, size_t n);

void layout_cache_init(struct layout_cache *lc);
void layout_cache_free(struct layout_cache *lc);
/* Forget blocks [start, end) (UINT64_MAX end: everything from start); counts as a change. */
void layout_cache_forget(struct layout_cache *lc, uint64_t start, uint64_t end);
/* Store @reply (ownership passes to the cache). */
int layout_cache_insert(struct layout_cache *lc, Rdfs__LayoutReply *reply);
/*
 * Copy the segments of blocks [start, end), clipped, each holding a piece
 * reference, into a new array. Returns the count, or -ENOENT when the range is
 * not completely cached with capabilities valid for a while (and, with
 * @for_write, not completely allocated with write rights).
 */
int layout_cache_lookup(struct layout_cache *lc, uint64_t start, uint64_t end, int for_write,
			int64_t now_ns, struct layout_seg **out);

/* ---------------------------------------------------------------- inodes */

/*
 * An I/O server holding unstable writes not yet IO_COMMITted, with the boot
 * verifier its WRITE replies carried: an IO_COMMIT under another verifier (or
 * WRITEs under two) means the server restarted and the writes may be lost.
 */
struct unstable_server {
	uint32_t server_id;
	uint64_t verifier;
	int mixed;			/* WRITEs saw different verifiers */
	struct range_set blocks;	/* file blocks written there (a copy to mark stale) */
};

/* What this client knows of one file, shared by all of its opens here. */
struct rdfs_inode {
	uint64_t ino;
	struct rdfs_inode *next;	/* hash chain, inode_table.lock */
	int refs;			/* inode_table.lock */

	pthread_mutex_t lock;		/* everything below */
	pthread_mutex_t append_lock;	/* O_APPEND writes of this client, one at a time */
	pthread_mutex_t commit_lock;	/* one COMMIT at a time: a flush returns after the one in flight */
	int open_count;
	int write_opens;		/* opens for writing */
	uint64_t commits;		/* successful COMMITs, to spot layouts older than one */
	/*
	 * rdfs_client.size_clock when this client last settled the file's size
	 * (COMMIT, truncate, shift): a metaserver reply whose request left
	 * before then may predate that size and must not take it back.
	 */
	uint64_t size_clock;
	uint64_t ms_size;		/* size the metaserver last reported */
	uint64_t pending_size;		/* size including this client's uncommitted writes */
	int64_t mtime_ns;		/* of the last uncommitted write */
	int dirty;			/* size/mtime/ranges to commit */
	uint32_t chunk_size;
	struct range_set uncommitted;	/* file blocks written here, not yet committed */
	/* written here and committed, where the cached layout may still say unwritten */
	struct range_set committed;
	struct layout_cache layout;
	/*
	 * The metaserver incarnation of the layouts fetched since a COMMIT last
	 * covered them (0 none, RDFS_INCARNATION_MIXED several): sent with the
	 * next COMMIT, since an allocation is durable only once a COMMIT after
	 * it is (metaserver ms_layout). layout_inc_seq counts the notes.
	 */
	uint64_t layout_inc;
	uint64_t layout_inc_seq;
	struct unstable_server *unstable; /* servers holding unstable writes of this file */
	size_t n_unstable;
	/*
	 * Bumped when an IO_COMMIT shows unstable writes were lost; each open
	 * remembers the value it started with, so its fsync and close report the
	 * loss until the file is opened anew (rdfs_file.lost_epoch).
	 */
	uint64_t lost_epoch;
	uint64_t stream_end;		/* end byte of the last write at EOF; 0: none yet */
	uint64_t prealloc_window;	/* bytes the next allocation at EOF asks for; 0: min */
	/*
	 * Bumped (atomically, under lock) whenever this client changes the
	 * file's bytes (a write buffered or landed, a truncate, a reopen that
	 * revalidates): read-ahead taken under an older value is stale.
	 */
	uint64_t data_gen;
	uint64_t wb_end;		/* end of write-behind data not yet landed; 0: none */
	struct write_behind *wb;	/* created on the first buffered write */
	pthread_mutex_t wb_lock;	/* wb; outermost of the inode's locks */
};

#define INODE_BUCKETS	256

struct inode_table {
	pthread_mutex_t lock;
	struct rdfs_inode *bucket[INODE_BUCKETS];
};

void inode_table_init(struct inode_table *t);
void inode_table_destroy(struct inode_table *t);
/* The inode for @ino, created when missing; holds a reference. */
struct rdfs_inode *inode_get(struct inode_table *t, uint64_t ino);
/* The inode for @ino if this client knows it (referenced), else NULL. */
struct rdfs_inode *inode_find(struct inode_table *t, uint64_t ino);
void inode_put(struct inode_table *t, struct rdfs_inode *in);
/* Under in->lock: 1 if block @b was written by this client (committed or not). */
int inode_block_written_here(const struct rdfs_inode *in, uint64_t start, uint64_t end);
/* Under in->lock: the size reads are clamped to (write-behind data included). */
uint64_t inode_size(const struct rdfs_inode *in);
/*
 * Replies older than a size: size_clock_now() before a metaserver request
 * whose reply tells a file's size; inode_note_ms_size(in, size, then) under
 * in->lock when it is applied takes @size as the metaserver's (and as the
 * pending size, if nothing is uncommitted) unless this client settled the
 * size since (inode_size_settled(), under in->lock, when its COMMIT or
 * truncate is done): ours is newer then, and another client's change shows
 * in the next reply. Returns 1 if @size was taken.
 */
uint64_t size_clock_now(struct rdfs_client *c);
void inode_size_settled(struct rdfs_client *c, struct rdfs_inode *in);
int inode_note_ms_size(struct rdfs_inode *in, uint64_t size, uint64_t then);
/* Under in->lock: drop everything at or past @size (truncate). */
void inode_truncate_state(struct rdfs_inode *in, uint64_t size);
/* Under in->lock: forget the layout and what it implies (close-to-open). */
void inode_drop_layout(struct rdfs_inode *in);
/*
 * Under in->lock: @server_id holds unstable writes of file blocks [@b0, @b1)
 * whose WRITE replies carried @verifier (merged with what is noted for it;
 * @mixed: already inconsistent).
 */
int inode_note_unstable(struct rdfs_inode *in, uint32_t server_id, uint64_t verifier,
			int mixed, uint64_t b0, uint64_t b1);
/* Under in->lock: note @u again (an IO_COMMIT of it failed; it keeps its ranges). */
int inode_renote_unstable(struct rdfs_inode *in, const struct unstable_server *u);
/*
 * IO_COMMIT on I/O server @server_id: every WRITE it received before is
 * durable once this returns 0, and *@verifier is its verifier now (unlike
 * the one a WRITE was answered with: it restarted since). Else -errno.
 */
int io_commit_server(struct rdfs_client *c, uint32_t server_id, uint64_t *verifier);
void unstable_servers_free(struct unstable_server *u, size_t n);

/* ---------------------------------------------------------------- client */

/*
 * rdma_mode write: the destinations of rdfs_pread_iov(), which the I/O
 * servers RDMA-WRITE into. One region of PLACED_SLOTS slots, declared once
 * (xport_mem_register()), so each READ exposes its slot through a memory
 * window bound for that request instead of registering it; made at first
 * use, recycled, bounded. A larger read, or one when every slot is taken,
 * gets an allocation of its own (registered per request). io_read.c.
 */
#define PLACED_SLOT_SIZE	(1u << 20)	/* rdfs-fuse's largest max_read */
#define PLACED_SLOTS		8

struct placed_pool {
	pthread_mutex_t lock;
	uint8_t *mem;			/* NULL until first used */
	uint32_t free_mask;		/* bit i set: slot i is free */
	int broken;			/* could not be made: allocate per call */
};

void placed_pool_init(struct placed_pool *pp);
void placed_pool_destroy(struct placed_pool *pp);

struct rdfs_file {
	struct rdfs_client *c;
	struct rdfs_inode *in;
	int flags;
	int written;			/* a write succeeded (atomic) */
	struct rdfs_cred cred;
	pthread_mutex_t lock;		/* handle, handle_gen */
	uint64_t handle;
	uint64_t handle_gen;		/* metaserver connection the handle belongs to */
	uint64_t lost_epoch;		/* in->lost_epoch at open: differs once writes were lost */
	pthread_mutex_t ra_lock;	/* ra */
	struct readahead *ra;		/* NULL until the file is read sequentially */
};

/* dir_attr.c: directories' attributes from the replies of changes to them */
#define DIR_ATTR_BITS	8
#define DIR_ATTR_SLOTS	(1u << DIR_ATTR_BITS)
struct dir_attr_entry {
	uint64_t ino;			/* 0: empty */
	int64_t expires_ms;		/* CLOCK_MONOTONIC */
	struct stat st;
};
struct dir_attr_cache {
	pthread_mutex_t lock;
	struct dir_attr_entry e[DIR_ATTR_SLOTS];
};

struct rdfs_client {
	struct rdfs_client_opts opts;
	char *ms_url;
	char *role;
	struct rdfs_peer ms;
	pthread_mutex_t lock;		/* ios, n_ios */
	struct rdfs_peer **ios;
	size_t n_ios;
	struct inode_table itab;
	uint64_t size_clock;		/* atomic; ticks at each size this client settles */
	struct rdfs_client_stats stats;	/* atomic counters */
	struct placed_pool placed;	/* rdma_mode write destinations */
	struct dir_attr_cache dattr;
};

void dir_attr_init(struct dir_attr_cache *t);
void dir_attr_destroy(struct dir_attr_cache *t);
/* Keep @a (a directory's attributes from a change's reply) for one rdfs_getattr(). */
void dir_attr_note(struct rdfs_client *c, const Rdfs__Attr *a);
/* 1 and *@st when @ino's kept attributes are there and fresh (they are used up). */
int dir_attr_take(struct rdfs_client *c, uint64_t ino, struct stat *st);
/* Drop what is kept of @ino (0: of every directory). */
void dir_attr_forget(struct rdfs_client *c, uint64_t ino);

void peer_init(struct rdfs_peer *p, const char *url, uint32_t server_id);
void peer_destroy(struct rdfs_peer *p);
/*
 * A live connection to @p (connecting if needed, retrying for @wait_ms), with a
 * reference. -EIO (or -EACCES for a rejected secret) when it cannot be had.
 */
int peer_get(struct rdfs_client *c, struct rdfs_peer *p, int connect_ms, int wait_ms,
	     struct rdfs_conn **out);
void peer_put(struct rdfs_peer *p, struct rdfs_conn *cn);
/* Update @p's URL; a changed URL drops the connection. */
void peer_set_url(struct rdfs_peer *p, const char *url);

/* The I/O server @server_id (created on first use with @url, which may be NULL). */
struct rdfs_peer *ios_peer(struct rdfs_client *c, uint32_t server_id, const char *url);
/* A request to I/O server @p failed (not a refused capability): reads pass it over a while. */
void peer_suspect(struct rdfs_peer *p);

/* Local failures of a call (the peer did not answer) become -EIO. */
int rpc_errno(int ret);

/* Metaserver call flags */
#define MS_IDEMPOTENT	1	/* may be sent again on a new connection */

/* One request @op is sent to the metaserver (rdfs_client_stats.ms_requests). */
static inline void ms_count(struct rdfs_client *c, uint16_t op)
{
	if (op < RDFS_OP_MAX)
		__atomic_add_fetch(&c->stats.ms_requests[op], 1, __ATOMIC_RELAXED);
}

/*
 * Call the metaserver: @resp is decoded with @desc when the status is 0.
 * Returns 0 or -errno.
 */
int ms_call(struct rdfs_client *c, uint16_t op, const ProtobufCMessage *req,
	    const ProtobufCMessageDescriptor *desc, void *resp, unsigned int flags);
/* ms_call(), and *@gen gets the generation of the connection that answered. */
int ms_call_gen(struct rdfs_client *c, uint16_t op, const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *desc, void *resp, unsigned int flags,
		uint64_t *gen);
/* ms_call() that waits @timeout_ms for its reply (a long admin call: FSCK). */
int ms_call_timeout(struct rdfs_client *c, uint16_t op, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *desc, void *resp, unsigned int flags,
		    int timeout_ms);
/* The current metaserver connection's generation, 0 when there is none. */
uint64_t ms_gen(struct rdfs_client *c);
/*
 * Call the metaserver about open file @f: *@handle_field is set to @f's handle on
 * the connection used (re-opening @f first after a reconnect).
 */
int ms_file_call(struct rdfs_file *f, uint16_t op, const ProtobufCMessage *req,
		 uint64_t *handle_field, const ProtobufCMessageDescriptor *desc, void *resp,
		 unsigned int flags);

void cred_to_pb(const struct rdfs_cred *cr, Rdfs__Cred *pb);
void attr_to_stat(const Rdfs__Attr *a, struct stat *st);
/*
 * Update the inode state of @ino (if known here) from @a, a reply to a request
 * that left at size clock @then; adjust st_size to the pending size.
 */
void attr_note(struct rdfs_client *c, const Rdfs__Attr *a, uint64_t then, struct stat *st);
/* 0, or the errno every operation taking a directory entry name reports for @name. */
int name_check(const char *name);

/* ---------------------------------------------------------------- layouts and I/O */

/*
 * The segments of file blocks [start, end) of @in: from the cache, else from the
 * metaserver (LAYOUT, with @allocate). @fetch_end (>= end) lets a fetch read
 * ahead. Returns the count, with *@out a new array of referenced segments.
 * @allocate LAYOUT_ALLOC_KEEP (fallocate) always asks the metaserver, and the
 * blocks stay past the end of the file at its last close.
 */
#define LAYOUT_ALLOC_KEEP	2
int layout_get(struct rdfs_client *c, struct rdfs_inode *in, struct rdfs_file *f,
	       const struct rdfs_cred *cr, uint64_t start, uint64_t end, uint64_t fetch_end,
	       int allocate, struct layout_seg **out);

/* One READ or WRITE to an I/O server. */
struct io_req {
	const struct layout_seg *seg;	/* extent (its copies) */
	int copy;			/* which of them: its capability and server */
	uint64_t first_block;
	uint32_t block_count;
	uint32_t head;
	uint32_t length;
	Rdfs__IoReq msg;
	uint8_t *buf;			/* READ: destination of @length bytes */
	struct iovec iov[1];		/* WRITE: the data */
	int niov;
	int stable;
	int placing;			/* READ into @buf by RDMA WRITE (rdma_mode write) */
	const Rdfs__CopySrc *copy_src;	/* COPY: where the bytes come from */
	Rdfs__CopyReq copy_msg;		/* COPY: the body (msg is its dst) */
	/* filled by io_batch_run() */
	uint64_t verifier;		/* WRITE: the server's boot verifier */
	struct rpc_reply reply;		/* READ without @buf: the reply, holding the data */
	int64_t deadline_ms;		/* monotonic: when the call times out */
	int status;
	struct rdfs_peer *peer;
	struct rdfs_conn *conn;
	struct rpc_pending *pending;
};

/* The server of request @r. */
static inline uint32_t io_req_server(const struct io_req *r)
{
	return r->seg->copy[r->copy].server_id;
}

/*
 * The copy of @s a read should use: one whose server has not failed lately,
 * with the fewest requests in flight from this client, else the first.
 */
int seg_pick_copy(struct rdfs_client *c, const struct layout_seg *s);

/*
 * Requests of one batch in flight at once: enough to keep every server of a
 * wide stripe busy, bounded so a huge read does not hold its whole size in
 * receive buffers before the first reply is consumed.
 */
#define IO_WINDOW_REQS		32
#define IO_WINDOW_BYTES		(64u << 20)

/* A batch of READs or WRITEs in flight (io_batch_begin() .. io_batch_end()). */
struct io_batch {
	struct rdfs_client *c;
	uint16_t op;
	struct io_req *reqs;
	size_t n;
	size_t started;			/* reqs[0, started) were started */
	size_t done;			/* reqs[0, done) were waited for */
	uint64_t inflight_bytes;
};

/*
 * Send @reqs (op READ or WRITE), as many at once as the window allows, and
 * return; io_batch_end() waits for all (starting the rest as earlier ones
 * finish). READ data is copied to each req's buf, or, without one, left in
 * req->reply (the caller releases it with rpc_reply_release()). io_batch_end()
 * returns 0 or the first error; each req->status says its own fate
 * (-EKEYEXPIRED/-EACCES/-EBADMSG: capability refused). @reqs and the WRITE
 * data must stay valid until io_batch_end() returns.
 */
void io_batch_begin(struct io_batch *b, struct rdfs_client *c, uint16_t op, struct io_req *reqs,
		    size_t n);
int io_batch_end(struct io_batch *b);
/* io_batch_begin() + io_batch_end(). */
int io_batch_run(struct rdfs_client *c, uint16_t op, struct io_req *reqs, size_t n);
/* Monotonic clock in milliseconds. */
int64_t io_mono_ms(void);
/*
 * The boot verifier of a WRITE or IO_COMMIT reply (0 from a server without
 * one); -EIO if the body is undecodable.
 */
int io_reply_verifier(const struct rpc_reply *reply, uint64_t *verifier);
/* 1 if @err means the capability was refused (refetch the layout and retry). */
/*
 * The I/O server refused the capability: expired, forged, not enough rights,
 * or fenced (-ESTALE: the metaserver took blocks of the file back). Forget the
 * layout and ask again.
 */
int io_cap_error(int err);
/*
 * Tries of an I/O whose capability is refused, each with a fresh layout: a
 * file that others truncate or close after appending is fenced often.
 */
#define IO_TRIES	5
/*
 * An I/O of [@start, @end) of @in failed with @err: forget what the layout
 * cache holds of it (all of the file for -ESTALE: its generation moved on)
 * so the next try asks the metaserver again. Takes in->lock.
 */
void layout_refused(struct rdfs_inode *in, int err, uint64_t start, uint64_t end);

/* ---------------------------------------------------------------- read and write plans */

/* One piece of a read's result, in file order: READ reply data or zeros. */
struct read_piece {
	long req;			/* index into the requests, -1 for zeros */
	uint64_t len;
};

/* One read of [off, off + size): its READs and (without a caller buffer) its pieces. */
struct read_plan {
	uint8_t *buf;			/* copy mode: the caller's buffer, else NULL */
	uint64_t off;
	uint64_t size;
	struct io_req *r;
	size_t n;
	size_t cap;
	struct read_piece *p;
	size_t np;
	size_t pcap;
	uint64_t max_zeros;		/* longest run of zeros (iov mode) */
	struct layout_seg *segs;	/* referenced while the READs are in flight */
	int nsegs;
	int had_copies;			/* some segment has another copy to fail over to */
	struct io_batch batch;
	int started;
};

/*
 * Plan the read of pl->off + [0, @size) (inside the file of size @fsize) and
 * start its READs; read_plan_end() waits for them and returns 0 or the first
 * error (always call it, also after a failed start). read_plan_reset() frees
 * the plan's replies and requests for another attempt or for good.
 */
int read_plan_start(struct rdfs_file *f, struct read_plan *pl, size_t size, uint64_t fsize);
int read_plan_end(struct read_plan *pl);
void read_plan_reset(struct read_plan *pl);
/* Copy @len bytes from @from (relative to pl->off) of an iov-mode plan's result to @dst. */
void read_plan_copy(const struct read_plan *pl, uint64_t from, void *dst, size_t len);

/* The WRITEs of bytes [off, off + size) from @buf. */
struct write_plan {
	struct io_req *r;
	size_t n;
	size_t cap;
	uint64_t off;
	size_t size;
	const uint8_t *buf;
	int stable;
	struct layout_seg *segs;
	int nsegs;
	struct io_batch batch;
	int started;
};

/*
 * Allocate what the write needs and start its WRITEs; write_plan_end() waits
 * for them and records the written blocks and the size for the next COMMIT.
 * Always call write_plan_end(), also after a failed start.
 */
int write_plan_start(struct rdfs_file *f, struct write_plan *p);
int write_plan_end(struct rdfs_file *f, struct write_plan *p);
/*
 * The copy on @server_id of blocks [@b0, @b1) of @in missed a write the other
 * copies took: have the metaserver mark it stale (through @f's handle, else
 * with @cr). 0 or -errno (-EIO: it is the last current copy).
 */
int io_copy_stale(struct rdfs_client *c, struct rdfs_inode *in, struct rdfs_file *f,
		  const struct rdfs_cred *cr, uint32_t server_id, uint64_t b0, uint64_t b1);
/* Write all of [off, off + size) now, with one retry on a fresh layout. */
int write_now(struct rdfs_file *f, const uint8_t *buf, size_t size, uint64_t off);
/*
 * write_now() for bytes the application was told were taken (write-behind):
 * where a quota or the space runs out inside them, the longest prefix that
 * still fits is written (to a block boundary) and the limit's error returned.
 */
int write_what_fits(struct rdfs_file *f, const uint8_t *buf, size_t size, uint64_t off);

/* ---------------------------------------------------------------- read-ahead (readahead.c) */

/*
 * Serve a prefix of the read [off, off + size) from @f's read-ahead; returns
 * the bytes copied to @buf (0: nothing there).
 */
size_t readahead_serve(struct rdfs_file *f, void *buf, size_t size, uint64_t off, uint64_t fsize);
/* After a read of [off, off + size): note the pattern, prefetch ahead of a sequential one. */
void readahead_next(struct rdfs_file *f, uint64_t off, size_t size, uint64_t fsize);
/* Drop all read-ahead of @f (waits for READs in flight). */
void readahead_drop(struct rdfs_file *f);
/* Under in->lock: this client changed the file's bytes. */
void inode_data_changed(struct rdfs_inode *in);
/* The size of @in as this client knows it (asks the metaserver when not open or dirty). */
int inode_current_size(struct rdfs_client *c, const struct rdfs_cred *cr, struct rdfs_inode *in,
		       uint64_t *size);

/* ---------------------------------------------------------------- write-behind (write_behind.c) */

/*
 * Take the write [off, off + size) of @f into the inode's write-behind: it is
 * copied, gathered with the writes that continue it into chunk-sized WRITEs
 * and sent in the background (bounded by opts.write_behind_kb). A whole chunk
 * with nothing gathered before it is sent from @buf itself when @lend allows
 * (see rdfs_pwrite_lend()). Returns @size, or the error an earlier
 * write-behind WRITE of the file met.
 */
ssize_t write_behind_write(struct rdfs_file *f, const void *buf, size_t size, uint64_t off,
			   struct rdfs_lend *lend);
/*
 * Send what is gathered and wait for every write-behind WRITE of @in. With
 * @report, returns (and forgets) the error one of them met; else returns 0.
 */
int write_behind_drain(struct rdfs_inode *in, int report);
/* Free the inode's write-behind state (nothing may be in flight). */
void write_behind_free(struct rdfs_inode *in);

/* Zero bytes [size, end of its block) on the I/O server, if that block holds data. */
int io_zero_tail(struct rdfs_client *c, struct rdfs_inode *in, struct rdfs_file *f,
		 const struct rdfs_cred *cr, uint64_t size);

/* A zero-filled block: the bytes a truncate cuts off a block (io_zero_tail). */
extern const uint8_t rdfs_zero_block[RDFS_BLOCK_SIZE];

#endif
