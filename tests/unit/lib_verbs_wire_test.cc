// SPDX-License-Identifier: MIT
/*
 * lib_verbs_wire_test.cc - the verbs module's SEND messages without hardware:
 * every type round-trips, and every way a peer can lie (truncation, trailing
 * bytes, bad magic, descriptors empty, overflowing, too many, not adding up,
 * frames over the receive limits) is refused before anything is allocated.
 */
#include <errno.h>
#include <string.h>

#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "xport_verbs_wire.h"
}

namespace {

struct rdfs_frame_hdr frame(uint32_t body_len, uint32_t data_len)
{
	struct rdfs_frame_hdr h = {};

	h.magic = RDFS_FRAME_MAGIC;
	h.version = RDFS_FRAME_VERSION;
	h.opcode = RDFS_OP_READ;
	h.tag = 77;
	h.body_len = body_len;
	h.data_len = data_len;
	return h;
}

std::vector<uint8_t> eager(uint32_t body_len, uint32_t data_len, uint16_t credits = 3)
{
	std::vector<uint8_t> b(verbs_eager_len(body_len, data_len));
	struct verbs_hdr vh = {};
	struct rdfs_frame_hdr fh = frame(body_len, data_len);

	vh.type = VERBS_MSG_EAGER;
	vh.credits = credits;
	verbs_hdr_encode(&vh, b.data());
	rdfs_frame_hdr_encode(&fh, b.data() + VERBS_HDR_LEN);
	for (size_t i = VERBS_HDR_LEN + RDFS_FRAME_HDR_LEN; i < b.size(); i++)
		b[i] = (uint8_t)(i * 7);
	return b;
}

/* An RNDV message with the given descriptors; inline body unless @flags say remote. */
std::vector<uint8_t> rndv(const std::vector<struct verbs_desc> &d, uint32_t body_len,
			  uint32_t data_len, uint8_t flags = 0, uint32_t cookie = 0x10002)
{
	uint32_t inl = (flags & VERBS_F_BODY_REMOTE) ? 0 : body_len;
	std::vector<uint8_t> b(verbs_rndv_len((unsigned int)d.size(), inl));
	struct verbs_hdr vh = {};
	struct rdfs_frame_hdr fh = frame(body_len, data_len);
	uint8_t *p = b.data() + VERBS_HDR_LEN;

	vh.type = VERBS_MSG_RNDV;
	vh.cookie = cookie;
	vh.ndesc = (uint16_t)d.size();
	vh.flags = flags;
	verbs_hdr_encode(&vh, b.data());
	for (const auto &x : d) {
		verbs_desc_put(p, &x);
		p += VERBS_DESC_LEN;
	}
	rdfs_frame_hdr_encode(&fh, p);
	return b;
}

int parse(const std::vector<uint8_t> &b, struct verbs_msg *m = nullptr)
{
	struct verbs_msg tmp;

	return verbs_msg_parse(b.data(), b.size(), RDFS_MAX_BODY, RDFS_MAX_DATA, m ? m : &tmp);
}

struct verbs_desc desc(uint64_t addr, uint32_t len, uint32_t rkey = 0xEEEE)
{
	struct verbs_desc d = { addr, len, rkey };

	return d;
}

} // namespace

TEST(VerbsWire, EagerRoundTrips)
{
	auto b = eager(10, 300, 9);
	struct verbs_msg m;

	ASSERT_EQ(0, parse(b, &m));
	EXPECT_EQ(VERBS_MSG_EAGER, m.vh.type);
	EXPECT_EQ(9, m.vh.credits);
	EXPECT_EQ(77u, m.fh.tag);
	EXPECT_EQ(b.data() + VERBS_HDR_LEN + RDFS_FRAME_HDR_LEN, m.body);
	EXPECT_EQ(m.body + 10, m.data);
}

TEST(VerbsWire, EmptyEagerFrameHasNoPointers)
{
	auto b = eager(0, 0);
	struct verbs_msg m;

	ASSERT_EQ(0, parse(b, &m));
	EXPECT_EQ(nullptr, m.body);
	EXPECT_EQ(nullptr, m.data);
	EXPECT_EQ(44u, b.size());
}

TEST(VerbsWire, EveryTruncationAndTrailingByteIsRefused)
{
	auto b = eager(5, 17);
	struct verbs_msg m;

	for (size_t n = 0; n < b.size(); n++)
		EXPECT_EQ(-EPROTO, verbs_msg_parse(b.data(), n, RDFS_MAX_BODY, RDFS_MAX_DATA, &m))
			<< n;
	b.push_back(0);
	EXPECT_EQ(-EPROTO, parse(b));

	auto r = rndv({ desc(0x1000, 8192) }, 4, 8192);
	for (size_t n = 0; n < r.size(); n++) {
		EXPECT_NE(0, verbs_msg_parse(r.data(), n, RDFS_MAX_BODY, RDFS_MAX_DATA, &m)) << n;
	}
}

