"""Where user-level state lives: `DSH_HOME` wins, else the platform's data dir for "dsh"."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

HOME_ENV = "DSH_HOME"


def resolve_dsh_home(env: Mapping[str, str]) -> Path:
    """The DSH home. An empty `DSH_HOME` counts as unset."""
    explicit = env.get(HOME_ENV, "")
    if explicit:
        return Path(explicit).expanduser().absolute()
    # Imported here: a set DSH_HOME (hooks, tests, the benchmarks) never pays for it.
    import platformdirs

    return Path(platformdirs.user_data_dir("dsh"))


def user_config_path(dsh_home: Path) -> Path:
    return dsh_home / "dsh-chapters" / "config.toml"
