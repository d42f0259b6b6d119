"""detect-secrets' detectors: the token formats its plugins know (AWS, GitHub, GitLab, Slack, Stripe, JWT, OpenAI,
PyPI, npm, SendGrid, Square, Azure storage, basic auth in URLs)."""

from __future__ import annotations

from collections.abc import Iterator

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector

# detect-secrets' detectors that redaction uses. Not the entropy and keyword plugins (Ray ids and prose trip
# them), nor Discord, Telegram, Twilio and Mailchimp (shapes with no literal anchor: they match within ids and
# hashes). Each yields what it finds in a string (analyze_string); a JWT only when its parts decode.
DETECTORS = (
    AWSKeyDetector(),
    AzureStorageKeyDetector(),
    BasicAuthDetector(),
    GitHubTokenDetector(),
    GitLabTokenDetector(),
    JwtTokenDetector(),
    NpmDetector(),
    OpenAIDetector(),
    PypiTokenDetector(),
    SendGridDetector(),
    SlackDetector(),
    SquareOAuthDetector(),
    StripeDetector(),
)


def detected(text: str) -> Iterator[str]:
    """Every secret value detect-secrets' detectors find in ``text``."""
    for detector in DETECTORS:
        yield from detector.analyze_string(text)
