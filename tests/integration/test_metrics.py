# SPDX-License-Identifier: MIT
"""Prometheus metrics of a real cluster (local-cluster --metrics): every
endpoint (the servers' and rdfs-fuse's) serves text a strict parser of format
0.0.4 accepts; a known workload through the FUSE mount moves the counters it
must, at the servers and at rdfs-fuse (exactly where one request per
operation is certain, and every request's duration observed once); `rdfs
servers set --read-only` flips the metaserver's read-only gauge of that
server; other paths are 404, other methods 405; and scrapers that hold every
connection, send garbage or never read do not stop the file system or the
other servers' endpoints."""
import errno
import http.client
import json
import math
import os
import re
import socket
import urllib.parse

import pytest

from conftest import (BIN, CLIENT, LOCAL_CLUSTER, Cluster, _cluster_root, _remove, _stop,
                      drop_cache, run, wait_until)

N_FILES = 20
FILE_BYTES = 3 * 4096 + 100           # four blocks, the last one partial

# ------------------------------------------------------------------ the parser

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
SAMPLE = re.compile(r"^(%s)(\{(.*)\})? (\S+)$" % NAME)
LABEL_PAIR = re.compile(r'(%s)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"(,|$)' % LABEL)
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def parse_value(s):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    assert re.fullmatch(r"-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?", s), "bad value %r" % s
    return float(s)


def parse_labels(s):
    out, pos = {}, 0
    while pos < len(s):
        m = LABEL_PAIR.match(s, pos)
        assert m, "bad labels at %r" % s[pos:]
        assert m.group(1) not in out, "label %s twice" % m.group(1)
        out[m.group(1)] = m.group(2)
        pos = m.end()
        assert m.group(3) or pos == len(s)
    return out


def parse(text):
    """Strict text format 0.0.4: {family: {"type", "help", "samples": {(name, labels): v}}}."""
    assert text.endswith("\n"), "the last line has no newline"
    fams, current = {}, None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = "line %d: %r" % (n, line)
        assert line, "empty line: " + where
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, rest = line[2:6], line[7:]
            name, _, arg = rest.partition(" ")
            assert re.fullmatch(NAME, name), where
            f = fams.setdefault(name, {"type": None, "help": None, "samples": {}})
            assert not f["samples"], "HELP/TYPE after samples: " + where
            if kind == "HELP":
                assert f["help"] is None, "second HELP: " + where
                assert not re.search(r"\\[^\\n]", arg), "bad escape in HELP: " + where
                f["help"] = arg
            else:
                assert f["type"] is None and arg in TYPES, where
                f["type"] = arg
            current = name
            continue
        assert not line.startswith("#") or line.startswith("# "), where
        if line.startswith("# "):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample: " + where
        name, labels, value = m.group(1), parse_labels(m.group(3) or ""), parse_value(m.group(4))
        assert current, "sample before any TYPE: " + where
        f = fams[current]
        allowed = {current}
        if f["type"] == "histogram":
            allowed = {current + s for s in ("_bucket", "_sum", "_count")}
            if name.endswith("_bucket"):
                assert "le" in labels, where
        assert name in allowed, "sample of another family: " + where
        key = (name, tuple(sorted(labels.items())))
        assert key not in f["samples"], "duplicate series: " + where
        f["samples"][key] = value
    for name, f in fams.items():
        assert f["type"] and f["help"], "%s lacks TYPE or HELP" % name
        if f["type"] == "histogram":
            check_histogram(name, f)
    return fams


def check_histogram(name, f):
    series = {}
    for (sname, labels), v in f["samples"].items():
        rest = tuple(kv for kv in labels if kv[0] != "le")
        s = series.setdefault(rest, {"buckets": [], "count": None, "sum": None})
        if sname.endswith("_bucket"):
            s["buckets"].append((parse_value(dict(labels)["le"]), v))
        elif sname.endswith("_count"):
            s["count"] = v
        else:
            s["sum"] = v
    for rest, s in series.items():
        b = sorted(s["buckets"])
        assert b and b[-1][0] == math.inf, "%s%s: no +Inf bucket" % (name, rest)
        assert all(b[i][1] <= b[i + 1][1] for i in range(len(b) - 1)), \
            "%s%s: buckets not cumulative" % (name, rest)
        assert s["count"] == b[-1][1], "%s%s: _count is not the +Inf bucket" % (name, rest)
        assert s["sum"] is not None and s["sum"] >= 0


