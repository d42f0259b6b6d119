"""The secret detectors of detect-secrets 1.5 (Yelp, Apache License 2.0) that redaction uses, their patterns
copied here: importing the library's plugins costs ~0.3 s (each imports ``requests`` for a key verification
ray-mcp never calls), which a server's first answer whose text trips a shape would otherwise wait for.

``detected(text)`` yields exactly what the plugins' ``analyze_string`` yields (``findall``; a match with groups
gives its non-empty groups; a JWT only when its first two parts decode to JSON). tests/test_redaction_detectors
checks every pattern and flag against the installed library and the answers over random texts, so a change in
detect-secrets is seen, not silently missed.

Not the entropy and keyword plugins (Ray ids and prose trip them), nor Discord, Telegram, Twilio and Mailchimp
(shapes with no literal anchor: they match within ids and hashes).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator

# (plugin, its ``denylist`` as (pattern, extra flags)); Python adds re.UNICODE to every str pattern, as there.
_RESERVED = re.escape(":/?#[]@" + "!$&'()*+,;=")  # basic_auth.py: RFC 3986 reserved and sub-delimiters
PLUGINS: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = (
    ("aws.AWSKeyDetector", (
        (r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}", 0),
        (r"aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\'\"]([0-9a-zA-Z/+]{40})[\'\"]", re.I),
    )),
    ("azure_storage_key.AzureStorageKeyDetector", ((r"AccountKey=[a-zA-Z0-9+\/=]{88}", 0),)),
    ("basic_auth.BasicAuthDetector", ((rf"://[^{_RESERVED}\s]+:([^{_RESERVED}\s]+)@", 0),)),
    ("github_token.GitHubTokenDetector", ((r"(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}", 0),)),
    ("gitlab_token.GitLabTokenDetector", (
        (r"(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\-]{20,50}(?!\w)", 0),
        (r"GR1348941[A-Za-z0-9_\-]{20,50}(?!\w)", 0),
        (r"glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\-]{20,50}(?!\w)", 0),
        (r"glimt-[A-Za-z0-9_\-]{25}(?!\w)", 0),
        (r"glptt-[A-Za-z0-9_\-]{40}(?!\w)", 0),
        (r"glagent-[A-Za-z0-9_\-]{50,1024}(?!\w)", 0),
        (r"gloas-[A-Za-z0-9_\-]{64}(?!\w)", 0),
    )),
    ("jwt.JwtTokenDetector", ((r"eyJ[A-Za-z0-9-_=]+\.[A-Za-z0-9-_=]+\.?[A-Za-z0-9-_.+/=]*?", 0),)),
    ("npm.NpmDetector", ((r"\/\/.+\/:_authToken=\s*((npm_.+)|([A-Fa-f0-9-]{36})).*", 0),)),
    ("openai.OpenAIDetector", ((r"sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}", 0),)),
    ("pypi_token.PypiTokenDetector", (
        (r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}", 0),
        (r"pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}", 0),
    )),
    ("sendgrid.SendGridDetector", ((r"SG\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9_-]{43}", 0),)),
    ("slack.SlackDetector", (
        (r"xox(?:a|b|p|o|s|r)-(?:\d+-)+[a-z0-9]+", re.I),
        (r"https://hooks\.slack\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+", re.I | re.X),
    )),
    ("square_oauth.SquareOAuthDetector", ((r"sq0csp-[0-9A-Za-z\\\-_]{43}", 0),)),
    ("stripe.StripeDetector", ((r"(?:r|s)k_live_[0-9a-zA-Z]{24}", 0),)),
)  # fmt: skip
_JWT = "jwt.JwtTokenDetector"

_compiled: list[tuple[bool, list[re.Pattern[str]]]] | None = None
_lock = threading.Lock()


def compiled() -> list[tuple[bool, list[re.Pattern[str]]]]:
    """Each plugin's patterns compiled (once, a few ms), with whether its matches must be well-formed JWTs."""
    global _compiled
    if _compiled is None:
        with _lock:
            if _compiled is None:
                _compiled = [
                    (name == _JWT, [re.compile(pattern, flags) for pattern, flags in patterns])
                    for name, patterns in PLUGINS
                ]
    return _compiled


def detected(text: str) -> Iterator[str]:
    """Every secret value the plugins find in ``text`` (what each plugin's ``analyze_string`` yields)."""
    for jwt_only, patterns in compiled():
        for pattern in patterns:
            for match in pattern.findall(text):
                for value in filter(None, match) if isinstance(match, tuple) else (match,):
                    if not jwt_only or formally_valid_jwt(value):
                        yield value


def formally_valid_jwt(token: str) -> bool:
    """detect-secrets' JwtTokenDetector.is_formally_valid: every part base64url, the first two JSON."""
    for index, part_text in enumerate(token.split(".")):
        try:
            part = part_text.encode("ascii")
            missing = len(part) % 4
            if missing == 1:
                raise TypeError("Incorrect padding")
            part += {0: b"", 2: b"==", 3: b"==="}[missing]  # as the plugin pads (3: three, not one)
            decoded = base64.urlsafe_b64decode(part)
            if index < 2:
                json.loads(decoded.decode("utf-8"))
        except (TypeError, ValueError, UnicodeDecodeError):
            return False
    return True
