/* SPDX-License-Identifier: MIT */
/*
 * rdfs_client.h - the user-space client core: everything a client does, so that
 * rdfs-fuse, the kernel module's helper, the rdfs tool and the benchmark are thin.
 *
 * One struct rdfs_client per mount: an authenticated connection to the metaserver,
 * connections to the I/O servers (opened on first use), an inode table holding
 * each open file's layout cache, pending size and written ranges.
 *
 * Every function returns 0 (or a byte count) on success and -errno on failure,
 * with POSIX's errno for the operation (what the metaserver returned), -EIO when
 * an I/O server or the metaserver cannot be reached within the timeout.
 * All functions are thread-safe.
 *
 * Consistency: close-to-open. rdfs_open() refetches attributes and drops the
 * cached layout; rdfs_flush()/rdfs_release()/rdfs_fsync() commit the size, mtime
 * and written ranges to the metaserver, after which other clients see the data.
 *
 * Failures: a dead I/O server fails the I/O that needs it with -EIO at once and
 * is reconnected on the next use. A lost metaserver connection is re-established
 * by the next call (waiting up to opts.reconnect_ms), and each open file re-OPENs
 * itself for a new handle when it next needs one.
 */
#ifndef RDFS_CLIENT_H
#define RDFS_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "auth.h"
#include "rdfs_frame.h"

#define RDFS_ROOT_INO	1
#define RDFS_MAX_GROUPS	64

struct rdfs_client;
struct rdfs_file;
struct rdfs_dir;

struct rdfs_cred {
	uint32_t uid;
	uint32_t gid;
	uint32_t ngroups;
	uint32_t groups[RDFS_MAX_GROUPS];
	/*
	 * The caller's umask, sent with creates (mknod, mkdir, create) for the
	 * metaserver to apply unless the parent has a default ACL. 0 when the
	 * caller has applied it to the mode already (no ACL support).
	 */
	uint32_t umask;
};

struct rdfs_client_opts {
	const char *metaserver_url;	/* "tcp://host:port" */
	struct auth_secret secret;	/* the key that proves @role */
	int timeout_ms;			/* per RPC; default 30000 */
	/*
	 * The claim (auth.h) @secret proves: "node:NAME:GEN" for a node key, any
	 * other name ("client", the default; "tool") for the shared cluster secret.
	 */
	const char *role;
	char claim[AUTH_ID_MAX];	/* rdfs_client_opts_load_key() keeps the claim here */
	int write_stable;		/* 1: WRITEs acked only when durable (default); 0: write-back + COMMIT at fsync */
	int reconnect_ms;		/* how long a call waits for a lost metaserver; 0: 10000 */
	/*
	 * Read-ahead per open file for rdfs_pread() (not rdfs_pread_iov(), whose
	 * user - the kernel under FUSE - reads ahead itself): KiB prefetched
	 * ahead of a sequential reader. 0: 8192; < 0: off.
	 */
	int readahead_kb;
	/*
	 * Write-behind per file: rdfs_pwrite() copies the data, gathers writes
	 * that continue each other into chunk-sized WRITEs and returns before the
	 * I/O servers answer (before blocks are even allocated); at most this
	 * many KiB are in flight unanswered. Errors (-EIO, -ENOSPC, -EDQUOT, the
	 * last when the metaserver refuses the blocks over a quota) are reported
	 * by the next write and by the next flush, fsync or release (as NFS
	 * does). The data is durable (or, with write_stable 0, committable) once
	 * rdfs_flush()/rdfs_fsync()/rdfs_release() returns. O_DIRECT and O_SYNC
	 * opens never use it. 0: off (each write returns when the servers have
	 * it); 16384 is a good value for streaming writers.
	 */
	int write_behind_kb;
	/*
	 * READ data over rdma:// I/O server connections (Gfarm's two modes):
	 * RDFS_RDMA_READ (0, default): the client RDMA-READs each unit from the
	 * server's buffer; RDFS_RDMA_WRITE: the server RDMA-WRITEs each unit
	 * straight into the caller's buffer (rdfs_pread()), or into one of the
	 * client's per call (rdfs_pread_iov(): then also over tcp://, where the
	 * data comes in the replies and is copied there once).
	 */
	int rdma_mode;
	/*
	 * Milliseconds during which the first rdfs_getattr() of a directory this
	 * client just changed (created or removed a name in it, renamed into or
	 * out of it) is answered from the attributes the change's reply carried,
	 * without asking the metaserver (dir_attr.c). 0: always ask (default).
	 * rdfs-fuse gives its attribute timeout: the kernel asks at once after
	 * each change, and would have cached the attributes that long anyway.
	 */
	int dir_attr_ms;
};

