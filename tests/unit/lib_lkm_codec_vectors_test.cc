// SPDX-License-Identifier: MIT
/*
 * The user-space half of the kernel client's codec vectors: every vector of
 * client-lkm/vectors/ is exactly what protobuf-c packs for its fields, and
 * unpacks to them. The module's self-test (insmod rdfs.ko selftest=1) decodes
 * and re-encodes the same bytes with the in-kernel codec.
 *
 * RDFS_LKM_VECTORS_WRITE=1 turns the test into the generator: it (re)writes
 * client-lkm/vectors/vectors.txt and the .bin files from the table below.
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

/* vectors.txt: "KIND NAME key=value..." per line. */
std::map<std::string, std::map<std::string, std::string>> read_txt(const std::string &path)
{
	std::map<std::string, std::map<std::string, std::string>> out;
	std::ifstream f(path);
	std::string line;

	while (std::getline(f, line)) {
		std::istringstream in(line);
		std::string kind, name, kv;

		if (line.empty() || line[0] == '#' || !(in >> kind >> name))
			continue;
		out[name]["kind"] = kind;
		while (in >> kv) {
			size_t eq = kv.find('=');

			if (eq != std::string::npos)
				out[name][kv.substr(0, eq)] = kv.substr(eq + 1);
		}
	}
	return out;
}

void write_vectors()
{
	std::string dir = vectors_dir();
	std::ofstream txt(dir + "/vectors.txt");

	txt << "# Codec vectors of the kernel client: KIND NAME FIELD=VALUE...; NAME.bin is\n"
	       "# protobuf-c's encoding. Generated by RDFS_LKM_VECTORS_WRITE=1 build/tests/test_lib\n"
	       "# --gtest_filter='LkmCodecVectors.*' (tests/unit/lib_lkm_codec_vectors_test.cc).\n";
	for (const auto &d : vector_defs()) {
		size_t cap_len;
		std::vector<uint8_t> bytes = pack(d, &cap_len);
		std::ofstream bin(dir + "/" + d.name + ".bin", std::ios::binary);

		bin.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
		txt << d.kind << " " << d.name << " first_block=" << d.first_block
		    << " block_count=" << d.block_count << " head=" << d.head
		    << " length=" << d.length << " stable=" << (d.stable ? 1 : 0)
		    << " cap_len=" << cap_len << " verifier=" << d.verifier << "\n";
	}
}

TEST(LkmCodecVectors, MatchProtobufC)
{
	if (getenv("RDFS_LKM_VECTORS_WRITE"))
		write_vectors();
	auto txt = read_txt(vectors_dir() + "/vectors.txt");

	ASSERT_EQ(txt.size(), vector_defs().size()) << vectors_dir() << "/vectors.txt";
	for (const auto &d : vector_defs()) {
		SCOPED_TRACE(d.name);
		size_t cap_len;
		std::vector<uint8_t> want = pack(d, &cap_len);
		std::vector<uint8_t> got = read_bin(vectors_dir() + "/" + d.name + ".bin");
		auto &f = txt[d.name];

		EXPECT_EQ(got, want);
		EXPECT_EQ(f["kind"], d.kind);
		EXPECT_EQ(std::stoull(f["first_block"]), d.first_block);
		EXPECT_EQ(std::stoul(f["block_count"]), d.block_count);
		EXPECT_EQ(std::stoul(f["head"]), d.head);
		EXPECT_EQ(std::stoul(f["length"]), d.length);
		EXPECT_EQ(std::stoul(f["stable"]), d.stable ? 1u : 0u);
		EXPECT_EQ(std::stoul(f["cap_len"]), cap_len);
		EXPECT_EQ(std::stoull(f["verifier"]), d.verifier);
	}
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
