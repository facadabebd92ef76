# SPDX-License-Identifier: MIT
"""Hostile peers that hold on instead of flooding (issue 12, isolation): thousands
of idle connections, a server at its open-file limit, slowloris peers that send
a frame a byte a second, a reader that takes an I/O server's replies a byte a
second, and a peer that never reads its replies at all. In every case a normal
client's metadata calls and READs are answered (correctness checks with
generous timeouts, not speed tests), and the server applies its rules:

  - a peer that has not authenticated within 10 s is closed (lib/rpc_server.c,
    RPC_HANDSHAKE_MS), whatever it sends meanwhile;
  - a peer beyond the server's open-file limit is accepted and closed at once
    (lib/xport_tcp.c, the listener's spare descriptor), and the server serves
    again once descriptors are free;
  - an authenticated client is never closed for being idle or slow to send
    (clients send no keepalive of their own): it costs one descriptor;
  - a peer whose queued replies do not shrink for `stall_close_ms` (60 s by
    default, a config key of both servers) is closed, and its memory returned.
"""
import os
import resource
import select
import socket
import stat
import threading
import time

import pytest

import rdfswire as w
from conftest import (BIN, MiB, assert_bytes_equal, drop_cache, listener_pid, plain_wire, run,
                      wait_until)
from test_trust import (_flood, _hang_up, _rss_kib, cap_for_extent, client_secret,
                        connect, getattr_, ino_of, io_read_req, ioserver_ports, layout,
                        write_file)

pytestmark = plain_wire("opens raw TCP connections to the servers' ports")

ROOT = w.cred(0, 0)
HANDSHAKE_S = 10            # RPC_HANDSHAKE_MS
TCP_ESTABLISHED = 0x01


# ------------------------------------------------------------------ helpers
def raise_nofile(n):
    """Let this process hold @n more descriptors (soft limit up to the hard one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = len(os.listdir("/proc/self/fd")) + n + 256
    if soft >= want:
        return
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip("RLIMIT_NOFILE hard limit %d < %d descriptors this test needs" % (hard, want))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def server_nofile(pid):
    """(soft, hard) open-file limit of process @pid."""
    return resource.prlimit(pid, resource.RLIMIT_NOFILE)


def server_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def make_room(pid, n):
    """Let server @pid take @n more connections: raise its soft limit if it is short."""
    soft, hard = server_nofile(pid)
    want = server_fds(pid) + n + 256
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip("server %d: RLIMIT_NOFILE hard limit %d < %d" % (pid, hard, want))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (want, hard))


def cpu_seconds(pid):
    """User + system CPU time process @pid has used."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def silent_connections(port, n):
    """@n connections to @port that never send a byte (non-blocking sockets), and
    when each was connected (time.monotonic())."""
    socks, when = [], {}
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.setblocking(False)
        when[s] = time.monotonic()
        socks.append(s)
    return socks, when


def none_closed_early(socks, when, port):
    """Every one of @socks connected less than the handshake timeout ago is open."""
    states = tcp_states()
    now = time.monotonic()
    young = [s for s in socks if now - when[s] < HANDSHAKE_S - 0.5]
    early = [s for s in young if not still_open(s, port, states)]
    assert not early, "port %d closed %d of %d connections younger than %d s" % (
        port, len(early), len(young), HANDSHAKE_S)
    return len(young)


def drain_until_closed(socks, bound_s):
    """Read @socks (what the server sends: its AUTH_CHALLENGE) until the server
    closes each; returns (closed, {sock: bytes received}) after at most @bound_s."""
    got = {s.fileno(): b"" for s in socks}
    by_fd = {s.fileno(): s for s in socks}
    ep = select.epoll()
    for s in socks:
        ep.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
    closed = set()
    deadline = time.monotonic() + bound_s
    try:
        while len(closed) < len(socks) and time.monotonic() < deadline:
            for fd, _ in ep.poll(1.0):
                try:
                    b = by_fd[fd].recv(65536)
                except (ConnectionResetError, BrokenPipeError):
                    b = b""
                except BlockingIOError:
                    continue
                if b:
                    got[fd] += b
                else:
                    closed.add(fd)
                    ep.unregister(fd)
    finally:
        ep.close()
    return {by_fd[fd] for fd in closed}, {by_fd[fd]: v for fd, v in got.items()}