#define RDFS_RDMA_READ	0
#define RDFS_RDMA_WRITE	1

/*
 * Load the key file @path into @o: a node key file (`rdfs node add`) sets the
 * node's claim, any other file is the shared cluster secret and keeps @o->role
 * (or "client"). Errors as auth_secret_load(): -EPERM for a file group or other
 * may access, -EINVAL for a malformed one, -errno.
 */
int rdfs_client_opts_load_key(struct rdfs_client_opts *o, const char *path);
/* A sentence for an rdfs_client_opts_load_key() error. */
const char *rdfs_key_error(int err);

/*
 * Connect and authenticate (once, no retry, so that errors are immediate and
 * precise): -ECONNREFUSED/-ETIMEDOUT/-EHOSTUNREACH, -EACCES when the secret is
 * rejected, -EINVAL for a bad URL. Later calls reconnect by themselves.
 */
int rdfs_client_open(const struct rdfs_client_opts *opts, struct rdfs_client **out);
void rdfs_client_close(struct rdfs_client *c);

/* ---------------------------------------------------------------- namespace */

/* setattr valid bits (the same as rdfs.proto's SetattrReq.valid) */
#define RDFS_SET_MODE		1u
#define RDFS_SET_UID		2u
#define RDFS_SET_GID		4u
#define RDFS_SET_SIZE		8u
#define RDFS_SET_ATIME		16u
#define RDFS_SET_MTIME		32u
#define RDFS_SET_ATIME_NOW	64u
#define RDFS_SET_MTIME_NOW	128u
#define RDFS_SET_CTIME		256u

/*
 * Attributes come from the metaserver, except that a file with writes of this
 * client not yet committed shows this client's size and mtime (as a local file
 * system would). st_blocks counts 512-byte units; st_blksize is the chunk size.
 * A NULL @cr means root.
 */
int rdfs_lookup(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
		const char *name, struct stat *st);
int rdfs_getattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino, struct stat *st);
/* @f may be NULL; with it, a size change also updates the open file's state. */
/*
 * fallocate(2) on an open file: mode 0 and FALLOC_FL_KEEP_SIZE allocate the
 * range's blocks (reading as zeros; mode 0 extends the size), PUNCH_HOLE |
 * KEEP_SIZE makes the range read as zeros and frees its whole blocks at once,
 * ZERO_RANGE does the same and extends the size unless KEEP_SIZE;
 * COLLAPSE_RANGE and INSERT_RANGE (block-aligned, as ext4: -EINVAL otherwise)
 * remove a range and move the rest of the file down, or move it up over a new
 * hole, by moving the layout, not the data. -EOPNOTSUPP for UNSHARE_RANGE.
 * Blocks allocated past the end with KEEP_SIZE stay allocated (unwritten) after
 * the last close, unlike speculative preallocation.
 */
int rdfs_fallocate(struct rdfs_file *f, int mode, uint64_t off, uint64_t len);
/*
 * copy_file_range(2): copy up to @len bytes at @off_in of @src to @off_out of
 * @dst without moving them through this client: the destination's I/O servers
 * fetch them from the source's (COPY). Source holes become holes. Returns the
 * bytes copied (0 at the end of @src; fewer than @len at most once per call
 * when it is huge), or -EBADF (modes), -EINVAL (overlap within one file), ...
 */