TEST(VerbsWire, BadMagicVersionTypeReservedAreEproto)
{
	for (size_t off : { 0, 4, 5, 19 }) {
		auto b = eager(0, 8);

		b[off] ^= 0x40;
		EXPECT_EQ(-EPROTO, parse(b)) << off;
	}
	auto b = eager(0, 8);
	b[VERBS_HDR_LEN] ^= 1;		/* the frame header's magic */
	EXPECT_EQ(-EPROTO, parse(b));
}

TEST(VerbsWire, EagerWithRendezvousFieldsIsEproto)
{
	auto b = eager(0, 8);

	b[16] = 1;			/* ndesc */
	EXPECT_EQ(-EPROTO, parse(b));
	b = eager(0, 8);
	b[8] = 1;			/* cookie */
	EXPECT_EQ(-EPROTO, parse(b));
}

TEST(VerbsWire, FrameOverTheReceiveLimitsIsEmsgsizeBeforeLengthChecks)
{
	struct verbs_msg m;
	auto b = eager(100, 0);

	EXPECT_EQ(-EMSGSIZE, verbs_msg_parse(b.data(), b.size(), 99, RDFS_MAX_DATA, &m));
	b = eager(0, 100);
	EXPECT_EQ(-EMSGSIZE, verbs_msg_parse(b.data(), b.size(), RDFS_MAX_BODY, 0, &m));
	/* A rendezvous announcing 16 MiB to a peer that allows none: refused unread. */
	auto r = rndv({ desc(0x1000, 16u << 20) }, 0, 16u << 20);
	EXPECT_EQ(-EMSGSIZE, verbs_msg_parse(r.data(), r.size(), RDFS_MAX_BODY, 1u << 20, &m));
	/* Over the protocol's own limit: rdfs_frame_hdr_decode refuses it. */
	r = rndv({ desc(0x1000, 1) }, 0, RDFS_MAX_DATA + 1);
	EXPECT_EQ(-EMSGSIZE, parse(r));
}

TEST(VerbsWire, RendezvousRoundTrips)
{
	auto b = rndv({ desc(0x1000, 4096, 0xABCD), desc(0x9000, 100, 0xEEEE) }, 12, 4196);
	struct verbs_msg m;
	struct verbs_desc d;

	ASSERT_EQ(0, parse(b, &m));
	EXPECT_EQ(VERBS_MSG_RNDV, m.vh.type);
	EXPECT_EQ(0x10002u, m.vh.cookie);
	ASSERT_EQ(2, m.vh.ndesc);
	verbs_desc_get(m.desc + VERBS_DESC_LEN, &d);
	EXPECT_EQ(0x9000u, d.addr);
	EXPECT_EQ(100u, d.len);
	EXPECT_EQ(0xEEEEu, d.rkey);
	EXPECT_NE(nullptr, m.body);
	EXPECT_EQ(nullptr, m.data);
}

TEST(VerbsWire, RemoteBodyIsDescriptorZero)
{
	struct verbs_msg m;

	auto b = rndv({ desc(0x1000, 200000), desc(0x100000, 4096) }, 200000, 4096,
		      VERBS_F_BODY_REMOTE);
	ASSERT_EQ(0, parse(b, &m));
	EXPECT_EQ(nullptr, m.body);
	/* Body only, no data. */
	b = rndv({ desc(0x1000, 200000) }, 200000, 0, VERBS_F_BODY_REMOTE);
	EXPECT_EQ(0, parse(b));
	/* Descriptor 0 must be exactly the body. */
	b = rndv({ desc(0x1000, 100000), desc(0x100000, 104096) }, 200000, 4096,
		 VERBS_F_BODY_REMOTE);
	EXPECT_EQ(-EPROTO, parse(b));
	/* A remote empty body is nonsense. */
	b = rndv({ desc(0x1000, 4096) }, 0, 4096, VERBS_F_BODY_REMOTE);
	EXPECT_EQ(-EPROTO, parse(b));
}

TEST(VerbsWire, MalformedDescriptorsAreEproto)
{
	/* None. */
	EXPECT_EQ(-EPROTO, parse(rndv({}, 0, 4096)));
	/* Nothing remote at all: it had to be EAGER. */
	EXPECT_EQ(-EPROTO, parse(rndv({ desc(0x1000, 1) }, 0, 0)));
	/* Empty descriptor. */
	EXPECT_EQ(-EPROTO, parse(rndv({ desc(0x1000, 0), desc(0x2000, 4096) }, 0, 4096)));
	/* Too short, too long in total. */
	EXPECT_EQ(-EPROTO, parse(rndv({ desc(0x1000, 4095) }, 0, 4096)));
	EXPECT_EQ(-EPROTO, parse(rndv({ desc(0x1000, 4096), desc(0x3000, 1) }, 0, 4096)));
	/* Wrapping the address space. */
	EXPECT_EQ(-EPROTO, parse(rndv({ desc(~0ull - 10, 4096) }, 0, 4096)));
	/* Longer than any frame's data. */
	EXPECT_EQ(-EPROTO, parse(rndv({ desc(0x1000, RDFS_MAX_DATA + 1) }, 0, RDFS_MAX_DATA)));
	/* Unknown flag, status on an RNDV. */
	auto b = rndv({ desc(0x1000, 4096) }, 0, 4096, 0x80);
	EXPECT_EQ(-EPROTO, parse(b));
}

