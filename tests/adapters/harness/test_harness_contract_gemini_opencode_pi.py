"""The core's harness reader kit on the Gemini CLI, OpenCode and pi readers, through their
public port, with sessions of each shape they read (tests/fixtures/other_agents)."""

from __future__ import annotations

import pytest
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_core.testing.harness_contract import (
    HARNESS_CHECKS,
    HarnessCheck,
    HarnessSample,
    run_harness_check,
)
from dsh_chapters_harness.gemini_cli import GeminiCliReader
from dsh_chapters_harness.opencode import OpenCodeReader
from dsh_chapters_harness.pi import PiReader

from tests.fixtures import other_agents as fx


def _sample(filename: str, sample: fx.Sample) -> HarnessSample:
    return HarnessSample(filename=filename, data=sample.data,
                         texts=sample.prompts + sample.replies, turns=sample.turns)


SAMPLES: dict[str, tuple[type[HarnessReader], HarnessSample]] = {
    "gemini-cli-document": (GeminiCliReader, _sample(
        "chats/session-2026-01-10T02-08-3c1d5e2a.json", fx.gemini_document())),
    "gemini-cli-jsonl": (GeminiCliReader, _sample(
        "chats/session-2026-01-10T02-08-3c1d5e2a.jsonl", fx.gemini_jsonl())),
    "opencode-export": (OpenCodeReader, _sample("full.jsonl", fx.opencode_export())),
    "pi": (PiReader, _sample(f"--home-dev-work-acme-api--/x_{fx.PI_SESSION}.jsonl",
                             fx.pi_session())),
    "oh-my-pi": (PiReader, _sample(f"--home-dev-work-acme-api--/y_{fx.PI_SESSION}.jsonl",
                                   fx.pi_session(oh_my_pi=True))),
}


@pytest.mark.parametrize("sample_name", sorted(SAMPLES))
@pytest.mark.parametrize("check", HARNESS_CHECKS, ids=lambda c: c.name)
def test_the_readers_pass_the_harness_kit(check: HarnessCheck, sample_name: str) -> None:
    reader, sample = SAMPLES[sample_name]
    run_harness_check(check, reader, sample)
