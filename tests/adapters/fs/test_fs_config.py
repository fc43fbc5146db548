"""Config files validated against SETTINGS: precedence, and errors naming key, file and range."""

from __future__ import annotations

from pathlib import Path

import pytest
from dsh_chapters_core.config import DEFAULTS, SETTINGS, SETTINGS_BY_KEY
from dsh_chapters_core.errors import ConfigError
from dsh_chapters_fs.configfile import flat_strings, load_config, near_keys, read_config_file
from dsh_chapters_fs.home import resolve_dsh_home
from hypothesis import given, settings
from hypothesis import strategies as st


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_precedence_defaults_user_project_env(tmp_path: Path) -> None:
    user = _write(tmp_path / "home/config.toml",
                  'mergeThreshold = 0.5\nchapterLimit = 9000\nharnessId = "from-user"\n')
    project = _write(tmp_path / "ws/config.toml", "mergeThreshold = 1\nvocabApply = true\n")
    loaded = load_config(user_file=user, project_file=project,
                         env={"DSH_CHAPTERS_HARNESS_ID": "from-env"})
    c = loaded.config
    assert c.merge_threshold == 1.0 and isinstance(c.merge_threshold, float)
    assert c.chapter_limit == 9000 and c.vocab_apply is True
    assert c.harness_id == "from-env"
    assert c.sync_timeout_ms == DEFAULTS.sync_timeout_ms
    assert loaded.origins == {"mergeThreshold": str(project), "chapterLimit": str(user),
                              "harnessId": "env DSH_CHAPTERS_HARNESS_ID",
                              "vocabApply": str(project)}


def test_missing_files_are_the_defaults(tmp_path: Path) -> None:
    loaded = load_config(user_file=tmp_path / "none.toml", project_file=None, env={})
    assert loaded.config == DEFAULTS and loaded.origins == {}


def test_lists_become_tuples_and_patterns_must_compile(tmp_path: Path) -> None:
    good = _write(tmp_path / "a.toml", 'redactionPatterns = ["acme_[0-9a-f]{32}"]\n')
    assert read_config_file(good) == {"redactionPatterns": ("acme_[0-9a-f]{32}",)}
    bad = _write(tmp_path / "b.toml", 'redactionPatterns = ["acme_[0-9"]\n')
    with pytest.raises(ConfigError, match=r"redactionPatterns .* valid regular expressions"):
        read_config_file(bad)


@pytest.mark.parametrize(("line", "allowed"), [
    ("mergeThreshold = 1.5", "a number in [0, 1]"),
    ("mergeThreshold = \"high\"", "a number in [0, 1]"),
    ("chapterLimit = 50", "an integer in [100, 1000000]"),
    ("chapterLimit = 9000.5", "an integer in [100, 1000000]"),
    ("vocabApply = 1", "true or false"),
    ("knowledgeProvider = \"gti\"", "one of auto, git, treedx"),
    ("harnessId = \"my laptop/1\"", "a name of letters, digits"),
    ("redactionPatterns = \"x\"", "a list of strings"),
])
def test_a_bad_value_names_the_key_the_file_and_the_range(tmp_path: Path, line: str,
                                                          allowed: str) -> None:
    path = _write(tmp_path / "config.toml", line + "\n")
    key = line.split(" ", 1)[0]
    with pytest.raises(ConfigError) as error:
        read_config_file(path)
    message = str(error.value)
    assert str(path) in message and f"{key} = " in message and allowed in message
    assert f"fix {key} in {path}" in message


def test_an_unknown_key_suggests_the_near_one(tmp_path: Path) -> None:
    path = _write(tmp_path / "config.toml", "mergeTreshold = 0.4\n")
    with pytest.raises(ConfigError) as error:
        read_config_file(path)
    text = str(error.value)
    assert "unknown key 'mergeTreshold'" in text and str(path) in text
    assert "did you mean mergeThreshold?" in text
    assert near_keys("merge_threshold") == ["mergeThreshold"]
    assert near_keys("MERGETHRESHOLD") == ["mergeThreshold"]
    assert near_keys("zzzzzz") == []


def test_a_table_is_read_as_dotted_keys_and_pointed_to_the_flat_key(tmp_path: Path) -> None:
    path = _write(tmp_path / "config.toml", "[enrichment]\nenabled = false\n")
    with pytest.raises(ConfigError, match=r"unknown key 'enrichment.enabled'") as error:
        read_config_file(path)
    assert "did you mean enrichmentEnabled?" in str(error.value)


def test_a_secret_looking_value_is_never_echoed(tmp_path: Path) -> None:
    token = "ghp_" + "A" * 36
    path = _write(tmp_path / "config.toml", f'harnessId = "{token} x"\n')
    with pytest.raises(ConfigError) as error:
        read_config_file(path)
    assert token not in str(error.value) and "a string of 42 characters" in str(error.value)


