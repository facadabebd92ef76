# SPDX-License-Identifier: MIT
"""User, group and project quotas through a real mount (issue 17).

What these tests prove, writing as other users (forked children that drop to
a uid, as in test_permissions.py):
  - a soft block limit is passed within its grace, then the hard one stops the
    writes with EDQUOT (from write, fsync or close: write-behind and the kernel
    client's page cache report it late, never not at all), the file holding
    exactly the bytes before the error; once a grace is over the soft limit
    refuses too;
  - an inode limit refuses creates, mkdir and symlink with EDQUOT;
  - a chgrp to a group over its limit is EDQUOT, and usage moves with a chgrp;
  - two mounts writing as one user never pass its hard limit together;
  - a stream written up to exactly the limit succeeds: allocate-ahead is cut
    to what fits and never fails on its own;
  - usage stays exact across kill -9 of the metaserver in the middle of writes:
    `rdfs quota` equals the files' blocks and `rdfs fsck` is clean;
  - project quotas: `rdfs project set` (root only) on a tree, inherited by new
    files and subdirectories, limiting whoever writes there; rename into
    another project's tree is EXDEV, `mv` copies and the usage moves; rename
    out of the tree keeps the project;
  - `rdfs quota report --json` parses; a user sees only their own quotas, and
    only root sets limits.
Every check of usage compares the metaserver's numbers with the blocks of the
files, read with `rdfs stat` (no cache between). The same file runs against
the kernel client (RDFS_TEST_CLIENT=lkm, tests/vm/suite.d/lkm-posix).
"""
import concurrent.futures
import errno
import json
import os
import re
import shutil
import subprocess
import time

import pytest

import rdfswire as w
from conftest import (BIN, CLIENT, MiB, _start, _stop, first_difference, fsck_clean, plain_wire,
                      wait_until)
from test_permissions import as_user
from test_trust import client_secret, connect, lookup, node_add, node_name, server_key

BLK = 4096
CHUNK = 64 * 1024
# Every test has users of its own: limits are cluster-wide.
U_SOFT, U_GRACE, U_INODES, U_CHGRP, U_TWO, U_AHEAD, U_CRASH, U_PROJ, U_TOOL, U_EXACT, \
    U_AHEAD_LONG = range(31001, 31012)
G_SMALL, G_ROOMY = 41001, 41002


@pytest.fixture(scope="module")
def qc():
    """A cluster of this module's own: limits and grace periods are cluster-wide."""
    c = _start("quota", 2)
    yield c
    _stop(c)


