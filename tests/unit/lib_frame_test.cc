// SPDX-License-Identifier: MIT
/*
 * lib_frame_test.cc - the frame header's wire layout and its validation.
 */
#include <errno.h>
#include <string.h>

#include <gtest/gtest.h>

extern "C" {
#include "frame.h"
}

namespace {

struct rdfs_frame_hdr good_hdr()
{
	struct rdfs_frame_hdr h = {};

	h.magic = RDFS_FRAME_MAGIC;
	h.version = RDFS_FRAME_VERSION;
	h.flags = RDFS_FRAME_REPLY;
	h.opcode = RDFS_OP_LOOKUP;
	h.status = -ENOENT;
	h.tag = 0x01020304;
	h.body_len = 0x0a0b;
	h.data_len = 4096;
	return h;
}

TEST(Frame, EncodesLittleEndianAtDocumentedOffsets)
{
	struct rdfs_frame_hdr h = good_hdr();
	uint8_t buf[RDFS_FRAME_HDR_LEN];
	const uint8_t expect[RDFS_FRAME_HDR_LEN] = {
		'R', 'D', 'F', 'S',		/* magic 0x53464452 */
		1,				/* version */
		1,				/* flags */
		16, 0,				/* opcode */
		0xfe, 0xff, 0xff, 0xff,		/* status -2 */
		4, 3, 2, 1,			/* tag */
		0x0b, 0x0a, 0, 0,		/* body_len */
		0, 0x10, 0, 0,			/* data_len */
	};

	rdfs_frame_hdr_encode(&h, buf);
	EXPECT_EQ(0, memcmp(buf, expect, sizeof(buf)));
}

TEST(Frame, RoundTrips)
{
	struct rdfs_frame_hdr h = good_hdr(), d;
	uint8_t buf[RDFS_FRAME_HDR_LEN];

	rdfs_frame_hdr_encode(&h, buf);
	ASSERT_EQ(0, rdfs_frame_hdr_decode(buf, &d));
	EXPECT_EQ(h.magic, d.magic);
	EXPECT_EQ(h.version, d.version);
	EXPECT_EQ(h.flags, d.flags);
	EXPECT_EQ(h.opcode, d.opcode);
	EXPECT_EQ(h.status, d.status);
	EXPECT_EQ(h.tag, d.tag);
	EXPECT_EQ(h.body_len, d.body_len);
	EXPECT_EQ(h.data_len, d.data_len);
}

int decode_modified(void (*modify)(struct rdfs_frame_hdr *h))
{
	struct rdfs_frame_hdr h = good_hdr(), d;
	uint8_t buf[RDFS_FRAME_HDR_LEN];

	modify(&h);
	rdfs_frame_hdr_encode(&h, buf);
	return rdfs_frame_hdr_decode(buf, &d);
}

TEST(Frame, RejectsBadMagic)
{
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) { h->magic ^= 1; }));
}

TEST(Frame, RejectsBadVersion)
{
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) { h->version = 2; }));
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) { h->version = 0; }));
}

TEST(Frame, RejectsOpcodeZeroAndOutOfRange)
{
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) { h->opcode = 0; }));
	EXPECT_EQ(-EPROTO,
		  decode_modified([](struct rdfs_frame_hdr *h) { h->opcode = RDFS_OP_MAX; }));
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) { h->opcode = 0xffff; }));
	EXPECT_EQ(0,
		  decode_modified([](struct rdfs_frame_hdr *h) { h->opcode = RDFS_OP_MAX - 1; }));
}

TEST(Frame, LimitsAreInclusive)
{
	EXPECT_EQ(0, decode_modified([](struct rdfs_frame_hdr *h) {
		h->body_len = RDFS_MAX_BODY;
		h->data_len = RDFS_MAX_DATA;
	}));
}

TEST(Frame, RejectsOversizedBody)
{
	EXPECT_EQ(-EMSGSIZE,
		  decode_modified([](struct rdfs_frame_hdr *h) { h->body_len = RDFS_MAX_BODY + 1; }));
	EXPECT_EQ(-EMSGSIZE,
		  decode_modified([](struct rdfs_frame_hdr *h) { h->body_len = 0xffffffffu; }));
}

TEST(Frame, RejectsOversizedData)
{
	EXPECT_EQ(-EMSGSIZE,
		  decode_modified([](struct rdfs_frame_hdr *h) { h->data_len = RDFS_MAX_DATA + 1; }));
}

TEST(Frame, MagicIsCheckedBeforeLengths)
{
	/* Garbage must read as a protocol error, whatever its "length" bytes say. */
	uint8_t buf[RDFS_FRAME_HDR_LEN];
	struct rdfs_frame_hdr d;

	memset(buf, 0xff, sizeof(buf));
	EXPECT_EQ(-EPROTO, rdfs_frame_hdr_decode(buf, &d));
}

TEST(Frame, PartialReplyFlagOnlyWithReply)
{
	/* good_hdr() is a reply: a data-only partial reply is fine */
	EXPECT_EQ(0, decode_modified([](struct rdfs_frame_hdr *h) {
		h->flags = RDFS_FRAME_REPLY | RDFS_FRAME_MORE;
		h->status = 0;
		h->body_len = 0;
	}));
	/* a request flagged MORE */
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) {
		h->flags = RDFS_FRAME_MORE;
		h->status = 0;
		h->body_len = 0;
	}));
	/* a part carries no status and no body: those come in the last frame */
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) {
		h->flags = RDFS_FRAME_REPLY | RDFS_FRAME_MORE;
		h->status = -EIO;
		h->body_len = 0;
	}));
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) {
		h->flags = RDFS_FRAME_REPLY | RDFS_FRAME_MORE;
		h->status = 0;
		h->body_len = 1;
	}));
}

TEST(Frame, RejectsUnknownFlags)
{
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) { h->flags = 0x04; }));
	EXPECT_EQ(-EPROTO, decode_modified([](struct rdfs_frame_hdr *h) {
		h->flags = RDFS_FRAME_REPLY | 0x80;
	}));
}

TEST(Frame, OpNames)
{
	EXPECT_STREQ("lookup", frame_op_name(RDFS_OP_LOOKUP));
	EXPECT_STREQ("write", frame_op_name(RDFS_OP_WRITE));
	EXPECT_STREQ("auth_challenge", frame_op_name(RDFS_OP_AUTH_CHALLENGE));
	EXPECT_STREQ("unknown", frame_op_name(0));
	EXPECT_STREQ("unknown", frame_op_name(100));
	EXPECT_STREQ("unknown", frame_op_name(RDFS_OP_MAX));
	EXPECT_STREQ("unknown", frame_op_name(~0u));
}

} // namespace
