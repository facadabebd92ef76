# SPDX-License-Identifier: MIT
"""Trust boundaries, attacked over the wire (rdfswire.py): what a peer holding the
cluster secret (any client node) must NOT be able to do, whatever it claims.

The holes, numbered as in the issue:
  1 takeover    a cluster-secret peer claiming "ioserver" re-registers a live
                volume at its own URL; keys, not the declared role, decide who
                is a server (the server key: HMAC(cap.key, "rdfs-server-key-v1"))
  3 squash      root squash applies to every client-key connection, not only to
                the literal role "client"
  4 write->read a write-only file gives capabilities that also read
  5 starvation  a client that never reads its socket stalls the servers for
                everyone else (and grows the metaserver without bound)
  6 NUL names   a name with an embedded NUL is cut at the NUL by the server
and the capability's holder binding (field 7 of Capability), which keeps a
capability usable only on a connection of the identity it was granted to.

Client nodes (`rdfs node`): a node's own key (claim "node:NAME:GEN") mounts,
carries the node's squash policy, is cut off by revoke and replaced by a new
generation, binds capabilities to that node, and gives no node administration.
"""
import errno
import hashlib
import hmac
import os
import pickle
import socket
import stat
import subprocess
import threading
import time

import pytest

import rdfswire as w
from conftest import (BIN, MiB, Cluster, _cluster_root, _remove, _stop, assert_bytes_equal,
                      drop_cache, fuse_only, listener_pid, run, wait_until)

NOBODY = 65534
MODE_FILE = stat.S_IFREG


# ------------------------------------------------------------------ helpers
def client_secret(c):
    return w.load_secret(c.secret)


def server_key(c):
    return w.server_key(w.load_secret(c.dir / "cap.key"))


def connect(port, key, claim="client", timeout=30.0):
    """An authenticated connection; fails the test if the handshake does not succeed."""
    conn = w.Conn(port, timeout=timeout)
    res = w.authenticate(conn, key, claim)
    assert res == "accepted", "handshake on port %d claiming %r: %r" % (port, claim, res)
    return conn


def first(msg, num, default=0):
    return msg.get(num, [default])[0]


def attr_of(body):
    """The Attr of an EntryReply/AttrReply body, as a dict."""
    a = w.decode(first(w.decode(body), 1, b""))
    return dict(ino=first(a, 1), mode=first(a, 2), uid=first(a, 4), gid=first(a, 5),
                size=first(a, 6))


def lookup(conn, parent, name, cr=None):
    status, body = w.call(conn, w.OP_LOOKUP, w.field_bytes(1, cr or w.cred(0, 0))
                          + w.field_varint(2, parent) + w.field_bytes(3, name))
    return status, (attr_of(body) if status == 0 else None)


def ino_of(conn, c, path):
    """The rdfs inode of @path (a path under the mount), by LOOKUPs from the root."""
    ino = w.ROOT_INO
    for part in path.relative_to(c.mnt).parts:
        status, a = lookup(conn, ino, part)
        assert status == 0, "LOOKUP %s in %s: status %d" % (part, path, status)
        ino = a["ino"]
    return ino


def getattr_(conn, ino, cr=None):
    status, body = w.call(conn, w.OP_GETATTR, w.field_bytes(1, cr or w.cred(0, 0))
                          + w.field_varint(2, ino))
    return status, (attr_of(body) if status == 0 else None)


def server_list(conn):
    """SERVER_LIST as a list of dicts (ServerInfo)."""
    status, body = w.call(conn, w.OP_SERVER_LIST)
    assert status == 0, "SERVER_LIST: status %d" % status
    out = []
    for s in w.decode(body).get(1, []):
        d = w.decode(s)
        out.append(dict(id=first(d, 1), url=first(d, 2, b"").decode(),
                        name=first(d, 3, b"").decode(), capacity=first(d, 4),
                        up=bool(first(d, 6)), uuid=first(d, 7, b"")))
    return out


def register_req(url, uuid, capacity, name):
    return (w.field_bytes(1, url) + w.field_bytes(2, uuid) + w.field_varint(3, capacity)
            + w.field_bytes(4, name))


def layout(conn, ino, length, cr, allocate=False, offset=0):
    """LAYOUT: (status, dict(extents=[...], caps=[raw Capability bytes]))."""
    body = (w.field_bytes(1, cr) + w.field_varint(2, ino) + w.field_varint(3, offset)
            + w.field_varint(4, length) + w.field_varint(5, 1 if allocate else 0))
    status, rbody = w.call(conn, w.OP_LAYOUT, body)
    if status != 0:
        return status, None
    r = w.decode(rbody)
    extents = []
    for e in r.get(3, []):
        d = w.decode(e)
        extents.append(dict(offset=first(d, 1), length=first(d, 2), server=first(d, 3),
                            block=first(d, 4), unwritten=bool(first(d, 5))))
    return status, dict(extents=extents, caps=r.get(4, []))


def cap_fields(cap):
    d = w.decode(cap)
    return dict(server=first(d, 1), ino=first(d, 2), rights=first(d, 3),
                holder=first(d, 7, b"").decode())


def ioserver_ports(c):
    """{server_id: TCP port} from each I/O server's VOLUME_INFO (any transport)."""
    key = client_secret(c)
    out = {}
    for i in range(c.n_io):
        conn = connect(c.ioserver_port(i), key)
        try:
            status, body = w.call(conn, w.OP_VOLUME_INFO)
            assert status == 0, "VOLUME_INFO on port %d: %d" % (c.ioserver_port(i), status)
            out[first(w.decode(body), 3)] = c.ioserver_port(i)
        finally:
            conn.close()
    return out


def io_read_req(cap, block, nblocks, length=None):
    return (w.field_bytes(1, cap) + w.field_varint(2, block) + w.field_varint(3, nblocks)
            + w.field_varint(4, 0) + w.field_varint(5, nblocks * 4096 if length is None
                                                     else length))


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def cap_for_extent(lay, ext):
    for cap in lay["caps"]:
        if cap_fields(cap)["server"] == ext["server"]:
            return cap
    raise AssertionError("LAYOUT gave no capability for server %d: %r" % (ext["server"], lay))


