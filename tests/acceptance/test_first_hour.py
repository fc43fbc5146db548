"""features/first_hour.feature: the README's commands on a fresh clone, two copied sessions."""

from pytest_bdd import scenarios

scenarios("first_hour.feature")
