"""Codex hooks next to the MCP server, in a config.toml that holds the user's own settings and
comments: the feature flag only with consent, and an uninstall that gives back every byte."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_harness.install import (
    CODEX_FEATURE_KEYS,
    CODEX_HOOK_EVENTS,
    SERVER_NAME,
    Installer,
)

# The user's own file: comments, a [features] table of theirs, tables after it, no final newline.
USER_TOML = (
    "# my Codex setup\n"
    'model = "gpt-5-codex"  # the default model\n'
    "\n"
    "[features]\n"
    "web_search_request = true # keep searching\n"
    "\n"
    "[mcp_servers.docs]\n"
    'command = "docs-mcp"\n'
    "args = []\n"
    "\n"
    "# trailing comment, no newline after it"
)
NO_FEATURES_TOML = '# plain\nmodel = "o4"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'


def installer(tmp_path: Path) -> Installer:
    return Installer(command=("/opt/venv/bin/chapters",),
                     ledger_path=tmp_path / "home" / "installs.json", hook_timeout_s=30)


def seeded(tmp_path: Path, text: str) -> Path:
    config = tmp_path / "codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_bytes(text.encode("utf-8"))
    return config


def hooks_of(config: Path) -> dict[str, list[str]]:
    parsed = tomllib.loads(config.read_text())
    return {event: [h["command"] for group in groups for h in group["hooks"]]
            for event, groups in parsed.get("hooks", {}).items()}


def test_install_adds_the_hooks_but_not_the_flag_without_consent(tmp_path: Path) -> None:
    config = seeded(tmp_path, USER_TOML)
    inst = installer(tmp_path)
    [change] = inst.install_codex(config.parent)
    assert change.action == "updated" and "--enable-hooks" in change.detail
    text = config.read_text()
    assert text.startswith(USER_TOML)  # the user's bytes first, untouched
    parsed = tomllib.loads(text)
    assert parsed["features"] == {"web_search_request": True}  # the flag is the user's call
    assert parsed["mcp_servers"][SERVER_NAME]["args"] == ["mcp"]
    command = "/opt/venv/bin/chapters hook --agent codex"
    assert hooks_of(config) == {event: [command] for event in CODEX_HOOK_EVENTS}
    group = parsed["hooks"]["Stop"][0]["hooks"][0]
    assert group == {"type": "command", "command": command, "timeout": 30}
    assert inst.install_codex(config.parent)[0].action == "unchanged"
    assert inst.uninstall_codex(config.parent)[0].action == "restored"
    assert config.read_bytes() == USER_TOML.encode("utf-8")


def test_enable_hooks_turns_the_flag_on_inside_the_users_features_table(tmp_path: Path) -> None:
    config = seeded(tmp_path, USER_TOML)
    inst = installer(tmp_path)
    [change] = inst.install_codex(config.parent, enable_hooks=True)
    assert "turned on [features]" in change.detail
    parsed = tomllib.loads(config.read_text())
    assert parsed["features"] == {"web_search_request": True,
                                  **dict.fromkeys(CODEX_FEATURE_KEYS, True)}
    assert "# my Codex setup\n" in config.read_text()
    assert inst.install_codex(config.parent, enable_hooks=True)[0].action == "unchanged"
    inst.uninstall_codex(config.parent)
    assert config.read_bytes() == USER_TOML.encode("utf-8")


def test_flag_added_later_and_a_features_table_of_our_own_come_out_exactly(
    tmp_path: Path,
) -> None:
    config = seeded(tmp_path, NO_FEATURES_TOML)
    inst = installer(tmp_path)
    inst.install_codex(config.parent)  # first without consent
    before_flag = config.read_text()
    [change] = inst.install_codex(config.parent, enable_hooks=True)  # then with it
    assert change.action == "updated"
    text = config.read_text()
    assert text.startswith(before_flag)
    assert tomllib.loads(text)["features"] == dict.fromkeys(CODEX_FEATURE_KEYS, True)
    inst.uninstall_codex(config.parent)
    assert config.read_bytes() == NO_FEATURES_TOML.encode("utf-8")


def test_a_fresh_codex_home_is_removed_again(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    inst = installer(tmp_path)
    assert inst.install_codex(home, enable_hooks=True)[0].action == "created"
    assert tomllib.loads((home / "config.toml").read_text())["features"]["hooks"] is True
    assert inst.uninstall_codex(home)[0].action == "removed"
    assert not home.exists()


def test_a_flag_the_user_turned_off_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    text = USER_TOML.replace("web_search_request = true", "hooks = false")
    config = seeded(tmp_path, text)
    with pytest.raises(ChaptersError, match="turns Codex hooks off") as caught:
        installer(tmp_path).install_codex(config.parent, enable_hooks=True)
    assert "by hand" in (caught.value.hint or "")
    assert config.read_bytes() == text.encode("utf-8")
    assert not (tmp_path / "home" / "installs.json").exists()


def test_a_flag_already_on_is_left_as_the_user_wrote_it(tmp_path: Path) -> None:
    text = USER_TOML.replace("web_search_request = true", "codex_hooks = true")
    config = seeded(tmp_path, text)
    inst = installer(tmp_path)
    [change] = inst.install_codex(config.parent, enable_hooks=True)
    assert "turned on" not in change.detail
    assert tomllib.loads(config.read_text())["features"] == {"codex_hooks": True}
    inst.uninstall_codex(config.parent)
    assert config.read_bytes() == text.encode("utf-8")


def test_inline_hooks_the_tables_cannot_join_are_refused(tmp_path: Path) -> None:
    text = 'hooks = { Stop = [] }\n'
    config = seeded(tmp_path, text)
    with pytest.raises(ChaptersError, match="invalid TOML"):
        installer(tmp_path).install_codex(config.parent)
    assert config.read_bytes() == text.encode("utf-8")
