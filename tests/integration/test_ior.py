# SPDX-License-Identifier: MIT
"""rdfs-bench end to end on the mount: tiny runs that write, check and read back."""
import json
import os
import re

from conftest import BIN, run


def ior(*args, check=True):
    return run([BIN / "rdfs-bench"] + list(args), check=check, timeout=600)


def test_ior_shared_file_verified(workdir, tmp_path):
    js = tmp_path / "ior.json"
    p = ior("-a", "POSIX", "-w", "-r", "-W", "-R", "-C", "-e", "--drop-cache",
            "-t", "64k", "-b", "1m", "-s", "3", "-N", "2", "-i", "2",
            "-o", workdir / "ior.dat", "--json=%s" % js)
    assert "Verification        : passed" in p.stdout
    assert "Summary of all tests:" in p.stdout
    doc = json.loads(js.read_text())
    assert doc["ok"] is True
    assert doc["verify"]["mismatched_transfers"] == 0
    assert sorted((r["access"], r["iter"]) for r in doc["results"]) == \
        [("read", 0), ("read", 1), ("write", 0), ("write", 1)]
    assert all(r["bw_mib"] > 0 for r in doc["results"])
    assert not (workdir / "ior.dat").exists(), "rdfs-bench removes its file without -k"


def test_ior_file_per_process_direct(workdir):
    p = ior("-w", "-r", "-W", "-R", "-F", "-C", "--direct", "-t", "16k", "-b", "256k",
            "-N", "3", "-k", "-o", workdir / "fpp", "--json")
    doc = json.loads(p.stdout)
    assert doc["ok"] is True
    assert sorted(os.listdir(workdir)) == ["fpp.%08d" % i for i in range(3)]
    for i in range(3):
        assert os.stat(workdir / ("fpp.%08d" % i)).st_size == 256 << 10


