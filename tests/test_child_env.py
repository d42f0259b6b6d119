"""No process ray-mcp starts inherits its tokens or header values through the environment.

py-spy runs as a real child (run_py_spy, the one way ray-mcp starts it) with a stand-in program that prints
its environment; the embedded head's environment is the one LocalHead hands `ray start` (a live test,
tests/test_embedded.py, reads it from every process of a real embedded cluster).
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from ray_mcp.child_env import TOKEN_FILE, ray_env, tool_env
from ray_mcp.local_head import LocalHead
from ray_mcp.sources.py_spy import run_py_spy

SECRETS = {
    "RAY_MCP_AUTH_TOKEN": "mcp-bearer-3f9c2a",
    "RAY_MCP_DASHBOARD_HEADERS": '{"Authorization": "Bearer hdr-7b1e44"}',
    "RAY_MCP_RAY_AUTH_TOKEN": "ray-setting-5d20aa",
    "RAY_AUTH_TOKEN": "ray-token-9e81c7",
}
PRINTS_ENV = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


def leaked(env: dict[str, str]) -> list[str]:
    text = json.dumps(env)
    return [name for name, value in SECRETS.items() if name in env or value in text]


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HF_HOME", "/data/hf")  # the user's own setting, not a credential of ray-mcp's


@pytest.mark.live  # a subprocess (no Ray head)
async def test_py_spy_runs_with_the_path_and_locale_only(secrets_in_env: None) -> None:
    env = json.loads(await run_py_spy(PRINTS_ENV, timeout_s=60))
    assert leaked(env) == [] and "PATH" in env
    assert "HF_HOME" not in env  # a tool that runs no user code needs none of the user's settings either


def test_a_tool_env_names_what_the_tool_needs(secrets_in_env: None) -> None:
    env = tool_env(["HF_HOME"])  # e.g. a Prometheus beside the embedded head: its own needs, by name
    assert env["HF_HOME"] == "/data/hf" and leaked(env) == []


def test_the_embedded_head_gets_the_users_environment_without_ray_mcps_and_rays_token_as_a_file(
    secrets_in_env: None,
) -> None:
    head = LocalHead(num_cpus=1)
    try:
        env = head.environment()
        assert leaked(env) == [] and env["HF_HOME"] == "/data/hf"  # jobs keep the user's own environment
        token_file = Path(env["RAY_AUTH_TOKEN_PATH"])
        assert (
            token_file == head.temp_dir / TOKEN_FILE and token_file.read_text() == SECRETS["RAY_AUTH_TOKEN"]
        )
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    finally:
        head.stop()


def test_a_token_a_head_is_given_explicitly_is_a_file_too(tmp_path: Path) -> None:
    env = ray_env(
        tmp_path, source={"PATH": "/bin"}, extra={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "t0k"}
    )
    assert "RAY_AUTH_TOKEN" not in env and env["RAY_AUTH_MODE"] == "token"
    assert Path(env["RAY_AUTH_TOKEN_PATH"]).read_text() == "t0k"
