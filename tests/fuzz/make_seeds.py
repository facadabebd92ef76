#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the seed corpus of tests/fuzz (tests/fuzz/corpus/NAME/): a few valid
inputs of each kind, so the fuzzers start from the formats rather than from
nothing. Deterministic; run it again after a wire format changes:
    python3 tests/fuzz/make_seeds.py
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import rdfswire as w  # noqa: E402

VERBS_MAGIC = 0x42564452
# metaserver opcodes rdfswire does not name (wire/rdfs_frame.h)
SHIFT, QUOTA_GET, QUOTA_SET, QUOTA_LIST = 49, 50, 51, 52
EAGER, RNDV, DONE, CREDIT, SINK, PLACED = 1, 2, 3, 4, 5, 6


def frame(op, tag, body=b"", data=b"", flags=0, status=0):
    return w.HDR.pack(w.MAGIC, w.VERSION, flags, op, status, tag, len(body), len(data))


def verbs(typ, credits=1, cookie=0, status=0, descs=(), flags=0):
    hdr = struct.pack("<IBBHIiHBB", VERBS_MAGIC, 1, typ, credits, cookie, status, len(descs),
                      flags, 0)
    return hdr + b"".join(struct.pack("<QII", a, n, k) for a, n, k in descs)


def pb_kind(name):
    """The first input byte that makes fuzz_pb_bodies decode rdfs__NAME: its
    index in the target's descriptor list, read from the source so that a
    message added to the list cannot leave a seed pointing at another one."""
    import re
    with open(os.path.join(HERE, "fuzz_pb_bodies.c")) as f:
        names = re.findall(r"&rdfs__(\w+)__descriptor", f.read())
    return names.index(name)


# fuzz_ms_dispatch: the roles its role byte picks, and the core it builds
# (inodes in creation order: / f0 f1 big d d/f d/sub ln; I/O servers 1-3)
CLIENT, SQUASHED, NODE, SERVER = 0, 1, 2, 3
F1, BIG, DIR_D, SUB, LN = 3, 4, 5, 7, 8


# A POSIX ACL xattr value (Linux's form): version 2, then (tag, perm, id) entries.
ACL = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in (
    (0x01, 6, 0xFFFFFFFF), (0x02, 6, 2000), (0x04, 4, 0xFFFFFFFF), (0x10, 6, 0xFFFFFFFF),
    (0x20, 0, 0xFFFFFFFF)))


def ms_req(op, body=b"", role=CLIENT):
    """One request of a fuzz_ms_dispatch input: opcode, role, length, body."""
    return struct.pack("<BBH", op, role, len(body)) + body


