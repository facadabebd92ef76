# SPDX-License-Identifier: MIT
"""Striping: a 100 MiB file holds blocks on both I/O servers (proved by `rdfs layout`)."""
import os
import re

from conftest import MiB, assert_bytes_equal, drop_cache

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(written|unwritten|stale|building)\s*$")


def parse_layout(text):
    """The extent rows of `rdfs layout` (FILE_OFFSET LENGTH SERVER BLOCK STATE)."""
    rows = []
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            rows.append(dict(offset=int(m.group(1)), length=int(m.group(2)),
                             server=int(m.group(3)), block=int(m.group(4)),
                             state=m.group(5)))
    return rows


def test_100mib_file_striped_over_both_servers(cluster, workdir):
    size = 100 * MiB
    p = workdir / "big"
    data = os.urandom(size)
    with open(p, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    rel = "/" + str(p.relative_to(cluster.mnt))
    out = cluster.rdfs("layout", rel).stdout
    extents = parse_layout(out)
    assert extents, "no extents parsed from rdfs layout:\n" + out
    servers = {e["server"] for e in extents}
    assert len(servers) == 2, "extents on servers %s; rdfs layout printed:\n%s" % (servers, out)
    # Every byte of the file is in exactly one written extent.
    pos = 0
    for e in sorted(extents, key=lambda e: e["offset"]):
        assert e["offset"] == pos, "gap or overlap at %d:\n%s" % (pos, out)
        assert e["state"] == "written", out
        pos += e["length"]
    assert pos >= size
    # Each server holds a fair share (chunks go round-robin).
    for s in servers:
        held = sum(e["length"] for e in extents if e["server"] == s)
        assert held >= size // 4, "server %d holds only %d bytes:\n%s" % (s, held, out)
    drop_cache(p)
    with open(p, "rb") as f:
        assert_bytes_equal(data, f.read())
