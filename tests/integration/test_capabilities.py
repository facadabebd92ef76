# SPDX-License-Identifier: MIT
"""Capabilities refused at the I/O server, over the wire (issue 12: "forged,
widened, expired, misdirected and wrong-rights capabilities were refused"; the
unit tests check lib/cap.c and the I/O server in process, these check a real
cluster through its ports).

A capability (rdfs.proto Capability, lib/cap.h) is signed by the metaserver
with the capability key, which only servers hold. Each test takes a genuine
one from LAYOUT, presents it (or an altered copy) in a READ or WRITE at an I/O
server, and checks the status docs/PROTOCOL.md gives ("Capabilities at the I/O
server"): -EACCES for a forged or altered one and for one of another I/O
server, -EKEYEXPIRED for an expired one; no data either way. Afterwards the
same server serves a normal client.

The test reads cap.key only to show that its own encoding of a capability is
the one the MAC covers (a copy re-signed with the real key is served), so the
refusals come from the MAC and the checks, not from a malformed message.
"""
import errno
import hashlib
import hmac
import os
import struct
import time

import rdfswire as w
from conftest import MiB, assert_bytes_equal, drop_cache, plain_wire, wait_until
from test_fence import io_write_req
from test_trust import (client_secret, connect, ino_of, io_read_req, ioserver_ports, layout,
                        write_file)

pytestmark = plain_wire("presents capabilities in its own frames")

ROOT = w.cred(0, 0)
BLK = 4096
EACCES = -errno.EACCES
EKEYEXPIRED = -errno.EKEYEXPIRED


# ------------------------------------------------------------------ capabilities
def cap_decode(raw):
    """A Capability's bytes as a dict (rdfs.proto field numbers)."""
    d = w.decode(raw)
    one = lambda n, default=0: d.get(n, [default])[0]   # noqa: E731
    expiry = one(4)
    if expiry >= 1 << 63:                               # int64 as a varint
        expiry -= 1 << 64
    ranges = []
    for r in d.get(5, []):
        rd = w.decode(r)
        ranges.append((rd.get(1, [0])[0], rd.get(2, [0])[0]))
    return dict(server_id=one(1), ino=one(2), rights=one(3), expiry_ns=expiry, ranges=ranges,
                mac=one(6, b""), holder=one(7, b"").decode(), epoch=one(8), gen=one(9))


def cap_encode(c):
    """A dict of cap_decode() back to protobuf bytes (with its mac as it is)."""
    out = (w.field_varint(1, c["server_id"]) + w.field_varint(2, c["ino"])
           + w.field_varint(3, c["rights"]) + w.field_varint(4, c["expiry_ns"] % (1 << 64)))
    for first, count in c["ranges"]:
        out += w.field_bytes(5, w.field_varint(1, first) + w.field_varint(2, count))
    out += w.field_bytes(6, c["mac"]) + w.field_bytes(7, c["holder"])
    return out + w.field_varint(8, c["epoch"]) + w.field_varint(9, c["gen"])


def cap_canonical(c):
    """What the MAC covers, as lib/cap.h describes it."""
    h = c["holder"].encode()
    out = struct.pack("<H", len(h)) + h
    out += struct.pack("<IQIqQI", c["server_id"], c["ino"], c["rights"], c["expiry_ns"],
                       c["epoch"], c["gen"])
    for first, count in c["ranges"]:
        out += struct.pack("<QQ", first, count)
    return out


def signed(c, key):
    """@c with its MAC made with @key."""
    return dict(c, mac=hmac.new(key, cap_canonical(c), hashlib.sha256).digest())


def cap_key(c):
    return w.load_secret(c.dir / "cap.key")


# ------------------------------------------------------------------ the wire
def error_message(body):
    return w.decode(body).get(1, [b""])[0].decode(errors="replace")


