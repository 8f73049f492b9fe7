"""``python -m cuprims cache info | prune | clear`` on a damaged cache, and ``prune``'s
``--max-bytes``.

Every layout of ``DAMAGED_LAYOUTS`` x every command: no traceback, one line on stderr that
names the damaged path, exit status 1 -- except ``clear`` where it could remove the damage
(then it exits 0, silent on stderr). ``clear`` removes everything in the cache it may
remove, touches nothing outside it, and leaves a cache the next build works with. A
``--max-bytes`` that is not a whole byte count (optionally with a K, M, G or T suffix) is
refused naming the option, never read as the default cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuprims import config
from fault_helpers import DAMAGED_LAYOUTS, build_max_in_child, entry_path, sha, without_dac_override

COMMANDS = ("info", "prune", "clear")


def _cli(*args: str, root: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = dict(os.environ, CUPRIMS_CACHE_DIR=str(root))
    return subprocess.run([*prefix, sys.executable, "-m", "cuprims", "cache", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def _files_outside(tmp_path: Path, root: Path) -> dict[str, bytes]:
    """Every regular file under tmp_path but not inside the cache (the root itself included
    when it is a file), with its bytes."""
    out = {}
    for dirpath, _dirs, files in os.walk(tmp_path):
        for name in files:
            path = Path(dirpath) / name
            if root in path.parents or path.is_symlink():
                continue
            out[str(path)] = path.read_bytes()
    return out


def _left_in(root: Path) -> list[Path]:
    """Every path left under the cache root (the root included), symlinks not followed."""
    if not root.is_dir() or root.is_symlink():
        return [root] if os.path.lexists(root) else []
    found = [root]
    for dirpath, dirs, files in os.walk(root):
        found += [Path(dirpath) / n for n in dirs + files]
    return found


@pytest.mark.ci_sample(every=6)
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("layout", sorted(DAMAGED_LAYOUTS))
def test_commands_on_a_damaged_cache_report_one_line(cache, tmp_path, layout, command):
    damage = DAMAGED_LAYOUTS[layout]
    damaged = damage.plant(cache)
    prefix = without_dac_override() if damage.unprivileged else ()
    outside = _files_outside(tmp_path, cache.root)
    proc = _cli(command, root=cache.root, prefix=prefix)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    if command == "clear" and not damage.clear_leaves:
        assert proc.returncode == 0 and lines == [], proc.stderr
    else:
        assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"python -m cuprims cache {command}: ") and str(damaged) in lines[0], lines[0]
    if command != "clear":
        return
    assert _files_outside(tmp_path, cache.root) == outside, "clear touched something outside the cache"
    for path in _left_in(cache.root):   # only the damage is left, and the directories that hold it
        assert path == damaged or damaged in path.parents or path in damaged.parents, f"clear left {path}"
    out, _ = build_max_in_child(cache.root, tmp_path, prefix=prefix)
    assert out["sha"] == sha(cache.max.cubin)
    if damage.keeps_entries:
        assert entry_path(cache.root, "cubin", cache.max.cubin_key).is_file(), "the cache keeps nothing after clear"


# ----------------------------------------------------------------------------- --max-bytes

# what --max-bytes accepts, exactly (powers of 1024), and what it refuses (None)
MAX_BYTES = {"1000": 1000, "1000B": 1000, "500K": 500 << 10, "500M": 500 << 20, "500MB": 500 << 20,
             "500MiB": 500 << 20, "1G": 1 << 30, "3g": 3 << 30, "2T": 2 << 40,
             "-5": None, "zzz": None, "1.5G": None, "0": None, "0M": None, "12X": None, "1e9": None, "G": None,
             "": None, " 5 5": None, "1000iB": None, "\u00b2": None}


def test_prune_takes_a_whole_byte_count_exactly_and_refuses_anything_else(cache):
    for text, expected in MAX_BYTES.items():
        before = sorted(map(str, _left_in(cache.root)))
        proc = _cli("prune", f"--max-bytes={text}", "--json", root=cache.root)
        assert "Traceback" not in proc.stderr, proc.stderr
        if expected is None:
            assert proc.returncode == 2 and "--max-bytes" in proc.stderr, (text, proc.returncode, proc.stderr)
            assert proc.stdout == "" and sorted(map(str, _left_in(cache.root))) == before, f"pruned to {text!r}"
            with pytest.raises(ValueError):
                config.parse_byte_size(text)
        else:
            assert proc.returncode == 0, (text, proc.stderr)
            assert json.loads(proc.stdout)["max_bytes"] == expected == config.parse_byte_size(text), text


def test_prune_reads_a_negative_max_bytes_as_its_value_and_refuses_it(cache):
    proc = _cli("prune", "--max-bytes", "-5", root=cache.root)
    assert proc.returncode == 2 and "--max-bytes" in proc.stderr and "'-5'" in proc.stderr, proc.stderr
