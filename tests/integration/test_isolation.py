# SPDX-License-Identifier: MIT
"""Hostile peers that hold on instead of flooding (issue 12, isolation): peers
that never read their replies, or read them a byte a second. A normal client's
metadata calls and READs are answered meanwhile (correctness checks with
generous timeouts, not speed tests), and the server applies its rule:

  - a peer whose queued replies do not shrink for `stall_close_ms` (60 s by
    default, a config key of both servers) is closed, and its memory returned.
"""
import os
import socket
import stat
import threading
import time

import rdfswire as w
from conftest import BIN, MiB, assert_bytes_equal, drop_cache, listener_pid, plain_wire, run
from test_trust import (_flood, _hang_up, _rss_kib, cap_for_extent, client_secret,
                        connect, getattr_, ino_of, io_read_req, ioserver_ports, layout,
                        write_file)

pytestmark = plain_wire("opens raw TCP connections to the servers' ports")

ROOT = w.cred(0, 0)
TCP_ESTABLISHED = 0x01


# ------------------------------------------------------------------ helpers
def tcp_states():
    """{(local port, remote port): state} of every IPv4 TCP socket on the host."""
    out = {}
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            out[(int(p[1].rsplit(":", 1)[1], 16), int(p[2].rsplit(":", 1)[1], 16))] = int(p[3], 16)
    return out


def still_open(sock, server_port, states=None):
    """Whether the server keeps its end of @sock open: ESTABLISHED in the host's
    /proc/net/tcp. Once it closes, its end is FIN_WAIT (its FIN may wait behind
    replies we have not read) or gone (a reset)."""
    states = tcp_states() if states is None else states
    return states.get((server_port, sock.getsockname()[1])) == TCP_ESTABLISHED


def normal_client_works(c, p, data, what):
    """A normal client is served: wire GETATTR and LOOKUP at the metaserver and a
    wire READ at each I/O server on new connections, and a write, fsync and read
    back of a new file through the mount, plus @p's bytes through it."""
    key = client_secret(c)
    ms = connect(c.port, key)
    try:
        status, a = getattr_(ms, w.ROOT_INO)
        assert status == 0 and stat.S_ISDIR(a["mode"]), "%s: GETATTR of / gave %d" % (what,
                                                                                   status)
        ino = ino_of(ms, c, p)
        status, lay = layout(ms, ino, len(data), ROOT)
        assert status == 0, "%s: LAYOUT: %d" % (what, status)
    finally:
        ms.close()
    ports = ioserver_ports(c)
    seen = set()
    for ext in lay["extents"]:
        if ext["server"] in seen or ext["unwritten"]:
            continue
        seen.add(ext["server"])
        io = connect(ports[ext["server"]], key)
        try:
            n = ext["length"] // 4096
            status, _, got = io.request(w.OP_READ, io_read_req(cap_for_extent(lay, ext),
                                                               ext["block"], n))
        finally:
            io.close()
        assert status == 0, "%s: READ at server %d: %d" % (what, ext["server"], status)
        assert_bytes_equal(data[ext["offset"]:ext["offset"] + n * 4096], got,
                           "%s: READ at server %d" % (what, ext["server"]))
    assert len(seen) == c.n_io, "%s: the file is on servers %r only" % (what, seen)
    q = p.parent / ("during-%s" % os.urandom(4).hex())
    more = os.urandom(2 * MiB + 77)
    write_file(q, more)
    drop_cache(q)
    assert_bytes_equal(more, q.read_bytes(), "%s: a file written through the mount" % what)
    drop_cache(p)
    assert_bytes_equal(data, p.read_bytes(), "%s: %s through the mount" % (what, p.name))


def striped_file(c, name="data"):
    data = os.urandom(4 * MiB)      # 4 chunks: on every I/O server
    p = c.mnt / name
    write_file(p, data)
    return p, data


