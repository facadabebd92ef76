// SPDX-License-Identifier: MIT
/*
 * lib_metrics_test.cc - the metrics registry's Prometheus text (format 0.0.4)
 * and its HTTP endpoint: what a scraper sees, and what a hostile one cannot do.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "metrics.h"
#include "metrics_http.h"
}

namespace {

const char *const kOps[] = { "PING", nullptr, "READ", "WRITE" };
const struct metrics_dim kOpDim = { "op", kOps, 4 };

std::string render(struct metrics *r)
{
	char *text = nullptr;
	size_t len = 0;

	EXPECT_EQ(0, metrics_render(r, &text, &len));
	std::string s(text, len);
	EXPECT_EQ(strlen(text), len);
	free(text);
	return s;
}

bool has_line(const std::string &text, const std::string &line)
{
	return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

class Metrics : public ::testing::Test {
protected:
	void SetUp() override { r_ = metrics_new(); ASSERT_NE(nullptr, r_); }
	void TearDown() override { metrics_free(r_); }
	struct metrics *r_ = nullptr;
};

TEST_F(Metrics, CounterByOpHasHelpTypeAndOneLinePerExportedOp)
{
	struct metric *m = metrics_counter(r_, "rdfs_x_requests_total", "Requests by op.",
					   &kOpDim, nullptr, 0);

	ASSERT_NE(nullptr, m);
	metrics_add(m, 2, 0, 5);
	metrics_add(m, 2, 0, 1);
	metrics_add(m, 1, 0, 7);	/* not exported: ignored */
	metrics_add(m, 9, 0, 7);	/* out of range: ignored */
	std::string t = render(r_);
	EXPECT_EQ("# HELP rdfs_x_requests_total Requests by op.\n"
		  "# TYPE rdfs_x_requests_total counter\n"
		  "rdfs_x_requests_total{op=\"PING\"} 0\n"
		  "rdfs_x_requests_total{op=\"READ\"} 6\n"
		  "rdfs_x_requests_total{op=\"WRITE\"} 0\n", t);
}

TEST_F(Metrics, SparseTwoLabelCounterRendersOnlyNonZeroCells)
{
	struct metric *m = metrics_counter(r_, "rdfs_x_errors_total", "Errors.", &kOpDim,
					   metrics_errno_dim(), METRICS_SPARSE);

	ASSERT_NE(nullptr, m);
	metrics_add(m, 3, ENOSPC, 2);
	metrics_add(m, 0, ENOENT, 1);
	metrics_add(m, 0, 0, 1);	/* errno 0 is no error: not a series */
	std::string t = render(r_);
	EXPECT_TRUE(has_line(t, "rdfs_x_errors_total{op=\"WRITE\",errno=\"ENOSPC\"} 2")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_x_errors_total{op=\"PING\",errno=\"ENOENT\"} 1")) << t;
	/* two series and the two comment lines */
	EXPECT_EQ(4, std::count(t.begin(), t.end(), '\n')) << t;
}

TEST_F(Metrics, ErrnoLabelsAreNamesAndUnnamedNumbersStillLabelled)
{
	const struct metrics_dim *d = metrics_errno_dim();

	ASSERT_EQ((unsigned)METRICS_ERRNO_MAX, d->n);
	EXPECT_EQ(nullptr, d->values[0]);
	EXPECT_STREQ("EPERM", d->values[EPERM]);
	EXPECT_STREQ("ESTALE", d->values[ESTALE]);
	EXPECT_STREQ("EKEYEXPIRED", d->values[EKEYEXPIRED]);
	for (unsigned i = 1; i < d->n; i++)
		ASSERT_NE(nullptr, d->values[i]) << i;
}

