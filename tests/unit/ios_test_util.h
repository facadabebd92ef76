// SPDX-License-Identifier: MIT
/*
 * ios_test_util.h - small fixtures shared by the I/O server's unit tests:
 * a temporary directory removed afterwards, 4096-aligned buffers, whole-file I/O,
 * signed capabilities and one-call READ/WRITE against a running server.
 */
#ifndef RDFS_IOS_TEST_UTIL_H
#define RDFS_IOS_TEST_UTIL_H

#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "auth.h"
#include "cap.h"
#include "frame.h"
#include "rdfs.pb-c.h"
#include "rpc.h"
}

class TempDir {
public:
	explicit TempDir(const char *base = nullptr)
	{
		if (!base)
			base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
		std::string tmpl = std::string(base) + "/rdfs-ios-test.XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back('\0');
		if (!mkdtemp(buf.data()))
			ADD_FAILURE() << "mkdtemp " << tmpl << ": " << strerror(errno);
		path_ = buf.data();
	}
	~TempDir()
	{
		std::string cmd = "rm -rf '" + path_ + "'";
		if (system(cmd.c_str()) != 0)
			fprintf(stderr, "cannot remove %s\n", path_.c_str());
	}
	const std::string &path() const { return path_; }

private:
	std::string path_;
};

class AlignedBuf {
public:
	explicit AlignedBuf(size_t len)
	{
		if (posix_memalign(&p_, 4096, len ? len : 4096))
			p_ = nullptr;
		memset(p_, 0, len);
	}
	~AlignedBuf() { free(p_); }
	AlignedBuf(const AlignedBuf &) = delete;
	AlignedBuf &operator=(const AlignedBuf &) = delete;
	void *get() { return p_; }
	uint8_t *bytes() { return (uint8_t *)p_; }

private:
	void *p_ = nullptr;
};

inline void write_file(const std::string &path, const std::vector<uint8_t> &data)
{
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT_GE(fd, 0) << path;
	ASSERT_EQ(write(fd, data.data(), data.size()), (ssize_t)data.size());
	close(fd);
}

inline std::vector<uint8_t> read_file(const std::string &path)
{
	std::vector<uint8_t> out;
	uint8_t buf[65536];
	int fd = open(path.c_str(), O_RDONLY);
	EXPECT_GE(fd, 0) << path;
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		out.insert(out.end(), buf, buf + n);
	close(fd);
	return out;
}

namespace {

const uint64_t kNsPerSec = 1000000000ll;

/*
 * A signed capability whose storage lives as long as the object, granted to
 * @holder ("client": any peer proving the cluster secret).
 */
class Cap {
public:
	Cap(const struct auth_secret *key, uint32_t server_id, uint32_t rights,
	    std::vector<std::pair<uint64_t, uint64_t>> ranges, int64_t lifetime_ns = 60 * kNsPerSec,
	    const char *holder = "client")
	{
		rdfs__capability__init(&cap_);
		holder_ = holder;
		cap_.holder = (char *)holder_.c_str();
		cap_.server_id = server_id;
		cap_.ino = 1234;
		cap_.rights = rights;
		cap_.expiry_ns = cap_now_ns() + lifetime_ns;
		ranges_.resize(ranges.size());
		for (size_t i = 0; i < ranges.size(); i++) {
			rdfs__block_range__init(&ranges_[i]);
			ranges_[i].first = ranges[i].first;
			ranges_[i].count = ranges[i].second;
			ptrs_.push_back(&ranges_[i]);
		}
		cap_.n_ranges = ptrs_.size();
		cap_.ranges = ptrs_.data();
		EXPECT_EQ(cap_sign(key, &cap_), 0);
	}
	~Cap() { cap_free_mac(&cap_); }
	Cap(const Cap &) = delete;
	Cap &operator=(const Cap &) = delete;
	Rdfs__Capability *get() { return &cap_; }

private:
	std::string holder_;
	Rdfs__Capability cap_;
	std::vector<Rdfs__BlockRange> ranges_;
	std::vector<Rdfs__BlockRange *> ptrs_;
};

struct IoResult {
	int status = 0;			/* reply status, or a local -errno */
	std::string message;		/* the Error message of a failed reply */
	uint32_t length = 0;		/* IoReply.length */
	uint64_t verifier = 0;		/* IoReply.verifier */
	std::vector<uint8_t> data;	/* READ's bulk data */
};

inline IoResult io_call(struct rpc_client *c, uint16_t op, Rdfs__Capability *cap, uint64_t first,
		 uint32_t count, uint32_t head, uint32_t length, const void *data = nullptr,
		 size_t data_len = 0, bool stable = true)
{
	Rdfs__IoReq req = RDFS__IO_REQ__INIT;
	req.cap = cap;
	req.first_block = first;
	req.block_count = count;
	req.head = head;
	req.length = length;
	req.stable = stable;

	struct iovec iov = { const_cast<void *>(data), data_len };
	struct rpc_pending *p = nullptr;
	struct rpc_reply rep = {};
	IoResult r;
	int ret = rpc_call_start(c, op, &req.base, data_len ? &iov : nullptr, data_len ? 1 : 0, &p);
	if (!ret)
		ret = rpc_call_wait(p, 10000, &rep);
	if (ret) {
		r.status = ret;
		return r;
	}
	r.status = rep.status;
	if (rep.status) {
		Rdfs__Error *e = rdfs__error__unpack(nullptr, rep.msg->hdr.body_len, rep.msg->body);
		if (e) {
			r.message = e->message;
			rdfs__error__free_unpacked(e, nullptr);
		}
	} else if (rep.msg->hdr.body_len) {
		Rdfs__IoReply *ir = rdfs__io_reply__unpack(nullptr, rep.msg->hdr.body_len,
							   rep.msg->body);
		EXPECT_NE(ir, nullptr);
		if (ir) {
			r.length = ir->length;
			r.verifier = ir->verifier;
			rdfs__io_reply__free_unpacked(ir, nullptr);
		}
	}
	r.data.resize(rpc_reply_data_len(&rep));
	EXPECT_EQ(rpc_reply_data_copy(&rep, 0, r.data.data(), r.data.size()), r.data.size());
	rpc_reply_release(&rep);
	return r;
}

inline std::vector<uint8_t> pattern(size_t len, uint32_t seed)
{
	std::vector<uint8_t> p(len);
	std::mt19937 rng(seed);
	for (auto &c : p)
		c = (uint8_t)rng();
	return p;
}

} // namespace

#endif
