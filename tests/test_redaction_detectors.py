"""The copied detect-secrets detectors find exactly what the library's plugins find, and redaction masks their
secrets without importing the library (whose import a server's first answer would wait ~0.3 s for)."""

from __future__ import annotations

import base64
import importlib
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_mcp.guard.redaction import redact_text
from ray_mcp.guard.redaction_detectors import PLUGINS, compiled, detected


def library_plugins() -> list[object]:
    found = []
    for spec, _patterns in PLUGINS:
        module, _, cls = spec.rpartition(".")
        found.append(getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)())
    return found


def library_detected(text: str) -> list[str]:
    return [s for plugin in library_plugins() for s in plugin.analyze_string(text)]  # type: ignore[attr-defined]


def jwt(header: dict[str, str], payload: dict[str, object], signature: bytes = b"sig-bytes") -> str:
    def part(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    return ".".join([part(json.dumps(header).encode()), part(json.dumps(payload).encode()), part(signature)])


SAMPLES = [
    "AKIAIOSFODNN7EXAMPLE in the config",
    "aws_secret_access_key = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYab'",
    "AccountKey=" + "a" * 86 + "==;EndpointSuffix=core.windows.net",
    "pip install git+https://alice:s3cr3tpass@git.example.com/repo.git",
    "token ghp_" + "A1b2" * 9 + " and gho_" + "z" * 36,
    "glpat-" + "x" * 20 + " GR1348941" + "y" * 25 + " glcbt-ab_" + "c" * 30 + " glagent-" + "d" * 60,
    "Authorization: Bearer " + jwt({"alg": "HS256", "typ": "JWT"}, {"sub": "42", "admin": True}),
    "eyJnot.a.jwt here, and eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0 is one without its signature",
    "//registry.npmjs.org/:_authToken=npm_" + "q" * 36,
    "//registry.npmjs.org/:_authToken=" + "0123abcd-" * 4,
    "OPENAI sk-proj-" + "a" * 20 + "T3BlbkFJ" + "b" * 20,
    "pypi-AgEIcHlwaS5vcmc" + "p" * 70,
    "SG." + "s" * 22 + "." + "t" * 43,
    "xoxb-1234-5678-abcdef and https://hooks.slack.com/services/T000/B111/XXXX",
    "sq0csp-" + "Q" * 43 + " rk_live_" + "9" * 24 + " sk_live_" + "k" * 24,
    "nothing secret here: step 12 loss=0.31 actor 8a7c6b5d4e3f",
]


def test_every_pattern_and_flag_is_the_installed_librarys() -> None:
    for plugin, (spec, _patterns) in zip(library_plugins(), PLUGINS, strict=True):
        theirs = [(p.pattern, p.flags) for p in plugin.denylist]  # type: ignore[attr-defined]
        ours = [(p.pattern, p.flags) for p in compiled()[PLUGINS.index((spec, _patterns))][1]]
        assert ours == theirs, spec


def test_the_copied_detectors_find_what_the_library_finds_in_real_secret_formats() -> None:
    for text in SAMPLES:
        assert list(detected(text)) == library_detected(text), text
    assert any(detected(SAMPLES[6])), "a well-formed JWT is found"
    assert list(detected(SAMPLES[7])) == ["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0"], "a malformed one is not"


_PIECES = st.sampled_from(
    ["AKIA", "ASIA", "aws", "key", "'", '"', "=", ":", "@", "://", "/", "-", "_", ".", "eyJ", "e30", "sk-",
     "T3BlbkFJ", "ghp_", "glpat-", "GR1348941", "glcbt-", "xoxb-", "1-", "SG.", "sq0csp-", "rk_live_", "npm_",
     "//r/:_authToken=", "pypi-AgEIcHlwaS5vcmc", "AccountKey=", "https://hooks.slack.com/services/T1/B2/",
     " ", "\n", "=="]
)  # fmt: skip
_RUNS = st.text(alphabet="ABCXYZabcxyz0123456789+/_-", min_size=0, max_size=48)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_PIECES, _RUNS), max_size=14))
def test_the_copied_detectors_find_what_the_library_finds_in_random_texts(parts: list[str]) -> None:
    text = "".join(parts)
    assert list(detected(text)) == library_detected(text)


@pytest.mark.live
def test_redacting_a_detector_shape_imports_neither_detect_secrets_nor_requests() -> None:
    secret = "ghp_" + "R4nd" * 9
    script = (
        "import sys\n"
        "from ray_mcp.guard.redaction import redact_text\n"
        f"out = redact_text('clone with token {secret} now')\n"
        f"assert {secret!r} not in out, out\n"
        "print(sorted(m for m in ('detect_secrets', 'requests') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert secret not in redact_text(f"clone with token {secret} now")
