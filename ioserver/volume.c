// SPDX-License-Identifier: MIT
/*
 * volume.c - the I/O server's volume: superblock, block reads, stable and
 * unstable writes with read-modify-write of partial blocks, zeroing of blocks
 * (see volume.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "range_lock.h"
#include "volume.h"

#define SB_OFF_MAGIC		0
#define SB_OFF_VERSION		8
#define SB_OFF_BLOCK_SIZE	12
#define SB_OFF_UUID		16
#define SB_OFF_CAPACITY		32
#define SB_OFF_DATA_OFFSET	40
#define SB_OFF_CHECKSUM		48
#define SB_CHECKSUM_LEN		8
#define SB_OFF_FLAGS		56
#define SB_OFF_FLAGS_CHECK	60

_Static_assert(sizeof(VOLUME_MAGIC) - 1 == 8, "the magic fills its 8-byte field");
_Static_assert(SB_OFF_UUID + VOLUME_UUID_LEN == SB_OFF_CAPACITY, "uuid field size");

/* How long volume_open() waits for another process to let go of the volume. */
#define VOLUME_LOCK_TRIES	40
#define VOLUME_LOCK_WAIT_US	50000

/* The smallest useful volume: the superblock area and one data block. */
#define VOLUME_MIN_SIZE		(VOLUME_DATA_OFFSET + VOLUME_BLOCK_SIZE)

struct volume {
	int fd;				/* unstable writes, reads */
	int fd_sync;			/* O_DSYNC: a write returns once durable */
	bool direct;
	bool formatted;
	bool blockdev;
	bool pristine;
	uint8_t uuid[VOLUME_UUID_LEN];
	uint64_t capacity;
	struct range_lock locks;	/* blocks under a write */
};

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void *block_alloc(uint64_t nblocks)
{
	void *p = NULL;

	if (posix_memalign(&p, VOLUME_BLOCK_SIZE, nblocks * VOLUME_BLOCK_SIZE))
		return NULL;
	return p;
}

/* @is_write selects pwrite over pread; either way all of @len or an error. */
static int pio_full(int fd, void *buf, size_t len, uint64_t off, int is_write)
{
	size_t done = 0;

	while (done < len) {
		char *p = (char *)buf + done;
		ssize_t n = is_write ? pwrite(fd, p, len - done, (off_t)(off + done)) :
				    pread(fd, p, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* Inside the capacity there is no EOF unless the file was cut behind our back. */
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	return pio_full(fd, buf, len, off, 0);
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	return pio_full(fd, (void *)buf, len, off, 1);
}

static uint64_t block_offset(uint64_t block)
{
	return VOLUME_DATA_OFFSET + block * VOLUME_BLOCK_SIZE;
}

static int sb_checksum(const uint8_t *sb, uint8_t out[SB_CHECKSUM_LEN])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!EVP_Digest(sb, SB_OFF_CHECKSUM, md, &mdlen, EVP_sha256(), NULL))
		return -EIO;
	memcpy(out, md, SB_CHECKSUM_LEN);
	return 0;
}

/* The flags word and its check: the check is what makes a damaged word read as 0. */
static void sb_put_flags(uint8_t *sb, uint32_t flags)
{
	put_le32(sb + SB_OFF_FLAGS, flags);
	put_le32(sb + SB_OFF_FLAGS_CHECK, ~flags);
}

static uint32_t sb_get_flags(const uint8_t *sb)
{
	uint32_t flags = get_le32(sb + SB_OFF_FLAGS);

	return get_le32(sb + SB_OFF_FLAGS_CHECK) == ~flags ? flags : 0;
}

/* Write a new superblock; @pristine: the caller knows every data block reads as zeros. */
static int volume_format(struct volume *v, uint64_t size, bool pristine)
{
	uint8_t *sb;
	int ret;

	if (size < VOLUME_MIN_SIZE)
		return -EFBIG;
	sb = block_alloc(1);
	if (!sb)
		return -ENOMEM;
	memset(sb, 0, VOLUME_BLOCK_SIZE);
	memcpy(sb + SB_OFF_MAGIC, VOLUME_MAGIC, 8);
	put_le32(sb + SB_OFF_VERSION, VOLUME_VERSION);
	put_le32(sb + SB_OFF_BLOCK_SIZE, VOLUME_BLOCK_SIZE);
	if (RAND_bytes(sb + SB_OFF_UUID, VOLUME_UUID_LEN) != 1) {
		ret = -EIO;
		goto out;
	}
	put_le64(sb + SB_OFF_CAPACITY, (size - VOLUME_DATA_OFFSET) / VOLUME_BLOCK_SIZE);
	put_le64(sb + SB_OFF_DATA_OFFSET, VOLUME_DATA_OFFSET);
	ret = sb_checksum(sb, sb + SB_OFF_CHECKSUM);
	if (ret)
		goto out;
	sb_put_flags(sb, pristine ? VOLUME_FLAG_PRISTINE : 0);
	ret = pwrite_full(v->fd, sb, VOLUME_BLOCK_SIZE, 0);
	if (!ret && fdatasync(v->fd))
		ret = -errno;
	if (!ret) {
		memcpy(v->uuid, sb + SB_OFF_UUID, VOLUME_UUID_LEN);
		v->capacity = get_le64(sb + SB_OFF_CAPACITY);
		v->formatted = true;
		v->pristine = pristine;
	}
out:
	free(sb);
	return ret;
}

