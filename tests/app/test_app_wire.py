"""The CLI's JSON converter prints the app's results exactly as the hand-written mappings did:
the same keys, in the same order, with the same values (`--json` is a public contract)."""

from __future__ import annotations

import json

from dsh_chapters.services.doctor import Finding
from dsh_chapters.services.pool import LinkResult
from dsh_chapters.services.quarantine import QuarantineRow
from dsh_chapters.wire import camel


def test_link_result_keys_values_and_order() -> None:
    result = LinkResult(remote="/srv/p.git", provider="git", project_key="k-1",
                        config_file=".dsh-chapters/config.toml", token_stored=False,
                        previous="/old", mirror_removed=True)
    assert json.dumps(result.to_json()) == json.dumps({
        "remote": "/srv/p.git", "provider": "git", "projectKey": "k-1",
        "configFile": ".dsh-chapters/config.toml", "tokenStored": False, "previous": "/old",
        "mirrorRemoved": True})


def test_doctor_and_quarantine_rows_keep_their_keys() -> None:
    finding = Finding("store", "symlink", "s/a.md", "is a symlink", repair="remove it")
    assert list(finding.to_json().items()) == [
        ("area", "store"), ("code", "symlink"), ("path", "s/a.md"), ("detail", "is a symlink"),
        ("repair", "remove it"), ("repaired", "")]
    row = QuarantineRow("pool", "p/x.md", "bad frontmatter", code="frontmatter", commit="abc")
    assert list(row.to_json().items()) == [
        ("where", "pool"), ("path", "p/x.md"), ("reason", "bad frontmatter"),
        ("code", "frontmatter"), ("commit", "abc")]


def test_wire_names_are_camel_case() -> None:
    assert [camel(n) for n in ("remote", "project_key", "mirror_removed")] == [
        "remote", "projectKey", "mirrorRemoved"]
