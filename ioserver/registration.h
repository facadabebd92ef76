/* SPDX-License-Identifier: MIT */
/*
 * registration.h - keep this I/O server registered with the metaserver.
 *
 * A thread connects (as "server", with the server key of auth.h), sends REGISTER{url, volume_uuid,
 * capacity_blocks, name, pristine}, publishes the returned server id, then holds the
 * connection open with periodic PINGs: the metaserver counts the server as up
 * while that connection lives and, with the timeout its RegisterReply names,
 * while it hears from us (we ping three times per timeout). Each answered PING
 * extends the registration's lease in the fence table (fence.h); when it lapses,
 * or the connection breaks, the thread reconnects and registers again, backing
 * off exponentially. The id, once known, stays
 * valid across reconnects (the metaserver keeps it stable per volume uuid), so
 * the data path keeps serving while the metaserver is away.
 */
#ifndef RDFS_IOS_REGISTRATION_H
#define RDFS_IOS_REGISTRATION_H

#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "fence.h"
#include "server_id.h"

struct registration;

struct registration_opts {
	const char *metaserver;			/* URL */
	const struct auth_secret *cap_key;	/* the server key derives from it */
	const char *url;			/* advertised to the metaserver */
	const char *name;
	const char *domain;			/* NULL: none */
	const uint8_t *volume_uuid;		/* VOLUME_UUID_LEN bytes */
	uint64_t capacity_blocks;
	/*
	 * The volume reads as zeros everywhere: said in every REGISTER until one
	 * succeeds, never after (the metaserver only heeds it for a volume new to it).
	 */
	bool pristine;
	int ping_interval_ms;
	struct server_id *id;			/* set on every successful REGISTER */
	struct fence_table *fences;		/* its epoch too */
};

/* Start the thread (the strings and uuid are copied). */
int registration_start(const struct registration_opts *o, struct registration **out);
/* Stop and join the thread, closing the metaserver connection. */
void registration_stop(struct registration *r);

#endif
