"""features/finished_sessions.feature: a finished session keeps its last turn (issue #15)."""

from pytest_bdd import scenarios

scenarios("finished_sessions.feature")