int64_t rdfs_copy_range(struct rdfs_file *src, uint64_t off_in, struct rdfs_file *dst,
			uint64_t off_out, uint64_t len);
/*
 * lseek(2) SEEK_DATA / SEEK_HOLE from the layout: the next offset at or after
 * @off that is data (allocated and written) or a hole (unallocated, or
 * allocated and never written); the end of the file is a hole. -ENXIO at or
 * past the end (and for SEEK_DATA with no data after @off).
 */
int64_t rdfs_seek_data(struct rdfs_file *f, uint64_t off, int whence);

int rdfs_setattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		 const struct stat *in, unsigned int valid, struct rdfs_file *f, struct stat *out);
int rdfs_mknod(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
	       const char *name, mode_t mode, dev_t rdev, struct stat *st);
/* Create and open a regular file in one round trip (O_EXCL honoured). */
int rdfs_create(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
		const char *name, mode_t mode, int flags, struct stat *st, struct rdfs_file **out);
int rdfs_mkdir(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
	       const char *name, mode_t mode, struct stat *st);
int rdfs_unlink(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent, const char *name);
int rdfs_rmdir(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent, const char *name);
/* @flags: RENAME_NOREPLACE (1), RENAME_EXCHANGE (2) */
int rdfs_rename(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
		const char *name, uint64_t newparent, const char *newname, unsigned int flags);
int rdfs_link(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
	      uint64_t newparent, const char *newname, struct stat *st);
int rdfs_symlink(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
		 const char *name, const char *target, struct stat *st);
/* Returns the target length; @buf gets a NUL-terminated target (truncated to @size - 1). */
int rdfs_readlink(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		  char *buf, size_t size);
int rdfs_statfs(struct rdfs_client *c, const struct rdfs_cred *cr, struct statvfs *st);

/* xattrs with getxattr(2)'s size rules: size 0 returns the needed size; too small: -ERANGE. */
int rdfs_getxattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		  const char *name, void *buf, size_t size);
int rdfs_setxattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		  const char *name, const void *value, size_t size, int flags);
/* NUL-separated names, listxattr(2)'s size rules. */
int rdfs_listxattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		   char *buf, size_t size);
int rdfs_removexattr(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		     const char *name);

/* ---------------------------------------------------------------- directories */

struct rdfs_dirent {
	char name[256];
	uint64_t ino;
	mode_t type;			/* S_IFREG, S_IFDIR, ... */
	int has_attr;			/* @st is the entry's attributes (RDFS_DIR_PLUS) */
	struct stat st;
};

/*
 * A directory stream. Entries are numbered 0, 1, 2...: rdfs_readdir_at(d, i)
 * returns entry i, fetching pages from the metaserver as needed and keeping
 * what it fetched, so seekdir/telldir offsets (i + 1) stay valid. Returns 1 with
 * @ent filled, 0 at the end, or -errno. "." and ".." are not entries.
 * rdfs_opendir() fetches the first page, so it reports ENOTDIR/EACCES/ENOENT.
 */
int rdfs_opendir(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		 struct rdfs_dir **out);
/*
 * With RDFS_DIR_PLUS the pages come with each entry's attributes (readdirplus),
 * and rdfs_readdir_at() sets has_attr for entries of the page fetched last
 * (only that page's attributes are kept: they are for a caller walking the
 * stream in order). rdfs_dir_set_plus() changes it for the pages fetched next.
 */
#define RDFS_DIR_PLUS	1u
int rdfs_opendir_flags(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		       unsigned int flags, struct rdfs_dir **out);
void rdfs_dir_set_plus(struct rdfs_dir *d, int plus);
int rdfs_readdir_at(struct rdfs_dir *d, uint64_t index, struct rdfs_dirent *ent);
void rdfs_closedir(struct rdfs_dir *d);

