# SPDX-License-Identifier: MIT
"""rdfs-bench end to end on the mount: tiny runs that write, check and read back."""
import json
import os

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
