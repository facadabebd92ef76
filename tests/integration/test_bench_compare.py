# SPDX-License-Identifier: MIT
"""bench/compare end to end with a tiny matrix on the local disk and rdfs-fuse
(the peers stay out so CI stays fast): the JSON is complete, every target
verified, the outputs exist, and nothing is left mounted or running, also
after an interrupt. No assertion is about speed."""
import json
import os
import signal
import subprocess
import time

from conftest import BIN, REPO, allocate_port_base, listener_pid, run, wait_until

COMPARE = REPO / "bench" / "compare"
MAIN = ["seq-write-1m", "seq-read-1m", "rand-read-4k", "md-create", "md-stat", "md-remove"]
UNIT = {"seq-write-1m": "MiB/s", "seq-read-1m": "MiB/s", "rand-read-4k": "IOPS",
        "md-create": "ops/s", "md-stat": "ops/s", "md-remove": "ops/s"}


def mounts_under(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f if line.split()[1].startswith(path)]


def compare(tmp_path, *args, timeout=600, check=True):
    base = allocate_port_base(2)
    cmd = [COMPARE, "--tiny", "--out", tmp_path / "out", "--scratch", tmp_path / "scratch",
           "--bin", BIN, "--port-base", base] + list(args)
    return run(cmd, timeout=timeout, check=check), base


def test_compare_tiny_local_and_rdfs(tmp_path):
    p, base = compare(tmp_path, "--targets", "local,rdfs-fuse")
    out = tmp_path / "out"
    recs = json.loads((out / "compare.json").read_text())
    got = {(r["target"], r["workload"]): r for r in recs}
    for target in ("local", "rdfs-fuse"):
        for w in MAIN:
            r = got.get((target, w))
            assert r, "no %s %s record in %s" % (target, w, recs)
            assert r["unit"] == UNIT[w]
            assert r["value"] > 0 and len(r["samples"]) == 1
            assert r["verify"] == "passed", r
    for limit, w in (("disk-odirect", "seq-write-1m"), ("disk-odirect", "seq-read-1m"),
                     ("loopback-tcp", "stream-1m")):
        assert got[(limit, w)]["value"] > 0 and got[(limit, w)]["unit"] == "MiB/s"
    assert {r["target"] for r in recs} == {"local", "rdfs-fuse", "disk-odirect", "loopback-tcp"}

    md = (out / "compare.md").read_text()
    assert "| workload | unit | local | rdfs-fuse |" in md
    assert "× local)" in md and "n/a" not in md.split("Targets:")[0]
    assert "verify: passed" in md
    if "no plots: gnuplot not installed" not in p.stderr:
        for kind in ("write", "read"):
            svg = (out / ("compare-seq-%s.svg" % kind)).read_text()
            assert svg.lstrip().startswith("<?xml") and "rdfs-fuse" in svg
    # Progress went to stderr while it ran, naming target and phase.
    assert "rdfs-fuse" in p.stderr and "seq 1m" in p.stderr and "mdtest" in p.stderr
    # Everything torn down: no mount, no server, no scratch data.
    assert mounts_under(tmp_path) == []
    for port in (base, base + 100, base + 101):
        assert listener_pid(port) is None, "port %d still served after compare" % port
    assert not (tmp_path / "scratch" / "rdfs-fuse").exists()
    assert not (tmp_path / "scratch" / "local").exists()


def test_compare_reports_unavailable_target_and_goes_on(tmp_path):
    # A bin dir with rdfs-bench but no servers: rdfs-fuse cannot be set up.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(BIN / "rdfs-bench", bindir / "rdfs-bench")
    p = run([COMPARE, "--tiny", "--no-limits", "--targets", "local,rdfs-fuse", "--bin", bindir,
             "--out", tmp_path / "out", "--scratch", tmp_path / "scratch"], timeout=300)
    assert "rdfs-fuse cannot run here: rdfs-metaserver not built" in p.stderr
    recs = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert {r["target"] for r in recs} == {"local"}
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "| seq-write-1m | MiB/s |" in md
    assert "**rdfs-fuse**: n/a — rdfs-metaserver not built" in md


def test_compare_interrupted_tears_down(tmp_path):
    base = allocate_port_base(2)
    log = tmp_path / "out" / "compare.log"
    proc = subprocess.Popen([str(COMPARE), "--tiny", "--no-limits", "--targets", "rdfs-fuse,local",
                             "--reps", "50", "--out", str(tmp_path / "out"),
                             "--scratch", str(tmp_path / "scratch"), "--bin", str(BIN),
                             "--port-base", str(base)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # as from a terminal: a suite started in the background
                            # (`make test &`) has SIGINT ignored, and so would compare
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_until(lambda: log.exists() and "repetition 1/50" in log.read_text(),
                   "compare to start measuring", attempts=240)
        assert mounts_under(tmp_path), "rdfs-fuse should be mounted while measuring"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "tearing down rdfs-fuse" in err
    assert mounts_under(tmp_path) == []
    for port in (base, base + 100, base + 101):
        assert listener_pid(port) is None, "port %d still served after the interrupt" % port
    # What was measured before the interrupt is kept.
    json.loads((tmp_path / "out" / "compare.json").read_text())


def test_compare_usage():
    assert "EXIT STATUS" in run([COMPARE, "--help"]).stdout.upper()
    for args in (["--targets", "local,nfs"], ["--reps", "0"], ["--size", "12q"], ["--bogus"]):
        p = run([COMPARE] + args, check=False)
        assert p.returncode == 2, (args, p.stderr)