def ms_seeds():
    v, b = w.field_varint, w.field_bytes
    root = b(1, w.cred(0, 0))
    user = b(1, w.cred(1000, 1000, (100,)))
    rng = lambda first, count: b(5, v(1, first) + v(2, count))  # noqa: E731
    s = {
        "ping": ms_req(w.OP_PING),
        "lookup": ms_req(w.OP_LOOKUP, root + v(2, 1) + b(3, "f1")),
        "getattr": ms_req(w.OP_GETATTR, user + v(2, F1)),
        "setattr-chmod": ms_req(w.OP_SETATTR, root + v(2, F1) + v(3, 1) + v(4, 0o600)),
        "setattr-truncate": ms_req(w.OP_SETATTR, root + v(2, BIG) + v(3, 8) + v(7, 5000)),
        "mknod-open": ms_req(w.OP_MKNOD, user + v(2, DIR_D) + b(3, "new") + v(4, 0o100644)
                             + v(7, 1) + v(8, 2)),
        "mkdir": ms_req(w.OP_MKDIR, root + v(2, 1) + b(3, "nd") + v(4, 0o755)),
        "unlink": ms_req(w.OP_UNLINK, root + v(2, 1) + b(3, "f0")),
        "rmdir": ms_req(22, root + v(2, DIR_D) + b(3, "sub"), SQUASHED),
        "rename": ms_req(w.OP_RENAME, root + v(2, 1) + b(3, "f1") + v(4, DIR_D) + b(5, "moved")),
        "rename-exchange": ms_req(w.OP_RENAME, root + v(2, 1) + b(3, "big") + v(4, DIR_D)
                                  + b(5, "f") + v(6, 2)),
        "link": ms_req(w.OP_LINK, root + v(2, F1) + v(3, DIR_D) + b(4, "l2")),
        "symlink": ms_req(w.OP_SYMLINK, user + v(2, DIR_D) + b(3, "s2") + b(4, "../f1"), NODE),
        "readlink": ms_req(26, user + v(2, LN)),
        "readdir": ms_req(w.OP_READDIR, user + v(2, DIR_D) + b(3, "f") + v(4, 2)),
        "statfs": ms_req(w.OP_STATFS, user),
        "getxattr": ms_req(w.OP_GETXATTR, root + v(2, F1) + b(3, "user.fuzz")),
        "setxattr": ms_req(w.OP_SETXATTR, root + v(2, F1) + b(3, "user.x") + b(4, "value")
                           + v(5, 1)),
        "listxattr": ms_req(w.OP_LISTXATTR, root + v(2, F1)),
        "removexattr": ms_req(32, root + v(2, F1) + b(3, "user.fuzz")),
        "open": ms_req(33, user + v(2, BIG) + v(3, 2)),
        "release": ms_req(34, v(1, 1)),
        "layout": ms_req(w.OP_LAYOUT, user + v(2, BIG) + v(4, 1 << 20)),
        "layout-allocate": ms_req(w.OP_LAYOUT, root + v(2, BIG) + v(3, 1 << 21)
                                  + v(4, 1 << 20) + v(5, 1)),
        "commit": ms_req(36, root + v(2, F1) + v(3, 12288) + rng(0, 12288)),
        "register": ms_req(w.OP_REGISTER, b(1, "tcp://127.0.0.1:7200") + b(2, "new-volume")
                           + v(3, 4096) + b(4, "ios-new") + v(5, 1) + b(6, "rack9"), SERVER),
        "server-list": ms_req(w.OP_SERVER_LIST),
        "node-set": ms_req(39, b(1, "n2") + v(3, 1) + v(4, 1) + v(5, 99) + v(6, 99), SERVER),
        "node-revoke": ms_req(40, b(1, "fuzz"), SERVER),
        "node-list": ms_req(41, b"", SERVER),
        "punch": ms_req(42, root + v(2, BIG) + v(3, 4096) + v(4, 8192)),
        "shift-collapse": ms_req(SHIFT, root + v(2, BIG) + v(3, 4096) + v(4, 8192)),
        "shift-insert": ms_req(SHIFT, root + v(2, BIG) + v(3, 4096) + v(4, 4096) + v(6, 1)),
        # uids 1000.. are 51000.., gids 100.. are 5100.., unmapped ids squashed
        "node-set-maps": ms_req(39, b(1, "n3") + v(3, 1) + v(4, 1) + v(5, 99) + v(6, 99)
                                + v(7, 1) + b(8, v(2, 1000) + v(3, 51000) + v(4, 100))
                                + b(8, v(1, 1) + v(2, 100) + v(3, 5100) + v(4, 10)), SERVER),
        "fsck-repair": ms_req(43, v(1, 1) + v(2, 10), SERVER),
        "stale": ms_req(44, root + v(2, BIG) + v(4, 1) + rng(0, 4096)),
        "drain": ms_req(45, v(1, 2), SERVER),
        "rebalance": ms_req(46, v(2, 10), SERVER),
        # quotas: a user's limits (by root and by the server key), one's own
        # usage, the list; a project on d that a create inherits and a rename
        # into it from outside refuses (EXDEV); a create refused at the limit
        "quota-set": ms_req(QUOTA_SET, root + v(2, 0) + v(3, 1000) + v(4, 15) + v(5, 8) + v(6, 16)
                            + v(7, 2) + v(8, 3))
        + ms_req(QUOTA_SET, user + v(2, 2) + v(3, 7) + v(4, 16) + v(9, 60), SERVER),
        "quota-get": ms_req(QUOTA_GET, user + v(2, 0) + v(3, 1000))
        + ms_req(QUOTA_GET, user + v(2, 1) + v(3, 100), SQUASHED),
        "quota-list": ms_req(QUOTA_LIST, root + v(2, 0) + v(3, 0) + v(4, 2)),
        "project": ms_req(w.OP_SETXATTR, root + v(2, DIR_D) + b(3, "rdfs.project") + b(4, "7"))
        + ms_req(w.OP_MKNOD, user + v(2, DIR_D) + b(3, "inproj") + v(4, 0o100644))
        + ms_req(w.OP_RENAME, root + v(2, 1) + b(3, "f1") + v(4, DIR_D) + b(5, "moved"))
        + ms_req(QUOTA_SET, root + v(2, 2) + v(3, 7) + v(4, 8) + v(8, 1))
        + ms_req(w.OP_MKDIR, user + v(2, DIR_D) + b(3, "over") + v(4, 0o755)),
        # POSIX ACLs: u::rw- u:2000:rw- g::r-- m::rw- o::--- on f1, as its
        # default on d, then a create in d whose umask the default replaces
        "setxattr-acl": ms_req(w.OP_SETXATTR, root + v(2, F1)
                               + b(3, "system.posix_acl_access") + b(4, ACL)),
        "acl-inherit": ms_req(w.OP_SETXATTR, root + v(2, DIR_D)
                              + b(3, "system.posix_acl_default") + b(4, ACL))
        + ms_req(w.OP_MKNOD, user + v(2, DIR_D) + b(3, "inh") + v(4, 0o100666) + v(9, 0o077))
        + ms_req(w.OP_MKDIR, root + v(2, DIR_D) + b(3, "inhd") + v(4, 0o777) + v(5, 0o022)),
        # a file's life in one input: create and open, allocate, write, close, remove
        "sequence": ms_req(w.OP_MKNOD, root + v(2, 1) + b(3, "seq") + v(4, 0o100644) + v(7, 1)
                           + v(8, 2))
        + ms_req(w.OP_LAYOUT, root + v(2, 9) + v(4, 1 << 20) + v(5, 1) + v(6, 1))
        + ms_req(36, root + v(2, 9) + v(3, 4096) + rng(0, 4096) + v(6, 1))
        + ms_req(34, v(1, 1)) + ms_req(w.OP_UNLINK, root + v(2, 1) + b(3, "seq")),
    }
    return s