def io_read(port, key, cap, block, nblocks, claim="client"):
    """READ on a fresh connection: (status, error message or '', data)."""
    io = connect(port, key, claim)
    try:
        status, body, data = io.request(w.OP_READ, io_read_req(cap, block, nblocks))
    finally:
        io.close()
    return status, (error_message(body) if status < 0 else ""), data


def io_write(port, key, cap, block, data):
    io = connect(port, key)
    try:
        status, body, _ = io.request(w.OP_WRITE, io_write_req(cap, block, data), data)
    finally:
        io.close()
    return status, (error_message(body) if status < 0 else "")


def raw_layout(c, path, length, cr=ROOT):
    ms = connect(c.port, client_secret(c))
    try:
        status, lay = layout(ms, ino_of(ms, c, path), length, cr)
    finally:
        ms.close()
    assert status == 0, "LAYOUT of %s: %d" % (path, status)
    return lay


def extents_by_server(c, lay):
    """{server id: (port, first extent on it, its capability as a dict)}."""
    ports = ioserver_ports(c)
    out = {}
    for ext in lay["extents"]:
        if ext["server"] in out or ext["unwritten"]:
            continue
        cap = next(cap_decode(cp) for cp in lay["caps"]
                   if cap_decode(cp)["server_id"] == ext["server"])
        out[ext["server"]] = (ports[ext["server"]], ext, cap)
    return out


def refused(what, got, status, why):
    st, msg, data = got
    assert st == status and data == b"", \
        "%s: status %d (%r), %d bytes; want %d (%s) and no data" % (what, st, msg, len(data),
                                                                  status, why)
    assert why in msg, "%s: refused, but saying %r, not %r" % (what, msg, why)


def still_serves(c, path, data):
    """The servers serve a normal client: the file reads back through the mount."""
    drop_cache(path)
    assert_bytes_equal(data, path.read_bytes(), "%s after the refused capabilities" % path)
    p = path.parent / ("after-" + os.urandom(3).hex())
    more = os.urandom(3 * MiB + 5)
    write_file(p, more)
    drop_cache(p)
    assert_bytes_equal(more, p.read_bytes(), "file written after the refused capabilities")


