"""The redactor alone: known values, secret shapes, ordinary text left alone, control characters, bounds."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_mcp.guard.redaction import (
    CONFIGURED,
    SECRETS,
    SecretRegistry,
    bound_structured,
    clean_text,
    detected,
    escape_controls,
    install_log_redaction,
    known,
    redact_text,
    redact_tree,
)
from ray_mcp.guard.redaction.known import SHORT_SECRET_CHARS, KnownValues
from ray_mcp.guard.redaction.shapes import mask_spans
from ray_mcp.limits import SECRET_KEY_CHARS, SECRETS_RECENT_KEY_CHARS


@pytest.fixture(autouse=True)
def forget_test_owners() -> Iterable[None]:
    """The registry is the process's: values a test here holds ("31337", "q7z") would mask a later test's
    output (a live test's marker line read back as "actor-marker-***"), so they are dropped after each test."""
    yield
    SECRETS.drop_owners_except("test:", (), listed_since=time.monotonic() + 1)


def unique(prefix: str = "v") -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize(
    "line",
    [
        "--password hunter2x",
        "--password=hunter2x",
        "--db-password 'hunter2x'",
        "--token hunter2x",
        "--api-key hunter2x",
        "--api_key=hunter2x",
        "Password: hunter2x",
        "password: hunter2x",
        "DB_PASSWORD=hunter2x",
        'export HF_TOKEN="hunter2x"',
        '{"password": "hunter2x"}',
        "{'api_key': 'hunter2x'}",
        "aws_secret_access_key = hunter2x",
        "X-Api-Key: hunter2x",
        "Authorization: Bearer hunter2x.abc",
        "authorization: Basic aHVudGVyMng6eA==hunter2x",
        "Proxy-Authorization: hunter2x",
        "curl -H 'Authorization: token hunter2x'",
        "connecting to postgresql://admin:hunter2x@db.internal:5432/app",
        "redis://:hunter2x@cache:6379/0",
        "Cookie: session=hunter2x; theme=dark",
    ],
)
def test_secret_shapes_are_masked(line: str) -> None:
    masked = clean_text(line)
    assert "hunter2x" not in masked, masked
    assert "***" in masked


@pytest.mark.parametrize(
    "secret",
    [
        "AKIAIOSFODNN7EXAMPLE",  # AWS access key id
        "ASIAY34FZKBOKMUTVV7A",  # AWS session key id
        "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",  # GCP API key
        "ya29.a0AfH6SMBx3kTq_Zr9c8VnE4kqWdCpLmN0oPqRsTuV",  # GCP OAuth token
        "hf_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z",  # Hugging Face
        "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",  # GitHub classic
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
        "glpat-" + "xY9zA8bC7dE6fG5hI4jK",  # GitLab
        "sk-proj-" + "Ab3De5Gh7Jk9Mn1Pq3St5Vw7Yz9Bc1Df3",  # OpenAI (project key)
        "sk-ant-api03-" + "Zx8Cv7Bn6Mm5Ll4Kk3Jj2Hh1Gg0Ff9Dd8",  # Anthropic
        "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",  # Slack
        "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",  # Stripe
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + "A" * 86 + "==",  # Azure storage
        "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=AbCdEf0123456789AbCdEf0123456789%3D",  # Azure SAS
    ],
)
def test_cloud_keys_and_vendor_tokens_are_masked(secret: str) -> None:
    body = secret.split("AccountKey=")[-1].split("sig=")[-1]
    masked = clean_text(f"starting with {secret} now")
    assert body not in masked, masked
    assert masked.startswith("starting with") and masked.endswith(" now")


def test_a_private_key_block_is_masked_whole() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7\nq2ZkYv\n-----END RSA PRIVATE KEY-----"
    escaped_json = (
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\n-----END PRIVATE KEY-----\\n"}'
    )
    assert "MIIE" not in clean_text(f"key:\n{pem}\ndone") and "done" in clean_text(f"key:\n{pem}\ndone")
    assert "MIIE" not in clean_text(escaped_json)
    assert "MIIE" not in clean_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk (cut")


@pytest.mark.parametrize(
    "text",
    [
        "use one of ALIVE, DEAD",
        "unknown key runtime_env.api_key: use one of conda, env_vars, pip",
        "Invalid state 'dead': use one of PENDING, RUNNING",
        "RAY_TOKEN: use one of the documented forms",
        "Authorization: use one of the two schemes",
        "the secret: keep it safe",
        "num_tokens=5 tokenizer=bert max_new_tokens: 100 --max-new-tokens 2048 tokens/s=18123",
        "pad_token: <pad> eos_token: </s> eos_token_id=2 pad_token_id=0",
        "Press any key to continue; the monkey=banana; keys: 3",
        "Bearer authentication and Basic authentication are supported",
        "password = os.environ['DB_PASSWORD']",
        "token = get_token(user)",
        "export HF_TOKEN=$HF_TOKEN; --token <token>; password: ***; api_key: ${API_KEY}",
        "(RolloutWorker pid=41234) INFO rollout.py:212 -- collected 512 episodes in 3.2 s",
        "Epoch 3 step 100: loss=0.2311 lr=3e-4 grad_norm=1.12 gpu_mem=71.3GiB",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
        "Job 'raysubmit_8hTqK3vW4bX2yZ1a' succeeded; node 5ad1f6b0c2e3d4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5",
        "actor 4f9e2b1c8d7a6e5f4b3c2d1e0f9a8b7c ALIVE on 10.0.0.12; http://127.0.0.1:8265/#/jobs",
        "Resources: {'CPU': 4.0, 'GPU': 1.0, 'memory': 8589934592}; PlacementGroup PACK",
        "ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing.",
        'headers={"Authorization": f"Bearer {token}"}',
        "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    raise ValueError('bad lr')",
    ],
)
def test_ordinary_english_and_ray_output_stay_unchanged(text: str) -> None:
    assert clean_text(text) == text


def test_known_values_are_masked_anywhere_and_short_ones_as_whole_words() -> None:
    long_value, short_value = unique("pw"), "q7z"
    SECRETS.hold("test:short-and-long", [long_value, short_value])
    text = f"a{long_value}b and {short_value} but q7zq, xq7z and ({short_value})."
    assert clean_text(text) == "a***b and *** but q7zq, xq7z and (***)."


def test_a_value_that_reads_as_a_number_is_masked_only_as_a_whole_number() -> None:
    """Every env_vars value is held as a secret; one like "0.05" must not eat the digits of other numbers."""
    SECRETS.hold("test:numbers", ["0.0517", "31337"])
    text = "sleep 0.0517 s; means 10.05178 s and 0.05179 s; port 31337, pid 313370, id a31337"
    assert clean_text(text) == "sleep *** s; means 10.05178 s and 0.05179 s; port ***, pid 313370, id a31337"


def test_configuration_values_are_not_treated_as_secrets() -> None:
    registry = SecretRegistry()
    registry.hold("job:a", ["true", "0", "12", "INFO", "", "  "])
    assert len(registry) == 0
    registry.hold("job:a", ["123", "abc"])
    assert len(registry) == 2


def test_the_registry_is_bounded_in_bytes_refuses_new_owners_and_never_drops_held_values() -> None:
    registry = SecretRegistry(max_bytes=256 * 1024)
    assert registry.hold(CONFIGURED, ["pinned-credential"])
    kept = [f"job-value-{i:05d}" for i in range(100)]
    assert registry.hold("job:x:one", kept)
    huge = [f"flood-{i:06d}" for i in range(10_000)]
    assert not registry.hold("job:x:flood", huge)  # does not fit: refused, nothing else dropped
    assert registry.refused == ["job:x:flood"]
    assert registry.used_bytes <= registry.max_bytes
    assert all(v in registry for v in [*kept, "pinned-credential"]) and "flood-000001" not in registry
    spans = [s for m in registry.view.matchers for s in m.spans(" ".join(kept))]
    assert len(spans) == len(kept)


def test_a_deleted_jobs_values_are_dropped_and_a_listed_or_newer_jobs_kept() -> None:
    registry = SecretRegistry()
    registry.hold("job:c:gone", ["gone-secret-1"])
    registry.hold("job:c:alive", ["alive-secret-1"])
    listed_since = time.monotonic()
    registry.hold("job:c:new", ["new-secret-1"])  # learned after the list read began: kept
    registry.drop_owners_except("job:c:", {"job:c:alive"}, listed_since)
    assert "gone-secret-1" not in registry and "alive-secret-1" in registry and "new-secret-1" in registry
    registry.wait_built()
    assert clean_text("x") == "x"
    assert [m.spans("gone-secret-1") for m in registry.view.matchers] == [[]] * len(registry.view.matchers)


def test_a_long_value_is_found_by_its_start_and_masked_as_far_as_the_text_repeats_it() -> None:
    value = unique("long") + "x" * 5000
    SECRETS.hold("test:long", [value])
    assert clean_text(f"a {value} b") == "a *** b"
    assert clean_text(f"cut: {value[:3000]}") == "cut: ***"


def test_adding_values_never_rebuilds_everything_on_the_callers_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What an add builds on the caller's thread stays one segment, even while a full build lags far behind
    (as on a loaded machine): the background build is slowed on purpose here."""
    caller = threading.get_ident()
    built_by_caller: list[int] = []  # key characters of each automaton the caller built
    real_init = known.KnownValues.__init__

    def spy(self: known.KnownValues, values: Iterable[str]) -> None:
        values = list(values)
        if threading.get_ident() == caller:
            built_by_caller.append(sum(len(known.key_of(v)) for v in values))
        else:
            time.sleep(0.05)  # a full build that takes long
        real_init(self, values)

    monkeypatch.setattr(known.KnownValues, "__init__", spy)
    registry = SecretRegistry()
    for i in range(200):  # 2,000 values: far past SECRETS_RECENT_KEY_CHARS, many full builds behind
        registry.hold(f"job:t:{i}", [f"bulk-{i}-{j:04d}-" + "z" * 40 for j in range(10)])
        assert registry.view.matchers[-1].spans(f" bulk-{i}-0009-" + "z" * 40)  # masked at once
    assert max(built_by_caller) <= SECRETS_RECENT_KEY_CHARS + 10 * SECRET_KEY_CHARS  # one segment and a batch
    registry.wait_built()
    assert len(registry.view.matchers) <= 2
    assert sum(len(m.spans("bulk-0-0000-" + "z" * 40)) for m in registry.view.matchers) == 1
    everything = " ".join(f"bulk-{i}-{j:04d}-" + "z" * 40 for i in range(200) for j in range(10))
    assert len([s for m in registry.view.matchers for s in m.spans(everything)]) == 2000


def test_the_registry_is_safe_under_concurrent_writers_and_readers() -> None:
    registry = SecretRegistry()
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(100):
                value = f"concurrent-{t}-{i:03d}"
                registry.hold(f"job:c:{t}-{i}", [value])
                found = [s for m in registry.view.matchers for s in m.spans(f"x {value} y")]
                assert found == [(2, 2 + len(value))], (value, found)  # masked from the moment it is held
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    values = [f"concurrent-{t}-{i:03d}" for t in range(8) for i in range(100)]
    assert len(registry) == 800 and all(v in registry for v in values)
    registry.wait_built()
    spans = [s for m in registry.view.matchers for s in m.spans(" ".join(values))]
    assert len(spans) == 800


def test_a_structure_masks_its_own_env_vars_everywhere_in_it_but_teaches_the_registry_nothing() -> None:
    value = unique("hf")
    result = {
        "content": [{"type": "text", "text": f"printed {value}"}],
        "structuredContent": {
            "entrypoint": f"python x.py --x {value}",
            "runtime_env": {"env_vars": {"A": value}},
        },
    }
    out = redact_tree(result)
    assert value not in json.dumps(out)
    assert out["structuredContent"]["runtime_env"]["env_vars"] == {"A": "***"}
    assert value not in SECRETS and clean_text(f"later {value}") == f"later {value}"


def test_overlapping_detector_finds_are_masked_whole() -> None:
    assert mask_spans("abcdefghij", [(0, 6), (4, 9)]) == "***j"
    assert mask_spans("abcdefghij", [(0, 3), (3, 5), (7, 8)]) == "***fg***ij"


def test_control_characters_become_visible_and_newlines_and_tabs_stay() -> None:
    raw = "a\x1b[31mred\x1b[0m\x07b\x08c\rd\r\ne\tf\n\u202eevil\u2066x\u2069\u200bzw\ufeff\x85\x9b"
    assert escape_controls(raw) == (
        "a\\x1b[31mred\\x1b[0m\\x07b\\x08c\\x0dd\ne\tf\n\\u202eevil\\u2066x\\u2069\\u200bzw\\ufeff\\x85\\x9b"
    )
    assert clean_text("plain\ttext\nline") == "plain\ttext\nline"
    out = redact_tree({"k\x1b": ["v\u202e"], "n": 3})
    assert out == {"k\\x1b": ["v\\u202e"], "n": 3}


def test_structured_content_is_bounded_with_markers_where_it_was_cut() -> None:
    structured = {
        "entrypoint": "python x.py " + "a" * 200_000,
        "metadata": {f"k{i}": f"value {i}" for i in range(3000)},
        "hints": [],
        "ids": list(range(10)),
    }
    out, note = bound_structured(structured, text_bytes=2000)
    size = len(json.dumps(out).encode())
    assert size <= 16_384
    assert note is not None and out["hints"][-1] == note
    assert out["entrypoint"].startswith("python x.py aaa") and "[cut: " in out["entrypoint"]
    assert "[cut: " in out["metadata"]["…"]
    assert out["ids"] == list(range(10))
    small = {"a": "b", "hints": []}
    assert bound_structured(small, text_bytes=10) == (small, None)
    # a long list of small rows is bounded by the tool's limit (and counted in `shown`), not cut here
    rows = {
        "shown": 300,
        "actors": [{"actor_id": "ab" * 16, "state": "ALIVE", "name": f"w{i}"} for i in range(300)],
    }
    assert bound_structured(rows, text_bytes=5000) == (rows, None)
    huge = {"lines": ["x" * 100] * 20_000, "hints": []}
    cut, note = bound_structured(huge, text_bytes=5000)
    assert note is not None and len(cut["lines"]) < 20_000 and cut["lines"][-1].startswith("… [cut: ")


def test_log_records_and_their_tracebacks_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    install_log_redaction()
    value = unique("tok")
    SECRETS.hold(CONFIGURED, [value])
    log = logging.getLogger("mcp.server.mcpserver.server")
    with caplog.at_level(logging.INFO):
        log.info("Tool %r failed: %r", "cluster_status", f"echoed Authorization: Bearer {value}")
        try:
            raise RuntimeError(f"upstream said {value}")
        except RuntimeError:
            logging.getLogger("ray_mcp.x").exception("boom %s", value)
    text = caplog.text
    assert value not in text and "***" in text and "RuntimeError: upstream said ***" in text


def test_redact_text_masks_without_escaping() -> None:
    assert redact_text("a\x1b b DB_PASSWORD=abc123") == "a\x1b b DB_PASSWORD=***"


def test_documentation_placeholders_stay() -> None:
    for text in (
        "send Authorization: Bearer <token>",
        "Authorization: Bearer $RAY_MCP_TOKEN",
        "Authorization: Bearer ${RAY_MCP_TOKEN}",
        "Authorization: Basic ...",
        "RAY_AUTH_TOKEN=<your token>",
    ):
        assert clean_text(text) == text


def test_access_log_records_keep_their_arguments_for_uvicorns_formatter() -> None:
    from uvicorn.logging import AccessFormatter

    install_log_redaction()
    value = unique("tok")
    SECRETS.hold(CONFIGURED, [value])
    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False)
    log = logging.getLogger("uvicorn.access")
    fmt = '%s - "%s %s HTTP/%s" %d'
    for path, shown in (("/healthz", "/healthz"), (f"/mcp?token={value}", "/mcp?token=***")):
        record = log.makeRecord(
            log.name, logging.INFO, __file__, 1, fmt, ("127.0.0.1:5", "GET", path, "1.1", 200), None
        )
        assert isinstance(record.args, tuple) and len(record.args) == 5
        line = formatter.format(record)
        assert f'"GET {shown} HTTP/1.1" 200' in line and value not in line


# -- detect-secrets' detectors -------------------------------------------------------------------------------


def jwt(header: dict[str, str], payload: dict[str, object], signature: bytes = b"sig-bytes") -> str:
    def part(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    return ".".join([part(json.dumps(header).encode()), part(json.dumps(payload).encode()), part(signature)])


DETECTOR_SAMPLES = [
    "AKIAIOSFODNN7EXAMPLE in the config",
    "aws_secret_access_key = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'",
    "AccountKey=" + "a" * 86 + "==;EndpointSuffix=core.windows.net",
    "pip install git+https://alice:s3cr3tpass@git.example.com/repo.git",
    "token ghp_" + "A1b2" * 9 + " and gho_" + "z" * 36,
    "glpat-" + "x" * 20 + " GR1348941" + "y" * 25 + " glcbt-ab_" + "c" * 30 + " glagent-" + "d" * 60,
    "Authorization: Bearer " + jwt({"alg": "HS256", "typ": "JWT"}, {"sub": "42", "admin": True}),
    "//registry.npmjs.org/:_authToken=npm_" + "q" * 36,
    "//registry.npmjs.org/:_authToken=" + "0123abcd-" * 4,
    "OPENAI sk-proj-" + "a" * 20 + "T3BlbkFJ" + "b" * 20,
    "pypi-AgEIcHlwaS5vcmc" + "p" * 70,
    "SG." + "s" * 22 + "." + "t" * 43,
    "xoxb-1234-5678-abcdef and https://hooks.slack.com/services/T000/B111/XXXX",
    "sq0csp-" + "Q" * 43 + " rk_live_" + "9" * 24 + " sk_live_" + "k" * 24,
]


def assert_masked(text: str) -> None:
    masked = redact_text(text)
    for secret in detected(text):
        if len(secret) >= SHORT_SECRET_CHARS:
            assert secret not in masked, (text, secret, masked)


def test_what_detect_secrets_finds_in_real_secret_formats_is_masked() -> None:
    for text in DETECTOR_SAMPLES:
        assert any(detected(text)), text
        assert_masked(text)
    plain = "nothing secret here: step 12 loss=0.31 actor 8a7c6b5d4e3f"
    assert not any(detected(plain)) and redact_text(plain) == plain


def test_a_jwt_is_masked_only_when_its_parts_decode() -> None:
    text = "eyJnot.a.jwt here, and eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0 is one without its signature"
    assert list(detected(text)) == ["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0"]
    assert redact_text(text) == "eyJnot.a.jwt here, and *** is one without its signature"


_PIECES = st.sampled_from(
    [
        "AKIA",
        "ASIA",
        "aws",
        "key",
        "'",
        '"',
        "=",
        ":",
        "@",
        "://",
        "/",
        "-",
        "_",
        ".",
        "eyJ",
        "e30",
        "sk-",
        "T3BlbkFJ",
        "ghp_",
        "glpat-",
        "GR1348941",
        "glcbt-",
        "xoxb-",
        "1-",
        "SG.",
        "sq0csp-",
        "rk_live_",
        "npm_",
        "//r/:_authToken=",
        "pypi-AgEIcHlwaS5vcmc",
        "AccountKey=",
        "https://hooks.slack.com/services/T1/B2/",
        " ",
        "\n",
        "==",
    ]
)
_RUNS = st.text(alphabet="ABCXYZabcxyz0123456789+/_-", min_size=0, max_size=48)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_PIECES, _RUNS), max_size=14))
def test_a_random_text_in_which_detect_secrets_finds_a_secret_is_masked(parts: list[str]) -> None:
    text = "".join(parts)  # the anchors that let a text skip the detectors must miss none of their finds
    if any(len(secret) >= SHORT_SECRET_CHARS for secret in detected(text)):
        assert redact_text(text) != text


def test_a_text_that_only_shares_a_values_first_characters_is_not_masked() -> None:
    value = "/tmp/pytest-of-root/pytest-131/test_serve0/app"
    found = KnownValues([value])
    other = "checkpoint at /tmp/pytest-of-root/pytest-131/train0/results"
    assert found.spans(other) == []
    assert found.spans(f"env {value} set") != [] and found.spans(f"env {value[:30]}…") != []


def test_a_label_selector_constraint_names_its_label_and_hides_nothing() -> None:
    """Ray's fallback_strategy in the State API: ``label_key`` is the label a constraint tests, not a secret (as
    one, every "zone" in every answer would be masked); a real *_key field still is."""
    from ray_mcp.guard.redaction.names import is_secret_key, secret_values

    strategy = {
        "options": [{"label_selector": {"label_constraints": [{"label_key": "zone", "label_values": ["b"]}]}}]
    }
    assert secret_values({"fallback_strategy": strategy}) == set()
    assert is_secret_key("api_key") and is_secret_key("ssh_key") and not is_secret_key("label_key")
