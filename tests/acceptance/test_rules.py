"""Exit criterion P3: rules affect only the machines whose human approved them (§7, §11.3)."""

from pytest_bdd import scenarios

scenarios("rules.feature")