# fuzz_ios_dispatch: its connections, and what it does to a capability
IOS_CLIENT, IOS_NODE, IOS_SERVER = 0, 1, 2
AS_SENT, SIGNED, FIXED, GRANTED = 0, 4, 8, 12
OP_IO_COMMIT, OP_ZERO, OP_FENCE, OP_COPY = 66, 68, 69, 70


def ios_cap(rights, ranges, holder="client", ino=5):
    """A Capability for server 7, its MAC made up: the target signs it (mode)."""
    v, b = w.field_varint, w.field_bytes
    return (v(1, 7) + v(2, ino) + v(3, rights) + v(4, 1 << 62)
            + b"".join(b(5, v(1, f) + v(2, n)) for f, n in ranges)
            + b(6, b"\x5a" * 32) + b(7, holder))


def io_req(cap, first, count, head=0, length=None, stable=False):
    v, b = w.field_varint, w.field_bytes
    length = count * 4096 - head if length is None else length
    return (b(1, cap) + v(2, first) + v(3, count) + v(4, head) + v(5, length)
            + (v(6, 1) if stable else b""))


def ios_seeds():
    v, b = w.field_varint, w.field_bytes
    rw = w.CAP_READ | w.CAP_WRITE
    cap = ios_cap(rw, [(0, 64)])
    s = {
        "read": ms_req(w.OP_READ, io_req(cap, 0, 2), GRANTED | IOS_CLIENT),
        "read-partial": ms_req(w.OP_READ, io_req(cap, 3, 2, head=100, length=5000),
                               FIXED | IOS_CLIENT),
        "read-forged": ms_req(w.OP_READ, io_req(cap, 0, 1), AS_SENT | IOS_CLIENT),
        "read-signed-as-is": ms_req(w.OP_READ, io_req(ios_cap(w.CAP_READ, [(0, 8)], "node:fuzz:1"),
                                                      1, 1), SIGNED | IOS_NODE),
        "write-stable": ms_req(w.OP_WRITE, io_req(cap, 8, 2, stable=True), GRANTED | IOS_CLIENT),
        "write-partial": ms_req(w.OP_WRITE, io_req(cap, 12, 1, head=10, length=100),
                                GRANTED | IOS_NODE),
        "write-then-commit-then-read":
            ms_req(w.OP_WRITE, io_req(cap, 16, 4), GRANTED | IOS_CLIENT)
            + ms_req(OP_IO_COMMIT, io_req(cap, 16, 4, length=0), GRANTED | IOS_CLIENT)
            + ms_req(w.OP_READ, io_req(cap, 16, 4), GRANTED | IOS_CLIENT),
        "zero": ms_req(OP_ZERO, io_req(cap, 20, 3, length=0), GRANTED | IOS_SERVER),
        "copy": ms_req(OP_COPY, b(1, io_req(cap, 30, 2)) + b(2, b(1, cap) + v(2, 0) + v(3, 2)),
                       GRANTED | IOS_CLIENT),
        "copy-unaligned": ms_req(OP_COPY, b(1, io_req(cap, 40, 2, head=7, length=5000))
                                 + b(2, b(1, cap) + v(2, 1) + v(3, 2) + v(4, 300)),
                                 GRANTED | IOS_CLIENT),
        "fence": ms_req(OP_FENCE, b(1, v(1, 99) + v(2, 3)) + v(2, 1 << 62), IOS_SERVER),
        "fence-from-client": ms_req(OP_FENCE, b(1, v(1, 99) + v(2, 3)) + v(2, 1 << 62),
                                    IOS_CLIENT),
        "volume-info": ms_req(w.OP_VOLUME_INFO),
        "not-ours": ms_req(w.OP_LOOKUP, b(1, w.cred(0, 0)) + v(2, 1) + b(3, "f")),
    }
    return s


