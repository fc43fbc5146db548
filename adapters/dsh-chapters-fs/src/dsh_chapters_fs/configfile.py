"""Config files, validated at the edge against the core's `SETTINGS` table (§12).

Precedence, lowest first: the defaults, the user file `<DSH_HOME>/dsh-chapters/config.toml`, the
project file `.dsh-chapters/config.toml`, then the environment (`DSH_CHAPTERS_HARNESS_ID` for
`harnessId`). An unknown key or a bad value is a `ConfigError` that names the key, the file and
the allowed range, with a "did you mean" for a near key. Values that may be secrets (free-form
strings) are described, never echoed.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_chapters_core.config import DEFAULTS, SETTINGS, SETTINGS_BY_KEY, Config, Setting
from dsh_chapters_core.errors import ConfigError

HARNESS_ID_ENV = "DSH_CHAPTERS_HARNESS_ID"
PROJECT_CONFIG_RELPATH = "config.toml"  # under `.dsh-chapters/`
_ECHO_MAX = 40
# Not a tunable: a config file holds ~70 flat keys; this only stops `/dev/zero`-sized input.
_CONFIG_MAX_BYTES = 1 << 20
# harnessId names directories (`rules/<harnessId>/`, `edits/<harnessId>/`): a plain name only.
HARNESS_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class _BadValue(Exception):
    def __init__(self, setting: Setting, value: Any, why: str = "") -> None:
        super().__init__(setting.key)
        self.setting = setting
        self.value = value
        self.why = why


def _check_value(setting: Setting, value: Any) -> None:
    """Type, range and choices of one value, per its `Setting`. Raises `_BadValue`."""
    default = setting.default
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(default, tuple):
        ok = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise _BadValue(setting, value)
    if setting.choices and value not in setting.choices:
        raise _BadValue(setting, value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if setting.minimum is not None and value < setting.minimum:
            raise _BadValue(setting, value)
        if setting.maximum is not None and value > setting.maximum:
            raise _BadValue(setting, value)
    if setting.key == "harnessId" and value and not HARNESS_ID_PATTERN.match(value):
        raise _BadValue(setting, value, "a name of letters, digits, '.', '_' or '-' (it names "
                                        "directories), at most 100 characters")
    if setting.key == "redactionPatterns":
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise _BadValue(setting, value, f"valid regular expressions ({exc})") from None


def _convert(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _describe(value: Any, setting: Setting) -> str:
    if isinstance(value, bool | int | float):
        return repr(value).lower() if isinstance(value, bool) else repr(value)
    if isinstance(value, str):
        if setting.choices and len(value) <= _ECHO_MAX:
            return repr(value)
        return f"a string of {len(value)} characters"  # may be a secret: never echoed
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def near_keys(key: str) -> list[str]:
    """Keys a typo most likely meant: case and separators ignored first, then edit distance."""
    squashed = re.sub(r"[^a-z0-9]", "", key.lower())
    exact = [s.key for s in SETTINGS if s.key.lower() == squashed]
    if exact:
        return exact
    import difflib  # only a typo pays for it

    lowered = {s.key.lower(): s.key for s in SETTINGS}
    close = difflib.get_close_matches(squashed, list(lowered), n=3, cutoff=0.75)
    return [lowered[c] for c in close]


def _unknown_key(key: str, origin: str) -> ConfigError:
    suggestions = near_keys(key)
    hint = (f"did you mean {' or '.join(suggestions)}?" if suggestions
            else "see docs/configuration.md for every key")
    return ConfigError(f"{origin}: unknown key {key!r} ({len(SETTINGS)} keys are known)", hint=hint)


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML tables become dotted keys (`[enrichment] model` -> `enrichment.model`)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            flat.update(_flatten(value, name))
        else:
            flat[name] = value
    return flat


def validate_mapping(data: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """Camel-case keys to validated values, each checked against its `Setting`."""
    flat = _flatten(data)
    for key in flat:
        if key not in SETTINGS_BY_KEY:
            raise _unknown_key(key, origin)
    # Every value converted, then checked in the order of SETTINGS, so the first bad key
    # named is the same whatever order the file lists its keys in. Plain code, not an attrs
    # model: a config file is read on every `chapters` start, and building a model of every
    # setting (with attrs' own import) cost more than the rest of reading the file.
    values = {k: _convert(v) for k, v in flat.items()}
    try:
        for setting in SETTINGS:
            if setting.key in values:
                _check_value(setting, values[setting.key])
    except _BadValue as bad:
        allowed = bad.why or bad.setting.allowed()
        raise ConfigError(
            f"{origin}: {bad.setting.key} = {_describe(bad.value, bad.setting)} is not allowed; "
            f"allowed: {allowed}",
            hint=f"fix {bad.setting.key} in {origin} (default: {bad.setting.default!r})",
        ) from None
    for k, v in values.items():
        if isinstance(SETTINGS_BY_KEY[k].default, float):
            values[k] = float(v)  # TOML `mergeThreshold = 1` is an int; Config holds floats
    return values


def read_config_file(path: Path) -> dict[str, Any]:
    """One file's validated values; a missing file is an empty layer."""
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(mode):  # a FIFO or a device would block or read forever
            raise ConfigError(f"{path}: is not a regular file",
                              hint=f"move it aside (mv {path} {path}.moved); the file is optional")
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a TOML file",
                          hint=f"move the directory aside (mv {path} {path}.moved); "
                               "the file is optional") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read (errno {exc.errno}: {exc.strerror})",
                          hint="fix the file's permissions, or move it aside") from None
    if len(raw) > _CONFIG_MAX_BYTES:
        raise ConfigError(f"{path}: {len(raw)} bytes, over the {_CONFIG_MAX_BYTES} a config "
                          "file may hold", hint="a config file is a few flat keys; rewrite it")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start})",
                          hint="save the file as UTF-8 TOML") from None
    data: dict[str, Any] | None = flat_strings(text)
    if data is None:
        import tomllib  # only a file our writes did not shape pays for the parser (~5 ms)

        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}",
                              hint="fix the syntax; keys look like `mergeThreshold = 0.3`"
                              ) from None
    return validate_mapping(data, str(path))


