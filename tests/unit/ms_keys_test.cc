// SPDX-License-Identifier: MIT
/*
 * ms_keys_test.cc - the on-disk format of ms_keys.h: key order, record round
 * trips and the rejection of corrupt records.
 */
#include <errno.h>
#include <string.h>

#include <string>

#include <gtest/gtest.h>

extern "C" {
#include "log.h"
#include "../../metaserver/ms_keys.h"
}

/* The core logs registrations at info; keep test output to warnings. */
static const int quiet_logs = (log_init("test_metaserver", LOG_LVL_WARN), 0);

static std::string k(const uint8_t *b, size_t n)
{
	return std::string((const char *)b, n);
}

TEST(MsKeys, IntegersInKeysSortNumerically)
{
	uint8_t a[MS_KEY_MAX], b[MS_KEY_MAX];

	size_t la = key_inode(a, 255), lb = key_inode(b, 256);
	EXPECT_LT(k(a, la), k(b, lb));
	la = key_layout(a, 7, 0xff);
	lb = key_layout(b, 7, 0x100);
	EXPECT_LT(k(a, la), k(b, lb));
	/* one directory's entries sort by name and stay inside its prefix */
	la = key_dirent(a, 2, "zzz", 3);
	lb = key_dirent(b, 3, "", 0);
	EXPECT_LT(k(a, la), k(b, lb));
	EXPECT_EQ(key_server(a, 0x01020304), 5u);
	EXPECT_EQ(a[0], 'S');
	EXPECT_EQ(a[1], 1);
	EXPECT_EQ(a[4], 4);
}

TEST(MsKeys, InodeRoundTrip)
{
	struct ms_inode in = {}, out = {};
	uint8_t buf[MS_INODE_FIXED + 4096];

	in.ino = 42;
	in.mode = 0120777;
	in.nlink = 3;
	in.uid = 1000;
	in.gid = 1001;
	in.rdev = 0x0801;
	in.chunk_size = 1 << 20;
	in.stripe_start = 5;
	in.size = 1ull << 40;
	in.blocks = 99;
	in.parent = 7;
	in.atime_ns = -1;
	in.mtime_ns = 1700000000123456789ll;
	in.ctime_ns = 2;
	in.copies = 3;
	in.target_len = 4;
	memcpy(in.target, "targ", 4);
	size_t n = inode_encode(&in, buf);
	ASSERT_EQ(n, (size_t)MS_INODE_FIXED + 4);
	ASSERT_EQ(inode_decode(42, buf, n, &out), 0);
	EXPECT_EQ(out.mode, in.mode);
	EXPECT_EQ(out.nlink, in.nlink);
	EXPECT_EQ(out.size, in.size);
	EXPECT_EQ(out.parent, in.parent);
	EXPECT_EQ(out.atime_ns, in.atime_ns);
	EXPECT_EQ(out.mtime_ns, in.mtime_ns);
	EXPECT_EQ(out.copies, 3);
	EXPECT_STREQ(out.target, "targ");
	/* truncated, unknown version (3 is the one with flags: ms_acl_test.cc; 4 below) */
	EXPECT_EQ(inode_decode(42, buf, MS_INODE_FIXED - 1, &out), -EIO);
	buf[0] = 5;
	EXPECT_EQ(inode_decode(42, buf, n, &out), -EIO);
	buf[0] = 0;
	EXPECT_EQ(inode_decode(42, buf, n, &out), -EIO);
	/* a version 1 record (no copies byte) reads as the cluster default */
	uint8_t v1[MS_INODE_FIXED + 4];
	memcpy(v1, buf, MS_INODE_FIXED_V1);
	memcpy(v1 + MS_INODE_FIXED_V1, "targ", 4);
	v1[0] = 1;
	ASSERT_EQ(inode_decode(42, v1, MS_INODE_FIXED_V1 + 4, &out), 0);
	EXPECT_EQ(out.copies, 0);
	EXPECT_EQ(out.mtime_ns, in.mtime_ns);
	EXPECT_STREQ(out.target, "targ");
}

/* Version 4: a stripe count, only written when there is one; the stripe flag in version 3. */
TEST(MsKeys, InodeStripeCountAndFirstServer)
{
	struct ms_inode in = {}, out = {};
	uint8_t buf[MS_INODE_FIXED_MAX + 4096];

	in.mode = 0100644;
	in.chunk_size = 65536;
	in.stripe_start = 7;
	in.flags = MS_INO_STRIPE_ID;
	size_t n = inode_encode(&in, buf);
	EXPECT_EQ(n, (size_t)MS_INODE_FIXED_V3);
	EXPECT_EQ(buf[0], 3);
	ASSERT_EQ(inode_decode(9, buf, n, &out), 0);
	EXPECT_EQ(out.flags, MS_INO_STRIPE_ID);
	EXPECT_EQ(out.stripe_count, 0u);
	EXPECT_EQ(out.stripe_start, 7u);

	in.stripe_count = 3;
	in.target_len = 2;
	memcpy(in.target, "xy", 2);
	n = inode_encode(&in, buf);
	EXPECT_EQ(n, (size_t)MS_INODE_FIXED_V4 + 2);
	EXPECT_EQ(buf[0], 4);
	ASSERT_EQ(inode_decode(9, buf, n, &out), 0);
	EXPECT_EQ(out.stripe_count, 3u);
	EXPECT_EQ(out.flags, MS_INO_STRIPE_ID);
	EXPECT_EQ(out.chunk_size, 65536u);
	EXPECT_STREQ(out.target, "xy");
	EXPECT_EQ(inode_decode(9, buf, MS_INODE_FIXED_V4 - 1, &out), -EIO);

	/* without a count or flag: version 2, as before */
	in.stripe_count = 0;
	in.flags = 0;
	EXPECT_EQ(inode_encode(&in, buf), (size_t)MS_INODE_FIXED + 2);
	EXPECT_EQ(buf[0], 2);
}

TEST(MsKeys, ChunkRecords)
{
	struct ms_ext e[2] = { { 0, 3, 1, 100, MS_EXT_UNWRITTEN }, { 5, 1, 2, 1ull << 35, 0 } };
	struct ms_ext out[4];
	uint8_t buf[2 * MS_EXTENT_REC];

	extent_encode(&e[0], buf);
	extent_encode(&e[1], buf + MS_EXTENT_REC);
	ASSERT_EQ(chunk_decode(buf, sizeof(buf), out, 4), 2);
	EXPECT_EQ(out[1].block, 1ull << 35);
	EXPECT_EQ(out[0].flags, MS_EXT_UNWRITTEN);
	EXPECT_EQ(out[1].off, 5u);
	EXPECT_EQ(chunk_decode(buf, sizeof(buf) - 1, out, 4), -EIO);
	EXPECT_EQ(chunk_decode(buf, sizeof(buf), out, 1), -EIO);
	uint64_t ino;
	uint32_t type;
	uint8_t d[MS_DIRENT_VAL];
	dirent_encode(77, 4, d);
	ASSERT_EQ(dirent_decode(d, sizeof(d), &ino, &type), 0);
	EXPECT_EQ(ino, 77u);
	EXPECT_EQ(type, 4u);
	EXPECT_EQ(dirent_decode(d, 8, &ino, &type), -EIO);
}
