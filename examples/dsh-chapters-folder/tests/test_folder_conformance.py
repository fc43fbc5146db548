"""The core's provider kit, run against the folder provider on fresh plain-directory pools."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from dsh_chapters_core.testing.conformance import (
    CHECKS,
    KIT_VERSION,
    Check,
    MakeProvider,
    run_check,
)
from dsh_chapters_folder.provider import FolderProviderFactory

_counter = itertools.count()


def test_the_kit_version_this_plugin_passed() -> None:
    assert KIT_VERSION.split(".")[0] == "1"


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_folder_pool_conforms(check: Check, tmp_path: Path, make_provider: MakeProvider) -> None:
    def make_pool() -> str:
        return f"folder+{tmp_path / f'pool-{next(_counter)}'}"  # absent: the first open makes it

    run_check(check, make_pool, make_provider)


def test_the_scheme_is_claimed_only_with_a_path() -> None:
    assert FolderProviderFactory.matches("folder+/srv/sync/pool")
    assert FolderProviderFactory.matches("folder+~/Sync/pool")
    assert not FolderProviderFactory.matches("folder+")
    assert not FolderProviderFactory.matches("/srv/sync/pool")
    assert not FolderProviderFactory.matches("treedx+https://h/r")
