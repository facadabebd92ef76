// SPDX-License-Identifier: MIT
//
// client_cluster.h - a real rdfs cluster for the client tests: the metaserver
// and I/O servers built into build/bin run as child processes on ephemeral
// ports, with LevelDB, volumes, secret and capability key in a temp directory.
#ifndef RDFS_TEST_CLIENT_CLUSTER_H
#define RDFS_TEST_CLIENT_CLUSTER_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "auth.h"
#include "rdfs_client.h"
}

namespace rdfs_test {

inline std::string bin_dir()
{
	const char *b = getenv("RDFS_BIN");
	return b ? b : "build/bin";
}

// A port nobody uses right now, below the kernel's ephemeral range: a port
// the kernel picked there could be taken as the local end of any outgoing
// connection (the other test shard's clients) before the server binds it,
// and a server that cannot bind never comes up.
inline int free_port()
{
	static std::mt19937 rnd(std::random_device{}());
	int low = 32768;
	FILE *r = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (r) {
		if (fscanf(r, "%d", &low) != 1)
			low = 32768;
		fclose(r);
	}
	if (low <= 11000)
		low = 32768;
	for (;;) {
		int port = 10000 + (int)(rnd() % (unsigned)(low - 10000));
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {};
		int ok;

		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = htons(port);
		ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (ok)
			return port;
	}
}

inline pid_t spawn(const std::vector<std::string> &args, const std::string &log)
{
	pid_t pid = fork();

	if (pid == 0) {
		std::vector<char *> argv;
		// a test binary that dies (crash, timeout) takes its servers with it
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		for (auto &a : args)
			argv.push_back(const_cast<char *>(a.c_str()));
		argv.push_back(nullptr);
		execv(argv[0], argv.data());
		_exit(127);
	}
	return pid;
}

inline std::vector<uint8_t> pattern(size_t n, uint32_t seed)
{
	std::vector<uint8_t> v(n);
	std::mt19937 rng(seed);

	for (size_t i = 0; i < n; i++)
		v[i] = (uint8_t)(rng() >> 7);
	return v;
}

class Cluster {
public:
	std::string dir, secret_path, cap_path, ms_url;
	int ms_port = 0;
	std::vector<int> ios_ports;
	pid_t ms_pid = -1;
	std::vector<pid_t> ios_pids;
	struct auth_secret secret = {};

	// Start a metaserver and @n I/O servers; wait until all are registered and up.
	bool start(int n, const char *volume_size = "512m")
	{
		char tmpl[] = "/tmp/rdfs-client-test.XXXXXX";

		if (!mkdtemp(tmpl))
			return false;
		dir = tmpl;
		vol_size = volume_size;
		secret_path = dir + "/secret";
		cap_path = dir + "/cap.key";
		if (auth_secret_generate(secret_path.c_str()) ||
		    auth_secret_generate(cap_path.c_str()) ||
		    auth_secret_load(secret_path.c_str(), &secret))
			return false;
		ms_port = free_port();
		ms_url = "tcp://127.0.0.1:" + std::to_string(ms_port);
		start_metaserver();
		ios_pids.assign(n, -1);
		ios_ports.assign(n, 0);
		for (int i = 0; i < n; i++) {
			ios_ports[i] = free_port();
			start_ioserver(i);
		}
		return wait_up(n);
	}

	void start_metaserver()
	{
		std::vector<std::string> args = { bin_dir() + "/rdfs-metaserver", "--listen", ms_url,
						  "--db", dir + "/db", "--secret-file", secret_path,
						  "--cap-key-file", cap_path, "--log-level", "warn" };

		args.insert(args.end(), ms_args.begin(), ms_args.end());
		ms_pid = spawn(args, dir + "/metaserver.log");
	}

	// Extra options for the metaserver (set before start()).
	std::vector<std::string> ms_args;