def free_port():
    """A listening socket on a free loopback port (an attacker's 'I/O server')."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


def refused(res):
    return res == "closed" or (isinstance(res, tuple) and res[0] == "error")


# ------------------------------------------------------------------ 1 takeover
def test_takeover_by_client_claiming_ioserver_is_refused(fresh_cluster):
    """Hole 1 (takeover): a peer that proved only the cluster secret but claims
    "ioserver" (or "metaserver") sends REGISTER for a live volume's uuid with its
    own URL. It must get -EPERM; the registry keeps the real URL and up=true, and
    data written before the attack reads back byte for byte."""
    c = fresh_cluster
    data = os.urandom(3 * MiB + 777)
    p = c.mnt / "before-attack"
    write_file(p, data)
    secret = client_secret(c)
    viewer = connect(c.port, secret)
    before = server_list(viewer)
    assert len(before) == c.n_io and all(s["up"] for s in before), before
    attacker = free_port()
    evil_url = "tcp://127.0.0.1:%d" % attacker.getsockname()[1]
    hostile = []
    try:
        for claim in ("ioserver", "metaserver"):
            conn = connect(c.port, secret, claim)
            hostile.append(conn)
            for victim in before:
                status, _ = w.call(conn, w.OP_REGISTER, register_req(
                    evil_url, victim["uuid"], victim["capacity"], victim["name"]))
                assert status == -errno.EPERM, \
                    ("REGISTER of volume %d (%s) by a cluster-secret peer claiming %r "
                     "got status %d, not -EPERM" % (victim["id"], victim["url"], claim, status))
        # While the hostile sessions are still open: the registry is unchanged.
        after = server_list(viewer)
        for b in before:
            a = [s for s in after if s["uuid"] == b["uuid"]]
            assert a and a[0]["url"] == b["url"] and a[0]["up"], \
                "volume %d after the attack: %r (before: %r)" % (b["id"], a, b)
    finally:
        for conn in hostile:
            conn.close()
        attacker.close()
        viewer.close()
    drop_cache(p)
    assert_bytes_equal(data, p.read_bytes(), "file written before the attack")
    viewer = connect(c.port, secret)
    try:
        after = server_list(viewer)
        assert sorted((s["url"], s["up"]) for s in after) == \
            sorted((s["url"], True) for s in before), after
    finally:
        viewer.close()


def test_server_claim_with_cluster_secret_fails_handshake(cluster):
    """Hole 1 (takeover): the claim "server" must be proved with the server key;
    the cluster secret does not prove it, on the metaserver and on every I/O
    server (-EACCES or a closed connection, and nothing is served after)."""
    secret = client_secret(cluster)
    for port in cluster.ports():
        conn = w.Conn(port)
        try:
            res = w.authenticate(conn, secret, "server")
            assert refused(res), \
                "port %d accepted claim 'server' proved with the cluster secret: %r" % (port, res)
            if isinstance(res, tuple):
                assert res[1] == -errno.EACCES, res
            try:
                conn.send(w.frame(w.OP_SERVER_LIST if port == cluster.port
                                  else w.OP_VOLUME_INFO, b""))
                after = conn.closed_or_error(timeout=10)
            except (BrokenPipeError, ConnectionResetError):
                after = "closed"
            assert not (isinstance(after, tuple) and after[0] == "ok"), \
                "port %d served after a refused handshake: %r" % (port, after)
        finally:
            conn.close()


def test_server_key_cannot_reregister_a_live_volume(fresh_cluster):
    """Hole 1 (takeover): even with the real server key, REGISTER of a volume
    whose I/O server is alive and registered is refused with -EBUSY; the real
    server stays up with its URL and keeps serving."""
    c = fresh_cluster
    data = os.urandom(2 * MiB + 5)
    p = c.mnt / "before"
    write_file(p, data)
    secret = client_secret(c)
    viewer = connect(c.port, secret)
    before = server_list(viewer)
    assert before and all(s["up"] for s in before), before
    attacker = free_port()
    evil_url = "tcp://127.0.0.1:%d" % attacker.getsockname()[1]
    conn = connect(c.port, server_key(c), "server")
    try:
        for victim in before:
            status, _ = w.call(conn, w.OP_REGISTER, register_req(
                evil_url, victim["uuid"], victim["capacity"], victim["name"]))
            assert status == -errno.EBUSY, \
                "REGISTER over live volume %d with the server key: status %d, not -EBUSY" \
                % (victim["id"], status)
        after = server_list(viewer)
        assert sorted((s["uuid"], s["url"], s["up"]) for s in after) == \
            sorted((s["uuid"], s["url"], True) for s in before), after
    finally:
        conn.close()
        attacker.close()
    after = server_list(viewer)
    viewer.close()
    assert sorted((s["url"], s["up"]) for s in after) == \
        sorted((s["url"], True) for s in before), after
    drop_cache(p)
    assert_bytes_equal(data, p.read_bytes(), "file written before the attempt")


# ------------------------------------------------------------------ 3 squash
@pytest.fixture(scope="module")
def squash_cluster():
    """A cluster whose metaserver runs with root_squash = true; made before the
    switch: /pub (0777) and /rootdir (root, 0755) holding f (root, 0644)."""
    c = Cluster(_cluster_root("squash"), 1)
    try:
        c.up()
        os.mkdir(c.mnt / "pub")
        os.chmod(c.mnt / "pub", 0o777)
        os.mkdir(c.mnt / "rootdir")
        os.chmod(c.mnt / "rootdir", 0o755)
        write_file(c.mnt / "rootdir" / "f", b"root's file\n")
        os.chmod(c.mnt / "rootdir" / "f", 0o644)
        errors = c.down()
        assert not errors, errors
        text = c.conf.read_text()
        assert "\n[metaserver]\n" in text, text
        c.conf.write_text(text.replace("\n[metaserver]\n",
                                       "\n[metaserver]\nroot_squash = true\n", 1))
        c.up()
        # The switch took: the plain "client" claim is squashed (old code too).
        conn = connect(c.port, client_secret(c))
        try:
            pub = ino_of(conn, c, c.mnt / "pub")
            status, body = w.call(conn, w.OP_MKNOD, w.field_bytes(1, w.cred(0, 0))
                                  + w.field_varint(2, pub) + w.field_bytes(3, "probe")
                                  + w.field_varint(4, MODE_FILE | 0o644))
            assert status == 0 and (attr_of(body)["uid"], attr_of(body)["gid"]) == \
                (NOBODY, NOBODY), "root_squash not in effect: %d %r" % (status, body)
        finally:
            conn.close()
    except BaseException:
        c.down()
        _remove(c)
        raise
    yield c
    _stop(c)


@pytest.mark.parametrize("claim", ["tool", "ioserver", "metaserver", "Client", "x"])
def test_root_squash_applies_whatever_the_claim(squash_cluster, claim):
    """Hole 3 (squash): with root_squash on, uid 0 of any peer authenticated with
    the cluster secret acts as nobody, whatever role it claims: MKNOD/MKDIR
    create files owned by 65534:65534, and root's 0644 file in root's 0755
    directory can be neither chmod'ed nor unlinked."""
    c = squash_cluster
    conn = connect(c.port, client_secret(c), claim)
    root = w.cred(0, 0)
    try:
        pub = ino_of(conn, c, c.mnt / "pub")
        rootdir = ino_of(conn, c, c.mnt / "rootdir")
        status, f = lookup(conn, rootdir, "f")
        assert status == 0, status
        tag = "%s-%s" % (claim, os.urandom(3).hex())
        status, body = w.call(conn, w.OP_MKNOD, w.field_bytes(1, root) + w.field_varint(2, pub)
                              + w.field_bytes(3, "file-" + tag)
                              + w.field_varint(4, MODE_FILE | 0o644))
        assert status == 0, "MKNOD in the 0777 directory: %d" % status
        a = attr_of(body)
        assert (a["uid"], a["gid"]) == (NOBODY, NOBODY), \
            "claim %r: MKNOD as uid 0 made a file owned by %d:%d" % (claim, a["uid"], a["gid"])
        status, body = w.call(conn, w.OP_MKDIR, w.field_bytes(1, root) + w.field_varint(2, pub)
                              + w.field_bytes(3, "dir-" + tag) + w.field_varint(4, 0o755))
        assert status == 0, "MKDIR in the 0777 directory: %d" % status
        a = attr_of(body)
        assert (a["uid"], a["gid"]) == (NOBODY, NOBODY), \
            "claim %r: MKDIR as uid 0 made a directory owned by %d:%d" % (claim, a["uid"], a["gid"])
        # chmod of root's file
        status, _ = w.call(conn, w.OP_SETATTR, w.field_bytes(1, root) + w.field_varint(2, f["ino"])
                           + w.field_varint(3, 1) + w.field_varint(4, 0o666))
        assert status in (-errno.EPERM, -errno.EACCES), \
            "claim %r: chmod of root's 0644 file as uid 0: status %d" % (claim, status)
        status, a = getattr_(conn, f["ino"])
        assert status == 0 and stat.S_IMODE(a["mode"]) == 0o644, a
        # unlink of root's file in root's 0755 directory
        status, _ = w.call(conn, w.OP_UNLINK, w.field_bytes(1, root) + w.field_varint(2, rootdir)
                           + w.field_bytes(3, "f"))
        assert status in (-errno.EPERM, -errno.EACCES), \
            "claim %r: unlink of root's file as uid 0: status %d" % (claim, status)
        assert lookup(conn, rootdir, "f")[0] == 0, "root's file is gone"
    finally:
        conn.close()