/* ---------------------------------------------------------------- files */

int rdfs_open(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino, int flags,
	      struct stat *st, struct rdfs_file **out);
/* Read up to @size bytes at @off; short only at end of file. Holes read as zeros. */
ssize_t rdfs_pread(struct rdfs_file *f, void *buf, size_t size, off_t off);
/*
 * rdfs_pread() without the copy: on success *@iov and *@niov describe the bytes in
 * file order, pointing into the buffers the data was received in (and into
 * zeros for holes), valid until rdfs_read_buf_free(*@rb). Returns the byte count
 * (0 at end of file, with *@rb NULL) or -errno. For fuse_reply_iov().
 */
struct rdfs_read_buf;
ssize_t rdfs_pread_iov(struct rdfs_file *f, size_t size, off_t off, struct rdfs_read_buf **rb,
		       const struct iovec **iov, int *niov);
void rdfs_read_buf_free(struct rdfs_read_buf *rb);
/* Write all @size bytes at @off (O_APPEND files: at this client's end of file). */
ssize_t rdfs_pwrite(struct rdfs_file *f, const void *buf, size_t size, off_t off);
/* rdfs_pwrite(), and *@where (may be NULL) gets the offset written at (O_APPEND). */
ssize_t rdfs_pwrite_at(struct rdfs_file *f, const void *buf, size_t size, off_t off,
		       off_t *where);
/*
 * A buffer a write may keep instead of copying (rdfs_pwrite_lend): @release
 * frees it, @arg is what it is given.
 */
struct rdfs_lend {
	void (*release)(void *arg);
	void *arg;
	int kept;		/* out: the write kept the buffer */
};
/*
 * rdfs_pwrite() that may keep @buf rather than copy it: when write-behind can
 * send it as it is (a whole chunk, nothing gathered before it), it sets
 * @lend->kept and calls @lend->release(@lend->arg) once, from any thread, when
 * the WRITEs no longer need it - maybe before this returns. The caller must
 * not touch @buf again then. Otherwise @buf is copied (or sent) as by
 * rdfs_pwrite() and stays the caller's.
 */
ssize_t rdfs_pwrite_lend(struct rdfs_file *f, const void *buf, size_t size, off_t off,
			 struct rdfs_lend *lend);
/*
 * Commit size/mtime/written ranges to the metaserver (close-to-open point), if
 * this client has uncommitted writes to the file (a read-only @f commits nothing).
 * A failed commit returns -EIO and keeps the writes pending for the next flush;
 * -EIO also once rdfs_fsync() found writes of this open lost (see there).
 */
int rdfs_flush(struct rdfs_file *f);
/*
 * flush + make every I/O server that holds data of this file commit it. With
 * unstable writes (write_stable 0), an I/O server that restarted since
 * acknowledging some of them (its boot verifier changed) may have lost them:
 * -EIO, and this open's later fsyncs and flushes report -EIO too; an open
 * made afterwards starts clean. Nothing is resent: the data is not kept.
 */
int rdfs_fsync(struct rdfs_file *f, int datasync);
/*
 * flush, then drop the open handle (an unlinked file is freed at its last
 * release). @f is freed even when the flush fails (-EIO); the uncommitted
 * writes then stay with this client until a later open of the file commits them.
 */
int rdfs_release(struct rdfs_file *f);
uint64_t rdfs_file_ino(const struct rdfs_file *f);
/* The open(2) flags @f was opened with. */
int rdfs_file_flags(const struct rdfs_file *f);
/* 1 once a write through @f has succeeded (write(2)'s side effects are due). */
int rdfs_file_written(const struct rdfs_file *f);
/* Size as this client sees it (including writes not yet committed). */
uint64_t rdfs_file_size(const struct rdfs_file *f);
/* The client's view of a file's size if it has it open for writing, else 0 with -ENOENT. */
int rdfs_pending_size(struct rdfs_client *c, uint64_t ino, uint64_t *size);

