/* SPDX-License-Identifier: MIT */
/*
 * ms.h - the metadata service without the network: namespace, permissions,
 * layouts and block allocation, open handles and the I/O-server registry, over
 * one LevelDB directory. server.c calls it from worker threads; the unit tests
 * call it directly.
 *
 * Every function is thread-safe and returns 0 (or a count) or -errno with
 * POSIX's errno for the operation. Every mutation is one LevelDB write batch,
 * synced before the function returns.
 *
 * Locking (documented once, here): a striped table of reader/writer locks keyed
 * by inode and by (directory, name); an operation locks every inode and entry it
 * reads-for-update or writes, all at once, in ascending stripe order, so two
 * operations can never wait on each other in a cycle. Creating, linking or
 * removing a non-directory holds the parent shared (only its times change) and
 * the name exclusive, so creates in one directory commit together (lock.c). A
 * rename across directories first takes the one rename mutex, which keeps the
 * ancestor chain still while it checks for loops. The allocator, registry,
 * open-file table and session mutexes are leaves: nothing is locked while one
 * of them is held. Inode locks are held across the synced LevelDB write of the
 * operation; the only network I/O under one is a LAYOUT's ZERO requests for the
 * recycled blocks it allocates (no other lock is held then). The high-water
 * mutex is held, under an inode lock, across the synced write of the rare
 * allocation that raises a server's high-water mark (high_water.c).
 */
#ifndef RDFS_MS_H
#define RDFS_MS_H

#include <stddef.h>
#include <stdint.h>

#define MS_ROOT_INO		1
#define MS_DEFAULT_CHUNK	(1u << 20)
/* One LAYOUT describes at most this much of a file, and at most this many extents. */
#define MS_LAYOUT_MAX_BYTES	(256ull << 20)
#define MS_LAYOUT_MAX_EXTENTS	8192
#define MS_READDIR_MAX		1024u
/* Largest file: keeps every block number and byte offset far from overflow. */
#define MS_MAX_FILE_BYTES	(1ull << 60)
#define MS_COMMIT_MAX_RANGES	4096
/*
 * Largest volume a REGISTER may bring: 256 TiB of 4 KiB blocks. The metaserver
 * keeps a map of every volume in memory, a bit a block (8 GiB for this one).
 */
#define MS_MAX_VOLUME_BLOCKS	(1ull << 36)

/* SetattrReq.valid bits */
#define MS_SET_MODE		1u
#define MS_SET_UID		2u
#define MS_SET_GID		4u
#define MS_SET_SIZE		8u
#define MS_SET_ATIME		16u
#define MS_SET_MTIME		32u
#define MS_SET_ATIME_NOW	64u
#define MS_SET_MTIME_NOW	128u
#define MS_SET_CTIME		256u

#define MS_RENAME_NOREPLACE	1u
#define MS_RENAME_EXCHANGE	2u
#define MS_XATTR_CREATE		1u
#define MS_XATTR_REPLACE	2u

struct ms;
struct ms_session;

struct ms_options {
	const char *db_dir;		/* created when missing */
	uint32_t chunk_size;		/* of the root directory on a new db; 0: MS_DEFAULT_CHUNK */
	size_t cache_bytes;		/* LevelDB block cache; 0: 32 MiB */
	/*
	 * After opening, allocation waits at most this long for the I/O servers
	 * the database knows to register again: until then, or until all have,
	 * it answers -EAGAIN (clients retry) instead of striping over the few
	 * that are up or failing. 0: no wait.
	 */
	int startup_wait_ms;
	/* copies of a chunk where the file says 0 (1..RDFS_MAX_COPIES; 0: 1) */
	uint32_t default_copies;
	/*
	 * A down I/O server's copies still count this long (ms); after that
	 * the rebuilder makes new ones elsewhere. 0: at once.
	 */
	int64_t rebuild_grace_ms;
	uint64_t rebuild_rate;		/* bytes/s the rebuilder copies at most; 0: no limit */
};

struct ms_cred {
	uint32_t uid;
	uint32_t gid;
	uint32_t ngroups;
	const uint32_t *groups;
};

struct ms_attr {
	uint64_t ino;
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	uint64_t blocks;		/* allocated 4 KiB blocks */
	int64_t atime_ns;
	int64_t mtime_ns;
	int64_t ctime_ns;
	uint32_t rdev;
	uint32_t chunk_size;
	uint32_t stripe_start;
};

/*
 * Open (creating if needed) the database at o->db_dir, rebuild the allocation
 * maps and reclaim orphans. On failure returns -errno and writes a sentence for
 * the user into @err: -EBUSY when another process holds the database.
 */
int ms_open(const struct ms_options *o, struct ms **out, char *err, size_t errlen);
void ms_close(struct ms *ms);

