"""A generated credential corpus (§9): every family, from a seed, never a real secret.

Each generator builds a credential in its provider's published shape from random characters
(so no real token, and no literal token in this file for a scanner to flag) and a context a
person or a tool would write it in: a shell export, a config line, a JSON document, a command,
a URL. `places` puts one credential in the seven places of a session (prompt, reply,
thinking, a Bash command, a file-write input, tool output, a large tool output that becomes
an artifact), each plain and JSON-escaped, with the command-line and URL forms beside them.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
A62 = LOWER + UPPER + DIGITS
HEX = "0123456789abcdef"
B64 = A62 + "+/"
URLSAFE = A62 + "-_"


@dataclass(frozen=True)
class Credential:
    family: str  # the family expected to find it (another may, when both match the span)
    secret: str  # what must never appear in any output
    context: str  # the secret as a person or tool would write it (plain form)

    def probes(self) -> tuple[str, ...]:
        """Substrings that prove a leak: the secret, or each long line of a multi-line one;
        and for a long secret its last 16 characters too (random in every family), so that a
        rule that replaced only the start of a secret shows as a leak."""
        if "\n" in self.secret:
            return tuple(line for line in self.secret.splitlines() if len(line) >= 16)
        if len(self.secret) >= 32:
            return (self.secret, self.secret[-16:])
        return (self.secret,)


def _t(rng: random.Random, alphabet: str, n: int) -> str:
    # Never three of one character in a row, and never an example-like word: a generated
    # secret must not read as a placeholder (`xxxx`, `example`) to either side.
    out: list[str] = []
    while len(out) < n:
        ch = rng.choice(alphabet)
        if len(out) >= 2 and out[-1] == out[-2] == ch:
            continue
        out.append(ch)
    text = "".join(out)
    return text if "xampl" not in text.lower() else _t(rng, alphabet, n)


def _pick(rng: random.Random, *options: str) -> str:
    return rng.choice(options)


def _ctx(rng: random.Random, secret: str, name: str) -> str:
    """A context for a token: prose, an export, a JSON value, a YAML line."""
    return _pick(
        rng,
        f"the deploy job uses {secret} for this",
        f"export {name}={secret}",
        f'{{"{name.lower()}": "{secret}", "region": "eu-west-1"}}',
        f"{name.lower()}: {secret}",
        f"{name}=\"{secret}\"",
    )


Gen = Callable[[random.Random], Credential]


def _token(family: str, name: str, make: Callable[[random.Random], str]) -> Gen:
    def gen(rng: random.Random) -> Credential:
        secret = make(rng)
        return Credential(family, secret, _ctx(rng, secret, name))

    return gen


def _pem(rng: random.Random) -> Credential:
    kind = _pick(rng, "RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED ", "")
    body = "\n".join(_t(rng, B64, 64) for _ in range(rng.randrange(4, 9))) + "\n" + _t(
        rng, B64, 24) + "=="
    block = f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"
    if rng.random() < 0.3:  # a service account's JSON: the key with `\n` escapes
        return Credential("pem-private-key", body, json.dumps(
            {"type": "service_account", "private_key": block + "\n"}))
    return Credential("pem-private-key", body, block)


def _pgp(rng: random.Random) -> Credential:
    body = "\n".join(_t(rng, B64, 64) for _ in range(6)) + "\n=" + _t(rng, B64, 4)
    return Credential("pem-private-key", body, "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
                      f"{body}\n-----END PGP PRIVATE KEY BLOCK-----")


def _putty(rng: random.Random) -> Credential:
    private = "\n".join(_t(rng, B64, 64) for _ in range(3))
    return Credential(
        "putty-private-key", private,
        "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: deploy\nPublic-Lines: 2\n"
        f"{_t(rng, B64, 64)}\n{_t(rng, B64, 40)}\nPrivate-Lines: 3\n{private}\n"
        f"Private-MAC: {_t(rng, HEX, 40)}")


def _jwt(rng: random.Random) -> Credential:
    def part(n: int) -> str:
        return base64.urlsafe_b64encode(bytes(rng.randrange(256) for _ in range(n))).decode(
        ).rstrip("=")

    head = "eyJ" + part(24)
    body = "eyJ" + part(48)
    secret = f"{head}.{body}.{part(32)}"
    return Credential("jwt", secret, _pick(rng, f"the session cookie was {secret} at logout",
                                           f"ACCESS_TOKEN={secret}",
                                           f'{{"id_token": "{secret}"}}'))


def _url_password(rng: random.Random) -> Credential:
    password = _t(rng, A62, rng.randrange(10, 24))
    scheme = _pick(rng, "postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqp",
                   "https", "ftp", "rediss")
    user = _pick(rng, "app", "deploy", "", "admin_rw")
    return Credential("url-credentials", password,
                      f"{scheme}://{user}:{password}@db-{rng.randrange(9)}.internal:5432/app")


def _url_token(rng: random.Random) -> Credential:
    secret = _t(rng, A62, 32)
    name = _pick(rng, "token", "access_token", "api_key", "apikey", "auth_token", "sig")
    return Credential("url-token", secret,
                      f"GET https://api.acme.test/v2/items?page=3&{name}={secret}&sort=asc")


def _slack_webhook(rng: random.Random) -> Credential:
    path = f"T{_t(rng, UPPER + DIGITS, 10)}/B{_t(rng, UPPER + DIGITS, 10)}/{_t(rng, A62, 24)}"
    return Credential("slack-webhook", path,
                      f"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/{path}")


def _chat_webhook(rng: random.Random) -> Credential:
    secret = _t(rng, URLSAFE, 68)
    return Credential("chat-webhook", secret,
                      f"https://discord.com/api/webhooks/{_t(rng, DIGITS, 18)}/{secret}")


def _telegram(rng: random.Random) -> Credential:
    secret = f"{rng.randrange(10**8, 10**10)}:AA{_t(rng, URLSAFE, 33)}"
    return Credential("telegram-bot-token", secret,
                      f"curl https://api.telegram.org/bot{secret}/getMe")


def _azure_key(rng: random.Random) -> Credential:
    secret = _t(rng, B64, 86) + "=="
    return Credential("azure-key", secret,
                      "DefaultEndpointsProtocol=https;AccountName=acmeprod;"
                      f"AccountKey={secret};EndpointSuffix=core.windows.net")


def _azure_sas(rng: random.Random) -> Credential:
    secret = _t(rng, A62, 30) + "%2B" + _t(rng, A62, 10) + "%3D"
    return Credential("url-token", secret,
                      "https://acmeprod.blob.core.windows.net/backups/db.tar?sv=2022-11-02"
                      f"&ss=b&srt=o&sp=r&se=2026-12-01T00:00:00Z&sig={secret}")


def _docker_auth(rng: random.Random) -> Credential:
    secret = base64.b64encode(f"deploy:{_t(rng, A62, 20)}".encode()).decode()
    return Credential("docker-auth", secret, json.dumps(
        {"auths": {"ghcr.io": {"auth": secret}}}, indent=2))


def _aws_secret(rng: random.Random) -> Credential:
    secret = _t(rng, B64, 40)
    return Credential("aws-secret-key", secret, _pick(
        rng,
        f"[default]\naws_access_key_id = AKIA{_t(rng, UPPER + DIGITS, 16)}\n"
        f"aws_secret_access_key = {secret}\nregion = eu-west-1",
        f"aws configure set aws_secret_access_key {secret}",
        f"AWS_SECRET_ACCESS_KEY={secret}",
        f'{{"Credentials": {{"SecretAccessKey": "{secret}", "Expiration": "soon"}}}}',
    ))


def _assignment(rng: random.Random) -> Credential:
    secret = _t(rng, A62 + "!#%^*", rng.randrange(12, 28))
    name = _pick(rng, "DB_PASSWORD", "DB_PASS", "JWT_SECRET", "STRIPE_API_KEY",
                 "client_secret", "apiKey", "AUTH_TOKEN", "SMTP_PASSWD", "MYSQL_PWD",
                 "SECRET_KEY_BASE", "passphrase", "GITHUB_TOKEN")
    form = _pick(rng, "{n}={s}", 'export {n}="{s}"', '"{n}": "{s}"', "{n}: {s}",
                 "{n} = '{s}'", "set -x {n} {s}", "<{n}>{s}</{n}>", "'{n}' => '{s}',",
                 "{n} := \"{s}\"")
    if "!" in secret or "#" in secret or "%" in secret or "^" in secret or "*" in secret:
        form = form.replace("{n}={s}", "{n}='{s}'").replace("{n}: {s}", '{n}: "{s}"')
        form = form.replace("set -x {n} {s}", "set -x {n} '{s}'")
    return Credential("secret-assignment", secret, form.format(n=name, s=secret))


def _ini_password(rng: random.Random) -> Credential:
    secret = _t(rng, A62, 16)
    return Credential("secret-assignment", secret,
                      f"[client]\nuser = app\npassword = {secret}\nhost = db.internal")


def _netrc(rng: random.Random) -> Credential:
    secret = _t(rng, A62, 20)
    return Credential("secret-assignment", secret,
                      f"machine api.acme.test login deploy password {secret}")


def _high_entropy(rng: random.Random) -> Credential:
    secret = _t(rng, A62, 30) + rng.choice(DIGITS) + rng.choice(LOWER)
    name = _pick(rng, "ENCRYPTION_KEY", "signing_key", "LICENSE_KEY", "webhookSignature",
                 "MASTER_KEY", "npm_auth")
    return Credential("high-entropy-secret", secret, f"{name}={secret}")


def _authorization(rng: random.Random) -> Credential:
    secret = _t(rng, A62 + "._~+/-", 40)
    scheme = _pick(rng, "Bearer", "Token", "Bot", "ApiKey")
    return Credential("authorization-header", secret, _pick(
        rng,
        f"curl -H 'Authorization: {scheme} {secret}' https://api.acme.test/v1/me",
        f'{{"headers": {{"Authorization": "{scheme} {secret}"}}}}',
        f"Authorization: {scheme} {secret}",
    ))


def _basic_auth(rng: random.Random) -> Credential:
    secret = base64.b64encode(f"svc:{_t(rng, A62, 18)}".encode()).decode()
    return Credential("authorization-header", secret, f"Authorization: Basic {secret}")


def _cli(rng: random.Random) -> Credential:
    secret = _t(rng, A62, rng.randrange(10, 20))
    form = _pick(
        rng,
        "curl -u deploy:{s} https://ci.acme.test/api/json",
        "mysql -h db.internal -u root -p{s} app",
        "mysqldump -uroot -p{s} app > dump.sql",
        "sshpass -p '{s}' ssh deploy@web-1",
        "sshpass -p{s} scp build.tar deploy@web-1:/srv",
        "docker login -u deploy -p {s} ghcr.io",
        "redis-cli -h cache.internal -a {s} ping",
        "ldapsearch -x -D cn=admin -w {s} -b dc=acme",
        "mongosh --username app --password {s} mongodb.internal/app",
        "doctl auth init --access-token {s}",
        "keytool -importkeystore -srcstorepass {s} -deststorepass {s}",
        "openssl pkcs12 -in cert.p12 -passin pass:{s} -nodes",
        "sudo -E mysql --user=root -p{s}",
    )
    return Credential("command-line-password", secret, form.format(s=secret))


def _stripe_user(rng: random.Random) -> Credential:
    secret = "sk_live_" + _t(rng, A62, 24)
    return Credential("stripe-key", secret,
                      f"curl https://api.stripe.com/v1/charges -u {secret}:")


def _age(rng: random.Random) -> Credential:
    secret = "AGE-SECRET-KEY-1" + _t(rng, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
    return Credential("age-secret-key", secret, f"# created: today\n{secret}")


def _mailchimp(rng: random.Random) -> Credential:
    secret = _t(rng, HEX, 32) + f"-us{rng.randrange(1, 21)}"
    return Credential("mail-service-key", secret, f"mailchimp key {secret} for the list")


def _azure_ad(rng: random.Random) -> Credential:
    secret = _t(rng, A62, 3) + str(rng.randrange(10)) + "Q~" + _t(rng, A62 + "_~.-", 34)
    return Credential("azure-key", secret, f'"clientSecretText": "{secret}"')


def _terraform(rng: random.Random) -> Credential:
    secret = f"{_t(rng, A62, 14)}.atlasv1.{_t(rng, URLSAFE, 67)}"
    return Credential("terraform-token", secret,
                      f'credentials "app.terraform.io" {{\n  token = "{secret}"\n}}')


def _airtable(rng: random.Random) -> Credential:
    secret = f"pat{_t(rng, A62, 14)}.{_t(rng, HEX, 64)}"
    return Credential("airtable-token", secret, f"airtable base sync with {secret}")


GENERATORS: dict[str, Gen] = {
    "aws-access-key": _token("aws-access-key", "AWS_ACCESS_KEY_ID", lambda r: _pick(
        r, "AKIA", "ASIA") + _t(r, UPPER + DIGITS, 16)),
    "aws-secret-key": _aws_secret,
    "openai-key": _token("openai-key", "OPENAI_API_KEY", lambda r: _pick(
        r, "sk-", "sk-proj-", "sk-svcacct-") + _t(r, URLSAFE, 48)),
    "anthropic-key": _token("anthropic-key", "ANTHROPIC_API_KEY", lambda r: "sk-ant-api03-"
                            + _t(r, URLSAFE, 93) + "AA"),
    "github-token": _token("github-token", "GH_TOKEN", lambda r: _pick(
        r, "ghp_", "gho_", "ghu_", "ghs_", "ghr_") + _t(r, A62, 36)),
    "github-pat": _token("github-token", "GITHUB_PAT", lambda r: "github_pat_" + _t(
        r, A62, 22) + "_" + _t(r, A62, 59)),
    "gitlab-token": _token("gitlab-token", "GITLAB_TOKEN", lambda r: _pick(
        r, "glpat-", "gldt-", "glrt-", "glptt-") + _t(r, URLSAFE, 20)),
    "slack-token": _token("slack-token", "SLACK_BOT_TOKEN", lambda r: _pick(
        r, "xoxb-", "xoxp-", "xoxa-") + f"{_t(r, DIGITS, 12)}-{_t(r, DIGITS, 13)}-"
        + _t(r, A62, 24)),
    "slack-app-token": _token("slack-token", "SLACK_APP_TOKEN", lambda r: "xapp-1-A"
                              + _t(r, UPPER + DIGITS, 10) + "-" + _t(r, DIGITS, 13) + "-"
                              + _t(r, HEX, 64)),
    "slack-webhook": _slack_webhook,
    "stripe-key": _token("stripe-key", "STRIPE_SECRET_KEY", lambda r: _pick(
        r, "sk_live_", "rk_live_", "sk_test_", "rk_test_") + _t(r, A62, 24)),
    "stripe-user": _stripe_user,
    "stripe-webhook": _token("stripe-key", "STRIPE_WEBHOOK_SECRET",
                             lambda r: "whsec_" + _t(r, A62, 32)),
    "sendgrid-key": _token("sendgrid-key", "SENDGRID_API_KEY", lambda r: "SG." + _t(
        r, URLSAFE, 22) + "." + _t(r, URLSAFE, 43)),
    "huggingface-token": _token("huggingface-token", "HF_TOKEN", lambda r: "hf_" + _t(
        r, LOWER + UPPER, 34)),
    "twilio-key": _token("twilio-key", "TWILIO_API_KEY", lambda r: "SK" + _t(r, HEX, 32)),
    "azure-key": _azure_key,
    "azure-ad-secret": _azure_ad,
    "azure-sas": _azure_sas,
    "pypi-token": _token("pypi-token", "PYPI_TOKEN", lambda r: "pypi-AgEIcHlwaS5vcmc" + _t(
        r, URLSAFE, 70)),
    "vault-token": _token("vault-token", "VAULT_TOKEN", lambda r: _pick(
        r, "hvs.", "hvb.") + _t(r, URLSAFE, 90)),
    "terraform-token": _terraform,
    "telegram-bot-token": _telegram,
    "doppler-token": _token("doppler-token", "DOPPLER_TOKEN", lambda r: _pick(
        r, "dp.pt.", "dp.st.", "dp.sa.") + _t(r, A62, 43)),
    "age-secret-key": _age,
    "docker-auth": _docker_auth,
    "google-api-key": _token("google-api-key", "GOOGLE_MAPS_KEY", lambda r: "AIza" + _t(
        r, URLSAFE, 35)),
    "google-oauth": _token("google-oauth", "GOOGLE_CLIENT_SECRET", lambda r: _pick(
        r, "GOCSPX-", "ya29.") + _t(r, URLSAFE, 40)),
    "npm-token": _token("npm-token", "NPM_TOKEN", lambda r: "npm_" + _t(r, A62, 36)),
    "shopify-token": _token("shopify-token", "SHOPIFY_ACCESS_TOKEN", lambda r: _pick(
        r, "shpat_", "shpss_", "shpca_") + _t(r, HEX, 32)),
    "digitalocean-token": _token("digitalocean-token", "DIGITALOCEAN_TOKEN", lambda r: _pick(
        r, "dop_v1_", "doo_v1_") + _t(r, HEX, 64)),
    "databricks-token": _token("databricks-token", "DATABRICKS_TOKEN", lambda r: "dapi" + _t(
        r, "abcdefgh0123456789", 32)),
    "linear-key": _token("linear-key", "LINEAR_API_KEY", lambda r: "lin_api_" + _t(r, A62, 40)),
    "postman-key": _token("postman-key", "POSTMAN_API_KEY", lambda r: "PMAK-" + _t(
        r, HEX, 24) + "-" + _t(r, HEX, 34)),
    "newrelic-key": _token("newrelic-key", "NEW_RELIC_API_KEY", lambda r: "NRAK-" + _t(
        r, UPPER + DIGITS, 27)),
    "grafana-token": _token("grafana-token", "GRAFANA_TOKEN", lambda r: "glsa_" + _t(
        r, A62, 32) + "_" + _t(r, HEX, 8)),
    "sentry-token": _token("sentry-token", "SENTRY_AUTH_TOKEN", lambda r: "sntryu_" + _t(
        r, HEX, 64)),
    "flyio-token": _token("flyio-token", "FLY_API_TOKEN", lambda r: "fo1_" + _t(r, URLSAFE, 43)),
    "planetscale-token": _token("planetscale-token", "PLANETSCALE_TOKEN", lambda r: _pick(
        r, "pscale_tkn_", "pscale_pw_") + _t(r, URLSAFE, 43)),
    "supabase-token": _token("supabase-token", "SUPABASE_ACCESS_TOKEN", lambda r: "sbp_" + _t(
        r, HEX, 40)),
    "pulumi-token": _token("pulumi-token", "PULUMI_ACCESS_TOKEN", lambda r: "pul-" + _t(
        r, HEX, 40)),
    "alibaba-key": _token("alibaba-key", "ALIBABA_ACCESS_KEY_ID", lambda r: "LTAI" + _t(
        r, A62, 20)),
    "dynatrace-token": _token("dynatrace-token", "DT_API_TOKEN", lambda r: "dt0c01." + _t(
        r, UPPER + DIGITS, 24) + "." + _t(r, UPPER + DIGITS, 64)),
    "easypost-key": _token("easypost-key", "EASYPOST_API_KEY", lambda r: "EZAK" + _t(
        r, A62, 54)),
    "facebook-token": _token("facebook-token", "FB_PAGE_TOKEN", lambda r: "EAAC" + _t(
        r, A62, 160)),
    "square-token": _token("square-token", "SQUARE_ACCESS_TOKEN", lambda r: "sq0atp-" + _t(
        r, URLSAFE, 22)),
    "atlassian-token": _token("atlassian-token", "JIRA_API_TOKEN", lambda r: "ATATT3" + _t(
        r, URLSAFE, 186)),
    "notion-token": _token("notion-token", "NOTION_TOKEN", lambda r: "ntn_" + _t(
        r, DIGITS, 11) + _t(r, A62, 35)),
    "ai-service-key": _token("ai-service-key", "GROQ_API_KEY", lambda r: _pick(
        r, "gsk_", "pplx-") + _t(r, A62, 48)),
    "registry-token": _token("registry-token", "DOCKERHUB_TOKEN", lambda r: _pick(
        r, "dckr_pat_", "rubygems_") + _t(r, HEX, 48)),
    "mail-service-key": _mailchimp,
    "onepassword-token": _token("onepassword-token", "OP_SERVICE_ACCOUNT_TOKEN",
                                lambda r: "ops_eyJ" + _t(r, B64, 300)),
    "heroku-key": _token("heroku-key", "HEROKU_API_KEY", lambda r: "HRKU-AA" + _t(
        r, URLSAFE, 58)),
    "openshift-token": _token("openshift-token", "OC_TOKEN", lambda r: "sha256~" + _t(
        r, URLSAFE, 43)),
    "airtable-token": _airtable,
    "pem-private-key": _pem,
    "pgp-private-key": _pgp,
    "putty-private-key": _putty,
    "jwt": _jwt,
    "url-credentials": _url_password,
    "url-token": _url_token,
    "chat-webhook": _chat_webhook,
    "command-line-password": _cli,
    "secret-assignment": _assignment,
    "ini-password": _ini_password,
    "netrc": _netrc,
    "high-entropy-secret": _high_entropy,
    "authorization-header": _authorization,
    "basic-auth": _basic_auth,
}
KINDS = tuple(GENERATORS)  # generator names (several may share a family)
FAMILIES = tuple(sorted({GENERATORS[k](random.Random(0)).family for k in KINDS}))


def corpus(count: int, seed: int) -> list[Credential]:
    """`count` credentials, round-robin over every generator."""
    rng = random.Random(seed)
    return [GENERATORS[KINDS[i % len(KINDS)]](rng) for i in range(count)]


def json_escaped(text: str) -> str:
    """The text as it stands inside a JSON string (`\\"`, `\\n`), e.g. a tool result's JSON."""
    return json.dumps(text)[1:-1]