def test_toml_syntax_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "config.toml", "mergeThreshold = 0.3\nchapterLimit = = 2\n")
    with pytest.raises(ConfigError, match=r"not valid TOML: .*line 2") as error:
        read_config_file(path)
    assert str(path) in str(error.value)


def test_env_harness_id_is_validated_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env DSH_CHAPTERS_HARNESS_ID: harnessId"):
        load_config(user_file=None, project_file=None, env={"DSH_CHAPTERS_HARNESS_ID": "a/b"})


def test_every_setting_default_passes_its_own_validation(tmp_path: Path) -> None:
    import tomllib

    lines = []
    for s in SETTINGS:
        value = s.default
        if isinstance(value, bool):
            lines.append(f"{s.key} = {'true' if value else 'false'}")
        elif isinstance(value, tuple):
            lines.append(f"{s.key} = []")
        elif isinstance(value, str):
            lines.append(f'{s.key} = "{value}"')
        else:
            lines.append(f"{s.key} = {value!r}")
    path = _write(tmp_path / "config.toml", "\n".join(lines) + "\n")
    assert len(tomllib.loads(path.read_text())) == len(SETTINGS_BY_KEY)
    assert load_config(user_file=path, project_file=None, env={}).config == DEFAULTS


def test_dsh_home_env_wins(tmp_path: Path) -> None:
    assert resolve_dsh_home({"DSH_HOME": str(tmp_path)}) == tmp_path
    home = tmp_path / "home"
    default = resolve_dsh_home({"HOME": str(home)})
    assert default == home / ".dsh"  # DSH's own default (home-paths: join(homedir(), '.dsh'))
    assert resolve_dsh_home({"DSH_HOME": "", "HOME": str(home)}) == default


def test_state_an_earlier_release_kept_in_the_platform_data_dir_stays_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    earlier = home / ".local" / "share" / "dsh"
    (earlier / "dsh-chapters").mkdir(parents=True)
    assert resolve_dsh_home({"HOME": str(home)}) == earlier
    (home / ".dsh" / "dsh-chapters").mkdir(parents=True)  # once ~/.dsh has it, ~/.dsh wins
    assert resolve_dsh_home({"HOME": str(home)}) == home / ".dsh"


# Pieces of config lines, fair and foul: what `chapters link` writes, what people type, and
# what TOML refuses (a lone CR, a control character, a key twice, an unclosed string).
_PIECES = ["knowledgeRemote", "harnessId", "a-b_1", "mergeThreshold", " ", "\t", "=", " = ",
           '"', '"/srv/pool.git"', '"x y"', '"a\\nb"', '"ü\u2028é"', "0.3", "true", "#", "# c",
           "[t]", ".", "\r", "\x0b", "\x7f", "'lit'", '""', '"""', "\ufeff",
           'knowledgeRemote = "/srv/pool.git"', 'harnessId="laptop"', '\ta-b = "ü\t"  ',
           'x = ""', 'del = "\x7f"', 'vt = "a\x0bb"', 'nul = "\x00"']


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=6).map("".join), max_size=5),
       st.sampled_from(["\n", "\r\n"]))
def test_a_file_of_flat_strings_reads_as_toml_reads_it(lines: list, newline: str) -> None:
    import tomllib

    text = newline.join(lines)
    try:
        expected: dict | None = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        expected = None
    fast = flat_strings(text)
    if fast is not None:  # what the fast reading gives, TOML gives: never a file TOML refuses
        assert fast == expected


def test_what_link_writes_is_read_without_the_parser() -> None:
    import itertools
    import tomllib

    written = ['knowledgeRemote = "/srv/pool.git"', 'harnessId="laptop"', '\ta-b = "ü\t"  ',
               'x = ""', "", "  "]
    for n in range(1, 4):
        for chosen in itertools.permutations(written, n):
            for newline, end in itertools.product(("\n", "\r\n"), ("", "\n")):
                text = newline.join(chosen) + end
                assert flat_strings(text) == tomllib.loads(text), text
    assert flat_strings('knowledgeRemote = "/srv/pool.git"\n') == {
        "knowledgeRemote": "/srv/pool.git"}
    assert flat_strings("\n  \nharnessId=\"laptop\"\r\nknowledgeRemote = \"treedx+https://t/r\"") \
        == {"harnessId": "laptop", "knowledgeRemote": "treedx+https://t/r"}
    for other in ("mergeThreshold = 0.3", 'a = "x" # why', 'a = "x"\na = "y"', 'a.b = "x"',
                  'a = "tab\\t"', 'a = "x"\rb = "y"'):
        assert flat_strings(other) is None  # tomllib reads these (or refuses them)
