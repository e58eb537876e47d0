"""A tiny pure-Python PNG bar chart (zlib + struct), so reports need no plotting library.

The chart has no text: the report's CSV and its result (``chart.labels``) carry the labels and
numbers, in the bars' order. Colours cycle through the Okabe-Ito palette, which stays distinct
for colour-blind readers.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

RGB = tuple[int, int, int]

PALETTE: tuple[RGB, ...] = (
    (0, 114, 178),
    (230, 159, 0),
    (0, 158, 115),
    (204, 121, 167),
    (86, 180, 233),
    (213, 94, 0),
    (240, 228, 66),
)
BACKGROUND: RGB = (255, 255, 255)
AXIS: RGB = (64, 64, 64)
GRID: RGB = (225, 225, 225)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    # length, type, data, CRC of type+data (PNG spec section 5.3).
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png(width: int, height: int, rows: Sequence[bytes]) -> bytes:
    """A truecolour 8-bit PNG from ``height`` rows of ``width * 3`` RGB bytes."""
    if width <= 0 or height <= 0 or len(rows) != height:
        raise ValueError("image must have a positive size and one row per line")
    # Filter type 0 (None) on every scanline: the rows are flat colour runs, which zlib
    # compresses well without per-line filtering.
    raw = b"".join(b"\x00" + bytes(row) for row in rows)
    if len(raw) != height * (1 + width * 3):
        raise ValueError("every row must hold width * 3 bytes")
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 6))
        + _chunk(b"IEND", b"")
    )


def bar_chart_png(
    values: Sequence[float], *, width: int = 640, height: int = 360, margin: int = 24
) -> bytes:
    """Bars for ``values`` (negative ones drawn as zero) on a baseline with light gridlines at
    quarters of the largest value. An empty or all-zero series draws just the axes."""
    width = max(width, 2 * margin + 8)
    height = max(height, 2 * margin + 8)
    plot_w, plot_h = width - 2 * margin, height - 2 * margin
    top = max((float(v) for v in values), default=0.0)
    n = len(values)
    slot = plot_w / n if n else plot_w
    gap = max(1, int(slot * 0.2))
    bars = []  # (x0, x1, height in pixels, colour)
    for i, v in enumerate(values):
        x0 = margin + int(i * slot) + gap // 2
        x1 = max(x0 + 1, margin + int((i + 1) * slot) - gap // 2)
        h = round(plot_h * float(v) / top) if top > 0 and float(v) > 0 else 0
        bars.append((x0, x1, h, bytes(PALETTE[i % len(PALETTE)])))

    background = bytes(BACKGROUND) * width
    axis_px, grid_px = bytes(AXIS), bytes(GRID)
    grid_rows = {margin + round(plot_h * q / 4) for q in range(4)} if top > 0 else set()
    base = margin + plot_h  # the x axis, in image rows counted from the top
    rows = []
    for y in range(height):
        row = bytearray(background)
        if y in grid_rows:
            row[margin * 3 : (margin + plot_w) * 3] = grid_px * plot_w
        if margin <= y < base:
            above_base = base - y
            for x0, x1, h, colour in bars:
                if above_base <= h:
                    row[x0 * 3 : x1 * 3] = colour * (x1 - x0)
        if y == base:
            row[margin * 3 : (margin + plot_w) * 3] = axis_px * plot_w
        if margin <= y <= base:
            row[(margin - 1) * 3 : margin * 3] = axis_px  # the y axis
        rows.append(bytes(row))
    return encode_png(width, height, rows)
