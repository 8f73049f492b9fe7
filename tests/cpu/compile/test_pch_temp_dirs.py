"""A process's directory of PCHs made within the process only (hundreds of MB each): removed
when the process exits, and, when it is killed instead, by the next process that makes
its own. A directory whose process lives is never touched."""

from __future__ import annotations

import fcntl
import json
import os
import time

from cpu_helpers import last_json, run_python
from cuprims._compile import pch_resident


def _pch_dir(root, name: str, *, lock_file: bool = True):
    path = root / f"cuprims-pch-{name}"
    path.mkdir()
    (path / "made.pch").write_bytes(b"\0" * 4096)
    if lock_file:
        (path / "alive.lock").touch()
    return path


def test_only_directories_whose_process_ended_are_removed(tmp_path):
    ended = _pch_dir(tmp_path, "ended")
    living = _pch_dir(tmp_path, "living")
    old_unlocked = _pch_dir(tmp_path, "old", lock_file=False)
    young_unlocked = _pch_dir(tmp_path, "young", lock_file=False)
    hour_ago = time.time() - 2 * 3600
    os.utime(old_unlocked, (hour_ago, hour_ago))
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "alive.lock").touch()
    (tmp_path / "cuprims-pch-link").symlink_to(target)          # never followed
    (tmp_path / "cuprims-pch-file").write_bytes(b"not a directory")
    other = tmp_path / "other-dir"
    other.mkdir()
    held = os.open(living / "alive.lock", os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)           # as its process holds it
        removed = pch_resident.remove_abandoned(str(tmp_path))
    finally:
        os.close(held)
    assert sorted(removed) == sorted([str(ended), str(old_unlocked)])
    assert not ended.exists() and not old_unlocked.exists()
    assert (living / "made.pch").exists() and (young_unlocked / "made.pch").exists()
    assert (tmp_path / "cuprims-pch-link").is_symlink() and target.exists()
    assert (tmp_path / "cuprims-pch-file").exists() and other.exists()


_MAKE_DIR = """
import json, os, signal, sys
from cuprims._compile import pch_resident
path = pch_resident.temp_dir()
open(os.path.join(path, "made.pch"), "wb").write(bytes(1 << 20))
print(json.dumps({"dir": path, "others": sorted(os.listdir(os.path.dirname(path)))}), flush=True)
if sys.argv[1:] == ["kill"]:
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_directory_of_a_killed_process_is_removed_by_the_next_one(tmp_path):
    env = {"TMPDIR": str(tmp_path)}
    import subprocess
    import sys

    killed = subprocess.run([sys.executable, "-c", _MAKE_DIR, "kill"], capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=120)
    assert killed.returncode == -9, killed.stderr
    left = json.loads(killed.stdout.splitlines()[-1])["dir"]
    assert os.path.exists(os.path.join(left, "made.pch"))      # what a killed process leaves
    after = last_json(run_python(_MAKE_DIR, env=env).stdout)
    assert not os.path.exists(left)
    assert os.path.basename(left) not in after["others"] and os.path.basename(after["dir"]) in after["others"]
    assert not os.path.exists(after["dir"])                     # the second one exited: its own is gone