def value(fams, metric, **labels):
    """The sample @metric with exactly @labels (0 if absent: a sparse or zero series)."""
    base = re.sub(r"_(bucket|sum|count)$", "", metric)
    fam = fams.get(metric) or fams.get(base)
    assert fam, "no family %s" % metric
    return fam["samples"].get((metric, tuple(sorted(labels.items()))), 0.0)


def total(fams, metric, **match):
    """Sum of @metric's samples whose labels include @match."""
    base = re.sub(r"_(bucket|sum|count)$", "", metric)
    fam = fams.get(metric) or fams.get(base)
    assert fam, "no family %s" % metric
    return sum(v for (n, labels), v in fam["samples"].items()
               if n == metric and all(dict(labels).get(k) == w for k, w in match.items()))


# ------------------------------------------------------------------ the cluster


class MetricsCluster(Cluster):
    """A cluster whose servers serve metrics (local-cluster --metrics)."""

    def up(self):
        import conftest
        if self not in conftest._live:
            conftest._live.append(self)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        run([LOCAL_CLUSTER, "up", "--dir", self.dir, "--ioservers", self.n_io,
             "--mount", self.mnt, "--port-base", self.port, "--bin", BIN, "--metrics"]
            + getattr(conftest, "LC_TRANSPORT_OPTS", []) + getattr(conftest, "LC_CLIENT_OPTS", []),
            timeout=180)
        assert os.path.ismount(self.mnt)
        with open(self.dir / "state.json") as f:
            self.urls = json.load(f)["metrics_urls"]


def metrics_cluster(kind):
    """A started MetricsCluster (stopped with _stop); nothing left if it fails."""
    c = MetricsCluster(_cluster_root(kind), 2)
    try:
        c.up()
    except BaseException:
        c.down()
        _remove(c)
        raise
    return c


@pytest.fixture(scope="module")
def mc():
    c = metrics_cluster("metrics")
    yield c
    _stop(c)


def get(url, method="GET", path=None, timeout=10):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request(method, path or u.path)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode()
    finally:
        conn.close()


