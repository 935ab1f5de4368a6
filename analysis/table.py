"""Text tables: for the terminal (rich lays them out) and for Markdown documents (cells escaped).

A terminal table is one line a row, columns apart by two spaces under a rule of dashes, in plain
ASCII and without colour, so that ``grep`` and a pipe read it as a person does; a cell wider than
the column's limit ends in an ellipsis. A cell's control characters (a record's ``ESC [2J``, a
carriage return that would overwrite the row) are shown as escapes (``core.text.printable``), never
obeyed. A Markdown cell has its ``|`` escaped and its newlines made spaces, so that no message can
split or end a row of a document's table.
"""
from __future__ import annotations

import io

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gapfuzz.core.text import printable

# no edges, a blank between columns, a rule of dashes under the header
PLAIN = box.Box("    \n    \n -  \n    \n    \n    \n    \n    \n", ascii=True)
WIDE = 100_000  # the console is never what narrows a table: its columns' limits are


def format_table(headers: list[str], rows: list[list], max_width: int = 80) -> str:
    """A terminal table: each column as wide as its widest cell, up to ``max_width`` characters."""
    table = Table(box=PLAIN, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), highlight=False)
    for h in headers:
        table.add_column(Text(_one_line(str(h))), max_width=max_width, no_wrap=True, overflow="ellipsis")
    for r in rows:
        table.add_row(*(Text(_one_line("" if v is None else _fmt(v))) for v in r))
    out = io.StringIO()
    Console(file=out, width=WIDE, color_system=None, markup=False, emoji=False, highlight=False,
            force_terminal=False, legacy_windows=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def _one_line(text: str) -> str:
    return printable(" ".join(text.splitlines()) if "\n" in text or "\r" in text else text, newlines=False)


def markdown_cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell: ``|`` escaped, newlines made spaces."""
    return _one_line(text).replace("|", "\\|")


def markdown_table(df, percent=lambda column: False, digits: int = 3) -> str:
    """A DataFrame as a Markdown table; floats in the columns ``percent`` names as percentages."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(map(markdown_cell, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = []
        for c, v in zip(cols, row):
            if v is None or (isinstance(v, float) and v != v):
                cells.append("")
            elif isinstance(v, float):
                cells.append(f"{v:.1%}" if percent(c) else f"{v:.{digits}g}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(map(markdown_cell, cells)) + " |")
    return "\n".join(lines)
