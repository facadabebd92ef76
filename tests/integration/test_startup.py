# SPDX-License-Identifier: MIT
"""A restarted metaserver waits for its I/O servers before it allocates.

Issue 12, hole 7: for about 2 s after a restart the metaserver answered
allocations before its I/O servers had registered again: writes failed with
EIO (leaving empty files) or were striped over the first server back. Now it
tells clients to retry (EAGAIN, retried by the client library for up to its
reconnect wait) until every known server is back or --startup-wait has passed.
"""
import os
import re
import signal
import threading

from conftest import MiB, assert_bytes_equal, listener_pid


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
