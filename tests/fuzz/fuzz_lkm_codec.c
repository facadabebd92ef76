// SPDX-License-Identifier: MIT
/*
 * fuzz_lkm_codec.c - the kernel client's hand-written IoReq/IoReply codec
 * (client-lkm/codec.c, built unchanged in user space over tests/fuzz/kshim),
 * differentially against protobuf-c: what both read, they read the same; what
 * the kernel accepts is, but for the opaque capability inside an IoReq,
 * protobuf-c's too; what the kernel encodes protobuf-c reads back the same.
 * The first input byte picks IoReq or IoReply.
 */
#include <string.h>

#include "codec.h"
#include "fuzz.h"
#include "rdfs.pb-c.h"

static void check_ioreq(const uint8_t *data, size_t size)
{
	static uint8_t buf[RDFS_MAX_BODY];
	struct rdfs_ioreq r;
	Rdfs__IoReq *pb;
	size_t n;

	if (rdfs_ioreq_decode(data, size, &r))
		return;
	FUZZ_CHECK(!r.cap_len || (r.cap >= data && r.cap + r.cap_len <= data + size));
	/*
	 * The capability is opaque to the kernel (the helper hands it over): its
	 * inside may be what protobuf-c refuses. Where protobuf-c reads the whole
	 * message, the values agree.
	 */
	pb = rdfs__io_req__unpack(NULL, size, data);
	if (pb) {
		FUZZ_CHECK(pb->first_block == r.first_block && pb->block_count == r.block_count &&
			   pb->head == r.head && pb->length == r.length &&
			   (pb->stable != 0) == r.stable);
		FUZZ_CHECK(!pb->cap || r.cap);
		rdfs__io_req__free_unpacked(pb, NULL);
	}

	/* The outer message alone (no capability) is always protobuf-c's too. */
	r.cap = NULL;
	r.cap_len = 0;
	n = rdfs_ioreq_encode(&r, buf);
	FUZZ_CHECK(n == rdfs_ioreq_size(&r) && n <= sizeof(buf));
	pb = rdfs__io_req__unpack(NULL, n, buf);
	FUZZ_CHECK(pb != NULL);
	FUZZ_CHECK(pb->first_block == r.first_block && pb->block_count == r.block_count &&
		   pb->head == r.head && pb->length == r.length &&
		   (pb->stable != 0) == r.stable);
	rdfs__io_req__free_unpacked(pb, NULL);
}

static void check_ioreply(const uint8_t *data, size_t size)
{
	uint8_t buf[64];
	struct rdfs_ioreply r;
	Rdfs__IoReply *pb;
	size_t n;

	if (rdfs_ioreply_decode(data, size, &r))
		return;
	pb = rdfs__io_reply__unpack(NULL, size, data);
	FUZZ_CHECK(pb != NULL);
	FUZZ_CHECK(pb->length == r.length && pb->verifier == r.verifier);
	rdfs__io_reply__free_unpacked(pb, NULL);

	n = rdfs_ioreply_encode(&r, buf);
	FUZZ_CHECK(n <= sizeof(buf));
	pb = rdfs__io_reply__unpack(NULL, n, buf);
	FUZZ_CHECK(pb != NULL && pb->length == r.length && pb->verifier == r.verifier);
	rdfs__io_reply__free_unpacked(pb, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size - 1 > RDFS_MAX_BODY)
		return 0;
	if (data[0] & 1)
		check_ioreply(data + 1, size - 1);
	else
		check_ioreq(data + 1, size - 1);
	return 0;
}