def scrape(url):
    status, headers, body = get(url)
    assert status == 200, "%s: HTTP %d" % (url, status)
    assert headers.get("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
    return parse(body)


# ------------------------------------------------------------------ tests


def test_every_server_has_an_endpoint_that_parses(mc):
    # rdfs-fuse serves metrics too; the kernel client does not
    assert sorted(mc.urls) == (["fuse"] if CLIENT == "fuse" else []) + ["io0", "io1", "metaserver"]
    ms = scrape(mc.urls["metaserver"])
    for fam in ("rdfs_ms_requests_total", "rdfs_ms_request_errors_total",
                "rdfs_ms_request_duration_seconds", "rdfs_ms_requests_in_flight",
                "rdfs_ms_queue_depth", "rdfs_ms_connections", "rdfs_ms_sync_write_duration_seconds",
                "rdfs_ms_sync_batch_mutations", "rdfs_ms_unsynced_writes_total",
                "rdfs_ms_fences_total",
                "rdfs_ms_ioserver_capacity_bytes", "rdfs_ms_ioserver_free_bytes"):
        assert fam in ms, fam
    assert ms["rdfs_ms_requests_total"]["type"] == "counter"
    assert ms["rdfs_ms_request_duration_seconds"]["type"] == "histogram"
    # both I/O servers registered: up, with their volume's size
    assert total(ms, "rdfs_ms_ioserver_up") == 2
    assert value(ms, "rdfs_ms_connections", role="server") == 2
    for io in ("io0", "io1"):
        f = scrape(mc.urls[io])
        assert value(f, "rdfs_ios_registered") == 1
        assert value(f, "rdfs_ios_volume_capacity_bytes") == \
            total(ms, "rdfs_ms_ioserver_capacity_bytes", name=io) > 0
        # the metaserver's opcodes are not an I/O server's series
        assert value(f, "rdfs_ios_requests_total", op="mknod") == 0
        assert not any("mknod" in str(k) for k in f["rdfs_ios_requests_total"]["samples"])


def _quiet(mc):
    """Wait for the metaserver's requests in flight to drain: close(2) returns
    before FUSE's RELEASE is answered."""
    wait_until(lambda: value(scrape(mc.urls["metaserver"]), "rdfs_ms_requests_in_flight") == 0,
               "the metaserver's requests in flight to drain")


def _write_and_read(d):
    """The known workload: mkdir @d, N_FILES files of FILE_BYTES each created,
    written and fsync'ed, then read back past the page cache. Returns @d."""
    d.mkdir()
    data = os.urandom(FILE_BYTES)
    for i in range(N_FILES):
        with open(d / ("f%d" % i), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    for i in range(N_FILES):
        p = d / ("f%d" % i)
        drop_cache(p)
        with open(p, "rb") as f:
            assert f.read() == data
    return d


def test_counters_follow_a_known_workload(mc):
    _quiet(mc)
    before_ms = scrape(mc.urls["metaserver"])
    before_io = [scrape(mc.urls[io]) for io in ("io0", "io1")]
    d = _write_and_read(mc.mnt / "workload")
    with pytest.raises(FileNotFoundError):
        os.stat(d / "absent")
    _quiet(mc)
    after_ms = scrape(mc.urls["metaserver"])
    after_io = [scrape(mc.urls[io]) for io in ("io0", "io1")]

    def ms_delta(metric, **labels):
        return value(after_ms, metric, **labels) - value(before_ms, metric, **labels)

    # one MKNOD per created file and one MKDIR, each answered, none failed
    assert ms_delta("rdfs_ms_requests_total", op="mknod") == N_FILES
    assert ms_delta("rdfs_ms_requests_total", op="mkdir") == 1
    assert ms_delta("rdfs_ms_request_duration_seconds_count", op="mknod") == N_FILES
    assert total(after_ms, "rdfs_ms_request_errors_total", op="mknod") == \
        total(before_ms, "rdfs_ms_request_errors_total", op="mknod")
    # the stat of a missing name: a LOOKUP answered ENOENT
    assert ms_delta("rdfs_ms_request_errors_total", op="lookup", errno="ENOENT") >= 1
    # every create is a synced LevelDB write; commits of sizes add more
    assert ms_delta("rdfs_ms_sync_write_duration_seconds_count") >= N_FILES + 1
    # one sync may carry several mutations, never none
    assert ms_delta("rdfs_ms_sync_batch_mutations_sum") >= N_FILES + 1
    assert ms_delta("rdfs_ms_sync_batch_mutations_count") == \
        ms_delta("rdfs_ms_sync_write_duration_seconds_count")
    assert ms_delta("rdfs_ms_requests_total", op="layout") >= 1
    # allocations for writing ride on their COMMIT's sync, but for the first
    # on each I/O server, which raises its high-water mark
    assert ms_delta("rdfs_ms_unsynced_writes_total") >= N_FILES - 2
    assert value(after_ms, "rdfs_ms_connections", role="client") >= 1
    # the files' blocks left the free space: four blocks each
    freed = total(before_ms, "rdfs_ms_ioserver_free_bytes") - \
        total(after_ms, "rdfs_ms_ioserver_free_bytes")
    assert freed >= N_FILES * 4 * 4096

    def io_delta(metric, **labels):
        return sum(total(a, metric, **labels) - total(b, metric, **labels)
                   for a, b in zip(after_io, before_io))

    # every byte went to an I/O server and came back from one
    assert io_delta("rdfs_ios_request_bytes_total", op="write") >= N_FILES * FILE_BYTES
    assert io_delta("rdfs_ios_reply_bytes_total", op="read") >= N_FILES * FILE_BYTES
    assert io_delta("rdfs_ios_requests_total", op="write") >= N_FILES
    assert io_delta("rdfs_ios_requests_total", op="read") >= N_FILES
    assert io_delta("rdfs_ios_request_duration_seconds_count", op="read") == \
        io_delta("rdfs_ios_requests_total", op="read")
    assert io_delta("rdfs_ios_read_units_disk_total") + \
        io_delta("rdfs_ios_read_units_cache_total") >= N_FILES
    for a in after_io:
        assert total(a, "rdfs_ios_request_errors_total") == 0


needs_fuse = pytest.mark.skipif(CLIENT != "fuse", reason="rdfs-fuse's metrics: a FUSE mount")


def _fuse_quiet(mc):
    """Wait for rdfs-fuse's requests in flight to end (the kernel sends RELEASE
    after close(2) has returned); the scrape that saw none. A scrape reads one
    metric after another, so a request the kernel sends on its own (a FORGET)
    may begin after the requests were counted and end before the durations
    were: a quiet scrape also counts what the one before it did."""
    got = []

    def counts(fams):
        return (total(fams, "rdfs_fuse_requests_total"),
                total(fams, "rdfs_fuse_request_duration_seconds_count"))

    def quiet():
        got.append(scrape(mc.urls["fuse"]))
        return value(got[-1], "rdfs_fuse_requests_in_flight") == 0 and len(got) > 1 and \
            counts(got[-1]) == counts(got[-2])
    wait_until(quiet, "rdfs-fuse's requests in flight to end")
    return got[-1]


def test_a_create_asks_the_metaserver_only_what_it_needs(mc):
    """open(O_CREAT|O_EXCL) + close of new names: one MKNOD each (create and open
    in one), never an OPEN. Through FUSE the kernel looks the name up first (one
    LOOKUP each); the kernel client's atomic_open creates without asking."""
    d = mc.mnt / "create-cost"
    d.mkdir()
    # names relative to an open directory: only the new names are looked up
    dfd = os.open(d, os.O_DIRECTORY)
    try:
        _quiet(mc)
        before = scrape(mc.urls["metaserver"])
        for i in range(N_FILES):
            os.close(os.open("f%d" % i, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644,
                             dir_fd=dfd))
        _quiet(mc)
        after = scrape(mc.urls["metaserver"])
    finally:
        os.close(dfd)

    def delta(op):
        return value(after, "rdfs_ms_requests_total", op=op) - \
            value(before, "rdfs_ms_requests_total", op=op)

    assert delta("mknod") == N_FILES
    assert delta("open") == 0
    assert delta("lookup") == (0 if CLIENT == "lkm" else N_FILES)
    assert sorted(os.listdir(d)) == sorted("f%d" % i for i in range(N_FILES))
    # and an O_EXCL create of a name that exists still fails
    with pytest.raises(FileExistsError):
        os.open(d / "f0", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)


@needs_fuse
def test_fuse_counters_follow_a_known_workload(mc):
    """rdfs-fuse counts what the kernel asked of it: a create, fsync and unlink
    per file, the bytes written and read, an error reply by its errno; each
    request's duration is observed once; the client core counts its metaserver
    requests as the metaserver does, and a layout fetched for each new file."""
    _quiet(mc)
    before = _fuse_quiet(mc)
    before_ms = scrape(mc.urls["metaserver"])
    d = _write_and_read(mc.mnt / "fuse-workload")
    with pytest.raises(OSError) as e:
        os.rmdir(d)
    assert e.value.errno == errno.ENOTEMPTY
    for i in range(N_FILES):
        os.unlink(d / ("f%d" % i))
    os.rmdir(d)
    after = _fuse_quiet(mc)
    _quiet(mc)
    after_ms = scrape(mc.urls["metaserver"])

    def delta(metric, **labels):
        return value(after, metric, **labels) - value(before, metric, **labels)

    def tdelta(metric, **match):
        return total(after, metric, **match) - total(before, metric, **match)

    # each file: created, fsync'ed by its writer and by drop_cache, unlinked; opened 3 times
    for op, n in (("create", N_FILES), ("fsync", 2 * N_FILES), ("unlink", N_FILES),
                  ("mkdir", 1), ("rmdir", 2), ("open", 2 * N_FILES), ("release", 3 * N_FILES)):
        assert delta("rdfs_fuse_requests_total", op=op) == n, op
    assert delta("rdfs_fuse_requests_total", op="write") >= N_FILES
    assert delta("rdfs_fuse_requests_total", op="read") >= N_FILES
    # every request handled was timed once: per op and in all
    for (name, labels), v in after["rdfs_fuse_requests_total"]["samples"].items():
        op = dict(labels)["op"]
        assert value(after, "rdfs_fuse_request_duration_seconds_count", op=op) == v, op
    assert tdelta("rdfs_fuse_request_duration_seconds_count") == \
        tdelta("rdfs_fuse_requests_total") >= 6 * N_FILES
    assert tdelta("rdfs_fuse_request_duration_seconds_sum") > 0
    # the one error: rmdir of a directory that held the files
    assert delta("rdfs_fuse_request_errors_total", op="rmdir", errno="ENOTEMPTY") == 1
    assert tdelta("rdfs_fuse_request_errors_total", op="rmdir") == 1
    assert tdelta("rdfs_fuse_request_errors_total", op="create") == 0
    assert tdelta("rdfs_fuse_request_errors_total", op="write") == 0
    # every byte came through the mount, both ways
    assert delta("rdfs_fuse_write_bytes_total") >= N_FILES * FILE_BYTES
    assert delta("rdfs_fuse_read_bytes_total") >= N_FILES * FILE_BYTES
    # the client core: a MKNOD per file at the metaserver, sent and served
    ms_mknod = value(after_ms, "rdfs_ms_requests_total", op="mknod") - \
        value(before_ms, "rdfs_ms_requests_total", op="mknod")
    assert delta("rdfs_client_metaserver_requests_total", op="mknod") == ms_mknod == N_FILES
    assert delta("rdfs_client_metaserver_requests_total", op="layout") >= 1
    assert delta("rdfs_client_layout_allocations_total") >= N_FILES
    # rdfs-fuse's default write-behind takes every write(2); each open refetches the layout
    assert delta("rdfs_client_write_behind_bytes_total") >= N_FILES * FILE_BYTES
    assert delta("rdfs_client_layout_cache_misses_total") >= 2 * N_FILES
    for reason in ("fenced", "expired", "refused"):
        assert delta("rdfs_client_capability_refusals_total", reason=reason) == 0, reason
    assert value(after, "rdfs_fuse_requests_in_flight") == 0


@needs_fuse
def test_rdfs_metrics_dumps_the_fuse_endpoint(mc):
    p = mc.rdfs("metrics", "--url", mc.urls["fuse"])
    fams = parse(p.stdout)
    assert fams["rdfs_fuse_requests_total"]["type"] == "counter"
    assert fams["rdfs_fuse_request_duration_seconds"]["type"] == "histogram"
    assert value(fams, "rdfs_fuse_requests_total", op="init") == 1
    assert "rdfs_client_layout_cache_hits_total" in fams


def test_read_only_gauge_follows_rdfs_servers_set(mc):
    """rdfs_ms_ioserver_read_only{server, name, label} is 1 exactly while
    `rdfs servers set --read-only on` holds, with the label the admin gave."""
    def gauge():
        fam = scrape(mc.urls["metaserver"])["rdfs_ms_ioserver_read_only"]
        assert fam["type"] == "gauge"
        return {dict(labels)["name"]: (dict(labels)["server"], dict(labels)["label"], v)
                for (_, labels), v in fam["samples"].items()}

    g = gauge()
    assert sorted(g) == ["io0", "io1"] and all(v == 0 for _, _, v in g.values()), g
    sid = g["io1"][0]
    mc.rdfs("servers", "label", sid, "rack 7")
    mc.rdfs("servers", "set", sid, "--read-only", "on")
    try:
        g = gauge()
        assert g["io1"] == (sid, "rack 7", 1) and g["io0"][2] == 0, g
    finally:
        mc.rdfs("servers", "set", sid, "--read-only", "off")
        mc.rdfs("servers", "label", sid, "")
    assert gauge()["io1"] == (sid, "", 0)


def test_other_paths_are_404_and_other_methods_405(mc):
    url = mc.urls["metaserver"]
    for path in ("/", "/other", "/metrics/", "/metricsx", "/../metrics"):
        assert get(url, path=path)[0] == 404, path
    for method in ("POST", "PUT", "DELETE", "OPTIONS"):
        status, headers, _ = get(url, method=method)
        assert status == 405, method
        assert headers.get("Allow") == "GET, HEAD"
    status, _, body = get(url, method="HEAD")
    assert status == 200 and body == ""


def test_rdfs_metrics_prints_what_the_endpoints_serve(mc):
    p = mc.rdfs("metrics", "--url", mc.urls["io0"], "--url", mc.urls["metaserver"])
    assert "# rdfs metrics: %s\n" % mc.urls["io0"] in p.stdout
    fams = parse(p.stdout)
    assert "rdfs_ios_requests_total" in fams and "rdfs_ms_requests_total" in fams
    u = urllib.parse.urlsplit(mc.urls["io0"])
    p = mc.rdfs("metrics", "--url", "http://%s:%d/other" % (u.hostname, u.port), check=False)
    assert p.returncode == 1 and "404" in p.stderr


def test_rdfs_top_shows_the_rates_of_a_workload(mc):
    """rdfs top's table is the difference over its interval: the creates made
    while it sampled show as mknod requests at the metaserver and WRITE bytes at
    an I/O server; a server that does not answer is said to, and is no error."""
    import threading
    d = mc.mnt / "top"
    d.mkdir()
    stop = threading.Event()

    def work():
        i = 0
        while not stop.is_set():
            with open(d / ("f%d" % i), "wb") as f:
                f.write(b"z" * 8192)
            i += 1
    w = threading.Thread(target=work)
    w.start()
    try:
        p = mc.rdfs("top", "--url", mc.urls["metaserver"], "--url", mc.urls["io0"],
                    "--url", mc.urls["io1"], "--interval", "1", "--count", "1")
    finally:
        stop.set()
        w.join()
    rows = {}
    server = None
    for line in p.stdout.splitlines():
        if line.startswith("http://"):
            server = line.split()[0]
        elif line.startswith("  ") and not line.strip().startswith("op "):
            f = line.split()
            rows[(server, f[0])] = [float(x) for x in f[1:]]
    assert rows[(mc.urls["metaserver"], "mknod")][0] > 0, p.stdout
    assert rows[(mc.urls["metaserver"], "mknod")][1] == 0
    writes = [v for (srv, op), v in rows.items() if op == "write"]
    assert writes and sum(v[3] for v in writes) > 0, p.stdout     # MiB/s in
    dead = mc.rdfs("top", "--url", "http://127.0.0.1:1/metrics", "-n", "1", "-d", "0.1")
    assert "http://127.0.0.1:1/metrics  (no answer)" in dead.stdout
    bad = mc.rdfs("top", "--interval", "0", check=False)
    assert bad.returncode == 2 and "--interval" in bad.stderr


def test_grafana_dashboard_names_only_metrics_the_servers_serve(mc):
    """deploy/grafana/rdfs.json must not drift from the names the servers use."""
    from conftest import REPO
    with open(REPO / "deploy" / "grafana" / "rdfs.json") as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert exprs
    served = set()
    for url in mc.urls.values():
        for name, fam in scrape(url).items():
            served.add(name)
            if fam["type"] == "histogram":
                served.update(name + s for s in ("_bucket", "_sum", "_count"))
    used = {n for e in exprs for n in re.findall(r"\brdfs_[a-z_]+", e)}
    if CLIENT != "fuse":
        # rdfs-fuse's and its client core's: the kernel client serves none
        used = {n for n in used if not n.startswith(("rdfs_fuse_", "rdfs_client_"))}
    assert used and used <= served, "not served: %s" % sorted(used - served)


def _connect(url):
    u = urllib.parse.urlsplit(url)
    return socket.create_connection((u.hostname, u.port), timeout=10)


def test_hostile_scrapers_do_not_stop_the_file_system(mc):
    url = mc.urls["metaserver"]
    held = []
    try:
        # more silent connections than the endpoint takes, garbage, and a
        # scraper that asks and never reads its answer
        for _ in range(24):
            try:
                held.append(_connect(url))
            except OSError:
                break
        for junk in (b"\x00\xff" * 5000, b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 5000):
            try:
                s = _connect(url)
                held.append(s)
                s.sendall(junk)
            except OSError:
                pass
        try:
            s = _connect(url)
            held.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 50)
        except OSError:
            pass
        # the file system answers meanwhile, metadata and data
        p = mc.mnt / "under-siege"
        data = os.urandom(100000)
        with open(p, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        drop_cache(p)
        with open(p, "rb") as f:
            assert f.read() == data
        assert mc.rdfs("status").returncode == 0
        # and so does another server's endpoint
        scrape(mc.urls["io0"])
    finally:
        for s in held:
            s.close()
    # the slots come back once the endpoint has seen the hostile peers go (until
    # then it turns new connections away: a refusal, not a hang)
    got = []

    def answers():
        try:
            got.append(scrape(url))
            return True
        except (OSError, http.client.HTTPException):
            return False
    wait_until(answers, "the metrics endpoint to answer again")
    assert value(got[-1], "rdfs_ms_requests_total", op="mknod") >= 1