TEST(VerbsWire, DescriptorCountLimit)
{
	std::vector<struct verbs_desc> d;

	for (int i = 0; i < VERBS_MAX_DESC; i++)
		d.push_back(desc(0x1000 + (uint64_t)i * 4096, 4096));
	EXPECT_EQ(0, parse(rndv(d, 0, VERBS_MAX_DESC * 4096)));
	d.push_back(desc(0x900000, 4096));
	EXPECT_EQ(-EPROTO, parse(rndv(d, 0, (VERBS_MAX_DESC + 1) * 4096)));
	/* A count the bytes cannot hold. */
	auto b = rndv({ desc(0x1000, 4096) }, 0, 4096);
	b[16] = 60;
	EXPECT_EQ(-EPROTO, parse(b));
}

TEST(VerbsWire, ControlMessages)
{
	std::vector<uint8_t> b(VERBS_HDR_LEN);
	struct verbs_hdr vh = {};
	struct verbs_msg m;

	vh.type = VERBS_MSG_DONE;
	vh.cookie = 0x30001;
	vh.credits = 5;
	verbs_hdr_encode(&vh, b.data());
	ASSERT_EQ(0, parse(b, &m));
	EXPECT_EQ(0x30001u, m.vh.cookie);
	EXPECT_EQ(5, m.vh.credits);

	vh.status = -EIO;
	verbs_hdr_encode(&vh, b.data());
	ASSERT_EQ(0, parse(b, &m));
	EXPECT_EQ(-EIO, m.vh.status);
	vh.status = 5;			/* not an errno */
	verbs_hdr_encode(&vh, b.data());
	EXPECT_EQ(-EPROTO, parse(b));

	vh = {};
	vh.type = VERBS_MSG_CREDIT;
	vh.credits = 32;
	verbs_hdr_encode(&vh, b.data());
	EXPECT_EQ(0, parse(b));
	vh.cookie = 1;
	verbs_hdr_encode(&vh, b.data());
	EXPECT_EQ(-EPROTO, parse(b));

	vh.cookie = 0;
	verbs_hdr_encode(&vh, b.data());
	b.push_back(0);			/* control messages carry nothing */
	EXPECT_EQ(-EPROTO, parse(b));

	std::vector<uint8_t> bad(VERBS_HDR_LEN);
	vh.type = 9;
	verbs_hdr_encode(&vh, bad.data());
	EXPECT_EQ(-EPROTO, parse(bad));
}

TEST(VerbsWire, ConnectionParameters)
{
	struct verbs_conn_params p = { 64, 32768 }, q;
	uint8_t buf[56] = {};		/* the CM pads private data with zeros */

	verbs_params_encode(&p, buf);
	ASSERT_EQ(0, verbs_params_decode(buf, sizeof(buf), &q));
	EXPECT_EQ(64, q.credits);
	EXPECT_EQ(32768u, q.recv_size);
	EXPECT_EQ(-EPROTO, verbs_params_decode(buf, VERBS_PRIV_LEN - 1, &q));
	EXPECT_EQ(-EPROTO, verbs_params_decode(nullptr, 0, &q));

	for (auto bad : { verbs_conn_params{ 3, 32768 }, verbs_conn_params{ 64, 4095 },
			  verbs_conn_params{ 64, VERBS_MAX_RECV_SIZE + 1 } }) {
		verbs_params_encode(&bad, buf);
		EXPECT_EQ(-EPROTO, verbs_params_decode(buf, sizeof(buf), &q));
	}
	verbs_params_encode(&p, buf);
	buf[0] ^= 1;
	EXPECT_EQ(-EPROTO, verbs_params_decode(buf, sizeof(buf), &q));
}

TEST(VerbsWire, SizesMatchTheLayout)
{
	EXPECT_EQ(44u, verbs_eager_len(0, 0));
	EXPECT_EQ(44u + 3 + 5, verbs_eager_len(3, 5));
	EXPECT_EQ(44u + 2 * 16 + 7, verbs_rndv_len(2, 7));
	/* The largest descriptor list with a frame header fits the smallest buffer. */
	EXPECT_LE(verbs_rndv_len(VERBS_MAX_DESC, 0), VERBS_MIN_RECV_SIZE);
}
