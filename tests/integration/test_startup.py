# SPDX-License-Identifier: MIT
"""A restarted metaserver waits for its I/O servers before it allocates, and
before it hands out layouts of blocks on servers not back yet.

Issue 12, hole 7: for about 2 s after a restart the metaserver answered
allocations before its I/O servers had registered again: writes failed with
EIO (leaving empty files) or were striped over the first server back. Now it
tells clients to retry (EAGAIN, retried by the client library for up to its
reconnect wait) until every known server is back or --startup-wait has passed.
The same holds for a read: LAYOUT of a range with blocks on a server that has
not registered again is -EAGAIN during the wait (docs/PROTOCOL.md, "Startup").
"""
import errno
import os
import re
import signal
import threading
import time

import rdfswire as w
from conftest import MiB, assert_bytes_equal, listener_pid, plain_wire, wait_until
from test_trust import client_secret, connect, ino_of, layout, server_list


def server_ids_of(cluster, path):
    """The I/O server ids in `rdfs layout PATH`'s extent lines."""
    out = cluster.rdfs("layout", path).stdout
    ids = set()
    for line in out.splitlines():
        cols = line.split()
        # extent lines: OFFSET LENGTH SERVER BLOCK STATE (numbers first)
        if len(cols) >= 4 and all(re.fullmatch(r"\d+", x) for x in cols[:4]):
            ids.add(int(cols[2]))
    assert ids, "no extents in:\n" + out
    return ids


