/* SPDX-License-Identifier: MIT */
/*
 * ms_keys.h - the metaserver's on-disk format: every LevelDB key and value.
 *
 * Keys start with one tag byte; integers in keys are big-endian so that
 * LevelDB's bytewise order is numeric order (a directory's entries sort by name,
 * a file's chunks by index). Integers in values are little-endian, fixed width.
 *
 *   key                                   value
 *   'F' "format"                          u32 MS_FORMAT_VERSION
 *   'C' "ino"                             u64 inode numbers below this were handed out
 *   'I' ino:be64                          inode record (below)
 *   'D' parent:be64 name                  dirent: u64 ino, u8 type (st_mode >> 12)
 *   'X' ino:be64 name                     xattr value bytes
 *   'L' ino:be64 chunk:be64               chunk record: n * extent record (below)
 *   'O' ino:be64                          empty: ino has nlink 0 and awaits reclaim
 *   'S' server_id:be32                    server record (below)
 *   'H' server_id:be32                    u64 high-water mark: no block at or above it
 *                                         was ever allocated on that server
 *   'U' volume_uuid                       u32 server_id
 *   'E' server_id:be32                    empty: the server is being drained
 *                                         (rdfs drain): no allocation there, and
 *                                         its copies count for nothing
 *   'B'                                   u32 threshold_pct: a rebalance is under
 *                                         way (rdfs rebalance; rebuild.c)
 *
 * Inode record (MS_INODE_FIXED bytes, then for symlinks the target):
 *   0 u8  version (2)       1 u32 mode      5 u32 nlink     9 u32 uid
 *  13 u32 gid              17 u32 rdev     21 u32 chunk_size
 *  25 u32 stripe_start     29 u64 size     37 u64 blocks   45 u64 parent (dirs)
 *  53 i64 atime_ns         61 i64 mtime_ns 69 i64 ctime_ns 77 u8  copies
 *  78 target bytes...
 * copies: of every chunk (a directory's: the default of what is created in it);
 * 0 is the cluster's default_copies. Version 1 records (77 fixed bytes, no
 * copies) are read as copies 0 and written back as version 2.
 * Version 3 (MS_INODE_FIXED_V3 bytes) adds 78 u8 flags, the target then
 * starting at 79: MS_INO_ACL (an 'X' system.posix_acl_access record exists),
 * MS_INO_DEFACL (system.posix_acl_default does), MS_INO_PROJINHERIT (a
 * directory: what is created in it takes its project id). A record is written
 * as version 3 only when a flag is set, so a database that never had an ACL
 * stays readable by metaservers from before ACLs, and one without the flags
 * needs no extra read to know it has no ACL.
 * Version 4 (MS_INODE_FIXED_V4 bytes) adds 79 u32 stripe_count and 83 u32
 * project, the target then starting at 87. stripe_count: how many I/O servers
 * the chunks of a file (a directory's: of what is created in it) spread over;
 * 0 is all of them, as every older record reads. project: the quota project
 * id (rdfs.project), 0 for none, as older records read. A record is written
 * as version 4 only when one of them is not 0, so a database that never had
 * one stays readable by older metaservers. Flag MS_INO_STRIPE_ID (any version
 * from 3) says stripe_start is an I/O server id chunk 0 goes to (rdfs
 * setstripe -i), not a position in the list of servers; older metaservers
 * ignore the flag and read it as a position, which places chunks elsewhere
 * but nowhere wrong. Flag MS_INO_PROJINHERIT: a directory's project id goes
 * to what is created in it.
 *
 * Extent record (MS_EXTENT_REC bytes); a chunk record lists its extents sorted
 * by offset, non-overlapping; blocks of the chunk not covered are holes:
 *   0 u32 offset in the chunk, in blocks
 *   4 u32 count of blocks
 *   8 u32 server_id
 *  12 u64 first volume block
 *  20 u8  flags: MS_EXT_UNWRITTEN (allocated, never written: reads as zeros),
 *             MS_EXT_KEPT (with UNWRITTEN: allocated by fallocate, so it stays
 *             past the end of the file at the last close, where speculative
 *             preallocation is trimmed; a write clears both),
 *             MS_EXT_STALE (a copy that missed writes: never served, never
 *             cleared; its blocks stay the file's until the copy is rebuilt or
 *             the range leaves the file)
 * With several copies, a block of the file is covered by one extent per copy,
 * each on another server: extents overlap in offset, never on one server.
 *
 * Server record: u64 capacity_blocks, then length-prefixed (u16) byte strings:
 * volume_uuid, url, name, and (since copies) domain; a record without the
 * last has none.
 *
 * The high-water mark is written with the server's first registration (0) and
 * raised, rounded up, in the write batch of any allocation that reaches it
 * (layout.c), so blocks below it may hold data of freed files and are zeroed
 * before reuse, while blocks above it are still as the volume was formatted.
 * A server record without one (a database older than the mark) counts as
 * fully used: its mark is its capacity.
 *
 * Quota usage (quota.c), kept in the same batch as the inode records that
 * move it:
 *   'F' "quota"                           u32 MS_QUOTA_FORMAT: the 'Q' records
 *                                         count every inode (missing: they are
 *                                         computed from the inodes at startup)
 *   'Q' type:u8 id:be32                   usage record (below); type
 *                                         MS_QUOTA_USER, _GROUP, _PROJECT
 *   'G' type:u8                           u64 grace period of the type, seconds
 *
 * Usage record (MS_QUOTA_REC bytes):
 *   0 u8  version (1)       1 u64 blocks     9 u64 inodes
 *  17 u64 block_soft       25 u64 block_hard 33 u64 inode_soft
 *  41 u64 inode_hard       49 i64 block_grace_ns  57 i64 inode_grace_ns
 * blocks: the sum of the blocks (every copy) of the inodes the id owns; the
 * limits are 0 for none; a grace_ns is the CLOCK_REALTIME time the soft limit
 * starts to refuse (0: usage is not above it). A record without usage and
 * limits is deleted.
 *
 * Nothing else is persisted: allocation bitmaps are rebuilt from the 'L'
 * records at startup, the file count from the 'I' records.
 */
