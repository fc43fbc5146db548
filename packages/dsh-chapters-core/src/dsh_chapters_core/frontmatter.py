"""Deterministic frontmatter: sorted keys, JSON-flow values, valid YAML (§2.4).

The same chapter must give the same bytes on every machine, so the core writes frontmatter
itself instead of asking a YAML library: one `key: <JSON>` line per key, sorted. JSON is a
subset of YAML's flow style; the few places where PyYAML (YAML 1.1) reads JSON differently are
handled here: floats always carry a dot, and characters YAML will not accept raw (C1 controls,
NEL, line/paragraph separators, surrogates) are written as `\\uXXXX` escapes. Edges read it back
with `yaml.safe_load`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # fullmatch: `$` would let "A\n" through
# Words YAML 1.1 resolves to booleans or null: such a key must be quoted.
_RESERVED_KEYS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"})
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")
_OPEN = "---\n"
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)


def _string(value: str) -> str:
    encoded = json.dumps(value, ensure_ascii=False)
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", encoded)


def _flow(value: object) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"frontmatter cannot hold the float {value!r}")
        text = repr(value)
        if "." not in text:  # 1e-05 reads as a string in YAML 1.1; 1.0e-05 is a float
            mantissa, _, exponent = text.partition("e")
            text = f"{mantissa}.0" + (f"e{exponent}" if exponent else "")
        return text
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        items = []
        for key in sorted(value):
            if not isinstance(key, str):
                raise TypeError(f"frontmatter keys are strings, not {type(key).__name__}")
            items.append(f"{_string(key)}: {_flow(value[key])}")
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flow(item) for item in value) + "]"
    raise TypeError(f"frontmatter cannot hold a {type(value).__name__}")


def _key(key: str) -> str:
    if _PLAIN_KEY.fullmatch(key) and key.lower() not in _RESERVED_KEYS:
        return key
    return _string(key)


def dump_frontmatter(data: Mapping[str, object]) -> str:
    """`---\\n<key>: <JSON flow>\\n...---\\n`, keys sorted, byte-deterministic."""
    lines = [_OPEN]
    for key in sorted(data):
        if not isinstance(key, str):
            raise TypeError(f"frontmatter keys are strings, not {type(key).__name__}")
        lines.append(f"{_key(key)}: {_flow(data[key])}\n")
    lines.append(_OPEN)
    return "".join(lines)


_SURROGATE_PAIR_ESCAPE = re.compile(r"\\u[dD][89abAB]")  # json joins a pair; YAML does not


def _json_float(text: str) -> float:
    if "e" in text or "E" in text:  # `1e5`: a string to YAML 1.1, a number to json
        raise ValueError(text)
    return float(text)


def _json_constant(text: str) -> object:
    raise ValueError(text)  # NaN, Infinity: strings to YAML


# What `json.loads(raw, parse_float=…, parse_constant=…)` builds on every call, built once: a
# decoder and its scanner cost more than reading a line (100 against 35 µs a chapter's block).
_VALUE = json.JSONDecoder(parse_float=_json_float, parse_constant=_json_constant)


def load_core_frontmatter(fm_text: str) -> dict[str, object] | None:
    """What `dump_frontmatter` wrote, read back with `json`: the mapping, or None when any
    line is something else (hand-edited YAML), for a YAML parser to decide.

    A line is taken only where json and `yaml.safe_load` agree on it, so either way of reading
    a file gives the same fields; json takes microseconds where PyYAML takes milliseconds, which
    a store of thousands of chapters (`status`, `list`, the first search) pays for each one."""
    if _YAML_UNSAFE.search(fm_text) or _SURROGATE_PAIR_ESCAPE.search(fm_text):
        return None
    data: dict[str, object] = {}
    for line in fm_text.splitlines():
        key, sep, raw = line.partition(": ")
        if not sep:
            return None
        try:
            if key.startswith('"'):
                key = json.loads(key)
                if not isinstance(key, str):
                    return None
            elif not _PLAIN_KEY.fullmatch(key) or key.lower() in _RESERVED_KEYS:
                return None
            data[key] = _VALUE.decode(raw)
        except (ValueError, RecursionError):
            return None
    return data


def split_frontmatter(text: str) -> tuple[str, str]:
    """(the YAML between the `---` lines, the body after them); ("", text) without frontmatter."""
    if not text.startswith(_OPEN):
        return "", text
    closing = _CLOSE.search(text, len(_OPEN))  # `^` matches here: the position follows "\n"
    if closing is None:
        return "", text
    body_start = closing.end()
    if text[body_start : body_start + 1] == "\n":
        body_start += 1
    return text[len(_OPEN) : closing.start()], text[body_start:]