	void start_ioserver(int i)
	{
		std::string url = "tcp://127.0.0.1:" + std::to_string(ios_ports[i]);
		std::vector<std::string> args = {
			bin_dir() + "/rdfs-ioserver", "--volume",
			dir + "/vol" + std::to_string(i), "--create-size", vol_size,
			"--listen", url, "--metaserver", ms_url, "--name",
			"ios" + std::to_string(i), "--secret-file", secret_path,
			"--cap-key-file", cap_path, "--log-level", "warn"
		};

		args.insert(args.end(), ios_args.begin(), ios_args.end());
		if (ios_args_of.count(i))
			args.insert(args.end(), ios_args_of[i].begin(), ios_args_of[i].end());
		// RDFS_TEST_IOSERVER_OPTS="--send-mode whole ...": run the suites against other modes
		if (const char *env = getenv("RDFS_TEST_IOSERVER_OPTS")) {
			std::istringstream words(env);
			std::string w;

			while (words >> w)
				args.push_back(w);
		}
		ios_pids[i] = spawn(args, dir + "/ioserver" + std::to_string(i) + ".log");
	}

	// Extra options for every I/O server, and for I/O server i (set before start()).
	std::vector<std::string> ios_args;
	std::map<int, std::vector<std::string>> ios_args_of;

	static void kill_wait(pid_t &pid)
	{
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, nullptr, 0);
		}
		pid = -1;
	}

	void kill_ioserver(int i) { kill_wait(ios_pids[i]); }
	void kill_metaserver() { kill_wait(ms_pid); }

	struct rdfs_client_opts opts() const
	{
		struct rdfs_client_opts o = {};

		o.metaserver_url = ms_url.c_str();
		o.secret = secret;
		o.timeout_ms = 20000;
		o.write_stable = 1;
		return o;
	}

	// A client; retries while the metaserver is still starting.
	struct rdfs_client *client(int tries = 100)
	{
		struct rdfs_client_opts o = opts();
		struct rdfs_client *c = nullptr;

		for (int i = 0; i < tries; i++) {
			if (rdfs_client_open(&o, &c) == 0)
				return c;
			std::this_thread::sleep_for(std::chrono::milliseconds(100));
		}
		return nullptr;
	}

	// Number of I/O servers the metaserver reports as up (-errno on failure).
	int servers_up()
	{
		struct rdfs_client *c = client(1);
		struct rdfs_server_info s[16];
		int n, up = 0;

		if (!c)
			return -ECONNREFUSED;
		n = rdfs_server_list(c, s, 16);
		for (int i = 0; i < n && i < 16; i++)
			up += s[i].up;
		rdfs_client_close(c);
		return n < 0 ? n : up;
	}

	bool wait_up(int n)
	{
		for (int i = 0; i < 300; i++) {
			if (servers_up() == n)
				return true;
			std::this_thread::sleep_for(std::chrono::milliseconds(100));
		}
		return false;
	}

	void stop()
	{
		for (auto &p : ios_pids)
			kill_wait(p);
		kill_wait(ms_pid);
		// a failed test keeps its servers' logs (they say why a cluster never came up)
		if (!dir.empty() && ::testing::Test::HasFailure())
			fprintf(stderr, "kept for its logs: %s\n", dir.c_str());
		else if (!dir.empty() && !getenv("RDFS_KEEP_TEST_DIR"))
			std::system(("rm -rf '" + dir + "'").c_str());
		dir.clear();
	}

	~Cluster() { stop(); }

private:
	std::string vol_size;
};

// A test suite sharing one cluster of Suite::servers I/O servers with
// Suite::volume_size volumes; each test gets its own client.
template <class Suite> class ClusterSuite : public ::testing::Test {
protected:
	static inline Cluster *cluster;
	struct rdfs_client *c = nullptr;

	static void SetUpTestSuite()
	{
		cluster = new Cluster();
		ASSERT_TRUE(cluster->start(Suite::servers, Suite::volume_size))
			<< "cluster in " << cluster->dir;
	}
	static void TearDownTestSuite()
	{
		delete cluster;
		cluster = nullptr;
	}
	void SetUp() override
	{
		c = cluster->client();
		ASSERT_NE(c, nullptr);
	}
	void TearDown() override { rdfs_client_close(c); }
};

} // namespace rdfs_test

#endif