/* ---------------------------------------------------------------- cluster */

struct rdfs_server_info {
	uint32_t id;
	char url[128];
	char name[64];
	uint64_t capacity_blocks;
	uint64_t free_blocks;
	int up;
	int draining;			/* rdfs drain: its copies are being moved away */
	char domain[64];		/* failure domain ("": none) */
	int read_only;			/* rdfs servers set --read-only: no new blocks there */
	char label[128];		/* rdfs servers label ("": none) */
};

/* Fill at most @max entries, sorted by id; returns the number of servers (may exceed @max). */
int rdfs_server_list(struct rdfs_client *c, struct rdfs_server_info *out, int max);

/* The metaserver's rebuilder, as its last pass over every chunk found it. */
struct rdfs_copies_status {
	uint64_t chunks_under;		/* fewer copies than their file's */
	uint64_t chunks_building;	/* a new copy being made now */
	uint64_t chunks_lost;		/* blocks no copy that counts holds */
	uint64_t bytes_rebuilt;		/* copied in that pass */
	uint64_t passes;		/* passes since the metaserver started */
	/* rdfs rebalance */
	int rebalancing;		/* under way */
	uint32_t rebalance_threshold_pct;	/* its band: the cluster's usage +- half this */
	uint64_t rebalance_bytes_moved;	/* since it was asked */
	uint32_t rebalance_outside;	/* servers outside the band at the last pass */
};
int rdfs_copies_status(struct rdfs_client *c, struct rdfs_copies_status *out);
/*
 * rdfs drain: with @on, no new block goes to I/O server @server_id and the
 * metaserver moves every copy it holds to the others; without, stop that.
 * Needs a client connected with the server key (-EPERM).
 */
int rdfs_drain(struct rdfs_client *c, uint32_t server_id, int on);
/*
 * rdfs rebalance: with @on, the metaserver moves copies from the fullest I/O
 * servers to the emptiest until every server's used fraction is within
 * @threshold_pct/2 percentage points of the cluster's (0: 10), then stops by
 * itself; without, stop now. Needs the server key (-EPERM); -EINVAL for a
 * threshold above 100.
 */
int rdfs_rebalance(struct rdfs_client *c, int on, uint32_t threshold_pct);
/*
 * rdfs servers: set I/O server @server_id's label to @label (NULL: keep it,
 * "": none) and its read-only flag to @read_only (-1: keep it). Needs the
 * server key (-EPERM); -ENOENT for an unknown id, -EINVAL for a bad label.
 */
int rdfs_server_set(struct rdfs_client *c, uint32_t server_id, const char *label, int read_only);

/* One entry of a subtree walk (rdfs_walk). */
struct rdfs_walk_entry {
	const char *path;		/* relative to the start, NUL-terminated */
	size_t path_len;
	struct stat st;			/* st_blocks in 512-byte units, as stat(2) */
	int denied;			/* a directory the caller may not list: not walked */
};
/* What a walk counted (with @summary: every entry but those passed to @fn as links). */
struct rdfs_walk_sums {
	uint64_t files, dirs, others;
	uint64_t bytes;			/* sizes */
	uint64_t blocks;		/* allocated 4 KiB blocks */
	uint64_t denied;		/* directories not walked into */
};
/*
 * rdfs du and find: walk the tree under directory @ino on the metaserver (WALK,
 * batch by batch), calling @fn for each entry it lists, depth first, names in
 * byte order, a directory before what it holds; @fn returning non-zero stops
 * the walk with that value. Only what @cr could list is walked. Without
 * @summary every entry is listed; with it the metaserver counts them into
 * @sums instead and lists only the non-directories with more than one link
 * (not counted: count each inode once) and the directories it did not walk
 * into (counted). @sums (may be NULL) adds up every batch. 0 or -errno
 * (-ENOTDIR, -EACCES for @ino itself).
 */
