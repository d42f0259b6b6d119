"""The container paths: Dockerfile and docker-compose.yml agree with the Ray version pyproject.toml pins.

No Docker engine runs here: the compose file is validated with `docker-compose config` (Debian's package,
installed by .ci/run), and the same topology runs for real without Docker in tests/test_multi_node.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from tests.npm_tools import REPO
from tests.rules import lacking

COMPOSE = REPO / "docker-compose.yml"


def pinned_ray_version() -> str:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [m.group(1) for d in deps if (m := re.fullmatch(r"ray\[[\w,]+\]==([\w.]+)", d))]
    return pin


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_every_image_tag_and_build_arg_matches_the_pinned_ray_version() -> None:
    version = pinned_ray_version()
    services = compose()["services"]
    for name in ("ray-head", "ray-worker"):
        image = services[name]["image"]
        assert re.fullmatch(rf"rayproject/ray:{re.escape(version)}(-[\w.-]+)?", image), (name, image)
    assert services["ray-mcp"]["build"]["args"]["RAY_VERSION"] == version
    assert services["ray-mcp"]["image"] == f"ray-mcp:{version}"
    images = re.findall(r"^\s*image:\s*(\S+)", COMPOSE.read_text(), re.MULTILINE)
    assert images and all(i.split(":")[1].startswith(version) for i in images), images
    assert re.search(
        rf"^ARG RAY_VERSION={re.escape(version)}$", (REPO / "Dockerfile").read_text(), re.MULTILINE
    )


def test_compose_runs_a_head_a_worker_and_ray_mcp_over_http_with_a_token_and_healthchecks() -> None:
    services = compose()["services"]
    head, worker, mcp = services["ray-head"], services["ray-worker"], services["ray-mcp"]
    assert "--head" in head["command"] and "--dashboard-host=0.0.0.0" in head["command"]
    assert "--address=ray-head:6379" in worker["command"] and """'{"worker": 1}'""" in worker["command"]
    assert mcp["command"] == ["--address", "http://ray-head:8265"]
    assert mcp["environment"]["RAY_MCP_TRANSPORT"] == "streamable-http"
    assert mcp["environment"]["RAY_MCP_AUTH_TOKEN"].startswith("${RAY_MCP_AUTH_TOKEN:?")
    assert "/healthz" in " ".join(mcp["healthcheck"]["test"])
    assert all(p.startswith("127.0.0.1:") for s in services.values() for p in s.get("ports", []))
    env_example = (REPO / ".env.example").read_text()
    assert re.search(r"^RAY_MCP_AUTH_TOKEN=\S+$", env_example, re.MULTILINE)


def test_the_claude_code_one_liner_of_the_compose_file_is_the_one_in_the_docs() -> None:
    (line,) = [ln.lstrip("# ") for ln in COMPOSE.read_text().splitlines() if "claude mcp add" in ln]
    assert line in (REPO / "docs" / "clients.md").read_text()


@pytest.mark.live
def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    exe = shutil.which("docker-compose")
    if exe is None:
        lacking("docker-compose", "apt-get install -y docker-compose (.ci/run installs it)")
    out = subprocess.run(
        [exe, "--env-file", str(REPO / ".env.example"), "-f", str(COMPOSE), "config"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    resolved = yaml.safe_load(out.stdout)
    assert set(resolved["services"]) == {"ray-head", "ray-worker", "ray-mcp"}
    assert resolved["services"]["ray-mcp"]["environment"]["RAY_MCP_AUTH_TOKEN"].startswith("change-me")
    # Without the token, compose refuses to start ray-mcp at all.
    (tmp_path / "empty.env").write_text("")
    missing = subprocess.run(
        [exe, "--env-file", str(tmp_path / "empty.env"), "-f", str(COMPOSE), "config"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert missing.returncode != 0 and "RAY_MCP_AUTH_TOKEN" in missing.stderr


def test_compose_turns_on_the_dashboards_profiling_routes_and_lets_py_spy_attach() -> None:
    services = compose()["services"]
    for name in ("ray-head", "ray-worker"):
        assert services[name]["environment"]["RAY_DASHBOARD_ENABLE_PROFILING"] == "1", name
        assert "SYS_PTRACE" in services[name]["cap_add"], name