def test_write_after_metaserver_restart_waits_for_every_ioserver(fresh_cluster):
    c = fresh_cluster
    data = os.urandom(8 * MiB)          # 8 chunks: striped over both servers
    io1 = listener_pid(c.ioserver_port(1))
    assert io1
    saved = c.kill9(c.port)
    # the second I/O server cannot register again until it is let go
    os.kill(io1, signal.SIGSTOP)
    result = {}
    try:
        c.restart(saved)

        def writer():
            try:
                with open(c.mnt / "after-restart", "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                result["ok"] = True
            except OSError as e:
                result["err"] = e

        t = threading.Thread(target=writer)
        t.start()
        t.join(3)
        # still waiting (told to retry), not failed and not written to one server only
        assert "err" not in result, "write failed while an I/O server re-registered: %r" % (
            result["err"],)
    finally:
        os.kill(io1, signal.SIGCONT)
    t.join(120)
    assert not t.is_alive(), "the write never finished after the I/O server came back"
    assert result.get("ok"), "write failed: %r" % (result.get("err"),)
    with open(c.mnt / "after-restart", "rb") as f:
        assert_bytes_equal(data, f.read(), "file written across a metaserver restart")
    assert server_ids_of(c, "/after-restart") == {1, 2}, \
        "allocation striped over the servers that were back first, not all of them"


# ------------------------------------------------------------------ the read path
EAGAIN = -errno.EAGAIN


def chunk_servers(c, p, size):
    """[(offset, length, server id)] of @p's extents, from a LAYOUT over the wire."""
    conn = connect(c.port, client_secret(c))
    try:
        status, lay = layout(conn, ino_of(conn, c, p), size, w.cred(0, 0))
    finally:
        conn.close()
    assert status == 0, "LAYOUT of %s: %d" % (p, status)
    return [(e["offset"], e["length"], e["server"]) for e in lay["extents"]]


def layout_status(c, ino, offset, length):
    """(status, Error message) of a LAYOUT (no allocation) of [offset, offset + length)."""
    conn = connect(c.port, client_secret(c))
    try:
        body = (w.field_bytes(1, w.cred(0, 0)) + w.field_varint(2, ino) + w.field_varint(3, offset)
                + w.field_varint(4, length))
        status, rbody = w.call(conn, w.OP_LAYOUT, body)
    finally:
        conn.close()
    return status, (w.decode(rbody).get(1, [b""])[0].decode() if status < 0 else "")


def up_ids(c):
    conn = connect(c.port, client_secret(c))
    try:
        return {s["id"] for s in server_list(conn) if s["up"]}
    finally:
        conn.close()


def read_in_thread(path, offset, length, result):
    def reader():
        t0 = time.monotonic()
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                result["data"] = f.read(length)
        except OSError as e:
            result["err"] = e
        result["secs"] = time.monotonic() - t0
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    return t


def setup_restart(c, size):
    """A file of @size bytes striped over both I/O servers; the I/O server port
    holding its second chunk, which will not come back with the metaserver, and
    what LAYOUT said of each chunk."""
    data = os.urandom(size)
    p = c.mnt / "striped"
    with open(p, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    chunks = chunk_servers(c, p, size)
    assert len({sid for _, _, sid in chunks}) == 2, chunks
    conn = connect(c.port, client_secret(c))
    try:
        ino = ino_of(conn, c, p)
        ports = {s["id"]: int(s["url"].rsplit(":", 1)[1]) for s in server_list(conn)}
    finally:
        conn.close()
    late = chunks[1][2]
    return p, data, ino, chunks, late, ports[late]


@plain_wire("asks the metaserver for LAYOUTs over the wire")
def test_read_after_metaserver_restart_waits_for_its_ioservers(fresh_cluster):
    """After a metaserver restart, with one I/O server held (SIGSTOP) so it
    cannot register again: LAYOUT of a chunk on the server that is back is
    answered, LAYOUT of one on the held server is -EAGAIN ("not now"), and a
    read of the whole file through a mount made after the restart (no cached
    layout) waits instead of failing. Once the server goes on and registers,
    the read returns the file's bytes and the LAYOUT is answered."""
    c = fresh_cluster
    size = 8 * MiB
    p, data, ino, chunks, late, late_port = setup_restart(c, size)
    held = listener_pid(late_port)
    saved = c.kill9(c.port)
    os.kill(held, signal.SIGSTOP)
    result = {}
    t = None
    try:
        c.restart(saved)
        early = {sid for _, _, sid in chunks} - {late}
        wait_until(lambda: early <= up_ids(c), "the I/O server not held to register again")
        assert late not in up_ids(c)
        for off, length, sid in chunks[:2]:
            status, msg = layout_status(c, ino, off, length)
            if sid == late:
                assert status == EAGAIN and "not now" in msg, \
                    "LAYOUT of a chunk on server %d, not registered again: %d (%r)" % (
                        sid, status, msg)
            else:
                assert status == 0, "LAYOUT of a chunk on server %d, up: %d (%s)" % (
                    sid, status, msg)
        mnt2 = c.mount_second(c.dir / "mnt2")
        t = read_in_thread(mnt2 / p.name, 0, size, result)
        t.join(3)
        assert "err" not in result, "read failed while an I/O server re-registered: %r" % (
            result["err"],)
        assert t.is_alive(), "the read returned while an I/O server holding the file was held"
    finally:
        os.kill(held, signal.SIGCONT)
    t.join(120)
    assert not t.is_alive(), "the read never finished after the I/O server came back"
    assert "err" not in result, "read failed: %r" % (result.get("err"),)
    assert_bytes_equal(data, result["data"], "file read across a metaserver restart")
    c.wait_servers_up()
    for off, length, _ in chunks:
        assert layout_status(c, ino, off, length)[0] == 0


STARTUP_WAIT_S = 4


@plain_wire("asks the metaserver for LAYOUTs over the wire")
def test_read_when_the_startup_wait_runs_out(fresh_cluster):
    """After a metaserver restart with --startup-wait 4 while an I/O server
    holding part of a file is dead (SIGKILL, not restarted): a read of that
    part, issued during the wait, is retried while the wait lasts and then
    fails with EIO (the client's error for a server that is down), within a
    bounded time, not a hang; LAYOUT of the part is -EAGAIN while the wait
    lasts (when this test is quick enough to ask it then) and answered after
    it. The part on the server that is up reads right all along. Once the
    dead server is started again the whole file reads back."""
    c = fresh_cluster
    size = 8 * MiB
    p, data, ino, chunks, late, late_port = setup_restart(c, size)
    dead = c.kill9(late_port)
    saved = c.kill9(c.port)
    saved["argv"] = saved["argv"] + ["--startup-wait", str(STARTUP_WAIT_S)]
    t0 = time.monotonic()
    c.restart(saved)
    off_late, len_late, _ = chunks[1]
    status, msg = layout_status(c, ino, off_late, len_late)
    if time.monotonic() - t0 < STARTUP_WAIT_S - 1:
        assert status == EAGAIN and "not now" in msg, \
            "LAYOUT of a chunk on a dead server during the startup wait: %d (%r)" % (status, msg)
    mnt2 = c.mount_second(c.dir / "mnt2")
    result = {}
    t = read_in_thread(mnt2 / p.name, off_late, len_late, result)
    t.join(120)
    assert not t.is_alive(), "a read of a dead server's chunk hangs after the startup wait"
    err = result.get("err")
    assert err is not None and err.errno == errno.EIO, \
        "read of a dead server's chunk after the startup wait: %r, not EIO" % (
            err if err else "%d bytes" % len(result.get("data", b"")),)
    assert time.monotonic() - t0 >= STARTUP_WAIT_S - 0.5, \
        "the read failed after %.1f s, before the startup wait was over" % (
            time.monotonic() - t0)
    status, msg = layout_status(c, ino, off_late, len_late)
    assert status == 0, "LAYOUT after the startup wait: %d (%s)" % (status, msg)
    for off, length, sid in chunks:
        if sid != late:
            with open(mnt2 / p.name, "rb") as f:
                f.seek(off)
                assert_bytes_equal(data[off:off + length], f.read(length),
                                   "chunk at %d on the server that is up" % off)
    c.restart(dead)
    c.wait_servers_up()
    with open(mnt2 / p.name, "rb") as f:
        assert_bytes_equal(data, f.read(), "file after the dead server came back")
