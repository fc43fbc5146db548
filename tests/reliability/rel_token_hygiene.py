"""Token hygiene (§1, §2.1, §11.1): after a networked run (a token-checked `git http-backend`
pool and the TreeDX fake, an enrichment model behind a key, and a sync with a wrong token),
no live token is found in any command's output, in anything captured from the process, in any
file of the machines (stores, mirrors with their git objects decompressed, logs, config), in
the pool, or in the server's log. The credential store is the one place a token lives: files
of mode 0600 under DSH_HOME, outside the workspace.

The first test proves the scan can see each form it looks for, so a clean scan means clean.
"""

from __future__ import annotations

import base64
import secrets
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters.bootstrap import model_key_name
from dsh_chapters_harness.testing.tape_server import TapeServer, load_tape

from tests.acceptance.steps_common import Machine
from tests.acceptance.steps_common import project_clone as make_machine
from tests.reliability.machines import project_key, sample_text
from tests.reliability.pools import Pool, open_pool
from tests.reliability.token_scan import Scan, assert_credential_file, credential_file

TAPES = Path(__file__).resolve().parents[1] / "fixtures" / "tapes"
MODEL = "tape/enricher-1"
BASIC_USER = "x-access-token"  # what a git client sends as the user of a Basic header


def _git(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["git", *map(str, args)], cwd=cwd, check=True, capture_output=True,
                   timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd),
                                    "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
                                    "GIT_AUTHOR_EMAIL": "t@example.invalid",
                                    "GIT_COMMITTER_NAME": "t",
                                    "GIT_COMMITTER_EMAIL": "t@example.invalid"})


def test_the_scan_finds_a_token_in_every_form_it_looks_for(tmp_path: Path) -> None:
    token = "tok-probe-" + secrets.token_urlsafe(24) + "~+/"  # characters URL-encoding changes
    planted = {
        "plain.txt": token.encode(),
        "url.log": b"GET /x?t=" + urllib.parse.quote(token, safe="").encode(),
        "form.log": b"token=" + urllib.parse.quote_plus(token).encode(),
    }
    for shift in range(3):  # a Basic header at every base64 alignment of the token
        header = base64.b64encode(f"{'u' * shift}{BASIC_USER}:{token}".encode())
        planted[f"basic-{shift}.log"] = b"Authorization: Basic " + header
        planted[f"urlsafe-{shift}.log"] = base64.urlsafe_b64encode(b"x" * shift + token.encode())
    for name, data in planted.items():
        folder = tmp_path / name.replace(".", "-")
        folder.mkdir()
        (folder / name).write_bytes(data)
        scan = Scan(tokens=(token,))
        scan.tree(folder)
        assert scan.leaks(), f"the scan missed the token in {name}"
    # a git object: packed, so the token is nowhere in the repository's bytes as they are
    repo = tmp_path / "repo"
    repo.mkdir()
    _git("init", "--quiet", "-b", "main", cwd=repo)
    (repo / "secret.md").write_text(f"pushed by mistake: {token}\n")
    _git("add", "secret.md", cwd=repo)
    _git("commit", "--quiet", "-m", "oops", cwd=repo)
    (repo / "secret.md").unlink()
    _git("rm", "--quiet", "--cached", "secret.md", cwd=repo)
    _git("commit", "--quiet", "-m", "removed", cwd=repo)
    _git("gc", "--quiet", "--aggressive", cwd=repo)
    raw = Scan(tokens=(token,))
    raw.tree(repo / ".git" / "objects")
    assert not raw.leaks(), "the object is compressed: only a decompressing scan can find it"
    objects = Scan(tokens=(token,))
    objects.git_objects_of(repo / ".git")
    assert objects.leaks() and objects.git_objects >= 4
    # the excluded credential file is the one place a token may be
    store = tmp_path / "home" / "dsh-chapters" / "credentials"
    store.mkdir(parents=True)
    (store / "key").write_text(token)
    allowed = Scan(tokens=(token,))
    allowed.tree(tmp_path / "home", exclude=[store / "key"])
    assert allowed.files == 0 and not allowed.leaks()


def _linked(m: Machine, pool: Pool, tape: TapeServer, model_key: str) -> None:
    result = m.ok("link", pool.remote, pool.token)
    assert pool.token not in result.text
    # the model's key goes in on stdin, never on the command line (shell history, ps)
    set_model = m.run("enrich", "model", MODEL, "--base-url", tape.url, "--key-stdin",
                      stdin=model_key + "\n")
    assert set_model.code == 0, set_model.text
    m.set_config('enrichmentTrigger = "manual"')
    m.set_config("syncDebounceMs = 0")  # every archive pushes: the failing push is exercised too


