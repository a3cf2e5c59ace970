"""What a request's bytes cost once decoded: tracemalloc's count of what orjson.loads keeps for ~4 MB of
JSON of a few shapes, over the raw size. The figures behind max_request_bytes' factor (docs/performance.md).

    .venv/bin/python bench/decoded_cost.py
"""

from __future__ import annotations

import itertools
import tracemalloc
from typing import Final

import orjson

RAW_BYTES: Final = 4_000_000


def repeated(item: bytes) -> bytes:
    return b"[" + b",".join(itertools.repeat(item, RAW_BYTES // (len(item) + 1))) + b"]"


SHAPES: Final = {
    "one long string": orjson.dumps("x" * RAW_BYTES),
    "records {k, v, n}": repeated(b'{"k":"abcdefgh","v":0.123456789,"n":417}'),
    "floats": repeated(b"1.5"),
    "short strings": repeated(b'"ab"'),
    "empty arrays": repeated(b"[]"),
    "empty objects": repeated(b"{}"),
}


def main() -> None:
    print(f"{'shape':<20} {'raw MB':>7} {'decoded MB':>11} {'factor':>7}")
    for name, raw in SHAPES.items():
        tracemalloc.start()
        decoded = orjson.loads(raw)
        kept, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del decoded
        print(f"{name:<20} {len(raw) / 1e6:>7.1f} {kept / 1e6:>11.1f} {kept / len(raw):>7.1f}")


if __name__ == "__main__":
    main()
