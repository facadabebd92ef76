# SPDX-License-Identifier: MIT
"""docs/PROTOCOL.md against the code: its opcode table is what wire/rdfs_frame.h
defines, names only messages proto/rdfs.proto has, and lists every opcode the
metaserver's op table and the I/O server's dispatch serve under that server.
No cluster; reads files only."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def opcodes():
    """{NAME: number} of enum rdfs_op in wire/rdfs_frame.h (without RDFS_OP_MAX)."""
    src = (REPO / "wire" / "rdfs_frame.h").read_text()
    body = src[src.index("enum rdfs_op {"):]
    body = body[:body.index("};")]
    ops = {m.group(1): int(m.group(2)) for m in re.finditer(r"RDFS_OP_(\w+)\s*=\s*(\d+)", body)}
    ops.pop("MAX")
    return ops


def doc_table():
    """{NAME: row dict} of the operations table of docs/PROTOCOL.md."""
    rows = {}
    for line in (REPO / "docs" / "PROTOCOL.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and re.fullmatch(r"[A-Z_]+", cells[0]) and cells[1].isdigit():
            rows[cells[0]] = dict(number=int(cells[1]), server=cells[2], who=cells[3],
                                  request=cells[4], reply=cells[5])
    return rows


def served(path, pattern):
    return set(re.findall(pattern, (REPO / path).read_text())) - {"MAX"}


def test_every_opcode_is_documented_with_its_number():
    ops, rows = opcodes(), doc_table()
    assert set(rows) == set(ops), "documented but not defined: %s; defined but not " \
        "documented: %s" % (sorted(set(rows) - set(ops)), sorted(set(ops) - set(rows)))
    wrong = {n: (rows[n]["number"], ops[n]) for n in ops if rows[n]["number"] != ops[n]}
    assert not wrong, "documented number != wire/rdfs_frame.h: %s" % wrong


def test_documented_messages_exist_in_the_proto():
    messages = set(re.findall(r"^message (\w+)", (REPO / "proto" / "rdfs.proto").read_text(),
                              re.M))
    named = set()
    for r in doc_table().values():
        named |= set(re.findall(r"`(\w+)`", r["request"] + r["reply"]))
    assert named, "the table names no message"
    assert named <= messages, "not in proto/rdfs.proto: %s" % sorted(named - messages)


def test_what_each_server_dispatches_is_documented_for_it():
    rows = doc_table()
    ms = served("metaserver/ops.c", r"\[RDFS_OP_(\w+)\]\s*=")
    ios = served("ioserver/server.c", r"case RDFS_OP_(\w+):")
    assert ms and ios, "the dispatch tables moved: update this test"
    for name in ms:
        assert rows[name]["server"] in ("metaserver", "both"), (name, rows[name])
    for name in ios:
        assert rows[name]["server"] in ("ioserver", "both"), (name, rows[name])
    documented_ms = {n for n, r in rows.items() if r["server"] == "metaserver"}
    assert documented_ms <= ms, "documented for the metaserver, not in its op table: %s" \
        % sorted(documented_ms - ms)
