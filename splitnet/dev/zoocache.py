"""The committed cache behind docs/zoo.md: one small JSON file per registered method under
``experiments/cache/zoo/methods/``, keyed by the method's name and a fingerprint of what its
measurements depend on (its stages, declared orders and stored coefficient strings), so that a
changed coefficient set invalidates only its own entry. The peer coefficient sets the doc also
measures live in ``experiments/cache/zoo/peers.json``, with a fingerprint of their own.

Standard library only (no torch): the functions take scheme objects and plain data.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from .._io import atomic_write_text

__all__ = ["CACHE", "ROOT", "data_fingerprint", "entry_path", "fingerprint", "load", "load_peers",
           "peers_path", "prune", "regen_command", "save", "save_peers", "stale"]

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "experiments" / "cache" / "zoo"


def data_fingerprint(data) -> str:
    """12 hex digits of the SHA-1 of ``data`` as canonical JSON."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def fingerprint(scheme) -> str:
    """What a zoo measurement of ``scheme`` depends on: its stages (exactly, as its stage
    string), its declared order, class order and problem class, and for a zoo entry the stored
    and printed coefficient strings the 40-digit checks use."""
    method = getattr(scheme, "method", None)
    return data_fingerprint({
        "stages": scheme.stage_string(), "order": scheme.order,
        "class_order": getattr(scheme, "class_order", None),
        "problem_class": getattr(scheme, "problem_class", None),
        "params": list(method.params) if method is not None else None,
        "published": list(method.published or ()) if method is not None else None})


def entry_path(name: str, cache: Path = CACHE) -> Path:
    """The file of method ``name`` in the cache folder ``cache``."""
    return Path(cache) / "methods" / f"{name}.json"


def peers_path(cache: Path = CACHE) -> Path:
    """The file of the peer coefficient sets in the cache folder ``cache``."""
    return Path(cache) / "peers.json"


def load(name: str, cache: Path = CACHE) -> dict | None:
    """The cached entry of ``name``, or None when there is none."""
    p = entry_path(name, cache)
    return json.loads(p.read_text()) if p.exists() else None


def save(name: str, entry: dict, cache: Path = CACHE) -> Path:
    """Write ``entry`` (plain data with its ``fingerprint``) as ``name``'s file: indented, keys
    sorted, so that a re-measured method is a readable diff."""
    text = json.dumps(_plain({"name": name, **entry}), indent=1, sort_keys=True,
                      allow_nan=False)
    return atomic_write_text(entry_path(name, cache), text + "\n")


def _plain(x):
    """``x`` with NaN/inf as None (strict JSON) and tuples as lists."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def load_peers(cache: Path = CACHE) -> dict | None:
    """``{"fingerprint", "rows"}`` of the peer coefficient sets, or None when not cached."""
    p = peers_path(cache)
    return json.loads(p.read_text()) if p.exists() else None


def save_peers(rows: list, key: str, cache: Path = CACHE) -> dict:
    """Write the peer rows with their fingerprint ``key``; returns what it wrote."""
    data = _plain({"fingerprint": key, "rows": rows})
    text = json.dumps(data, indent=1, sort_keys=True, allow_nan=False)
    atomic_write_text(peers_path(cache), text + "\n")
    return data


def stale(schemes: dict, cache: Path = CACHE) -> list[str]:
    """Names in ``schemes`` (name -> scheme) without an entry for their current fingerprint."""
    out = []
    for name, s in schemes.items():
        entry = load(name, cache)
        if entry is None or entry.get("fingerprint") != fingerprint(s):
            out.append(name)
    return out


def prune(names, cache: Path = CACHE) -> list[str]:
    """Delete the entries of methods not in ``names`` (no longer registered); their names."""
    keep, gone = set(names), []
    for p in sorted((Path(cache) / "methods").glob("*.json")):
        if p.stem not in keep:
            p.unlink()
            gone.append(p.stem)
    return gone


def regen_command(names) -> str:
    """The command that re-measures ``names`` and re-renders docs/zoo.md."""
    return "python3 -m splitnet.dev regen zoo --only " + ",".join(names)