def pattern(n, off=0):
    """Bytes [off, off + n) of a pattern that shows a byte out of place."""
    base = bytes(range(251)) * (n // 251 + 2)
    s = off % 251
    return base[s:s + n]


def rel(c, path):
    """@path of the mount as a path of the rdfs namespace, for the tool."""
    return "/" + os.path.relpath(path, c.mnt)


def quota(c, kind, ident):
    """The metaserver's record of user/group/project @ident (as root)."""
    flag = {"user": "-u", "group": "-g", "project": "-p"}[kind]
    out = json.loads(c.rdfs("quota", "show", flag + str(ident), "--json").stdout)
    assert len(out["quotas"]) == 1, out
    return out["quotas"][0]


def blocks_of(c, path):
    """4 KiB blocks of @path as the metaserver has them (rdfs stat: no cache)."""
    out = c.rdfs("stat", rel(c, path)).stdout
    m = re.search(r"Blocks: (\d+)", out)
    assert m, out
    return int(m.group(1)) // (BLK // 512)


def owned_blocks(c, root, uid):
    """The blocks of every inode under @root that @uid owns."""
    total = 0
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            if os.lstat(p).st_uid == uid:
                total += blocks_of(c, p)
    return total


def set_limits(c, kind, ident, **lim):
    flag = {"user": "-u", "group": "-g", "project": "-p"}[kind]
    args = ["quota", "set", flag, str(ident)]
    for k, v in lim.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    c.rdfs(*args)


def write_stream(path, total, fsync_every=0, append=False):
    """In the caller (a child as some user): write pattern bytes to @path in
    64 KiB writes until @total or an error, then fsync and close. Returns
    {acked: bytes write() took, stage: where the first error came (or None),
    errno}."""
    res = {"acked": 0, "stage": None, "errno": 0}
    flags = os.O_CREAT | os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    start = os.fstat(fd).st_size if append else 0
    try:
        while res["acked"] < total:
            n = min(CHUNK, total - res["acked"])
            res["acked"] += os.write(fd, pattern(n, start + res["acked"]))
            if fsync_every and res["acked"] % fsync_every == 0:
                os.fsync(fd)
    except OSError as e:
        res["stage"], res["errno"] = "write", e.errno
    if res["stage"] is None:
        try:
            os.fsync(fd)
        except OSError as e:
            res["stage"], res["errno"] = "fsync", e.errno
    try:
        os.close(fd)
    except OSError as e:
        if res["stage"] is None:
            res["stage"], res["errno"] = "close", e.errno
    return res


def write_as(uid, path, total, gid=None, **kw):
    kind, res = as_user((uid, uid if gid is None else gid),
                        lambda: write_stream(path, total, **kw))
    assert kind == "ok", "writing %s as %d: %s" % (path, uid, os.strerror(res))
    return res


def expect_prefix(path, acked, start=0):
    """@path holds the pattern, a prefix of what was acknowledged and nothing
    else. The kernel client's page cache took all of it, and a write-back that
    failed leaves the size the application wrote (the error came from fsync or
    close): there the bytes after the intact prefix read as zeros, never as
    anything else (docs/DESIGN.md, "Quotas")."""
    with open(path, "rb") as f:
        data = f.read()
    assert start <= len(data) <= start + acked, (path, len(data), acked)
    want = pattern(len(data) - start, start)
    if CLIENT == "lkm" and data[start:] != want:
        ok = start + first_difference(want, data[start:])
        assert data[ok:] == bytes(len(data) - ok), \
            "%s: after the intact %d bytes, not zeros" % (path, ok)
        return
    assert data[start:] == want, "%s: the bytes before the error are not intact" % path


@pytest.fixture
def qdir(qc, request):
    """A world-writable directory of this test in the module's mount."""
    d = qc.mnt / re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:100]
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    os.chmod(d, 0o777)
    return d


# ------------------------------------------------------------ blocks


def test_soft_then_hard_block_limit_by_writes(qc, qdir):
    set_limits(qc, "user", U_SOFT, block_soft="2M", block_hard="4M")
    q = quota(qc, "user", U_SOFT)
    assert (q["block_soft_bytes"], q["block_hard_bytes"]) == (2 * MiB, 4 * MiB)

    # past the soft limit, within the grace (7 days): fine, and the grace runs
    r = write_as(U_SOFT, qdir / "a", 3 * MiB)
    assert r["stage"] is None, r
    expect_prefix(qdir / "a", 3 * MiB)
    q = quota(qc, "user", U_SOFT)
    assert q["bytes"] == 3 * MiB, q
    assert 6 * 86400 < q["block_grace_left_s"] <= 7 * 86400, q

    # then the hard limit: EDQUOT, and no byte after what the file keeps
    r = write_as(U_SOFT, qdir / "b", 4 * MiB)
    assert r["stage"] is not None and r["errno"] == errno.EDQUOT, r
    expect_prefix(qdir / "b", r["acked"])
    used = owned_blocks(qc, qdir, U_SOFT)
    assert quota(qc, "user", U_SOFT)["blocks"] == used
    assert used <= 4 * MiB // BLK
    assert os.path.getsize(qdir / "b") >= MiB - CHUNK, \
        "the hard limit stopped the writes too early"

    # an append gets nowhere now, and says so
    before = os.path.getsize(qdir / "a")
    r = write_as(U_SOFT, qdir / "a", MiB, append=True)
    assert r["errno"] == errno.EDQUOT, r
    expect_prefix(qdir / "a", r["acked"] + before)

    # freeing space makes room again
    os.unlink(qdir / "b")
    r = write_as(U_SOFT, qdir / "c", 512 * 1024)
    assert r["stage"] is None, r
    assert quota(qc, "user", U_SOFT)["blocks"] == owned_blocks(qc, qdir, U_SOFT)