# One line as `workspace.set_project_setting` writes it for `chapters link`: a bare key and a
# basic string holding no escape and no control character (TOML's own rules for both).
_FLAT_STRING = re.compile(r'[ \t]*([A-Za-z0-9_-]+)[ \t]*=[ \t]*'
                          r'"([^"\\\x00-\x08\x0a-\x1f\x7f]*)"[ \t]*')


def flat_strings(text: str) -> dict[str, str] | None:
    """What TOML reads from a file whose every line is blank or `key = "text"`, without
    importing the parser: a linked workspace's file is that, and every command reads it.
    None for anything else (a number, a comment, an escape, a key twice), which tomllib reads."""
    found: dict[str, str] = {}
    lines = text.split("\n")
    for at, line in enumerate(lines):
        if at < len(lines) - 1:  # TOML's newlines: LF, or CR LF; a CR alone is no newline
            line = line.removesuffix("\r")
        if not line.strip(" \t"):
            continue
        match = _FLAT_STRING.fullmatch(line)
        if match is None or match.group(1) in found:
            return None
        found[match.group(1)] = match.group(2)
    return found


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """The effective config and, per key that is not a default, where it came from."""

    config: Config
    origins: Mapping[str, str]


def load_config(
    *, user_file: Path | None, project_file: Path | None, env: Mapping[str, str]
) -> LoadedConfig:
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for path in (user_file, project_file):
        if path is None:
            continue
        layer = read_config_file(path)
        values.update(layer)
        origins.update(dict.fromkeys(layer, str(path)))
    harness_env = env.get(HARNESS_ID_ENV, "")
    if harness_env:
        values.update(validate_mapping({"harnessId": harness_env}, f"env {HARNESS_ID_ENV}"))
        origins["harnessId"] = f"env {HARNESS_ID_ENV}"
    config = DEFAULTS.replace(**{SETTINGS_BY_KEY[k].attr: v for k, v in values.items()})
    return LoadedConfig(config=config, origins=origins)
