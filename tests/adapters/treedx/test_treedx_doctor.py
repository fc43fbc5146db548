"""The TreeDX provider's side of `chapters doctor` (ports.transport.ProviderDoctor), against the
fake: a damaged or foreign mirror is found and re-read from the pool (§5.2), the service's
reachability and its answer to the token are reported, and a writable lease that a push left
behind (CONTRACT.md: it would block every machine's push until its TTL) is found and closed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_core.ports.transport import ProviderDoctor
from dsh_chapters_treedx.mirror import STATE_FILE
from dsh_chapters_treedx.provider import TreeDXProvider
from dsh_chapters_treedx.testing import FakeTreeDX

from tests.adapters.treedx.treedx_machines import Machines

Chapter = Callable[..., tuple[str, bytes]]


def _published(machines: Machines, chapter: Chapter, name: str = "a") -> TreeDXProvider:
    provider = machines.provider(name)
    provider.open()
    path, data = chapter("s1", 1)
    provider.stage({path: data})
    provider.commit("publish 1", name)
    provider.push()
    return provider


def _codes(provider: TreeDXProvider) -> list[str]:
    return [f.code for f in provider.diagnose()]


def test_the_provider_is_a_doctor_and_a_healthy_pool_has_no_finding(
    machines: Machines, chapter: Chapter
) -> None:
    provider = _published(machines, chapter)
    assert isinstance(provider, ProviderDoctor)
    assert provider.diagnose() == ()


def test_a_damaged_mirror_is_found_and_re_read_from_the_pool(
    machines: Machines, chapter: Chapter
) -> None:
    provider = _published(machines, chapter)
    path, data = chapter("s1", 1)
    (machines.mirror("a") / path).write_bytes(b"changed by hand\n")
    (machines.mirror("a") / "chapters" / "junk.md").write_bytes(b"junk\n")
    found = provider.diagnose()
    assert [f.code for f in found] == ["mirror-corrupt"]
    assert "0 file(s) missing, 1 changed, 1 extra" in found[0].detail and found[0].repair
    assert "re-read" in provider.repair(found[0])
    assert (machines.mirror("a") / path).read_bytes() == data
    assert not (machines.mirror("a") / "chapters" / "junk.md").exists()
    assert provider.diagnose() == ()


def test_an_unreadable_state_file_is_found_and_the_mirror_rebuilt(
    machines: Machines, chapter: Chapter
) -> None:
    provider = _published(machines, chapter)
    (machines.mirror("a") / STATE_FILE).write_text("{not json", encoding="utf-8")
    found = provider.diagnose()
    assert [f.code for f in found] == ["mirror-unusable"]
    done = provider.repair(found[0])
    assert "the old one is at" in done
    assert machines.provider("a").diagnose() == ()


def test_an_unreachable_service_is_reported_with_the_budget(
    machines: Machines, fake: FakeTreeDX, chapter: Chapter
) -> None:
    provider = _published(machines, chapter)
    provider.close()
    fake.stop()
    try:
        found = machines.provider("a").diagnose()
    finally:
        fake.start()
    assert [f.code for f in found] == ["pool-unreachable"]
    assert "(network)" in found[0].detail and "ms" in found[0].detail
    assert found[0].repair == ""


def test_a_rejected_token_is_reported_and_never_echoed(
    machines: Machines, fake: FakeTreeDX, chapter: Chapter
) -> None:
    _published(machines, chapter).close()
    fake.revoke(machines.token)
    found = machines.provider("a").diagnose()
    assert [f.code for f in found] == ["pool-token-rejected"]
    assert "HTTP 401" in found[0].detail and "chapters link" in found[0].detail
    assert machines.token not in found[0].detail


def test_a_lease_a_push_left_behind_is_found_and_closed(
    machines: Machines, fake: FakeTreeDX, chapter: Chapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = machines.provider("a")
    a.open()
    path, data = chapter("s2", 1)
    a.stage({path: data})
    a.commit("publish 1", "a")

    def dies(*_: object) -> dict[str, str]:
        raise TransportError(FailureCode.NETWORK, "the connection dropped mid-push")

    # the push dies after taking the lease, and its close never reaches the server
    monkeypatch.setattr(a, "_write_files", dies)
    monkeypatch.setattr(a, "_release", lambda _workspace: False)
    with pytest.raises(TransportError):
        a.push()
    monkeypatch.undo()
    assert fake.lease_holders(machines.repository) == 1
    b = machines.provider("b")
    b.open()
    b_path, b_data = chapter("s3", 1)
    b.stage({b_path: b_data})
    b.commit("publish 1", "b")
    with pytest.raises(TransportError) as blocked:
        b.push()  # every other machine waits on the lease
    assert blocked.value.code is FailureCode.TIMEOUT

    doctor = machines.provider("a")
    found = doctor.diagnose()
    assert [f.code for f in found] == ["pool-lease-held"]
    assert "writable lease" in found[0].detail and found[0].repair
    assert "lease is free" in doctor.repair(found[0])
    assert fake.lease_holders(machines.repository) == 0
    assert machines.provider("a").diagnose() == ()
    assert b.push().pushed  # the lease is free: the other machine publishes
