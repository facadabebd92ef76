/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rdfs.h - the kernel client's internal interfaces: the helper channel
 * (dev.c), the VFS glue (super.c, inode.c, file.c) and the data path to the
 * I/O servers (data.c, data_tcp.c, codec.c).
 */
#ifndef RDFS_H
#define RDFS_H

#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/net.h>
#include <linux/pagemap.h>
#include <linux/wait.h>

#include "rdfs_dev_abi.h"
#include "rdfs_msg.h"

#define RDFS_MAX_SERVERS	64

/* One open of /dev/rdfs: the helper of (at most) one mount. */
struct rdfs_chan {
	struct kref ref;
	struct mutex lock;		/* everything below */
	wait_queue_head_t helper_wait;	/* helper threads waiting for requests */
	struct list_head pending;	/* not yet read by the helper */
	struct list_head sent;		/* read, waiting for the reply */
	u64 next_id;
	bool dead;			/* helper closed the device */
	bool unmounted;			/* file system gone: read(2) returns 0 */
	bool mounted;
};

/* One request through the channel; lives on the requester's stack. */
struct rdfs_dev_call {
	struct list_head link;
	struct rdfs_dev_req req;	/* header (len, op, id filled by dev_call) */
	const void *args[4];		/* payload pieces */
	size_t arg_len[4];
	void *out;			/* reply payload buffer */
	size_t out_size;
	size_t out_len;			/* reply payload received */
	s32 error;
	u64 val;
	struct socket *sock;		/* CONNECT: from reply.fd */
	bool done;
	wait_queue_head_t wait;
};

/* The TCP connection to one I/O server (data_tcp.c). */
struct rdfs_tcp_conn;
struct rdfs_conn {
	struct mutex lock;		/* making or replacing tc */
	struct rdfs_tcp_conn *tc;	/* NULL: not connected */
};

struct rdfs_sb_info {
	struct rdfs_chan *chan;
	char source[128];
	unsigned int attr_timeout;	/* jiffies */
	unsigned int entry_timeout;
	unsigned int readahead_kb;
	struct rdfs_conn conns[RDFS_MAX_SERVERS];
	struct rdfs_rdma *rdma;		/* transport=rdma: the RDMA data path; NULL: TCP */
	bool rdma_read;			/* rdma_mode=read (figure 3), else write (figure 2) */
	bool direct_io;			/* every read/write as O_DIRECT (direct.c) */
};

struct rdfs_inode_info {
	struct inode vfs_inode;
	unsigned long attr_time;	/* jiffies of the last attribute refresh */
	spinlock_t lock;		/* the fields below */
	struct list_head wr_files;	/* writable opens: writeback borrows a handle */
	u64 dirty_first;		/* blocks written since the last commit */
	u64 dirty_end;
	/* mtime as the metaserver last said: an i_mtime unlike it means local writes since */
	struct timespec64 ms_mtime;
	/* writes not yet committed (unstable.c); NULL until the first */
	struct rdfs_unstable *unstable;
	struct mutex commit_lock;	/* one IO_COMMIT of this inode's writes at a time */
	atomic_t wb_inflight;		/* writeback batches on rdfs_wb_wq (file.c) */
	wait_queue_head_t wb_wait;	/* woken as each of them ends */
	/* the layouts kept for reuse (layout.c), under lock */
	struct rdfs_layout *layout_read, *layout_write;
	u64 layout_write_next;		/* where the last write layout asked for ended */
	u64 layout_gen;			/* bumped by every forget (layout.c) */
	unsigned long flags;		/* RDFS_I_* bits */
};

/*
 * A directory's names were used since its last listing began (a lookup, or a
 * cached name trusted): its next listing asks every page with attributes, not
 * only the first (readdirplus; NFS learns the same way from its misses). Set
 * without locks; a listing starting at its first entry tests and clears it.
 */
#define RDFS_I_NAMES_USED	0

static inline struct rdfs_sb_info *RDFS_SB(struct super_block *sb)
{
	return sb->s_fs_info;
}

static inline struct rdfs_inode_info *RDFS_I(struct inode *inode)
{
	return container_of(inode, struct rdfs_inode_info, vfs_inode);
}

/*
 * The namespace side's objects, counted by dev.c for the leak check
 * (/sys/module/rdfs/parameters/objects; the data path's are in rdfs_stats).
 */
enum rdfs_obj {
	RDFS_OBJ_CHAN,		/* open /dev/rdfs files */
	RDFS_OBJ_CALL,		/* helper requests in flight */
	RDFS_OBJ_MOUNT,		/* mounts bound to a channel */
	RDFS_OBJ_HANDLE,	/* helper handles of open files and directories */
	RDFS_OBJ_NR
};