def vectors():
    out = []
    with open(os.path.join(REPO, "client-lkm", "vectors", "vectors.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                kind, name = line.split()[:2]
                with open(os.path.join(REPO, "client-lkm", "vectors", name + ".bin"), "rb") as b:
                    out.append((kind, name, b.read()))
    return out


def main():
    seeds = {}
    body = w.field_varint(2, 1) + w.field_bytes(3, b"name")
    seeds["fuzz_frame"] = {
        "request": frame(w.OP_LOOKUP, 7, body),
        "reply-more": frame(64, 9, data=b"x" * 10, flags=w.FLAG_REPLY | w.FLAG_MORE),
        "reply-error": frame(64, 9, flags=w.FLAG_REPLY, status=-5),
    }
    eager = frame(65, 3, b"body", b"data")
    seeds["fuzz_verbs_msg"] = {
        "eager": verbs(EAGER) + eager + b"body" + b"data",
        "rndv": verbs(RNDV, cookie=5, descs=[(0x1000, 4096, 77)]) + frame(65, 4, b"b", b"\0" * 4096)
        + b"b",
        "sink": verbs(SINK, descs=[(0x2000, 8192, 78)]) + frame(64, 5, b"req"),
        "placed": verbs(PLACED, descs=[(0, 4096, 0)]) + frame(64, 5, flags=w.FLAG_REPLY),
        "done": verbs(DONE, cookie=5),
        "credit": verbs(CREDIT, credits=3),
        "params": struct.pack("<IBBHI", VERBS_MAGIC, 1, 0, 64, 65536),
    }
    seeds["fuzz_lkm_codec"] = {}
    seeds["fuzz_pb_bodies"] = {"lookup": bytes([pb_kind("lookup_req")]) + body,
                               # RebalanceReq {cancel, threshold_pct}
                               "rebalance": bytes([pb_kind("rebalance_req")])
                               + w.field_varint(1, 0) + w.field_varint(2, 10),
                               # QuotaSetReq {cred, type, id, valid, block_soft}
                               "quota-set": bytes([pb_kind("quota_set_req")])
                               + w.field_bytes(1, w.cred(0, 0)) + w.field_varint(2, 0)
                               + w.field_varint(3, 1000) + w.field_varint(4, 1)
                               + w.field_varint(5, 256),
                               # QuotaReply {quotas [{type, id, blocks}], grace_s, more}
                               "quota-reply": bytes([pb_kind("quota_reply")])
                               + w.field_bytes(1, w.field_varint(1, 2) + w.field_varint(2, 7)
                                               + w.field_varint(3, 9))
                               + w.field_bytes(2, w.varint(604800) * 3)
                               + w.field_varint(3, 1),
                               # DirChangeReply {parent_attr {ino, mode}, newparent_attr}
                               "dir-change": bytes([pb_kind("dir_change_reply")])
                               + w.field_bytes(1, w.field_varint(1, 2) + w.field_varint(2, 0o40755))
                               + w.field_bytes(2, w.field_varint(1, 3))}
    seeds["fuzz_cap"] = {}
    seeds["fuzz_ms_dispatch"] = ms_seeds()
    seeds["fuzz_ios_dispatch"] = ios_seeds()
    for kind, name, data in vectors():
        # the wire's vectors (client-lkm/vectors: frame, verbs, params) seed its decoders
        if kind == "frame":
            seeds["fuzz_frame"]["vec-" + name] = data
            continue
        if kind in ("verbs", "params"):
            seeds["fuzz_verbs_msg"]["vec-" + name] = data
            continue
        seeds["fuzz_lkm_codec"][name] = bytes([0 if kind == "ioreq" else 1]) + data
        if kind == "ioreq":
            seeds["fuzz_pb_bodies"]["ioreq-" + name] = bytes([pb_kind("io_req")]) + data
            seeds["fuzz_ios_dispatch"]["lkm-" + name] = ms_req(w.OP_READ, data, GRANTED)
            cap = w.decode(data).get(1)
            if cap:
                seeds["fuzz_cap"][name] = cap[0]
    for target, files in seeds.items():
        d = os.path.join(HERE, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
