"""A process whose builds the disk cache serves: what it imports, and the entry-header
reader that lets it skip the json package."""

from __future__ import annotations

import hashlib
import json
import random
import struct
import sys

import pytest

from cuprims._cache import entries as cache_entries
from cuprims._cache.entries import MAGIC, decode_entry, encode_entry
from cpu_helpers import run_python

HEADERS = [
    b'{"blobs":[["cubin",12]],"key":"ab","kind":"cubin","meta":{"arch":90,"kernels":{"k<int>":"_Z1k"}}}',
    b'{"a": [1, 2.5, -0.0, 1e400, 12345678901234567890123, "x\\u00e9\\ud800", null, true, false]}',
    b' {"a":1}\n', b'\t[1, 2 ,3]\r\n', b'NaN', b'[Infinity,-Infinity]', b'{"a":1,"a":2}', b'"\\n\\"\\\\"',
    b'', b'  ', b'{', b'}', b'{"a":1}x', b'{"a":1} {"b":2}', b'"\x01"', b'\xff\xfe', b"{'a':1}", b'[1,]',
    b'{"a":nan}', b'01', b'-', b'"\\uZZZZ"', b'[' * 100_000 + b']' * 100_000,
]


def _outcome(loads, data: bytes):
    try:
        return "value", repr(loads(data))
    except RecursionError:
        return "RecursionError", None
    except ValueError:
        return "ValueError", None


def _mutations(seed: int, count: int):
    rng = random.Random(seed)
    base = HEADERS[0]
    for _ in range(count):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(3)
            at = rng.randrange(len(data))
            if op == 0:
                data[at] = rng.choice(b'{}[]",:0123456789.eE-+ \\untrfalse\x00\xff')
            elif op == 1:
                del data[at]
            else:
                data.insert(at, rng.randrange(256))
        yield bytes(data)


@pytest.mark.parametrize("data", HEADERS, ids=range(len(HEADERS)))
def test_the_header_reader_gives_what_json_loads_gives(data):
    assert _outcome(cache_entries._json_loads, data) == _outcome(json.loads, data)


def test_the_header_reader_agrees_with_json_loads_on_damaged_headers():
    differing = [d for d in _mutations(2026, 3000)
                 if _outcome(cache_entries._json_loads, d) != _outcome(json.loads, d)]
    assert not differing, differing[:5]


@pytest.fixture
def fresh_reader():
    """The header reader chosen again in the test, and again after it."""
    cache_entries._header_reader.cache_clear()
    yield
    cache_entries._header_reader.cache_clear()


def test_the_reader_is_the_c_scanner_where_python_has_it(fresh_reader):
    """The comparisons above test the C scanner, not json.loads beside itself."""
    pytest.importorskip("_json")
    assert cache_entries._header_reader() is not json.loads


def test_without_the_c_accelerator_json_loads_reads_the_header(monkeypatch, fresh_reader):
    monkeypatch.setitem(sys.modules, "_json", None)   # makes `from _json import ...` fail
    assert cache_entries._header_reader() is json.loads
    assert cache_entries._json_loads(HEADERS[0])["kind"] == "cubin"
    with pytest.raises(ValueError):
        cache_entries._json_loads(b'{"a":1}x')


def test_an_accelerator_that_refuses_the_context_leaves_json_loads_reading(monkeypatch, fresh_reader):
    import types

    def make_scanner(context):
        raise AttributeError("'_ScannerContext' object has no attribute 'array_hook'")

    monkeypatch.setitem(sys.modules, "_json", types.SimpleNamespace(make_scanner=make_scanner))
    assert cache_entries._header_reader() is json.loads


def _signed(header: bytes, blobs: bytes = b"") -> bytes:
    """An entry whose checksum is right around ``header``, whatever it holds."""
    payload = struct.pack("<Q", len(header)) + header + blobs
    return MAGIC + hashlib.sha256(payload).digest() + struct.pack("<Q", len(payload)) + payload


@pytest.mark.parametrize("header, message", [
    (b'{"kind":"cubin","key":"ab"', "header is not JSON"),
    (b'{"kind":"cubin"} trailing', "header is not JSON"),
    (b'\xff{}', "header is not JSON"),
    (b'[' * 100_000 + b']' * 100_000, "nested too deeply"),
    (b'{"kind":"cubin","key":"ab","meta":{},"blobs":[]} ', None),
])
def test_a_signed_entry_with_a_bad_header_is_rejected(header, message):
    if message is None:   # whitespace after the value is JSON, as json.loads reads it
        assert decode_entry(_signed(header), kind="cubin", key="ab") == ({}, {})
        return
    with pytest.raises(ValueError, match=message):
        decode_entry(_signed(header), kind="cubin", key="ab")


def test_entries_round_trip_through_the_header_reader():
    meta = {"arch": 90, "kernels": {"reduce<float, op>": "_Z6reduceIfE"}, "meta": {"threads": 256},
            "names": ["a", "b\u00e9"], "ratio": 0.5, "none": None}
    blobs = {"cubin": b"\x7fELF" + bytes(range(256)), "empty": b""}
    raw = encode_entry(meta, blobs, kind="kernel", key="cd" * 32)
    assert decode_entry(raw, kind="kernel", key="cd" * 32) == (meta, blobs)


def test_a_build_the_disk_cache_serves_imports_no_json_secrets_or_logging(tmp_path):
    """The second process's build reads its entry, keys and loads it without importing the
    json package, secrets (base64, hmac), logging or concurrent.futures: each cost that
    process milliseconds of the ~30 it may take."""
    code = """
        import sys
        import numpy as np
        import cuprims
        cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                                 op=cuprims.OpKind.PLUS, h_init=np.float32(0), compute_capability=90)
        info = cuprims.cache_info()
        print(info["nvrtc_compiles"], info["disk_hits"],
              *[name in sys.modules for name in ("json", "secrets", "logging", "concurrent.futures")])
    """
    env = {"CUPRIMS_CACHE_DIR": str(tmp_path / "cache"), "CUPRIMS_PCH": "0"}
    first = run_python(code, env=env).stdout.split()
    assert first[:2] == ["1", "0"], first
    second = run_python(code, env=env).stdout.split()
    assert second == ["0", "1", "False", "False", "False", "False"], second