/* dev.c */
struct cred;
void rdfs_call_cred(struct rdfs_dev_call *c, const struct cred *cred);
int rdfs_dev_init(void);
void rdfs_dev_exit(void);
struct rdfs_chan *rdfs_chan_from_fd(int fd);
void rdfs_chan_put(struct rdfs_chan *ch);
void rdfs_chan_unmount(struct rdfs_chan *ch);
void rdfs_call_init(struct rdfs_dev_call *c, u16 op, u64 ino, u64 handle);
void rdfs_call_arg(struct rdfs_dev_call *c, const void *p, size_t len);
int rdfs_call(struct rdfs_chan *ch, struct rdfs_dev_call *c);

/* inode.c */
extern const struct inode_operations rdfs_dir_iops;
extern const struct inode_operations rdfs_file_iops;
extern const struct inode_operations rdfs_symlink_iops;
extern const struct dentry_operations rdfs_dentry_ops;
extern const struct xattr_handler *rdfs_xattr_handlers[];
struct inode *rdfs_iget(struct super_block *sb, const struct rdfs_dev_attr *a);
/* As rdfs_iget(), but an inode already cached keeps its attributes (@a may be old). */
struct inode *rdfs_iget_keep(struct super_block *sb, const struct rdfs_dev_attr *a);
void rdfs_attr_apply(struct inode *inode, const struct rdfs_dev_attr *a);
int rdfs_revalidate_attr(struct inode *inode, bool force);

/* acl.c */
struct posix_acl;
struct posix_acl *rdfs_get_acl(struct inode *inode, int type, bool rcu);
int rdfs_set_acl(struct user_namespace *ns, struct inode *inode, struct posix_acl *acl, int type);

/* file.c */
extern const struct file_operations rdfs_file_fops;
extern const struct file_operations rdfs_dir_fops;
extern const struct address_space_operations rdfs_aops;
int rdfs_commit(struct inode *inode, u64 handle);
/* Where read-ahead runs are read (super.c makes it; flushed before a super block goes). */
extern struct workqueue_struct *rdfs_ra_wq;
extern struct workqueue_struct *rdfs_wb_wq;
/* An open file's state, allocated before the helper opens (attaching cannot fail). */
struct rdfs_open_file;
struct rdfs_open_file *rdfs_open_file_new(void);
void rdfs_open_file_free(struct rdfs_open_file *of);
/* Make @file the open of helper handle @handle, in @of. */
void rdfs_file_attach(struct inode *inode, struct file *file, struct rdfs_open_file *of,
		      u64 handle);
/* Blocks of [first, end) written back or written directly, not yet committed. */
bool rdfs_dirty_overlaps(struct inode *inode, u64 first, u64 end);
u64 rdfs_wb_handle(struct inode *inode);

/* direct.c: O_DIRECT; rdfs_direct_write under the inode lock */
ssize_t rdfs_direct_read(struct kiocb *iocb, struct iov_iter *to, u64 handle);
ssize_t rdfs_direct_write(struct kiocb *iocb, struct iov_iter *from, u64 handle);

/*
 * layout.c: the layout of [pos, pos + len) of a file (bytes, block-aligned),
 * for writing (@allocate) or reading, kept or from the helper (always from
 * the helper with @flags RDFS_DEV_LAYOUT_*); referenced, or an ERR_PTR.
 */
struct rdfs_layout;
struct rdfs_layout *rdfs_layout_get(struct inode *inode, u64 handle, u64 pos, u64 len,
				    bool allocate, u32 flags, u32 failed_server);
const struct rdfs_dev_layout_reply *rdfs_layout_reply(const struct rdfs_layout *l);
void rdfs_layout_put(struct rdfs_layout *l);
/* Nothing kept of @inode's layout may be used again (see layout.c for when). */
void rdfs_layout_forget(struct inode *inode);
/* The same for its read layout only: after a commit. */
void rdfs_layout_forget_read(struct inode *inode);

/* data.c */
struct rdfs_io_seg;
/*
 * The pages hold the file from byte @base (a multiple of PAGE_SIZE): page-cache
 * pages (rdfs_data_read/write: @base is pages[0]'s offset) or O_DIRECT's
 * bounce pages (file.c).
 */
int rdfs_data_read_at(struct inode *inode, u64 handle, struct page **pages, int npages,
		      u64 base);
/*
 * The I/O servers a write's unstable WRITEs went to and the verifier each
 * answered with; several different ones from one server: mixed (it
 * restarted in between).
 */
struct rdfs_wverf {
	DECLARE_BITMAP(servers, RDFS_MAX_SERVERS);
	DECLARE_BITMAP(mixed, RDFS_MAX_SERVERS);
	u64 verifier[RDFS_MAX_SERVERS];
};

/* @unstable NULL: stable WRITEs; else unstable ones, noted in *@unstable. */
int rdfs_data_write_at(struct inode *inode, u64 handle, struct page **pages, int npages,
		       u64 base, u32 off, u64 len, struct rdfs_wverf *unstable);

static inline int rdfs_data_read(struct inode *inode, u64 handle, struct page **pages,
				 int npages)
{
	return rdfs_data_read_at(inode, handle, pages, npages, page_offset(pages[0]));
}

