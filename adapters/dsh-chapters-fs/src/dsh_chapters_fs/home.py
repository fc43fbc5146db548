"""Where user-level state lives: `DSH_HOME` wins, else `~/.dsh`, DSH's own default.

DSH keeps its sessions and `cordis.patch.yml` under `$DSH_HOME`, default `~/.dsh`
(deepseek-harness packages/util/home-paths: `defaultDshHome()` is `join(homedir(), '.dsh')`).
dsh-chapters keeps its own state beside them, in `$DSH_HOME/dsh-chapters/`, so one variable
with one default names both. Releases before this one defaulted to the platform's data
directory (`~/.local/share/dsh` on Linux); a user whose state is only there keeps it there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

HOME_ENV = "DSH_HOME"
DEFAULT_HOME = ".dsh"  # under the user's home directory, as DSH's DSH_HOME_DIR_NAME
STATE_DIR = "dsh-chapters"


def resolve_dsh_home(env: Mapping[str, str]) -> Path:
    """The DSH home. An empty `DSH_HOME` counts as unset."""
    explicit = env.get(HOME_ENV, "")
    if explicit:
        return Path(explicit).expanduser().absolute()
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    default = home / DEFAULT_HOME
    if not (default / STATE_DIR).exists():
        # Imported here: a set DSH_HOME (hooks, tests, the benchmarks) never pays for it.
        import platformdirs

        earlier = Path(platformdirs.user_data_dir("dsh"))
        if (earlier / STATE_DIR).is_dir():
            return earlier  # credentials and install records written by an earlier release
    return default


def user_config_path(dsh_home: Path) -> Path:
    return dsh_home / STATE_DIR / "config.toml"
