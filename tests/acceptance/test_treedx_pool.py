"""`features/treedx_pool.feature`: TreeDX pools through the composition root (issue #7)."""

from pytest_bdd import scenarios

scenarios("treedx_pool.feature")