static inline int rdfs_data_write(struct inode *inode, u64 handle, struct page **pages,
				  int npages, u32 off, u64 len, struct rdfs_wverf *unstable)
{
	return rdfs_data_write_at(inode, handle, pages, npages, page_offset(pages[0]), off,
				  len, unstable);
}

/*
 * data_tcp.c: READs and WRITEs over TCP, many in flight per connection.
 * rdfs_tcp_start sends one (@data_len: a READ's bytes expected) and returns
 * it in *@out; rdfs_tcp_finish waits for its reply and frees it.
 */
struct rdfs_tcp_req;
int rdfs_tcp_start(struct rdfs_sb_info *sbi, u16 op, u32 server_id, const u8 *cap, u32 cap_len,
		   u64 first_block, struct page **pages, size_t off, u32 len, u32 data_len,
		   bool stable, struct rdfs_tcp_req **out);
int rdfs_tcp_finish(struct rdfs_tcp_req *req, u64 *verifier);
void rdfs_conns_close(struct rdfs_sb_info *sbi);

/* unstable.c: writeback's unstable writes, kept until their IO_COMMIT */
#define RDFS_UNSTABLE_MAX	(32ull << 20)	/* bytes an inode keeps before writeback commits */
void rdfs_wverf_note(struct rdfs_wverf *w, u32 server_id, u64 verifier);
void rdfs_wverf_clear(struct rdfs_wverf *w);
/* 0 once @inode can keep unstable writes (ri->unstable exists), else -ENOMEM. */
int rdfs_unstable_prepare(struct inode *inode);
/*
 * Keep the run of rdfs_data_write(@pages, @npages, @off, @len, @w) for its
 * commit (a page reference each): 0, or -ENOMEM (then send it stable).
 */
int rdfs_unstable_keep(struct inode *inode, const struct rdfs_wverf *w, struct page **pages,
		       int npages, u32 off, u64 len);
/* Bytes of @inode written unstable and not yet committed. */
u64 rdfs_unstable_bytes(struct inode *inode);
/* Make them durable (IO_COMMIT; resent stable where that cannot vouch for them). */
int rdfs_unstable_commit(struct inode *inode, u64 handle);
/* Commit every inode of @sb (sync(2), syncfs(2)): 0 or the first error. */
int rdfs_unstable_sync_sb(struct super_block *sb);
/* At eviction: drop what is kept. */
void rdfs_unstable_free(struct inode *inode);

/*
 * data_rdma.c: one READ of whole pages or WRITE of a byte run (from @head in
 * pages[0]; at most 256 pages) over RDMA
 */
struct rdfs_rdma;
struct rdfs_rdma_req;
int rdfs_rdma_init(struct rdfs_sb_info *sbi, bool read_mode);
void rdfs_rdma_exit(struct rdfs_sb_info *sbi);
int rdfs_rdma_start(struct rdfs_sb_info *sbi, u16 op, u32 server_id, const u8 *cap,
		    u32 cap_len, u64 first_block, struct page **pages, u32 head, u32 len,
		    bool stable, struct rdfs_rdma_req **out);
/* 0 or -errno; *@verifier: the I/O server's, from its reply */
int rdfs_rdma_finish(struct rdfs_rdma_req *req, u64 *verifier);

/*
 * super.c: module counters, read with /sys/module/rdfs/parameters/stats.
 * copy_*: file-data bytes the CPU copied between the page cache and the
 * network (TCP: the socket's copy; RDMA: an eager reply's inline data);
 * rdma_*: bytes the NIC moved straight to or from page-cache pages;
 * read_failovers: reads tried again on another copy after an I/O server
 * failed; copies_lost: copies a write missed, marked stale through the helper;
 * io_commits: IO_COMMITs of unstable writes (one per inode and commit, each
 * for all the servers written); unstable_resends: runs of unstable writes
 * sent again, stable, because a server's verifier changed or its commit failed;
 * write_behind_bytes: dirty bytes whose writeback their writer started (file.c);
 * direct_bounced_bytes: O_DIRECT bytes copied through bounce pages, where the
 * request was not page-aligned (direct.c; aligned ones use the caller's pages).
 */
struct rdfs_stats {
	atomic64_t copy_read_bytes, copy_write_bytes;
	atomic64_t rdma_read_bytes, rdma_write_bytes;
	atomic64_t mr_reg, mr_inv;	/* per-request registrations, invalidations */
	atomic64_t rdma_conns, rdma_reqs;	/* alive now */
	atomic64_t tcp_conns, tcp_reqs;		/* alive now */
	atomic64_t tcp_pipelined;	/* TCP requests sent behind another on their connection */
	atomic64_t layout_calls, layout_hits;	/* layouts asked of the helper, reused */
	atomic64_t lookups;		/* names looked up through the helper */
	atomic64_t readdir_plus_entries;	/* names a listing brought with attributes */
	atomic64_t read_failovers, copies_lost;
	atomic64_t io_commits, unstable_resends;
	atomic64_t write_behind_bytes;
	atomic64_t direct_bounced_bytes;
};
extern struct rdfs_stats rdfs_stats;

/* codec.c */
#include "codec.h"

#endif
