"""The three pool kinds the reliability suite runs against, each real and on loopback (§2.1):
a local-path bare repository, `git http-backend` behind a token check (the git adapter's test
server), and the TreeDX fake. Each knows how to hand out its token, read back the files the
pool holds, judge its own integrity, and show a scanner everything it keeps.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from dsh_chapters_treedx.testing import FakeTreeDX

from tests.adapters.git.conftest import GitCli, GitHttpServer
from tests.reliability.token_scan import Scan

POOL_REPO = "widgets.git"
TREEDX_REPOSITORY = "widgets-pool"
KINDS = ("local", "http", "treedx")
# Files a pool holds that no machine's store does: the plugin-maintained project file and
# TreeDX's keep file (§2.2).
POOL_ONLY = frozenset({"project.yml", ".treedxkeep"})


def _git(*args: str | Path, home: Path) -> str:
    done = subprocess.run(["git", *map(str, args)], capture_output=True, text=True, timeout=120,
                          check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(home),
                                            "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"})
    assert done.returncode == 0, f"git {' '.join(map(str, args))}: {done.stderr}"
    return done.stdout


@dataclass
class Pool:
    kind: str
    remote: str
    token: str  # "" for a local path: no credentials (§2.1)
    root: Path  # scratch space for this pool's checks
    bare: Path | None = None  # the bare repository a git pool is
    server: GitHttpServer | None = None
    fake: FakeTreeDX | None = None
    wrong_tokens: list[str] = field(default_factory=list)

    @property
    def networked(self) -> bool:
        return self.kind != "local"

    def wrong_token(self) -> str:
        """A token the pool refuses: for git, one it never knew; for TreeDX (whose link checks
        the token), one it issued, to be revoked after the link with `revoke_wrong`."""
        if self.fake is not None:
            token = self.fake.issue_token()
        else:
            token = "tok-wrong-" + secrets.token_urlsafe(24)
        self.wrong_tokens.append(token)
        return token

    def revoke_wrong(self) -> None:
        if self.fake is not None:
            for token in self.wrong_tokens:
                self.fake.revoke(token)

    def files(self) -> dict[str, bytes]:
        """Path -> bytes of what the pool's main holds now."""
        if self.fake is not None:
            return self.fake.tree(TREEDX_REPOSITORY)
        assert self.bare is not None
        clone = self.root / f"clone-{secrets.token_hex(4)}"
        _git("clone", "--quiet", self.bare, clone, home=self.root)
        out = {p.relative_to(clone).as_posix(): p.read_bytes() for p in sorted(clone.rglob("*"))
               if p.is_file() and not p.relative_to(clone).as_posix().startswith(".git/")}
        shutil.rmtree(clone)
        return out

    def check(self) -> str:
        """The pool's own integrity: the real `git fsck --strict` and a linear history for git;
        for TreeDX, no head a commit dropped unseen and no error inside the fake."""
        if self.fake is not None:
            assert self.fake.overwritten(TREEDX_REPOSITORY) == []
            assert self.fake.errors == []
            commits = self.fake.commit_log(TREEDX_REPOSITORY)
            return f"{len(commits)} commits, no head overwritten"
        assert self.bare is not None
        _git("--git-dir", self.bare, "fsck", "--strict", "--no-dangling", home=self.root)
        log = _git("--git-dir", self.bare, "log", "--format=%P", "main", home=self.root)
        parents = [line.split() for line in log.splitlines()]
        assert all(len(p) <= 1 for p in parents), "a merge commit in the pool"
        return f"git fsck --strict clean, {len(parents)} commits, linear"

    def scan(self, scan: Scan) -> None:
        """Everything the pool keeps: its repository (raw and decompressed) or the fake's tree
        and every answer it sent, and the git server's request log."""
        if self.fake is not None:
            scan.mapping("treedx pool", self.fake.tree(TREEDX_REPOSITORY))
            for n, exchange in enumerate(self.fake.exchanges):
                scan.text(f"treedx answer {n} {exchange.route}", repr(exchange.body))
            return
        assert self.bare is not None
        scan.tree(self.bare)
        scan.git_objects_of(self.bare)
        if self.server is not None:
            for n, line in enumerate(self.server.log):
                scan.text(f"git server log line {n}", line)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.fake is not None:
            self.fake.stop()


def open_pool(kind: str, root: Path) -> Pool:
    """A fresh pool of `kind`, started; the caller stops it (`Pool.stop`)."""
    root.mkdir(parents=True, exist_ok=True)
    if kind == "local":
        bare = root / "drive" / POOL_REPO  # absent: the first sync creates it (§5.1)
        return Pool(kind, str(bare), "", root, bare=bare)
    if kind == "http":
        served = root / "served"
        served.mkdir()
        backend_home = root / "backend-home"
        backend_home.mkdir()
        # a distinctive token per run, so a leak can only be this run's
        token = "tok-soak-" + secrets.token_urlsafe(24)
        server = GitHttpServer(served, backend_home, token).start()
        bare = server.create_repo(POOL_REPO, GitCli(backend_home))
        return Pool(kind, server.url(POOL_REPO), token, root, bare=bare, server=server)
    if kind == "treedx":
        fake = FakeTreeDX().start()
        token = fake.issue_token()  # "tdx_" + 32 random URL-safe characters: fresh each run
        return Pool(kind, fake.remote(TREEDX_REPOSITORY), token, root, fake=fake)
    raise ValueError(kind)