TEST_F(Metrics, HistogramBucketsAreCumulativeWithInfSumAndCount)
{
	static const uint64_t bounds[] = { 1000, 5000, 10000 };
	struct metric *h = metrics_histogram(r_, "rdfs_x_seconds", "Latency.", &kOpDim, bounds,
					     3, 1e6);

	ASSERT_NE(nullptr, h);
	metrics_observe(h, 2, 1000);	/* on a bound: that bucket (le is <=) */
	metrics_observe(h, 2, 4000);
	metrics_observe(h, 2, 20000);	/* past the last: only +Inf */
	std::string t = render(r_);
	EXPECT_TRUE(has_line(t, "# TYPE rdfs_x_seconds histogram")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_x_seconds_bucket{op=\"READ\",le=\"0.001\"} 1")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_x_seconds_bucket{op=\"READ\",le=\"0.005\"} 2")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_x_seconds_bucket{op=\"READ\",le=\"0.01\"} 2")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_x_seconds_bucket{op=\"READ\",le=\"+Inf\"} 3")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_x_seconds_sum{op=\"READ\"} 0.025")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_x_seconds_count{op=\"READ\"} 3")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_x_seconds_count{op=\"PING\"} 0")) << t;
	EXPECT_EQ(std::string::npos, t.find("op=\"(null)\""));
}

TEST_F(Metrics, HistogramWithoutLabelsAndUnsortedBoundsRefused)
{
	static const uint64_t bounds[] = { 1, 2, 4 };
	static const uint64_t bad[] = { 2, 2 };

	EXPECT_EQ(nullptr, metrics_histogram(r_, "rdfs_bad", "x", nullptr, bad, 2, 1));
	struct metric *h = metrics_histogram(r_, "rdfs_batch", "Sizes.", nullptr, bounds, 3, 1);
	ASSERT_NE(nullptr, h);
	metrics_observe(h, 0, 3);
	metrics_observe(h, 1, 3);	/* no dimension: only index 0 */
	std::string t = render(r_);
	EXPECT_TRUE(has_line(t, "rdfs_batch_bucket{le=\"2\"} 0")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_batch_bucket{le=\"4\"} 1")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_batch_sum 3")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_batch_count 1")) << t;
}

TEST_F(Metrics, GaugesGoBothWays)
{
	struct metric *g = metrics_gauge(r_, "rdfs_x_in_flight", "In flight.", nullptr);

	ASSERT_NE(nullptr, g);
	metrics_gauge_add(g, 0, 3);
	metrics_gauge_add(g, 0, -5);
	EXPECT_TRUE(has_line(render(r_), "rdfs_x_in_flight -2"));
	metrics_gauge_set(g, 0, 42);
	EXPECT_TRUE(has_line(render(r_), "rdfs_x_in_flight 42"));
}

TEST_F(Metrics, LabelValuesAndHelpAreEscaped)
{
	static const char *const vals[] = { "a\"b\\c\nd" };
	static const struct metrics_dim dim = { "name", vals, 1 };
	struct metric *m = metrics_counter(r_, "rdfs_esc_total", "back\\slash\nnewline \"q\"",
					   &dim, nullptr, 0);

	ASSERT_NE(nullptr, m);
	std::string t = render(r_);
	EXPECT_TRUE(has_line(t, "# HELP rdfs_esc_total back\\\\slash\\nnewline \"q\"")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_esc_total{name=\"a\\\"b\\\\c\\nd\"} 0")) << t;
}

struct Volumes {
	std::vector<std::pair<std::string, double>> v;
};

void collect(void *arg, struct metrics_emitter *e)
{
	for (auto &p : static_cast<Volumes *>(arg)->v) {
		const char *labels[] = { p.first.c_str(), "x" };

		metrics_emit(e, labels, p.second);
	}
}

TEST_F(Metrics, CollectorEmitsItsSeriesAtRenderTime)
{
	static const char *const labels[] = { "server", "kind" };
	Volumes vols;

	ASSERT_NE(nullptr, metrics_collector(r_, "rdfs_cap_bytes", "Capacity.", METRICS_GAUGE,
					     labels, 2, collect, &vols));
	std::string t = render(r_);
	EXPECT_EQ("# HELP rdfs_cap_bytes Capacity.\n# TYPE rdfs_cap_bytes gauge\n", t);
	vols.v.push_back({ "io\"0", 1099511627776.0 });
	vols.v.push_back({ "io1", 0.5 });
	t = render(r_);
	EXPECT_TRUE(has_line(t, "rdfs_cap_bytes{server=\"io\\\"0\",kind=\"x\"} 1099511627776")) << t;
	EXPECT_TRUE(has_line(t, "rdfs_cap_bytes{server=\"io1\",kind=\"x\"} 0.5")) << t;
}

