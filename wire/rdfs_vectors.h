/* SPDX-License-Identifier: MIT */
/*
 * rdfs_vectors.h - the check of one test vector of the wire definitions
 * (rdfs_frame.h, rdfs_verbs.h), compiled by both halves of the vectors in
 * client-lkm/vectors/: the user-space test that writes them from lib's
 * encoders (tests/unit/lib_lkm_codec_vectors_test.cc) and the kernel client's
 * self-test (client-lkm/codec_selftest.c, insmod rdfs.ko selftest=1). So the
 * same bytes go through the same decoders and encoders under both compilers,
 * and the vectors say what the bytes must decode to.
 *
 * A vector is a line KIND NAME KEY=VALUE... of vectors.txt and NAME.bin, its
 * bytes. The check decodes the bytes, compares every field the kind has (all
 * must be present; a signed value is kept as its 64-bit two's complement),
 * encodes the decoded values again and compares the bytes. Wire kinds:
 *
 *   frame   one frame header: magic version flags opcode status tag body_len
 *           data_len
 *   verbs   one whole SEND: type flags credits cookie status ndesc; per
 *           descriptor, in order, desc.addr desc.len desc.rkey (the keys
 *           repeat); for a type that carries a frame, its header as fh.flags
 *           fh.opcode fh.status fh.tag fh.body_len fh.data_len (magic and
 *           version are checked by the decoder). The body and data are bytes
 *           only: the check sees them where the layout puts them.
 *   params  connection private data: credits recv_size
 *
 * Other kinds (the kernel client's IoReq/IoReply codec) are checked by their
 * own code; this one answers -ENOENT for them.
 */
#ifndef RDFS_WIRE_VECTORS_H
#define RDFS_WIRE_VECTORS_H

#include "rdfs_frame.h"
#include "rdfs_verbs.h"

struct rdfs_vec_field {
	const char *key;
	uint64_t val;
};

struct rdfs_vec {
	const char *kind;
	const char *name;
	const uint8_t *bytes;
	size_t len;
	const struct rdfs_vec_field *fields;
	unsigned int nfields;
};

/*
 * Whether the @nth (from 0) field @key of @v holds @got; if not, or if @v has
 * no such field, *@what names it.
 */
static inline int rdfs_vec_is(const struct rdfs_vec *v, const char *key, unsigned int nth,
			      uint64_t got, const char **what)
{
	unsigned int i;

	for (i = 0; i < v->nfields; i++) {
		if (strcmp(v->fields[i].key, key))
			continue;
		if (nth) {
			nth--;
			continue;
		}
		if (v->fields[i].val == got)
			return 1;
		break;
	}
	*what = key;
	return 0;
}

/* How many fields @key @v has. */
static inline unsigned int rdfs_vec_count(const struct rdfs_vec *v, const char *key)
{
	unsigned int i, n = 0;

	for (i = 0; i < v->nfields; i++)
		n += !strcmp(v->fields[i].key, key);
	return n;
}

/* The names a frame header's fields go by: plain (frame) or fh.* (verbs). */
struct rdfs_vec_frame_keys {
	const char *flags, *opcode, *status, *tag, *body_len, *data_len;
};

static inline int rdfs_vec_frame_is(const struct rdfs_vec *v, const struct rdfs_frame_hdr *h,
				    const struct rdfs_vec_frame_keys *k, const char **what)
{
	return rdfs_vec_is(v, k->flags, 0, h->flags, what) &&
	       rdfs_vec_is(v, k->opcode, 0, h->opcode, what) &&
	       rdfs_vec_is(v, k->status, 0, (uint64_t)(int64_t)h->status, what) &&
	       rdfs_vec_is(v, k->tag, 0, h->tag, what) &&
	       rdfs_vec_is(v, k->body_len, 0, h->body_len, what) &&
	       rdfs_vec_is(v, k->data_len, 0, h->data_len, what);
}

static inline int rdfs_vec_check_frame(const struct rdfs_vec *v, uint8_t *buf,
				       const char **what)
{
	static const struct rdfs_vec_frame_keys keys = {
		"flags", "opcode", "status", "tag", "body_len", "data_len",
	};
	struct rdfs_frame_hdr h;

	*what = "decode";
	if (v->len != RDFS_FRAME_HDR_LEN || rdfs_frame_hdr_decode(v->bytes, &h))
		return -EINVAL;
	if (!rdfs_vec_is(v, "magic", 0, h.magic, what) ||
	    !rdfs_vec_is(v, "version", 0, h.version, what) ||
	    !rdfs_vec_frame_is(v, &h, &keys, what))
		return -EINVAL;
	rdfs_frame_hdr_encode(&h, buf);
	*what = "bytes";
	return memcmp(buf, v->bytes, RDFS_FRAME_HDR_LEN) ? -EINVAL : 0;
}