def first_opcode(b):
    """The opcode of the first frame in @b, or None."""
    if len(b) < w.HDR_LEN:
        return None
    return w.HDR.unpack(b[:w.HDR_LEN])[3]


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


# ------------------------------------------------------------------ idle at scale
IDLE = 2000


def test_thousands_of_idle_connections(fresh_cluster):
    """2,000 authenticated connections that then say nothing, and 2,000 that
    never say a word, on the metaserver and on an I/O server at once (8,000
    sockets; RLIMIT_NOFILE raised here and, if short, in the servers). While
    they are all connected a normal client is served (wire metadata and READs
    on new connections, a file written and read back through the mount). Every
    silent one is closed by the server after its AUTH_CHALLENGE, 10 s after it
    connected (not before: it was let be until then); every authenticated one
    stays open and answers a PING; once they are gone, the servers hold about
    as many descriptors as before."""
    c = fresh_cluster
    p, data = striped_file(c)
    io_port = c.ioserver_port(0)
    pids = {port: listener_pid(port) for port in (c.port, io_port)}
    raise_nofile(4 * IDLE)
    for pid in pids.values():
        make_room(pid, 2 * IDLE)
    before = {port: server_fds(pid) for port, pid in pids.items()}
    print("RLIMIT_NOFILE: test %r, servers %r" % (
        resource.getrlimit(resource.RLIMIT_NOFILE),
        {port: server_nofile(pid) for port, pid in pids.items()}))
    key = client_secret(c)
    authed, silent, when = {}, {}, {}
    try:
        for port in pids:
            authed[port] = [connect(port, key) for _ in range(IDLE)]
        for port in pids:
            silent[port], when[port] = silent_connections(port, IDLE)
        for port in pids:
            none_closed_early(silent[port], when[port], port)
        for port, pid in pids.items():
            assert server_fds(pid) >= before[port] + 2 * IDLE * 9 // 10, \
                "server on port %d holds %d descriptors, not the ~%d connections" % (
                    port, server_fds(pid), 2 * IDLE)
        normal_client_works(c, p, data, "with %d idle connections on each server" % (2 * IDLE))
        for port in pids:
            none_closed_early(silent[port], when[port], port)
            closed, got = drain_until_closed(silent[port], 4 * HANDSHAKE_S + 60)
            assert len(closed) == IDLE, \
                "port %d: %d of %d connections that never authenticated were closed " \
                "within %d s" % (port, len(closed), IDLE, 4 * HANDSHAKE_S + 60)
            ops = {first_opcode(b) for b in got.values()}
            assert ops == {w.OP_AUTH_CHALLENGE}, "port %d sent silent peers %r" % (port, ops)
        states = tcp_states()
        for port in pids:
            gone = [x for x in authed[port] if not still_open(x.sock, port, states)]
            assert not gone, "port %d closed %d idle authenticated connections" % (port,
                                                                                   len(gone))
            for x in authed[port][::100]:
                assert w.call(x, w.OP_PING)[0] == 0
    finally:
        for port in authed:
            for x in authed[port]:
                x.close()
        for port in silent:
            for s in silent[port]:
                s.close()
    for port, pid in pids.items():
        wait_until(lambda: server_fds(pid) <= before[port] + 50,
                   "server on port %d to close the idle connections (%d descriptors before)"
                   % (port, before[port]))
        assert listener_pid(port) == pid, "the server on port %d restarted" % port
    normal_client_works(c, p, data, "after the idle connections")