#ifndef RDFS_MS_KEYS_H
#define RDFS_MS_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "acl.h"

#define MS_FORMAT_VERSION	1u

#define MS_TAG_FORMAT		'F'
#define MS_TAG_COUNTER		'C'
#define MS_TAG_INODE		'I'
#define MS_TAG_DIRENT		'D'
#define MS_TAG_XATTR		'X'
#define MS_TAG_LAYOUT		'L'
#define MS_TAG_ORPHAN		'O'
#define MS_TAG_SERVER		'S'
#define MS_TAG_UUID		'U'
#define MS_TAG_HIGH_WATER	'H'
#define MS_TAG_NODE		'N'	/* + node name: its generation and policy (nodes.c) */
#define MS_TAG_DRAIN		'E'	/* + server_id:be32: being drained */
#define MS_TAG_REBALANCE	'B'	/* alone: a rebalance is under way */
#define MS_TAG_QUOTA		'Q'	/* + type:u8 id:be32: usage and limits (quota.c) */
#define MS_TAG_GRACE		'G'	/* + type:u8: the type's grace period */

#define MS_INODE_FIXED_V1	77
#define MS_INODE_FIXED		78
#define MS_INODE_FIXED_V3	79
#define MS_INODE_FIXED_V4	87
/* The longest fixed part: a value buffer holds this + 4096 (a symlink's target). */
#define MS_INODE_FIXED_MAX	MS_INODE_FIXED_V4
#define MS_INODE_MAX		(MS_INODE_FIXED_V4 + 4096)	/* a record's largest size */
#define MS_INO_ACL		1u	/* inode flags (version 3 records) */
#define MS_INO_DEFACL		2u
#define MS_INO_STRIPE_ID	4u	/* stripe_start is a server id (rdfs setstripe -i) */
#define MS_INO_PROJINHERIT	8u	/* a directory's project id goes to what is created in it */
#define MS_QUOTA_FORMAT		1u
#define MS_QUOTA_REC		65
#define MS_QUOTA_KEY		6
#define MS_DIRENT_VAL		9
#define MS_EXTENT_REC		21
#define MS_EXT_UNWRITTEN	1u
#define MS_EXT_KEPT		2u
#define MS_EXT_STALE		4u
#define MS_EXT_BUILDING		8u	/* with STALE: a copy being built (rebuild.c) */