def test_hard_limit_inside_a_write_back_unit_keeps_all_it_allows(qc, qdir):
    """A limit that falls inside what the client writes back at once (a
    kernel writeback batch, a write-behind window): the bytes before it are
    still written, up to the last whole application write that fits."""
    limit = 3 * MiB // 2 + 16 * 1024  # not a multiple of any unit
    set_limits(qc, "user", U_EXACT, block_hard=str(limit // 1024) + "K")
    r = write_as(U_EXACT, qdir / "f", 4 * MiB)
    assert r["stage"] is not None and r["errno"] == errno.EDQUOT, r
    expect_prefix(qdir / "f", r["acked"])
    with open(qdir / "f", "rb") as f:
        data = f.read()
    d = first_difference(pattern(len(data)), data)
    intact = len(data) if d is None else d
    assert intact >= limit - CHUNK, \
        "only %d intact bytes under a limit of %d" % (intact, limit)
    assert quota(qc, "user", U_EXACT)["blocks"] == owned_blocks(qc, qdir, U_EXACT)


def test_soft_limit_refuses_once_its_grace_is_over(qc, qdir):
    qc.rdfs("quota", "grace", "-u", "4s")
    try:
        set_limits(qc, "user", U_GRACE, block_soft="1M", block_hard="64M")
        r = write_as(U_GRACE, qdir / "a", 2 * MiB)
        assert r["stage"] is None, r
        q = quota(qc, "user", U_GRACE)
        assert 0 <= q["block_grace_left_s"] <= 4, q
        time.sleep(5)
        assert quota(qc, "user", U_GRACE)["block_grace_left_s"] == 0
        assert "none" in qc.rdfs("quota", "show", "-u", str(U_GRACE)).stdout
        # far below the hard limit, yet refused: the soft limit binds now
        r = write_as(U_GRACE, qdir / "b", MiB)
        assert r["errno"] == errno.EDQUOT, r
        expect_prefix(qdir / "b", r["acked"])
        # back under it, the grace is gone and writes go on
        os.unlink(qdir / "a")
        os.unlink(qdir / "b")
        assert quota(qc, "user", U_GRACE)["block_grace_left_s"] == -1
        r = write_as(U_GRACE, qdir / "c", 512 * 1024)
        assert r["stage"] is None, r
    finally:
        qc.rdfs("quota", "grace", "-u", "7d")
    assert json.loads(qc.rdfs("quota", "grace", "--json").stdout)["grace_s"]["user"] == 604800


def test_stream_up_to_the_limit_never_fails_on_allocate_ahead(qc, qdir):
    # the writer's allocations ask for more than they write (up to 64 MiB
    # ahead); the metaserver cuts them to the limit, so all of it fits
    size = 3 * MiB + 5000
    set_limits(qc, "user", U_AHEAD, block_hard=str(3 * MiB + 8192))
    r = write_as(U_AHEAD, qdir / "f", size)
    assert r["stage"] is None, r
    assert r["acked"] == size
    expect_prefix(qdir / "f", size)
    assert blocks_of(qc, qdir / "f") == (size + BLK - 1) // BLK
    assert quota(qc, "user", U_AHEAD)["blocks"] == (size + BLK - 1) // BLK
    # one byte more stays in the last block; a block more does not fit
    r = write_as(U_AHEAD, qdir / "f", 1, append=True)
    assert r["stage"] is None, r
    r = write_as(U_AHEAD, qdir / "f", BLK, append=True)
    assert r["errno"] == errno.EDQUOT, r
    expect_prefix(qdir / "f", r["acked"] + size + 1)
    assert quota(qc, "user", U_AHEAD)["blocks"] == blocks_of(qc, qdir / "f")


def test_a_longer_stream_up_to_the_limit_never_fails_on_allocate_ahead(qc, qdir):
    # past its first unit a stream allocates ahead (the kernel client's write
    # layouts 16 MiB, rdfs-fuse's up to 64 MiB): near the limit that is cut
    # short or refused, and the bytes that fit must still go
    size = 9 * MiB + 5000
    set_limits(qc, "user", U_AHEAD_LONG, block_hard=str(9 * MiB + 8192))
    r = write_as(U_AHEAD_LONG, qdir / "f", size)
    assert r["stage"] is None, r
    expect_prefix(qdir / "f", size)
    assert quota(qc, "user", U_AHEAD_LONG)["blocks"] == (size + BLK - 1) // BLK


def test_two_mounts_of_one_user_share_its_limit(qc, qdir):
    set_limits(qc, "user", U_TWO, block_hard="3M")
    other = qc.mount_second(qc.dir / "mnt-two")
    try:
        rel_dir = os.path.relpath(qdir, qc.mnt)
        paths = [qdir / "one", other / rel_dir / "two"]
        # both at once: each thread waits for a child writing as the user
        with concurrent.futures.ThreadPoolExecutor(len(paths)) as pool:
            results = list(pool.map(lambda p: write_as(U_TWO, p, 4 * MiB), paths))
        for res, p in zip(results, paths):
            assert res["errno"] == errno.EDQUOT, (p, res)
            expect_prefix(p, res["acked"])
        used = blocks_of(qc, qdir / "one") + blocks_of(qc, qdir / "two")
        assert used <= 3 * MiB // BLK
        assert quota(qc, "user", U_TWO)["blocks"] == used
    finally:
        qc.unmount(other)


# ------------------------------------------------------------ inodes, chgrp


def test_inode_limit_refuses_creates(qc, qdir):
    set_limits(qc, "user", U_INODES, inode_hard=4)

    def creates():
        made, err = 0, 0
        for i in range(10):
            try:
                os.close(os.open(qdir / ("f%d" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                made += 1
            except OSError as e:
                err = e.errno
                break
        out = {"made": made, "err": err}
        for what, fn in (("mkdir", lambda: os.mkdir(qdir / "d")),
                         ("symlink", lambda: os.symlink("f0", qdir / "l"))):
            try:
                fn()
                out[what] = 0
            except OSError as e:
                out[what] = e.errno
        return out

    kind, res = as_user((U_INODES, U_INODES), creates)
    assert kind == "ok", res
    assert res == {"made": 4, "err": errno.EDQUOT, "mkdir": errno.EDQUOT,
                   "symlink": errno.EDQUOT}, res
    assert quota(qc, "user", U_INODES)["inodes"] == 4
    assert sorted(os.listdir(qdir)) == ["f0", "f1", "f2", "f3"]
    # root is never refused, and counts
    os.mkdir(qdir / "byroot")
    os.chown(qdir / "byroot", U_INODES, U_INODES)
    assert quota(qc, "user", U_INODES)["inodes"] == 5
    os.rmdir(qdir / "byroot")
    os.unlink(qdir / "f0")
    kind, res = as_user((U_INODES, U_INODES), lambda: os.mkdir(qdir / "d"))
    assert kind == "ok", res


def test_chgrp_to_a_group_over_its_limit_is_edquot(qc, qdir):
    set_limits(qc, "group", G_SMALL, block_hard="64K")
    r = write_as(U_CHGRP, qdir / "f", MiB)
    assert r["stage"] is None, r
    kind, res = as_user((U_CHGRP, U_CHGRP), lambda: os.chown(qdir / "f", -1, G_SMALL),
                        groups=[G_SMALL, G_ROOMY])
    assert (kind, res) == ("errno", errno.EDQUOT)
    assert os.stat(qdir / "f").st_gid == U_CHGRP
    before = quota(qc, "group", U_CHGRP)["blocks"]
    kind, res = as_user((U_CHGRP, U_CHGRP), lambda: os.chown(qdir / "f", -1, G_ROOMY),
                        groups=[G_SMALL, G_ROOMY])
    assert kind == "ok", res
    assert quota(qc, "group", G_ROOMY)["blocks"] == MiB // BLK
    assert quota(qc, "group", U_CHGRP)["blocks"] == before - MiB // BLK
    assert quota(qc, "group", G_SMALL)["blocks"] == 0


# ------------------------------------------------------------ projects


def test_project_tree_inheritance_limit_and_renames(qc, qdir):
    a, b, plain = qdir / "projA", qdir / "projB", qdir / "plain"
    for d in (a, b, plain):
        d.mkdir()
        os.chmod(d, 0o777)
    qc.rdfs("project", "set", "501", rel(qc, a))
    os.setxattr(b, "rdfs.project", b"502")
    assert qc.rdfs("project", "get", rel(qc, a)).stdout.strip().endswith(": 501")
    assert os.getxattr(b, "rdfs.project") == b"502"
    # only root sets a project
    kind, res = as_user((U_PROJ, U_PROJ), lambda: os.setxattr(plain, "rdfs.project", b"501"))
    assert (kind, res) == ("errno", errno.EPERM)
    assert os.getxattr(plain, "rdfs.project") == b"0"
    set_limits(qc, "project", 501, block_hard="2M")

    # new files and subdirectories take the id, whoever makes them
    kind, res = as_user((U_PROJ, U_PROJ),
                        lambda: (os.umask(0), os.makedirs(a / "sub" / "deeper", 0o777)))
    assert kind == "ok", res
    for p in (a / "sub", a / "sub" / "deeper"):
        assert os.getxattr(p, "rdfs.project") == b"501", p
    r = write_as(U_PROJ, a / "sub" / "f", MiB)
    assert r["stage"] is None, r
    assert os.getxattr(a / "sub" / "f", "rdfs.project") == b"501"
    (a / "sub" / "deeper" / "rootfile").write_bytes(b"x" * 100)
    p501 = quota(qc, "project", 501)
    assert p501["blocks"] == MiB // BLK + 1 and p501["inodes"] == 5, p501

    # the project's limit binds any user writing in the tree
    r = write_as(U_PROJ + 100, a / "sub" / "g", 2 * MiB)
    assert r["errno"] == errno.EDQUOT, r
    expect_prefix(a / "sub" / "g", r["acked"])
    os.unlink(a / "sub" / "g")

    # rename into another project's tree: EXDEV; mv copies, the usage moves
    with pytest.raises(OSError) as e:
        os.rename(a / "sub" / "f", b / "f")
    assert e.value.errno == errno.EXDEV
    with pytest.raises(OSError) as e:
        os.rename(a / "sub", b / "sub")
    assert e.value.errno == errno.EXDEV
    kind, res = as_user((U_PROJ, U_PROJ), lambda: subprocess.run(
        ["mv", str(a / "sub" / "f"), str(b / "f")], capture_output=True).returncode)
    assert (kind, res) == ("ok", 0)
    assert os.getxattr(b / "f", "rdfs.project") == b"502"
    assert quota(qc, "project", 501)["blocks"] == 1
    assert quota(qc, "project", 502)["blocks"] == MiB // BLK
    expect_prefix(b / "f", MiB)

    # rename out of a tree into an unmarked directory: allowed, the id stays
    os.rename(b / "f", plain / "f")
    assert os.getxattr(plain / "f", "rdfs.project") == b"502"
    assert quota(qc, "project", 502)["blocks"] == MiB // BLK
    # a tree's usage is all its inodes'
    assert quota(qc, "project", 501)["inodes"] == 4


# ------------------------------------------------------------ the tool


def test_report_json_and_who_may_see_and_set(qc, qdir):
    set_limits(qc, "user", U_TOOL, block_soft="10M", block_hard="20M", inode_hard=100)
    r = write_as(U_TOOL, qdir / "f", 256 * 1024)
    assert r["stage"] is None, r
    rep = json.loads(qc.rdfs("quota", "report", "--json").stdout)
    mine = [q for q in rep["quotas"] if q["type"] == "user" and q["id"] == U_TOOL]
    assert len(mine) == 1, rep
    assert mine[0]["bytes"] == 256 * 1024 and mine[0]["inodes"] == 1, mine
    assert mine[0]["block_hard_bytes"] == 20 * MiB and mine[0]["inode_hard"] == 100
    assert set(rep["grace_s"]) == {"user", "group", "project"}
    assert all(q["type"] in ("user", "group", "project") for q in rep["quotas"])
    table = qc.rdfs("quota", "report", "-u").stdout
    assert re.search(r"^user\s+\S+\s+256K\s+10M\s+20M\s+-\s+1\s+-\s+100\s", table, re.M), table

    # as the user itself (with its own copy of the secret): its own only
    secret = qc.dir / ("secret-%d" % U_TOOL)
    shutil.copy(qc.secret, secret)
    os.chown(secret, U_TOOL, U_TOOL)

    def tool(*args):
        return subprocess.run([str(BIN / "rdfs"), "--config", str(qc.conf), "--secret-file",
                               str(secret)] + list(args), capture_output=True, text=True,
                              timeout=60)

    kind, p = as_user((U_TOOL, U_TOOL), lambda: tool("quota", "show", "--json"))
    assert kind == "ok" and p.returncode == 0, p
    shown = json.loads(p.stdout)["quotas"]
    assert {(q["type"], q["id"]) for q in shown} == {("user", U_TOOL), ("group", U_TOOL)}
    for args in (("quota", "show", "-u", str(U_SOFT)), ("quota", "report"),
                 ("quota", "set", "-u", str(U_TOOL), "--block-hard", "1T")):
        kind, p = as_user((U_TOOL, U_TOOL), lambda args=args: tool(*args))
        assert kind == "ok" and p.returncode == 1, (args, p)
        assert "Operation not permitted" in p.stderr, (args, p.stderr)
    assert quota(qc, "user", U_TOOL)["block_hard_bytes"] == 20 * MiB
    p = qc.rdfs("quota", "set", "-u", str(U_TOOL), "--block-hard", "2X", check=False)
    assert p.returncode == 2, p


# ------------------------------------------------------------ crashes

def test_usage_exact_after_metaserver_kill9_mid_write(fresh_cluster):
    c = fresh_cluster
    d = c.mnt / "crash"
    d.mkdir()
    os.chmod(d, 0o777)
    set_limits(c, "user", U_CRASH, block_hard="24M")
    # a writer as the user, in the background: 8 files of up to 4 MiB, fsync'ed
    prog = ("import os, sys, time\n"
            "os.setgroups([]); os.setresgid(%d, %d, %d); os.setresuid(%d, %d, %d)\n"
            "for i in range(8):\n"
            "    try:\n"
            "        fd = os.open('%s/f%%d' %% i, os.O_CREAT | os.O_WRONLY, 0o644)\n"
            "        for k in range(64):\n"
            "            os.write(fd, b'q' * 65536)\n"
            "            time.sleep(0.01)\n"
            "            if k %% 4 == 3:\n"
            "                os.fsync(fd)\n"
            "        os.close(fd)\n"
            "    except OSError as e:\n"
            "        print('file', i, os.strerror(e.errno), flush=True)\n"
            % ((U_CRASH,) * 6 + (d,)))
    w = subprocess.Popen(["python3", "-c", prog], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: sum(os.path.getsize(d / n) for n in os.listdir(d)) >= 3 * MiB,
                   "the writer to be well under way", attempts=240, interval=0.25)
        assert w.poll() is None, "the writer ended before the crash"
        saved = c.kill9(c.port)
        c.restart(saved)
        c.wait_servers_up()
        out, _ = w.communicate(timeout=600)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    assert w.returncode == 0, out
    # the limit held after the restart: the last files were refused
    assert "Disk quota exceeded" in out, out
    # whatever the writer saw, the usage is its files', and within the limit
    used = owned_blocks(c, d, U_CRASH)
    q = quota(c, "user", U_CRASH)
    assert q["blocks"] == used, (q, used, out)
    assert q["inodes"] == len([n for n in os.listdir(d)])
    assert used <= 24 * MiB // BLK
    assert q["block_hard_bytes"] == 24 * MiB, "the limit did not survive the crash"
    fsck_clean(c)
    rep = json.loads(c.rdfs("fsck", "--json").stdout)
    assert rep["problems"] == 0, rep


# ------------------------------------------------------------ over the wire

OP_QUOTA_GET, OP_QUOTA_SET, OP_QUOTA_LIST = 50, 51, 52      # wire/rdfs_frame.h


def quota_set_req(cr, typ, ident, hard):
    return (w.field_bytes(1, cr) + w.field_varint(2, typ) + w.field_varint(3, ident)
            + w.field_varint(4, 2) + w.field_varint(6, hard))


def quota_get_req(cr, typ, ident):
    return w.field_bytes(1, cr) + w.field_varint(2, typ) + w.field_varint(3, ident)


@plain_wire("sends QUOTA_* and MKNOD frames itself")
def test_the_metaserver_decides_whatever_the_client_skips(qc, qdir):
    """A client that skips every check of its own: limits and who may see and
    set them are the metaserver's. Root squashed by a node key is nobody."""
    U = U_TOOL + 50
    set_limits(qc, "user", U, inode_hard=1, block_hard="8K")
    conn = connect(qc.port, client_secret(qc), "client")
    try:
        me = w.cred(U, U, [G_ROOMY])
        for req, op, want in ((quota_set_req(me, 0, U, 1 << 30), OP_QUOTA_SET, -errno.EPERM),
                              (quota_get_req(me, 0, U_SOFT), OP_QUOTA_GET, -errno.EPERM),
                              (quota_get_req(me, 2, 501), OP_QUOTA_GET, -errno.EPERM),
                              (w.field_bytes(1, me) + w.field_varint(2, 0), OP_QUOTA_LIST,
                               -errno.EPERM),
                              (quota_get_req(me, 0, U), OP_QUOTA_GET, 0),
                              (quota_get_req(me, 1, G_ROOMY), OP_QUOTA_GET, 0)):
            status, _ = w.call(conn, op, req)
            assert status == want, (op, status)
        status, d = lookup(conn, w.ROOT_INO, os.path.basename(qdir))
        assert status == 0, status
        made = []
        for name in (b"one", b"two"):
            status, body = w.call(conn, w.OP_MKNOD, w.field_bytes(1, me)
                                  + w.field_varint(2, d["ino"]) + w.field_bytes(3, name)
                                  + w.field_varint(4, 0o100644))
            made.append(status)
        assert made == [0, -errno.EDQUOT], made
        status, f = lookup(conn, d["ino"], b"one")
        assert status == 0, status
        # allocation: up to the limit (asked for more, granted what fits), then refused
        for off, length, want in ((0, 3 * BLK, 0), (2 * BLK, BLK, -errno.EDQUOT)):
            status, body = w.call(conn, w.OP_LAYOUT, w.field_bytes(1, me)
                                  + w.field_varint(2, f["ino"]) + w.field_varint(3, off)
                                  + w.field_varint(4, length) + w.field_varint(5, 1))
            assert status == want, (off, status)
            if not status:
                assert w.decode(body)[2] == [2 * BLK], "described more than it allocated"
        assert quota(qc, "user", U)["blocks"] == 2
        status, _ = w.call(conn, w.OP_SETXATTR, w.field_bytes(1, me) + w.field_varint(2, d["ino"])
                           + w.field_bytes(3, b"rdfs.project") + w.field_bytes(4, b"7"))
        assert status == -errno.EPERM, status
    finally:
        conn.close()
    # root through a node key with root squash (a new node's default) is nobody
    _, claim, key = node_add(qc, node_name("quota"))
    conn = connect(qc.port, key, claim)
    try:
        status, _ = w.call(conn, OP_QUOTA_SET, quota_set_req(w.cred(0, 0), 0, U, 1 << 30))
        assert status == -errno.EPERM, status
    finally:
        conn.close()
    # and the server key is the administrator whatever its credentials say
    conn = connect(qc.port, server_key(qc), "server")
    try:
        status, _ = w.call(conn, OP_QUOTA_SET, quota_set_req(w.cred(U, U), 0, U, 3))
        assert status == 0, status
    finally:
        conn.close()
    assert quota(qc, "user", U)["block_hard_bytes"] == 3 * BLK
