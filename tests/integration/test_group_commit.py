# SPDX-License-Identifier: MIT
"""Group commit: creates from several processes at once share the metaserver's
synced writes (rdfs_ms_sync_batch_mutations counts what each sync carried), and
no create that was acknowledged is lost when the metaserver is killed (-9) in
the middle of such a storm; `rdfs fsck` is clean after each test (the fixture),
the crash included."""
import os
import subprocess
import sys
import pytest

from conftest import _stop, fsck_clean, wait_until
from test_metrics import metrics_cluster, scrape, value

TASKS = 4
FILES = 150

CREATOR = r"""
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
for i in range(n):
    p = os.path.join(d, "f%06d" % i)
    try:
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError as e:
        print("error %s" % e.strerror, flush=True)
        sys.exit(0)
    print(p, flush=True)       # acknowledged: open(O_CREAT) returned
"""


@pytest.fixture
def gc_cluster():
    c = metrics_cluster("gc")
    yield c
    try:
        fsck_clean(c)
    finally:
        _stop(c)


def creators(root, n, tag):
    return [subprocess.Popen([sys.executable, "-c", CREATOR, str(root / ("%s%d" % (tag, t))),
                              str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for t in range(TASKS)]


def test_concurrent_creates_share_syncs(gc_cluster):
    c = gc_cluster
    before = scrape(c.urls["metaserver"])
    procs = creators(c.mnt, FILES, "t")
    outs = [p.communicate(timeout=300)[0].split() for p in procs]
    assert all(len(o) == FILES for o in outs), [o[-2:] for o in outs]
    after = scrape(c.urls["metaserver"])

    def delta(m):
        return value(after, m) - value(before, m)

    syncs = delta("rdfs_ms_sync_batch_mutations_count")
    mutations = delta("rdfs_ms_sync_batch_mutations_sum")
    creates = TASKS * FILES
    # every create is one synced batch (mkdirs add TASKS more)
    assert mutations >= creates
    # ... and some syncs carried more than one of them
    assert syncs < mutations, "no sync carried two mutations (%d syncs)" % syncs
    assert value(after, "rdfs_ms_sync_batch_mutations_bucket", le="1") < \
        value(after, "rdfs_ms_sync_batch_mutations_count")
    print("%d creates from %d processes: %d mutations in %d syncs, %.2f per sync"
          % (creates, TASKS, mutations, syncs, mutations / syncs))


def test_kill9_mid_storm_loses_no_acknowledged_create(gc_cluster):
    c = gc_cluster
    procs = creators(c.mnt, 100000, "k")
    # let the storm run, then kill the metaserver under it
    def all_going():
        dirs = [c.mnt / ("k%d" % d) for d in range(TASKS)]
        return all(d.exists() and len(os.listdir(d)) > 50 for d in dirs)
    wait_until(all_going, "every creator to have created 50 files", 120)
    saved = c.kill9(c.port)
    c.restart(saved)
    c.wait_servers_up()
    # the creators go on (or stopped at an error): stop them; what they printed
    # before is what was acknowledged
    acked = []
    for p in procs:
        p.kill()
        out, _ = p.communicate()
        acked += [line for line in out.split("\n") if line.startswith("/")]
    assert len(acked) >= TASKS * 50
    # a new client, so nothing comes from the old mount's caches
    mnt2 = c.mount_second(c.dir / "mnt-after")
    missing = [a for a in acked
               if not os.path.exists(str(a).replace(str(c.mnt), str(mnt2), 1))]
    assert not missing, "%d of %d acknowledged creates lost, e.g. %s" % (
        len(missing), len(acked), missing[:5])
