"""A benign corpus (§9): lines that look like credentials to a careless rule, and are not.

Code that names tokens, keys and passwords; hashes, git SHAs, UUIDs, package integrity
strings, base64 images; paths and URLs; type annotations (`privateKey: Uint8Array;`);
placeholders (`your_api_key`, `<token>`, `${{ secrets.X }}`); command lines whose `-p` is a
port and `-u` a user; and the documented example keys (`AKIAIOSFODNN7EXAMPLE`). Generated
from a seed; the kinds of line are drawn round-robin, so every kind is in every corpus.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from collections.abc import Callable

HEX = "0123456789abcdef"
A62 = string.ascii_letters + string.digits
WORDS = ("auth", "token", "session", "cache", "index", "render", "sync", "retry", "config",
         "billing", "orders", "users", "search", "upload", "report", "queue", "worker")

Line = Callable[[random.Random], str]


def _h(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(HEX) for _ in range(n))


def _w(rng: random.Random) -> str:
    return rng.choice(WORDS)


def _n(rng: random.Random, top: int = 999) -> int:
    return rng.randrange(top)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(bytes(rng.randrange(256) for _ in range(n))).decode()


# The AWS documentation's own example credentials, published to be copied into examples.
AWS_DOC_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

KINDS: tuple[Line, ...] = (
    # git and hashes
    lambda r: f"commit {_h(r, 40)} (HEAD -> main, origin/main)",
    lambda r: f"Merge: {_h(r, 7)} {_h(r, 7)}",
    lambda r: f"index {_h(r, 7)}..{_h(r, 7)} 100644",
    lambda r: f"{_h(r, 7)} Fix the {_w(r)} retry when the {_w(r)} token expires",
    lambda r: f"sha256:{_h(r, 64)}",
    lambda r: f"{_h(r, 64)}  dist/app-{_n(r, 9)}.{_n(r, 30)}.tar.gz",
    lambda r: f'    "integrity": "sha512-{_b64(r, 64)}",',
    lambda r: f'  etag: "{_h(r, 32)}"',
    lambda r: f"image: ghcr.io/acme/{_w(r)}@sha256:{_h(r, 64)}",
    lambda r: f'"commitSha": "{_h(r, 40)}", "parentSha": "{_h(r, 40)}"',
    lambda r: f"checksum = \"{_h(r, 64)}\"",
    lambda r: f"revision: {_h(r, 40)}",
    # UUIDs and ids
    lambda r: f'{{"id": "{_uuid(r)}", "type": "tool_use", "name": "Bash"}}',
    lambda r: f"X-Request-Id: {_uuid(r)}",
    lambda r: f"request id {_uuid(r)} took {_n(r)} ms",
    lambda r: f'"sessionId":"{_uuid(r)}","parentUuid":"{_uuid(r)}"',
    lambda r: f'"tool_use_id": "toolu_01{"".join(r.choice(A62) for _ in range(22))}"',
    lambda r: f"trace_id={_h(r, 32)} span_id={_h(r, 16)}",
    lambda r: f'"idempotency_key": "{_uuid(r)}"',
    # base64 images and blobs
    lambda r: f'{{"type": "image", "source": {{"type": "base64", "media_type": "image/png", '
              f'"data": "iVBORw0KGgo{_b64(r, 300)}"}}}}',
    lambda r: f'<img src="data:image/png;base64,iVBORw0KGgo{_b64(r, 200)}">',
    lambda r: f"background: url(data:image/svg+xml;base64,{_b64(r, 120)});",
    lambda r: f"  {_b64(r, 48)}",
    # paths
    lambda r: f"/home/ada/src/{_w(r)}/secrets/{_w(r)}_config.py:{_n(r)}: in load_secret",
    lambda r: f"  File \"/usr/lib/python3.11/site-packages/{_w(r)}/auth/token.py\", line {_n(r)}",
    lambda r: f"src/{_w(r)}/password_reset.ts({_n(r)},{_n(r, 80)}): error TS2322",
    lambda r: "~/.ssh/id_ed25519.pub",
    lambda r: "/etc/passwd: No such file or directory",
    lambda r: f"C:\\Users\\ada\\AppData\\Roaming\\{_w(r)}\\credentials.json",
    lambda r: f"PRIVATE_KEY_PATH=/run/secrets/{_w(r)}_key.pem",
    lambda r: f"private_key: ~/.ssh/{_w(r)}_ed25519",
    lambda r: f"PWD=/home/ada/src/{_w(r)}",
    # type annotations
    lambda r: "  privateKey: Uint8Array;",
    lambda r: "  apiKey?: string;",
    lambda r: "  token: string | null;",
    lambda r: "  accessToken: Promise<string>;",
    lambda r: "    password: SecretStr = Field(..., min_length=12)",
    lambda r: "    private_key: Optional[RSAPrivateKey] = None",
    lambda r: f"def login(username: str, password: str) -> Token:  # line {_n(r)}",
    lambda r: "    pub api_key: String,",
    lambda r: "\tPassword string `json:\"password\"`",
    lambda r: "  secret_key: bytes",
    lambda r: "export interface Credentials { accessKeyId: string; secretAccessKey: string }",
    lambda r: "  signingKey: CryptoKey;",
    lambda r: "  clientSecret: string,",
    # placeholders and references
    lambda r: '  "DD_API_KEY": "your_api_key",',
    lambda r: "OPENAI_API_KEY=your-openai-api-key-here",
    lambda r: "export API_KEY=${API_KEY}",
    lambda r: "api_key = os.environ[\"OPENAI_API_KEY\"]",
    lambda r: "const token = process.env.GITHUB_TOKEN;",
    lambda r: "          NODE_AUTH_TOKEN: ${{ secrets.NPM_TOKEN }}",
    lambda r: "password: <your database password>",
    lambda r: "client_secret: changeme",
    lambda r: "SECRET_KEY = get_random_secret_key()",
    lambda r: "password: \"********\"",
    lambda r: "API_TOKEN=xxxxxxxxxxxxxxxxxxxxxxxx",
    lambda r: "DB_PASSWORD=\"$(cat /run/secrets/db_password)\"",
    lambda r: "token: {{ .Values.registry.token }}",
    lambda r: "aws_secret_access_key = YOUR_SECRET_ACCESS_KEY",
    lambda r: "SLACK_BOT_TOKEN=xoxb-your-bot-token",
    # documented example keys
    lambda r: f"aws_access_key_id = {AWS_DOC_KEY_ID}",
    lambda r: f"aws_secret_access_key = {AWS_DOC_SECRET}",
    lambda r: f"export AWS_ACCESS_KEY_ID={AWS_DOC_KEY_ID}",
    lambda r: f"AWS_SECRET_ACCESS_KEY={AWS_DOC_SECRET}",
    lambda r: f"aws configure set aws_secret_access_key {AWS_DOC_SECRET}",
    lambda r: f'{{"AccessKeyId": "{AWS_DOC_KEY_ID}", "SecretAccessKey": "{AWS_DOC_SECRET}"}}',
    lambda r: "sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    lambda r: "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    lambda r: "curl -H 'Authorization: Bearer <token>' https://api.example.com/v1/me",
    lambda r: "curl -H \"Authorization: Bearer $TOKEN\" https://api.acme.test/v1/me",
    lambda r: "postgres://user:password@localhost:5432/app",
    # code naming credentials without holding one
    lambda r: f"tokens = tokenizer.encode(text)[:{_n(r, 4096)}]",
    lambda r: f"    max_tokens={_n(r, 8192)},",
    lambda r: "for key, value in sorted(items.items()):",
    lambda r: "if not password:\n    raise ValueError(\"password is required\")",
    lambda r: f"const secretName = \"prod/{_w(r)}/db\";",
    lambda r: "api_key = settings.openai_api_key",
    lambda r: "headers = {\"Authorization\": f\"Bearer {token}\"}",
    lambda r: "auth: AuthConfig = field(default_factory=AuthConfig)",
    lambda r: f"cache_key = f\"user:{{user_id}}:{_w(r)}\"",
    lambda r: "  key: \"id\",",
    lambda r: f'  "key": "settings.{_w(r)}.title",',
    lambda r: "    id = Column(Integer, primary_key=True)",
    lambda r: "password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
    lambda r: '  "token_type": "Bearer", "expires_in": 3600,',
    lambda r: "sort_key: createdAt",
    lambda r: f"PASSWORD_MIN_LENGTH={_n(r, 20) + 8}",
    lambda r: "GITHUB_TOKEN_SCOPE=repo",
    lambda r: "if token == other_token: return True",
    lambda r: "    assert response.status_code == 401, response.text",
    lambda r: f"        self.secret_manager = SecretManager(region=\"{_w(r)}\")",
    lambda r: "publicKey: MCowBQYDK2VwAyEA7vL2qjDu9Zq0aV4C3bR1tGxH5cY8dW6eF2gK9mN0pQs=",
    lambda r: f"password_reset_url = f\"{{base}}/reset/{_w(r)}\"",
    lambda r: "const { data: session } = await supabase.auth.getSession();",
    # command lines whose flags are not passwords
    lambda r: f"mkdir -p /tmp/build/{_w(r)}",
    lambda r: f"docker run --rm -p {8000 + _n(r, 999)}:80 -u 1000:1000 acme/{_w(r)}",
    lambda r: "find . -path ./node_modules -prune -o -name '*.py' -print",
    lambda r: "git push -u origin main",
    lambda r: f"ssh -p {_n(r, 9000) + 1000} deploy@web-{_n(r, 9)}.internal",
    lambda r: "mysql -u root -p",
    lambda r: "docker login --username ada --password-stdin ghcr.io < token.txt",
    lambda r: "curl -u \"$USER:$PASS\" https://ci.acme.test/api/json",
    lambda r: "sed -i 's/password/passphrase/g' docs/setup.md",
    lambda r: f"git log --author=ada@acme.test -p -n {_n(r, 20)}",
    lambda r: "tar -xzf build.tar.gz -C /srv/app",
    lambda r: "gpg --list-secret-keys --keyid-format=long",
    # URLs and addresses
    lambda r: f"https://github.com/acme/{_w(r)}/pull/{_n(r)}#issuecomment-{_n(r, 10**9)}",
    lambda r: f"git@github.com:acme/{_w(r)}.git",
    lambda r: "ssh://git@github.com/acme/app.git",
    lambda r: f"mail ada@acme.test about the {_w(r)} outage",
    lambda r: f"https://ada@git.acme.test/acme/{_w(r)}.git",
    lambda r: f"redis://cache.internal:6379/{_n(r, 15)}",
    lambda r: f"https://search.acme.test/?q={_w(r)}&page={_n(r, 20)}&sort=asc",
    lambda r: "http://[::1]:8080/health",
    lambda r: f"{_n(r, 24):02d}:{_n(r, 60):02d}:{_n(r, 60):02d} INFO {_w(r)} started",
    # prose
    lambda r: "Bearer tokens are sent in the Authorization header.",
    lambda r: f"The {_w(r)} secret is rotated every {_n(r, 90) + 1} days by the vault agent.",
    lambda r: "Set API_KEY in your environment, then run the PASSWORD reset.",
    lambda r: "-----BEGIN CERTIFICATE----- is public, not a private key",
    lambda r: "A key file starts with -----BEGIN RSA PRIVATE KEY----- and ends with its END line.",
    lambda r: f"eyJ is how base64 JSON starts; {''.join(r.choice(A62) for _ in range(12))} is "
              "not one",
    lambda r: f"ghp_ prefix tokens rotate every {_n(r, 90) + 2} days",
)


def benign_lines(count: int, seed: int) -> list[str]:
    """`count` benign texts (some span two lines), every kind in turn."""
    rng = random.Random(seed)
    return [KINDS[i % len(KINDS)](rng) for i in range(count)]