int rdfs_walk(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino, int summary,
	      int (*fn)(void *arg, const struct rdfs_walk_entry *e), void *arg,
	      struct rdfs_walk_sums *sums);

/* The node's ids [client, client + count) are the file system's [fs, fs + count). */
#define RDFS_IDMAP_MAX 16
struct rdfs_idmap {
	int gid;			/* 0: uids, 1: gids */
	uint32_t client, fs, count;
};
/* A client node (the metaserver's node table; see `rdfs node --help`). */
struct rdfs_node_info {
	char name[41];
	uint32_t generation;		/* its key is the key of "NAME:GENERATION" */
	int revoked;
	int squash;			/* 0 none, 1 root, 2 all */
	uint32_t anonuid, anongid;
	int unmapped_squash;		/* ids no map covers act as anonuid/anongid */
	int nmaps;
	struct rdfs_idmap maps[RDFS_IDMAP_MAX];
};
/*
 * Node administration; the client must have authenticated with the server key
 * (role "server"), else -EPERM. rdfs_node_set(): add @name or change it; a new
 * key (@new_key, or a new or revoked node) moves its generation on; @policy
 * (NULL: keep it) gives the squash, anonuid/anongid, unmapped_squash and maps
 * the node has from now on. -EINVAL for maps that overlap or a bad range.
 */
int rdfs_node_set(struct rdfs_client *c, const char *name, int new_key,
		  const struct rdfs_node_info *policy, struct rdfs_node_info *out);
int rdfs_node_revoke(struct rdfs_client *c, const char *name, struct rdfs_node_info *out);
/* Fill at most @max entries, by name; returns the number of nodes (may exceed @max). */
int rdfs_node_list(struct rdfs_client *c, struct rdfs_node_info *out, int max);

/* `rdfs fsck` (metaserver/fsck.c; kinds are enum ms_fsck_kind of metaserver/ms.h). */
#define RDFS_FSCK_KINDS	32
struct rdfs_fsck_problem {
	uint32_t kind;
	uint64_t ino, other_ino;
	uint32_t server_id;
	uint64_t block, count;
	int repaired;
};
struct rdfs_fsck_report {
	uint64_t inodes, files, dirs, extents, orphans_open;
	uint64_t blocks_owned, blocks_mapped, blocks_held, blocks_quarantined;
	uint64_t problems, repaired;
	uint64_t counts[RDFS_FSCK_KINDS];
	size_t n;
	struct rdfs_fsck_problem *list;	/* the first @max_problems; rdfs_fsck_report_free() */
};
/*
 * Check the metaserver's layouts and maps (server key only, else -EPERM),
 * with @repair fixing what is safe; waits up to @timeout_ms.
 */
int rdfs_fsck(struct rdfs_client *c, int repair, uint32_t max_problems, int timeout_ms,
	      struct rdfs_fsck_report *out);
void rdfs_fsck_report_free(struct rdfs_fsck_report *r);

/*
 * Quotas (docs/DESIGN.md, "Quotas"): usage and limits of a user (type 0,
 * RDFS_QUOTA_USER), group (1) or project (2). Blocks are 4 KiB blocks, every
 * copy counted; limits 0 are none; a grace_ns is the CLOCK_REALTIME time from
 * which usage above the soft limit is refused (0: not above it).
 */