/* 0 and the volume's identity filled, -EMEDIUMTYPE without magic, -EUCLEAN if corrupt. */
static int volume_parse_sb(struct volume *v, const uint8_t *sb, uint64_t size)
{
	uint8_t sum[SB_CHECKSUM_LEN];
	uint64_t capacity;
	int ret;

	if (memcmp(sb + SB_OFF_MAGIC, VOLUME_MAGIC, 8))
		return -EMEDIUMTYPE;
	ret = sb_checksum(sb, sum);
	if (ret)
		return ret;
	if (memcmp(sum, sb + SB_OFF_CHECKSUM, SB_CHECKSUM_LEN) ||
	    get_le32(sb + SB_OFF_VERSION) != VOLUME_VERSION ||
	    get_le32(sb + SB_OFF_BLOCK_SIZE) != VOLUME_BLOCK_SIZE ||
	    get_le64(sb + SB_OFF_DATA_OFFSET) != VOLUME_DATA_OFFSET)
		return -EUCLEAN;
	capacity = get_le64(sb + SB_OFF_CAPACITY);
	if (capacity == 0 || capacity > (size - VOLUME_DATA_OFFSET) / VOLUME_BLOCK_SIZE)
		return -EUCLEAN;
	memcpy(v->uuid, sb + SB_OFF_UUID, VOLUME_UUID_LEN);
	v->capacity = capacity;
	v->pristine = sb_get_flags(sb) & VOLUME_FLAG_PRISTINE;
	return 0;
}

/*
 * Read the superblock; a file shorter than one block (e.g. empty) has none.
 * Returns the pread's result (1: read, 0: too short) or -errno.
 */
static int volume_read_sb(struct volume *v, uint64_t size, uint8_t *sb)
{
	int ret;

	if (size < VOLUME_BLOCK_SIZE)
		return 0;
	ret = pread_full(v->fd, sb, VOLUME_BLOCK_SIZE, 0);
	return ret ? ret : 1;
}

static int volume_size(int fd, const struct stat *st, uint64_t *size)
{
	if (S_ISREG(st->st_mode)) {
		*size = (uint64_t)st->st_size;
		return 0;
	}
	if (S_ISBLK(st->st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, size))
			return -errno;
		return 0;
	}
	return -ENOTBLK;
}

static int open_fds(struct volume *v, const char *path, bool direct)
{
	int flags = O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0);

	v->fd = open(path, flags);
	if (v->fd < 0)
		return -errno;
	v->fd_sync = open(path, flags | O_DSYNC);
	if (v->fd_sync < 0) {
		int ret = -errno;

		close(v->fd);
		v->fd = -1;
		return ret;
	}
	v->direct = direct;
	return 0;
}

static void close_fds(struct volume *v)
{
	if (v->fd_sync >= 0)
		close(v->fd_sync);
	if (v->fd >= 0)
		close(v->fd);
	v->fd = v->fd_sync = -1;
}

/*
 * Take the volume's exclusive flock; -EBUSY while another process holds it.
 * A server killed with I/O in flight on its io_uring lets go of the file only
 * once the kernel has torn the ring down, a moment after the process is gone,
 * so a restart right after a kill -9 waits that moment out.
 */
static int lock_volume(int fd)
{
	int i;

	for (i = 0;; i++) {
		if (!flock(fd, LOCK_EX | LOCK_NB))
			return 0;
		if (errno != EWOULDBLOCK)
			return -errno;
		if (i == VOLUME_LOCK_TRIES)
			return -EBUSY;
		usleep(VOLUME_LOCK_WAIT_US);
	}
}

/* Create a sparse file of @size bytes; -EEXIST if someone else made it first. */
static int create_sparse(const char *path, uint64_t size)
{
	int fd, ret = 0;

	if (size < VOLUME_MIN_SIZE)
		return -EFBIG;
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size))
		ret = -errno;
	close(fd);
	if (ret)
		unlink(path);
	return ret;
}

