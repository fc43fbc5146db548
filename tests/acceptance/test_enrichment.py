"""Exit criterion P2: enrichment is idempotent, re-runnable, revertible and never required (§6)."""

from pytest_bdd import scenarios

scenarios("enrichment.feature")
