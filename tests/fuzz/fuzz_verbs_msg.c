// SPDX-License-Identifier: MIT
/*
 * fuzz_verbs_msg.c - what a peer's SEND puts in our receive buffer over RDMA
 * (lib/xport_verbs_wire.h), and its connection private data: a message the
 * parser accepts points only inside the buffer, and its descriptors add up
 * to the frame's remote bytes.
 */
#include <string.h>

#include "fuzz.h"
#include "xport_verbs_wire.h"

static int inside(const uint8_t *p, size_t n, const uint8_t *buf, size_t len)
{
	return !p ? n == 0 : p >= buf && n <= len && (size_t)(p - buf) <= len - n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct verbs_conn_params params;
	struct verbs_msg m;
	struct verbs_desc d;
	uint64_t sum = 0;
	uint32_t max_body = RDFS_MAX_BODY, max_data = RDFS_MAX_DATA;
	unsigned int i;
	int err;

	if (size >= 1 && (data[0] & 1)) {
		/* a small receiver: the limits must hold against it too */
		max_body = 4096;
		max_data = 65536;
	}
	if (verbs_params_decode(data, size, &params) == 0) {
		FUZZ_CHECK(params.credits >= VERBS_MIN_CREDITS);
		FUZZ_CHECK(params.recv_size >= VERBS_MIN_RECV_SIZE &&
			   params.recv_size <= VERBS_MAX_RECV_SIZE);
	}
	err = verbs_msg_parse(data, size, max_body, max_data, &m);
	FUZZ_CHECK(err == 0 || err == -EPROTO || err == -EMSGSIZE);
	if (err)
		return 0;
	FUZZ_CHECK(m.vh.ndesc <= VERBS_MAX_DESC);
	FUZZ_CHECK(inside(m.desc, (size_t)m.vh.ndesc * VERBS_DESC_LEN, data, size));
	if (m.vh.type == VERBS_MSG_DONE || m.vh.type == VERBS_MSG_CREDIT)
		return 0;
	FUZZ_CHECK(m.fh.body_len <= max_body && m.fh.data_len <= max_data);
	FUZZ_CHECK(inside(m.body, m.body ? m.fh.body_len : 0, data, size));
	if (m.vh.type == VERBS_MSG_EAGER || m.vh.type == VERBS_MSG_SINK)
		FUZZ_CHECK(inside(m.data, m.data ? m.fh.data_len : 0, data, size));
	if (m.vh.type == VERBS_MSG_RNDV) {
		for (i = 0; i < m.vh.ndesc; i++) {
			verbs_desc_get(m.desc + (size_t)i * VERBS_DESC_LEN, &d);
			sum += d.len;
		}
		FUZZ_CHECK(sum == m.fh.data_len +
			   ((m.vh.flags & VERBS_F_BODY_REMOTE) ? m.fh.body_len : 0));
	}
	return 0;
}
