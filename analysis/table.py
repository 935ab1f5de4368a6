"""Plain-text tables: for the terminal (widths fitted to the content) and for Markdown documents."""
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


def markdown_table(df, percent=lambda column: False, digits: int = 3) -> str:
    """A DataFrame as a Markdown table; floats in the columns ``percent`` names as percentages."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = []
        for c, v in zip(cols, row):
            if v is None or (isinstance(v, float) and v != v):
                cells.append("")
            elif isinstance(v, float):
                cells.append(f"{v:.1%}" if percent(c) else f"{v:.{digits}g}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(x.replace("|", "\\|").replace("\n", " ") for x in cells) + " |")
    return "\n".join(lines)
