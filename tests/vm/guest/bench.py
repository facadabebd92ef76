#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench.py - the guest half of tests/vm/bench (run by tests/vm/run --rdma).

Raw perftest (ib_write_bw, ib_read_bw over rxe0) and sequential write/read of
one file through FUSE (deploy/local-cluster) and through the kernel client
(rdfs.ko, when built) over TCP and, when local-cluster can, over RDMA in both
data modes, all in this one guest run, so the file system figures can be read
as ratios of the raw RDMA ones. Each file is written (fsync'd), then read
twice with the client's page cache dropped: "read" with the I/O servers'
read-ahead cache cold (nothing of the file in it: only written), "read-warm"
with it holding what the first read brought in (the Gfarm paper's figure 4,
x and y); then O_DIRECT writes and reads at 1 MiB (64 MiB) and 4 KiB (4 MiB).
Everything --runs times per target; the medians go in the table and in the
records written to OUT (a JSON list of {"target", "op", "mib_per_s",
"runs_mib_per_s", "cpu_s_per_gib", ...}: CPU-seconds the whole guest was busy
per GiB; kernel-client reads also carry "copies_per_byte", the CPU copies of
file data the module counted).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.environ.get("RDFS_REPO") or os.getcwd()
LC = os.path.join(REPO, "deploy", "local-cluster")
MiB = 1 << 20
STEP_TIMEOUT = 900


def say(msg):
    print(f"bench: {msg}", flush=True)


def run(cmd, timeout=STEP_TIMEOUT, check=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}")
    return p.stdout


def perftest(tool, dev, addr, size, iters):
    """MiB/s of one perftest client/server pair (perftest's MB is 2^20 bytes)."""
    base = [tool, "-d", dev, "-x", "1", "-F", "-s", str(size), "-n", str(iters)]
    server = subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for attempt in range(10):
            p = subprocess.run(base + [addr], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=STEP_TIMEOUT)
            if p.returncode == 0:
                break
            # The server may not be listening on its exchange port yet.
            time.sleep(0.5)
        else:
            raise RuntimeError(f"{tool} client failed:\n{p.stdout}")
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    for line in p.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0] == str(size):
            return float(fields[3])
    raise RuntimeError(f"no result line in {tool}'s output:\n{p.stdout}")


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cpu_busy_s():
    """CPU-seconds the whole guest spent busy so far (every CPU; steal left out)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq ...
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def timed_dd(args):
    """(seconds, guest CPU-seconds) of one dd."""
    c0, t0 = cpu_busy_s(), time.monotonic()
    run(["dd", "status=none"] + args)
    return time.monotonic() - t0, cpu_busy_s() - c0


LKM_PORT = 7360
LKM_MNT = "/run/rdfs-vm/bench-lkm-mnt"


def lkm_stats():
    """The kernel client's counters (/sys/module/rdfs/parameters/stats)."""
    with open("/sys/module/rdfs/parameters/stats") as f:
        return {k: int(v) for k, v in (line.split() for line in f if line.strip())}


# O_DIRECT: (op, dd block size, MiB moved), on a file of their own
DIRECT_OPS = (("1M", "1M", 64), ("4K", "4k", 4))
DIRECT_MIB = {f"d{rw}-{name}": mib for name, _, mib in DIRECT_OPS for rw in ("write", "read")}


def sequential(d, size_mib, runs, stats=None):
    """In directory @d, @runs times: write a file (fsync'd), then read it twice,
    page cache dropped each time; then O_DIRECT writes and reads at 1 MiB and
    4 KiB. {op: [(MiB/s, guest CPU-s per GiB, copies per byte or None), ...]}."""
    out = {}

    def note(op, mib, secs, cpu, copies=None):
        out.setdefault(op, []).append((mib / secs, cpu * 1024 / mib, copies))

    for i in range(runs):
        f = os.path.join(d, f"seq{i}")
        secs, cpu = timed_dd(["if=/dev/zero", f"of={f}", "bs=1M", f"count={size_mib}",
                              "conv=fsync"])
        note("write", size_mib, secs, cpu)
        for op in ("read", "read-warm"):
            drop_caches()
            before = stats() if stats else None
            secs, cpu = timed_dd([f"if={f}", "of=/dev/null", "bs=1M"])
            copies = None
            if stats:
                copies = (stats()["copy_read_bytes"] - before["copy_read_bytes"]) / \
                    (size_mib * MiB)
            note(op, size_mib, secs, cpu, copies)
        if os.path.getsize(f) != size_mib * MiB:
            raise RuntimeError(f"{f}: size {os.path.getsize(f)}, wrote {size_mib} MiB")
        os.unlink(f)
        for name, bs, mib in DIRECT_OPS:
            mib = min(mib, size_mib)
            g = os.path.join(d, f"direct{i}-{name}")
            count = mib * MiB // (1 << 20 if bs == "1M" else 4096)
            secs, cpu = timed_dd(["if=/dev/zero", f"of={g}", f"bs={bs}", f"count={count}",
                                  "oflag=direct", "conv=fsync"])
            note(f"dwrite-{name}", mib, secs, cpu)
            drop_caches()
            secs, cpu = timed_dd([f"if={g}", "of=/dev/null", f"bs={bs}", "iflag=direct"])
            note(f"dread-{name}", mib, secs, cpu)
            os.unlink(g)
    return out


