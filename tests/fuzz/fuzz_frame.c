// SPDX-License-Identifier: MIT
/*
 * fuzz_frame.c - the frame header decoder every peer's first bytes reach
 * (wire/rdfs_frame.h, the one the kernel client compiles too): whatever it
 * accepts is within the limits, and encodes back to the same 24 bytes.
 */
#include <string.h>

#include "frame.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdfs_frame_hdr h;
	uint8_t again[RDFS_FRAME_HDR_LEN];
	int err;

	if (size < RDFS_FRAME_HDR_LEN)
		return 0;
	err = rdfs_frame_hdr_decode(data, &h);
	FUZZ_CHECK(err == 0 || err == -EPROTO || err == -EMSGSIZE);
	if (err)
		return 0;
	FUZZ_CHECK(h.body_len <= RDFS_MAX_BODY && h.data_len <= RDFS_MAX_DATA);
	FUZZ_CHECK(h.opcode > 0 && h.opcode < RDFS_OP_MAX);
	FUZZ_CHECK(!(h.flags & RDFS_FRAME_MORE) ||
		   ((h.flags & RDFS_FRAME_REPLY) && !h.status && !h.body_len));
	FUZZ_CHECK(frame_op_name(h.opcode) != NULL);
	rdfs_frame_hdr_encode(&h, again);
	FUZZ_CHECK(memcmp(again, data, RDFS_FRAME_HDR_LEN) == 0);
	return 0;
}
