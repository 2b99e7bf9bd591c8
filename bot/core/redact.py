"""Secret redaction for everything that leaves the harness: transcripts, logs, errors.

A `Redactor` knows two kinds of secrets:

- the configured values (`Settings.secrets()`): replaced wherever they appear,
  raw or base64-encoded at any alignment (so `Authorization: Basic
  base64("x-access-token:" + token)` in a git trace is caught too). Values
  shorter than `MIN_SECRET_LENGTH` are ignored: replacing "abc" everywhere would
  shred the transcript, and no real token, key or webhook secret is that short.
- known token shapes, configured or not: GitHub tokens (`ghp_` `gho_` `ghu_`
  `ghs_` `ghr_` `github_pat_`), Anthropic keys (`sk-ant-`), PEM private key
  blocks, JWTs (GitHub App tokens), credentials in URLs and `Authorization`
  header values.

Each match becomes `[REDACTED:<kind>]`. Redacting twice changes nothing.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

MIN_SECRET_LENGTH = 8
MARKER = "[REDACTED:{}]"

_B64 = "A-Za-z0-9+/="
# (kind, anchors: cheap substrings that must be present for the regex to run, regex, group to hide)
_SHAPES: list[tuple[str, tuple[str, ...], re.Pattern[str], int]] = [
    (
        "private-key",
        ("PRIVATE KEY-----",),
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
            r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[A-Za-z0-9+/=:,\-\s\\]*)",
            re.DOTALL,
        ),
        0,
    ),
    ("github-token", ("github_pat_",), re.compile(r"github_pat_[A-Za-z0-9_]{20,}"), 0),
    (
        "github-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}"),
        0,
    ),
    ("anthropic-key", ("sk-ant-",), re.compile(r"sk-ant-[A-Za-z0-9_\-]{16,}"), 0),
    ("jwt", ("eyJ",), re.compile(r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), 0),
    (
        "auth-header",
        ("uthorization", "UTHORIZATION"),
        re.compile(r"(?i)authorization[\"']?\s*[:=]\s*[\"']?(?:basic|bearer|token)\s+([A-Za-z0-9+/=._\-]{8,})"),
        1,
    ),
    ("url-credentials", ("://",), re.compile(r"://[^/\s:@\"'<>]+:([^/\s@\"'<>]+)@"), 1),
]


def base64_forms(secret: str) -> list[str]:
    """The base64 text that encodes `secret` wherever it sits inside a longer encoded string.

    Base64 maps 3 bytes to 4 characters, so a secret preceded by 0, 1 or 2
    other bytes encodes three different ways; each form keeps only the
    characters that depend on the secret alone.
    """
    raw = secret.encode()
    forms = [base64.b64encode(raw).decode().rstrip("=")]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        head = {0: 0, 1: 2, 2: 3}[shift]  # characters that also encode the padding bytes
        partial = (shift + len(raw)) % 3 != 0  # a final partial group's last character depends on what follows
        core = encoded.rstrip("=")
        core = core[head : len(core) - partial]
        if len(core) >= MIN_SECRET_LENGTH:
            forms.append(core)
    return forms


_PAIR = re.compile(r"""^\s*"?[\w.\-]+"?\s*[=:]\s*"?(.*?)"?,?\s*$""")  # INI `key = value`, a JSON line
MIN_FILE_VALUE = 16  # shorter values of a credentials file (`region = eu-west-1`) are no secret


def credential_values(text: str) -> list[str]:
    """What a credentials file (AWS's INI files, a Google JSON key, a token file) holds, as values a `Redactor`
    hides: the whole text, and every value in it of `MIN_FILE_VALUE` characters or more that is not a URL (the
    public endpoints a Google key names). The whole text alone would miss one value printed on its own."""
    try:
        strings = list(_strings(json.loads(text)))
    except ValueError:
        strings = [m.group(1) for line in text.splitlines() if (m := _PAIR.match(line))]
    values = [v for v in strings if len(v.strip()) >= MIN_FILE_VALUE and not v.startswith(("http://", "https://"))]
    return [text, *values]


def _strings(value: Any) -> Iterable[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


class Redactor:
    """Replaces configured secret values and known token shapes with `[REDACTED:<kind>]`."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        values: set[str] = set()
        for secret in secrets:
            if not secret or len(secret.strip()) < MIN_SECRET_LENGTH:
                continue
            for variant in {secret, secret.strip()}:
                values.add(variant)
                values.update(base64_forms(variant))
                if "\n" in variant:  # a PEM key: catch its lines leaking one by one as well
                    values.update(line.strip() for line in variant.splitlines() if len(line.strip()) >= 16)
        self._values = sorted(values, key=len, reverse=True)
        self._marker = MARKER.format("secret")

    def plus(self, *secrets: str | None) -> "Redactor":
        """A redactor for these secrets as well (a job's token on top of the process's)."""
        extended = Redactor(secrets)
        extended._values = sorted({*self._values, *extended._values}, key=len, reverse=True)
        return extended

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by a marker."""
        for value in self._values:
            if value in text:
                text = text.replace(value, self._marker)
        for kind, anchors, pattern, group in _SHAPES:
            if any(a in text for a in anchors):
                text = pattern.sub(_replacer(kind, group), text)
        return text

    def redact_obj(self, obj: Any) -> Any:
        """A copy of JSON-like `obj` (dicts, lists, tuples, strings) with every string redacted."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {self.redact_obj(k): self.redact_obj(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.redact_obj(v) for v in obj]
        return obj

    def contains_secret(self, data: str | bytes) -> bool:
        """Whether a configured secret value (raw or base64) appears in `data`; shapes are not checked."""
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        return any(value in text for value in self._values)


def _replacer(kind: str, group: int) -> Callable[[re.Match[str]], str]:
    marker = MARKER.format(kind)
    if group == 0:
        return lambda m: marker

    def replace(m: re.Match[str]) -> str:
        whole, start, end = m.group(0), m.start(group) - m.start(), m.end(group) - m.start()
        return whole[:start] + marker + whole[end:]

    return replace
