# SPDX-License-Identifier: MIT
"""bench/compare's outputs: compare.json (one record per target and
workload, the median of the repetitions), compare.md (the table with ratios
to the local disk and to each peer) and the bandwidth-vs-transfer-size plots."""
import json
import os
import shutil
import statistics
import subprocess

UNITS = {"seq-write": "MiB/s", "seq-read": "MiB/s", "rand-read-4k": "IOPS",
         "md-": "ops/s", "md4-": "ops/s", "mdhard-": "ops/s",
         "stream-1m": "MiB/s"}
MAIN_WORKLOADS = ["seq-write-1m", "seq-read-1m", "rand-read-4k", "md-create", "md-stat",
                  "md-remove", "md4-create", "md4-stat", "md4-remove", "mdhard-create",
                  "mdhard-stat", "mdhard-read", "mdhard-remove"]


def unit_of(workload):
    for prefix, unit in UNITS.items():
        if workload.startswith(prefix):
            return unit
    return "?"


def size_label(n):
    for shift, suffix in ((30, "g"), (20, "m"), (10, "k")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, suffix)
    return str(n)


def make_records(samples, verify, order):
    """@samples: {(target, workload): [values]} -> the list compare.json holds."""
    recs = []
    for (target, workload), vals in sorted(samples.items(),
                                           key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])):
        if not vals:
            continue
        r = {"target": target, "workload": workload, "value": round(statistics.median(vals), 3),
             "unit": unit_of(workload), "samples": [round(v, 3) for v in vals]}
        if target in verify:
            r["verify"] = verify[target]
        recs.append(r)
    return recs


def write_json(path, records):
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        # One record per line: readable, and diffable between runs.
        f.write("[\n" + ",\n".join(" " + json.dumps(r) for r in records) + "\n]\n")
    os.replace(tmp, path)


def _fmt(v):
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


def _ratio(r):
    return "%.2f" % r if r >= 0.1 else "%.3f" % r


def write_markdown(path, records, targets, reasons, notes, meta, sweep):
    val = {(r["target"], r["workload"]): r["value"] for r in records}
    peers = [t for t in targets if t != "local"]
    L = []
    L.append("# rdfs-bench comparison: %s" % ", ".join(targets))
    L.append("")
    L.append("Command: `%s`  " % meta["command"])
    L.append("Host: %s, %s; %s  " % (meta["host"], meta["cpus"], meta["date"]))
    L.append("Matrix: %s; medians of %d repetition(s), targets interleaved round-robin per "
             "repetition; sequential runs: %s per run, 1 task.  " % (meta["mode"], meta["reps"],
                                                                    meta["size"]))
    L.append("")
    L.append("| workload | unit | " + " | ".join(targets) + " |")
    L.append("|---|---|" + "---|" * len(targets))
    shown = [w for w in MAIN_WORKLOADS if any((t, w) in val for t in targets)]
    for w in shown:
        cells = []
        for t in targets:
            if t in reasons:
                cells.append("n/a")
                continue
            v = val.get((t, w))
            if v is None:
                cells.append("n/a")
            elif t != "local" and val.get(("local", w)):
                cells.append("%s (%s× local)" % (_fmt(v), _ratio(v / val[("local", w)])))
            else:
                cells.append(_fmt(v))
        L.append("| %s | %s | %s |" % (w, unit_of(w), " | ".join(cells)))
    L.append("")
    # Every target against every other one: rows are the target, columns the reference.
    if len(targets) > 1:
        L.append("Ratios (row target ÷ column target), per workload:")
        L.append("")
        for w in shown:
            L.append("| %s | " % w + " | ".join("÷ " + t for t in targets) + " |")
            L.append("|---|" + "---|" * len(targets))
            for a in targets:
                cells = []
                for b in targets:
                    va, vb = val.get((a, w)), val.get((b, w))
                    cells.append("—" if a == b else (_ratio(va / vb) if va and vb else "n/a"))
                L.append("| %s | %s |" % (a, " | ".join(cells)))
            L.append("")
    lim = [(k, v) for k, v in val.items() if k[0] in ("disk-odirect", "loopback-tcp")]
    if lim:
        L.append("Physical limits measured in the same run:")
        L.append("")
        L.append("| limit | workload | value |")
        L.append("|---|---|---|")
        for (t, w), v in sorted(lim):
            L.append("| %s | %s | %s %s |" % (t, w, _fmt(v), unit_of(w)))
        L.append("")
        disk_w, disk_r = val.get(("disk-odirect", "seq-write-1m")), val.get(("disk-odirect", "seq-read-1m"))
        if disk_w and disk_r:
            L.append("Sequential 1 MiB as a fraction of the disk's O_DIRECT rate: " + "; ".join(
                "%s write %.0f%%, read %.0f%%" % (t, 100 * val.get((t, "seq-write-1m"), 0) / disk_w,
                                                 100 * val.get((t, "seq-read-1m"), 0) / disk_r)
                for t in targets if (t, "seq-write-1m") in val))
            L.append("")
    if sweep and any(w.startswith("seq-") for _, w in val):
        L.append("Bandwidth vs transfer size (MiB/s, write / read):")
        L.append("")
        L.append("| target | " + " | ".join(size_label(x) for x in sweep) + " |")
        L.append("|---|" + "---|" * len(sweep))
        for t in targets + ["disk-odirect"]:
            cells = []
            for x in sweep:
                w = val.get((t, "seq-write-" + size_label(x)))
                r = val.get((t, "seq-read-" + size_label(x)))
                none = "—" if t == "disk-odirect" else "n/a"    # measured at 1m only
                cells.append("%s / %s" % (_fmt(w) if w else none, _fmt(r) if r else none))
            if any(c not in ("n/a / n/a", "— / —") for c in cells):
                L.append("| %s | %s |" % (t, " | ".join(cells)))
        L.append("")
    L.append("Targets:")
    L.append("")
    for t in targets:
        if t in reasons:
            L.append("- **%s**: n/a — %s" % (t, reasons[t]))
        else:
            L.append("- **%s**: %s" % (t, notes.get(t, "")))
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))
    return "\n".join(L)


