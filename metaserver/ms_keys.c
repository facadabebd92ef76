// SPDX-License-Identifier: MIT
/*
 * ms_keys.c - encoders and decoders of the on-disk format in ms_keys.h.
 */
#include <errno.h>
#include <string.h>

#include "ms.h"
#include "ms_keys.h"

void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

size_t key_prefix(uint8_t *buf, char tag, uint64_t id)
{
	buf[0] = (uint8_t)tag;
	put_be64(buf + 1, id);
	return 9;
}

size_t key_inode(uint8_t *buf, uint64_t ino)
{
	return key_prefix(buf, MS_TAG_INODE, ino);
}

size_t key_dirent(uint8_t *buf, uint64_t parent, const void *name, size_t len)
{
	if (len > MS_KEY_MAX - 9)
		len = MS_KEY_MAX - 9;
	key_prefix(buf, MS_TAG_DIRENT, parent);
	memcpy(buf + 9, name, len);
	return 9 + len;
}

size_t key_xattr(uint8_t *buf, uint64_t ino, const char *name)
{
	size_t len = strnlen(name, MS_KEY_MAX - 9);

	key_prefix(buf, MS_TAG_XATTR, ino);
	memcpy(buf + 9, name, len);
	return 9 + len;
}

size_t key_layout(uint8_t *buf, uint64_t ino, uint64_t chunk)
{
	key_prefix(buf, MS_TAG_LAYOUT, ino);
	put_be64(buf + 9, chunk);
	return 17;
}

size_t key_orphan(uint8_t *buf, uint64_t ino)
{
	return key_prefix(buf, MS_TAG_ORPHAN, ino);
}

size_t key_server(uint8_t *buf, uint32_t id)
{
	buf[0] = MS_TAG_SERVER;
	buf[1] = (uint8_t)(id >> 24);
	buf[2] = (uint8_t)(id >> 16);
	buf[3] = (uint8_t)(id >> 8);
	buf[4] = (uint8_t)id;
	return 5;
}

size_t key_high_water(uint8_t *buf, uint32_t id)
{
	key_server(buf, id);
	buf[0] = MS_TAG_HIGH_WATER;
	return 5;
}

size_t key_quota(uint8_t *buf, uint32_t type, uint32_t id)
{
	buf[0] = MS_TAG_QUOTA;
	buf[1] = (uint8_t)type;
	buf[2] = (uint8_t)(id >> 24);
	buf[3] = (uint8_t)(id >> 16);
	buf[4] = (uint8_t)(id >> 8);
	buf[5] = (uint8_t)id;
	return MS_QUOTA_KEY;
}

size_t key_grace(uint8_t *buf, uint32_t type)
{
	buf[0] = MS_TAG_GRACE;
	buf[1] = (uint8_t)type;
	return 2;
}

size_t inode_encode(const struct ms_inode *in, uint8_t *buf)
{
	/* the oldest version that holds it: older metaservers read what they can */
	int version = in->stripe_count || in->project ? 4 : in->flags ? 3 : 2;
	size_t fixed = version == 4 ? MS_INODE_FIXED_V4 :
		       version == 3 ? MS_INODE_FIXED_V3 :
				      MS_INODE_FIXED;

	buf[0] = (uint8_t)version;
	put_le32(buf + 1, in->mode);
	put_le32(buf + 5, in->nlink);
	put_le32(buf + 9, in->uid);
	put_le32(buf + 13, in->gid);
	put_le32(buf + 17, in->rdev);
	put_le32(buf + 21, in->chunk_size);
	put_le32(buf + 25, in->stripe_start);
	put_le64(buf + 29, in->size);
	put_le64(buf + 37, in->blocks);
	put_le64(buf + 45, in->parent);
	put_le64(buf + 53, (uint64_t)in->atime_ns);
	put_le64(buf + 61, (uint64_t)in->mtime_ns);
	put_le64(buf + 69, (uint64_t)in->ctime_ns);
	buf[77] = in->copies;
	if (version >= 3)
		buf[78] = in->flags;
	if (version >= 4)
		put_le32(buf + 79, in->stripe_count);
	if (version >= 4)
		put_le32(buf + 83, in->project);
	memcpy(buf + fixed, in->target, in->target_len);
	return fixed + in->target_len;
}

