# SPDX-License-Identifier: MIT
"""deploy/local-cluster and the mount helper, as a person uses them."""
import os

from conftest import BIN, LOCAL_CLUSTER, MiB, assert_bytes_equal, fuse_only, run


def test_down_then_up_keeps_all_data(fresh_cluster):
    c = fresh_cluster
    data = os.urandom(5 * MiB + 1)
    os.mkdir(c.mnt / "d")
    (c.mnt / "d" / "f").write_bytes(data)
    os.symlink("d/f", c.mnt / "l")
    assert c.status().returncode == 0
    run([LOCAL_CLUSTER, "down", "--dir", c.dir])
    assert not os.path.ismount(c.mnt)
    st = c.status()
    assert st.returncode == 1, st.stdout
    # down is idempotent.
    run([LOCAL_CLUSTER, "down", "--dir", c.dir])
    c.up()
    assert c.status().returncode == 0
    assert_bytes_equal(data, (c.mnt / "l").read_bytes())
    assert os.listdir(c.mnt / "d") == ["f"]


@fuse_only("mount.fuse.rdfs is rdfs-fuse's mount helper")
def test_mount_helper_with_fstab_options(cluster, tmp_path):
    mnt = cluster.dir / "mnt-helper"
    mnt.mkdir(exist_ok=True)
    opts = "defaults,_netdev,noauto,secret_file=%s,attr_timeout=0" % cluster.secret
    run([BIN / "mount.fuse.rdfs", "127.0.0.1:%d" % cluster.port, mnt, "-o", opts])
    cluster.extra_mounts.append(mnt)
    try:
        assert os.path.ismount(mnt)
        (mnt / "via-helper").write_bytes(b"helper")
        assert (cluster.mnt / "via-helper").read_bytes() == b"helper"
        types = [line.split()[2] for line in open("/proc/mounts") if line.split()[1] == str(mnt)]
        assert types == ["fuse.rdfs"], types
    finally:
        cluster.unmount(mnt)
    assert not os.path.ismount(mnt)


def _state_pid(c, name):
    import json
    with open(c.dir / "state.json") as f:
        return json.load(f)["procs"][name]["pid"]


@fuse_only("kills the rdfs-fuse process (the kernel client's dead helper is "
           "tests/vm/lkm/run-tests' check)")
def test_down_after_fuse_killed_leaves_no_stale_mount(fresh_cluster):
    c = fresh_cluster
    (c.mnt / "f").write_bytes(b"still here")
    os.kill(_state_pid(c, "fuse"), 9)
    run([LOCAL_CLUSTER, "down", "--dir", c.dir])
    assert not os.path.ismount(c.mnt)
    assert not any(line.split()[1] == str(c.mnt) for line in open("/proc/mounts"))
    c.up()
    assert (c.mnt / "f").read_bytes() == b"still here"


def test_up_restarts_a_partly_dead_cluster(fresh_cluster):
    c = fresh_cluster
    data = os.urandom(3 * MiB)
    with open(c.mnt / "f", "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    c.kill9(c.port)
    st = c.status()
    assert st.returncode == 1, st.stdout
    c.up()
    assert c.status().returncode == 0
    assert_bytes_equal(data, (c.mnt / "f").read_bytes())
