// SPDX-License-Identifier: MIT
/*
 * The user-space half of the kernel client's test vectors (client-lkm/vectors/):
 * every vector is exactly what its encoder writes for its fields, and decodes
 * to them. Two families: the kernel's hand-written IoReq/IoReply codec against
 * protobuf-c (kinds ioreq, ioreply), and the wire definitions both sides
 * compile (kinds frame, verbs, params: wire/rdfs_vectors.h), written here from
 * lib's encoders. The module's self-test (insmod rdfs.ko selftest=1) decodes
 * and re-encodes the same bytes in the kernel, the wire kinds with the same
 * check as below.
 *
 * RDFS_LKM_VECTORS_WRITE=1 turns the test into the generator: it (re)writes
 * client-lkm/vectors/vectors.txt and the .bin files from the tables below.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

extern "C" {
#include "rdfs.pb-c.h"
}
#include "frame.h"
#include "xport_verbs_wire.h"
#include "../wire/rdfs_vectors.h"

namespace {

struct vector_def {
	const char *kind;	/* "ioreq" or "ioreply" */
	const char *name;
	bool has_cap;
	uint32_t cap_server;
	uint64_t cap_ino;
	uint32_t cap_rights;
	int64_t cap_expiry;
	std::vector<std::pair<uint64_t, uint64_t>> cap_ranges;
	uint64_t first_block;
	uint32_t block_count;
	uint32_t head;
	uint32_t length;
	bool stable;
	uint64_t verifier;
};

const std::vector<vector_def> &vector_defs()
{
	static const std::vector<vector_def> defs = {
		{ "ioreq", "read-one-block", true, 1, 42, 1, 1700000000123456789LL,
		  { { 8, 1 } }, 8, 1, 0, 4096, false, 0 },
		{ "ioreq", "write-stable-chunk", true, 2, 1ULL << 40, 3, 1800000000000000000LL,
		  { { 1000000, 256 }, { 5, 3 } }, 1000000, 256, 0, 1048576, true, 0 },
		{ "ioreq", "read-partial-block0", true, 0, 7, 1, 1, { { 0, 2 } },
		  0, 2, 100, 5000, false, 0 },
		{ "ioreq", "no-capability", false, 0, 0, 0, 0, {}, 300, 1, 0, 1, false, 0 },
		{ "ioreq", "large-values", true, 4294967295u, UINT64_MAX, 2, INT64_MAX,
		  { { UINT64_MAX - 7, 8 } }, UINT64_MAX - 1, 4294967295u, 4095, 4294967295u,
		  true, 0 },
		{ "ioreply", "read-reply", false, 0, 0, 0, 0, {}, 0, 0, 0, 4096, false, 0 },
		{ "ioreply", "write-reply", false, 0, 0, 0, 0, {}, 0, 0, 0, 1048576, false,
		  0x8877665544332211ULL },
		{ "ioreply", "empty-reply", false, 0, 0, 0, 0, {}, 0, 0, 0, 0, false, 0 },
	};
	return defs;
}

/*
 * client-lkm/vectors of the repo: RDFS_REPO, else the first of the working
 * directory, the test binary's directory and their parents that has it.
 */
std::string vectors_dir()
{
	const char *repo = getenv("RDFS_REPO");
	char buf[4096];
	std::vector<std::string> starts;

	if (repo)
		return std::string(repo) + "/client-lkm/vectors";
	if (getcwd(buf, sizeof(buf)))
		starts.push_back(buf);
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		starts.push_back(buf);
	}
	for (std::string d : starts) {
		while (!d.empty()) {
			std::string cand = d + "/client-lkm/vectors";

			if (access((cand + "/vectors.txt").c_str(), F_OK) == 0)
				return cand;
			d = d.substr(0, d.rfind('/'));
		}
	}
	return "client-lkm/vectors";
}