/*
 * What the metaserver does to the uids and gids a client node sends (NFS's
 * root_squash/all_squash with anonuid/anongid, then Lustre nodemap's id maps):
 * applied to every request of a session, whatever the request says, and
 * mapped back in the ids its replies carry (metaserver/idmap.c).
 */
enum ms_squash_mode { MS_SQUASH_NONE = 0, MS_SQUASH_ROOT = 1, MS_SQUASH_ALL = 2 };
#define MS_IDMAP_MAX 16
/* Client ids [client, client + count) are file-system ids [fs, fs + count). */
struct ms_idmap {
	uint8_t gid;			/* 0: uids, 1: gids */
	uint32_t client, fs, count;
};
struct ms_squash {
	enum ms_squash_mode mode;
	uint32_t anonuid, anongid;
	/* an id no map covers: 0 kept as sent, 1 acts as anonuid/anongid */
	uint8_t unmapped_squash;
	uint8_t nmaps;
	struct ms_idmap maps[MS_IDMAP_MAX];
};
/*
 * Apply @sq to a request's @uid/@gid and its @ngroups supplementary @groups
 * in place: squash, else map each id.
 */
void ms_squash_apply(const struct ms_squash *sq, uint32_t *uid, uint32_t *gid, uint32_t *groups,
		     uint32_t *ngroups);
/* One id of a request (chown, an ACL entry): a uid if !@gid. */
uint32_t ms_idmap_in(const struct ms_squash *sq, int gid, uint32_t id);
/* One file-system id as the node sees it (attributes, ACL entries in replies). */
uint32_t ms_idmap_out(const struct ms_squash *sq, int gid, uint32_t id);
/* Does @sq map any id back (else replies go out as they are)? */
int ms_idmap_active(const struct ms_squash *sq);
/* 0 if @sq is a policy the metaserver takes, else -EINVAL (overlaps, bad counts). */
int ms_squash_check(const struct ms_squash *sq);
/*
 * Rewrite the ids of a system.posix_acl_* xattr @value (its named user and
 * group entries) in place: to file-system ids (@in) or back to the node's.
 */
void ms_idmap_acl_xattr(const struct ms_squash *sq, int in, void *value, size_t len);

/*
 * A session is one peer connection: the identity its key proved (auth.h:
 * "server" for the server key, else a client: "client" for the shared client
 * key, "node:NAME:GEN" for a node key) and its open handles. Closing it
 * releases every handle and marks a server it registered down.
 *
 * An unlinked file lives until its last handle is released. Blocks a
 * truncate (SETATTR or O_TRUNC) takes from a file return to the allocator at
 * once, after the fence that makes the I/O servers refuse the capabilities
 * that still name them (ms_set_fencer).
 */
struct ms_session *ms_session_new(struct ms *ms, const char *identity);
/*
 * The squash every request of @s gets (default none). Any thread: a node's
 * policy change reaches its live sessions (the requests that start after it).
 */
void ms_session_set_squash(struct ms_session *s, const struct ms_squash *sq);
void ms_session_squash(struct ms_session *s, struct ms_squash *out);
/* The identity @s was opened with, and whether it is a server's. */
const char *ms_session_identity(const struct ms_session *s);
int ms_session_is_server(const struct ms_session *s);
void ms_session_close(struct ms *ms, struct ms_session *s);
/*
 * Tests of crashes only: free what a process that died leaves of @s (its
 * memory), releasing nothing; the metaserver it belonged to may be closed.
 */
void ms_session_discard(struct ms_session *s);

int ms_lookup(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name,
	      struct ms_attr *out);
int ms_getattr(struct ms *ms, uint64_t ino, struct ms_attr *out);

struct ms_setattr {
	uint32_t valid;			/* MS_SET_* */
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	int64_t atime_ns;
	int64_t mtime_ns;
	int64_t ctime_ns;
	uint64_t handle;		/* open handle of @s, 0 for none */
};
int ms_setattr(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	       const struct ms_setattr *sa, struct ms_attr *out);

/*
 * Create a non-directory (S_IFREG when the type bits are 0). With @open the
 * file is also opened with @open_flags and *@handle set; an existing file is
 * then opened (unless @exclusive: -EEXIST) like open(O_CREAT).
 *
 * @umask (of mknod and mkdir) is the caller's, taken from the mode unless the
 * parent has a default ACL (which the new inode inherits instead, as
 * POSIX.1e says); 0 from a client that applied it to @mode itself.
 */
int ms_mknod(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t parent,
	     const char *name, uint32_t mode, uint32_t umask, uint32_t rdev, int exclusive,
	     int open, uint32_t open_flags, struct ms_attr *out, uint64_t *handle);
int ms_mkdir(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name,
	     uint32_t mode, uint32_t umask, struct ms_attr *out);