int volume_open(const struct volume_open_opts *o, struct volume **out)
{
	struct volume *v;
	struct stat st;
	uint64_t size;
	uint8_t *sb = NULL;
	bool created = false;
	int ret;

	if (stat(o->path, &st)) {
		if (errno != ENOENT || !o->create_size)
			return -errno;
		ret = create_sparse(o->path, o->create_size);
		if (ret)
			return ret;
		created = true;
		if (stat(o->path, &st))
			return -errno;
	}

	v = calloc(1, sizeof(*v));
	sb = block_alloc(1);
	if (!v || !sb) {
		ret = -ENOMEM;
		goto err_free;
	}
	v->fd = v->fd_sync = -1;
	ret = range_lock_init(&v->locks);
	if (ret)
		goto err_free;

	ret = open_fds(v, o->path, true);
	/* tmpfs and some FUSE file systems refuse O_DIRECT; buffered I/O still works. */
	if (ret == -EINVAL)
		ret = open_fds(v, o->path, false);
	if (ret)
		goto err_locks;
	/* Two servers on one volume would corrupt each other's partial-block writes. */
	ret = lock_volume(v->fd);
	if (ret)
		goto err_close;
	ret = volume_size(v->fd, &st, &size);
	if (ret)
		goto err_close;
	v->blockdev = S_ISBLK(st.st_mode);

	ret = volume_read_sb(v, size, sb);
	if (ret == -EINVAL && v->direct) {
		/* Accepted the open flag, refused the I/O: same fallback. */
		close_fds(v);
		ret = open_fds(v, o->path, false);
		if (!ret)
			ret = lock_volume(v->fd);
		if (!ret)
			ret = volume_read_sb(v, size, sb);
	}
	if (ret < 0)
		goto err_close;

	ret = ret == 1 ? volume_parse_sb(v, sb, size) : -EMEDIUMTYPE;
	/* only a sparse file made just now is known to read as zeros */
	if (ret == -EMEDIUMTYPE && (created || o->format))
		ret = volume_format(v, size, created);
	if (ret)
		goto err_close;

	free(sb);
	*out = v;
	return 0;

err_close:
	close_fds(v);
err_locks:
	range_lock_destroy(&v->locks);
err_free:
	free(sb);
	free(v);
	if (created)
		unlink(o->path);
	return ret;
}

void volume_close(struct volume *v)
{
	if (!v)
		return;
	fdatasync(v->fd);
	close_fds(v);
	range_lock_destroy(&v->locks);
	free(v);
}

const uint8_t *volume_uuid(const struct volume *v)
{
	return v->uuid;
}

uint64_t volume_capacity(const struct volume *v)
{
	return v->capacity;
}

bool volume_is_direct(const struct volume *v)
{
	return v->direct;
}

bool volume_was_formatted(const struct volume *v)
{
	return v->formatted;
}

bool volume_is_pristine(const struct volume *v)
{
	return v->pristine;
}

int volume_clear_pristine(struct volume *v)
{
	uint8_t *sb;
	int ret;

	if (!v->pristine)
		return 0;
	sb = block_alloc(1);
	if (!sb)
		return -ENOMEM;
	ret = pread_full(v->fd, sb, VOLUME_BLOCK_SIZE, 0);
	if (!ret) {
		sb_put_flags(sb, sb_get_flags(sb) & ~VOLUME_FLAG_PRISTINE);
		/* O_DSYNC: durable when it returns; one sector, so it lands whole */
		ret = pwrite_full(v->fd_sync, sb, VOLUME_BLOCK_SIZE, 0);
	}
	if (!ret)
		v->pristine = false;
	free(sb);
	return ret;
}

int volume_check_io(const struct volume *v, uint64_t first, uint64_t count, uint32_t head,
		    uint32_t length, uint32_t max_length)
{
	if (count == 0 || head >= VOLUME_BLOCK_SIZE || length > max_length)
		return -EINVAL;
	if (first >= v->capacity || count > v->capacity - first)
		return -ERANGE;
	if ((uint64_t)head + length > count * VOLUME_BLOCK_SIZE)
		return -EINVAL;
	return 0;
}

int volume_read_blocks(struct volume *v, uint64_t first, uint64_t count, void *buf)
{
	if (first >= v->capacity || count > v->capacity - first)
		return -ERANGE;
	return pread_full(v->fd, buf, count * VOLUME_BLOCK_SIZE, block_offset(first));
}

/*
 * Write bytes [head, head + length) of the blocks from @block on through an
 * aligned bounce buffer, reading first the partial blocks at either end.
 * The caller holds the range lock of the blocks.
 */
