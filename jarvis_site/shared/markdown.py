"""A person's own words quoted inside text that is read as markdown (a notice, a Discord
message): escaped, so that what they typed is shown as typed.

CommonMark lets a backslash escape any ASCII punctuation. Only the characters that can open or
close markup inline are escaped everywhere, and the ones that mark a block only where a line
begins, so the text stays readable where it is shown as plain text (a push notification).
"""

import re

# Emphasis, code, links and images, autolinks and HTML, strikethrough, entities, table cells,
# and the backslash itself.
INLINE = frozenset("\\*_`[]<>~&|")
# A heading, a quote, a list item, a rule, a setext underline or a fence, at a line's start.
BLOCK_MARK = frozenset("#>-+=")
# An ordered list item: digits then `.` or `)` at a line's start.
ORDERED_ITEM = re.compile(r"^(\s*\d{1,9})([.)])")


def markdown_literal(text: str) -> str:
    """`text` escaped so that markdown renders exactly its characters."""
    return "\n".join(_line(line) for line in text.split("\n"))


def _line(line: str) -> str:
    escaped = "".join("\\" + char if char in INLINE else char for char in line)
    stripped = escaped.lstrip(" \t")
    if stripped[:1] in BLOCK_MARK:
        indent = escaped[: len(escaped) - len(stripped)]
        return indent + "\\" + stripped
    return ORDERED_ITEM.sub(r"\1\\\2", escaped, count=1)


def markdown_cut(text: str, limit: int) -> str:
    """The first `limit` characters of markdown `text`, never ending in half an escape (a
    backslash whose character was cut off would be shown as a backslash)."""
    cut = text[:limit]
    trailing = len(cut) - len(cut.rstrip("\\"))
    return cut[:-1] if trailing % 2 else cut