int ms_unlink(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name);
int ms_rmdir(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name);
int ms_rename(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, uint32_t flags);
int ms_link(struct ms *ms, const struct ms_cred *cr, uint64_t ino, uint64_t newparent,
	    const char *newname, struct ms_attr *out);
int ms_symlink(struct ms *ms, const struct ms_cred *cr, uint64_t parent, const char *name,
	       const char *target, struct ms_attr *out);
/* @buf must hold 4096 bytes; returns the target length (NUL-terminated). */
int ms_readlink(struct ms *ms, const struct ms_cred *cr, uint64_t ino, char *buf);

struct ms_dirent {
	uint8_t namelen;
	char name[256];			/* NUL-terminated */
	uint64_t ino;
	uint32_t type;			/* st_mode >> 12 */
};
/*
 * Entries of directory @ino in name order strictly after @after (NULL/0: from
 * the start), at most @max (0 or more than MS_READDIR_MAX: MS_READDIR_MAX) into
 * @out. Returns the count; *@eof is 1 when the directory has no more entries.
 */
int ms_readdir(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const void *after,
	       size_t afterlen, uint32_t max, struct ms_dirent *out, int *eof);

struct ms_statfs {
	uint64_t total_blocks;
	uint64_t free_blocks;
	uint64_t files;
	uint64_t free_files;
};
int ms_statfs(struct ms *ms, struct ms_statfs *out);

/* *@value is malloc'ed (free()); returns its length. */
int ms_getxattr(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name,
		void **value);
int ms_setxattr(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name,
		const void *value, size_t len, uint32_t flags);
/* *@names: malloc'ed array of malloc'ed names (ms_names_free); returns the count. */
int ms_listxattr(struct ms *ms, const struct ms_cred *cr, uint64_t ino, char ***names);
void ms_names_free(char **names, int n);
int ms_removexattr(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const char *name);

/* Check access for @flags (O_ACCMODE, O_TRUNC truncates) and open a handle of @s. */
int ms_open_file(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
		 uint32_t flags, struct ms_attr *out, uint64_t *handle);
int ms_release(struct ms *ms, struct ms_session *s, uint64_t handle);

#define MS_ALLOC_KEEP	2
/* Or'ed into ms_layout()'s @allocate: describe stale copies too (rdfs layout). */
#define MS_LAYOUT_WITH_STALE	0x100

struct ms_extent {
	uint64_t file_offset;
	uint64_t length;
	uint32_t server_id;
	uint64_t block;
	int unwritten;
	int stale;			/* a copy that missed writes (MS_LAYOUT_WITH_STALE) */
	int building;			/* stale too: a new copy being made (rebuild.c) */
};
struct ms_layout {
	uint64_t offset;		/* range described, block-aligned */
	uint64_t length;
	uint64_t size;
	uint32_t chunk_size;
	uint32_t rights;		/* RDFS_CAP_READ/WRITE: what the caller may do */
	uint32_t gen;			/* the file's layout generation (fencing) */
	uint64_t incarnation;		/* this start of the metaserver (ms_incarnation) */
	size_t n;
	struct ms_extent *ext;		/* malloc'ed; ms_layout_free() */
};
/*
 * The extents of [@off, @off + @len) rounded out to blocks (@len 0: to the end
 * of the file), capped at MS_LAYOUT_MAX_BYTES / MS_LAYOUT_MAX_EXTENTS (out->length
 * says what was described). With @allocate the holes of the range are
 * allocated first, striped over the up servers, as unwritten extents (as many
 * copies of each as the file's copies say, each on another server); with
 * @allocate MS_ALLOC_KEEP (fallocate) they, and the unwritten blocks already
 * in the range, stay past the end of the file at its last close.
 * @handle (0 for none) is an open handle of @s that grants access.
 *
 * An allocation for writing is written without a sync when it raises no
 * high-water mark: the COMMIT of the data written there is synced after it,
 * which makes both durable, so a create-write-close costs one sync less. A
 * crash of the machine may lose such an allocation; the client's COMMIT then
 * names another incarnation and finds holes where it wrote (ms_commit_from).
 * fallocate's allocations (MS_ALLOC_KEEP) are what the caller was promised,
 * so they are synced.
 */
int ms_layout(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	      uint64_t off, uint64_t len, int allocate, uint64_t handle, struct ms_layout *out);
void ms_layout_free(struct ms_layout *l);

/*
 * FALLOC_FL_PUNCH_HOLE: the whole blocks inside [@off, @off + @len) leave the
 * file (fenced, then free); they read as zeros. The size is kept; the caller
 * zeroes the bytes of the partial blocks at either end itself. Needs write
 * access (or a writing @handle of @s).
 */