# ------------------------------------------------------------------ 4 write->read
def test_capability_rights_are_what_the_caller_may_do(cluster, workdir):
    """Hole 4 (write->read): uid 2000 may only write a 0602 file of uid 1000, so
    its LAYOUT gives capabilities with rights WRITE (2) only, and a READ at the
    I/O server with one is refused (-EACCES). A 0604 file gives READ (1) only."""
    c = cluster
    data = os.urandom(3 * MiB)
    wo, ro = workdir / "write-only", workdir / "read-only"
    for p, mode in ((wo, 0o602), (ro, 0o604)):
        write_file(p, data)
        os.chown(p, 1000, 1000)
        os.chmod(p, mode)
    os.chmod(workdir, 0o755)
    other = w.cred(2000, 2000)
    ports = ioserver_ports(c)
    conn = connect(c.port, client_secret(c))
    try:
        wo_ino, ro_ino = ino_of(conn, c, wo), ino_of(conn, c, ro)
        # What the write-only caller gets when it asks to write (LAYOUT allocate).
        status, lay = layout(conn, wo_ino, len(data), other, allocate=True)
        assert status == 0, "LAYOUT (allocate) of the 0602 file as uid 2000: %d" % status
        assert lay["caps"], lay
        rights = sorted({cap_fields(cap)["rights"] for cap in lay["caps"]})
        assert rights == [w.CAP_WRITE], \
            "0602 file, uid 2000: capabilities with rights %r, want [2] (write only)" % rights
        # Reading through one of those capabilities
        ext = [e for e in lay["extents"] if not e["unwritten"]][0]
        cap = cap_for_extent(lay, ext)
        io = connect(ports[ext["server"]], client_secret(c))
        try:
            status, _, got = io.request(w.OP_READ, io_read_req(cap, ext["block"], 1))
        finally:
            io.close()
        assert status < 0 and got == b"", \
            "READ with the 0602 file's capability: status %d, %d bytes" % (status, len(got))
        # A plain look at the layout must not grant reading either.
        status, lay = layout(conn, wo_ino, len(data), other)
        if status == 0:
            rights = sorted({cap_fields(cap)["rights"] for cap in lay["caps"]})
            assert all(not r & w.CAP_READ for r in rights), \
                "0602 file, uid 2000, LAYOUT without allocate: rights %r include READ" % rights
        # 0604: read only
        status, lay = layout(conn, ro_ino, len(data), other)
        assert status == 0, "LAYOUT of the 0604 file as uid 2000: %d" % status
        rights = sorted({cap_fields(cap)["rights"] for cap in lay["caps"]})
        assert rights == [w.CAP_READ], "0604 file, uid 2000: rights %r, want [1]" % rights
    finally:
        conn.close()


# ------------------------------------------------------------------ 6 NUL names
NUL_CASES = ["mknod", "mkdir", "symlink-name", "symlink-target", "link-newname",
             "rename-name", "rename-newname", "setxattr-name"]


@pytest.mark.parametrize("case", NUL_CASES)
def test_names_with_nul_are_refused(cluster, workdir, case):
    """Hole 6 (NUL names): a name (or symlink target, or xattr name) with an
    embedded NUL is refused with -EINVAL, never cut at the NUL: nothing named
    "x" (the part before the NUL) appears, and the source of a LINK/RENAME is
    untouched."""
    c = cluster
    src = workdir / "src"
    write_file(src, b"source\n")
    cr = w.cred(0, 0)
    conn = connect(c.port, client_secret(c))
    try:
        d = ino_of(conn, c, workdir)
        status, s = lookup(conn, d, "src")
        assert status == 0, status
        bad = "x\0evil"
        if case == "mknod":
            op, body = w.OP_MKNOD, (w.field_bytes(1, cr) + w.field_varint(2, d)
                                    + w.field_bytes(3, bad) + w.field_varint(4, MODE_FILE | 0o644))
        elif case == "mkdir":
            op, body = w.OP_MKDIR, (w.field_bytes(1, cr) + w.field_varint(2, d)
                                    + w.field_bytes(3, bad) + w.field_varint(4, 0o755))
        elif case == "symlink-name":
            op, body = w.OP_SYMLINK, (w.field_bytes(1, cr) + w.field_varint(2, d)
                                      + w.field_bytes(3, bad) + w.field_bytes(4, "target"))
        elif case == "symlink-target":
            op, body = w.OP_SYMLINK, (w.field_bytes(1, cr) + w.field_varint(2, d)
                                      + w.field_bytes(3, "x") + w.field_bytes(4, "/etc\0/passwd"))
        elif case == "link-newname":
            op, body = w.OP_LINK, (w.field_bytes(1, cr) + w.field_varint(2, s["ino"])
                                   + w.field_varint(3, d) + w.field_bytes(4, bad))
        elif case == "rename-name":
            op, body = w.OP_RENAME, (w.field_bytes(1, cr) + w.field_varint(2, d)
                                     + w.field_bytes(3, "src\0evil") + w.field_varint(4, d)
                                     + w.field_bytes(5, "x"))
        elif case == "rename-newname":
            op, body = w.OP_RENAME, (w.field_bytes(1, cr) + w.field_varint(2, d)
                                     + w.field_bytes(3, "src") + w.field_varint(4, d)
                                     + w.field_bytes(5, bad))
        else:
            op, body = w.OP_SETXATTR, (w.field_bytes(1, cr) + w.field_varint(2, s["ino"])
                                       + w.field_bytes(3, "user.x\0evil")
                                       + w.field_bytes(4, b"value"))
        status, _ = w.call(conn, op, body)
        assert status == -errno.EINVAL, \
            "%s with an embedded NUL: status %d, not -EINVAL" % (case, status)
        status, _ = lookup(conn, d, "x")
        assert status == -errno.ENOENT, \
            "%s with an embedded NUL: LOOKUP of 'x' gives %d, not -ENOENT" % (case, status)
        status, s2 = lookup(conn, d, "src")
        assert status == 0 and s2["ino"] == s["ino"], "%s: the source changed" % case
        if case == "setxattr-name":
            status, _ = w.call(conn, w.OP_GETXATTR, w.field_bytes(1, cr)
                               + w.field_varint(2, s["ino"]) + w.field_bytes(3, "user.x"))
            assert status < 0, "setxattr with an embedded NUL set 'user.x'"
            status, body = w.call(conn, w.OP_LISTXATTR, w.field_bytes(1, cr)
                                  + w.field_varint(2, s["ino"]))
            names = w.decode(body).get(2, []) if status == 0 else []
            assert not any(n.startswith(b"user.x") for n in names), names
    finally:
        conn.close()
    assert sorted(os.listdir(workdir)) == ["src"], os.listdir(workdir)


