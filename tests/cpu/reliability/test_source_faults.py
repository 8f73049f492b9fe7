"""Generated sources written for inspection (CUPRIMS_DUMP_DIR, or a per-user directory
under $TMPDIR when NVRTC fails): never through a planted symlink, into a private 0700
directory, and an unusable directory never fails a build nor hides a CompileError."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from cuprims import clear_all_caches
from cuprims._build import build as jit_build
from cuprims._compile import nvrtc
from cuprims.errors import CompileError
from cpu_helpers import ARCH, bad_source, run_python
from fault_helpers import make_max


@pytest.fixture
def tmpdir_env(tmp_path, monkeypatch) -> Path:
    """A private $TMPDIR for this test (tempfile's cached choice reset)."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp


def _default_names(tmp: Path) -> list[Path]:
    """Where generated source goes by default: the per-user name, and the shared name used
    before it (planted too, so that a regression to it is caught)."""
    uid = os.geteuid() if hasattr(os, "geteuid") else 0
    return [tmp / f"cuprims-sources-{uid}", tmp / "cuprims-sources"]


def _assert_compile_error_without_source(exc_info):
    err = exc_info.value
    assert "error" in err.log.lower()
    assert err.source_path is None
    assert "could not be written" in str(err)


def test_dump_dir_that_is_a_file_does_not_fail_a_build(cache, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="cuprims")
    bogus = tmp_path / "dump-file"
    bogus.write_text("not a directory")
    monkeypatch.setenv("CUPRIMS_DUMP_DIR", str(bogus))
    assert make_max().cubin() == cache.max.cubin
    assert bogus.read_text() == "not a directory"
    msgs = [r.getMessage() for r in caplog.records if r.name == "cuprims" and str(bogus) in r.getMessage()]
    assert len(msgs) == 1 and "not a directory" in msgs[0], msgs


def test_compile_error_survives_a_dump_dir_that_is_a_file(tmp_path, monkeypatch):
    bogus = tmp_path / "dump-file"
    bogus.write_text("not a directory")
    monkeypatch.setenv("CUPRIMS_DUMP_DIR", str(bogus))
    with pytest.raises(CompileError) as info:
        jit_build.build(bad_source(), ARCH)
    _assert_compile_error_without_source(info)
    assert bogus.read_text() == "not a directory"


def test_compile_error_survives_a_default_sources_path_that_is_a_file(tmpdir_env):
    for p in _default_names(tmpdir_env):
        p.write_text("in the way")
    with pytest.raises(CompileError) as info:
        nvrtc.compile_to_ltoir(bad_source(), ARCH)
    _assert_compile_error_without_source(info)


NOT_WRITABLE_SCRIPT = r"""
import json, sys
sys.path[:0] = [%r]
from cpu_helpers import bad_source
from cuprims._compile import nvrtc
from cuprims.errors import CompileError
try:
    nvrtc.compile_to_ltoir(bad_source(), 90)
except CompileError as err:
    print(json.dumps({"raised": "CompileError", "source_path": err.source_path, "message": str(err)}))
"""


def test_compile_error_survives_an_unwritable_sources_dir(tmpdir_env):
    prefix = ()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: modes do not bind")
        prefix = (setpriv, "--bounding-set=-dac_override,-dac_read_search")
    helpers = str(Path(__file__).resolve().parents[1])
    dirs = _default_names(tmpdir_env)
    for d in dirs:
        d.mkdir(mode=0o500)   # ours and private, but not writable
    try:
        proc = run_python(NOT_WRITABLE_SCRIPT % helpers, env={"TMPDIR": str(tmpdir_env)}, prefix=prefix, timeout=120)
    finally:
        for d in dirs:
            d.chmod(0o700)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no CompileError raised:\n{proc.stdout}\n{proc.stderr}"
    out = json.loads(lines[-1])
    assert out["source_path"] is None and "could not be written" in out["message"]
    assert all(list(d.iterdir()) == [] for d in dirs)


def test_symlinked_sources_dir_is_not_followed(tmpdir_env, tmp_path):
    victim = tmp_path / "victim-dir"
    victim.mkdir()
    for p in _default_names(tmpdir_env):
        p.symlink_to(victim)
    with pytest.raises(CompileError) as info:
        nvrtc.compile_to_ltoir(bad_source(), ARCH)
    _assert_compile_error_without_source(info)
    assert list(victim.iterdir()) == [], "generated source written through a planted symlink"


def test_default_sources_dir_is_private(tmpdir_env):
    with pytest.raises(CompileError) as info:
        nvrtc.compile_to_ltoir(bad_source(), ARCH)
    path = Path(info.value.source_path)
    assert path.read_text() == bad_source().text
    assert path.parent.parent == tmpdir_env and path.parent.name != "cuprims-sources", "a directory shared by users"
    st = path.parent.lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_symlinks_in_dump_dir_are_not_followed(cache, tmp_path, monkeypatch):
    text = make_max()._builds.source(ARCH).text
    clear_all_caches()
    dump = tmp_path / "dump"
    dump.mkdir(mode=0o700)
    monkeypatch.setenv("CUPRIMS_DUMP_DIR", str(dump))
    name = nvrtc.source_name(text)
    victim = tmp_path / "victim.cu"
    victim.write_text("victim")
    (dump / name).symlink_to(victim)
    victim_tmp = tmp_path / "victim-tmp"
    (dump / name).with_suffix(f".{os.getpid()}.tmp").symlink_to(victim_tmp)
    (dump / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(victim_tmp)
    assert make_max().cubin() == cache.max.cubin
    assert victim.read_text() == "victim"
    assert not os.path.lexists(victim_tmp), "created through a planted symlink"
    written = dump / name
    assert written.is_file() and not written.is_symlink() and written.read_text() == text
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