int ms_punch(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	     uint64_t off, uint64_t len, uint64_t handle, struct ms_attr *out);
/*
 * FALLOC_FL_COLLAPSE_RANGE (@insert 0): the blocks of [@off, @off + @len) leave
 * the file (fenced, then free) and everything after moves down by @len; or
 * FALLOC_FL_INSERT_RANGE: everything from @off on moves up by @len, leaving a
 * hole. Only block-aligned @off and @len (-EINVAL otherwise), a collapse that
 * ends before the end of the file, an insert that starts inside it (-EINVAL),
 * as ext4. The data stays in its blocks: only the layout changes, and the file
 * is fenced. -EBUSY while the rebuilder copies part of the moved range.
 */
int ms_shift(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	     uint64_t off, uint64_t len, int insert, uint64_t handle, struct ms_attr *out);

/* A byte range of a file, block-aligned (COMMIT rounds it out to blocks). */
struct ms_range {
	uint64_t offset;
	uint64_t length;
};
/*
 * The copy on server @server_id of the blocks of @ranges (rounded out to
 * blocks) missed writes the other copies took: mark it stale, so it is never
 * described to a client again, and fence the file, so capabilities that name it
 * are refused. -EIO where it is the only current copy of a block (each range
 * is marked whole or not at all; the ones before it stay marked); blocks it
 * has no copy of are skipped. Needs write access (or a
 * writing @handle of @s).
 */
int ms_stale(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	     uint64_t handle, uint32_t server_id, const struct ms_range *ranges, size_t n);
/*
 * The data of @written is on the I/O servers: clear their unwritten flags, raise
 * the size to at least @size, set mtime to @mtime_ns (0: now) and ctime to now.
 */
int ms_commit(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
	      uint64_t size, int64_t mtime_ns, const struct ms_range *written, size_t n,
	      uint64_t handle, struct ms_attr *out);
/*
 * ms_commit() of writes made under layouts of metaserver incarnation
 * @incarnation (0: not known, as ms_commit). When that is not this start's
 * (ms_incarnation(); RDFS_INCARNATION_MIXED never is), an allocation they
 * went to may have been lost with the machine (ms_layout): every block of
 * @written must then lie in an extent, or nothing is committed and the
 * answer is -ESTALE (the client reports those writes lost).
 */
int ms_commit_from(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
		   uint64_t size, int64_t mtime_ns, const struct ms_range *written, size_t n,
		   uint64_t handle, uint64_t incarnation, struct ms_attr *out);
/* This start's incarnation: random, never 0. */
uint64_t ms_incarnation(const struct ms *ms);
/*
 * LevelDB writes since the start: synced ones, the mutations they carried
 * (group commit) and writes made without a sync (ms_layout's allocations).
 */
void ms_write_counts(struct ms *ms, uint64_t *syncs, uint64_t *mutations, uint64_t *unsynced);

/*
 * I/O-server registry. Only a server session may register (-EPERM); a volume
 * whose I/O server is registered and up on another session is refused (-EBUSY).
 * @pristine only counts at the first registration of @uuid: the I/O server
 * vouches that every block of the volume reads as zeros, so the server's
 * high-water mark starts at 0; otherwise it starts at the capacity and every
 * block is zeroed before its first use. A known uuid keeps its mark.
 * @domain is the server's failure domain ("": one of its own): copies of a
 * chunk go to distinct domains where there are enough. A known volume may
 * come back larger, never smaller than the blocks in use on it, and none may
 * be larger than MS_MAX_VOLUME_BLOCKS (-EINVAL).
 */
int ms_register(struct ms *ms, struct ms_session *s, const char *url, const void *uuid,
		size_t uuid_len, uint64_t capacity_blocks, const char *name, const char *domain,
		int pristine, uint32_t *id, uint64_t *epoch);
/*
 * The epoch of server @id's current registration (0: never registered in this
 * run): capabilities for it carry it, and it refuses those of older epochs.
 */
uint64_t ms_server_epoch(struct ms *ms, uint32_t id);

/* Longest label an admin gives an I/O server (rdfs servers label). */
#define MS_LABEL_MAX		127

struct ms_server_info {
	uint32_t id;
	char url[256];
	char name[256];
	char domain[64];
	uint8_t uuid[64];
	size_t uuid_len;
	uint64_t capacity_blocks;
	uint64_t free_blocks;
	int up;
	int draining;
	int read_only;			/* no new blocks there (ms_server_set) */
	char label[MS_LABEL_MAX + 1];
};

/*
 * Client nodes: each has its own key (auth.h), a generation that a new key or a
 * revocation moves past every older key, and a squash policy.
 */
#define MS_NODE_NAME_MAX 40
struct ms_node {
	char name[MS_NODE_NAME_MAX + 1];
	uint32_t generation;
	int revoked;
	struct ms_squash squash;
};
/*
 * Add node @name or change it (servers only: -EPERM). @new_key, a revoked or
 * an unknown node starts a new generation; @policy (NULL: keep; a new node
 * gets root squash) replaces the squash policy. *@out: the node now.
 * -EINVAL for a bad name or policy, -EKEYREVOKED to change a revoked node
 * without a new key.
 */
