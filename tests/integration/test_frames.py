# SPDX-License-Identifier: MIT
"""Hostile input on every port: garbage, truncated, oversized frames, bad secrets,
forged capabilities. Afterwards the servers must still serve a real client."""
import os
import re
import errno
import random
import socket


import rdfswire as w
from conftest import BIN, MiB, assert_bytes_equal, drop_cache, run


def still_serving(c):
    p = c.mnt / ("alive-%s" % os.urandom(4).hex())
    data = os.urandom(3 * MiB)
    with open(p, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    drop_cache(p)
    assert_bytes_equal(data, p.read_bytes(), "file written after the attack")
    assert p.name in os.listdir(c.mnt)
    out = c.rdfs("status").stdout
    for i in range(c.n_io):
        assert re.search(r"(tcp|rdma)://\S+:%d\b" % c.ioserver_port(i), out), out


def send_and_close(port, payload, shutdown_write=True):
    """Send @payload; return what the server did ('closed', error status, or data)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        try:
            s.sendall(payload)
            if shutdown_write:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        except OSError as e:
            # the server reset the connection before our shutdown got to it
            if e.errno == errno.ENOTCONN:
                return "closed"
            raise
        got = b""
        try:
            while len(got) < 1 << 20:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except (socket.timeout, ConnectionResetError):
            pass
        return got
    finally:
        s.close()


def unauthenticated_payloads():
    rnd = random.Random(1234)
    return {
        "garbage": bytes(rnd.getrandbits(8) for _ in range(65536)),
        "zeros": bytes(4096),
        "bad magic": w.frame(w.OP_PING, magic=0xDEADBEEF),
        "bad version": w.frame(w.OP_PING, version=99),
        "bad opcode": w.frame(999 & 0xFFFF),
        "truncated header": w.frame(w.OP_PING)[:10],
        "truncated body": w.frame(w.OP_AUTH_RESPONSE, b"x" * 10, body_len=1000),
        "oversized body": w.frame(w.OP_AUTH_RESPONSE, body_len=0xFFFFFFFF),
        "oversized data": w.frame(w.OP_AUTH_RESPONSE, data_len=w.MAX_DATA + 1),
        "request before auth": w.frame(w.OP_STATFS, b""),
        "garbage auth response": w.frame(w.OP_AUTH_RESPONSE, bytes(rnd.getrandbits(8) for _ in range(200))),
    }


def test_garbage_before_authentication(fresh_cluster):
    c = fresh_cluster
    for port in c.ports():
        for name, payload in unauthenticated_payloads().items():
            got = send_and_close(port, payload)
            # Whatever the server sent, beyond its challenge, is an error, never a success.
            off = 0
            while isinstance(got, bytes) and len(got) - off >= w.HDR_LEN:
                magic, _, flags, op, status, _, blen, dlen = w.HDR.unpack(got[off:off + w.HDR_LEN])
                assert magic == w.MAGIC, "port %d sent a frame with bad magic" % port
                assert op == w.OP_AUTH_CHALLENGE or status < 0, \
                    "port %d answered %r with opcode %d status %d" % (port, name, op, status)
                off += w.HDR_LEN + blen + dlen
        # Many connections that go away at once.
        socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(50)]
        for s in socks:
            s.close()
    still_serving(c)


def authed(port, secret):
    conn = w.Conn(port)
    res = w.authenticate(conn, secret)
    assert res == "accepted", "authentication with the right secret failed on port %d: %r" % (port, res)
    return conn


def test_garbage_after_authentication(fresh_cluster):
    c = fresh_cluster
    secret = w.load_secret(c.secret)
    rnd = random.Random(99)
    for port in c.ports():
        ops = w.METASERVER_OPS if port == c.port else w.IOSERVER_OPS
        # Random bodies for every opcode: an error reply or a closed connection, never a crash.
        conn = authed(port, secret)
        for op in ops + [5, 100, 127]:
            for n in (1, 7, 64, 1000):
                body = bytes(rnd.getrandbits(8) for _ in range(n))
                try:
                    conn.send(w.frame(op, body, tag=rnd.getrandbits(32)))
                    res = conn.closed_or_error()
                except (BrokenPipeError, ConnectionResetError):
                    res = "closed"
                assert res == "closed" or isinstance(res, tuple), \
                    "port %d, opcode %d, %d random body bytes: %s" % (port, op, n, res)
                if res == "closed":
                    conn = authed(port, secret)
        conn.close()
        # Lengths over the limits, and a body cut short.
        for payload in (w.frame(w.OP_GETATTR, body_len=w.MAX_BODY + 1),
                        w.frame(w.OP_WRITE, data_len=w.MAX_DATA + 1),
                        w.frame(w.OP_GETATTR, b"\x08", body_len=500),
                        w.frame(w.OP_GETATTR, magic=0)):
            conn = authed(port, secret)
            try:
                conn.send(payload)
                conn.sock.shutdown(socket.SHUT_WR)
                res = conn.closed_or_error()
            except (BrokenPipeError, ConnectionResetError):
                res = "closed"
            assert res == "closed" or (isinstance(res, tuple) and res[0] == "error"), \
                "port %d accepted a bad frame: %r" % (port, res)
            conn.close()
    still_serving(c)


def test_wrong_secret_is_refused_on_every_port(fresh_cluster):
    c = fresh_cluster
    bad = os.urandom(32).hex().encode()
    for port in c.ports():
        conn = w.Conn(port)
        res = w.authenticate(conn, bad)
        assert res == "closed" or (isinstance(res, tuple) and res[0] == "error"), \
            "port %d answered a wrong secret with %r" % (port, res)
        # Whatever we send now gets no successful reply.
        try:
            conn.send(w.frame(w.OP_STATFS if port == c.port else w.OP_VOLUME_INFO, b""))
            res = conn.closed_or_error(timeout=10)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            res = "closed"
        # Silence is fine too: the peer gets nothing.
        assert not (isinstance(res, tuple) and res[0] == "ok"), \
            "port %d served after bad auth: %r" % (port, res)
        conn.close()
    still_serving(c)


def test_rdfs_status_with_wrong_secret_fails_clearly(cluster, tmp_path):
    bad_secret = tmp_path / "bad-secret"
    bad_secret.write_text(os.urandom(32).hex() + "\n")
    os.chmod(bad_secret, 0o600)
    conf = tmp_path / "bad.conf"
    conf.write_text("[cluster]\nmetaserver = %s\nsecret_file = %s\n" % (cluster.url, bad_secret))
    p = run([BIN / "rdfs", "--config", conf, "status"], check=False, timeout=120)
    assert p.returncode != 0, "rdfs status succeeded with a wrong secret:\n" + p.stdout
    msg = (p.stdout + p.stderr).lower()
    assert "auth" in msg or "secret" in msg, "unclear error for a wrong secret: %r" % (p.stdout + p.stderr)
    # The right secret still works.
    assert cluster.rdfs("status").returncode == 0


def test_forged_capability_gets_no_data(fresh_cluster):
    c = fresh_cluster
    p = c.mnt / "secret-data"
    p.write_bytes(b"S" * 8192)
    secret = w.load_secret(c.secret)
    for i in range(c.n_io):
        conn = authed(c.ioserver_port(i), secret)
        for sid in range(0, 4):
            rng = w.field_varint(1, 0) + w.field_varint(2, 1 << 20)
            cap = (w.field_varint(1, sid) + w.field_varint(2, 1) + w.field_varint(3, 3)
                   + w.field_varint(4, (1 << 62)) + w.field_bytes(5, rng)
                   + w.field_bytes(6, os.urandom(32)))
            req = (w.field_bytes(1, cap) + w.field_varint(2, 0) + w.field_varint(3, 2)
                   + w.field_varint(5, 8192))
            conn.send(w.frame(w.OP_READ, req, tag=sid + 1))
            conn.sock.settimeout(10)
            hdr, body, data = conn.recv_frame()
            assert hdr["status"] < 0, "forged capability read was served (server id %d)" % sid
            assert data == b"", "data came back with a forged capability"
            # A WRITE without a capability at all.
            conn.send(w.frame(w.OP_WRITE, w.field_varint(2, 0) + w.field_varint(3, 1)
                              + w.field_varint(5, 4096), data=b"X" * 4096, tag=100 + sid))
            hdr, body, data = conn.recv_frame()
            assert hdr["status"] < 0, "write without a capability was accepted"
        conn.close()
    drop_cache(p)
    assert p.read_bytes() == b"S" * 8192
    still_serving(c)
