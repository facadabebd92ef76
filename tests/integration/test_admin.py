# SPDX-License-Identifier: MIT
"""The admin tool's layout, tree and server commands, on a cluster of three I/O servers.

What these tests prove:
  - `rdfs setstripe -c -S -i` on a directory: files written into it through the
    mount (and into a subdirectory made after) have the chunk size and the
    servers asked for, as `rdfs layout --json` shows; `rdfs getstripe` says so;
  - `rdfs setstripe` on a file with data is refused (exit 1, a message), on a
    new path it creates an empty file with the layout, which its data then
    follows; bad values are usage errors;
  - `rdfs du` and `rdfs find` (the metaserver walks the tree) print exactly
    what du --apparent-size, du -k and find print through the mount, for a tree
    of a few hundred files (with a hard link, symbolic links, empty
    directories), compared as sets of lines; find's expressions with -o, ! and
    -not, ( ) and -print/-print0 as GNU find parses and evaluates them, compared
    record by record (each ending in its newline or NUL), byte for byte; bad
    expressions are usage errors;
  - `rdfs servers label` and `set --read-only` round-trip through `servers
    list --json`, and a read-only server gets no block of a file written after,
    while what it holds still reads back;
  - every --json output of the tool parses.
"""
import json
import os
import re
import subprocess

import pytest

from conftest import MiB, _start, _stop, fsck_clean


@pytest.fixture(scope="module")
def c3():
    c = _start("admin", 3)
    yield c
    try:
        fsck_clean(c)
    finally:
        _stop(c)


def rel(c, p):
    return "/" + str(p.relative_to(c.mnt))


def jrdfs(c, *args):
    p = c.rdfs(*args)
    return json.loads(p.stdout)


def servers(c):
    return {s["id"]: s for s in jrdfs(c, "servers", "list", "--json")["servers"]}


def first_copies(layout):
    """{chunk index: server} of the written extents of `rdfs layout --json`."""
    cs = layout["chunk_size"]
    out = {}
    for e in layout["extents"]:
        assert e["state"] == "written", layout
        for off in range(e["file_offset"], e["file_offset"] + e["length"], 4096):
            out.setdefault(off // cs, set()).add(e["server"])
    return out


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())


def test_setstripe_on_a_directory_places_new_files(c3):
    ids = sorted(servers(c3))
    assert len(ids) == 3
    d = c3.mnt / "striped"
    d.mkdir()
    c3.rdfs("setstripe", "-c", "2", "-S", "256K", "-i", str(ids[1]), rel(c3, d))
    g = jrdfs(c3, "getstripe", "--json", rel(c3, d))["entries"][0]
    assert (g["type"], g["chunk_size"], g["stripe_count"], g["stripe_index"]) == \
        ("dir", 262144, 2, ids[1]), g
    assert c3.rdfs("getstripe", "-c", rel(c3, d)).stdout.strip() == "2"
    (d / "sub").mkdir()
    want = {0: ids[1], 1: ids[2]}
    for p in (d / "a", d / "b", d / "sub" / "c"):
        data = os.urandom(2 * MiB + 4096)
        write(p, data)
        lay = jrdfs(c3, "layout", "--json", rel(c3, p))
        assert lay["chunk_size"] == 262144, lay
        chunks = first_copies(lay)
        assert len(chunks) == 9, lay
        for i, srv in chunks.items():
            assert srv == {want[i % 2]}, "chunk %d of %s on %s:\n%s" % (i, p, srv, lay)
        with open(p, "rb") as f:
            assert f.read() == data
        g = jrdfs(c3, "getstripe", "--json", rel(c3, p))["entries"][0]
        assert g["servers"] == [ids[1], ids[2]], g
    # through the mount, the same attribute
    v = subprocess.run(["getfattr", "--only-values", "-n", "rdfs.stripe", str(d / "sub")],
                       capture_output=True, text=True)
    if v.returncode == 0:
        assert v.stdout == "chunk_size=262144 stripe_count=2 stripe_index=%d" % ids[1]
    # -d: the defaults again
    c3.rdfs("setstripe", "-d", rel(c3, d))
    g = jrdfs(c3, "getstripe", "--json", rel(c3, d))["entries"][0]
    assert (g["stripe_count"], g["stripe_index"]) == (-1, -1), g


