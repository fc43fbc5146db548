"""Exit criterion P1 (§13): two machines, one pool; sync failure degrades to local-only."""

from pytest_bdd import scenarios

scenarios("shared_pool.feature")
