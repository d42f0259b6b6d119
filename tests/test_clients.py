"""Real MCP clients against the real ray-mcp: Claude Code, the MCP Inspector CLI, and the conformance suite.

The clients come from npm (see tests/npm_tools.py: installed once into .cache/npm, skipped with the reason when
npm is unreachable, except under CI). Each test drives the ``ray-mcp`` executable of this venv, over stdio or
streamable HTTP, against the session's Ray head.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import clean_env
from tests.npm_tools import REPO, NpmTools, install
from tests.test_transports import RAY_MCP, http_server

pytestmark = pytest.mark.live

CLIENT_TIMEOUT_S = 180
TOKEN = "client-test-token"
CONNECTED = "✔ Connected"  # `claude mcp list`, Claude Code 2.1: "<name>: <command or url> - ✔ Connected"

# Conformance scenarios that test a server in general. The others call the suite's own fixture server's tools,
# resources and prompts by name (test_simple_text, test://static-text, test_simple_prompt, ...), or
# capabilities ray-mcp doesn't declare: docs/conformance.md lists each with the reason.
APPLICABLE_SCENARIOS = (
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "completion-complete",
)


@pytest.fixture(scope="session")
def npm() -> NpmTools:
    return install()


@pytest.fixture(scope="module")
def http_url(ray_cluster, tmp_path_factory) -> Iterator[str]:
    """ray-mcp over streamable HTTP on loopback, without a token (the Inspector 0.15 CLI and the conformance
    suite send no headers)."""
    log = tmp_path_factory.mktemp("ray-mcp-http") / "server.log"
    args = ["--transport", "streamable-http", "--address", ray_cluster.dashboard_url]
    # The conformance suite opens a session per scenario from one address, as many clients would: one
    # client's share of sessions (16) would refuse its later scenarios.
    with http_server(args, log, RAY_MCP_MAX_SESSIONS_PER_CLIENT="64") as port:
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def tokened_http_url(ray_cluster, tmp_path_factory) -> Iterator[str]:
    """ray-mcp over streamable HTTP that requires ``Authorization: Bearer TOKEN``."""
    where = tmp_path_factory.mktemp("ray-mcp-http-token")
    (where / "token").write_text(TOKEN)
    args = ["--transport", "streamable-http", "--address", ray_cluster.dashboard_url]
    with http_server([*args, "--auth-token-file", str(where / "token")], where / "server.log") as port:
        yield f"http://127.0.0.1:{port}/mcp"


def run(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, env=env, cwd=cwd)
    assert out.returncode == 0, f"{cmd} exited {out.returncode}\nstdout: {out.stdout}\nstderr: {out.stderr}"
    return out


# -- Claude Code --------------------------------------------------------------------------------------------


def claude_home(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh HOME (Claude Code keeps its config there) and a project dir inside it."""
    home, project = tmp_path / "home", tmp_path / "home" / "project"
    project.mkdir(parents=True)
    return home, project


def server_line(listing: str, name: str) -> str:
    lines = [line for line in listing.splitlines() if line.startswith(f"{name}: ")]
    assert lines, f"no {name!r} in `claude mcp list`:\n{listing}"
    return lines[0]


def test_claude_code_connects_to_ray_mcp_added_with_claude_mcp_add(npm, ray_cluster, tmp_path: Path) -> None:
    home, project = claude_home(tmp_path)
    env = npm.env(clean_env(), HOME=str(home))
    claude = npm.bin("claude")
    added = run(
        [claude, "mcp", "add", "ray", "--", RAY_MCP, "--address", ray_cluster.dashboard_url], env, project
    )
    assert "Added stdio MCP server ray" in added.stdout
    listing = run([claude, "mcp", "list"], env, project).stdout
    assert CONNECTED in server_line(listing, "ray"), listing


def test_claude_code_connects_over_streamable_http_with_the_bearer_token(
    npm, tokened_http_url, tmp_path: Path
) -> None:
    home, project = claude_home(tmp_path)
    env = npm.env(clean_env(), HOME=str(home))
    claude = npm.bin("claude")
    # The docker-compose one-liner of docs/clients.md, with a right and a wrong token.
    for name, token in (("ray", TOKEN), ("wrong", "not-the-token")):
        header = f"Authorization: Bearer {token}"
        run(
            [claude, "mcp", "add", "--transport", "http", name, tokened_http_url, "--header", header],
            env,
            project,
        )
    listing = run([claude, "mcp", "list"], env, project).stdout
    assert CONNECTED in server_line(listing, "ray") and "(HTTP)" in server_line(listing, "ray"), listing
    assert CONNECTED not in server_line(listing, "wrong"), listing