def test_setstripe_refuses_a_file_with_data_and_creates_new_ones(c3):
    ids = sorted(servers(c3))
    d = c3.mnt / "refuse"
    d.mkdir()
    f = d / "full"
    write(f, b"x" * 100000)
    p = c3.rdfs("setstripe", "-c", "1", rel(c3, f), check=False)
    assert p.returncode == 1, p
    assert "has blocks already" in p.stderr, p.stderr
    # a new path: created empty with the layout; its data follows it
    n = d / "new"
    c3.rdfs("setstripe", "-c", "1", "-i", str(ids[2]), "-S", "64k", rel(c3, n))
    assert n.exists() and n.stat().st_size == 0
    write(n, os.urandom(MiB))
    lay = jrdfs(c3, "layout", "--json", rel(c3, n))
    assert lay["chunk_size"] == 65536
    assert {s for v in first_copies(lay).values() for s in v} == {ids[2]}, lay
    # an empty existing file takes one
    e = d / "empty"
    e.touch()
    c3.rdfs("setstripe", "-c", "1", "-i", str(ids[0]), rel(c3, e))
    write(e, os.urandom(3 * MiB))
    assert {s for v in first_copies(jrdfs(c3, "layout", "--json", rel(c3, e))).values()
            for s in v} == {ids[0]}
    # usage errors
    for bad in (["-S", "5000"], ["-S", "128M"], ["-c", "300"], ["-c", "x"], []):
        p = c3.rdfs("setstripe", *bad, rel(c3, d), check=False)
        assert p.returncode == 2, (bad, p)
    p = c3.rdfs("setstripe", "-i", "99", rel(c3, d), check=False)
    assert p.returncode == 1 and "no I/O server has id 99" in p.stderr, p


def make_tree(root):
    """A few hundred files: sizes from 0 to a few chunks, nested directories, empty
    ones, symbolic links and a hard link."""
    rnd = 0
    root.mkdir()
    for d in range(6):
        sub = root / ("dir%d" % d)
        sub.mkdir()
        for k in range(3):
            (sub / ("nested%d" % k)).mkdir()
        for i in range(50):
            rnd = (rnd * 1103515245 + 12345) % (1 << 31)
            size = [0, 1, 511, 512, 513, 4096, 5000, 70000][rnd % 8] + (rnd % 3) * 100
            name = "f%03d.%s" % (i, "dat" if i % 3 else "txt")
            where = sub if i % 4 else sub / ("nested%d" % (i % 3))
            with open(where / name, "wb") as f:
                f.write(b"z" * size)
    (root / "empty").mkdir()
    big = root / "big.bin"
    with open(big, "wb") as f:
        f.write(os.urandom(3 * MiB + 17))
    os.link(big, root / "dir1" / "big.link")
    os.symlink("big.bin", root / "sym")
    os.symlink("../dir0", root / "dir2" / "up")


def lines(text, old, new):
    """The lines of @text with prefix @old made @new, as a sorted list."""
    return sorted(line.replace(old, new, 1) for line in text.splitlines() if line)