int ms_node_set(struct ms *ms, struct ms_session *s, const char *name, int new_key,
		const struct ms_squash *policy, struct ms_node *out);
/* Revoke @name's key (servers only): -ENOENT for an unknown node. */
int ms_node_revoke(struct ms *ms, struct ms_session *s, const char *name, struct ms_node *out);
/* All nodes, by name; the count or -errno. Free *@out. */
int ms_node_list(struct ms *ms, struct ms_session *s, struct ms_node **out);
/*
 * May the node identity @id ("NAME:GEN") connect? 0 with its squash policy, or
 * -EACCES (unknown node, revoked, or an older generation's key).
 */
int ms_node_admit(struct ms *ms, const char *id, struct ms_squash *squash);

/* *@out is malloc'ed (free()); returns the count, sorted by id. */
int ms_server_list(struct ms *ms, struct ms_server_info **out);
/*
 * rdfs servers: give I/O server @id the label @label (NULL: keep it; "":
 * none) and with @read_only 1 make it read-only (0: not; -1: keep). A
 * read-only server gets no new blocks (allocation, the rebuilder's new
 * copies and the rebalance pass it by) while what it holds stays readable
 * and writable in place, and its copies keep counting. Persisted with the
 * server's record, across registrations. Servers only (-EPERM); -ENOENT for
 * an unknown id, -EINVAL for a label longer than MS_LABEL_MAX or with a
 * control character.
 */
int ms_server_set(struct ms *ms, struct ms_session *s, uint32_t id, const char *label,
		  int read_only);
/* URL of server @id into @buf; -ENOENT when unknown. */
int ms_server_url(struct ms *ms, uint32_t id, char *buf, size_t len);

/*
 * Zeroing recycled blocks. A freed block may still hold the data of the file
 * it belonged to, and a client writes only the bytes it has, so every block a
 * LAYOUT allocates must read as zeros first. Blocks at or above a server's
 * high-water mark were never allocated since its volume was formatted and read
 * as zeros already; ms_layout() hands the runs below it, before recording the
 * allocation, to the zeroer, which must make them read as zeros on their I/O
 * servers, durably, and return 0, or -errno (the LAYOUT then fails with -EIO
 * and allocates nothing). The zeroer runs on the calling thread with the
 * file's inode lock held and no other lock. Without a zeroer (the core alone,
 * as in unit tests) recycled blocks are handed out as they are.
 */
struct ms_zero_range {
	uint32_t server_id;
	uint64_t block;
	uint64_t count;
};
typedef int (*ms_zero_fn)(void *arg, const struct ms_zero_range *r, size_t n);
/* Set (or with NULL clear) the zeroer; not while requests run. */
void ms_set_zeroer(struct ms *ms, ms_zero_fn fn, void *arg);
/*
 * Taking blocks back (docs/DESIGN.md, "Taking blocks back"). Whenever blocks
 * leave a file (truncate, unlink, the reclaim of an orphan, a rename over it)
 * or a chmod/chown may take rights away, the file's layout generation moves
 * on and the fencer tells each up I/O server holding its blocks to refuse
 * capabilities of older generations; the blocks return to the allocator once
 * their server has answered. A server that cannot be told keeps its blocks
 * out of the allocator until it registers again (a new registration epoch
 * fences everything older there). The fencer gets the servers to tell and
 * fills @status per server (0 or -errno); it runs on the calling thread with
 * the file's inode lock held. Without one (the core alone, as in unit tests)
 * blocks are freed at once.
 */
typedef void (*ms_fence_fn)(void *arg, const uint32_t *servers, size_t n, uint64_t ino,
			    uint32_t gen, int *status);
/* Set (or with NULL clear) the fencer; not while requests run. */
void ms_set_fencer(struct ms *ms, ms_fence_fn fn, void *arg);
/*
 * With @on, the blocks of files gone for good (unlinked, an orphan's last
 * close, a rename over them) are fenced and freed by a thread of their own
 * after the operation's reply, not on its thread before it (freeing.c); an
 * allocation short of space waits for them. Off (the default) drains what is
 * queued first. Needs the fencer, which must stay set while it is on.
 * 0 or -errno (no thread).
 */
int ms_set_freeing_async(struct ms *ms, int on);
/* Files queued for their fence so far, files fenced and freed, blocks waiting. */
void ms_freeing_stats(struct ms *ms, uint64_t *queued, uint64_t *done, uint64_t *blocks);
/* The layout generation of @ino now (capabilities carry it). */
uint32_t ms_file_gen(struct ms *ms, uint64_t ino);
/* Blocks of server @id waiting for it to register again (a fence it missed). */
uint64_t ms_blocks_held(struct ms *ms, uint32_t id);