def fuse_sequential(name, up_opts, size_mib, runs, bindir, lkm=None):
    """sequential() through the FUSE mount of a fresh cluster, or with @lkm
    (the module's dir, mount options) through a kernel mount of it."""
    d = os.path.join("/run/rdfs-vm", f"bench-{name}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if lkm:
        up_opts = up_opts + ["--port-base", str(LKM_PORT)]
    run([LC, "up", "--dir", d, "--bin", bindir] + up_opts, timeout=300)
    mounted = False
    try:
        if not lkm:
            return sequential(os.path.join(d, "mnt"), size_mib, runs)
        lkmdir, kopts = lkm
        os.makedirs(LKM_MNT, exist_ok=True)
        run([os.path.join(lkmdir, "mount.rdfs"), "-o", f"{kopts},secret_file={d}/secret",
             f"127.0.0.1:{LKM_PORT}", LKM_MNT], timeout=120)
        mounted = True
        return sequential(LKM_MNT, size_mib, runs, lkm_stats)
    finally:
        if mounted:
            run(["umount", LKM_MNT], timeout=120, check=False)
        run([LC, "down", "--dir", d], timeout=120, check=False)
        shutil.rmtree(d, ignore_errors=True)


def lkm_load(lkmdir):
    """Load the kernel client (and the RDMA core it links against): None, or why not."""
    ko = os.path.join(lkmdir, "rdfs.ko")
    if not os.path.exists(ko) or not os.path.exists(os.path.join(lkmdir, "rdfs-lkm-helper")):
        return f"{lkmdir}/rdfs.ko or rdfs-lkm-helper not built (make lkm): kernel client " \
            "not measured"
    subprocess.run(["modprobe", "-a", "ib_core", "rdma_cm"], check=False)
    if subprocess.run(["grep", "-qw", "^rdfs", "/proc/modules"]).returncode != 0:
        p = subprocess.run(["insmod", ko], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if p.returncode != 0:
            return f"insmod {ko}: {p.stdout.strip()}: kernel client not measured"
    return None


# Only reads differ between the two modes: a FUSE write moves its data the
# same way in both (the I/O server RDMA-READs the client's buffer).
RDMA_NOTES = {
    "read": "reads: the client RDMA-READs each unit from the I/O server's buffer "
            "(rdma_mode=read, Gfarm figure 3); writes in both modes: the server "
            "RDMA-READs the client's buffer",
    "write": "reads: the I/O server RDMA-WRITEs each unit into the client's buffer "
             "(rdma_mode=write, Gfarm figure 2); writes in both modes: the server "
             "RDMA-READs the client's buffer",
}


LKM_NOTES = {
    "lkm-tcp": "kernel client over kernel TCP sockets: reads received straight into the "
               "page cache (the socket's copy is the only one)",
    "lkm-rdma-write": "kernel client, rdma_mode=write (figure 2): the I/O server RDMA-WRITEs "
                      "each unit into the page-cache pages, registered for that request only",
    "lkm-rdma-read": "kernel client, rdma_mode=read (figure 3): the module RDMA-READs each "
                     "unit from the I/O server's buffer into the page-cache pages",
}


def rdma_variants():
    """FUSE-over-RDMA runs local-cluster can do, as (target, up options, note), and
    what cannot be measured (None if nothing)."""
    help_text = run([LC, "up", "--help"], timeout=120, check=False)
    if "--transport" not in help_text:
        return [], "deploy/local-cluster up has no --transport option yet: FUSE over " \
            "RDMA not measured"
    if "--fuse-opt" not in help_text:
        return [("fuse-rdma-read", ["--transport", "rdma"], RDMA_NOTES["read"])], \
            "fuse-rdma-write not measured: deploy/local-cluster up has no --fuse-opt " \
            "to mount with rdma_mode=write"
    return [(f"fuse-rdma-{m}", ["--transport", "rdma", f"--fuse-opt=rdma_mode={m}"],
             RDMA_NOTES[m]) for m in ("read", "write")], None


def main(argv):
    ap = argparse.ArgumentParser(prog="bench.py")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3,
                    help="runs of every measurement per target (medians reported)")
    ap.add_argument("--ib-sizes", default="4096,65536,1048576")
    ap.add_argument("--ib-mib", type=int, default=64,
                    help="MiB each perftest run moves (iterations = this / size)")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "bench", "vm.json"))
    args = ap.parse_args(argv)

    dev = os.environ.get("RDFS_TEST_RDMA_DEV")
    addr = os.environ.get("RDFS_TEST_RDMA_ADDR")
    bindir = os.environ.get("RDFS_BIN") or os.path.join(
        os.environ.get("RDFS_BUILD") or os.path.join(REPO, "build"), "bin")
    records = []
    failures = []

    if dev and addr:
        for tool, op in (("ib_write_bw", "write"), ("ib_read_bw", "read")):
            for size in (int(s) for s in args.ib_sizes.split(",")):
                iters = max(20, args.ib_mib * MiB // size)
                try:
                    bw = perftest(tool, dev, addr, size, iters)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    failures.append(f"{tool} {size}: {e}")
                    continue
                records.append({"target": tool, "op": op, "mib_per_s": round(bw, 2),
                                "bytes": size})
                say(f"{tool} {size} B x {iters}: {bw:.1f} MiB/s")
    else:
        failures.append("no RDFS_TEST_RDMA_DEV/ADDR: run with tests/vm/run --rdma")

    variants = [("fuse-tcp", [], None, None)]
    more, skipped = rdma_variants()
    variants += [v + (None,) for v in more]
    if skipped:
        say(f"SKIP {skipped}")
    lkmdir = os.environ.get("RDFS_LKM_DIR") or os.path.join(os.path.dirname(bindir), "lkm")
    lkm_skipped = lkm_load(lkmdir)
    if lkm_skipped:
        say(f"SKIP {lkm_skipped}")
    else:
        variants.append(("lkm-tcp", [], LKM_NOTES["lkm-tcp"], (lkmdir, "transport=tcp")))
        if any(v[0].startswith("fuse-rdma") for v in more):
            for m in ("write", "read"):
                variants.append((f"lkm-rdma-{m}", ["--transport", "rdma"],
                                 LKM_NOTES[f"lkm-rdma-{m}"],
                                 (lkmdir, f"transport=rdma,rdma_mode={m}")))
    for target, opts, note, lkm in variants:
        try:
            results = fuse_sequential(target, opts, args.size_mib, args.runs, bindir, lkm)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            failures.append(f"{target}: {e}")
            continue
        for op, samples in results.items():
            rec = {"target": target, "op": op,
                   "mib_per_s": round(statistics.median(x[0] for x in samples), 2),
                   "runs_mib_per_s": [round(x[0], 2) for x in samples],
                   "cpu_s_per_gib": round(statistics.median(x[1] for x in samples), 2),
                   "file_mib": min(DIRECT_MIB.get(op, args.size_mib), args.size_mib)}
            if samples[0][2] is not None:
                rec["copies_per_byte"] = round(statistics.median(x[2] for x in samples), 3)
            if note:
                rec["note"] = note
            records.append(rec)
        say(f"{target} {args.size_mib} MiB, median of {args.runs}: " +
            ", ".join(f"{op} {r['mib_per_s']:.1f} MiB/s" for op, r in
                      ((r["op"], r) for r in records if r["target"] == target)))
    if not lkm_skipped:
        subprocess.run(["rmmod", "rdfs"], check=False)

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    os.replace(args.out + ".tmp", args.out)

    raw = {r["op"]: r["mib_per_s"] for r in records
           if r["target"].startswith("ib_") and r.get("bytes") == 1048576}
    raw["read-warm"] = raw.get("read")
    by = {(r["target"], r["op"]): r["mib_per_s"] for r in records}
    print()
    print(f"{'target':18} {'op':10} {'size':>10} {'MiB/s':>9} {'vs raw 1M':>10} "
          f"{'vs fuse-tcp':>12} {'vs fuse-rdma':>13} {'copies/B':>9} {'CPU s/GiB':>10}")
    for r in records:
        size = f"{r['bytes']} B" if "bytes" in r else f"{r['file_mib']} MiB"
        ratio = vs_tcp = vs_rdma = ""
        if not r["target"].startswith("ib_") and raw.get(r["op"]):
            ratio = f"{r['mib_per_s'] / raw[r['op']]:.2f}x"
        if r["target"] not in ("fuse-tcp", "ib_write_bw", "ib_read_bw") and \
                by.get(("fuse-tcp", r["op"])):
            vs_tcp = f"{r['mib_per_s'] / by[('fuse-tcp', r['op'])]:.2f}x"
        # the kernel client against FUSE in the same RDMA data mode
        if r["target"].startswith("lkm-rdma-"):
            fuse = by.get(("fuse-rdma-" + r["target"][len("lkm-rdma-"):], r["op"]))
            if fuse:
                vs_rdma = f"{r['mib_per_s'] / fuse:.2f}x"
        copies = f"{r['copies_per_byte']:.3f}" if "copies_per_byte" in r else ""
        cpu = f"{r['cpu_s_per_gib']:.1f}" if "cpu_s_per_gib" in r else ""
        print(f"{r['target']:18} {r['op']:10} {size:>10} {r['mib_per_s']:9.1f} {ratio:>10} "
              f"{vs_tcp:>12} {vs_rdma:>13} {copies:>9} {cpu:>10}")
    print(f"medians of {args.runs} runs each; CPU s/GiB: CPU-seconds the whole guest "
          "(client and servers) was busy per GiB moved")
    for r in records:
        if r.get("note") and r["op"] == "read":
            print(f"{r['target']}: {r['note']}")
    if lkm_skipped:
        print(lkm_skipped)
    if skipped:
        print(skipped)
    print(f"\nrecords: {args.out}")
    for fail in failures:
        say(f"FAILED {fail}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