TEST_F(Metrics, BadNamesAndDuplicatesAreRefused)
{
	static const char *const v[] = { "x" };
	static const struct metrics_dim le = { "le", v, 1 };
	static const struct metrics_dim colon = { "a:b", v, 1 };

	EXPECT_EQ(nullptr, metrics_counter(r_, "9lives", "x", nullptr, nullptr, 0));
	EXPECT_EQ(nullptr, metrics_counter(r_, "has space", "x", nullptr, nullptr, 0));
	EXPECT_EQ(nullptr, metrics_counter(r_, "", "x", nullptr, nullptr, 0));
	EXPECT_EQ(nullptr, metrics_counter(r_, "rdfs_le", "x", &le, nullptr, 0));
	EXPECT_EQ(nullptr, metrics_counter(r_, "rdfs_colon", "x", &colon, nullptr, 0));
	EXPECT_EQ(nullptr, metrics_counter(r_, "rdfs_same", "x", &kOpDim, &kOpDim, 0));
	ASSERT_NE(nullptr, metrics_counter(r_, "rdfs_once_total", "x", nullptr, nullptr, 0));
	EXPECT_EQ(nullptr, metrics_gauge(r_, "rdfs_once_total", "x", nullptr));
	/* the hot path takes a NULL family (metrics off) */
	metrics_add(nullptr, 0, 0, 1);
	metrics_gauge_add(nullptr, 0, 1);
	metrics_observe(nullptr, 0, 1);
}

TEST_F(Metrics, ConcurrentAddsAreNotLost)
{
	struct metric *m = metrics_counter(r_, "rdfs_n_total", "n", &kOpDim, nullptr, 0);
	std::vector<std::thread> ts;

	for (int t = 0; t < 4; t++)
		ts.emplace_back([m] {
			for (int i = 0; i < 100000; i++)
				metrics_add(m, 3, 0, 1);
		});
	for (auto &t : ts)
		t.join();
	EXPECT_TRUE(has_line(render(r_), "rdfs_n_total{op=\"WRITE\"} 400000"));
}

/* ---------------------------------------------------------------- HTTP */

class MetricsHttp : public Metrics {
protected:
	void SetUp() override
	{
		Metrics::SetUp();
		m_ = metrics_counter(r_, "rdfs_t_total", "Test.", nullptr, nullptr, 0);
		ASSERT_EQ(0, metrics_http_start(r_, "127.0.0.1:0", &h_));
		const char *url = metrics_http_url(h_);
		ASSERT_EQ(0, strncmp(url, "http://127.0.0.1:", 17)) << url;
		port_ = atoi(url + 17);
		ASSERT_GT(port_, 0);
		EXPECT_NE(nullptr, strstr(url, "/metrics"));
	}
	void TearDown() override
	{
		metrics_http_stop(h_);
		Metrics::TearDown();
	}
	int connect_port()
	{
		struct sockaddr_in a = {};
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		a.sin_family = AF_INET;
		a.sin_port = htons(port_);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			if (fd >= 0)
				close(fd);
			return -1;
		}
		return fd;
	}
	/* Send @req on a new connection and read until the server closes it. */
	std::string exchange(const std::string &req)
	{
		int fd = connect_port();
		std::string out;
		char buf[4096];
		ssize_t n;

		if (fd < 0)
			return "";
		if (write(fd, req.data(), req.size()) != (ssize_t)req.size()) {
			close(fd);
			return "";
		}
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			out.append(buf, (size_t)n);
		close(fd);
		return out;
	}
	std::string get(const std::string &method, const std::string &path)
	{
		return exchange(method + " " + path + " HTTP/1.1\r\nHost: x\r\n"
			       "Connection: close\r\n\r\n");
	}
	struct metric *m_ = nullptr;
	struct metrics_http *h_ = nullptr;
	int port_ = 0;
};