def test_du_and_find_agree_with_coreutils_on_the_mount(c3):
    root = c3.mnt / "tree"
    make_tree(root)
    r = rel(c3, root)
    mnt = str(root)
    n = sum(1 for _ in root.rglob("*"))
    assert n > 300, n

    def du(*args):
        return subprocess.run(["du"] + list(args) + [mnt], capture_output=True, text=True,
                              check=True).stdout

    # du -s --apparent-size, in bytes and in KiB
    assert lines(c3.rdfs("du", "-s", "-b", r).stdout, r, mnt) == \
        lines(du("-s", "--apparent-size", "-B1"), mnt, mnt)
    assert lines(c3.rdfs("du", "-s", "--apparent-size", r).stdout, r, mnt) == \
        lines(du("-s", "--apparent-size"), mnt, mnt)
    # every directory
    assert lines(c3.rdfs("du", "-b", r).stdout, r, mnt) == \
        lines(du("--apparent-size", "-B1"), mnt, mnt)
    # allocated blocks, KiB
    assert lines(c3.rdfs("du", r).stdout, r, mnt) == lines(du(), mnt, mnt)
    assert lines(c3.rdfs("du", "-s", r).stdout, r, mnt) == lines(du("-s"), mnt, mnt)
    # -s sums what the per-directory walk does
    js = jrdfs(c3, "du", "-s", "--json", r)["entries"]
    assert len(js) == 1 and js[0]["path"] == r
    assert js[0]["files"] + js[0]["dirs"] + js[0]["others"] == n   # the link counted once

    def find(*args):
        return subprocess.run(["find", mnt] + list(args), capture_output=True, text=True,
                              check=True).stdout

    for expr in ([], ["-type", "f"], ["-type", "d"], ["-type", "l"], ["-name", "*.txt"],
                 ["-name", "f01?.dat", "-type", "f"], ["-size", "+1"], ["-size", "-2"],
                 ["-size", "5k"], ["-size", "+4096c"], ["-uid", "0"], ["-gid", "+0"],
                 ["-mtime", "-1"], ["-mmin", "+1000"], ["-maxdepth", "1"],
                 ["-mindepth", "2", "-maxdepth", "2", "-type", "d"]):
        got = lines(c3.rdfs("find", r, *expr).stdout, r, mnt)
        assert got == lines(find(*expr), mnt, mnt), expr
    # operators, grouping and actions: find(1)'s precedence (( ) > ! > -a > -o),
    # short-circuit evaluation, and output only where an action is reached
    def records(out, old, new):
        """The records of @out, each with its newline or NUL, prefix @old made @new, sorted."""
        assert not out or out[-1] in "\n\0", repr(out[-20:])
        return sorted(rec.replace(old, new, 1) for rec in re.findall(r"[^\0\n]*[\0\n]", out))

    for expr in (["-name", "*.txt", "-o", "-type", "d"], ["!", "-name", "*.dat"],
                 ["-not", "-type", "f"], ["-type", "f", "!", "-name", "*.dat", "-size", "+1"],
                 ["(", "-name", "*.txt", "-o", "-type", "l", ")", "-a", "-size", "-2"],
                 ["-type", "f", "-name", "f00*", "-o", "-type", "d", "-name", "nested*"],
                 ["-type", "f", "-and", "(", "-name", "f01*", "-or", "-size", "5k", ")"],
                 ["!", "(", "-type", "d", "-o", "-name", "*.dat", ")"], ["!", "!", "-type", "l"],
                 ["-print0"], ["-name", "*.txt", "-print0"],
                 ["-name", "*.txt", "-print0", "-o", "-type", "d", "-print"],
                 ["-type", "d", "-o", "-print0"], ["-name", "*.txt", "-o", "-name", "*.dat", "-print"],
                 ["(", "-type", "l", "-print", ")", "-o", "-size", "+100", "-print0"],
                 ["-mindepth", "2", "-maxdepth", "2", "!", "-type", "d", "-print0"],
                 ["-print", "-print0"]):
        got = records(c3.rdfs("find", r, *expr).stdout, r, mnt)
        assert got == records(find(*expr), mnt, mnt), expr
    for bad in (["-o"], ["-name", "x", "-o"], ["(", ")"], ["(", "-type", "f"], ["-type", "f", ")"],
                ["!"], ["-name"], ["-frob"]):
        p = c3.rdfs("find", r, *bad, check=False)
        assert p.returncode == 2 and p.stdout == "", (bad, p)
    # a path as given, with a trailing slash, is printed as given
    out = c3.rdfs("find", r + "/", "-name", "empty").stdout
    assert out == r + "/empty\n", out
    js = jrdfs(c3, "find", r, "-type", "f", "--json")["entries"]
    assert len(js) == len(find("-type", "f").splitlines())
    big = [e for e in js if e["path"] == r + "/big.bin"][0]
    assert big["size"] == 3 * MiB + 17 and big["type"] == "file", big
    # a file as the PATH, and a missing one
    assert c3.rdfs("find", r + "/big.bin").stdout == r + "/big.bin\n"
    p = c3.rdfs("find", r + "/nothing", check=False)
    assert p.returncode == 1, p


