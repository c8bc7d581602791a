"""Tables in materialisation metadata: at most so many rows, each text cell cut to a length and
shown as the text it is. Cells hold a model's answers and uploaded files' text (untrusted), so the
characters that would make Markdown or HTML of them (a tag, an entity, a link, a code span, a
column break) are escaped with a backslash, CommonMark's escape for any ASCII punctuation."""

import re
from typing import TypedDict, Unpack

import pandas as pd
from dagster import MetadataValue

MAX_TABLE_ROWS = 100
MAX_CELL_CHARS = 300  # of a metadata table's cell (a prompt, a list of thousands of documents)
MARKUP = re.compile(r"([\\`<>&|\[\]])")


class TableOptions(TypedDict, total=False):
    """tabulate's options a Markdown table is written with."""

    disable_numparse: bool  # cells as the text they are, never read as numbers


def clipped(value: object, limit: int = MAX_CELL_CHARS) -> object:
    """A table cell's value; text (a list's too) longer than `limit` characters cut there."""
    tolist = getattr(value, "tolist", None)  # a numpy array's
    if tolist is None and not isinstance(value, str | list | tuple | dict):
        return value
    text = str(tolist() if tolist else value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def as_text(value: object, limit: int = MAX_CELL_CHARS) -> object:
    """A table cell as text that Markdown shows as written: cut at `limit`, on one line, markup
    characters escaped (numbers and None as they are)."""
    cell = clipped(value, limit)
    return MARKUP.sub(r"\\\1", " ".join(cell.split())) if isinstance(cell, str) else cell


def markdown_table(
    frame: pd.DataFrame,
    rows: int = MAX_TABLE_ROWS,
    cell_chars: int = MAX_CELL_CHARS,
    **tabulate: Unpack[TableOptions],
) -> MetadataValue:
    """At most `rows` rows of a frame as a Markdown table, each text cell at most `cell_chars`
    characters and shown as text (saying how many more rows there are)."""
    if not len(frame):
        return MetadataValue.md("_no rows_")
    more = f"\n\n_{len(frame) - rows} more rows in the warehouse_" if len(frame) > rows else ""
    shown = frame.head(rows).copy()
    for column in shown.select_dtypes(include="object").columns:
        shown[column] = shown[column].map(lambda value: as_text(value, cell_chars))
    return MetadataValue.md(shown.to_markdown(index=False, **tabulate) + more)
