/* SPDX-License-Identifier: MIT */
/*
 * volume.h - the I/O server's volume: a regular file or block device exported
 * as numbered 4 KiB blocks.
 *
 * On-disk layout (all integers little-endian):
 *
 *   [0, 1 MiB)                    superblock area; the superblock is its first 4 KiB
 *   [1 MiB + b * 4096, + 4096)    protocol block b, 0 <= b < capacity_blocks
 *
 * Superblock (struct fields at byte offsets):
 *
 *    0  char[8] magic            VOLUME_MAGIC, "RDFSVOL1"
 *    8  u32     version          VOLUME_VERSION
 *   12  u32     block_size       4096
 *   16  u8[16]  uuid             random, names the volume to the metaserver
 *   32  u64     capacity_blocks  data blocks (the superblock area not counted)
 *   40  u64     data_offset      1 MiB
 *   48  u8[8]   checksum         first 8 bytes of SHA-256 over bytes [0, 48)
 *   56  u32     flags            VOLUME_FLAG_*
 *   60  u32     flags_check      ~flags; when it does not match, flags count as 0
 *
 * The rest of the first MiB is reserved and zero. The flags lie outside the
 * checksum so volumes formatted before they existed (zeros there: no flags)
 * still open; a damaged flags word reads as no flags, the safe meaning.
 *
 * VOLUME_FLAG_PRISTINE: every data block reads as zeros. Set only when
 * volume_open creates the sparse file itself (never for --format of an
 * existing file or device, whose blocks may hold anything); cleared for good
 * before the volume is first offered to a metaserver, which then trusts
 * blocks it never allocated to read as zeros (see ms_register()).
 *
 * I/O goes through O_DIRECT when the file system allows it, so block-aligned
 * requests move between the caller's aligned buffer and the disk without the
 * page cache. Partial-block writes are read-modify-write in an aligned bounce
 * buffer; writes hold a range lock on the blocks they touch so two partial writes
 * of one block (different bytes) both land, and a partial write never
 * resurrects old bytes of a concurrent full-block write.
 *
 * Every function returns 0 or -errno; none logs (the caller decides what an
 * error means to the user).
 */
#ifndef RDFS_IOS_VOLUME_H
#define RDFS_IOS_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VOLUME_MAGIC		"RDFSVOL1"
#define VOLUME_VERSION		1u
#define VOLUME_BLOCK_SIZE	4096u
#define VOLUME_DATA_OFFSET	(1ull << 20)
#define VOLUME_UUID_LEN		16
#define VOLUME_FLAG_PRISTINE	1u

struct volume;

struct volume_open_opts {
	const char *path;
	/*
	 * When @path does not exist: create a sparse regular file of this many
	 * bytes and format it. 0: a missing path is -ENOENT.
	 */
	uint64_t create_size;
	/*
	 * Format an existing volume that has no valid superblock. A volume that
	 * already holds an rdfs superblock is never reformatted.
	 */
	bool format;
};

/*
 * Open (creating/formatting as @o says) the volume.
 * Errors: -ENOENT (missing, no create_size), -EMEDIUMTYPE (no rdfs superblock
 * and !format), -EUCLEAN (superblock corrupt, unknown version, or the volume is
 * shorter than its capacity), -EFBIG (create_size/device too small for one data
 * block), -ENOTBLK (neither a regular file nor a block device), -EBUSY (another
 * process has the volume open, still after 2 s: volumes are locked with flock), -errno of
 * open/read/write.
 */
int volume_open(const struct volume_open_opts *o, struct volume **out);
/* Flushes (fdatasync) and closes. */
void volume_close(struct volume *v);

const uint8_t *volume_uuid(const struct volume *v);	/* VOLUME_UUID_LEN bytes */
uint64_t volume_capacity(const struct volume *v);	/* data blocks */
/* True when the volume was opened O_DIRECT (false: the file system refused it). */
bool volume_is_direct(const struct volume *v);
/* True when volume_open formatted the volume in this call. */
bool volume_was_formatted(const struct volume *v);
/* True while the superblock says every data block reads as zeros (see above). */
bool volume_is_pristine(const struct volume *v);
/*
 * Clear the pristine flag in the superblock, durably; 0 or -errno (the
 * volume then still counts as pristine). Not concurrently with itself.
 */
int volume_clear_pristine(struct volume *v);

/*
 * Validate an I/O request: bytes [head, head + length) of blocks
 * [first, first + count). -EINVAL for count == 0, head >= 4096,
 * head + length > count * 4096, or length over @max_length; -ERANGE when a block
 * lies past the capacity.
 */
int volume_check_io(const struct volume *v, uint64_t first, uint64_t count, uint32_t head,
		    uint32_t length, uint32_t max_length);

/* Number of blocks that bytes [head, head + length) of a range starting at a block touch. */
static inline uint64_t volume_blocks_touched(uint32_t head, uint32_t length)
{
	return length ? ((uint64_t)head + length + VOLUME_BLOCK_SIZE - 1) / VOLUME_BLOCK_SIZE : 0;
}

/*
 * Read whole blocks [first, first + count) into @buf, which must be 4096-aligned
 * and count * 4096 bytes long. Concurrent writes to the blocks may or may not be
 * visible.
 */
int volume_read_blocks(struct volume *v, uint64_t first, uint64_t count, void *buf);

/*
 * Write @length bytes of @data at byte @head of block @first (head < 4096).
 * Whole blocks go straight from @data when it is 4096-aligned; partial blocks
 * are read-modify-written. @stable: return only once the data is durable
 * (else a later volume_sync() makes it so).
 */
int volume_write(struct volume *v, uint64_t first, uint32_t head, const void *data,
		 uint32_t length, bool stable);

/* Make every completed write durable (fdatasync). */
int volume_sync(struct volume *v);

/*
 * Make blocks [first, first + count) read as zeros, durably, before returning:
 * FALLOC_FL_ZERO_RANGE, else punching a hole, else (block devices) BLKZEROOUT,
 * else writing zeros. Holds the blocks' range lock, so it is ordered against
 * concurrent writes of those blocks like any other write.
 */
int volume_zero(struct volume *v, uint64_t first, uint64_t count);
/* volume_zero() for a caller that already holds the blocks' range lock. */
int volume_zero_locked(struct volume *v, uint64_t first, uint64_t count);

/*
 * For the io_uring engine (io_internal.h), which does its own reads and writes:
 * the volume's descriptor (O_DIRECT when volume_is_direct(); durable writes
 * pass RWF_DSYNC), the byte offset of a block, and the range lock every writer
 * of the volume takes.
 */
int volume_fd(const struct volume *v);
uint64_t volume_block_offset(uint64_t block);
struct range_lock *volume_range_lock(struct volume *v);

#endif
