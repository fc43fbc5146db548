"""The smart-HTTP client: dulwich's urllib3 client behind a budgeted, non-retrying pool.

- Every request carries what is left of the call's deadline as its total timeout, and
  urllib3 never retries (a retry would silently multiply the budget).
- A status other than 200 raises `HttpStatusError(status)`, so failures map by status code.
- A body that ran out before a read got what it asked for is counted (`short_reads`): the
  smart protocol reads exact pkt-line lengths, so that is an answer cut short, and the error
  dulwich raises next is reported as such (`upstream.HttpPool`), not as a bad server.
- The token is handed to dulwich's client in memory as HTTP Basic credentials (password),
  which it attaches only to requests for the pool's own origin. It is never put in a URL, a
  git config file, a credential helper or a message. No helper, askpass or TTY is involved.
"""

from __future__ import annotations

from typing import Any

import urllib3
from dulwich.client import Urllib3HttpGitClient, default_urllib3_manager

from dsh_chapters_git.failures import Deadline, HttpStatusError

TOKEN_USERNAME = "x-access-token"  # forges accept a personal access token as the password


class BudgetedPool:
    """A urllib3 pool manager facade that dulwich calls `request` and `headers` on."""

    def __init__(self, inner: urllib3.PoolManager | urllib3.ProxyManager) -> None:
        self._inner = inner
        self.deadline: Deadline | None = None
        self.requests = 0
        self.short_reads = 0

    @property
    def headers(self) -> Any:
        return self._inner.headers

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        if self.deadline is not None:
            kwargs["timeout"] = urllib3.Timeout(total=self.deadline.remaining())
        kwargs["retries"] = False
        self.requests += 1
        response = self._inner.request(method, url, **kwargs)
        if response.status != 200:
            status = response.status
            response.drain_conn()
            response.release_conn()
            raise HttpStatusError(status)
        return _CountedResponse(response, self)

    def clear(self) -> None:
        self._inner.clear()


class _CountedResponse:
    """The answer as dulwich sees it: urllib3's response, whose reads that ran out before
    they got what they asked for are counted on the pool. A wrapper, not a patched `read`:
    a closure stored on the response would tie it into a cycle, so it and its socket would
    be freed by a later garbage collection instead of as soon as dulwich drops it."""

    def __init__(self, response: Any, pool: BudgetedPool) -> None:
        self._response = response
        self._pool = pool

    def read(self, amt: int | None = None, *args: Any, **kwargs: Any) -> bytes:
        data: bytes = self._response.read(amt, *args, **kwargs)
        if amt is not None and len(data) < amt:
            self._pool.short_reads += 1
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)  # status, headers, geturl, close, ...


def open_client(
    url: str, token: str | None, *, loopback: bool
) -> tuple[Urllib3HttpGitClient, BudgetedPool]:
    """A dulwich client for one pool URL; loopback pools bypass any proxy from the env."""
    inner: Any = (
        urllib3.PoolManager(headers={"User-Agent": "dsh-chapters-git"})
        if loopback
        else default_urllib3_manager(None, base_url=url)
    )
    pool = BudgetedPool(inner)
    client = Urllib3HttpGitClient(
        url,
        pool_manager=pool,  # type: ignore[arg-type]
        username=TOKEN_USERNAME if token else None,
        password=token or None,
        quiet=True,
    )
    return client, pool
