"""``python -m cuprims cache info | clear | prune``: the on-disk cache from the command line.

``info`` prints where the cache is, whether it can be used, its size cap, and its entries,
bytes on disk and disk-hit counts per kind, each kind labelled with what it holds, then
compiled code and precompiled headers apart (``--entries``: every entry, most recently
used first); ``clear`` deletes every entry; ``prune`` evicts the least recently used entries
down to the cap (``--max-bytes``: a whole number of bytes >= 1, optionally with a K, M, G
or T suffix, powers of 1024; anything else is refused) and removes what crashed writers
left. ``--json`` prints one JSON object instead of a table. Nothing here imports numba or
touches a GPU.

A damaged cache (a path in it that is not a private directory of ours, or unreadable) never
makes a command fail with a traceback: each does what it can with the rest, prints its
usual output, then one line on stderr naming the first problem (and how many more) and
exits with status 1. ``clear`` removes everything in the cache's own directories, and a
foreign or unreadable directory only if it is empty; it exits 0 when nothing is left,
else reports what it had to leave (that part is the user's to remove).

Example::

    $ python -m cuprims cache info
    $ CUPRIMS_CACHE_MAX_BYTES=500M python -m cuprims cache prune --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import Any, Iterator, Sequence

from cuprims import config
from cuprims._cache.disk import DiskCache
from cuprims._cache.entries import PCH_KIND
from cuprims._cache.files import UnsafeDirectory
from cuprims._cache.walk import problem
from cuprims.errors import ArgumentError

PROG = "python -m cuprims"
# What each kind of entry holds, as ``info`` shows it: compiled code, or NVRTC's precompiled
# headers (large, packed, and kept to their own share of the cap: _compile/pch_store.py)
KIND_LABELS = {
    "cubin": "compiled code: cubins",
    "kernel": "compiled code: NVRTC LTO-IR",
    "coop": "compiled code: coop LTO-IR",
    "rawop": "compiled code: C++ operators' LTO-IR (RawOp.from_cpp)",
    PCH_KIND: "precompiled headers (NVRTC)",
}
GROUPS = ("compiled_code", "precompiled_headers")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def _max_bytes(text: str) -> int:
    try:
        return config.parse_byte_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected {exc}, got {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    from cuprims._base.version import VERSION as __version__

    parser = argparse.ArgumentParser(prog=PROG, description="cuprims' command line: its on-disk cache of "
                                     "compiled code (python -m cuprims cache --help)")
    parser.add_argument("--version", action="version", version=f"cuprims {__version__}")
    parser.set_defaults(show_help=parser.print_help)
    sub = parser.add_subparsers(dest="group", metavar="{cache}")
    cache = sub.add_parser("cache", help="inspect or clean the on-disk cache",
                           description="inspect or clean cuprims' on-disk cache of compiled code")
    cache.set_defaults(show_help=cache.print_help)
    actions = cache.add_subparsers(dest="action", metavar="{info,clear,prune}")
    info = actions.add_parser("info", help="location, size cap, entries, bytes and hit counts")
    info.add_argument("--entries", action="store_true", help="list every entry, most recently used first")
    actions.add_parser("clear", help="delete every entry")
    prune = actions.add_parser("prune", help="evict least recently used entries down to the cap, remove debris")
    prune.add_argument("--max-bytes", type=_max_bytes, default=None, metavar="N",
                       help="the cap to prune to (default CUPRIMS_CACHE_MAX_BYTES, else 2 GiB): a whole number "
                            "of bytes, or with a suffix K, M, G or T (powers of 1024), e.g. 500M")
    for p in (info, actions.choices["clear"], prune):
        p.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _info(cache: DiskCache, entries: bool) -> dict[str, Any]:
    summary = cache.summary()
    groups = {g: {"entries": 0, "bytes": 0, "hits": 0} for g in GROUPS}
    for kind, totals in summary["kinds"].items():
        totals["label"] = KIND_LABELS.get(kind, "compiled code")
        group = groups["precompiled_headers" if kind == PCH_KIND else "compiled_code"]
        for field in ("entries", "bytes", "hits"):
            group[field] += totals[field]
    out = {"location": str(cache.root), "status": cache.status(), "max_bytes": cache.max_bytes, **summary, **groups}
    if not entries:
        out.pop("items")
    return out


def _print_info(info: dict[str, Any]) -> None:
    print(f"cuprims disk cache: {info['location']}  ({info['status']})")
    print(f"size cap: {_size(info['max_bytes'])}  (CUPRIMS_CACHE_MAX_BYTES)")
    rows = [(kind, k["label"], k["entries"], k["bytes"], k["hits"]) for kind, k in sorted(info["kinds"].items())]
    rows.append(("total", "", info["entries"], info["bytes"], info["hits"]))
    print(f"{'kind':8s} {'holds':28s} {'entries':>8s} {'bytes on disk':>14s} {'hits':>8s}")
    for kind, label, count, nbytes, hits in rows:
        print(f"{kind:8s} {label:28s} {count:8d} {_size(nbytes):>14s} {hits:8d}")
    for group in GROUPS:
        g = info[group]
        print(f"{group.replace('_', ' ') + ':':21s}{g['entries']:5d} entries, {_size(g['bytes']):>10s} on disk")
    for item in info.get("items", []):
        used = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item["last_used"]))
        print(f"  {item['kind']:8s} {item['key'][:16]}  {_size(item['bytes']):>10s}  {item['hits']:6d} hits  "
              f"last used {used}")


def _problems(cache: DiskCache, *lists: Sequence[str]) -> list[str]:
    """Every problem met, once each: the cache's own status first, then what the passes skipped."""
    status = cache.status()
    found = [] if status == "ok" else [status]
    for problems in lists:
        found += [p for p in problems if p not in found]
    return found