/* The high-water mark of server @id (this process's view, for tests): 0 or -ENOENT. */
int ms_high_water(struct ms *ms, uint32_t id, uint64_t *mark);

/*
 * A copy of the allocation bitmap of server @id (bit b set: block b in use), for
 * tests and fsck. *@words is malloc'ed; returns 0 or -ENOENT.
 */
int ms_alloc_bitmap(struct ms *ms, uint32_t id, uint64_t **words, uint64_t *nblocks);

/*
 * fsck (fsck.c): every layout against the allocation maps, the high-water
 * marks, the orphans and the namespace, on a live metaserver. Kinds are wire
 * values (FsckProblem.kind): append, never renumber.
 */
enum ms_fsck_kind {
	MS_FSCK_LEAKED = 1,		/* in use in a map, owned by no layout */
	MS_FSCK_DOUBLE = 2,		/* owned twice: ino is the owner found second (0: a
					   held range); the first is not named */
	MS_FSCK_OUT_OF_RANGE = 3,	/* past its volume's end, or on an unknown server */
	MS_FSCK_ABOVE_HIGH_WATER = 4,	/* at or above its server's persisted mark */
	MS_FSCK_UNMAPPED = 5,		/* owned, but free in the map: could be handed out */
	MS_FSCK_LAYOUT_NO_INODE = 6,	/* layout records of an inode that does not exist */
	MS_FSCK_ORPHAN_LEAKED = 7,	/* unlinked, open nowhere, still holding its blocks */
	MS_FSCK_UNLINKED_NO_ORPHAN = 8,	/* nlink 0 without an orphan record */
	MS_FSCK_STALE_ORPHAN = 9,	/* an orphan record of a linked or missing inode */
	MS_FSCK_BLOCK_COUNT = 10,	/* the inode's block count is not its extents' */
	MS_FSCK_DANGLING_ENTRY = 11,	/* an entry of directory ino names missing other_ino */
	MS_FSCK_LINK_COUNT = 12,	/* a non-directory's nlink is not its entry count */
	MS_FSCK_CORRUPT = 13,		/* a record that does not decode */
	MS_FSCK_QUOTA_BLOCKS = 14,	/* a usage record's blocks are not its inodes': ino is
					   the id, server_id the type, block/count the two */
	MS_FSCK_QUOTA_INODES = 15,	/* the same for its inode count */
	MS_FSCK_QUOTA_CORRUPT = 16,	/* a usage record that does not decode (ino: the id,
					   server_id: the type; 0 for a key without an id) */
	MS_FSCK_KINDS
};

struct ms_fsck_problem {
	uint32_t kind;			/* enum ms_fsck_kind */
	uint64_t ino;
	uint64_t other_ino;
	uint32_t server_id;
	uint64_t block, count;		/* a block run, or the two counts that differ */
	int repaired;
};

struct ms_fsck_report {
	uint64_t inodes, files, dirs, extents, orphans_open;
	uint64_t blocks_owned;		/* by layouts */
	uint64_t blocks_mapped;		/* in use in the maps */
	uint64_t blocks_held;		/* freed, waiting for their server's next epoch */
	uint64_t blocks_quarantined;	/* leaked ones a repair freed, waiting out capabilities */
	uint64_t counts[MS_FSCK_KINDS];	/* problems by kind */
	uint64_t problems, repaired;
	size_t n;			/* the first problems, at most the max asked for */
	struct ms_fsck_problem *p;
};

/*
 * Check everything; with @repair also fix what is safe to fix: leaked orphans
 * and unlinked inodes are reclaimed, layouts without an inode freed (fenced
 * first, as any freed blocks), block counts, quota usage and high-water
 * marks corrected, stale orphan records dropped, owned blocks marked in the
 * map, and blocks only the map holds quarantined for @quarantine_ns (a
 * capability may still name them: they are freed when every capability
 * granted before now has expired). Doubly owned blocks, out-of-range extents, dangling entries and
 * wrong link counts are only reported. Servers only (-EPERM); one at a time.
 */
int ms_fsck(struct ms *ms, struct ms_session *s, int repair, int64_t quarantine_ns, size_t max,
	    struct ms_fsck_report *out);
void ms_fsck_report_free(struct ms_fsck_report *r);
/* Tests only: mark blocks of server @id used (@used) or free in the map, as a bug would. */
int ms_debug_map(struct ms *ms, uint32_t id, uint64_t block, uint64_t count, int used);
/*
 * Tests only: the next @n synced writes fail with -EIO and write nothing, as
 * a disk that refuses them would.
 */
void ms_debug_fail_writes(struct ms *ms, int n);