# ------------------------------------------------------------------ capability holder
def test_capability_is_bound_to_its_holder(cluster, workdir):
    """Capability holder (field 7, covered by the MAC): a capability a
    cluster-secret client fetched is refused (-EACCES) on an I/O server
    connection of another identity (a client node with its own key), and one
    whose holder was rewritten to that node (MAC unchanged) is refused
    (-EBADMSG or -EACCES). A server-key connection may present it: an I/O
    server fetching a COPY's source acts for the client it checked is the
    holder, and whoever has the server key has the capability key anyway."""
    c = cluster
    data = os.urandom(256 * 1024)
    p = workdir / "f"
    write_file(p, data)
    ports = ioserver_ports(c)
    conn = connect(c.port, client_secret(c))
    try:
        status, lay = layout(conn, ino_of(conn, c, p), len(data), w.cred(0, 0))
    finally:
        conn.close()
    assert status == 0, "LAYOUT: %d" % status
    ext = lay["extents"][0]
    cap = cap_for_extent(lay, ext)
    n = min(ext["length"], len(data)) // 4096
    port = ports[ext["server"]]
    # Replayed by another client node.
    name = node_name("holder")
    _, claim, key = node_add(c, name)
    io = connect(port, key, claim)
    try:
        status, _, got = io.request(w.OP_READ, io_read_req(cap, ext["block"], n))
        assert status == -errno.EACCES and got == b"", \
            "a client's capability on another node's connection: status %d, %d bytes" \
            % (status, len(got))
        rewritten = cap + w.field_bytes(7, claim)
        status, _, got = io.request(w.OP_READ, io_read_req(rewritten, ext["block"], n))
        assert status in (-errno.EBADMSG, -errno.EACCES) and got == b"", \
            "holder rewritten to the node, on its connection: status %d" % status
    finally:
        io.close()
    # A server acts for the holder (a COPY's source READ).
    io = connect(port, server_key(c), "server")
    try:
        status, _, got = io.request(w.OP_READ, io_read_req(cap, ext["block"], n))
        assert status == 0, "a client's capability on a server-key connection: %d" % status
        assert_bytes_equal(data[ext["offset"]:ext["offset"] + n * 4096], got, "server READ")
    finally:
        io.close()
    # The holder's own kind of connection reads with it.
    io = connect(port, client_secret(c))
    try:
        status, _, got = io.request(w.OP_READ, io_read_req(cap, ext["block"], n))
        assert status == 0, "READ with a fresh capability on a client connection: %d" % status
        assert_bytes_equal(data[ext["offset"]:ext["offset"] + n * 4096], got, "READ")
        rewritten = cap + w.field_bytes(7, "server")
        status, _, got = io.request(w.OP_READ, io_read_req(rewritten, ext["block"], n))
        assert status in (-errno.EBADMSG, -errno.EACCES) and got == b"", \
            "holder rewritten to 'server', client connection: status %d" % status
    finally:
        io.close()


# ------------------------------------------------------------------ 5 starvation
def _flood(sock, frames):
    """Send @frames on @sock and never read it (a thread: the send may block)."""
    try:
        sock.settimeout(None)
        sock.sendall(frames)
    except OSError:
        pass


def _hang_up(conn):
    """Close @conn; shutdown first wakes the flooding thread if its send blocks."""
    try:
        conn.sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def _answered(what, fn):
    """fn()'s result; a connection that times out (30 s) or breaks fails the test naming @what."""
    try:
        return fn()
    except (socket.timeout, ConnectionError) as e:
        err = e
    raise AssertionError("no answer to %s within 30 s while another client floods and never "
                         "reads its socket: %r" % (what, err))


def _read_once(port, secret, req):
    """(status, data) of one READ on a new connection."""
    conn = connect(port, secret, timeout=30)
    try:
        status, _, got = conn.request(w.OP_READ, req, timeout=30)
        return status, got
    finally:
        conn.close()


def _getattr_once(port, secret, ino):
    conn = connect(port, secret, timeout=30)
    try:
        return getattr_(conn, ino)
    finally:
        conn.close()