def unicode_escaped(text: str) -> str:
    """The JSON-escaped text with its quotes written `\\u0022` (what some encoders emit)."""
    return json_escaped(text).replace('\\"', "\\u0022")


def command_form(cred: Credential) -> str | None:
    """The credential on a command line (a token in a header), when it is one line."""
    if "\n" in cred.secret:
        return None
    return f"curl -sS -H 'Authorization: Bearer {cred.secret}' https://api.acme.test/v1/me"


def url_form(cred: Credential) -> str | None:
    """The credential as a URL's password, when it is URL-safe."""
    if any(c not in URLSAFE + ".~" for c in cred.secret):
        return None
    return f"git clone https://x-access-token:{cred.secret}@git.acme.test/acme/app.git"


@dataclass(frozen=True)
class Places:
    """One credential's texts, by the place of a session they go to."""

    prompt: str
    reply: str
    thinking: str
    command: str
    file_write: str
    tool_output: str
    large_output: str


def places(cred: Credential, filler_lines: int = 400) -> Places:
    """The credential in the seven places, each plain and JSON-escaped; the command-line
    form in the Bash command and the URL form in the tool output."""
    both = f"{cred.context}\n{json_escaped(cred.context)}"
    command = f"cat <<'EOF' > .env.local\n{cred.context}\nEOF\necho '{json_escaped(cred.context)}'"
    cli = command_form(cred)
    if cli is not None:
        command += f"\n{cli}"
    output = both
    url = url_form(cred)
    if url is not None:
        output += f"\n{url}"
    filler = "\n".join(f"[{n:05d}] step {n} of the deploy finished in {n % 97} ms"
                       for n in range(filler_lines))
    return Places(
        prompt=f"Why does this fail?\n{both}",
        reply=f"The value you pasted is live:\n{both}\nRotate it.",
        thinking=f"The user shared a credential.\n{both}\nI must not repeat it.",
        command=command,
        file_write=f"# settings\n{both}\n",
        tool_output=output,
        large_output=f"{filler}\n{both}\n{filler}",
    )
