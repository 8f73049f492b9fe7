"""The cuprims logger without a logging import on the warm path (cuprims._base.log)."""

from __future__ import annotations

import logging
import subprocess
import sys

from cuprims._base import log, stats


def test_stage_logs_at_debug_when_the_cuprims_logger_asks(caplog):
    with caplog.at_level(logging.DEBUG, logger="cuprims"):
        assert log.debug_enabled()
        with stats.stage("unit-test-stage", "detail"):
            pass
    records = [r.getMessage() for r in caplog.records if r.name == "cuprims"]
    assert any("unit-test-stage" in m and "detail" in m for m in records), records


def test_debug_is_off_at_the_default_level(caplog):
    with caplog.at_level(logging.WARNING, logger="cuprims"):
        assert not log.debug_enabled()


def test_warnings_reach_the_cuprims_logger(caplog):
    with caplog.at_level(logging.WARNING, logger="cuprims"):
        log.logger.warning("cuprims: test warning %d", 7)
    assert [r.getMessage() for r in caplog.records if r.name == "cuprims"] == ["cuprims: test warning 7"]


def test_importing_the_build_path_does_not_import_logging():
    """A warm build's modules (the disk cache, the in-memory cache, the build, an algorithm)
    leave logging unimported; its first record imports it."""
    code = ("import sys\n"
            "import cuprims.algorithms.reduce.api, cuprims._build.build, cuprims._cache.disk, cuprims._cache.memory\n"
            "print('logging' in sys.modules, 'concurrent.futures' in sys.modules)\n"
            "from cuprims._base.log import logger, debug_enabled\n"
            "assert not debug_enabled()\n"
            "logger.debug('x')\n"
            "print('logging' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "True"], out