def test_server_at_its_open_file_limit(fresh_cluster):
    """Each server, its RLIMIT_NOFILE lowered (prlimit) to 200 above what it
    holds, gets 600 connections that never authenticate. About 200 get an
    AUTH_CHALLENGE; the others are accepted and closed at once, without one
    (the listener's spare descriptor), and the server logs it instead of
    spinning (it uses under half a CPU second a second) or dying. The mount's established connections are served
    meanwhile; once the handshake timeout has closed the silent ones, new
    connections are served again."""
    c = fresh_cluster
    p, data = striped_file(c)
    extra, n = 200, 600
    raise_nofile(2 * n)
    ports = [c.port, c.ioserver_port(0)]
    pids = {port: listener_pid(port) for port in ports}
    limits = {port: server_nofile(pid) for port, pid in pids.items()}
    silent = {}
    try:
        for port, pid in pids.items():
            resource.prlimit(pid, resource.RLIMIT_NOFILE,
                             (server_fds(pid) + extra, limits[port][1]))
        for port in ports:
            silent[port], _ = silent_connections(port, n)
        # level-triggered, a listener that cannot accept would spin: it idles
        cpu = {port: cpu_seconds(pid) for port, pid in pids.items()}
        time.sleep(2)
        for port, pid in pids.items():
            used = cpu_seconds(pid) - cpu[port]
            assert used < 1, "the server on port %d used %.1f s of CPU in 2 s at its " \
                "open-file limit, idle otherwise" % (port, used)
        # the mount's connections are open already: it reads and writes on
        drop_cache(p)
        assert_bytes_equal(data, p.read_bytes(), "file read at the servers' open-file limit")
        for port in ports:
            closed, got = drain_until_closed(silent[port], 4 * HANDSHAKE_S + 60)
            assert len(closed) == n, "port %d: %d of %d connections closed" % (
                port, len(closed), n)
            challenged = sum(1 for b in got.values() if first_opcode(b) == w.OP_AUTH_CHALLENGE)
            dropped = sum(1 for b in got.values() if b == b"")
            assert challenged + dropped == n, "port %d sent something else" % port
            assert challenged <= extra and dropped >= n - extra - 10, \
                "port %d at its limit: %d challenged, %d dropped at once" % (
                    port, challenged, dropped)
            print("port %d at its open-file limit: %d of %d connections challenged, %d "
                  "dropped at once" % (port, challenged, n, dropped))
            assert listener_pid(port) == pids[port], "the server on port %d died" % port
    finally:
        for port in silent:
            for s in silent[port]:
                s.close()
        for port, pid in pids.items():
            if listener_pid(port) == pid:
                resource.prlimit(pid, resource.RLIMIT_NOFILE, limits[port])
    logs = "".join(f.read_text(errors="replace") for f in (c.dir / "log").glob("*.log"))
    assert "Too many open files; dropped a connection" in logs, \
        "no server logged the connections it dropped at its limit"
    normal_client_works(c, p, data, "after the open-file limit")


