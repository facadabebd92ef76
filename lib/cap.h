/* SPDX-License-Identifier: MIT */
/*
 * cap.h - capabilities: metaserver-signed, expiring grants of block ranges.
 *
 * The MAC covers a canonical encoding (not the protobuf bytes, whose field order
 * is not fixed): the holder (16-bit length, bytes), server_id, ino, rights,
 * expiry_ns, epoch, gen, then each range's first and count, all little-endian
 * fixed width. Epoch and gen are checked by the I/O server's fences, not here.
 * The holder is the identity (auth.h) of the session it was granted to: a copy
 * presented on any other identity's connection is refused. The key is the capability key, which only
 * the metaserver and I/O servers hold.
 */
#ifndef RDFS_CAP_H
#define RDFS_CAP_H

#include <stdint.h>

#include "auth.h"
#include "frame.h"		/* RDFS_CAP_READ, RDFS_CAP_WRITE */
#include "rdfs.pb-c.h"

/* Sign @cap in place (fills cap->mac with a malloc'ed MAC; free with cap_free_mac). */
int cap_sign(const struct auth_secret *key, Rdfs__Capability *cap);
void cap_free_mac(Rdfs__Capability *cap);

/*
 * Check that @cap is genuine, unexpired at @now_ns, meant for @server_id and
 * the peer identity @holder, grants @rights and covers blocks [first, first + count).
 * Returns 0, -EBADMSG (missing or bad MAC: forged or altered),
 * -EKEYEXPIRED (expired), -EACCES (wrong server, rights or range not covered).
 */
int cap_check(const struct auth_secret *key, const Rdfs__Capability *cap, uint32_t server_id,
	      const char *holder, uint32_t rights, uint64_t first, uint64_t count,
	      int64_t now_ns);

/* CLOCK_REALTIME in nanoseconds. */
int64_t cap_now_ns(void);

#endif