def _rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def test_ioserver_serves_others_while_a_client_never_reads(fresh_cluster):
    """Hole 5 (starvation): a client sends 2,000 pipelined 1 MiB READs to an
    I/O server with a valid capability and never reads its socket. While it
    stays connected, another client's READ of the file is answered correctly
    within 30 s, and the metaserver answers a GETATTR."""
    c = fresh_cluster
    data = os.urandom(4 * MiB)
    p = c.mnt / "big"
    write_file(p, data)
    secret = client_secret(c)
    ports = ioserver_ports(c)
    meta = connect(c.port, secret)
    ino = ino_of(meta, c, p)
    status, lay = layout(meta, ino, len(data), w.cred(0, 0))
    meta.close()
    assert status == 0, "LAYOUT: %d" % status
    ext = [e for e in lay["extents"] if e["length"] >= MiB and not e["unwritten"]][0]
    cap = cap_for_extent(lay, ext)
    port = ports[ext["server"]]
    server_pid = listener_pid(port)
    want = data[ext["offset"]:ext["offset"] + MiB]
    hostile = connect(port, secret)
    hostile.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    req = io_read_req(cap, ext["block"], MiB // 4096)
    frames = b"".join(w.frame(w.OP_READ, req, tag=i + 1) for i in range(2000))
    t = threading.Thread(target=_flood, args=(hostile.sock, frames), daemon=True)
    t.start()
    try:
        time.sleep(3)           # let the server take what it will of the flood
        what = "another client's READ at the I/O server on port %d" % port
        status, got = _answered(what, lambda: _read_once(port, secret, req))
        assert status == 0, "%s during the flood: status %d" % (what, status)
        assert_bytes_equal(want, got, what + " during the flood")
        what = "a GETATTR at the metaserver"
        status, a = _answered(what, lambda: _getattr_once(c.port, secret, ino))
        assert status == 0 and a["size"] == len(data), (status, a)
    finally:
        _hang_up(hostile)
        t.join(timeout=30)
    # its READs end when it goes (their sends cancelled): the server lives on
    time.sleep(2)
    assert listener_pid(port) == server_pid, "the I/O server died with the flooding client"
    status, got = _read_once(port, secret, req)
    assert status == 0, "READ after the flooding client left: %d" % status
    assert_bytes_equal(want, got, "READ after the flooding client left")
    drop_cache(p)
    assert_bytes_equal(data, p.read_bytes(), "file after the flood")


def test_metaserver_serves_others_and_stays_bounded_while_a_client_never_reads(fresh_cluster):
    """Hole 5 (starvation): a client sends 20,000 pipelined READDIRs to the
    metaserver and never reads its socket. Another connection's GETATTR is
    answered within 30 s, the metaserver's RSS stays bounded while the flood
    lasts (at most 256 MiB over what it was before), and once the flooding
    connection closes it comes back to within 64 MiB of what it was before."""
    c = fresh_cluster
    d = c.mnt / "dir"
    d.mkdir()
    for i in range(100):        # readdir replies of ~25 KiB each
        (d / ("%03d-" % i + "n" * 240)).write_bytes(b"")
    secret = client_secret(c)
    pid = listener_pid(c.port)
    assert pid, "no metaserver on port %d" % c.port
    conn = connect(c.port, secret)
    dino = ino_of(conn, c, d)
    status, body = w.call(conn, w.OP_READDIR, w.field_bytes(1, w.cred(0, 0))
                          + w.field_varint(2, dino) + w.field_varint(4, 1000))
    assert status == 0 and len(body) > 20000, (status, len(body))
    conn.close()
    time.sleep(1)
    baseline = _rss_kib(pid)
    hostile = connect(c.port, secret)
    hostile.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    req = w.field_bytes(1, w.cred(0, 0)) + w.field_varint(2, dino) + w.field_varint(4, 1000)
    frames = b"".join(w.frame(w.OP_READDIR, req, tag=i + 1) for i in range(20000))
    t = threading.Thread(target=_flood, args=(hostile.sock, frames), daemon=True)
    t.start()
    try:
        time.sleep(3)
        status, a = _answered("another connection's GETATTR at the metaserver",
                              lambda: _getattr_once(c.port, secret, dino))
        assert status == 0 and stat.S_ISDIR(a["mode"]), (status, a)
        # While the flood lasts, what the metaserver holds for the peer is bounded.
        peak = _rss_kib(pid)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.2)
            peak = max(peak, _rss_kib(pid))
        assert peak <= baseline + 256 * 1024, \
            ("metaserver RSS %d KiB while a peer floods it and never reads (baseline %d KiB, "
             "256 MiB allowed): replies pile up without bound" % (peak, baseline))
    finally:
        _hang_up(hostile)
        t.join(timeout=30)
    peak = max(peak, _rss_kib(pid))
    limit = baseline + 64 * 1024
    deadline = time.monotonic() + 30
    while _rss_kib(pid) > limit and time.monotonic() < deadline:
        time.sleep(0.5)
    rss = _rss_kib(pid)
    assert rss <= limit, ("metaserver RSS %d KiB 30 s after the flooding connection closed: "
                          "baseline %d KiB + 64 MiB allowed (%d KiB right after the flood)"
                          % (rss, baseline, peak))
    assert listener_pid(c.port) == pid, "the metaserver restarted"


# ------------------------------------------------------------------ client nodes
OP_NODE_SET = 39            # lib/frame.h: servers only
OP_NODE_REVOKE = 40
OP_NODE_LIST = 41


def node_name(what):
    """A node name of its own for each test (the shared cluster keeps its nodes)."""
    return "%s-%s" % (what, os.urandom(3).hex())


def node_key(c, name, gen):
    """Node NAME's key of generation GEN as auth.h defines it:
    HMAC(HMAC(cap.key, "rdfs-node-key-v1"), "NAME:GEN")."""
    master = hmac.new(w.load_secret(c.dir / "cap.key"), b"rdfs-node-key-v1",
                      hashlib.sha256).digest()
    return hmac.new(master, ("%s:%d" % (name, gen)).encode(), hashlib.sha256).digest()


def read_node_key_file(path):
    """(claim, key) of a key file `rdfs node add` wrote: "rdfs-node-key NAME:GEN", then the key in hex."""
    lines = path.read_text().split("\n")
    assert len(lines) >= 2 and lines[0].startswith("rdfs-node-key "), \
        "%s is not a node key file: %r" % (path, lines[:2])
    return "node:" + lines[0][len("rdfs-node-key "):], bytes.fromhex(lines[1])