static int volume_write_bounced(struct volume *v, int fd, uint64_t block, uint32_t head,
				const void *data, uint32_t length)
{
	uint64_t n = volume_blocks_touched(head, length);
	uint32_t tail = (head + length) % VOLUME_BLOCK_SIZE;
	uint8_t *buf = block_alloc(n);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	if (head)
		ret = pread_full(v->fd, buf, VOLUME_BLOCK_SIZE, block_offset(block));
	/* The last block, unless it is the first one and was just read. */
	if (!ret && tail && !(n == 1 && head))
		ret = pread_full(v->fd, buf + (n - 1) * VOLUME_BLOCK_SIZE, VOLUME_BLOCK_SIZE,
				 block_offset(block + n - 1));
	if (!ret) {
		memcpy(buf + head, data, length);
		ret = pwrite_full(fd, buf, n * VOLUME_BLOCK_SIZE, block_offset(block));
	}
	free(buf);
	return ret;
}

int volume_write(struct volume *v, uint64_t first, uint32_t head, const void *data,
		 uint32_t length, bool stable)
{
	int fd = stable ? v->fd_sync : v->fd;
	struct range_lock_entry held;
	uint64_t n = volume_blocks_touched(head, length);
	int ret;

	if (!length)
		return 0;
	if (head >= VOLUME_BLOCK_SIZE || first >= v->capacity || n > v->capacity - first)
		return head >= VOLUME_BLOCK_SIZE ? -EINVAL : -ERANGE;

	range_lock_acquire(&v->locks, &held, first, first + n);
	if (head == 0 && ((uintptr_t)data % VOLUME_BLOCK_SIZE) == 0) {
		/* Whole blocks straight from the caller's aligned buffer. */
		uint64_t full = length / VOLUME_BLOCK_SIZE;
		uint32_t rest = length % VOLUME_BLOCK_SIZE;

		ret = 0;
		if (full)
			ret = pwrite_full(fd, data, full * VOLUME_BLOCK_SIZE, block_offset(first));
		if (!ret && rest)
			ret = volume_write_bounced(v, fd, first + full, 0,
						   (const uint8_t *)data + full * VOLUME_BLOCK_SIZE,
						   rest);
	} else {
		ret = volume_write_bounced(v, fd, first, head, data, length);
	}
	range_lock_release(&v->locks, &held);
	return ret;
}

int volume_sync(struct volume *v)
{
	if (fdatasync(v->fd))
		return -errno;
	return 0;
}

/* Zeros through plain writes: the file system or device offers nothing better. */
static int write_zeros(struct volume *v, uint64_t off, uint64_t len)
{
	const uint64_t piece = 64 * VOLUME_BLOCK_SIZE;
	uint8_t *zeros = block_alloc(piece / VOLUME_BLOCK_SIZE);
	int ret = 0;

	if (!zeros)
		return -ENOMEM;
	memset(zeros, 0, piece);
	while (len && !ret) {
		uint64_t n = len < piece ? len : piece;

		ret = pwrite_full(v->fd, zeros, n, off);
		off += n;
		len -= n;
	}
	free(zeros);
	return ret;
}

/* Errors that mean "this way of zeroing is not offered here", not "it failed". */
static bool unsupported(int err)
{
	return err == EOPNOTSUPP || err == ENOSYS || err == EINVAL || err == ENOTTY;
}

int volume_zero(struct volume *v, uint64_t first, uint64_t count)
{
	struct range_lock_entry held;
	int ret;

	if (count == 0 || first >= v->capacity || count > v->capacity - first)
		return count == 0 ? -EINVAL : -ERANGE;

	range_lock_acquire(&v->locks, &held, first, first + count);
	ret = volume_zero_locked(v, first, count);
	range_lock_release(&v->locks, &held);
	return ret;
}

int volume_zero_locked(struct volume *v, uint64_t first, uint64_t count)
{
	uint64_t off = block_offset(first), len = count * VOLUME_BLOCK_SIZE;
	int ret = 0;

	if (count == 0 || first >= v->capacity || count > v->capacity - first)
		return count == 0 ? -EINVAL : -ERANGE;
	if (fallocate(v->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		      (off_t)len) == 0)
		goto sync;
	if (!unsupported(errno)) {
		ret = -errno;
		goto out;
	}
	if (fallocate(v->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		      (off_t)len) == 0)
		goto sync;
	if (!unsupported(errno)) {
		ret = -errno;
		goto out;
	}
	if (v->blockdev) {
		uint64_t range[2] = { off, len };

		if (ioctl(v->fd, BLKZEROOUT, range) == 0)
			goto sync;
		if (!unsupported(errno)) {
			ret = -errno;
			goto out;
		}
	}
	ret = write_zeros(v, off, len);
	if (ret)
		goto out;
sync:
	if (fdatasync(v->fd))
		ret = -errno;
out:
	return ret;
}

int volume_fd(const struct volume *v)
{
	return v->fd;
}

uint64_t volume_block_offset(uint64_t block)
{
	return block_offset(block);
}

struct range_lock *volume_range_lock(struct volume *v)
{
	return &v->locks;
}