def test_claude_code_connects_to_the_project_mcp_json_of_the_docs(npm, ray_cluster, tmp_path: Path) -> None:
    from tests.test_docs import json_snippets

    home, project = claude_home(tmp_path)
    (home / ".claude").mkdir()
    # Project servers wait for the user's approval in the UI; this user setting gives it up front.
    (home / ".claude" / "settings.json").write_text('{"enableAllProjectMcpServers": true}')
    snippet = json_snippets(REPO / "docs" / "clients.md", ".mcp.json", "stdio")[0]
    config = json.loads(snippet.replace("http://127.0.0.1:8265", ray_cluster.dashboard_url))
    (project / ".mcp.json").write_text(json.dumps(config))
    env = npm.env(clean_env(), HOME=str(home))
    env["PATH"] = f"{Path(RAY_MCP).parent}:{env['PATH']}"  # `"command": "ray-mcp"` is looked up on PATH
    listing = run([npm.bin("claude"), "mcp", "list"], env, project).stdout
    assert CONNECTED in server_line(listing, "ray"), listing


# -- MCP Inspector CLI --------------------------------------------------------------------------------------


@pytest.fixture(params=["stdio", "http"])
def inspector_target(request, ray_cluster) -> list[str]:
    if request.param == "stdio":
        return [RAY_MCP, "--address", ray_cluster.dashboard_url]
    return [request.getfixturevalue("http_url"), "--transport", "http"]


def inspector(npm: NpmTools, target: list[str], method: str, *args: str) -> Any:
    out = run([npm.bin("mcp-inspector"), "--cli", *target, "--method", method, *args], npm.env(clean_env()))
    return json.loads(out.stdout)


def test_inspector_lists_tools_and_calls_cluster_status(npm, inspector_target, ray_cluster) -> None:
    tools = {t["name"]: t for t in inspector(npm, inspector_target, "tools/list")["tools"]}
    assert tools["cluster_status"]["annotations"]["readOnlyHint"] is True
    result = inspector(
        npm, inspector_target, "tools/call", "--tool-name", "cluster_status", "--tool-arg", "max_nodes=5"
    )
    assert result.get("isError") is not True, result
    assert result["structuredContent"]["dashboard_url"] == ray_cluster.dashboard_url
    assert result["structuredContent"]["nodes_alive"] >= 1
    assert "node(s) alive" in result["content"][0]["text"]


def test_inspector_calls_list_actors(npm, inspector_target) -> None:
    result = inspector(npm, inspector_target, "tools/call", "--tool-name", "list_actors")
    assert result.get("isError") is not True, result
    assert "total" in result["structuredContent"], result


def test_inspector_lists_resources_and_reads_the_reference_index(npm, inspector_target) -> None:
    uris = [r["uri"] for r in inspector(npm, inspector_target, "resources/list")["resources"]]
    assert "ray-docs://reference/index" in uris
    read = inspector(npm, inspector_target, "resources/read", "--uri", "ray-docs://reference/index")
    (contents,) = read["contents"]
    assert contents["mimeType"] == "text/markdown" and contents["text"].startswith("# Ray reference pages")


def test_inspector_gets_the_ray_expert_prompt(npm, inspector_target) -> None:
    got = inspector(npm, inspector_target, "prompts/get", "--prompt-name", "ray-expert")
    assert got["messages"][0]["role"] == "user"
    assert "cluster_status" in got["messages"][0]["content"]["text"]


# -- the conformance suite ----------------------------------------------------------------------------------


def scenario_results(out_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """checks.json of each scenario from ``conformance server -o``: dirs named server-<scenario>-<timestamp>."""
    results = {}
    for checks in out_dir.glob("server-*/checks.json"):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        results[scenario] = json.loads(checks.read_text())
    return results


def test_conformance_server_scenarios_that_apply_to_ray_mcp_pass(npm, http_url, tmp_path: Path) -> None:
    out_dir = tmp_path / "conformance"
    cmd = [npm.bin("conformance"), "server", "--url", http_url, "-o", str(out_dir)]
    # Exits 1 because the fixture-server scenarios fail here: judge each scenario from its checks.json.
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, env=npm.env(clean_env())
    )
    results = scenario_results(out_dir)
    assert results, f"conformance produced no results: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    failed = {
        s: [
            c.get("errorMessage") or c["description"]
            for c in results.get(s, [])
            if c["status"] != "SUCCESS" and c["status"] != "INFO"
        ]
        for s in APPLICABLE_SCENARIOS
    }
    assert all(s in results for s in APPLICABLE_SCENARIOS), sorted(results)
    assert not any(failed.values()), {s: f for s, f in failed.items() if f}
    documented = (REPO / "docs" / "conformance.md").read_text()
    undocumented = [s for s in results if f"`{s}`" not in documented]
    assert not undocumented, f"scenarios missing from docs/conformance.md: {undocumented}"