/* The protobuf-c encoding of @d. */
std::vector<uint8_t> pack(const vector_def &d, size_t *cap_len)
{
	std::vector<uint8_t> out;

	*cap_len = 0;
	if (std::string(d.kind) == "ioreply") {
		Rdfs__IoReply r = RDFS__IO_REPLY__INIT;

		r.length = d.length;
		r.verifier = d.verifier;
		out.resize(rdfs__io_reply__get_packed_size(&r));
		rdfs__io_reply__pack(&r, out.data());
		return out;
	}
	Rdfs__IoReq r = RDFS__IO_REQ__INIT;
	Rdfs__Capability cap = RDFS__CAPABILITY__INIT;
	std::vector<Rdfs__BlockRange> ranges(d.cap_ranges.size());
	std::vector<Rdfs__BlockRange *> rp;
	uint8_t mac[32];

	for (size_t i = 0; i < ranges.size(); i++) {
		rdfs__block_range__init(&ranges[i]);
		ranges[i].first = d.cap_ranges[i].first;
		ranges[i].count = d.cap_ranges[i].second;
		rp.push_back(&ranges[i]);
	}
	memset(mac, 0xab, sizeof(mac));
	cap.server_id = d.cap_server;
	cap.ino = d.cap_ino;
	cap.rights = d.cap_rights;
	cap.expiry_ns = d.cap_expiry;
	cap.n_ranges = rp.size();
	cap.ranges = rp.data();
	cap.mac.data = mac;
	cap.mac.len = sizeof(mac);
	if (d.has_cap) {
		r.cap = &cap;
		*cap_len = rdfs__capability__get_packed_size(&cap);
	}
	r.first_block = d.first_block;
	r.block_count = d.block_count;
	r.head = d.head;
	r.length = d.length;
	r.stable = d.stable;
	out.resize(rdfs__io_req__get_packed_size(&r));
	rdfs__io_req__pack(&r, out.data());
	return out;
}

