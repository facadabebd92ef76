#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench.py - the guest half of tests/vm/bench (run by tests/vm/run --rdma).

Raw perftest (ib_write_bw, ib_read_bw over rxe0) and sequential write/read of
one file through FUSE (deploy/local-cluster) over TCP and, when local-cluster
can, over RDMA in both data modes, all in this one guest run, so the FUSE
figures can be read as ratios of the raw RDMA ones. Prints a table and writes
the records to OUT (a JSON list of {"target", "op", "mib_per_s", ...}).
"""

import argparse
import json
import os
import re
import shutil
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


def timed_dd(args):
    t0 = time.monotonic()
    run(["dd", "status=none"] + args)
    return time.monotonic() - t0


def fuse_sequential(name, up_opts, size_mib, bindir):
    """Sequential write (fsync'd) then read (page cache dropped) of one file."""
    d = os.path.join("/run/rdfs-vm", f"bench-{name}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    run([LC, "up", "--dir", d, "--bin", bindir] + up_opts, timeout=300)
    try:
        f = os.path.join(d, "mnt", "seq")
        secs = timed_dd(["if=/dev/zero", f"of={f}", "bs=1M", f"count={size_mib}",
                         "conv=fsync"])
        write = size_mib / secs
        drop_caches()
        secs = timed_dd([f"if={f}", "of=/dev/null", "bs=1M"])
        read = size_mib / secs
        if os.path.getsize(f) != size_mib * MiB:
            raise RuntimeError(f"{f}: size {os.path.getsize(f)}, wrote {size_mib} MiB")
    finally:
        run([LC, "down", "--dir", d], timeout=120, check=False)
        shutil.rmtree(d, ignore_errors=True)
    return write, read


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

    variants = [("fuse-tcp", [], None)]
    more, skipped = rdma_variants()
    variants += more
    if skipped:
        say(f"SKIP {skipped}")
    for target, opts, note in variants:
        try:
            write, read = fuse_sequential(target, opts, args.size_mib, bindir)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            failures.append(f"{target}: {e}")
            continue
        for op, bw in (("write", write), ("read", read)):
            rec = {"target": target, "op": op, "mib_per_s": round(bw, 2),
                   "file_mib": args.size_mib}
            if note:
                rec["note"] = note
            records.append(rec)
        say(f"{target} {args.size_mib} MiB: write {write:.1f} MiB/s, read {read:.1f} MiB/s")

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    os.replace(args.out + ".tmp", args.out)

    raw = {r["op"]: r["mib_per_s"] for r in records
           if r["target"].startswith("ib_") and r.get("bytes") == 1048576}
    tcp = {r["op"]: r["mib_per_s"] for r in records if r["target"] == "fuse-tcp"}
    print()
    print(f"{'target':18} {'op':6} {'size':>10} {'MiB/s':>9} {'vs raw 1M':>10} "
          f"{'vs fuse-tcp':>12}")
    for r in records:
        size = f"{r['bytes']} B" if "bytes" in r else f"{r['file_mib']} MiB"
        ratio = vs_tcp = ""
        if not r["target"].startswith("ib_") and raw.get(r["op"]):
            ratio = f"{r['mib_per_s'] / raw[r['op']]:.2f}x"
        if r["target"].startswith("fuse-rdma") and tcp.get(r["op"]):
            vs_tcp = f"{r['mib_per_s'] / tcp[r['op']]:.2f}x"
        print(f"{r['target']:18} {r['op']:6} {size:>10} {r['mib_per_s']:9.1f} {ratio:>10} "
              f"{vs_tcp:>12}")
    for r in records:
        if r.get("note") and r["op"] == "read":
            print(f"{r['target']}: {r['note']}")
    if skipped:
        print(skipped)
    print(f"\nrecords: {args.out}")
    for fail in failures:
        say(f"FAILED {fail}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
