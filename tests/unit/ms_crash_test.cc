// SPDX-License-Identifier: MIT
/*
 * ms_crash_test.cc - kill -9 in the middle of a stream of operations: every
 * operation that returned before the kill is there after the restart, the
 * namespace is consistent, and no inode number is handed out twice.
 */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ms_fixture.h"

TEST(MsCrash, AcknowledgedOperationsSurviveKill9)
{
	char tmpl[] = "/tmp/ms_crash.XXXXXX";
	int fds[2];

	ASSERT_NE(mkdtemp(tmpl), nullptr);
	ASSERT_EQ(pipe(fds), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		struct ms_options o = {};
		struct ms *ms;
		char err[256];
		struct ms_cred root = { 0, 0, 0, nullptr };
		struct ms_session *s;

		close(fds[0]);
		o.db_dir = tmpl;
		if (ms_open(&o, &ms, err, sizeof(err)))
			_exit(1);
		s = ms_session_new(ms, "client");
		for (int i = 0;; i++) {
			char name[32];
			struct ms_attr a, d;

			/* a directory every 10 files, files go into the latest one */
			snprintf(name, sizeof(name), "d%d", i / 10);
			if (i % 10 == 0 && ms_mkdir(ms, &root, 1, name, 0755, 0, &d))
				_exit(2);
			if (ms_lookup(ms, &root, 1, name, &d))
				_exit(3);
			snprintf(name, sizeof(name), "f%d", i);
			if (ms_mknod(ms, s, &root, d.ino, name, 0644, 0, 0, 1, 0, 0, &a, nullptr))
				_exit(4);
			/* acknowledged: tell the parent */
			if (write(fds[1], &i, sizeof(i)) != sizeof(i))
				_exit(5);
		}
	}
	close(fds[1]);
	int last = -1, v;
	while (last < 400 && read(fds[0], &v, sizeof(v)) == sizeof(v))
		last = v;
	kill(pid, SIGKILL);
	/* what the child acknowledged after our last read counts too */
	while (read(fds[0], &v, sizeof(v)) == sizeof(v))
		last = v;
	int status;
	waitpid(pid, &status, 0);
	close(fds[0]);
	ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
	ASSERT_GE(last, 400);

	struct ms_options o = {};
	struct ms *ms;
	char err[256];
	struct ms_cred root = { 0, 0, 0, nullptr };
	uint64_t maxino = 0;

	o.db_dir = tmpl;
	ASSERT_EQ(ms_open(&o, &ms, err, sizeof(err)), 0) << err;
	for (int i = 0; i <= last; i++) {
		char name[32];
		struct ms_attr d, a;

		snprintf(name, sizeof(name), "d%d", i / 10);
		ASSERT_EQ(ms_lookup(ms, &root, 1, name, &d), 0) << name;
		snprintf(name, sizeof(name), "f%d", i);
		ASSERT_EQ(ms_lookup(ms, &root, d.ino, name, &a), 0) << name;
		maxino = std::max(maxino, std::max(a.ino, d.ino));
	}
	struct ms_attr r;
	ASSERT_EQ(ms_getattr(ms, 1, &r), 0);
	/* root's nlink counts exactly the directories that exist */
	struct ms_dirent ents[MS_READDIR_MAX];
	int eof;
	int n = ms_readdir(ms, &root, 1, nullptr, 0, 0, ents, &eof);
	EXPECT_EQ(r.nlink, (uint32_t)(2 + n));
	struct ms_session *s = ms_session_new(ms, "client");
	struct ms_attr a;
	ASSERT_EQ(ms_mknod(ms, s, &root, 1, "after", 0644, 0, 0, 1, 0, 0, &a, nullptr), 0);
	EXPECT_GT(a.ino, maxino);
	ms_session_close(ms, s);
	ms_close(ms);
	std::string cmd = std::string("rm -rf '") + tmpl + "'";
	(void)system(cmd.c_str());
}
