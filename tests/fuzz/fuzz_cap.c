// SPDX-License-Identifier: MIT
/*
 * fuzz_cap.c - capabilities as an I/O server receives them (lib/cap.h): no
 * byte string a client can send passes cap_check() under a key it does not
 * hold, and one the metaserver signed passes for exactly what it grants,
 * after a trip through the wire encoding.
 */
#include <string.h>

#include "cap.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char keybytes[] = "fuzz capability key, 32 bytes...";
	struct auth_secret key;
	Rdfs__Capability *cap, *again;
	ProtobufCBinaryData mac;
	uint8_t *packed;
	size_t n;
	uint32_t rights;
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

	/* signed by the key holder: valid for what it names, after pack and unpack */
	mac = cap->mac;			/* the unpacked message's; cap_sign makes its own */
	cap->mac.data = NULL;
	cap->mac.len = 0;
	if (cap_sign(&key, cap) == 0 && cap->holder && cap->n_ranges &&
	    cap->ranges[0]->count && cap->expiry_ns > INT64_MIN) {
		n = rdfs__capability__get_packed_size(cap);
		packed = malloc(n ? n : 1);
		FUZZ_CHECK(packed != NULL);
		rdfs__capability__pack(cap, packed);
		again = rdfs__capability__unpack(NULL, n, packed);
		FUZZ_CHECK(again != NULL);
		rights = cap->rights & (RDFS_CAP_READ | RDFS_CAP_WRITE);
		err = cap_check(&key, again, cap->server_id, cap->holder, rights,
				cap->ranges[0]->first, 1, cap->expiry_ns - 1);
		FUZZ_CHECK(err == 0);
		/* and only for its own server */
		err = cap_check(&key, again, cap->server_id + 1, cap->holder, rights,
				cap->ranges[0]->first, 1, cap->expiry_ns - 1);
		FUZZ_CHECK(err == -EACCES);
		rdfs__capability__free_unpacked(again, NULL);
		free(packed);
	}
	cap_free_mac(cap);
	cap->mac = mac;
	rdfs__capability__free_unpacked(cap, NULL);
	return 0;
}
