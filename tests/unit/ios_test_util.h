// SPDX-License-Identifier: MIT
/*
 * ios_test_util.h - small fixtures shared by the I/O server's unit tests:
 * a temporary directory removed afterwards, 4096-aligned buffers, whole-file I/O.
 */
#ifndef RDFS_IOS_TEST_UTIL_H
#define RDFS_IOS_TEST_UTIL_H

#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

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

#endif
