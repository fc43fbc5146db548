"""Provider tokens recognised by their own shape: a fixed prefix and a body (§9).

Each family is data: a name, what it matches, and its shapes, each a literal prefix and the
body's regular expression. The prefix is the trigger's anchor and the body's shape rides in
the trigger's look-ahead, so the combined scan reports only real candidates. A token must
start a word (a JSON escape such as `\\n` before it counts as a start) and, unless its body
has a fixed length, runs as long as its characters do. The formats are the providers' own
published ones (the same facts gitleaks and detect-secrets encode); the rules are ours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from dsh_chapters_core.redaction.model import (
    URLSAFE,
    WORD,
    Family,
    Span,
    Trigger,
    ends_word,
    is_example,
    literal_trigger,
    starts_word,
)


@dataclass(frozen=True, slots=True)
class Shape:
    """`prefix` then `body` (regex). `tail`: characters that may not follow the token (its
    body would run on), checked after the match; empty for bodies that end themselves."""

    prefix: str
    body: str
    tail: frozenset[str] = WORD
    lead: frozenset[str] = WORD  # characters that may not stand right before the prefix


_B62 = "A-Za-z0-9"


# Open-ended bodies (`{20,}`) stop at this many characters: a longer unbroken run is no
# token, and a bound keeps a text of one huge run linear (each trigger reads at most this).
MAX_TOKEN = 1024


def _bounded(body: str) -> str:
    return re.sub(r"\{(\d+),\}", lambda m: f"{{{m.group(1)},{MAX_TOKEN}}}", body)


def _shape_finder(family: str, shape: Shape) -> Trigger:
    body = _bounded(shape.body)
    pattern = re.compile(re.escape(shape.prefix) + f"(?:{body})")

    def find(text: str, start: int) -> Iterable[Span]:
        if not starts_word(text, start, shape.lead):
            return ()
        match = pattern.match(text, start)
        if match is None or not ends_word(text, match.end(), shape.tail):
            return ()
        if is_example(text[start + len(shape.prefix) : match.end()]):
            return ()
        return ((start, match.end(), family),)

    return literal_trigger(shape.prefix, find, ahead=f"(?:{body})")


def token_family(name: str, what: str, *shapes: Shape) -> Family:
    return Family(name, what, tuple(_shape_finder(name, s) for s in shapes))


def _openai_or_anthropic(text: str, start: int) -> Iterable[Span]:
    """`sk-ant-…` is Anthropic's; any other `sk-` key of 20+ characters is OpenAI's shape."""
    if not starts_word(text, start, URLSAFE):
        return ()
    match = _SK.match(text, start)
    if match is None or is_example(match.group(0)[3:]):
        return ()
    family = "anthropic-key" if match.group(0).startswith("sk-ant-") else "openai-key"
    return ((start, match.end(), family),)


_SK = re.compile(r"sk-[A-Za-z0-9_-]{20,1024}")

_HEX = "0-9a-fA-F"

TOKEN_FAMILIES: tuple[Family, ...] = (
    token_family(
        "aws-access-key", "AWS access key ids: `AKIA…`, `ASIA…`, `ABIA…`, `ACCA…` + 16",
        *(Shape(p, r"[A-Z0-9]{16}") for p in ("AKIA", "ASIA", "ABIA", "ACCA")),
    ),
    Family(
        "openai-key", "OpenAI keys: `sk-…`, `sk-proj-…`, `sk-svcacct-…` (20+ characters)",
        (literal_trigger("sk-", _openai_or_anthropic, ahead=r"[A-Za-z0-9_-]{20}"),),
    ),
    Family("anthropic-key", "Anthropic keys: `sk-ant-api03-…`, `sk-ant-admin01-…`", ()),
    token_family(
        "github-token", "GitHub tokens: `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`",
        *(Shape(f"gh{c}_", r"[A-Za-z0-9]{20,}") for c in "pousr"),
        Shape("github_pat_", r"[A-Za-z0-9_]{22,}"),
    ),
    token_family(
        "gitlab-token", "GitLab tokens: `glpat-`, `gldt-`, `glrt-`, `glptt-`, `glcbt-`, "
        "`glft-`, `glimt-`, `glagent-`, `gloas-`, `glsoat-`, `glffct-`, `GR1348941`",
        *(Shape(p, r"[A-Za-z0-9_-]{20,}(?:\.[0-9a-z]{9})?", URLSAFE)
          for p in ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-",
                    "glagent-", "gloas-", "glsoat-", "glffct-", "GR1348941")),
    ),
    token_family(
        "slack-token", "Slack tokens: `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`, `xoxo-`, "
        "`xoxe-`, `xoxe.xoxp-`, `xapp-`",
        *(Shape(f"xox{c}-", r"[A-Za-z0-9-]{10,}", URLSAFE) for c in "abposer"),
        Shape("xoxe.xox", r"[bp]-[A-Za-z0-9-]{10,}", URLSAFE),
        Shape("xapp-", r"\d-[A-Za-z0-9-]{10,}", URLSAFE),
    ),
    token_family(
        "stripe-key", "Stripe secret and restricted keys and webhook secrets: `sk_live_`, "
        "`sk_test_`, `rk_live_`, `rk_test_`, `whsec_`",
        *(Shape(f"{k}_{m}_", r"[A-Za-z0-9]{10,}") for k in ("sk", "rk")
          for m in ("live", "test", "prod")),
        Shape("whsec_", r"[A-Za-z0-9+/]{24,}={0,2}", frozenset()),
    ),
    token_family(
        "sendgrid-key", "SendGrid keys: `SG.<22>.<43>`",
        Shape("SG.", r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}", URLSAFE),
    ),
    token_family(
        "huggingface-token", "Hugging Face tokens: `hf_…`, `api_org_…`",
        Shape("hf_", r"[A-Za-z0-9]{30,}"),
        Shape("api_org_", r"[A-Za-z0-9]{30,}"),
    ),
    token_family(
        "twilio-key", "Twilio API key SIDs: `SK` + 32 hex",
        Shape("SK", f"[{_HEX}]{{32}}"),
    ),
    token_family(
        "pypi-token", "PyPI upload tokens: `pypi-AgEIcHlwaS5vcmc…` (and test.pypi.org's)",
        Shape("pypi-AgEIcHlwaS5vcmc", r"[A-Za-z0-9_-]{40,}", URLSAFE),
        Shape("pypi-AgENdGVzdC5weXBpLm9yZw", r"[A-Za-z0-9_-]{40,}", URLSAFE),
    ),
    token_family(
        "vault-token", "HashiCorp Vault tokens: `hvs.…`, `hvb.…`, `hvr.…`",
        *(Shape(f"hv{c}.", r"[A-Za-z0-9_-]{24,}", URLSAFE) for c in "sbr"),
    ),
    token_family(
        "doppler-token", "Doppler tokens: `dp.pt.`, `dp.st.`, `dp.sa.`, `dp.ct.`, `dp.scim.`, "
        "`dp.audit.`",
        *(Shape(f"dp.{k}.", r"[A-Za-z0-9]{40,44}") for k in ("pt", "st", "sa", "ct", "scim",
                                                            "audit")),
    ),
    token_family(
        "age-secret-key", "age secret keys: `AGE-SECRET-KEY-1…`",
        Shape("AGE-SECRET-KEY-1", r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ),
    token_family(
        "google-api-key", "Google API keys: `AIza` + 35",
        Shape("AIza", r"[A-Za-z0-9_-]{35}", URLSAFE),
    ),
    token_family(
        "google-oauth", "Google OAuth client secrets and access tokens: `GOCSPX-…`, `ya29.…`",
        Shape("GOCSPX-", r"[A-Za-z0-9_-]{24,}", URLSAFE),
        Shape("ya29.", r"[A-Za-z0-9_-]{30,}", URLSAFE),
    ),
    token_family(
        "npm-token", "npm tokens: `npm_` + 36",
        Shape("npm_", r"[A-Za-z0-9]{36}"),
    ),
    token_family(
        "shopify-token", "Shopify tokens and secrets: `shpat_`, `shpca_`, `shppa_`, `shpss_`",
        *(Shape(f"shp{k}_", f"[{_HEX}]{{32}}") for k in ("at", "ca", "pa", "ss")),
    ),
    token_family(
        "digitalocean-token", "DigitalOcean tokens: `dop_v1_`, `doo_v1_`, `dor_v1_` + 64 hex",
        *(Shape(f"do{k}_v1_", r"[a-f0-9]{64}") for k in "por"),
    ),
    token_family(
        "databricks-token", "Databricks tokens: `dapi` + 32 hex",
        Shape("dapi", r"[a-h0-9]{32}(?:-\d)?"),
    ),
    token_family(
        "linear-key", "Linear API keys: `lin_api_` + 40",
        Shape("lin_api_", r"[A-Za-z0-9]{40}"),
    ),
    token_family(
        "postman-key", "Postman API keys: `PMAK-…`",
        Shape("PMAK-", r"[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    ),
    token_family(
        "newrelic-key", "New Relic keys: `NRAK-`, `NRII-`, `NRJS-`",
        Shape("NRAK-", r"[A-Z0-9]{27}"),
        Shape("NRII-", r"[A-Za-z0-9-]{32}"),
        Shape("NRJS-", r"[a-f0-9]{19}"),
    ),
    token_family(
        "grafana-token", "Grafana tokens: `glc_…`, `glsa_…`",
        Shape("glc_", r"[A-Za-z0-9+/]{32,}={0,2}", frozenset()),
        Shape("glsa_", r"[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    ),
    token_family(
        "sentry-token", "Sentry tokens: `sntrys_…`, `sntryu_…`",
        Shape("sntrys_", r"[A-Za-z0-9+/=_]{60,}", frozenset()),
        Shape("sntryu_", r"[a-f0-9]{64}"),
    ),
    token_family(
        "flyio-token", "Fly.io tokens: `fo1_…`, `fm1a_…`, `fm1r_…`, `fm2_…`",
        Shape("fo1_", r"[A-Za-z0-9_-]{43}", URLSAFE),
        *(Shape(p, r"[A-Za-z0-9+/]{100,}={0,3}", frozenset())
          for p in ("fm1a_", "fm1r_", "fm2_")),
    ),
    token_family(
        "planetscale-token", "PlanetScale tokens and passwords: `pscale_tkn_`, `pscale_pw_`, "
        "`pscale_oauth_`",
        *(Shape(f"pscale_{k}_", r"[A-Za-z0-9_=.-]{32,64}", URLSAFE)
          for k in ("tkn", "pw", "oauth")),
    ),
    token_family(
        "supabase-token", "Supabase access tokens: `sbp_` + 40 hex",
        Shape("sbp_", r"[a-f0-9]{40}"),
    ),
    token_family(
        "pulumi-token", "Pulumi access tokens: `pul-` + 40 hex",
        Shape("pul-", r"[a-f0-9]{40}"),
    ),
    token_family(
        "alibaba-key", "Alibaba Cloud access key ids: `LTAI` + 20",
        Shape("LTAI", r"[A-Za-z0-9]{20}"),
    ),
    token_family(
        "dynatrace-token", "Dynatrace tokens: `dt0c01.<24>.<64>`",
        Shape("dt0c01.", r"[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    ),
    token_family(
        "easypost-key", "EasyPost keys: `EZAK…`, `EZTK…`",
        Shape("EZAK", r"[A-Za-z0-9]{54}"),
        Shape("EZTK", r"[A-Za-z0-9]{54}"),
    ),
    token_family(
        "facebook-token", "Facebook access tokens: `EAAC…`, `EAAM…` (100+)",
        Shape("EAAC", r"[A-Za-z0-9]{100,}"),
        Shape("EAAM", r"[A-Za-z0-9]{100,}"),
    ),
    token_family(
        "square-token", "Square tokens and secrets: `sq0atp-`, `sq0csp-`, `EAAA…`",
        Shape("sq0atp-", r"[A-Za-z0-9_-]{22,}", URLSAFE),
        Shape("sq0csp-", r"[A-Za-z0-9_-]{40,}", URLSAFE),
        Shape("EAAA", r"[A-Za-z0-9_-]{60,}", URLSAFE),
    ),
    token_family(
        "atlassian-token", "Atlassian API tokens: `ATATT3…`; Bitbucket app passwords `ATBB…`",
        Shape("ATATT3", r"[A-Za-z0-9_=-]{150,}", URLSAFE),
        Shape("ATBB", r"[A-Za-z0-9]{32}"),
    ),
    token_family(
        "notion-token", "Notion tokens: `ntn_…`, `secret_` + 43",
        Shape("ntn_", r"[0-9]{11}[A-Za-z0-9]{35}"),
        Shape("secret_", r"[A-Za-z0-9]{43}"),
    ),
    token_family(
        "ai-service-key", "AI service keys: Perplexity `pplx-`, Groq `gsk_`, Replicate `r8_`, "
        "xAI `xai-`",
        Shape("pplx-", r"[A-Za-z0-9]{48}"),
        Shape("gsk_", r"[A-Za-z0-9]{48,}"),
        Shape("r8_", r"[A-Za-z0-9]{37}"),
        Shape("xai-", r"[A-Za-z0-9]{70,}"),
    ),
    token_family(
        "registry-token", "Package registry tokens: Docker Hub `dckr_pat_`, RubyGems "
        "`rubygems_`, Artifactory `AKCp…`, Clojars `CLOJARS_`",
        Shape("dckr_pat_", r"[A-Za-z0-9_-]{27,}", URLSAFE),
        Shape("rubygems_", r"[a-f0-9]{48}"),
        Shape("AKCp", r"[A-Za-z0-9]{60,}"),
        Shape("CLOJARS_", r"[a-z0-9]{60}"),
    ),
    token_family(
        "mail-service-key", "Mail service keys: Mailgun `key-` + 32 hex, Brevo `xkeysib-`, "
        "Mailchimp `…-us<N>`",
        Shape("key-", r"[0-9a-f]{32}"),
        Shape("xkeysib-", r"[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    ),
    token_family(
        "onepassword-token", "1Password service account tokens `ops_eyJ…` and secret keys `A3-…`",
        Shape("ops_eyJ", r"[A-Za-z0-9+/]{200,}={0,3}", frozenset()),
        Shape("A3-", r"[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})"
                     r"-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"),
    ),
    token_family(
        "heroku-key", "Heroku platform keys: `HRKU-AA…`",
        Shape("HRKU-AA", r"[A-Za-z0-9_-]{58}", URLSAFE),
    ),
    token_family(
        "cloudflare-key", "Cloudflare origin CA keys: `v1.0-<24 hex>-<146 hex>`",
        Shape("v1.0-", r"[a-f0-9]{24}-[a-f0-9]{146}"),
    ),
    token_family(
        "openshift-token", "OpenShift user tokens: `sha256~` + 43",
        Shape("sha256~", r"[A-Za-z0-9_-]{43}", URLSAFE),
    ),
)