#define RDFS_QUOTA_USER		0
#define RDFS_QUOTA_GROUP	1
#define RDFS_QUOTA_PROJECT	2
#define RDFS_QUOTA_TYPES	3
struct rdfs_quota {
	uint32_t type, id;
	uint64_t blocks, inodes;
	uint64_t block_soft, block_hard, inode_soft, inode_hard;
	int64_t block_grace_ns, inode_grace_ns;
};
/* rdfs_quota_set()'s @valid */
#define RDFS_QUOTA_SET_BLOCK_SOFT	1u
#define RDFS_QUOTA_SET_BLOCK_HARD	2u
#define RDFS_QUOTA_SET_INODE_SOFT	4u
#define RDFS_QUOTA_SET_INODE_HARD	8u
#define RDFS_QUOTA_SET_GRACE		16u
/*
 * One id's quota into *@out, and each type's grace period (seconds) into
 * @grace_s (NULL: not wanted). A client sees its own uid and groups; root
 * and the server key any (-EPERM).
 */
int rdfs_quota_get(struct rdfs_client *c, const struct rdfs_cred *cr, uint32_t type, uint32_t id,
		   struct rdfs_quota *out, uint64_t grace_s[RDFS_QUOTA_TYPES]);
/*
 * Set the limits @valid names of @q->type/@q->id from @q, and with
 * RDFS_QUOTA_SET_GRACE the type's grace period to @grace_s seconds. Root or
 * the server key only (-EPERM). *@out (may be @q): the quota after.
 */
int rdfs_quota_set(struct rdfs_client *c, const struct rdfs_cred *cr, const struct rdfs_quota *q,
		   uint32_t valid, uint64_t grace_s, struct rdfs_quota *out);
/*
 * Every id of @type with usage or limits, by id, from @start on: fills at
 * most @max (paging through the metaserver's replies) and returns how many it
 * filled; *@more: there are more past the last. Root or the server key only.
 */
int rdfs_quota_list(struct rdfs_client *c, const struct rdfs_cred *cr, uint32_t type,
		    uint32_t start, struct rdfs_quota *out, int max, int *more,
		    uint64_t grace_s[RDFS_QUOTA_TYPES]);

struct rdfs_extent_info {
	uint64_t file_offset;
	uint64_t length;
	uint32_t server_id;
	uint64_t block;
	int unwritten;
	int stale;			/* a copy that missed writes: never read */
	int building;			/* stale too: a new copy the metaserver is making */
};
/*
 * The extents of [off, off+len) of @ino straight from the metaserver (no cache),
 * for `rdfs layout` and tests, stale copies included; with copies, extents
 * overlap (one per copy, sorted by offset). Fills at most @max; returns the
 * count (may exceed @max).
 */
int rdfs_layout(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino, uint64_t off,
		uint64_t len, struct rdfs_extent_info *out, int max);

/* What this client asked of the servers since it started (for tests and tuning). */
struct rdfs_client_stats {
	uint64_t layout_fetches;	/* LAYOUT requests sent */
	uint64_t layout_allocs;		/* of them with allocate */
	uint64_t prealloc_bytes;	/* allocation asked for beyond what writes touched */
	uint64_t readahead_bytes;	/* bytes read ahead (READs sent by read-ahead) */
	uint64_t readahead_hit_bytes;	/* bytes of rdfs_pread() served from read-ahead */
	uint64_t write_behind_writes;	/* WRITEs sent by write-behind */
	uint64_t write_behind_bytes;	/* bytes written through write-behind */
	uint64_t write_behind_lent_bytes; /* of them sent from the writer's buffer, uncopied */
	uint64_t dir_attr_hits;		/* rdfs_getattr() answered from a change's reply */
	uint64_t layout_hits;		/* layouts found whole in the cache */
	uint64_t layout_misses;		/* layouts fetched (in one LAYOUT or more) */
	uint64_t cap_refused_fenced;	/* I/O requests refused ESTALE: fenced, layout refetched */
	uint64_t cap_refused_expired;	/* refused EKEYEXPIRED: the capability had expired */
	uint64_t cap_refused_other;	/* refused EACCES or EBADMSG: not valid for the request */
	uint64_t ms_requests[RDFS_OP_MAX]; /* requests sent to the metaserver, by opcode */
};
void rdfs_client_stats(struct rdfs_client *c, struct rdfs_client_stats *out);

#endif