/* Longest key: tag + be64 + a 255-byte name (dirents, xattrs). */
#define MS_KEY_MAX		(1 + 8 + 256)

struct ms_inode {
	uint64_t ino;
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint32_t rdev;
	uint32_t chunk_size;
	uint32_t stripe_start;		/* a position in the up list, or with MS_INO_STRIPE_ID an id */
	uint32_t stripe_count;		/* servers the chunks spread over; 0: all */
	uint64_t size;
	uint64_t blocks;
	uint64_t parent;		/* directories: the containing directory */
	int64_t atime_ns;
	int64_t mtime_ns;
	int64_t ctime_ns;
	uint8_t copies;			/* 0: the cluster default (ms_copies()) */
	uint8_t flags;			/* MS_INO_* */
	uint32_t project;		/* quota project id; 0: none */
	/*
	 * What quota usage counts of this inode now: owner, group, project and
	 * blocks as its record holds them (inode_decode), or as the last
	 * ns_inode_put() of it into a batch. counted 0: no record counts it
	 * (a new inode). Not encoded: the usage moved by a put or a purge is
	 * the difference (quota.c).
	 */
	struct ms_charge {
		uint32_t uid, gid, project;
		uint64_t blocks;
		uint8_t counted;
	} charge;
	/* MS_INO_ACL: the access ACL, loaded by ns_inode_get() (not by inode_decode()) */
	struct ms_acl acl;
	uint32_t target_len;		/* symlinks */
	char target[4096];
};

struct ms_ext {
	uint32_t off;			/* in blocks, from the chunk start */
	uint32_t count;
	uint32_t server_id;
	uint64_t block;
	uint8_t flags;
};

void put_be64(uint8_t *p, uint64_t v);
uint64_t get_be64(const uint8_t *p);
void put_le32(uint8_t *p, uint32_t v);
uint32_t get_le32(const uint8_t *p);
void put_le64(uint8_t *p, uint64_t v);
uint64_t get_le64(const uint8_t *p);

/* Key builders: write the key into @buf (MS_KEY_MAX bytes) and return its length. */
size_t key_inode(uint8_t *buf, uint64_t ino);
size_t key_dirent(uint8_t *buf, uint64_t parent, const void *name, size_t len);
size_t key_xattr(uint8_t *buf, uint64_t ino, const char *name);
size_t key_layout(uint8_t *buf, uint64_t ino, uint64_t chunk);
size_t key_orphan(uint8_t *buf, uint64_t ino);
size_t key_server(uint8_t *buf, uint32_t id);
size_t key_high_water(uint8_t *buf, uint32_t id);
size_t key_quota(uint8_t *buf, uint32_t type, uint32_t id);
size_t key_grace(uint8_t *buf, uint32_t type);
size_t key_prefix(uint8_t *buf, char tag, uint64_t id);	/* tag + be64 */

/* Inode records. Encode returns the value length; @buf holds MS_INODE_MAX. */
size_t inode_encode(const struct ms_inode *in, uint8_t *buf);
int inode_decode(uint64_t ino, const void *val, size_t len, struct ms_inode *out);

void dirent_encode(uint64_t ino, uint32_t type, uint8_t *buf);
int dirent_decode(const void *val, size_t len, uint64_t *ino, uint32_t *type);

/* Usage records ('Q'): the values of struct ms_quota (ms.h) but type and id. */
struct ms_quota;
void quota_encode(const struct ms_quota *q, uint8_t *buf);
int quota_decode(const void *val, size_t len, struct ms_quota *out);

/* Chunk records. Decode returns the extent count or -EIO for a corrupt record. */
void extent_encode(const struct ms_ext *e, uint8_t *buf);
int chunk_decode(const void *val, size_t len, struct ms_ext *out, int max);

#endif
