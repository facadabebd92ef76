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
                               + w.field_varint(1, 0) + w.field_varint(2, 10)}
    seeds["fuzz_cap"] = {}
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