# ------------------------------------------------------------------ widened, forged
def test_widened_or_forged_capability_is_refused(cluster, workdir):
    """A genuine READ capability whose range was widened (count + 1 MiB of
    blocks) or moved on by a block, whose rights were widened to READ|WRITE,
    whose expiry was pushed out, or whose server id was changed, all with the
    MAC left as it was, is refused with -EACCES ("forged capability") and no
    data, for the blocks the grant covered and for those it did not; so is one
    re-signed with the cluster secret (the only key a client holds). The same
    capability re-encoded and re-signed with cap.key is served, widened or not:
    the MAC is what refuses them. A write through the widened rights left the
    file as it was."""
    c = cluster
    data = os.urandom(2 * MiB)
    p = workdir / "f"
    write_file(p, data)
    os.chown(p, 1000, 1000)
    os.chmod(p, 0o644)
    os.chmod(workdir, 0o755)
    lay = raw_layout(c, p, len(data), cr=w.cred(2000, 2000))   # others may only read
    sid, (port, ext, cap) = sorted(extents_by_server(c, lay).items())[0]
    assert cap["rights"] == w.CAP_READ, cap
    key = client_secret(c)
    n = ext["length"] // BLK
    want = data[ext["offset"]:ext["offset"] + n * BLK]
    first, count = cap["ranges"][0]
    assert first == ext["block"], (cap, ext)

    # the genuine one, and the test's own encoding of it, are served
    for what, cp in (("genuine", cap), ("re-signed with cap.key", signed(cap, cap_key(c)))):
        st, msg, got = io_read(port, key, cap_encode(cp), ext["block"], n)
        assert st == 0, "READ with the %s capability: %d (%s)" % (what, st, msg)
        assert_bytes_equal(want, got, "READ with the %s capability" % what)

    wider = dict(cap, ranges=[(first, count + 256)] + cap["ranges"][1:])
    shifted = dict(cap, ranges=[(first + 1, count)] + cap["ranges"][1:])
    cases = [
        ("range count widened, READ inside the grant", wider, ext["block"], n),
        ("range count widened, READ past the grant", wider, first + count, 256),
        ("range moved on by a block, READ of its last", shifted, first + count, 1),
        ("rights widened to READ|WRITE", dict(cap, rights=w.CAP_READ | w.CAP_WRITE),
         ext["block"], n),
        ("expiry pushed out by a day", dict(cap, expiry_ns=cap["expiry_ns"] + 86400 * 10**9),
         ext["block"], n),
        ("holder changed to 'server'", dict(cap, holder="server"), ext["block"], n),
        ("server id changed", dict(cap, server_id=cap["server_id"] + 100), ext["block"], n),
        ("re-signed with the cluster secret", signed(wider, key), first + count, 256),
        ("no MAC", dict(cap, mac=b""), ext["block"], n),
    ]
    for what, cp, block, nb in cases:
        refused(what, io_read(port, key, cap_encode(cp), block, nb), EACCES,
                "forged capability")
    # widened and re-signed with the real key: served, so the MAC alone refused it
    st, msg, got = io_read(port, key, cap_encode(signed(wider, cap_key(c))), first + count, 1)
    assert st == 0 and len(got) == BLK, \
        "the widened capability re-signed with cap.key: %d (%s)" % (st, msg)

    # WRITE: the read-only grant is refused for what it does not grant, widened or not
    junk = b"W" * BLK
    st, msg = io_write(port, key, cap_encode(cap), ext["block"], junk)
    assert (st, msg) == (EACCES, "capability does not grant write"), (st, msg)
    st, msg = io_write(port, key, cap_encode(dict(cap, rights=w.CAP_READ | w.CAP_WRITE)),
                       ext["block"], junk)
    assert (st, msg) == (EACCES, "forged capability"), \
        "WRITE with rights widened to READ|WRITE: %d (%s)" % (st, msg)
    still_serves(c, p, data)