TEST_F(MetricsHttp, GetMetricsServesTheTextFormat)
{
	metrics_add(m_, 0, 0, 17);
	std::string resp = get("GET", "/metrics");
	EXPECT_EQ(0u, resp.find("HTTP/1.1 200")) << resp;
	EXPECT_NE(std::string::npos,
		  resp.find("Content-Type: text/plain; version=0.0.4; charset=utf-8")) << resp;
	EXPECT_NE(std::string::npos, resp.find("\r\n\r\n# HELP rdfs_t_total Test.\n")) << resp;
	EXPECT_NE(std::string::npos, resp.find("\nrdfs_t_total 17\n")) << resp;
}

TEST_F(MetricsHttp, OtherPathsAre404AndOtherMethods405)
{
	EXPECT_EQ(0u, get("GET", "/").find("HTTP/1.1 404"));
	EXPECT_EQ(0u, get("GET", "/metrics/x").find("HTTP/1.1 404"));
	EXPECT_EQ(0u, get("GET", "/other").find("HTTP/1.1 404"));
	std::string resp = get("DELETE", "/metrics");
	EXPECT_EQ(0u, resp.find("HTTP/1.1 405")) << resp;
	EXPECT_NE(std::string::npos, resp.find("Allow: GET, HEAD")) << resp;
	resp = exchange("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
			"Connection: close\r\n\r\nhello");
	EXPECT_EQ(0u, resp.find("HTTP/1.1 405")) << resp;
	resp = get("HEAD", "/metrics");
	EXPECT_EQ(0u, resp.find("HTTP/1.1 200")) << resp;
	EXPECT_EQ(std::string::npos, resp.find("# HELP")) << resp;
}

TEST_F(MetricsHttp, GarbageAndSilentAndHugeClientsDoNotStopIt)
{
	std::string junk(200000, 'x');
	std::vector<int> silent;

	/* connections that send nothing and never read hold slots, not the thread */
	for (int i = 0; i < 4; i++) {
		int fd = connect_port();
		ASSERT_GE(fd, 0);
		silent.push_back(fd);
	}
	std::string resp = exchange("\x01\x02garbage\r\n\r\n");
	EXPECT_EQ(std::string::npos, resp.find("HTTP/1.1 200")) << resp;
	/* headers past the connection's memory limit are refused, not buffered */
	resp = exchange("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Junk: " + junk + "\r\n\r\n");
	EXPECT_EQ(std::string::npos, resp.find("HTTP/1.1 200")) << resp.substr(0, 200);
	EXPECT_EQ(0u, get("GET", "/metrics").find("HTTP/1.1 200"));
	for (int fd : silent)
		close(fd);
}

TEST(MetricsHttpListen, BadAddressesAreRefused)
{
	struct metrics *r = metrics_new();
	struct metrics_http *h = nullptr;

	EXPECT_EQ(-EINVAL, metrics_http_start(r, "9100", &h));
	EXPECT_EQ(-EINVAL, metrics_http_start(r, "127.0.0.1:", &h));
	EXPECT_EQ(-EINVAL, metrics_http_start(r, "127.0.0.1:99999", &h));
	EXPECT_EQ(-EINVAL, metrics_http_start(r, "127.0.0.1:9x", &h));
	EXPECT_EQ(-EINVAL, metrics_http_start(r, "::1:9100", &h));
	EXPECT_EQ(-EINVAL, metrics_http_start(r, "[::1:9100", &h));
	EXPECT_EQ(nullptr, h);
	metrics_free(r);
}

TEST(MetricsHttpListen, TakenPortIsAnError)
{
	struct metrics *r = metrics_new();
	struct metrics_http *a = nullptr, *b = nullptr;
	char addr[64];

	ASSERT_EQ(0, metrics_http_start(r, "127.0.0.1:0", &a));
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", atoi(metrics_http_url(a) + 17));
	EXPECT_EQ(-EADDRINUSE, metrics_http_start(r, addr, &b));
	metrics_http_stop(a);
	metrics_free(r);
}

} // namespace