def write_plots(outdir, records, targets, sweep):
    """compare-seq-write.svg and compare-seq-read.svg with gnuplot; returns the
    files written, or raises RuntimeError saying why not."""
    if not shutil.which("gnuplot"):
        raise RuntimeError("gnuplot not installed (deploy/install-deps --bench: gnuplot-nox)")
    val = {(r["target"], r["workload"]): r["value"] for r in records}
    written = []
    for kind in ("write", "read"):
        series = []
        for t in targets:
            pts = [(x, val.get((t, "seq-%s-%s" % (kind, size_label(x))))) for x in sweep]
            pts = [(x, v) for x, v in pts if v]
            if pts:
                series.append((t, pts))
        if not series:
            continue
        dat = os.path.join(outdir, "compare-seq-%s.dat" % kind)
        with open(dat, "w") as f:
            for t, pts in series:
                f.write("# %s\n" % t)
                for x, v in pts:
                    f.write("%d %.3f\n" % (x // 1024, v))
                f.write("\n\n")
        plots = ", ".join("'%s' index %d using 1:2 with linespoints lw 2 title '%s'" % (dat, i, t)
                          for i, (t, _) in enumerate(series))
        # The disk's O_DIRECT rate (measured at 1 MiB) as the line to read the others against.
        disk = val.get(("disk-odirect", "seq-%s-1m" % kind))
        if disk:
            plots += ", %.3f with lines dt 2 lw 2 lc rgb 'black' title 'disk O_DIRECT (1 MiB)'" % disk
        # SVG for documents, PNG for everything that cannot show SVG.
        for ext, term in (("svg", "svg size 800,500 dynamic noenhanced background rgb 'white'"),
                          ("png", "pngcairo size 800,500 noenhanced background rgb 'white'")):
            img = os.path.join(outdir, "compare-seq-%s.%s" % (kind, ext))
            script = ("set terminal %s\n"
                      "set output '%s'\n"
                      "set title 'Sequential %s bandwidth vs transfer size (1 task)'\n"
                      "set xlabel 'transfer size (KiB)'\nset ylabel 'MiB/s'\n"
                      "set logscale x 2\nset key outside right\nset grid\nset yrange [0:*]\n"
                      "plot %s\n" % (term, img, kind, plots))
            p = subprocess.run(["gnuplot"], input=script, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
            if p.returncode != 0:
                if ext == "png":
                    break       # a gnuplot without cairo: the SVG will do
                raise RuntimeError("gnuplot failed: %s" % p.stdout.strip()[-300:])
            written.append(img)
    return written
