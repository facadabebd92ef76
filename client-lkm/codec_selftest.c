// SPDX-License-Identifier: GPL-2.0
/*
 * codec_selftest.c - the in-kernel half of the test vectors: every vector of
 * client-lkm/vectors/ (compiled in by client-lkm/build as codec_vectors.h) is
 * decoded to its fields and encoded again to its bytes, here as in user space
 * (tests/unit/lib_lkm_codec_vectors_test.cc). IoReq and IoReply go through the
 * module's own codec against protobuf-c's bytes; the frame header, the verbs
 * messages and the connection parameters through wire/rdfs_vectors.h's check,
 * the same C the user-space test runs. A kind the module has no check for
 * fails: the self-test runs every vector or says so.
 */
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "codec.h"
#include "codec_vectors.h"
#include "rdfs_msg.h"

#define RDFS_VEC_BUF	4096

static int rdfs_vec_check_ioreq(const struct rdfs_vec *v, u8 *buf, const char **what)
{
	struct rdfs_ioreq rq;
	size_t n;

	*what = "decode";
	if (rdfs_ioreq_decode(v->bytes, v->len, &rq))
		return -EINVAL;
	if (!rdfs_vec_is(v, "first_block", 0, rq.first_block, what) ||
	    !rdfs_vec_is(v, "block_count", 0, rq.block_count, what) ||
	    !rdfs_vec_is(v, "head", 0, rq.head, what) ||
	    !rdfs_vec_is(v, "length", 0, rq.length, what) ||
	    !rdfs_vec_is(v, "stable", 0, rq.stable, what) ||
	    !rdfs_vec_is(v, "cap_len", 0, rq.cap_len, what))
		return -EINVAL;
	*what = "bytes";
	if (rdfs_ioreq_size(&rq) != v->len)
		return -EINVAL;
	n = rdfs_ioreq_encode(&rq, buf);
	return n == v->len && !memcmp(buf, v->bytes, n) ? 0 : -EINVAL;
}

static int rdfs_vec_check_ioreply(const struct rdfs_vec *v, u8 *buf, const char **what)
{
	struct rdfs_ioreply rp;
	size_t n;

	*what = "decode";
	if (rdfs_ioreply_decode(v->bytes, v->len, &rp))
		return -EINVAL;
	if (!rdfs_vec_is(v, "length", 0, rp.length, what) ||
	    !rdfs_vec_is(v, "verifier", 0, rp.verifier, what))
		return -EINVAL;
	n = rdfs_ioreply_encode(&rp, buf);
	*what = "bytes";
	return n == v->len && !memcmp(buf, v->bytes, n) ? 0 : -EINVAL;
}

static int rdfs_vec_check(const struct rdfs_vec *v, u8 *buf, const char **what)
{
	*what = "length";
	if (v->len > RDFS_VEC_BUF)
		return -EINVAL;
	if (!strcmp(v->kind, "ioreq"))
		return rdfs_vec_check_ioreq(v, buf, what);
	if (!strcmp(v->kind, "ioreply"))
		return rdfs_vec_check_ioreply(v, buf, what);
	return rdfs_wire_vec_check(v, buf, RDFS_VEC_BUF, what);
}

int rdfs_codec_selftest(void)
{
	const char *what;
	u8 *buf;
	int i, err = 0;

	buf = kmalloc(RDFS_VEC_BUF, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < ARRAY_SIZE(rdfs_codec_vectors); i++) {
		const struct rdfs_vec *v = &rdfs_codec_vectors[i];

		if (rdfs_vec_check(v, buf, &what)) {
			pr_err(RDFS_MSG(1500001) "codec vector %s %s: mismatch (%s)\n",
			       v->kind, v->name, what);
			err = -EINVAL;
		}
	}
	kfree(buf);
	if (!err)
		pr_info(RDFS_MSG(1500002) "codec self-test: %zu vectors pass\n",
			ARRAY_SIZE(rdfs_codec_vectors));
	return err;
}
