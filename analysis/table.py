"""Plain-text tables for the terminal: no dependencies, widths fitted to the content."""
from __future__ import annotations


def format_table(headers: list[str], rows: list[list], max_width: int = 80) -> str:
    cells = [[str(h) for h in headers]] + [["" if v is None else _fmt(v) for v in r] for r in rows]
    widths = [min(max_width, max(len(row[i]) for row in cells)) for i in range(len(headers))]

    def line(row):
        return "  ".join(_clip(v, w).ljust(w) if i < len(row) - 1 else _clip(v, w)
                         for i, (v, w) in enumerate(zip(row, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