def _archive(m: Machine, label: str) -> dict[str, Any]:
    sid = f"0b5e55ed-0000-4000-8000-{secrets.token_hex(6)}"
    path = m.workspace.parent / f"{label}.jsonl"
    path.write_text(sample_text("demo-session.jsonl", sid), encoding="utf-8")
    data: dict[str, Any] = m.ok("archive", str(path), "--json").json()
    return data


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["http", "treedx"])
def test_no_live_token_anywhere_after_a_networked_run(
    kind: str, tmp_path: Path, capfd: pytest.CaptureFixture[str], record: Any
) -> None:
    model_key = "sk-model-" + secrets.token_urlsafe(24)
    pool = open_pool(kind, tmp_path / "pool")
    tape = TapeServer(tapes=(load_tape(TAPES / "enrich-valid.json"),),
                      expected_key=model_key).start()
    try:
        a, b = (make_machine(tmp_path / "machines", n) for n in ("box-a", "box-b"))
        for m in (a, b):
            _linked(m, pool, tape, model_key)
        _archive(a, "a-1")
        assert a.ok("sync", "--json").json()["ok"]
        _archive(b, "b-1")
        assert b.ok("sync", "--json").json()["ok"]
        enriched = a.ok("enrich", "run", "--json").json()["outcomes"]
        assert enriched and {o["action"] for o in enriched} == {"enriched"}
        assert tape.requests and all(r.authorized for r in tape.requests)
        assert a.ok("sync", "--json").json()["ok"]  # the enriched chapters travel too

        # box-b: a wrong token; the archive still succeeds, the sync is refused with its code
        wrong = pool.wrong_token()
        assert b.ok("link", pool.remote, wrong).code == 0
        pool.revoke_wrong()
        archived = _archive(b, "b-2")
        assert archived["chapters"] and archived["pool"]["ok"] is False
        refused = b.run("sync", "--json")
        assert refused.code == 1 and refused.json()["failureCode"] == "auth", refused.text
        status = b.ok("status", "--json").json()["pool"]
        assert status["localOnly"] and status["pending"] > 0
        for argv in (("status",), ("link",), ("doctor",), ("doctor", "--json"),
                     ("enrich", "model")):
            b.run(*argv)  # whatever they say, they say it without the token (scanned below)
        # a re-link with the live token recovers, and both machines converge
        b.ok("link", pool.remote, pool.token)
        assert b.ok("sync", "--json").json()["ok"]
        assert a.ok("sync", "--json").json()["ok"]
        chapters = [{p: d for p, d in m.store_files().items() if "/chapters/" in p}
                    for m in (a, b)]
        assert chapters[0] == chapters[1] and len(chapters[0]) == 6

        key = project_key(a)
        scan = Scan(tokens=(pool.token, *pool.wrong_tokens, model_key))
        for m in (a, b):
            assert_credential_file(m.home, key, pool.token)
            assert_credential_file(m.home, model_key_name(MODEL), model_key)
            assert not credential_file(m.home, key).is_relative_to(m.workspace)
            for n, result in enumerate(m.results):
                scan.text(f"{m.name} output {n} ({' '.join(result.argv[:2])})",
                          result.out + result.err)
            scan.tree(m.workspace.parent, exclude=[credential_file(m.home, key),
                                                   credential_file(m.home,
                                                                   model_key_name(MODEL))])
            if (m.mirror / ".git").is_dir():
                scan.git_objects_of(m.mirror / ".git")
        pool.scan(scan)
        captured = capfd.readouterr()
        scan.text("captured stdout", captured.out)
        scan.text("captured stderr", captured.err)
    finally:
        tape.stop()
        pool.stop()
    assert not scan.leaks(), scan.leaks()[:10]
    assert scan.files > 0 and (kind == "treedx" or scan.git_objects > 0)
    record(f"{kind}: tokens planted", f"{len(scan.tokens)} (pool, wrong pool, model key), each "
           "as is, URL-encoded and base64 at every alignment")
    record(f"{kind}: scanned", f"{scan.files} files, {scan.git_objects} git objects "
           f"(decompressed), {scan.texts} outputs and log lines")
    record(f"{kind}: live tokens found", "0; credential files 0600 under DSH_HOME")
    record(f"{kind}: wrong-token sync", f"refused with code auth, local-only with "
           f"{status['pending']} pending, recovered by a re-link")

