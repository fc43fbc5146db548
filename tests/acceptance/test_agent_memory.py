"""features/agent_memory.feature: hooks archive on A, SessionStart and MCP find it on B."""

from pytest_bdd import scenarios

scenarios("agent_memory.feature")
