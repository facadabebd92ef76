# SPDX-License-Identifier: MIT
"""netns.py - deploy/netns-cluster as a module for the tests: NetnsCluster (a
cluster whose hosts are network namespaces, with partition, cut, degrade, heal,
stop and cont) and unavailable() (why namespaces cannot be used here, or None).
The fixture keeps the object, so a test drives its faults in process; `down`
works from the command line too (the state is in DIR/state.json).
module_marks() and module_cluster() are what a module of netns tests starts with."""
import importlib.util
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

from conftest import BIN, _cluster_root, _remove, fuse_only

_path = str(Path(__file__).resolve().parents[2] / "deploy" / "netns-cluster")
_spec = importlib.util.spec_from_loader("netns_cluster", SourceFileLoader("netns_cluster", _path))
_engine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_engine)

NetnsCluster = _engine.NetnsCluster
unavailable = _engine.unavailable


def module_marks():
    """pytestmark of a module of netns tests: skipped, saying why, where namespaces
    cannot be made; FUSE clients only."""
    why = unavailable()
    return [pytest.mark.skipif(why is not None, reason="network namespaces: %s" % why),
            fuse_only("the netns hosts mount with rdfs-fuse")]


def module_cluster(kind, setup=None, **kw):
    """The body of a module fixture: a NetnsCluster(**@kw) up (then @setup(it)),
    yielded; after the module `rdfs fsck` must be clean and down() must have
    removed everything."""
    c = NetnsCluster(_cluster_root(kind), BIN, **kw)
    c.up()
    try:
        if setup:
            setup(c)
        yield c
        p = c.rdfs("fsck", check=False, timeout=300)
        assert p.returncode == 0, "rdfs fsck after the tests:\n" + p.stdout + p.stderr
    finally:
        errors = c.down()
        assert not errors, "netns cluster cleanup: " + "; ".join(errors)
        _remove(c)