int inode_decode(uint64_t ino, const void *val, size_t len, struct ms_inode *out)
{
	const uint8_t *p = val;
	static const size_t fixed_of[] = { 0, MS_INODE_FIXED_V1, MS_INODE_FIXED, MS_INODE_FIXED_V3,
					   MS_INODE_FIXED_V4 };
	size_t fixed;

	if (len == 0 || p[0] < 1 || p[0] > 4)
		return -EIO;
	fixed = fixed_of[p[0]];
	if (len < fixed || len - fixed >= sizeof(out->target))
		return -EIO;
	out->ino = ino;
	out->mode = get_le32(p + 1);
	out->nlink = get_le32(p + 5);
	out->uid = get_le32(p + 9);
	out->gid = get_le32(p + 13);
	out->rdev = get_le32(p + 17);
	out->chunk_size = get_le32(p + 21);
	out->stripe_start = get_le32(p + 25);
	out->size = get_le64(p + 29);
	out->blocks = get_le64(p + 37);
	out->parent = get_le64(p + 45);
	out->atime_ns = (int64_t)get_le64(p + 53);
	out->mtime_ns = (int64_t)get_le64(p + 61);
	out->ctime_ns = (int64_t)get_le64(p + 69);
	out->copies = p[0] == 1 ? 0 : p[77];
	out->flags = p[0] >= 3 ? p[78] : 0;
	out->stripe_count = p[0] >= 4 ? get_le32(p + 79) : 0;
	out->project = p[0] >= 4 ? get_le32(p + 83) : 0;
	out->charge = (struct ms_charge){ .uid = out->uid,
					  .gid = out->gid,
					  .project = out->project,
					  .blocks = out->blocks,
					  .counted = 1 };
	out->acl.n = 0;
	out->target_len = (uint32_t)(len - fixed);
	memcpy(out->target, p + fixed, out->target_len);
	out->target[out->target_len] = '\0';
	return 0;
}

void quota_encode(const struct ms_quota *q, uint8_t *buf)
{
	buf[0] = 1;
	put_le64(buf + 1, q->blocks);
	put_le64(buf + 9, q->inodes);
	put_le64(buf + 17, q->block_soft);
	put_le64(buf + 25, q->block_hard);
	put_le64(buf + 33, q->inode_soft);
	put_le64(buf + 41, q->inode_hard);
	put_le64(buf + 49, (uint64_t)q->block_grace_ns);
	put_le64(buf + 57, (uint64_t)q->inode_grace_ns);
}

int quota_decode(const void *val, size_t len, struct ms_quota *out)
{
	const uint8_t *p = val;

	if (len != MS_QUOTA_REC || p[0] != 1)
		return -EIO;
	out->blocks = get_le64(p + 1);
	out->inodes = get_le64(p + 9);
	out->block_soft = get_le64(p + 17);
	out->block_hard = get_le64(p + 25);
	out->inode_soft = get_le64(p + 33);
	out->inode_hard = get_le64(p + 41);
	out->block_grace_ns = (int64_t)get_le64(p + 49);
	out->inode_grace_ns = (int64_t)get_le64(p + 57);
	return 0;
}

void dirent_encode(uint64_t ino, uint32_t type, uint8_t *buf)
{
	put_le64(buf, ino);
	buf[8] = (uint8_t)type;
}

int dirent_decode(const void *val, size_t len, uint64_t *ino, uint32_t *type)
{
	const uint8_t *p = val;

	if (len != MS_DIRENT_VAL)
		return -EIO;
	*ino = get_le64(p);
	*type = p[8];
	return 0;
}

void extent_encode(const struct ms_ext *e, uint8_t *buf)
{
	put_le32(buf, e->off);
	put_le32(buf + 4, e->count);
	put_le32(buf + 8, e->server_id);
	put_le64(buf + 12, e->block);
	buf[20] = e->flags;
}

int chunk_decode(const void *val, size_t len, struct ms_ext *out, int max)
{
	const uint8_t *p = val;
	int n = (int)(len / MS_EXTENT_REC);

	if (len % MS_EXTENT_REC || n > max)
		return -EIO;
	for (int i = 0; i < n; i++, p += MS_EXTENT_REC) {
		out[i].off = get_le32(p);
		out[i].count = get_le32(p + 4);
		out[i].server_id = get_le32(p + 8);
		out[i].block = get_le64(p + 12);
		out[i].flags = p[20];
	}
	return n;
}
