// SPDX-License-Identifier: MIT
/*
 * ios_volume_test.cc - the I/O server's volume on real files: superblock
 * format/reopen/refusal, byte-exact aligned and unaligned I/O, concurrent
 * read-modify-write of one block, bounds.
 */
#include <gtest/gtest.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "../../ioserver/volume.h"
}

#include "ios_test_util.h"

namespace {

const uint64_t kMiB = 1ull << 20;

class VolumeTest : public ::testing::Test {
protected:
	TempDir dir;
	std::string path = dir.path() + "/vol";

	struct volume *open_vol(uint64_t create_size, bool format, int *err = nullptr)
	{
		struct volume_open_opts o = {};
		struct volume *v = nullptr;

		o.path = path.c_str();
		o.create_size = create_size;
		o.format = format;
		int ret = volume_open(&o, &v);
		if (err)
			*err = ret;
		else
			EXPECT_EQ(ret, 0) << strerror(-ret);
		return ret ? nullptr : v;
	}

	/* The protocol block's bytes, read from the file itself (checks the layout). */
	std::vector<uint8_t> raw_block(uint64_t block)
	{
		std::vector<uint8_t> b(VOLUME_BLOCK_SIZE);
		int fd = open(path.c_str(), O_RDONLY);
		EXPECT_GE(fd, 0);
		EXPECT_EQ(pread(fd, b.data(), b.size(), VOLUME_DATA_OFFSET + block * 4096),
			  (ssize_t)b.size());
		close(fd);
		return b;
	}
};

/* Read bytes [head, head + length) of blocks from @first through volume_read_blocks. */
std::vector<uint8_t> read_bytes(struct volume *v, uint64_t first, uint32_t head, uint32_t length)
{
	uint64_t n = volume_blocks_touched(head, length);
	AlignedBuf buf(n * VOLUME_BLOCK_SIZE);
	EXPECT_EQ(volume_read_blocks(v, first, n, buf.get()), 0);
	return std::vector<uint8_t>(buf.bytes() + head, buf.bytes() + head + length);
}

TEST_F(VolumeTest, CreateFormatsSparseAndReopenKeepsIdentity)
{
	struct volume *v = open_vol(64 * kMiB, false);
	ASSERT_NE(v, nullptr);
	EXPECT_TRUE(volume_was_formatted(v));
	EXPECT_EQ(volume_capacity(v), (64 * kMiB - VOLUME_DATA_OFFSET) / 4096);
	uint8_t uuid[VOLUME_UUID_LEN], zero[VOLUME_UUID_LEN] = {};
	memcpy(uuid, volume_uuid(v), sizeof(uuid));
	EXPECT_NE(memcmp(uuid, zero, sizeof(uuid)), 0);
	volume_close(v);

	struct stat st;
	ASSERT_EQ(stat(path.c_str(), &st), 0);
	EXPECT_EQ((uint64_t)st.st_size, 64 * kMiB);
	EXPECT_LT((uint64_t)st.st_blocks * 512, 2 * kMiB) << "volume file is not sparse";
	EXPECT_EQ(st.st_mode & 0777, 0600u);

	/* Reopen: no create size needed, same identity, not reformatted. */
	v = open_vol(0, false);
	ASSERT_NE(v, nullptr);
	EXPECT_FALSE(volume_was_formatted(v));
	EXPECT_EQ(memcmp(volume_uuid(v), uuid, sizeof(uuid)), 0);
	EXPECT_EQ(volume_capacity(v), (64 * kMiB - VOLUME_DATA_OFFSET) / 4096);
	volume_close(v);

	/* --format on a formatted volume keeps it (and its data). */
	v = open_vol(0, true);
	ASSERT_NE(v, nullptr);
	EXPECT_FALSE(volume_was_formatted(v));
	EXPECT_EQ(memcmp(volume_uuid(v), uuid, sizeof(uuid)), 0);
	volume_close(v);
}

TEST_F(VolumeTest, SuperblockOnDiskLayout)
{
	struct volume *v = open_vol(8 * kMiB, false);
	ASSERT_NE(v, nullptr);
	uint8_t sb[64];
	int fd = open(path.c_str(), O_RDONLY);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(pread(fd, sb, sizeof(sb), 0), (ssize_t)sizeof(sb));
	close(fd);
	EXPECT_EQ(memcmp(sb, "RDFSVOL1", 8), 0);
	EXPECT_EQ(sb[8], 1);			/* version, little-endian */
	EXPECT_EQ(sb[12] | sb[13] << 8, 4096);	/* block size */
	EXPECT_EQ(memcmp(sb + 16, volume_uuid(v), 16), 0);
	uint64_t cap = 0;
	for (int i = 0; i < 8; i++)
		cap |= (uint64_t)sb[32 + i] << (8 * i);
	EXPECT_EQ(cap, volume_capacity(v));
	volume_close(v);
}

TEST_F(VolumeTest, TwoVolumesGetDifferentUuids)
{
	struct volume *a = open_vol(4 * kMiB, false);
	ASSERT_NE(a, nullptr);
	std::string other = dir.path() + "/vol2";
	struct volume_open_opts o = {};
	o.path = other.c_str();
	o.create_size = 4 * kMiB;
	struct volume *b = nullptr;
	ASSERT_EQ(volume_open(&o, &b), 0);
	EXPECT_NE(memcmp(volume_uuid(a), volume_uuid(b), VOLUME_UUID_LEN), 0);
	volume_close(a);
	volume_close(b);
}

TEST_F(VolumeTest, RefusesUnformattedWithoutFormatAndKeepsItsData)
{
	std::vector<uint8_t> data = pattern(4 * kMiB, 7);
	write_file(path, data);

	int err = 0;
	EXPECT_EQ(open_vol(0, false, &err), nullptr);
	EXPECT_EQ(err, -EMEDIUMTYPE);
	/* A create size does not make an existing file fair game either. */
	EXPECT_EQ(open_vol(64 * kMiB, false, &err), nullptr);
	EXPECT_EQ(err, -EMEDIUMTYPE);
	EXPECT_EQ(read_file(path), data) << "refusing must not touch the file";

	struct volume *v = open_vol(0, true);
	ASSERT_NE(v, nullptr);
	EXPECT_TRUE(volume_was_formatted(v));
	EXPECT_EQ(volume_capacity(v), (4 * kMiB - VOLUME_DATA_OFFSET) / 4096);
	volume_close(v);
}

TEST_F(VolumeTest, EmptyFileIsUnformattedAndTooSmallToFormat)
{
	write_file(path, {});
	int err = 0;
	EXPECT_EQ(open_vol(0, false, &err), nullptr);
	EXPECT_EQ(err, -EMEDIUMTYPE);
	EXPECT_EQ(open_vol(0, true, &err), nullptr);
	EXPECT_EQ(err, -EFBIG);
}

TEST_F(VolumeTest, SecondOpenOfAVolumeInUseIsRefused)
{
	struct volume *v = open_vol(4 * kMiB, false);
	ASSERT_NE(v, nullptr);
	int err = 0;
	EXPECT_EQ(open_vol(0, false, &err), nullptr);
	EXPECT_EQ(err, -EBUSY);
	volume_close(v);
	v = open_vol(0, false);
	EXPECT_NE(v, nullptr);
	volume_close(v);
}

TEST_F(VolumeTest, MissingPathWithoutCreateSize)
{
	int err = 0;
	EXPECT_EQ(open_vol(0, false, &err), nullptr);
	EXPECT_EQ(err, -ENOENT);
}

TEST_F(VolumeTest, CreateSizeTooSmallLeavesNoFile)
{
	int err = 0;
	EXPECT_EQ(open_vol(VOLUME_DATA_OFFSET, false, &err), nullptr);
	EXPECT_EQ(err, -EFBIG);
	EXPECT_NE(access(path.c_str(), F_OK), 0);

	/* The smallest volume: one data block. */
	struct volume *v = open_vol(VOLUME_DATA_OFFSET + 4096, false);
	ASSERT_NE(v, nullptr);
	EXPECT_EQ(volume_capacity(v), 1u);
	volume_close(v);
}

/* Bytes [off, off + len) of the volume file, read or overwritten behind the volume's back. */
static std::vector<uint8_t> file_bytes(const std::string &path, off_t off, size_t len)
{
	std::vector<uint8_t> b(len);
	int fd = open(path.c_str(), O_RDONLY);
	EXPECT_GE(fd, 0);
	EXPECT_EQ(pread(fd, b.data(), len, off), (ssize_t)len);
	close(fd);
	return b;
}

static void file_poke(const std::string &path, off_t off, const std::vector<uint8_t> &b)
{
	int fd = open(path.c_str(), O_RDWR);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(pwrite(fd, b.data(), b.size(), off), (ssize_t)b.size());
	close(fd);
}

TEST_F(VolumeTest, CreatedVolumeIsPristineUntilClearedDurably)
{
	struct volume *v = open_vol(8 * kMiB, false);
	ASSERT_NE(v, nullptr);
	EXPECT_TRUE(volume_is_pristine(v));
	volume_close(v);

	/* the flag is on disk: a reopen still sees it */
	v = open_vol(0, false);
	ASSERT_NE(v, nullptr);
	EXPECT_TRUE(volume_is_pristine(v));
	std::vector<uint8_t> identity = file_bytes(path, 0, 56);
	ASSERT_EQ(volume_clear_pristine(v), 0);
	EXPECT_FALSE(volume_is_pristine(v));
	EXPECT_EQ(volume_clear_pristine(v), 0) << "clearing twice is fine";
	/* nothing else of the superblock changed */
	EXPECT_EQ(file_bytes(path, 0, 56), identity);
	volume_close(v);

	v = open_vol(0, true);
	ASSERT_NE(v, nullptr);
	EXPECT_FALSE(volume_is_pristine(v)) << "cleared, but not durably";
	EXPECT_FALSE(volume_was_formatted(v));
	volume_close(v);
}

TEST_F(VolumeTest, FormatOfAnExistingFileIsNeverPristine)
{
	/* even one that holds only zeros: nothing says it always did */
	write_file(path, std::vector<uint8_t>(4 * kMiB, 0));
	struct volume *v = open_vol(0, true);
	ASSERT_NE(v, nullptr);
	EXPECT_TRUE(volume_was_formatted(v));
	EXPECT_FALSE(volume_is_pristine(v));
	volume_close(v);
	v = open_vol(0, false);
	ASSERT_NE(v, nullptr);
	EXPECT_FALSE(volume_is_pristine(v));
	volume_close(v);
}

TEST_F(VolumeTest, DamagedOrMissingFlagsReadAsNotPristine)
{
	struct volume *v = open_vol(4 * kMiB, false);
	ASSERT_NE(v, nullptr);
	ASSERT_TRUE(volume_is_pristine(v));
	volume_close(v);

	/* a flipped bit in the check word */
	std::vector<uint8_t> flags = file_bytes(path, 56, 8);
	std::vector<uint8_t> bad = flags;
	bad[4] ^= 0x01;
	file_poke(path, 56, bad);
	v = open_vol(0, false);
	ASSERT_NE(v, nullptr);
	EXPECT_FALSE(volume_is_pristine(v));
	volume_close(v);

	/* a volume from before the flags existed (zeros there) still opens */
	file_poke(path, 56, std::vector<uint8_t>(8, 0));
	v = open_vol(0, false);
	ASSERT_NE(v, nullptr);
	EXPECT_FALSE(volume_is_pristine(v));
	volume_close(v);
}

TEST_F(VolumeTest, CorruptSuperblockIsRefusedEvenWithFormat)
{
	struct volume *v = open_vol(4 * kMiB, false);
	ASSERT_NE(v, nullptr);
	volume_close(v);

	int fd = open(path.c_str(), O_RDWR);
	ASSERT_GE(fd, 0);
	uint8_t b;
	ASSERT_EQ(pread(fd, &b, 1, 33), 1);	/* a byte of capacity_blocks */
	b ^= 0x40;
	ASSERT_EQ(pwrite(fd, &b, 1, 33), 1);
	close(fd);

	int err = 0;
	EXPECT_EQ(open_vol(0, false, &err), nullptr);
	EXPECT_EQ(err, -EUCLEAN);
	EXPECT_EQ(open_vol(0, true, &err), nullptr);
	EXPECT_EQ(err, -EUCLEAN);
}

TEST_F(VolumeTest, VolumeShorterThanItsCapacityIsRefused)
{
	struct volume *v = open_vol(8 * kMiB, false);
	ASSERT_NE(v, nullptr);
	volume_close(v);
	ASSERT_EQ(truncate(path.c_str(), 4 * kMiB), 0);
	int err = 0;
	EXPECT_EQ(open_vol(0, false, &err), nullptr);
	EXPECT_EQ(err, -EUCLEAN);
}

TEST_F(VolumeTest, AlignedWriteReadIsByteExactAtTheLayoutOffset)
{
	struct volume *v = open_vol(16 * kMiB, false);
	ASSERT_NE(v, nullptr);
	std::vector<uint8_t> p = pattern(8 * 4096, 1);
	AlignedBuf buf(p.size());
	memcpy(buf.get(), p.data(), p.size());

	ASSERT_EQ(volume_write(v, 10, 0, buf.get(), p.size(), true), 0);
	EXPECT_EQ(read_bytes(v, 10, 0, p.size()), p);
	for (int i = 0; i < 8; i++) {
		std::vector<uint8_t> want(p.begin() + i * 4096, p.begin() + (i + 1) * 4096);
		EXPECT_EQ(raw_block(10 + i), want) << "block " << 10 + i;
	}
	/* Neighbours untouched. */
	EXPECT_EQ(raw_block(9), std::vector<uint8_t>(4096, 0));
	EXPECT_EQ(raw_block(18), std::vector<uint8_t>(4096, 0));
	volume_close(v);

	/* Data survives a reopen. */
	v = open_vol(0, false);
	ASSERT_NE(v, nullptr);
	EXPECT_EQ(read_bytes(v, 10, 0, p.size()), p);
	volume_close(v);
}

TEST_F(VolumeTest, UnalignedWritesMatchAModel)
{
	struct volume *v = open_vol(VOLUME_DATA_OFFSET + 64 * 4096, false);
	ASSERT_NE(v, nullptr);
	const uint64_t nblocks = volume_capacity(v);
	std::vector<uint8_t> model(nblocks * 4096, 0);
	std::mt19937 rng(42);

	/* Fixed edge cases first, then random ones. */
	struct { uint64_t block; uint32_t head, len; } cases[] = {
		{ 0, 0, 1 }, { 0, 4095, 1 }, { 1, 1, 4095 }, { 2, 4095, 2 },
		{ 3, 0, 4097 }, { 5, 100, 3 * 4096 }, { 10, 0, 4095 }, { 12, 17, 8192 - 17 },
		{ nblocks - 1, 4000, 96 }, { 20, 0, 4096 * 3 },
	};
	auto apply = [&](uint64_t block, uint32_t head, uint32_t len, bool stable, bool align) {
		std::vector<uint8_t> d = pattern(len, rng());
		AlignedBuf buf(len + 1);
		uint8_t *src = buf.bytes() + (align ? 0 : 1);
		memcpy(src, d.data(), len);
		ASSERT_EQ(volume_write(v, block, head, src, len, stable), 0)
			<< block << "+" << head << " len " << len;
		memcpy(&model[block * 4096 + head], d.data(), len);
	};
	for (auto &c : cases)
		apply(c.block, c.head, c.len, true, true);
	for (int i = 0; i < 200; i++) {
		uint64_t block = rng() % nblocks;
		uint32_t head = rng() % 4096;
		uint64_t room = (nblocks - block) * 4096 - head;
		uint32_t len = 1 + rng() % (uint32_t)std::min<uint64_t>(room, 5 * 4096);
		apply(block, head, len, i % 2, i % 3 != 0);
	}
	ASSERT_EQ(volume_sync(v), 0);
	EXPECT_EQ(read_bytes(v, 0, 0, nblocks * 4096), model);
	/* Unaligned reads of the same data. */
	for (int i = 0; i < 50; i++) {
		uint64_t block = rng() % nblocks;
		uint32_t head = rng() % 4096;
		uint64_t room = (nblocks - block) * 4096 - head;
		uint32_t len = 1 + rng() % (uint32_t)std::min<uint64_t>(room, 3 * 4096);
		std::vector<uint8_t> want(model.begin() + block * 4096 + head,
					  model.begin() + block * 4096 + head + len);
		EXPECT_EQ(read_bytes(v, block, head, len), want);
	}
	volume_close(v);
}

TEST_F(VolumeTest, ConcurrentPartialWritesOfOneBlockAllLand)
{
	struct volume *v = open_vol(4 * kMiB, false);
	ASSERT_NE(v, nullptr);
	const int kThreads = 8;
	const uint64_t kBlock = 7;

	/* Thread t owns the bytes i with i % kThreads == t of two adjacent blocks. */
	std::vector<std::thread> threads;
	for (int t = 0; t < kThreads; t++) {
		threads.emplace_back([v, t]() {
			for (uint32_t i = t; i < 2 * 4096; i += kThreads) {
				uint8_t b = (uint8_t)(i * 7 + 1);
				/* Byte i is in block kBlock + i / 4096. */
				int ret = volume_write(v, kBlock + i / 4096, i % 4096, &b, 1, i % 2);
				ASSERT_EQ(ret, 0);
			}
		});
	}
	for (auto &t : threads)
		t.join();
	std::vector<uint8_t> got = read_bytes(v, kBlock, 0, 2 * 4096);
	for (uint32_t i = 0; i < 2 * 4096; i++)
		ASSERT_EQ(got[i], (uint8_t)(i * 7 + 1)) << "byte " << i << " lost";
	volume_close(v);
}

TEST_F(VolumeTest, ConcurrentStraddlingWritesAllLand)
{
	struct volume *v = open_vol(4 * kMiB, false);
	ASSERT_NE(v, nullptr);
	/* Each thread writes 100-byte runs that straddle block boundaries of blocks 0..3. */
	const int kThreads = 4;
	std::vector<std::thread> threads;
	for (int t = 0; t < kThreads; t++) {
		threads.emplace_back([v, t]() {
			for (int round = 0; round < 30; round++) {
				for (uint32_t b = 1; b < 4; b++) {
					uint8_t d[50];
					memset(d, 0x10 * (t + 1), sizeof(d));
					uint32_t at = b * 4096 - 100 + t * 50;
					ASSERT_EQ(volume_write(v, at / 4096, at % 4096, d, 50,
							       false), 0);
				}
			}
		});
	}
	for (auto &t : threads)
		t.join();
	std::vector<uint8_t> got = read_bytes(v, 0, 0, 4 * 4096);
	for (uint32_t b = 1; b < 4; b++)
		for (int t = 0; t < kThreads; t++)
			for (int i = 0; i < 50; i++)
				ASSERT_EQ(got[b * 4096 - 100 + t * 50 + i], 0x10 * (t + 1))
					<< "block boundary " << b << " thread " << t;
	volume_close(v);
}

TEST_F(VolumeTest, ZeroMakesWrittenBlocksReadAsZeros)
{
	struct volume *v = open_vol(4 * kMiB, false);
	ASSERT_NE(v, nullptr);
	std::vector<uint8_t> p = pattern(6 * 4096, 21);
	AlignedBuf buf(p.size());
	memcpy(buf.get(), p.data(), p.size());
	ASSERT_EQ(volume_write(v, 10, 0, buf.get(), p.size(), true), 0);

	ASSERT_EQ(volume_zero(v, 11, 4), 0);
	std::fill(p.begin() + 4096, p.begin() + 5 * 4096, 0);
	EXPECT_EQ(read_bytes(v, 10, 0, p.size()), p);
	for (int i = 0; i < 6; i++)
		EXPECT_EQ(raw_block(10 + i), std::vector<uint8_t>(p.begin() + i * 4096,
								  p.begin() + (i + 1) * 4096))
			<< "block " << 10 + i;
	EXPECT_EQ(volume_zero(v, 0, 0), -EINVAL);
	EXPECT_EQ(volume_zero(v, volume_capacity(v) - 1, 2), -ERANGE);
	EXPECT_EQ(volume_zero(v, volume_capacity(v) - 1, 1), 0);
	volume_close(v);

	/* Durable: survives a reopen. */
	v = open_vol(0, false);
	ASSERT_NE(v, nullptr);
	EXPECT_EQ(read_bytes(v, 10, 0, p.size()), p);
	volume_close(v);
}

TEST_F(VolumeTest, ZeroIsOrderedWithConcurrentPartialWrites)
{
	struct volume *v = open_vol(4 * kMiB, false);
	ASSERT_NE(v, nullptr);
	/* Writers own bytes [0, 2048) of block 5 and keep rewriting them while another
	 * thread zeros block 5 again and again: every read-modify-write sees either
	 * the zeros or nothing of them, so the final bytes are the writers' last. */
	std::thread zeroer([v]() {
		for (int i = 0; i < 50; i++)
			ASSERT_EQ(volume_zero(v, 5, 1), 0);
	});
	std::thread writer([v]() {
		for (int round = 0; round < 200; round++) {
			uint8_t d[2048];
			memset(d, round & 0xff, sizeof(d));
			ASSERT_EQ(volume_write(v, 5, 0, d, sizeof(d), false), 0);
		}
	});
	zeroer.join();
	writer.join();
	std::vector<uint8_t> got = read_bytes(v, 5, 0, 4096);
	/* The first half is all one value (never a torn mix); the second half is zero. */
	for (int i = 1; i < 2048; i++)
		ASSERT_EQ(got[i], got[0]) << "byte " << i;
	for (int i = 2048; i < 4096; i++)
		ASSERT_EQ(got[i], 0) << "byte " << i;
	volume_close(v);
}

TEST_F(VolumeTest, BoundsAndCapacity)
{
	struct volume *v = open_vol(VOLUME_DATA_OFFSET + 10 * 4096, false);
	ASSERT_NE(v, nullptr);
	ASSERT_EQ(volume_capacity(v), 10u);
	const uint32_t max = 16u << 20;

	EXPECT_EQ(volume_check_io(v, 0, 10, 0, 10 * 4096, max), 0);
	EXPECT_EQ(volume_check_io(v, 9, 1, 4095, 1, max), 0);
	EXPECT_EQ(volume_check_io(v, 0, 1, 0, 0, max), 0);
	EXPECT_EQ(volume_check_io(v, 0, 0, 0, 0, max), -EINVAL);	/* no blocks */
	EXPECT_EQ(volume_check_io(v, 0, 1, 4096, 0, max), -EINVAL);	/* head >= 4096 */
	EXPECT_EQ(volume_check_io(v, 0, 1, 1, 4096, max), -EINVAL);	/* past the range */
	EXPECT_EQ(volume_check_io(v, 0, 2, 0, 8193, max), -EINVAL);
	EXPECT_EQ(volume_check_io(v, 0, 2, 0, 8192, 4096), -EINVAL);	/* over the limit */
	EXPECT_EQ(volume_check_io(v, 10, 1, 0, 1, max), -ERANGE);	/* past capacity */
	EXPECT_EQ(volume_check_io(v, 9, 2, 0, 1, max), -ERANGE);
	EXPECT_EQ(volume_check_io(v, UINT64_MAX, 2, 0, 1, max), -ERANGE);
	EXPECT_EQ(volume_check_io(v, 1, UINT64_MAX, 0, 1, max), -ERANGE);

	AlignedBuf buf(2 * 4096);
	memset(buf.get(), 0xab, 2 * 4096);
	EXPECT_EQ(volume_write(v, 9, 0, buf.get(), 4096, true), 0);	/* last block */
	EXPECT_EQ(volume_write(v, 9, 0, buf.get(), 8192, true), -ERANGE);
	EXPECT_EQ(volume_write(v, 10, 0, buf.get(), 1, true), -ERANGE);
	EXPECT_EQ(volume_write(v, 9, 4000, buf.get(), 200, true), -ERANGE);
	EXPECT_EQ(volume_write(v, 0, 4096, buf.get(), 1, true), -EINVAL);
	EXPECT_EQ(volume_read_blocks(v, 9, 2, buf.get()), -ERANGE);
	EXPECT_EQ(volume_read_blocks(v, 9, 1, buf.get()), 0);
	EXPECT_EQ(buf.bytes()[4095], 0xab);
	/* A failed write changed nothing. */
	EXPECT_EQ(raw_block(9), std::vector<uint8_t>(4096, 0xab));
	volume_close(v);
}

TEST(VolumeTmpfs, BufferedFallbackWorks)
{
	struct stat st;
	if (stat("/dev/shm", &st) || !S_ISDIR(st.st_mode))
		GTEST_SKIP() << "no /dev/shm";
	TempDir dir("/dev/shm");
	std::string path = dir.path() + "/vol";
	struct volume_open_opts o = {};
	o.path = path.c_str();
	o.create_size = 4 * kMiB;
	struct volume *v = nullptr;
	ASSERT_EQ(volume_open(&o, &v), 0);
	std::vector<uint8_t> p = pattern(3 * 4096, 3);
	ASSERT_EQ(volume_write(v, 1, 10, p.data(), p.size() - 20, true), 0);
	std::vector<uint8_t> want(p.begin(), p.end() - 20);
	EXPECT_EQ(read_bytes(v, 1, 10, p.size() - 20), want);
	/* tmpfs has no ZERO_RANGE everywhere: the fallbacks must still give zeros. */
	ASSERT_EQ(volume_zero(v, 1, 2), 0);
	/* blocks 1 and 2 are zeros now; block 3 keeps its bytes [0, 4086) */
	std::vector<uint8_t> after(2 * 4096, 0);
	after.insert(after.end(), want.begin() + 2 * 4096 - 10, want.end());
	EXPECT_EQ(read_bytes(v, 1, 0, 3 * 4096 - 10), after);
	volume_close(v);
}

}  // namespace