static inline int rdfs_vec_check_verbs(const struct rdfs_vec *v, uint8_t *buf,
				       const char **what)
{
	static const struct rdfs_vec_frame_keys keys = {
		"fh.flags", "fh.opcode", "fh.status", "fh.tag", "fh.body_len", "fh.data_len",
	};
	static const char *const desc_keys[] = { "desc.addr", "desc.len", "desc.rkey" };
	struct verbs_msg m;
	struct verbs_desc d;
	uint8_t *p = buf;
	unsigned int i;

	/* set on success only: zeroed, so no compiler takes it for unset */
	memset(&m, 0, sizeof(m));
	*what = "decode";
	if (verbs_msg_parse(v->bytes, v->len, RDFS_MAX_BODY, RDFS_MAX_DATA, &m))
		return -EINVAL;
	if (!rdfs_vec_is(v, "type", 0, m.vh.type, what) ||
	    !rdfs_vec_is(v, "flags", 0, m.vh.flags, what) ||
	    !rdfs_vec_is(v, "credits", 0, m.vh.credits, what) ||
	    !rdfs_vec_is(v, "cookie", 0, m.vh.cookie, what) ||
	    !rdfs_vec_is(v, "status", 0, (uint64_t)(int64_t)m.vh.status, what) ||
	    !rdfs_vec_is(v, "ndesc", 0, m.vh.ndesc, what))
		return -EINVAL;
	for (i = 0; i < 3; i++) {
		*what = desc_keys[i];
		if (rdfs_vec_count(v, desc_keys[i]) != m.vh.ndesc)
			return -EINVAL;
	}
	verbs_hdr_encode(&m.vh, p);
	p += VERBS_HDR_LEN;
	for (i = 0; i < m.vh.ndesc; i++) {
		verbs_desc_get(m.desc + (size_t)i * VERBS_DESC_LEN, &d);
		if (!rdfs_vec_is(v, "desc.addr", i, d.addr, what) ||
		    !rdfs_vec_is(v, "desc.len", i, d.len, what) ||
		    !rdfs_vec_is(v, "desc.rkey", i, d.rkey, what))
			return -EINVAL;
		verbs_desc_put(p, &d);
		p += VERBS_DESC_LEN;
	}
	if (m.vh.type != VERBS_MSG_DONE && m.vh.type != VERBS_MSG_CREDIT) {
		if (!rdfs_vec_frame_is(v, &m.fh, &keys, what))
			return -EINVAL;
		rdfs_frame_hdr_encode(&m.fh, p);
		p += RDFS_FRAME_HDR_LEN;
		/* verbs_msg_parse() checked the length: this is at most v->len */
		if (m.body) {
			memcpy(p, m.body, m.fh.body_len);
			p += m.fh.body_len;
		}
		if (m.data) {
			memcpy(p, m.data, m.fh.data_len);
			p += m.fh.data_len;
		}
	}
	*what = "bytes";
	return (size_t)(p - buf) == v->len && !memcmp(buf, v->bytes, v->len) ? 0 : -EINVAL;
}

static inline int rdfs_vec_check_params(const struct rdfs_vec *v, uint8_t *buf,
					const char **what)
{
	struct verbs_conn_params cp;

	*what = "decode";
	if (v->len != VERBS_PRIV_LEN || verbs_params_decode(v->bytes, v->len, &cp))
		return -EINVAL;
	if (!rdfs_vec_is(v, "credits", 0, cp.credits, what) ||
	    !rdfs_vec_is(v, "recv_size", 0, cp.recv_size, what))
		return -EINVAL;
	verbs_params_encode(&cp, buf);
	*what = "bytes";
	return memcmp(buf, v->bytes, VERBS_PRIV_LEN) ? -EINVAL : 0;
}

/*
 * Check @v, encoding into @buf of @size bytes. 0; -EINVAL with *@what naming
 * the field that differs, "decode" (refused), "bytes" (encoded otherwise) or
 * "length" (over @size); -ENOENT for a kind that is not the wire's.
 */
static inline int rdfs_wire_vec_check(const struct rdfs_vec *v, uint8_t *buf, size_t size,
				      const char **what)
{
	*what = "length";
	if (v->len > size)
		return -EINVAL;
	if (!strcmp(v->kind, "frame"))
		return rdfs_vec_check_frame(v, buf, what);
	if (!strcmp(v->kind, "verbs"))
		return rdfs_vec_check_verbs(v, buf, what);
	if (!strcmp(v->kind, "params"))
		return rdfs_vec_check_params(v, buf, what);
	*what = "kind";
	return -ENOENT;
}

#endif