def _one_line(problems: list[str]) -> str:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{problems[0]}{more}"


@contextlib.contextmanager
def _logger_silenced() -> Iterator[None]:
    """The ``cuprims`` logger's warnings kept off stderr: each command reports what it met in
    one line of its own."""
    import logging

    log, handler = logging.getLogger("cuprims"), logging.NullHandler()
    propagate = log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def _run(cache: DiskCache, args: argparse.Namespace) -> tuple[dict[str, Any], str, str | None]:
    """(result, text, the stderr line or None) of one command."""
    if args.action == "info":
        result = _info(cache, args.entries)
        problems = _problems(cache, result["skipped"])
        return result, "", (f"problem in the disk cache at {cache.root}: {_one_line(problems)}"
                             if problems else None)
    before = cache.summary()
    if args.action == "clear":
        left = cache.clear()
        after = cache.summary()
        removed, nbytes = before["entries"] - after["entries"], before["bytes"] - after["bytes"]
        result = {"location": str(cache.root), "removed_entries": removed, "removed_bytes": nbytes, "left": left}
        text = f"removed {removed} entries ({_size(nbytes)}) from {cache.root}"
        problems = _problems(cache, left)
        return result, text, (f"could not remove all of the disk cache at {cache.root}: {_one_line(problems)}"
                              if problems else None)
    cap = args.max_bytes if args.max_bytes is not None else cache.max_bytes
    evicted, debris = cache.prune(cap)
    after = cache.summary()
    result = {"location": str(cache.root), "max_bytes": cap, "evicted_entries": evicted,
              "removed_debris": debris, "entries": after["entries"], "bytes": after["bytes"],
              "skipped": after["skipped"]}
    text = (f"evicted {evicted} entries, removed {debris} leftover files; {after['entries']} entries "
            f"({_size(after['bytes'])}) remain under the {_size(cap)} cap in {cache.root}")
    problems = _problems(cache, before["skipped"], after["skipped"])
    return result, text, (f"problem in the disk cache at {cache.root}: {_one_line(problems)} (left alone)"
                          if problems else None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``cache`` command; 0 when it did all it was asked (or, with no command, printed
    the help), 1 when part of the cache could not be used (one line on stderr says what), 2
    for a bad command line."""
    args = _parser().parse_args(argv)
    if args.group is None or args.action is None:   # a group or command left out: what there is to ask
        args.show_help()
        return 0
    prog = f"{PROG} cache {args.action}"
    try:
        cache = DiskCache(config.cache_dir(), config.cache_max_bytes())
    except ArgumentError as exc:      # a CUPRIMS_* variable the settings cannot take
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    with _logger_silenced():
        try:
            result, text, trouble = _run(cache, args)
        except (UnsafeDirectory, OSError) as exc:   # the walks skip what they meet; this is the last guard
            print(f"{prog}: {problem(cache.root, exc)}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    elif args.action == "info":
        _print_info(result)
    else:
        print(text)
    if trouble:
        print(f"{prog}: {trouble}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