/*
 * rdfs drain: with @on, no new block goes to I/O server @id and its copies
 * count for nothing, so the rebuilder copies its chunks to the other servers
 * and then drops them from it; without, it is an ordinary server again.
 * Persisted. Servers only (-EPERM); -ENOENT for an unknown id.
 */
int ms_drain(struct ms *ms, struct ms_session *s, uint32_t id, int on);

/* ---------------------------------------------------------------- copies: the rebuilder */

/*
 * Copy @count blocks of @ino from @src_block of I/O server @src to @dst_block
 * of @dst, server to server (COPY), with capabilities of generation @gen.
 * 0 once they are durable there, or -errno.
 */
typedef int (*ms_copy_fn)(void *arg, uint64_t ino, uint32_t gen, uint32_t dst,
			  uint64_t dst_block, uint32_t src, uint64_t src_block, uint64_t count);
/* Who copies for the rebuilder; NULL: no new copy is made (stale and extra ones still go). */
void ms_set_copier(struct ms *ms, ms_copy_fn fn, void *arg);

struct ms_rebuild_stats {
	uint64_t chunks_under;		/* with fewer copies than their file's */
	uint64_t chunks_lost;		/* with blocks no copy that counts holds */
	uint64_t chunks_building;	/* being copied now (0 or 1) */
	uint64_t chunks_rebuilt;	/* got a new copy in the pass */
	uint64_t copies_dropped;	/* extra copies taken away in the pass */
	uint64_t stale_freed;		/* chunks whose stale copies were freed */
	uint64_t bytes_copied;
	uint64_t copies_moved;		/* copies moved to another server (rebalance, domains) */
	uint64_t bytes_moved;		/* of those, by the rebalance */
	uint64_t work_left;		/* chunks found needing work past the pass's limit */
	uint64_t passes;		/* ms_rebuild_status(): passes finished since the start */
};
/*
 * One pass of the rebuilder over every chunk: counts what is under-replicated
 * or lost, and repairs at most @max_chunks (stale copies freed, extra copies
 * dropped, one new copy each). Copies that count are on servers up or down for
 * less than the grace. Then, within what is left of @max_chunks, it moves
 * copies: two in one failure domain apart, and for an rdfs rebalance from the
 * fullest servers to the emptiest. Only one caller at a time.
 */
int ms_rebuild_pass(struct ms *ms, size_t max_chunks, struct ms_rebuild_stats *out);
/* What the last pass found, and whether a chunk is being copied now. */
void ms_rebuild_status(struct ms *ms, struct ms_rebuild_stats *out);

/*
 * rdfs rebalance: with @on, the rebuilder's passes also move copies from the
 * I/O servers (up, not drained) whose used fraction is above the cluster's to
 * the ones below it until every server is within @threshold_pct/2 percentage
 * points of the cluster's fraction (@threshold_pct 0: MS_REBALANCE_PCT), then
 * the request is cleared; without, stop. Persisted. Servers only (-EPERM);
 * -EINVAL for a threshold above 100.
 */
#define MS_REBALANCE_PCT	10
int ms_rebalance(struct ms *ms, struct ms_session *s, int on, uint32_t threshold_pct);

struct ms_rebalance_status {
	int active;
	uint32_t threshold_pct;		/* of the one active, or of the last one */
	uint64_t bytes_moved;		/* since it was asked (this run of the metaserver) */
	uint32_t outside;		/* servers outside the band at the last pass */
};
void ms_rebalance_status(struct ms *ms, struct ms_rebalance_status *out);

/* ---------------------------------------------------------------- the subtree walk (walk.c) */

#define MS_WALK_MAX		4096		/* entries one batch lists at most */
#define MS_WALK_VISIT		16384		/* entries one batch looks at at most */
#define MS_WALK_PATH_BYTES	(384u << 10)	/* path bytes one batch lists at most: with
						   4096 attributes, under RDFS_MAX_BODY */
#define MS_WALK_PATH_MAX	65535		/* longest path (and cursor) below the start */

struct ms_walk_entry {
	size_t path_off;		/* in ms_walk.paths, NUL-terminated, relative to the start */
	size_t path_len;
	struct ms_attr attr;
	int denied;			/* a directory the caller may not list: not walked into */
};

/* One batch of a walk; ms_walk_free(). */
struct ms_walk {
	size_t n, cap;
	struct ms_walk_entry *e;
	char *paths;
	size_t paths_len, paths_cap;
	char *cursor;			/* the last path visited: where the next batch resumes */
	size_t cursor_len;
	int eof;			/* nothing is left after this batch */
	/* what the batch visited, but for the non-directories it lists in a summary */
	uint64_t files, dirs, others, bytes, blocks, denied;
};