# ------------------------------------------------------------------ slowloris
def dribble(sock, payload, stop_after_s, interval=1.0):
    """Send @payload a byte per @interval until it is sent, the peer closes, or
    @stop_after_s pass: (bytes sent, seconds, 'closed' or 'sent' or 'gave up')."""
    t0 = time.monotonic()
    for i in range(len(payload)):
        if time.monotonic() - t0 > stop_after_s:
            return i, time.monotonic() - t0, "gave up"
        try:
            sock.send(payload[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            return i, time.monotonic() - t0, "closed"
        # the server's close shows as EOF or a reset before our next byte
        r, _, _ = select.select([sock], [], [], interval)
        if r:
            try:
                if sock.recv(65536, socket.MSG_PEEK) == b"":
                    return i + 1, time.monotonic() - t0, "closed"
            except ConnectionResetError:
                return i + 1, time.monotonic() - t0, "closed"
    return len(payload), time.monotonic() - t0, "sent"


def test_slowloris_peers(fresh_cluster):
    """On the metaserver and an I/O server at once: a peer that takes the
    AUTH_CHALLENGE and sends its AUTH_RESPONSE a byte a second is closed by the
    handshake timeout (10 s after it connected, long before its AUTH_RESPONSE
    is in); a peer that authenticated and then sends a PING a byte every half
    second (12 s: past the handshake's timeout) is not closed (no rule closes a
    client for sending slowly) and gets its PING answered once the 24 bytes are
    in, the frame put together right. All the while a normal client is served,
    again and again."""
    c = fresh_cluster
    p, data = striped_file(c)
    key = client_secret(c)
    ports = [c.port, c.ioserver_port(0)]
    results = {}

    def preauth(port):
        conn = w.Conn(port, timeout=30)
        t0 = time.monotonic()
        try:
            hdr, body, _ = conn.recv_frame()
            assert hdr["opcode"] == w.OP_AUTH_CHALLENGE
            resp = w.field_bytes(1, os.urandom(32)) + w.field_bytes(2, os.urandom(32)) \
                + w.field_bytes(3, "client")
            sent, _, how = dribble(conn.sock, w.frame(w.OP_AUTH_RESPONSE, resp, tag=hdr["tag"]),
                                   HANDSHAKE_S * 4)
            results[("preauth", port)] = (sent, time.monotonic() - t0, how)
        finally:
            conn.close()

    def authed(port):
        conn = connect(port, key, timeout=60)
        t0 = time.monotonic()
        try:
            sent, _, how = dribble(conn.sock, w.frame(w.OP_PING, tag=4242), 60, interval=0.5)
            reply = None
            if how == "sent":
                conn.sock.settimeout(30)
                reply, _, _ = conn.recv_frame()
            results[("authed", port)] = (sent, time.monotonic() - t0, how, reply)
        finally:
            conn.close()

    threads = [threading.Thread(target=f, args=(port,), daemon=True)
               for port in ports for f in (preauth, authed)]
    for t in threads:
        t.start()
    rounds = 0
    while any(t.is_alive() for t in threads) and rounds < 100:
        normal_client_works(c, p, data, "while slowloris peers dribble (round %d)" % rounds)
        rounds += 1
        time.sleep(1)
    for t in threads:
        t.join(120)
    assert rounds >= 2, rounds
    for port in ports:
        sent, elapsed, how = results[("preauth", port)]
        assert how == "closed", \
            "port %d: a peer sending its AUTH_RESPONSE a byte a second: %s after %d bytes, " \
            "%.1f s" % (port, how, sent, elapsed)
        assert elapsed >= HANDSHAKE_S - 0.5, \
            "port %d closed the slow handshake after %.1f s, before its %d s" % (
                port, elapsed, HANDSHAKE_S)
        sent, elapsed, how, reply = results[("authed", port)]
        assert how == "sent" and reply is not None, \
            "port %d: an authenticated peer sending a PING a byte per 0.5 s: %s after %d " \
            "bytes, %.1f s" % (port, how, sent, elapsed)
        assert elapsed > HANDSHAKE_S, elapsed   # it outlasted what a handshake may take
        assert (reply["opcode"], reply["tag"], reply["status"], reply["flags"] & w.FLAG_REPLY) \
            == (w.OP_PING, 4242, 0, w.FLAG_REPLY), "port %d: %r" % (port, reply)


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


def test_reader_at_one_byte_a_second(fresh_cluster):
    """A client sends 64 pipelined 1 MiB READs to an I/O server and takes its
    replies one byte a second (default config: it stays connected). For 12 s,
    other clients' READs at that server (new connections, right bytes) and
    the mount are answered; what the slow reader got is the start of its
    first reply, a READ reply frame."""
    c = fresh_cluster
    p, data = striped_file(c)
    key = client_secret(c)
    port, req, want = read_setup(c, p, data)
    slow = slow_reader(port, key, req, 64)
    t0 = time.monotonic()
    got = b""
    try:
        t_end = time.monotonic() + 12
        rounds = 0
        while time.monotonic() < t_end:
            slow.sock.settimeout(30)
            got += slow.sock.recv(1)
            conn = connect(port, key)
            try:
                status, _, d = conn.request(w.OP_READ, req, timeout=30)
            finally:
                conn.close()
            assert status == 0, "a READ while another client reads a byte a second: %d" % status
            assert_bytes_equal(want, d, "a READ while another client reads a byte a second")
            if rounds % 4 == 0:
                normal_client_works(c, p, data, "while a client reads a byte a second")
            rounds += 1
            time.sleep(1)
        if time.monotonic() - t0 < 55:      # stall_close_ms: 60 s by default
            assert still_open(slow.sock, port), \
                "the slow reader was closed before the default stall_close_ms"
    finally:
        _hang_up(slow)
    assert len(got) >= 4 and got[:4] == w.HDR.pack(w.MAGIC, 0, 0, 0, 0, 0, 0, 0)[:4], got
    assert rounds >= 5, rounds


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
    assert "bytes of its replies in" in logs, "no server logged a stalled peer it closed"
    assert listener_pid(port) == pid, "the I/O server restarted"
    normal_client_works(c, p, data, "after the hostile clients were closed")
    print("stall close: %s | %s; I/O server RSS KiB: baseline %d, peak %d, after %d, "
          "second peak %d, after %d" % (
              ", ".join("%s %.1f s" % kv for kv in closed1.items()),
              ", ".join("%s %.1f s" % kv for kv in closed2.items()),
              baseline, peak1, rss1, peak2, rss2))


def test_a_reader_that_takes_a_trickle_is_closed(fresh_cluster):
    """With stall_close_ms = 2000 at the I/O servers: a client with 64 pipelined
    1 MiB READs that takes 16 KiB of its replies every second (a quarter of the
    64 KiB/s the servers ask of a peer they keep buffers for) is closed within
    30 s; a client reading 64 pipelined READs at full speed beside it gets every
    reply."""
    c = fresh_cluster
    for i in range(c.n_io):
        restart_with_conf(c, c.ioserver_port(i), c.dir / ("ioserver-%d.conf" % i), "ioserver")
    c.wait_servers_up()
    p, data = striped_file(c)
    port, req, want = read_setup(c, p, data)
    key = client_secret(c)
    trickle = slow_reader(port, key, req, 64)
    fast = w.Conn(port, timeout=30)
    assert w.authenticate(fast, key) == "accepted"
    fast.send(b"".join(w.frame(w.OP_READ, req, tag=i + 1) for i in range(64)))
    replies = []

    def read_fast():
        fast.sock.settimeout(30)
        parts = {}
        while len(replies) < 64:
            hdr, _, d = fast.recv_frame()
            parts[hdr["tag"]] = parts.get(hdr["tag"], b"") + d
            if not hdr["flags"] & w.FLAG_MORE:
                replies.append((hdr["status"], parts.pop(hdr["tag"]) == want))
    reader = threading.Thread(target=read_fast, daemon=True)
    reader.start()
    t0 = time.monotonic()
    took, closed_after = 0, None
    try:
        while closed_after is None and time.monotonic() - t0 < 30:
            t_read = time.monotonic()
            if not still_open(trickle.sock, port):
                closed_after = t_read - t0
                break
            got = 0
            while got < (16 << 10) and time.monotonic() - t_read < 0.5:
                try:
                    trickle.sock.settimeout(0.1)
                    got += len(trickle.sock.recv((16 << 10) - got))
                except (socket.timeout, OSError):
                    pass
            took += got
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t_read)))
        reader.join(timeout=60)
    finally:
        _hang_up(trickle)
        _hang_up(fast)
    assert closed_after is not None, \
        "a reader taking 16 KiB/s (%d bytes in 30 s) is still connected" % took
    assert closed_after >= STALL_MS / 1000 - 0.2, closed_after
    assert took > 0, "the trickle reader took nothing: not the case this test is about"
    assert replies == [(0, True)] * 64, "the full-speed reader's replies: %r" % replies[:5]
    normal_client_works(c, p, data, "after the trickle reader was closed")


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
