"""Fakes of the core's ports, for tests here and in plugins (ARCHITECTURE.md: tests pass
fakes into the composition root; the fakes ship with the core)."""