def test_servers_label_and_read_only(c3):
    ids = sorted(servers(c3))
    ro = ids[0]
    d = c3.mnt / "ro"
    d.mkdir()
    before = d / "before"
    data = os.urandom(6 * MiB)
    write(before, data)
    held = {s for v in first_copies(jrdfs(c3, "layout", "--json", rel(c3, before))).values()
            for s in v}
    assert ro in held, held

    c3.rdfs("servers", "label", str(ro), "rack A, disk 3 failing")
    c3.rdfs("servers", "set", str(ro), "--read-only", "on")
    s = servers(c3)[ro]
    assert (s["label"], s["state"], s["read_only"], s["up"]) == \
        ("rack A, disk 3 failing", "read-only", True, True), s
    assert s["capacity_bytes"] > 0 and s["used_bytes"] > 0, s
    out = c3.rdfs("servers", "list").stdout
    assert re.search(r"^\s*%d\s.*read-only.*rack A, disk 3 failing$" % ro, out, re.M), out

    after = d / "after"
    write(after, os.urandom(12 * MiB))
    lay = jrdfs(c3, "layout", "--json", rel(c3, after))
    assert ro not in {e["server"] for e in lay["extents"]}, lay
    # pinned to it: the next server takes it
    pinned = d / "pinned"
    c3.rdfs("setstripe", "-c", "1", "-i", str(ro), rel(c3, pinned))
    write(pinned, os.urandom(2 * MiB))
    assert {e["server"] for e in jrdfs(c3, "layout", "--json", rel(c3, pinned))["extents"]} == \
        {ids[1]}
    # what it holds still reads, and is still written in place
    with open(before, "rb") as f:
        assert f.read() == data
    with open(before, "r+b") as f:
        f.write(b"overwritten")
        os.fsync(f.fileno())
    with open(before, "rb") as f:
        assert f.read(11) == b"overwritten"

    # bad requests
    p = c3.rdfs("servers", "set", "999", "--read-only", "on", check=False)
    assert p.returncode == 1 and "no I/O server has id 999" in p.stderr, p
    for bad in (["set", str(ro), "--read-only", "maybe"], ["set", str(ro)], ["label", str(ro)],
                ["frob"], ["label", "x", "y"]):
        assert c3.rdfs("servers", *bad, check=False).returncode == 2, bad

    c3.rdfs("servers", "set", str(ro), "--read-only", "off")
    c3.rdfs("servers", "label", str(ro), "")
    s = servers(c3)[ro]
    assert (s["label"], s["state"], s["read_only"]) == ("", "up", False), s
    again = d / "again"
    write(again, os.urandom(12 * MiB))
    assert ro in {e["server"] for e in jrdfs(c3, "layout", "--json", rel(c3, again))["extents"]}


def test_json_outputs_parse(c3):
    d = c3.mnt / "js"
    d.mkdir()
    f = d / "f"
    write(f, os.urandom(300000))
    os.symlink("f", d / "l")
    r = rel(c3, d)
    for args in (["status", "--json"], ["df", "--json"], ["ls", "-l", "--json", r],
                 ["stat", "--json", r, r + "/f", r + "/l"], ["layout", "--json", r + "/f"],
                 ["getcopies", "--json", r, r + "/f"], ["getstripe", "--json", r, r + "/f"],
                 ["servers", "list", "--json"], ["node", "list", "--json"],
                 ["fsck", "--json"], ["du", "--json", r], ["du", "-s", "-c", "--json", r],
                 ["find", r, "--json"]):
        out = c3.rdfs(*args).stdout
        try:
            json.loads(out)
        except ValueError as e:
            pytest.fail("rdfs %s: not JSON (%s):\n%s" % (" ".join(args), e, out))
    st = jrdfs(c3, "stat", "--json", r + "/l")["entries"][0]
    assert st["type"] == "symlink" and st["target"] == "f", st
    assert jrdfs(c3, "getcopies", "--json", r + "/f")["entries"][0]["copies"] == 1


def test_every_command_has_a_manual_page_the_package_installs(rdfs_bin):
    """`rdfs help CMD` is a manual page for every command `rdfs --help` lists,
    deploy/help2roff makes it rdfs-CMD(1) and debian/rdfs-tools.install ships it."""
    repo = rdfs_bin.parent.parent if (rdfs_bin.parent.parent / "Makefile").exists() else None
    repo = repo or os.path.join(os.path.dirname(__file__), "..", "..")
    out = subprocess.run([str(rdfs_bin / "rdfs"), "--help"], capture_output=True, text=True,
                         check=True).stdout
    section = out.split("\nCOMMANDS\n")[1].split("\n\n")[0]
    cmds = re.findall(r"^    ([a-z]+)\s", section, re.M)
    assert len(cmds) >= 18 and {"getstripe", "du", "find", "servers"} <= set(cmds), cmds
    with open(os.path.join(repo, "debian", "rdfs-tools.install")) as f:
        installed = set(f.read().split())
    for c in cmds:
        page = subprocess.run([str(rdfs_bin / "rdfs"), "help", c], capture_output=True,
                              text=True, check=True).stdout
        assert page.startswith("NAME\n    rdfs-%s - " % c), page
        assert "\nSYNOPSIS\n    rdfs %s" % c in page and "\nDESCRIPTION\n" in page, page
        roff = subprocess.run([os.path.join(repo, "deploy", "help2roff"), "--name", "rdfs-" + c,
                               "--help-args", "help " + c, str(rdfs_bin / "rdfs")],
                              capture_output=True, text=True, check=True).stdout
        assert ".SH NAME\nrdfs\\-%s \\- " % c in roff, roff[:300]
        assert "usr/share/man/man1/rdfs-%s.1" % c in installed, c
    assert subprocess.run([str(rdfs_bin / "rdfs"), "help", "nosuch"],
                          capture_output=True).returncode == 2
