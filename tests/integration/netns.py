# SPDX-License-Identifier: MIT
"""netns.py - deploy/netns-cluster as a module for the tests: NetnsCluster (a
cluster whose hosts are network namespaces, with partition, cut, degrade, heal,
stop and cont) and unavailable() (why namespaces cannot be used here, or None).
The fixture keeps the object, so a test drives its faults in process; `down`
works from the command line too (the state is in DIR/state.json)."""
import importlib.util
from importlib.machinery import SourceFileLoader
from pathlib import Path

_path = str(Path(__file__).resolve().parents[2] / "deploy" / "netns-cluster")
_spec = importlib.util.spec_from_loader("netns_cluster", SourceFileLoader("netns_cluster", _path))
_engine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_engine)

NetnsCluster = _engine.NetnsCluster
unavailable = _engine.unavailable
