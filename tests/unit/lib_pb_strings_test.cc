// SPDX-License-Identifier: MIT
/*
 * lib_pb_strings_test.cc - a NUL inside any string field, nested ones included,
 * is found; bytes fields may hold NULs; malformed encodings are -EBADMSG.
 */
#include <errno.h>
#include <string.h>

#include <string>

#include <gtest/gtest.h>

extern "C" {
#include "pb_strings.h"
#include "rdfs.pb-c.h"
}

namespace {

std::string pack(const ProtobufCMessage *m)
{
	std::string out(protobuf_c_message_get_packed_size(m), '\0');

	protobuf_c_message_pack(m, reinterpret_cast<uint8_t *>(&out[0]));
	return out;
}

int check(const ProtobufCMessageDescriptor *d, const std::string &b)
{
	return pb_strings_check(d, reinterpret_cast<const uint8_t *>(b.data()), b.size());
}

/* A RenameReq whose names are given as raw bytes (NULs included). */
std::string rename_req(const std::string &name, const std::string &newname)
{
	std::string b;

	b += '\x1a';		/* field 3 (name), length-delimited: (3 << 3) | 2 */
	b += static_cast<char>(name.size());
	b += name;
	b += '\x2a';		/* field 5 (newname): (5 << 3) | 2 */
	b += static_cast<char>(newname.size());
	b += newname;
	return b;
}

TEST(PbStrings, CleanMessagePasses)
{
	Rdfs__RenameReq r = RDFS__RENAME_REQ__INIT;
	Rdfs__Cred cr = RDFS__CRED__INIT;

	r.cred = &cr;
	r.parent = 1;
	r.name = (char *)"a";
	r.newparent = 1;
	r.newname = (char *)"b";
	EXPECT_EQ(0, check(&rdfs__rename_req__descriptor, pack(&r.base)));
	EXPECT_EQ(0, check(&rdfs__rename_req__descriptor, std::string()));
}

TEST(PbStrings, NulInAnyStringFieldIsEinval)
{
	EXPECT_EQ(0, check(&rdfs__rename_req__descriptor, rename_req("x", "y")));
	EXPECT_EQ(-EINVAL, check(&rdfs__rename_req__descriptor,
				 rename_req(std::string("x\0evil", 6), "y")));
	EXPECT_EQ(-EINVAL, check(&rdfs__rename_req__descriptor,
				 rename_req("x", std::string("y\0", 2))));
}

TEST(PbStrings, NulInBytesFieldIsFine)
{
	Rdfs__XattrReq x = RDFS__XATTR_REQ__INIT;
	uint8_t v[] = { 0, 1, 0 };

	x.name = (char *)"user.a";
	x.value.data = v;
	x.value.len = sizeof(v);
	EXPECT_EQ(0, check(&rdfs__xattr_req__descriptor, pack(&x.base)));
}

TEST(PbStrings, NestedMessagesAreSearched)
{
	/* IoReq.cap (field 1) is a Capability whose holder (field 7) is a string */
	std::string cap = std::string("\x3a\x03", 2) + std::string("a\0b", 3);
	std::string io = std::string("\x0a", 1) + static_cast<char>(cap.size()) + cap;

	EXPECT_EQ(-EINVAL, check(&rdfs__io_req__descriptor, io));
	cap = std::string("\x3a\x03", 2) + "abc";
	io = std::string("\x0a", 1) + static_cast<char>(cap.size()) + cap;
	EXPECT_EQ(0, check(&rdfs__io_req__descriptor, io));
}

TEST(PbStrings, MalformedIsEbadmsg)
{
	EXPECT_EQ(-EBADMSG, check(&rdfs__rename_req__descriptor, std::string("\x1a\x05xy", 4)));
	EXPECT_EQ(-EBADMSG, check(&rdfs__rename_req__descriptor, std::string("\x08", 1)));
	EXPECT_EQ(-EBADMSG, check(&rdfs__rename_req__descriptor, std::string("\x09\x01", 2)));
	EXPECT_EQ(-EBADMSG, check(&rdfs__rename_req__descriptor, std::string("\x0b", 1)));
}

} // namespace
