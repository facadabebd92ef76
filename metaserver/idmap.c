// SPDX-License-Identifier: MIT
/*
 * idmap.c - what a client node's policy does to the ids it sends and sees:
 * squash (NFS's root_squash/all_squash), then maps of client id ranges to
 * file-system id ranges (Lustre nodemap's idmap). Ids are mapped in on the way
 * into the metaserver (the request's credential, chown, ACL entries) and back
 * on the way out (attributes, ACL entries), so a node whose users have other
 * numbers than the file system's sees its own numbers everywhere.
 *
 * Pure functions over a policy the caller copied (ms_session_squash()): no
 * locks, no allocation; any thread. Ranges of one kind never overlap on
 * either side (ms_squash_check()), so each id maps one way and back.
 */
#include <errno.h>
#include <string.h>

#include "acl.h"
#include "ms.h"
#include "ms_keys.h"

static uint32_t anon(const struct ms_squash *sq, int gid)
{
	return gid ? sq->anongid : sq->anonuid;
}

uint32_t ms_idmap_in(const struct ms_squash *sq, int gid, uint32_t id)
{
	for (int i = 0; i < sq->nmaps; i++) {
		const struct ms_idmap *m = &sq->maps[i];

		if (m->gid == gid && id - m->client < m->count)
			return m->fs + (id - m->client);
	}
	return sq->unmapped_squash ? anon(sq, gid) : id;
}

uint32_t ms_idmap_out(const struct ms_squash *sq, int gid, uint32_t id)
{
	for (int i = 0; i < sq->nmaps; i++) {
		const struct ms_idmap *m = &sq->maps[i];

		if (m->gid == gid && id - m->fs < m->count)
			return m->client + (id - m->fs);
	}
	return sq->unmapped_squash ? anon(sq, gid) : id;
}

int ms_idmap_active(const struct ms_squash *sq)
{
	return sq->nmaps || sq->unmapped_squash;
}

void ms_squash_apply(const struct ms_squash *sq, uint32_t *uid, uint32_t *gid, uint32_t *groups,
		     uint32_t *ngroups)
{
	if (sq->mode == MS_SQUASH_ALL || (sq->mode == MS_SQUASH_ROOT && *uid == 0)) {
		*uid = sq->anonuid;
		*gid = sq->anongid;
		*ngroups = 0;
		return;
	}
	if (!ms_idmap_active(sq))
		return;
	*uid = ms_idmap_in(sq, 0, *uid);
	*gid = ms_idmap_in(sq, 1, *gid);
	for (uint32_t i = 0; i < *ngroups; i++)
		groups[i] = ms_idmap_in(sq, 1, groups[i]);
}

/* Do [a, a + n) and [b, b + m) share an id? */
static int overlap(uint32_t a, uint32_t n, uint32_t b, uint32_t m)
{
	return a < b + m && b < a + n;
}

int ms_squash_check(const struct ms_squash *sq)
{
	if (sq->mode > MS_SQUASH_ALL || sq->unmapped_squash > 1 || sq->nmaps > MS_IDMAP_MAX)
		return -EINVAL;
	for (int i = 0; i < sq->nmaps; i++) {
		const struct ms_idmap *m = &sq->maps[i];

		if (m->gid > 1 || m->count == 0 || m->client > UINT32_MAX - (m->count - 1) ||
		    m->fs > UINT32_MAX - (m->count - 1))
			return -EINVAL;
		for (int j = 0; j < i; j++) {
			const struct ms_idmap *o = &sq->maps[j];

			if (o->gid == m->gid &&
			    (overlap(o->client, o->count, m->client, m->count) ||
			     overlap(o->fs, o->count, m->fs, m->count)))
				return -EINVAL;
		}
	}
	return 0;
}

/* Entry @i of an ACL xattr value: tag at +0, perm at +2, id at +4 (acl.h). */
static uint8_t *acl_entry(uint8_t *v, size_t i)
{
	return v + 4 + 8 * i;
}

static uint16_t tag_of(const uint8_t *e)
{
	return (uint16_t)(e[0] | e[1] << 8);
}

void ms_idmap_acl_xattr(const struct ms_squash *sq, int in, void *value, size_t len)
{
	uint8_t *v = value;
	size_t n;

	if (!ms_idmap_active(sq) || len < 4 || (len - 4) % 8 || get_le32(v) != MS_ACL_XATTR_VERSION)
		return;
	n = (len - 4) / 8;
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = acl_entry(v, i);
		uint16_t tag = tag_of(e);

		if (tag != MS_ACL_USER && tag != MS_ACL_GROUP)
			continue;
		int gid = tag == MS_ACL_GROUP;
		uint32_t id = get_le32(e + 4);

		put_le32(e + 4, in ? ms_idmap_in(sq, gid, id) : ms_idmap_out(sq, gid, id));
	}
	/*
	 * Named entries go by increasing id (acl_valid()); a map may reorder them.
	 * Insertion sort within each run of one tag: a few entries, and a run
	 * never mixes users with groups.
	 */
	for (size_t i = 1; i < n; i++) {
		for (size_t j = i; j > 0; j--) {
			uint8_t *a = acl_entry(v, j - 1), *b = acl_entry(v, j), t[8];
			uint16_t tag = tag_of(b);

			if (tag_of(a) != tag || (tag != MS_ACL_USER && tag != MS_ACL_GROUP) ||
			    get_le32(a + 4) <= get_le32(b + 4))
				break;
			memcpy(t, a, 8);
			memcpy(a, b, 8);
			memcpy(b, t, 8);
		}
	}
}
