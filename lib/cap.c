// SPDX-License-Identifier: MIT
/*
 * cap.c - sign and check capabilities over their canonical encoding (see cap.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cap.h"

#define CAP_FIXED_LEN	(4 + 8 + 4 + 8 + 8 + 4)
#define CAP_RANGE_LEN	(8 + 8)

static uint8_t *put_le(uint8_t *p, uint64_t v, int bytes)
{
	int i;

	for (i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + bytes;
}

/* The canonical bytes of @cap (without its MAC), malloc'ed. */
static uint8_t *cap_encode(const Rdfs__Capability *cap, size_t *len)
{
	uint8_t *buf, *p;
	size_t i;

	size_t hl = cap->holder ? strlen(cap->holder) : 0;

	*len = CAP_FIXED_LEN + cap->n_ranges * CAP_RANGE_LEN + 2 + hl;
	buf = malloc(*len);
	if (!buf)
		return NULL;
	/* the holder first, length-prefixed, so no two encodings share bytes */
	p = put_le(buf, hl, 2);
	memcpy(p, cap->holder ? cap->holder : "", hl);
	p += hl;
	p = put_le(p, cap->server_id, 4);
	p = put_le(p, cap->ino, 8);
	p = put_le(p, cap->rights, 4);
	p = put_le(p, (uint64_t)cap->expiry_ns, 8);
	p = put_le(p, cap->epoch, 8);
	p = put_le(p, cap->gen, 4);
	for (i = 0; i < cap->n_ranges; i++) {
		const Rdfs__BlockRange *r = cap->ranges[i];

		p = put_le(p, r ? r->first : 0, 8);
		p = put_le(p, r ? r->count : 0, 8);
	}
	return buf;
}

static int cap_mac(const struct auth_secret *key, const Rdfs__Capability *cap,
		   uint8_t mac[AUTH_MAC_LEN])
{
	const void *parts[1];
	size_t lens[1];
	uint8_t *buf;

	buf = cap_encode(cap, &lens[0]);
	if (!buf)
		return -ENOMEM;
	parts[0] = buf;
	auth_hmac(key, parts, lens, 1, mac);
	free(buf);
	return 0;
}

int cap_sign(const struct auth_secret *key, Rdfs__Capability *cap)
{
	uint8_t *mac = malloc(AUTH_MAC_LEN);
	int err;

	if (!mac)
		return -ENOMEM;
	err = cap_mac(key, cap, mac);
	if (err) {
		free(mac);
		return err;
	}
	cap_free_mac(cap);
	cap->mac.data = mac;
	cap->mac.len = AUTH_MAC_LEN;
	return 0;
}

void cap_free_mac(Rdfs__Capability *cap)
{
	free(cap->mac.data);
	cap->mac.data = NULL;
	cap->mac.len = 0;
}

static int range_covers(const Rdfs__BlockRange *r, uint64_t first, uint64_t count)
{
	if (!r || first < r->first)
		return 0;
	/* Subtractions, not additions: a huge first + count must not wrap into range. */
	if (first - r->first > r->count)
		return 0;
	return count <= r->count - (first - r->first);
}

int cap_check(const struct auth_secret *key, const Rdfs__Capability *cap, uint32_t server_id,
	      const char *holder, uint32_t rights, uint64_t first, uint64_t count,
	      int64_t now_ns)
{
	uint8_t mac[AUTH_MAC_LEN];
	size_t i;
	int err;

	if (!cap || !cap->mac.data || cap->mac.len != AUTH_MAC_LEN)
		return -EBADMSG;
	err = cap_mac(key, cap, mac);
	if (err)
		return err;
	if (!auth_mac_equal(mac, cap->mac.data, AUTH_MAC_LEN))
		return -EBADMSG;
	if (now_ns >= cap->expiry_ns)
		return -EKEYEXPIRED;
	if (cap->server_id != server_id)
		return -EACCES;
	if (!holder || !cap->holder || strcmp(cap->holder, holder) != 0)
		return -EACCES;
	if ((cap->rights & rights) != rights)
		return -EACCES;
	for (i = 0; i < cap->n_ranges; i++)
		if (range_covers(cap->ranges[i], first, count))
			return 0;
	return -EACCES;
}

int64_t cap_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
