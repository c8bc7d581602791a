"""A table's declaration read as text: the DDL between CREATE TABLE's parentheses, parsed for its key
and its columns, and rewritten without keys for a DuckLake catalog (which has no PRIMARY KEY or
UNIQUE constraints)."""

from __future__ import annotations

import re

_KEY = re.compile(r",\s*PRIMARY KEY\s*\(([^)]*)\)", re.IGNORECASE)
_INLINE_KEY = re.compile(r"^\s*(\w+)\s+[^,]*?\bPRIMARY KEY\b", re.IGNORECASE)


def table_key(columns: str) -> list[str]:
    """The key columns a table's DDL declares."""
    found = _KEY.search(columns)
    if found:
        return [name.strip() for name in found.group(1).split(",")]
    return [match.group(1) for part in columns.split(",") if (match := _INLINE_KEY.match(part))]


def ddl_columns(columns: str) -> list[str]:
    """The column names a table's DDL declares, in order."""
    names: list[str] = []
    depth, piece = 0, ""
    for char in columns + ",":
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            first = piece.split()[0] if piece.split() else ""
            if first and first.upper() not in ("PRIMARY", "UNIQUE"):
                names.append(first)
            piece = ""
        else:
            piece += char
    return names


def without_keys(columns: str) -> str:
    """A table's DDL without its PRIMARY KEY and UNIQUE constraints."""
    return re.sub(r"\s+(PRIMARY KEY|UNIQUE)\b", "", _KEY.sub("", columns), flags=re.IGNORECASE)
