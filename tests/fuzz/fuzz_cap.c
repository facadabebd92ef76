// SPDX-License-Identifier: MIT
/*
 * fuzz_cap.c - capabilities as an I/O server receives them (lib/cap.h): no
 * byte string a client can send passes cap_check() under a key it does not
 * hold, and one the metaserver signs with the same fields passes for exactly
 * what it grants, after a trip through the wire encoding.
 */
#include <string.h>

#include "cap.h"
#include "fuzz.h"

#define MAX_RANGES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char keybytes[] = "fuzz capability key, 32 bytes...";
	Rdfs__BlockRange range[MAX_RANGES], *ranges[MAX_RANGES];
	Rdfs__Capability fresh = RDFS__CAPABILITY__INIT;
	Rdfs__Capability *cap, *again;
	struct auth_secret key;
	uint8_t *packed;
	uint32_t rights;
	size_t n, i;
	int err;

	auth_secret_from_bytes(&key, keybytes, sizeof(keybytes) - 1);
	cap = rdfs__capability__unpack(NULL, size, data);
	if (!cap)
		return 0;
	/* a forgery: whatever it says, it was not signed with our key */
	err = cap_check(&key, cap, cap->server_id, cap->holder ? cap->holder : "", cap->rights,
			cap->n_ranges ? cap->ranges[0]->first : 0,
			cap->n_ranges ? cap->ranges[0]->count : 0, INT64_MIN);
	FUZZ_CHECK(err == -EBADMSG || err == -EINVAL);

	/*
	 * The same fields as the metaserver would build them (no unknown fields:
	 * protobuf-c repacks those as it read them, which is its business), signed
	 * by the key holder: valid for what they name, after pack and unpack.
	 */
	if (!cap->holder || !cap->n_ranges || cap->n_ranges > MAX_RANGES ||
	    !cap->ranges[0]->count || cap->expiry_ns == INT64_MIN)
		goto out;
	fresh.server_id = cap->server_id;
	fresh.ino = cap->ino;
	fresh.rights = cap->rights;
	fresh.expiry_ns = cap->expiry_ns;
	fresh.holder = cap->holder;
	fresh.epoch = cap->epoch;
	fresh.gen = cap->gen;
	for (i = 0; i < cap->n_ranges; i++) {
		rdfs__block_range__init(&range[i]);
		range[i].first = cap->ranges[i]->first;
		range[i].count = cap->ranges[i]->count;
		ranges[i] = &range[i];
	}
	fresh.n_ranges = cap->n_ranges;
	fresh.ranges = ranges;
	if (cap_sign(&key, &fresh))
		goto out;
	n = rdfs__capability__get_packed_size(&fresh);
	packed = malloc(n ? n : 1);
	FUZZ_CHECK(packed != NULL);
	rdfs__capability__pack(&fresh, packed);
	again = rdfs__capability__unpack(NULL, n, packed);
	FUZZ_CHECK(again != NULL);
	rights = fresh.rights & (RDFS_CAP_READ | RDFS_CAP_WRITE);
	err = cap_check(&key, again, fresh.server_id, fresh.holder, rights, range[0].first, 1,
			fresh.expiry_ns - 1);
	FUZZ_CHECK(err == 0);
	/* and only for its own server */
	err = cap_check(&key, again, fresh.server_id + 1, fresh.holder, rights, range[0].first, 1,
			fresh.expiry_ns - 1);
	FUZZ_CHECK(err == -EACCES);
	rdfs__capability__free_unpacked(again, NULL);
	free(packed);
	cap_free_mac(&fresh);
out:
	rdfs__capability__free_unpacked(cap, NULL);
	return 0;
}