# ------------------------------------------------------------------ slow reader
def read_setup(c, p, data):
    """(I/O server port, READ request of 1 MiB with a valid capability, its bytes)."""
    ms = connect(c.port, client_secret(c))
    try:
        status, lay = layout(ms, ino_of(ms, c, p), len(data), ROOT)
    finally:
        ms.close()
    assert status == 0, status
    ext = [e for e in lay["extents"] if e["length"] >= MiB and not e["unwritten"]][0]
    req = io_read_req(cap_for_extent(lay, ext), ext["block"], MiB // 4096)
    return ioserver_ports(c)[ext["server"]], req, data[ext["offset"]:ext["offset"] + MiB]


def slow_reader(port, key, req, n):
    """A connection that asked for @n pipelined READs (small receive buffer)."""
    conn = w.Conn(port, timeout=30)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    assert w.authenticate(conn, key) == "accepted"
    conn.send(b"".join(w.frame(w.OP_READ, req, tag=i + 1) for i in range(n)))
    return conn


# ------------------------------------------------------------------ stall close
STALL_MS = 2000


def conf_set(path, section, key, value):
    """Put `key = value` first in [section] of the INI file @path."""
    text = path.read_text()
    head = "\n[%s]\n" % section
    assert head in text, "%s has no [%s]" % (path, section)
    path.write_text(text.replace(head, head + "%s = %s\n" % (key, value), 1))


def restart_with_conf(c, port, conf, section, **more):
    """Kill the server on @port, set stall_close_ms (and @more keys) in its config
    file, start it again."""
    conf_set(conf, section, "stall_close_ms", STALL_MS)
    for k, v in more.items():
        conf_set(conf, section, k, v)
    saved = c.kill9(port)
    assert str(conf) in saved["argv"], saved["argv"]
    c.restart(saved)


def hostile_round(c, p, data, port, pid, req, readdir):
    """A never-reading READ flood at I/O server @port, a never-reading READDIR
    flood at the metaserver, and a byte-a-second reader of @port, all until the
    servers close them, while a normal client uses @p (@data): ({name: seconds until
    closed}, peak RSS of @pid in KiB)."""
    key = client_secret(c)
    never = w.Conn(port, timeout=30)
    never.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    assert w.authenticate(never, key) == "accepted"
    meta = w.Conn(c.port, timeout=30)
    meta.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    assert w.authenticate(meta, key) == "accepted"
    floods = [threading.Thread(target=_flood, daemon=True, args=(
                  never.sock, b"".join(w.frame(w.OP_READ, req, tag=i + 1) for i in range(2000)))),
              threading.Thread(target=_flood, daemon=True, args=(
                  meta.sock, b"".join(w.frame(w.OP_READDIR, readdir, tag=i + 1)
                                      for i in range(20000))))]
    t0 = time.monotonic()
    for t in floods:
        t.start()
    t_slow = time.monotonic()
    slow = slow_reader(port, key, req, 64)
    hostile = [("never-reading I/O client", never, port, t0),
               ("never-reading metaserver client", meta, c.port, t0),
               ("byte-a-second I/O reader", slow, port, t_slow)]
    peak, closed = _rss_kib(pid), {}
    try:
        normal_client_works(c, p, data, "while hostile clients do not read")
        bound = 55              # below the default stall_close_ms, 60 s
        while len(closed) < len(hostile):
            states = tcp_states()
            for name, conn, srv, since in hostile:
                if name not in closed and not still_open(conn.sock, srv, states):
                    closed[name] = time.monotonic() - since
                assert name in closed or time.monotonic() - since < bound, \
                    "the %s is still connected %d s after it began (stall_close_ms %d)" % (
                        name, bound, STALL_MS)
            peak = max(peak, _rss_kib(pid))
            try:                # the slow reader takes a byte a second
                slow.sock.settimeout(0.01)
                slow.sock.recv(1)
            except (socket.timeout, OSError):
                pass
            time.sleep(1)
    finally:
        for conn in (never, meta, slow):
            _hang_up(conn)
        for t in floods:
            t.join(timeout=30)
    for name, secs in closed.items():
        assert secs >= STALL_MS / 1000 - 0.2, "the %s was closed after %.1f s, before %d ms" % (
            name, secs, STALL_MS)
    return closed, peak


def settled_rss(pid, limit):
    """@pid's RSS once it is at most @limit KiB, or after 30 s."""
    deadline = time.monotonic() + 30
    while _rss_kib(pid) > limit and time.monotonic() < deadline:
        time.sleep(0.5)
    return _rss_kib(pid)


def test_stall_close_ms_closes_peers_that_do_not_read(fresh_cluster):
    """With stall_close_ms = 2000 in the metaserver's and the I/O servers'
    config files (and the I/O servers' read-ahead cache off, so their RSS is
    what connections hold, not a cache filling up): a client that sends 2,000
    pipelined 1 MiB READs to an I/O server and never reads, one that takes its
    READ replies a byte a second, and one that sends 20,000 READDIRs to the
    metaserver and never reads are each closed between 2 s and 55 s after
    they began (never at the 60 s default); meanwhile a normal client is
    served. Their memory comes back: after they are gone the I/O server's RSS
    is within 48 MiB of what it was before them (its READ buffer pool, 32 MiB,
    keeps buffers for reuse), and a second round of the same leaves it within
    8 MiB of where the first did."""
    c = fresh_cluster
    for i in range(c.n_io):
        restart_with_conf(c, c.ioserver_port(i), c.dir / ("ioserver-%d.conf" % i), "ioserver",
                          readahead_cache_mb=0)
    restart_with_conf(c, c.port, c.conf, "metaserver")
    c.wait_servers_up()
    p, data = striped_file(c)
    port, req, _ = read_setup(c, p, data)
    pid = listener_pid(port)
    d = c.mnt / "dir"
    d.mkdir()
    for i in range(100):        # READDIR replies of ~25 KiB
        (d / ("%03d-" % i + "n" * 240)).write_bytes(b"")
    ms = connect(c.port, client_secret(c))
    dino = ino_of(ms, c, d)
    ms.close()
    readdir = w.field_bytes(1, ROOT) + w.field_varint(2, dino) + w.field_varint(4, 1000)
    for _ in range(3):          # the baseline after normal use
        normal_client_works(c, p, data, "before the hostile clients")
    time.sleep(1)
    baseline = _rss_kib(pid)

    closed1, peak1 = hostile_round(c, p, data, port, pid, req, readdir)
    rss1 = settled_rss(pid, baseline + 48 * 1024)
    assert rss1 <= baseline + 48 * 1024, \
        ("I/O server RSS %d KiB 30 s after the hostile clients were closed: baseline %d KiB "
         "+ 48 MiB allowed (%d KiB at most while they were there)" % (rss1, baseline, peak1))
    closed2, peak2 = hostile_round(c, p, data, port, pid, req, readdir)
    rss2 = settled_rss(pid, rss1 + 8 * 1024)
    assert rss2 <= rss1 + 8 * 1024, \
        ("I/O server RSS %d KiB after a second round of hostile clients, %d KiB after the "
         "first: their memory is not returned" % (rss2, rss1))
    logs = "".join(f.read_text(errors="replace") for f in c.logs.glob("restart-*.log"))
    assert "has not read its replies" in logs, "no server logged a stalled peer it closed"
    assert listener_pid(port) == pid, "the I/O server restarted"
    normal_client_works(c, p, data, "after the hostile clients were closed")
    print("stall close: %s | %s; I/O server RSS KiB: baseline %d, peak %d, after %d, "
          "second peak %d, after %d" % (
              ", ".join("%s %.1f s" % kv for kv in closed1.items()),
              ", ".join("%s %.1f s" % kv for kv in closed2.items()),
              baseline, peak1, rss1, peak2, rss2))


def test_stall_close_ms_is_validated_and_documented(tmp_path):
    """Both servers list stall_close_ms in --help (option and config key) and
    refuse values outside 1000-86400000 ms with exit status 2, naming the key."""
    for prog, section in (("rdfs-metaserver", "metaserver"), ("rdfs-ioserver", "ioserver")):
        out = run([BIN / prog, "--help"]).stdout
        assert "--stall-close-ms" in out and "stall_close_ms" in out, prog
        for bad in ("999", "86400001", "-1", "soon"):
            conf = tmp_path / ("%s-%s.conf" % (prog, bad))
            conf.write_text("[%s]\nstall_close_ms = %s\n" % (section, bad))
            for argv in (["--config", conf], ["--config", "/dev/null", "--stall-close-ms", bad]):
                r = run([BIN / prog] + argv + ["--db" if section == "metaserver" else "--volume",
                                               tmp_path / "none"], check=False, timeout=30)
                assert r.returncode == 2 and "stall_close_ms" in r.stderr, \
                    "%s %s: exit %d, %r" % (prog, argv, r.returncode, r.stderr)
