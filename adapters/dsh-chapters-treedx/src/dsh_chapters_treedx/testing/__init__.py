"""Test support shipped with the adapter: a fake TreeDX server that behaves like the real one."""

from dsh_chapters_treedx.testing.fake_server import Exchange, FakeTreeDX

__all__ = ["Exchange", "FakeTreeDX"]