# ------------------------------------------------------------------ misdirected
def test_capability_of_another_ioserver_is_refused(cluster, workdir):
    """A capability for I/O server A, presented at I/O server B (on the
    holder's own kind of connection) for A's blocks, is refused with -EACCES
    ("capability is for another I/O server") and no data; rewritten to name B
    with A's MAC it is forged (-EACCES). Each server serves its own capability
    before and after."""
    c = cluster
    assert c.n_io >= 2
    data = os.urandom(4 * MiB)          # 4 chunks: both servers
    p = workdir / "f"
    write_file(p, data)
    byserver = extents_by_server(c, raw_layout(c, p, len(data)))
    assert len(byserver) >= 2, "4 MiB on one server only: %r" % byserver
    (a, (port_a, ext_a, cap_a)), (b, (port_b, ext_b, cap_b)) = sorted(byserver.items())[:2]
    key = client_secret(c)
    na = ext_a["length"] // BLK
    want_a = data[ext_a["offset"]:ext_a["offset"] + na * BLK]

    def own_ok(when):
        for port, ext, cap in ((port_a, ext_a, cap_a), (port_b, ext_b, cap_b)):
            nb = ext["length"] // BLK
            st, msg, got = io_read(port, key, cap_encode(cap), ext["block"], nb)
            assert st == 0, "%s: server %d, its own capability: %d (%s)" % (
                when, cap["server_id"], st, msg)
            assert_bytes_equal(data[ext["offset"]:ext["offset"] + nb * BLK], got,
                               "%s: READ at server %d" % (when, cap["server_id"]))

    own_ok("before")
    refused("server %d's capability at server %d" % (a, b),
            io_read(port_b, key, cap_encode(cap_a), ext_a["block"], na), EACCES,
            "capability is for another I/O server")
    refused("server %d's capability at server %d" % (b, a),
            io_read(port_a, key, cap_encode(cap_b), ext_b["block"], ext_b["length"] // BLK),
            EACCES, "capability is for another I/O server")
    refused("server %d's capability renamed to %d" % (a, b),
            io_read(port_b, key, cap_encode(dict(cap_a, server_id=b)), ext_a["block"], na),
            EACCES, "forged capability")
    st, _, got = io_read(port_a, key, cap_encode(cap_a), ext_a["block"], na)
    assert st == 0
    assert_bytes_equal(want_a, got, "server %d's own READ" % a)
    own_ok("after")
    still_serves(c, p, data)


# ------------------------------------------------------------------ expired
CAP_LIFETIME_S = 3


def test_expired_capability_is_refused(fresh_cluster):
    """With the metaserver's cap_lifetime at 3 s (--cap-lifetime), a LAYOUT's
    capabilities expire 3 s after they were issued (expiry_ns says so). Once
    the wall clock is past that, a READ and a WRITE with one get -EKEYEXPIRED
    ("capability expired") and no data; the same capability with its expiry
    pushed out (MAC kept) is forged (-EACCES). A fresh capability reads the
    file, and the mount, whose cached capabilities expire all the time, reads
    and writes as before."""
    c = fresh_cluster
    data = os.urandom(2 * MiB)
    p = c.mnt / "f"
    write_file(p, data)
    saved = c.kill9(c.port)
    saved["argv"] = saved["argv"] + ["--cap-lifetime", str(CAP_LIFETIME_S)]
    c.restart(saved)
    c.wait_servers_up()
    key = client_secret(c)

    def fresh():
        before = time.time_ns()
        lay = raw_layout(c, p, len(data))
        sid, (port, ext, cap) = sorted(extents_by_server(c, lay).items())[0]
        assert before <= cap["expiry_ns"] <= time.time_ns() + CAP_LIFETIME_S * 10**9, \
            "a capability of a %d s cap_lifetime expires at %d (asked at %d)" % (
                CAP_LIFETIME_S, cap["expiry_ns"], before)
        return port, ext, cap

    # a fresh one works (if this machine is so slow that it expired on the way, again)
    for _ in range(10):
        port, ext, cap = fresh()
        n = ext["length"] // BLK
        st, msg, got = io_read(port, key, cap_encode(cap), ext["block"], n)
        if st == 0 or not (st == EKEYEXPIRED and time.time_ns() >= cap["expiry_ns"]):
            break
    assert st == 0, "READ with a fresh capability: %d (%s)" % (st, msg)
    want = data[ext["offset"]:ext["offset"] + n * BLK]
    assert_bytes_equal(want, got, "READ with a fresh capability")

    wait_until(lambda: time.time_ns() > cap["expiry_ns"] + 200 * 10**6,
               "the capability to expire", attempts=200, interval=0.1)
    refused("READ with an expired capability", io_read(port, key, cap_encode(cap),
                                                       ext["block"], n),
            EKEYEXPIRED, "capability expired")
    st, msg = io_write(port, key, cap_encode(cap), ext["block"], b"E" * BLK)
    assert (st, msg) == (EKEYEXPIRED, "capability expired"), \
        "WRITE with an expired capability: %d (%s)" % (st, msg)
    refused("READ with an expired capability whose expiry was pushed out",
            io_read(port, key, cap_encode(dict(cap, expiry_ns=time.time_ns() + 3600 * 10**9)),
                    ext["block"], n),
            EACCES, "forged capability")
    for _ in range(10):
        port, ext, cap = fresh()
        st, msg, got = io_read(port, key, cap_encode(cap), ext["block"], n)
        if st == 0 or not (st == EKEYEXPIRED and time.time_ns() >= cap["expiry_ns"]):
            break
    assert st == 0, "READ with a fresh capability after the expired ones: %d (%s)" % (st, msg)
    assert_bytes_equal(want, got, "READ with a fresh capability after the expired ones")
    time.sleep(CAP_LIFETIME_S + 1)      # the mount's own capabilities have expired too
    still_serves(c, p, data)
