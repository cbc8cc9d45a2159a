"""Attachments (PNG figures a perf test attaches): the limits and names both sides of the sandbox check.

The judge writes each attachment into ATTACHMENTS_DIR of the run's work dir and signs its name and
sha256 in the test's record; the trusted side keeps a file only when its bytes still hash to the
signed digest (the submission's process shares the work dir and could have rewritten it).
"""

from __future__ import annotations

import re

ATTACHMENTS_DIR = ".attachments"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NAME = re.compile(r"[a-z0-9_-]{1,40}")
# The judge's file name: a digest of the test id (files of different tests never collide), then the name.
FILE = re.compile(r"[0-9a-f]{16}-[a-z0-9_-]{1,40}\.png")
MAX_BYTES = 2 << 20   # per attachment: a readable figure at the judge's dpi is ~100 KB
MAX_PER_TEST = 4
DPI = 110             # a fixed resolution: the same figure gives the same size on every machine


def check_name(name: object) -> str:
    """`name` when it is a safe attachment name; ValueError (saying what is allowed) otherwise."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"perf.attach: the name must be 1 to 40 of a-z, 0-9, '_' and '-', not {name!r}")
    return name


def check_png(data: bytes) -> bytes:
    """`data` when it is PNG bytes within the size cap; ValueError otherwise."""
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError(f"perf.attach: not PNG bytes (they start {bytes(data[:8])!r}, a PNG starts "
                         f"{PNG_SIGNATURE!r}); pass a matplotlib Figure or the bytes of a saved PNG")
    if len(data) > MAX_BYTES:
        raise ValueError(f"perf.attach: {len(data) / 2**20:.1f} MB is over the {MAX_BYTES >> 20} MB cap "
                         "of one attachment (a smaller figure or a lower dpi)")
    return data
