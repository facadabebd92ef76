// SPDX-License-Identifier: GPL-2.0
/*
 * codec_selftest.c - the in-kernel half of the codec vectors: decode and
 * re-encode every vector of client-lkm/vectors/ (compiled in by
 * client-lkm/build as codec_vectors.h) and compare with protobuf-c's bytes.
 */
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "codec.h"
#include "codec_vectors.h"

static int rdfs_vector_check(const struct rdfs_codec_vector *v, u8 *buf)
{
	struct rdfs_ioreq rq;
	struct rdfs_ioreply rp;
	size_t n;

	if (v->kind == RDFS_VEC_IOREQ) {
		if (rdfs_ioreq_decode(v->bytes, v->len, &rq))
			return -EINVAL;
		if (rq.first_block != v->first_block || rq.block_count != v->block_count ||
		    rq.head != v->head || rq.length != v->length || rq.stable != v->stable ||
		    rq.cap_len != v->cap_len)
			return -EINVAL;
		if (rdfs_ioreq_size(&rq) != v->len)
			return -EINVAL;
		n = rdfs_ioreq_encode(&rq, buf);
	} else {
		if (rdfs_ioreply_decode(v->bytes, v->len, &rp))
			return -EINVAL;
		if (rp.length != v->length || rp.verifier != v->verifier)
			return -EINVAL;
		n = rdfs_ioreply_encode(&rp, buf);
	}
	return n == v->len && !memcmp(buf, v->bytes, n) ? 0 : -EINVAL;
}

int rdfs_codec_selftest(void)
{
	u8 *buf;
	int i, err = 0;

	buf = kmalloc(4096, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < ARRAY_SIZE(rdfs_codec_vectors); i++) {
		if (rdfs_codec_vectors[i].len > 4096 ||
		    rdfs_vector_check(&rdfs_codec_vectors[i], buf)) {
			pr_err("rdfs: codec vector %s: mismatch\n", rdfs_codec_vectors[i].name);
			err = -EINVAL;
		}
	}
	kfree(buf);
	if (!err)
		pr_info("rdfs: codec self-test: %zu vectors pass\n", ARRAY_SIZE(rdfs_codec_vectors));
	return err;
}