def test_ior_detects_corruption(workdir):
    f = workdir / "ior.dat"
    ior("-w", "-k", "-t", "4k", "-b", "64k", "-N", "2", "-o", f)
    with open(f, "r+b") as fh:
        fh.seek(70000)
        b = fh.read(1)
        fh.seek(70000)
        fh.write(bytes([b[0] ^ 0xFF]))
    p = ior("-r", "-R", "-k", "-t", "4k", "-b", "64k", "-N", "2", "-o", f, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "at offset 70000" in p.stderr, p.stderr


# The harness itself, on a local directory (no cluster): its checks must catch
# misplaced data, so a passing run on rdfs means something.
def test_ior_local_reorder_and_misplaced_block(tmp_path):
    f = tmp_path / "shared"
    p = ior("-w", "-r", "-W", "-R", "-C", "-k", "-t", "8k", "-b", "64k", "-s", "2", "-N", "3",
            "-o", f, "--json")
    assert json.loads(p.stdout)["ok"] is True
    assert os.stat(f).st_size == 3 * 2 * (64 << 10)
    # Swap two blocks of the same size: every byte is "valid" data, in the wrong place.
    with open(f, "r+b") as fh:
        a = fh.read(8192)
        fh.seek(8192)
        b = fh.read(8192)
        fh.seek(0)
        fh.write(b + a)
    p = ior("-r", "-R", "-k", "-t", "8k", "-b", "64k", "-s", "2", "-N", "3", "-o", f,
            "--json", check=False)
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["ok"] is False
    assert doc["verify"]["first_mismatch"]["offset"] == 0
    assert doc["verify"]["mismatched_transfers"] == 2


def test_ior_local_file_swap_between_tasks_detected(tmp_path):
    base = tmp_path / "fpp"
    ior("-w", "-k", "-F", "-t", "4k", "-b", "16k", "-N", "2", "-o", base)
    a, b = tmp_path / "fpp.00000000", tmp_path / "fpp.00000001"
    os.rename(a, tmp_path / "tmp")
    os.rename(b, a)
    os.rename(tmp_path / "tmp", b)
    p = ior("-r", "-R", "-F", "-t", "4k", "-b", "16k", "-N", "2", "-o", base, check=False)
    assert p.returncode == 1
    assert "data of task 0" in p.stderr or "data of task 1" in p.stderr, p.stderr


def test_ior_usage_errors():
    for args in (["-t", "3"], ["-t", "4k", "-b", "6k"], ["-a", "MPIIO"], ["-N", "0"], ["-W", "-r"]):
        p = ior(*args, check=False)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "rdfs-bench" in p.stderr
    assert "EXIT STATUS" in ior("--help").stdout


# ------------------------------------------------------------------ -a RDFS
def rdfs_path(cluster, p):
    """The path of @p (under the mount) inside the rdfs namespace."""
    return "/" + os.path.relpath(p, cluster.mnt)


def test_ior_rdfs_api_verified_and_visible_through_fuse(cluster, workdir):
    f = workdir / "api.dat"
    p = ior("-a", "RDFS", "--config", cluster.conf, "-w", "-r", "-W", "-R", "-C", "-z",
            "-t", "64k", "-b", "512k", "-s", "2", "-N", "2", "-i", "2", "-k",
            "-o", rdfs_path(cluster, f), "--json=%s" % (workdir / "r.json"))
    assert "api                 : RDFS" in p.stdout
    assert "Verification        : passed" in p.stdout
    assert "client library keeps no data past a close" in p.stdout
    doc = json.loads((workdir / "r.json").read_text())
    assert doc["ok"] is True and doc["params"]["api"] == "RDFS"
    assert all(r["bytes"] == 2 * 2 * (512 << 10) for r in doc["results"])
    # The library wrote through the servers: the FUSE mount sees the same bytes,
    # and the POSIX path reads them back verified.
    assert os.stat(f).st_size == 2 * 2 * (512 << 10)
    ior("-r", "-R", "-k", "-t", "64k", "-b", "512k", "-s", "2", "-N", "2", "-o", f)


def test_ior_rdfs_api_detects_corruption(cluster, workdir):
    f = workdir / "bad.dat"
    args = ["-a", "RDFS", "--config", cluster.conf, "-F", "-N", "2", "-t", "16k", "-b", "256k",
            "-k", "-o", rdfs_path(cluster, f)]
    ior("-w", *args)
    victim = workdir / "bad.dat.00000001"
    with open(victim, "r+b") as fh:
        fh.seek(100001)
        b = fh.read(1)
        fh.seek(100001)
        fh.write(bytes([b[0] ^ 0x10]))
    p = ior("-r", "-R", *args, "--json", check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert doc["ok"] is False
    assert doc["verify"]["first_mismatch"]["offset"] == 100001
    assert doc["verify"]["first_mismatch"]["path"].endswith("bad.dat.00000001")
    assert "at offset 100001" in p.stderr


def test_ior_rdfs_api_errors(cluster, tmp_path):
    p = ior("-a", "RDFS", "--config", cluster.conf, "-r", "-o", "/no/such/dir/f", check=False)
    assert p.returncode == 1
    assert "No such file or directory" in p.stderr
    bad = tmp_path / "bad.conf"
    bad.write_text("[cluster]\nmetaserver = tcp://127.0.0.1:1\nsecret_file = %s\n" % cluster.secret)
    p = ior("-a", "RDFS", "--config", bad, "-w", "-o", "/x", check=False)
    assert p.returncode == 1
    assert "cannot connect to metaserver tcp://127.0.0.1:1" in p.stderr
    p = ior("-a", "RDFS", "--config", cluster.conf, "-o", "relative", check=False)
    assert p.returncode == 2 and "absolute path" in p.stderr


# ------------------------------------------------------------------ mdtest mode
def md(*args, check=True):
    return run([BIN / "rdfs-bench", "mdtest"] + list(args), check=check, timeout=600)


def test_mdtest_on_the_mount(workdir):
    p = md("-n", "40", "-N", "2", "-u", "-w", "3000", "-i", "2", "-d", workdir,
           "-O", workdir / "md.json")
    assert "SUMMARY rate: (of 2 iterations)" in p.stdout
    for op in ("File creation", "File stat", "File read", "File removal", "Tree creation",
               "Tree removal"):
        assert re.search(r"^   %s +:( +[0-9.]+){4}$" % op, p.stdout, re.M), (op, p.stdout)
    assert "Verification        : passed" in p.stdout
    doc = json.loads((workdir / "md.json").read_text())
    assert doc["ok"] is True and doc["bad_files"] == 0
    assert [ph["operation"] for ph in doc["phases"]] == \
        ["create", "stat", "read", "remove", "tree-create", "tree-remove"]
    assert all(len(ph["rates"]) == 2 and ph["median"] > 0 for ph in doc["phases"])
    assert os.listdir(workdir) == ["md.json"], "mdtest removes its tree"


def test_mdtest_rdfs_api_shared_dir(cluster, workdir):
    p = md("-a", "RDFS", "--config", cluster.conf, "-n", "25", "-N", "3", "-w", "1k",
           "-d", rdfs_path(cluster, workdir), "--json")
    doc = json.loads(p.stdout)
    assert doc["ok"] is True and doc["params"]["api"] == "RDFS"
    assert os.listdir(workdir) == []


def test_mdtest_usage_errors(tmp_path):
    for args in (["-n", "5"], ["-d", tmp_path, "-n", "0"], ["-d", tmp_path, "-w", "1k", "-e", "2k"],
                 ["-d", tmp_path, "-a", "S3"], ["-d", tmp_path, "--bogus"]):
        p = md(*args, check=False)
        assert p.returncode == 2, (args, p.stderr)
        assert "rdfs-bench mdtest:" in p.stderr
    assert "EXIT STATUS" in md("--help").stdout
    p = md("-d", tmp_path / "missing" / "deeper", "-n", "3", check=False)
    assert p.returncode == 1 and "No such file or directory" in p.stderr


# ------------------------------------------------------------------ harness details, locally
def test_ior_random_stonewall_and_drop_cache_cmd(tmp_path):
    marker = tmp_path / "dropped"
    p = ior("-w", "-r", "-R", "-z", "-D", "0.3", "-t", "4k", "-b", "8g", "-o", tmp_path / "sw",
            "--drop-cache-cmd", "touch %s" % marker, "--json=%s" % (tmp_path / "sw.json"))
    assert marker.exists(), "--drop-cache-cmd ran between write and read"
    assert "ordering in a file  : random" in p.stdout
    assert "command between write and read: 'touch" in p.stdout
    doc = json.loads((tmp_path / "sw.json").read_text())
    w, r = doc["results"]
    assert doc["ok"] is True
    # Stonewalled: 8 GiB in 0.3 s of 4 KiB random writes is out of reach of
    # any machine; this only checks that the phase stopped early.
    assert 0 < w["bytes"] < 8 << 30
    assert r["bytes"] <= w["bytes"], "a read covers only what the stonewalled write wrote"


def test_ior_drop_cache_cmd_failure_fails_run(tmp_path):
    p = ior("-w", "-r", "-t", "4k", "-b", "16k", "-o", tmp_path / "f", "--drop-cache-cmd", "false",
            check=False)
    assert p.returncode == 1
    assert "--drop-cache-cmd 'false' failed" in p.stderr


def test_mdtest_creates_its_directory_as_mdtest_does(workdir):
    """-d DIR whose parent exists but which does not: created (real mdtest 4.0 does)."""
    d = workdir / "new"
    p = md("-n", "5", "-N", "2", "-d", d)
    assert "SUMMARY rate" in p.stdout
    assert d.is_dir() and os.listdir(d) == []


def test_mdtest_failed_run_prints_no_rates(workdir):
    """A task that fails: which task and why on stderr, no SUMMARY (its rates would
    time operations that never happened), "ok": false with the error in the JSON,
    exit 1."""
    f = workdir / "a-file"
    f.write_bytes(b"x")
    p = md("-n", "5", "-N", "2", "-d", f, "-O", workdir / "md.json", check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(r"task 0: mkdir .*a-file/mdtest\.0: Not a directory", p.stderr), p.stderr
    assert "SUMMARY" not in p.stdout and "FAILED: task 0" in p.stdout, p.stdout
    assert not re.search(r"[0-9]+\.[0-9]{3}", p.stdout), p.stdout
    doc = json.loads((workdir / "md.json").read_text())
    assert doc["ok"] is False and doc["phases"] == [] and "task 0" in doc["error"]