std::vector<uint8_t> read_bin(const std::string &path)
{
	std::ifstream f(path, std::ios::binary);

	return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

/* In order; a key repeats for each descriptor of a verbs message. */
using fields_t = std::vector<std::pair<std::string, std::string>>;

/* One vector: a line of vectors.txt and NAME.bin. */
struct vec {
	std::string kind, name;
	fields_t fields;
	std::vector<uint8_t> bytes;
};

void put(fields_t &f, const std::string &key, uint64_t v)
{
	f.emplace_back(key, std::to_string(v));
}

void put_signed(fields_t &f, const std::string &key, int64_t v)
{
	f.emplace_back(key, std::to_string(v));
}

/* A value of vectors.txt as the kernel's table holds it: signed ones as two's complement. */
uint64_t value_of(const std::string &s)
{
	return !s.empty() && s[0] == '-' ? (uint64_t)std::stoll(s) : std::stoull(s, nullptr, 0);
}

vec pb_vec(const vector_def &d)
{
	vec v;
	size_t cap_len;

	v.kind = d.kind;
	v.name = d.name;
	v.bytes = pack(d, &cap_len);
	put(v.fields, "first_block", d.first_block);
	put(v.fields, "block_count", d.block_count);
	put(v.fields, "head", d.head);
	put(v.fields, "length", d.length);
	put(v.fields, "stable", d.stable ? 1 : 0);
	put(v.fields, "cap_len", cap_len);
	put(v.fields, "verifier", d.verifier);
	return v;
}

rdfs_frame_hdr fhdr(uint8_t flags, uint16_t opcode, int32_t status, uint32_t tag,
		    uint32_t body_len, uint32_t data_len)
{
	rdfs_frame_hdr h = {};

	h.magic = RDFS_FRAME_MAGIC;
	h.version = RDFS_FRAME_VERSION;
	h.flags = flags;
	h.opcode = opcode;
	h.status = status;
	h.tag = tag;
	h.body_len = body_len;
	h.data_len = data_len;
	return h;
}

/* @h's fields under the names of wire/rdfs_vectors.h, @p "" (frame) or "fh." (verbs). */
void put_frame(fields_t &f, const std::string &p, const rdfs_frame_hdr &h)
{
	put(f, p + "flags", h.flags);
	put(f, p + "opcode", h.opcode);
	put_signed(f, p + "status", h.status);
	put(f, p + "tag", h.tag);
	put(f, p + "body_len", h.body_len);
	put(f, p + "data_len", h.data_len);
}

vec frame_vec(const char *name, const rdfs_frame_hdr &h)
{
	vec v;

	v.kind = "frame";
	v.name = name;
	v.bytes.resize(RDFS_FRAME_HDR_LEN);
	rdfs_frame_hdr_encode(&h, v.bytes.data());
	put(v.fields, "magic", h.magic);
	put(v.fields, "version", h.version);
	put_frame(v.fields, "", h);
	return v;
}

/*
 * A whole SEND as lib/xport_verbs_data.c lays it out: header, descriptors,
 * then (@fh) the frame header and the inline @body and @data.
 */
vec verbs_vec(const char *name, uint8_t type, uint8_t flags, uint16_t credits, uint32_t cookie,
	      int32_t status, const std::vector<verbs_desc> &descs, const rdfs_frame_hdr *fh,
	      const std::string &body = "", const std::string &data = "")
{
	verbs_hdr vh = {};
	vec v;
	size_t i;

	vh.type = type;
	vh.flags = flags;
	vh.credits = credits;
	vh.cookie = cookie;
	vh.status = status;
	vh.ndesc = (uint16_t)descs.size();
	v.kind = "verbs";
	v.name = name;
	v.bytes.resize(VERBS_HDR_LEN + descs.size() * VERBS_DESC_LEN +
		       (fh ? RDFS_FRAME_HDR_LEN : 0));
	verbs_hdr_encode(&vh, v.bytes.data());
	put(v.fields, "type", type);
	put(v.fields, "flags", flags);
	put(v.fields, "credits", credits);
	put(v.fields, "cookie", cookie);
	put_signed(v.fields, "status", status);
	put(v.fields, "ndesc", descs.size());
	for (i = 0; i < descs.size(); i++) {
		verbs_desc_put(v.bytes.data() + VERBS_HDR_LEN + i * VERBS_DESC_LEN, &descs[i]);
		put(v.fields, "desc.addr", descs[i].addr);
		put(v.fields, "desc.len", descs[i].len);
		put(v.fields, "desc.rkey", descs[i].rkey);
	}
	if (fh) {
		rdfs_frame_hdr_encode(fh, v.bytes.data() + VERBS_HDR_LEN +
					      descs.size() * VERBS_DESC_LEN);
		put_frame(v.fields, "fh.", *fh);
	}
	v.bytes.insert(v.bytes.end(), body.begin(), body.end());
	v.bytes.insert(v.bytes.end(), data.begin(), data.end());
	return v;
}

vec params_vec(const char *name, uint16_t credits, uint32_t recv_size)
{
	verbs_conn_params p = {};
	vec v;

	p.credits = credits;
	p.recv_size = recv_size;
	v.kind = "params";
	v.name = name;
	v.bytes.resize(VERBS_PRIV_LEN);
	verbs_params_encode(&p, v.bytes.data());
	put(v.fields, "credits", credits);
	put(v.fields, "recv_size", recv_size);
	return v;
}

/* Every vector, in the order of vectors.txt. */
const std::vector<vec> &all_vectors()
{
	static std::vector<vec> all;

	if (!all.empty())
		return all;
	for (const auto &d : vector_defs())
		all.push_back(pb_vec(d));

	const uint8_t R = RDFS_FRAME_REPLY, M = RDFS_FRAME_MORE;

	all.push_back(frame_vec("frame-request", fhdr(0, RDFS_OP_LOOKUP, 0, 7, 12, 0)));
	all.push_back(frame_vec("frame-reply", fhdr(R, RDFS_OP_READ, 0, 0x01020304, 6, 4096)));
	all.push_back(frame_vec("frame-reply-more", fhdr(R | M, RDFS_OP_READ, 0, 9, 0, 262144)));
	all.push_back(frame_vec("frame-reply-status", fhdr(R, RDFS_OP_LOOKUP, -ENOENT, 11, 0, 0)));
	all.push_back(frame_vec("frame-max-values", fhdr(R, RDFS_OP_MAX - 1, INT32_MIN, UINT32_MAX,
							 RDFS_MAX_BODY, RDFS_MAX_DATA)));

	rdfs_frame_hdr write4 = fhdr(0, RDFS_OP_WRITE, 0, 3, 4, 4);
	rdfs_frame_hdr ping = fhdr(0, RDFS_OP_PING, 0, 1, 0, 0);
	rdfs_frame_hdr unit = fhdr(R | M, RDFS_OP_READ, 0, 9, 0, 8);
	rdfs_frame_hdr rndv = fhdr(0, RDFS_OP_WRITE, 0, 4, 5, 65536 + 4096);
	rdfs_frame_hdr rndv_body = fhdr(0, RDFS_OP_SETXATTR, 0, 13, 200000, 8192);
	rdfs_frame_hdr rndv_max = fhdr(0, RDFS_OP_WRITE, 0, UINT32_MAX, 0, RDFS_MAX_DATA);
	rdfs_frame_hdr sink = fhdr(0, RDFS_OP_READ, 0, 5, 3, 0);
	rdfs_frame_hdr placed = fhdr(R, RDFS_OP_READ, 0, 5, 2, 0);

	all.push_back(verbs_vec("verbs-eager", VERBS_MSG_EAGER, 0, 3, 0, 0, {}, &write4,
				"body", "data"));
	all.push_back(verbs_vec("verbs-eager-empty", VERBS_MSG_EAGER, 0, 0, 0, 0, {}, &ping));
	all.push_back(verbs_vec("verbs-eager-reply-more", VERBS_MSG_EAGER, 0, 1, 0, 0, {}, &unit,
				"", "unit-one"));
	all.push_back(verbs_vec("verbs-rndv", VERBS_MSG_RNDV, 0, 2, 5, 0,
				{ { 0x7f0000001000, 65536, 77 }, { 0x7f0000100000, 4096, 78 } },
				&rndv, "wreq!"));
	all.push_back(verbs_vec("verbs-rndv-body-remote", VERBS_MSG_RNDV, VERBS_F_BODY_REMOTE, 1,
				6, 0, { { 0x10000, 200000, 9 }, { 0x200000, 8192, 10 } },
				&rndv_body));
	all.push_back(verbs_vec("verbs-rndv-max-values", VERBS_MSG_RNDV, 0, UINT16_MAX, UINT32_MAX,
				0, { { UINT64_MAX - RDFS_MAX_DATA, RDFS_MAX_DATA, UINT32_MAX } },
				&rndv_max));
	all.push_back(verbs_vec("verbs-sink", VERBS_MSG_SINK, 0, 4, 0, 0,
				{ { 0x7f0000200000, 65536, 0x1234 }, { 0x7f0000400000, 4096, 0x1235 } },
				&sink, "req"));
	all.push_back(verbs_vec("verbs-placed", VERBS_MSG_PLACED, 0, 0, 0, 0, { { 8192, 4096, 0 } },
				&placed, "ok"));
	all.push_back(verbs_vec("verbs-done", VERBS_MSG_DONE, 0, 1, 5, 0, {}, nullptr));
	all.push_back(verbs_vec("verbs-done-error", VERBS_MSG_DONE, 0, 0, 6, -EIO, {}, nullptr));
	all.push_back(verbs_vec("verbs-credit", VERBS_MSG_CREDIT, 0, 7, 0, 0, {}, nullptr));

	all.push_back(params_vec("params-default", 64, 32768));
	all.push_back(params_vec("params-min", VERBS_MIN_CREDITS, VERBS_MIN_RECV_SIZE));
	all.push_back(params_vec("params-max", UINT16_MAX, VERBS_MAX_RECV_SIZE));
	return all;
}

/* vectors.txt and the .bin files as they are. */
std::vector<vec> read_vectors()
{
	std::string dir = vectors_dir();
	std::ifstream f(dir + "/vectors.txt");
	std::vector<vec> out;
	std::string line;

	while (std::getline(f, line)) {
		std::istringstream in(line);
		std::string kv;
		vec v;

		if (line.empty() || line[0] == '#' || !(in >> v.kind >> v.name))
			continue;
		while (in >> kv) {
			size_t eq = kv.find('=');

			if (eq != std::string::npos)
				v.fields.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
		}
		v.bytes = read_bin(dir + "/" + v.name + ".bin");
		out.push_back(v);
	}
	return out;
}

void write_vectors()
{
	std::string dir = vectors_dir();
	std::ofstream txt(dir + "/vectors.txt");

	txt << "# Test vectors of the kernel client: KIND NAME KEY=VALUE...; NAME.bin holds the\n"
	       "# bytes. ioreq, ioreply: protobuf-c's encoding (client-lkm/codec.c must match);\n"
	       "# frame, verbs, params: lib's encoders of wire/ (keys: wire/rdfs_vectors.h).\n"
	       "# Generated by RDFS_LKM_VECTORS_WRITE=1 build/tests/test_lib\n"
	       "# --gtest_filter='LkmCodecVectors.*' (tests/unit/lib_lkm_codec_vectors_test.cc).\n";
	for (const auto &v : all_vectors()) {
		std::ofstream bin(dir + "/" + v.name + ".bin", std::ios::binary);

		bin.write(reinterpret_cast<const char *>(v.bytes.data()), v.bytes.size());
		txt << v.kind << " " << v.name;
		for (const auto &f : v.fields)
			txt << " " << f.first << "=" << f.second;
		txt << "\n";
	}
}

/* @v as wire/rdfs_vectors.h takes it (pointing into @v and @fields). */
rdfs_vec wire_vec(const vec &v, std::vector<rdfs_vec_field> &fields)
{
	rdfs_vec w = {};

	fields.clear();
	for (const auto &f : v.fields)
		fields.push_back({ f.first.c_str(), value_of(f.second) });
	w.kind = v.kind.c_str();
	w.name = v.name.c_str();
	w.bytes = v.bytes.data();
	w.len = v.bytes.size();
	w.fields = fields.data();
	w.nfields = (unsigned int)fields.size();
	return w;
}

bool is_pb(const vec &v)
{
	return v.kind == "ioreq" || v.kind == "ioreply";
}

TEST(LkmCodecVectors, FilesAreWhatTheEncodersWrite)
{
	if (getenv("RDFS_LKM_VECTORS_WRITE"))
		write_vectors();
	std::vector<vec> got = read_vectors();
	const std::vector<vec> &want = all_vectors();

	ASSERT_EQ(got.size(), want.size()) << vectors_dir() << "/vectors.txt";
	for (size_t i = 0; i < want.size(); i++) {
		SCOPED_TRACE(want[i].name);
		EXPECT_EQ(got[i].name, want[i].name);
		EXPECT_EQ(got[i].kind, want[i].kind);
		EXPECT_EQ(got[i].fields, want[i].fields);
		EXPECT_EQ(got[i].bytes, want[i].bytes);
	}
}

/* What the kernel's self-test does with the wire kinds, here. */
TEST(LkmCodecVectors, WireKindsDecodeToTheirFieldsAndEncodeAgain)
{
	std::vector<rdfs_vec_field> fields;
	uint8_t buf[4096];
	int n = 0;

	for (const auto &v : read_vectors()) {
		SCOPED_TRACE(v.name);
		if (is_pb(v))
			continue;
		rdfs_vec w = wire_vec(v, fields);
		const char *what = "";

		EXPECT_EQ(rdfs_wire_vec_check(&w, buf, sizeof(buf), &what), 0) << what;
		n++;
	}
	EXPECT_GT(n, 0);
}

/* The check is not blind: any field off by one is named, as is a missing one. */
TEST(LkmCodecVectors, WireCheckNamesAWrongOrMissingField)
{
	std::vector<rdfs_vec_field> fields;
	uint8_t buf[4096];

	for (const auto &v : all_vectors()) {
		if (is_pb(v))
			continue;
		for (size_t i = 0; i < v.fields.size(); i++) {
			SCOPED_TRACE(v.name + " " + v.fields[i].first);
			vec bad = v;
			const char *what = "";

			bad.fields[i].second = std::to_string(value_of(v.fields[i].second) + 1);
			rdfs_vec w = wire_vec(bad, fields);
			EXPECT_EQ(rdfs_wire_vec_check(&w, buf, sizeof(buf), &what), -EINVAL);
			EXPECT_EQ(std::string(what), v.fields[i].first);

			bad = v;
			bad.fields.erase(bad.fields.begin() + (long)i);
			w = wire_vec(bad, fields);
			EXPECT_EQ(rdfs_wire_vec_check(&w, buf, sizeof(buf), &what), -EINVAL);
			EXPECT_EQ(std::string(what), v.fields[i].first);
		}
	}
}

TEST(LkmCodecVectors, WireCheckRefusesOtherKindsAndShortBuffers)
{
	std::vector<rdfs_vec_field> fields;
	uint8_t buf[4096];
	const char *what = "";

	for (const auto &v : all_vectors()) {
		rdfs_vec w = wire_vec(v, fields);

		SCOPED_TRACE(v.name);
		if (is_pb(v)) {
			EXPECT_EQ(rdfs_wire_vec_check(&w, buf, sizeof(buf), &what), -ENOENT);
			continue;
		}
		EXPECT_EQ(rdfs_wire_vec_check(&w, buf, v.bytes.size() - 1, &what), -EINVAL);
		EXPECT_STREQ(what, "length");
	}
}

/* The promise: every header and message kind has a vector. */
TEST(LkmCodecVectors, EveryFrameAndVerbsKindHasAVector)
{
	std::map<std::string, int> seen;

	for (const auto &v : all_vectors()) {
		std::map<std::string, uint64_t> f;

		for (const auto &kv : v.fields)
			f[kv.first] = value_of(kv.second);
		if (v.kind == "frame") {
			seen[f["flags"] & RDFS_FRAME_REPLY ? "frame reply" : "frame request"]++;
			if (f["flags"] & RDFS_FRAME_MORE)
				seen["frame more"]++;
			if (f["status"])
				seen["frame status"]++;
		} else if (v.kind == "verbs") {
			seen["verbs type " + std::to_string(f["type"])]++;
			if (f["flags"] & VERBS_F_BODY_REMOTE)
				seen["verbs body remote"]++;
		} else {
			seen[v.kind]++;
		}
	}
	for (const char *k : { "frame request", "frame reply", "frame more", "frame status",
			       "verbs body remote", "params", "ioreq", "ioreply" })
		EXPECT_GT(seen[k], 0) << k;
	for (int t = VERBS_MSG_EAGER; t <= VERBS_MSG_PLACED; t++)
		EXPECT_GT(seen["verbs type " + std::to_string(t)], 0) << "verbs type " << t;
}

TEST(LkmCodecVectors, UnpackToFields)
{
	for (const auto &d : vector_defs()) {
		SCOPED_TRACE(d.name);
		std::vector<uint8_t> bin = read_bin(vectors_dir() + "/" + d.name + ".bin");

		if (std::string(d.kind) == "ioreply") {
			Rdfs__IoReply *r = rdfs__io_reply__unpack(NULL, bin.size(), bin.data());

			ASSERT_NE(r, nullptr);
			EXPECT_EQ(r->length, d.length);
			EXPECT_EQ(r->verifier, d.verifier);
			rdfs__io_reply__free_unpacked(r, NULL);
			continue;
		}
		Rdfs__IoReq *r = rdfs__io_req__unpack(NULL, bin.size(), bin.data());

		ASSERT_NE(r, nullptr);
		EXPECT_EQ(r->first_block, d.first_block);
		EXPECT_EQ(r->block_count, d.block_count);
		EXPECT_EQ(r->head, d.head);
		EXPECT_EQ(r->length, d.length);
		EXPECT_EQ(r->stable, d.stable);
		ASSERT_EQ(r->cap != NULL, d.has_cap);
		if (d.has_cap) {
			EXPECT_EQ(r->cap->server_id, d.cap_server);
			EXPECT_EQ(r->cap->ino, d.cap_ino);
			EXPECT_EQ(r->cap->rights, d.cap_rights);
			EXPECT_EQ(r->cap->expiry_ns, d.cap_expiry);
			ASSERT_EQ(r->cap->n_ranges, d.cap_ranges.size());
			for (size_t i = 0; i < d.cap_ranges.size(); i++) {
				EXPECT_EQ(r->cap->ranges[i]->first, d.cap_ranges[i].first);
				EXPECT_EQ(r->cap->ranges[i]->count, d.cap_ranges[i].second);
			}
		}
		rdfs__io_req__free_unpacked(r, NULL);
	}
}

} // namespace
