"""Test doubles that ship with the harness adapter: the recorded-tape model server."""