/*
 * rdfs du and find: walk the tree under directory @ino depth first, entries
 * of a directory in name order, each directory before what it holds, from
 * strictly after @cursor (a path relative to @ino as a batch returned it;
 * NULL/0: from the start) for one bounded batch: at most @max entries (0 or
 * more than MS_WALK_MAX: MS_WALK_MAX) listed, MS_WALK_VISIT looked at and
 * MS_WALK_PATH_BYTES of paths. out->cursor resumes it; out->eof says the
 * walk is done. No lock is held: what changes during a walk may be seen or
 * not, as by find(1) on a live file system; a cursor whose entries are gone
 * resumes after where they were.
 *
 * Only what @cr could list is walked (root: everything): the entries of a
 * directory it may read and search; one it may not is listed with denied
 * and not walked into. @ino itself needs read and search (-EACCES).
 *
 * Without @summary every entry visited is listed. With it (du -s) the sums
 * carry the entries instead, and only the ones the caller must see are
 * listed: non-directories with more than one link (not in the sums: count
 * each inode once) and the denied directories (in the sums).
 * -ENOTDIR, -ENOENT, -ENAMETOOLONG for a path longer than MS_WALK_PATH_MAX.
 */
int ms_walk(struct ms *ms, const struct ms_cred *cr, uint64_t ino, const void *cursor,
	    size_t cursor_len, uint32_t max, int summary, struct ms_walk *out);
void ms_walk_free(struct ms_walk *w);

/* ---------------------------------------------------------------- quotas (quota.c) */

/*
 * Block and inode usage per user, group and project, with soft and hard
 * limits (docs/DESIGN.md, "Quotas"). Usage is the sum of the blocks (every
 * copy: in->blocks) and the count of the inodes an id owns, kept exact in the
 * batch of every change that moves it. Project 0 is no project: not counted.
 * Types are wire values (Quota.type).
 */
enum ms_quota_type {
	MS_QUOTA_USER = 0,
	MS_QUOTA_GROUP = 1,
	MS_QUOTA_PROJECT = 2,
	MS_QUOTA_TYPES
};
#define MS_QUOTA_GRACE_DEFAULT_S	(7 * 24 * 3600)
#define MS_QUOTA_LIST_MAX		4096u	/* usage records of one QUOTA_LIST reply */

struct ms_quota {
	uint32_t type;
	uint32_t id;
	uint64_t blocks;		/* 4 KiB blocks, every copy */
	uint64_t inodes;
	uint64_t block_soft, block_hard;	/* 0: no limit */
	uint64_t inode_soft, inode_hard;
	/* CLOCK_REALTIME ns from which the soft limit refuses; 0: not above it */
	int64_t block_grace_ns, inode_grace_ns;
};

/* ms_quota_set()'s @valid: which limits (or the type's grace period) change */
#define MS_QUOTA_SET_BLOCK_SOFT	1u
#define MS_QUOTA_SET_BLOCK_HARD	2u
#define MS_QUOTA_SET_INODE_SOFT	4u
#define MS_QUOTA_SET_INODE_HARD	8u
#define MS_QUOTA_SET_GRACE	16u

/*
 * The usage and limits of @id of @type (zeros when it has neither). A
 * client may ask for its own uid and its groups; a server session or uid 0
 * for anything: else -EPERM. -EINVAL for a bad type.
 */
int ms_quota_get(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint32_t type,
		 uint32_t id, struct ms_quota *out);
/*
 * Set the limits of q->type, q->id that @valid names from @q (0 removes a
 * limit), and with MS_QUOTA_SET_GRACE the type's grace period to
 * @grace_s seconds (at most ten years). Usage above a soft limit set now
 * starts its grace now. A server session or uid 0 only (-EPERM); -EINVAL for
 * limits of project 0. *@q: the record after.
 */
int ms_quota_set(struct ms *ms, struct ms_session *s, const struct ms_cred *cr,
		 struct ms_quota *q, uint32_t valid, uint64_t grace_s);
/* The grace period of @type, seconds. */
uint64_t ms_quota_grace(struct ms *ms, uint32_t type);
/*
 * Every usage record of @type with id >= @start, by id, at most @max (0 or
 * above MS_QUOTA_LIST_MAX: that) into the malloc'ed *@out. Returns the count;
 * *@more: records are left. A server session or uid 0 only (-EPERM).
 */
int ms_quota_list(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint32_t type,
		  uint32_t start, uint32_t max, struct ms_quota **out, int *more);

/* ---------------------------------------------------------------- metrics */

struct metrics;
/*
 * Register what the core measures in @r (metrics.h): synced LevelDB writes
 * (their duration, and how many were in progress together as each started),
 * the I/O servers (up, draining, capacity and free bytes), inodes, the
 * rebuilder's last pass and the rebalance. Before requests run; @r must
 * outlive @ms's requests and be rendered only while @ms is open. 0 or -EINVAL.
 */
int ms_metrics_register(struct ms *ms, struct metrics *r);

#endif