def node_add(c, name, *opts, gen=1):
    """`rdfs node add NAME [opts] --key-file FILE` on the cluster; checks the key
    file (mode 0600, claim node:NAME:GEN, the key derived from cap.key) and
    returns (path, claim, key)."""
    path = c.dir / ("%s.gen%d.key" % (name, gen))
    c.rdfs("node", "add", name, *opts, "--key-file", path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, oct(os.stat(path).st_mode)
    claim, key = read_node_key_file(path)
    assert claim == "node:%s:%d" % (name, gen), "key file %s names %r" % (path, claim)
    assert key == node_key(c, name, gen), \
        "key file %s: the key is not HMAC(HMAC(cap.key, 'rdfs-node-key-v1'), '%s:%d')" \
        % (path, name, gen)
    return path, claim, key


def node_list(c, maps=False):
    """`rdfs node list` as {name: dict(generation, state, squash, anonuid, anongid)},
    with unmapped and maps too if @maps."""
    lines = c.rdfs("node", "list").stdout.splitlines()
    assert lines and lines[0].split() == ["NODE", "GENERATION", "STATE", "SQUASH", "ANONUID",
                                          "ANONGID", "UNMAPPED", "MAPS"], lines
    out = {}
    for line in lines[1:]:
        f = line.split()
        out[f[0]] = dict(generation=int(f[1]), state=f[2], squash=f[3], anonuid=int(f[4]),
                         anongid=int(f[5]))
        if maps:
            out[f[0]].update(unmapped=f[6], maps=f[7])
    return out


def mount_node(c, name, key_file):
    """rdfs-fuse on a new directory with the node's key as secret_file (unmounted at
    the cluster's teardown too). A mount that comes up proves the key: read as a
    cluster secret, it would fail the handshake."""
    path = c.dir / ("mnt-" + name)
    path.mkdir()
    run([BIN / "rdfs-fuse", "-o", "secret_file=%s,attr_timeout=0,entry_timeout=0" % key_file,
         c.mount_spec, path], timeout=120)
    c.extra_mounts.append(path)
    wait_until(lambda: os.path.ismount(path), "node mount at %s" % path)
    return path


def handshake(port, key, claim):
    """The result of a handshake (rdfswire.authenticate) and the connection."""
    conn = w.Conn(port)
    try:
        return w.authenticate(conn, key, claim), conn
    except (ConnectionError, OSError):
        conn.close()
        return "closed", None


def refused_at(port, key, claim):
    """A handshake that must be refused: -EACCES or a closed connection, and no request served."""
    res, conn = handshake(port, key, claim)
    if conn:
        conn.close()
    assert refused(res), "port %d accepted claim %r: %r" % (port, claim, res)
    if isinstance(res, tuple):
        assert res[1] == -errno.EACCES, "claim %r: handshake status %d, not -EACCES" % (claim, res[1])


def next_request(conn, opcode=w.OP_PING):
    """What the next request on @conn gets: 'closed', ('error', st), ('ok', hdr) or a timeout."""
    try:
        conn.send(w.frame(opcode, b"", tag=1000))
    except (BrokenPipeError, ConnectionResetError):
        return "closed"
    return conn.closed_or_error(timeout=10)


@fuse_only("mounts rdfs-fuse with -o secret_file=NODE.key")
def test_node_key_mount_data_reads_back_through_main_mount(cluster, workdir):
    """Client nodes: `rdfs node add` writes a key file (mode 0600, claim
    node:NAME:1, the key derived from cap.key as auth.h says); rdfs-fuse mounts
    with it as secret_file; files written through that mount (several chunks,
    over both I/O servers; a small one; one overwritten in the middle) read back
    byte for byte through the main mount, and the main mount's file through it."""
    c = cluster
    name = node_name("data")
    key_file, _, _ = node_add(c, name, "--squash", "none")
    mnt = mount_node(c, name, key_file)
    try:
        sub = mnt / workdir.relative_to(c.mnt)
        big, small = os.urandom(5 * MiB + 1234), os.urandom(3000)
        write_file(sub / "big", big)
        write_file(sub / "small", small)
        patched = bytearray(os.urandom(2 * MiB))
        write_file(sub / "patched", bytes(patched))
        with open(sub / "patched", "r+b") as f:
            f.seek(MiB - 100)
            f.write(b"z" * 300)
            f.flush()
            os.fsync(f.fileno())
        patched[MiB - 100:MiB + 200] = b"z" * 300
        for n, want in (("big", big), ("small", small), ("patched", bytes(patched))):
            drop_cache(workdir / n)
            assert_bytes_equal(want, (workdir / n).read_bytes(),
                               "%s written through the node mount, read through the main mount" % n)
        servers = {e["server"] for e in layout_of(c, workdir / "big")["extents"]}
        assert len(servers) == c.n_io, "5 MiB striped over servers %r only" % servers
        other = os.urandom(MiB + 77)
        write_file(workdir / "from-main", other)
        drop_cache(sub / "from-main")
        assert_bytes_equal(other, (sub / "from-main").read_bytes(),
                           "written through the main mount, read through the node mount")
    finally:
        c.unmount(mnt)


def layout_of(c, path):
    """LAYOUT of @path over a cluster-secret connection, as root."""
    conn = connect(c.port, client_secret(c))
    try:
        ino = ino_of(conn, c, path)
        status, a = getattr_(conn, ino)
        assert status == 0, status
        status, lay = layout(conn, ino, a["size"], w.cred(0, 0))
        assert status == 0, "LAYOUT of %s: %d" % (path, status)
        return lay
    finally:
        conn.close()


@fuse_only("mounts rdfs-fuse with -o secret_file=NODE.key")
def test_node_squash_all_owns_files_as_anon(cluster, workdir):
    """Client nodes: a node added with --squash all --anonuid 1234 --anongid
    4321 (as `rdfs node list` shows) creates, as root through its mount in a
    1777 directory, files and directories owned 1234:4321, seen so through both
    mounts; the main (cluster-secret) mount still creates as 0:0."""
    c = cluster
    name = node_name("squash")
    key_file, _, _ = node_add(c, name, "--squash", "all", "--anonuid", "1234",
                              "--anongid", "4321")
    assert node_list(c)[name] == dict(generation=1, state="active", squash="all",
                                      anonuid=1234, anongid=4321), node_list(c)[name]
    os.chmod(workdir, 0o1777)
    mnt = mount_node(c, name, key_file)
    try:
        sub = mnt / workdir.relative_to(c.mnt)
        assert os.getuid() == 0, "runs as root"
        write_file(sub / "f", b"made by root on a squash-all node\n")
        os.mkdir(sub / "d")
        for p in (workdir / "f", workdir / "d", sub / "f", sub / "d"):
            st = os.stat(p)
            assert (st.st_uid, st.st_gid) == (1234, 4321), \
                "%s, created as root on a squash-all node: owned %d:%d, not 1234:4321" \
                % (p, st.st_uid, st.st_gid)
        write_file(workdir / "main", b"root on the main mount\n")
        st = os.stat(workdir / "main")
        assert (st.st_uid, st.st_gid) == (0, 0), (st.st_uid, st.st_gid)
    finally:
        c.unmount(mnt)


@fuse_only("mounts rdfs-fuse with -o secret_file=NODE.key")
def test_node_policy_change_holds_on_live_connections(cluster, workdir):
    """`rdfs node set --squash` changes what the node's mounted, connected client
    gets from its next request on, not only after it reconnects: root creates
    as 0:0 under --squash none, then as 2345:5432 once the policy is all, then
    as 0:0 again, through one mount that never reconnects."""
    c = cluster
    name = node_name("live")
    key_file, _, _ = node_add(c, name, "--squash", "none")
    os.chmod(workdir, 0o1777)
    mnt = mount_node(c, name, key_file)
    try:
        sub = mnt / workdir.relative_to(c.mnt)
        write_file(sub / "before", b"x")
        c.rdfs("node", "set", name, "--squash", "all", "--anonuid", "2345",
               "--anongid", "5432")
        write_file(sub / "during", b"x")
        c.rdfs("node", "set", name, "--squash", "none")
        write_file(sub / "after", b"x")
        owners = {f: (os.stat(workdir / f).st_uid, os.stat(workdir / f).st_gid)
                  for f in ("before", "during", "after")}
        assert owners == {"before": (0, 0), "during": (2345, 5432), "after": (0, 0)}, owners
        assert node_list(c)[name]["generation"] == 1, "the key did not change"
    finally:
        c.unmount(mnt)


def as_ids(uid, gid, fn, groups=()):
    """fn() in a forked child running as @uid/@gid/@groups: ("ok", value) or ("errno", n)."""
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            try:
                os.setgroups(list(groups))
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
                res = ("ok", fn())
            except OSError as e:
                res = ("errno", e.errno)
            os.write(wfd, pickle.dumps(res))
        finally:
            os._exit(0)
    os.close(wfd)
    data = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        data += b
    os.close(r)
    os.waitpid(pid, 0)
    return pickle.loads(data)


def owner(p):
    """uid and gid of @p through a mount (the node's mounts cache no attributes)."""
    st = os.stat(p)
    return (st.st_uid, st.st_gid)


def fs_owner(c, p):
    """uid and gid of @p (a path under the main mount) as the metaserver keeps them:
    a GETATTR over a cluster-secret connection, no node policy, no cache."""
    conn = connect(c.port, client_secret(c))
    try:
        status, a = getattr_(conn, ino_of(conn, c, p))
        assert status == 0, "GETATTR %s: %d" % (p, status)
        return (a["uid"], a["gid"])
    finally:
        conn.close()


def acl_named(p):
    """The named user and group entries of @p's access ACL, numerically:
    {("user"|"group", id): "rwx"}."""
    out = subprocess.run(["getfacl", "-n", "-c", "--omit-header", str(p)], check=True,
                         capture_output=True, text=True).stdout
    named = {}
    for line in out.splitlines():
        f = line.split("#")[0].strip().split(":")
        if len(f) == 3 and f[0] in ("user", "group") and f[1]:
            named[(f[0], int(f[1]))] = f[2]
    return named


@fuse_only("mounts rdfs-fuse with -o secret_file=NODE.key")
def test_node_id_maps_in_requests_and_back_in_replies(cluster, workdir):
    """Client nodes with id maps (`--map-uid 1000-1099:51000 --map-gid
    100-109:5100`, as `rdfs node list` shows): a user 1042:101 of the node
    creates files owned 51042:5101 on the file system, which the node sees as
    1042:101; a chown and a named-user ACL entry set through the node land
    mapped and read back unmapped there; a file the file system's 51001 owns
    shows on the node as 1001. With `--unmapped squash`, an id no map covers
    acts as the anonymous one, and a file of an unmapped owner shows so."""
    c = cluster
    name = node_name("maps")
    key_file, _, _ = node_add(c, name, "--squash", "none", "--map-uid", "1000-1099:51000",
                              "--map-gid", "100-109:5100")
    got = node_list(c, maps=True)[name]
    assert (got["unmapped"], got["maps"]) == ("keep", "u1000-1099:51000,g100-109:5100"), got
    os.chmod(workdir, 0o1777)
    mnt = mount_node(c, name, key_file)
    try:
        sub = mnt / workdir.relative_to(c.mnt)

        def make():
            write_file(sub / "f", b"from node user 1042\n")
            os.mkdir(sub / "d")
            return True
        assert as_ids(1042, 101, make) == ("ok", True)
        for p in ("f", "d"):
            assert fs_owner(c, workdir / p) == (51042, 5101), \
                "%s made by the node's 1042:101, on the file system" % p
            assert owner(sub / p) == (1042, 101), "%s, seen through the node" % p
        assert (sub / "f").read_bytes() == b"from node user 1042\n"
        # root of a --squash none node: chown names the node's ids
        os.chown(sub / "f", 1050, 102)
        assert fs_owner(c, workdir / "f") == (51050, 5102)
        assert owner(sub / "f") == (1050, 102)
        # an ACL entry for the node's user 1060 and group 105
        subprocess.run(["setfacl", "-m", "u:1060:r,g:105:rw", str(sub / "f")], check=True)
        assert acl_named(workdir / "f") == {("user", 51060): "r--", ("group", 5105): "rw-"}
        assert acl_named(sub / "f") == {("user", 1060): "r--", ("group", 105): "rw-"}
        # the node's user 1060 may read by that entry; 1061 (other: ---) may not
        os.chmod(sub / "f", 0o640)
        subprocess.run(["setfacl", "-m", "u:1060:r", str(sub / "f")], check=True)
        rd = lambda: (sub / "f").read_bytes()
        assert as_ids(1060, 1060, rd) == ("ok", b"from node user 1042\n")
        assert as_ids(1061, 1061, rd) == ("errno", errno.EACCES)
        # a file the file system's 51001:5100 owns, made on the main mount
        write_file(workdir / "fs-made", b"x")
        os.chown(workdir / "fs-made", 51001, 5100)
        assert owner(sub / "fs-made") == (1001, 100)

        c.rdfs("node", "set", name, "--unmapped", "squash", "--anonuid", "4000",
               "--anongid", "4001")
        assert node_list(c, maps=True)[name]["unmapped"] == "squash"
        assert owner(sub / "fs-made") == (1001, 100), "mapped owners still map"
        write_file(workdir / "root-made", b"x")
        assert owner(sub / "root-made") == (4000, 4001), \
            "a file of an owner the node has no number for"
        assert as_ids(4242, 4242, lambda: write_file(sub / "unmapped", b"y") or True) == \
            ("ok", True)
        assert fs_owner(c, workdir / "unmapped") == (4000, 4001), \
            "created by the node's unmapped 4242"
        # dropping the maps: the node's ids are the file system's again
        c.rdfs("node", "set", name, "--no-maps", "--unmapped", "keep")
        assert node_list(c, maps=True)[name]["maps"] == "-"
        assert owner(sub / "f") == (51050, 5102)
    finally:
        c.unmount(mnt)


def test_node_id_maps_that_overlap_are_refused(cluster):
    """`rdfs node set` refuses maps of one kind that overlap on either side, an
    empty or wrapping range and a malformed one, and the node keeps its maps."""
    c = cluster
    name = node_name("badmap")
    node_add(c, name, "--map-uid", "10-19:100")
    for bad in (["--map-uid", "10-19:100", "--map-uid", "15-30:500"],    # client side
                ["--map-uid", "10-19:100", "--map-uid", "30-39:105"],    # fs side
                ["--map-uid", "5-1:100"], ["--map-uid", "1-2:4294967295"],
                ["--map-gid", "x:1"], ["--map-gid", "1:"]):
        p = c.rdfs("node", "set", name, *bad, check=False)
        assert p.returncode != 0, "accepted %r: %s" % (bad, p.stdout)
        assert "Traceback" not in p.stderr
    assert node_list(c, maps=True)[name]["maps"] == "u10-19:100"
    # a uid range and a gid range may share numbers
    c.rdfs("node", "set", name, "--map-gid", "10-19:100")
    assert node_list(c, maps=True)[name]["maps"] == "u10-19:100,g10-19:100"


def test_node_revoke_and_new_generation(cluster):
    """Client nodes: `rdfs node revoke NAME` refuses new handshakes with the
    node's key at the metaserver (-EACCES or closed) and closes the node's
    already-open connection (its next request: EOF); `rdfs node list` says
    revoked. `rdfs node add NAME` again issues generation 2: the generation-1
    key is refused (claiming 1 or 2), the new one is accepted and served, and
    the list says generation 2, active. Issuing generation 3 closes an open
    generation-2 connection at once."""
    c = cluster
    name = node_name("revoke")
    _, claim1, key1 = node_add(c, name)
    assert node_list(c)[name] == dict(generation=1, state="active", squash="root",
                                      anonuid=NOBODY, anongid=NOBODY), node_list(c)[name]
    bname = node_name("bystander")
    _, bystander, bystander_key = node_add(c, bname)
    conn = connect(c.port, key1, claim1)
    other = connect(c.port, bystander_key, bystander)
    try:
        assert w.call(conn, w.OP_PING)[0] == 0
        c.rdfs("node", "revoke", name)
        got = next_request(conn)
        assert got == "closed", \
            "the revoked node's open connection, next request: %r, not closed" % (got,)
        refused_at(c.port, key1, claim1)
        assert w.call(other, w.OP_PING)[0] == 0, "another node's connection was cut too"
    finally:
        conn.close()
        other.close()
    listed = node_list(c)
    assert listed[name]["generation"] == 1 and listed[name]["state"] == "revoked", listed[name]
    assert listed[bname]["state"] == "active", listed[bname]

    _, claim2, key2 = node_add(c, name, gen=2)
    assert claim2 == "node:%s:2" % name
    refused_at(c.port, key1, claim1)
    refused_at(c.port, key1, claim2)
    conn = connect(c.port, key2, claim2)
    try:
        status, a = getattr_(conn, w.ROOT_INO)
        assert status == 0 and stat.S_ISDIR(a["mode"]), (status, a)
        assert node_list(c)[name] == dict(generation=2, state="active", squash="root",
                                          anonuid=NOBODY, anongid=NOBODY), node_list(c)[name]
        node_add(c, name, gen=3)
        got = next_request(conn)
        assert got == "closed", \
            "an open generation-2 connection after generation 3 was issued: %r" % (got,)
    finally:
        conn.close()
    refused_at(c.port, key2, claim2)
    connect(c.port, node_key(c, name, 3), "node:%s:3" % name).close()


def test_capability_is_bound_to_its_node(cluster, workdir):
    """Client nodes: a capability from a LAYOUT on node A's metaserver
    connection names A (holder node:A:1). Presented at the I/O server on node
    B's connection (B proved its own node key) it is refused with -EACCES and no
    data, and on a cluster-secret connection too; on A's own I/O-server
    connection the same READ returns the file's bytes."""
    c = cluster
    data = os.urandom(256 * 1024)
    p = workdir / "f"
    write_file(p, data)
    os.chmod(p, 0o644)
    _, claim_a, key_a = node_add(c, node_name("a"))
    _, claim_b, key_b = node_add(c, node_name("b"))
    ports = ioserver_ports(c)
    conn = connect(c.port, key_a, claim_a)
    try:
        status, lay = layout(conn, ino_of(conn, c, p), len(data), w.cred(0, 0))
    finally:
        conn.close()
    assert status == 0, "LAYOUT on node A's connection: %d" % status
    ext = lay["extents"][0]
    cap = cap_for_extent(lay, ext)
    assert cap_fields(cap)["holder"] == claim_a, cap_fields(cap)
    assert cap_fields(cap)["rights"] & w.CAP_READ, cap_fields(cap)
    n = min(ext["length"], len(data)) // 4096
    port = ports[ext["server"]]
    req = io_read_req(cap, ext["block"], n)
    for key, claim in ((key_b, claim_b), (client_secret(c), "client")):
        io = connect(port, key, claim)
        try:
            status, _, got = io.request(w.OP_READ, req)
        finally:
            io.close()
        assert status == -errno.EACCES and got == b"", \
            "node A's capability on a %s connection: status %d, %d bytes" % (claim, status, len(got))
    io = connect(port, key_a, claim_a)
    try:
        status, _, got = io.request(w.OP_READ, req)
    finally:
        io.close()
    assert status == 0, "node A's capability on A's own I/O-server connection: %d" % status
    assert_bytes_equal(data[ext["offset"]:ext["offset"] + n * 4096], got, "READ on node A")


def node_req(name, new_key=False, squash=None, anonuid=0, anongid=0):
    """NodeReq (rdfs.proto): name, new_key, set_policy with squash/anonuid/anongid."""
    body = w.field_bytes(1, name) + w.field_varint(2, 1 if new_key else 0)
    if squash is not None:
        body += (w.field_varint(3, 1) + w.field_varint(4, squash) + w.field_varint(5, anonuid)
                 + w.field_varint(6, anongid))
    return body


def test_node_administration_needs_the_server_key(cluster):
    """Client nodes: NODE_LIST (41) on a cluster-secret connection gets -EPERM,
    and so do NODE_SET (39: adding a node, or giving an existing one a new key
    and squash none) and NODE_REVOKE (40), on a cluster-secret connection and on
    a node's own connection; nothing changes (`rdfs node list`), and the node's
    key still works. The same NODE_LIST on a server-key connection succeeds
    (the opcode is real)."""
    c = cluster
    name = node_name("admin")
    _, claim, key = node_add(c, name)
    before = node_list(c)
    evil = node_name("evil")
    for what, k, cl in (("cluster secret", client_secret(c), "client"),
                        ("node key", key, claim)):
        conn = connect(c.port, k, cl)
        try:
            for op, body in ((OP_NODE_LIST, b""),
                             (OP_NODE_SET, node_req(evil, new_key=True, squash=0)),
                             (OP_NODE_SET, node_req(name, new_key=True, squash=0)),
                             (OP_NODE_REVOKE, node_req(name))):
                status, _ = w.call(conn, op, body)
                assert status == -errno.EPERM, \
                    "opcode %d on a %s connection: status %d, not -EPERM" % (op, what, status)
        finally:
            conn.close()
    assert node_list(c) == before, "node administration without the server key changed the nodes"
    connect(c.port, key, claim).close()
    conn = connect(c.port, server_key(c), "server")
    try:
        status, body = w.call(conn, OP_NODE_LIST)
        assert status == 0, "NODE_LIST with the server key: %d" % status
        names = [first(w.decode(n), 1, b"").decode() for n in w.decode(body).get(1, [])]
        assert name in names and evil not in names, names
    finally:
        conn.close()


OP_REBALANCE = 46           # wire/rdfs_frame.h: servers only


def rebalance_req(cancel=False, threshold=0):
    return w.field_varint(1, 1 if cancel else 0) + w.field_varint(2, threshold)


def rebalancing(c):
    """SERVER_LIST's rebalancing flag (field 7), as any client sees it."""
    conn = connect(c.port, client_secret(c), "client")
    try:
        status, body = w.call(conn, w.OP_SERVER_LIST)
        assert status == 0, status
        return bool(first(w.decode(body), 7, 0))
    finally:
        conn.close()


def test_rebalance_needs_the_server_key(cluster):
    """REBALANCE (46), start or cancel, on a cluster-secret connection and on a
    node's own connection gets -EPERM and starts nothing (SERVER_LIST says no
    rebalance). On a server-key connection the opcode is real: a threshold
    above 100 is -EINVAL, a cancel succeeds."""
    c = cluster
    name = node_name("rebal")
    _, claim, key = node_add(c, name)
    assert not rebalancing(c)
    for what, k, cl in (("cluster secret", client_secret(c), "client"), ("node key", key, claim)):
        conn = connect(c.port, k, cl)
        try:
            for body in (rebalance_req(), rebalance_req(threshold=1),
                         rebalance_req(cancel=True)):
                status, _ = w.call(conn, OP_REBALANCE, body)
                assert status == -errno.EPERM, \
                    "REBALANCE on a %s connection: status %d, not -EPERM" % (what, status)
        finally:
            conn.close()
    assert not rebalancing(c), "a REBALANCE without the server key started one"
    conn = connect(c.port, server_key(c), "server")
    try:
        status, _ = w.call(conn, OP_REBALANCE, rebalance_req(threshold=101))
        assert status == -errno.EINVAL, status
        status, _ = w.call(conn, OP_REBALANCE, rebalance_req(cancel=True))
        assert status == 0, status
    finally:
        conn.close()
    assert not rebalancing(c)
