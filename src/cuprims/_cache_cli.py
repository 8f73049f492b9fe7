"""``python -m cuprims cache info | clear | prune``: the on-disk cache from the command line.

``info`` prints where the cache is, whether it can be used, its size cap, and its entries,
bytes and disk-hit counts per kind (``--entries``: every entry, most recently used
first); ``clear`` deletes every entry; ``prune`` evicts the least recently used entries
down to the cap (``--max-bytes``) and removes what crashed writers left. ``--json`` prints
one JSON object instead of a table. Nothing here imports numba or touches a GPU.

Example::

    $ python -m cuprims cache info
    $ CUPRIMS_CACHE_MAX_BYTES=500M python -m cuprims cache prune --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Sequence

from . import config
from ._jit.disk_cache import DiskCache


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m cuprims", description="cuprims' on-disk cache of compiled code")
    sub = parser.add_subparsers(dest="group", required=True)
    cache = sub.add_parser("cache", help="inspect or clean the on-disk cache")
    actions = cache.add_subparsers(dest="action", required=True)
    info = actions.add_parser("info", help="location, size cap, entries, bytes and hit counts")
    info.add_argument("--entries", action="store_true", help="list every entry, most recently used first")
    actions.add_parser("clear", help="delete every entry")
    prune = actions.add_parser("prune", help="evict least recently used entries down to the cap, remove debris")
    prune.add_argument("--max-bytes", type=config._bytes, default=None, metavar="N",
                       help="the cap to prune to (default CUPRIMS_CACHE_MAX_BYTES, else 2 GiB); suffixes K, M, G")
    for p in (info, actions.choices["clear"], prune):
        p.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _info(cache: DiskCache, entries: bool) -> dict[str, Any]:
    summary = cache.summary()
    out = {"location": str(cache.root), "status": cache.status(), "max_bytes": cache.max_bytes, **summary}
    if not entries:
        out.pop("items")
    return out


def _print_info(info: dict[str, Any]) -> None:
    print(f"cuprims disk cache: {info['location']}  ({info['status']})")
    print(f"size cap: {_size(info['max_bytes'])}  (CUPRIMS_CACHE_MAX_BYTES)")
    rows = [(kind, k["entries"], k["bytes"], k["hits"]) for kind, k in sorted(info["kinds"].items())]
    rows.append(("total", info["entries"], info["bytes"], info["hits"]))
    print(f"{'kind':10s} {'entries':>8s} {'bytes':>12s} {'hits':>8s}")
    for kind, count, nbytes, hits in rows:
        print(f"{kind:10s} {count:8d} {_size(nbytes):>12s} {hits:8d}")
    for item in info.get("items", []):
        used = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item["last_used"]))
        print(f"  {item['kind']:8s} {item['key'][:16]}  {_size(item['bytes']):>10s}  {item['hits']:6d} hits  "
              f"last used {used}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cache = DiskCache(config.cache_dir(), config.cache_max_bytes())
    if args.action == "info":
        result = _info(cache, args.entries)
        if args.json:
            print(json.dumps(result, indent=2, sort_keys=True))
        else:
            _print_info(result)
        return 0
    before = cache.summary()
    if args.action == "clear":
        cache.clear()
        result = {"location": str(cache.root), "removed_entries": before["entries"], "removed_bytes": before["bytes"]}
        text = f"removed {before['entries']} entries ({_size(before['bytes'])}) from {cache.root}"
    else:
        cap = args.max_bytes if args.max_bytes is not None else cache.max_bytes
        evicted, debris = cache.prune(cap)
        after = cache.summary()
        result = {"location": str(cache.root), "max_bytes": cap, "evicted_entries": evicted,
                  "removed_debris": debris, "entries": after["entries"], "bytes": after["bytes"]}
        text = (f"evicted {evicted} entries, removed {debris} leftover files; {after['entries']} entries "
                f"({_size(after['bytes'])}) remain under the {_size(cap)} cap in {cache.root}")
    print(json.dumps(result, indent=2, sort_keys=True) if args.json else text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
