"""The CLI's JSON boundary: one private cattrs converter (STYLE.md, "Data at the edges").

The app's result dataclasses are stdlib dataclasses; `--json` prints them with their fields in
declaration order under camelCase wire names (`project_key` → `projectKey`), which is what the
hand-written `to_json` methods spelled out one key at a time. Imported on use: only a command
that prints JSON pays for cattrs (the archive path never does, §1 invariant 1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import cattrs
from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _make_converter() -> cattrs.Converter:
    converter = make_converter()

    def camel_fields(cls: type) -> Callable[[Any], dict[str, Any]]:
        renames: dict[str, Any] = {
            f.name: override(rename=camel(f.name)) for f in dataclasses.fields(cls)}
        return make_dict_unstructure_fn(cls, converter, **renames)

    converter.register_unstructure_hook_factory(dataclasses.is_dataclass, camel_fields)
    return converter


_CONVERTER = _make_converter()


def to_json(value: Any) -> dict[str, Any]:
    """A result dataclass as the JSON `--json` prints (wire names, declaration order)."""
    data: dict[str, Any] = _CONVERTER.unstructure(value)
    return data
