"""Fenced blocks that never break: verbatim text inside markdown, recoverable byte for byte.

A fence is one backtick longer than the longest backtick run in the text (at least three), so no
line of the text can close it (CommonMark: a closing fence is at least as long as the opening).
The text sits between the opening line and a newline before the closing fence, so
`parse_fenced_blocks(fence(t))` gives back exactly `t`, trailing newlines and all.
"""

from __future__ import annotations

import re

_MIN_FENCE = 3  # CommonMark's shortest fence, not a tunable
_BACKTICK_RUN = re.compile(r"`+")
_OPENING = re.compile(r"^(?P<fence>`{3,})(?P<info>[^`]*)$")


def fence_length(text: str) -> int:
    longest = max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)
    return max(_MIN_FENCE, longest + 1)


def fence(text: str, info: str = "") -> str:
    """`text` as one fenced block (no trailing newline after the closing fence)."""
    if "`" in info or "\n" in info or "\r" in info:
        raise ValueError("a fence's info string holds no backtick and no line break")
    ticks = "`" * fence_length(text)
    return f"{ticks}{info}\n{text}\n{ticks}"


def parse_fenced_blocks(markdown: str) -> list[tuple[str, str]]:
    """Every top-level backtick-fenced block as (info, exact text), in document order.

    An unclosed block runs to the end of the document, as in CommonMark.
    """
    blocks: list[tuple[str, str]] = []
    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        opening = _OPENING.match(lines[index])
        if opening is None:
            index += 1
            continue
        ticks = len(opening.group("fence"))
        closing = re.compile(rf"^`{{{ticks},}}[ \t]*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        blocks.append((opening.group("info").strip(), "\n".join(lines[index + 1 : end])))
        index = end + 1
    return blocks
