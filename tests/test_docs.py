"""The client configs in docs/clients.md and README.md: every JSON block parses and names a command that exists."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import BIN, clean_env
from tests.npm_tools import REPO
from tests.test_transports import http_server

DOCS_WITH_CONFIGS = [REPO / "docs" / "clients.md", REPO / "README.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
# What a stdio config may start: the venv's ray-mcp (pip install ray-mcp) or uv's uvx (uvx ray-mcp).
COMMANDS = {"ray-mcp": BIN / "ray-mcp", "uvx": BIN / "uvx"}


def code_blocks(path: Path, language: str) -> list[tuple[str, str]]:
    """(headings above it, e.g. "Claude Code > Streamable HTTP with a token", text) of each ``language`` block."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        if match.group(1) == language:
            trail: dict[int, str] = {}
            for hashes, title in re.findall(r"^(#+) (.+)$", text[: match.start()], re.MULTILINE):
                trail = {level: t for level, t in trail.items() if level < len(hashes)} | {len(hashes): title}
            blocks.append((" > ".join(trail[level] for level in sorted(trail) if level > 1), match.group(2)))
    return blocks


def json_snippets(path: Path, *heading_words: str) -> list[str]:
    """The JSON blocks of ``path`` whose heading contains every one of ``heading_words``."""
    return [text for heading, text in code_blocks(path, "json") if all(w in heading for w in heading_words)]


def all_json_blocks() -> list[tuple[str, str]]:
    return [(f"{p.name}: {h}", t) for p in DOCS_WITH_CONFIGS for h, t in code_blocks(p, "json")]


def test_the_docs_have_a_config_for_each_client() -> None:
    headings = [h for h, _ in code_blocks(REPO / "docs" / "clients.md", "json")]
    for words in (["Claude Code"], [".mcp.json"], ["Cursor"], ["Claude Desktop"], ["generic HTTP"]):
        assert any(all(w in h for w in words) for h in headings), (words, headings)
    stdio = json_snippets(REPO / "docs" / "clients.md", ".cursor/mcp.json", "stdio")
    http = json_snippets(REPO / "docs" / "clients.md", ".cursor/mcp.json", "HTTP")
    assert len(stdio) == 1 and len(http) == 1


@pytest.mark.parametrize(("where", "text"), all_json_blocks(), ids=lambda v: v if len(v) < 80 else "")
def test_every_json_config_in_the_docs_parses_and_names_a_real_server(where: str, text: str) -> None:
    config = json.loads(text)
    servers = config.get("mcpServers") or config.get("servers")
    assert servers and "ray" in servers, f"{where}: no mcpServers.ray"
    for name, server in servers.items():
        if "command" in server:
            assert server["command"] in COMMANDS, f"{where}: {name} runs {server['command']!r}"
            assert COMMANDS[server["command"]].exists(), (
                f"{where}: {COMMANDS[server['command']]} is not installed"
            )
            assert all(isinstance(a, str) for a in server.get("args", [])), where
            args = server.get("args", [])
            if server["command"] == "uvx":  # not on PyPI yet: `uvx ray-mcp` alone finds nothing
                assert args[0] == "--from" and args[2] == "ray-mcp", where
                args = args[3:]
            check_cli_args(args, where)
        else:
            assert re.fullmatch(r"http://[\w.-]+:\d+/mcp", server["url"]), f"{where}: {server['url']}"
            auth = server["headers"]["Authorization"]
            assert re.fullmatch(r"Bearer \$\{(env:)?RAY_MCP_AUTH_TOKEN\}", auth), f"{where}: {auth}"


def check_cli_args(args: list[str], where: str) -> None:
    """The args parse with ray-mcp's own flag parser."""
    from ray_mcp.cli import parse_settings

    try:
        parse_settings(args)
    except SystemExit as exc:  # argparse
        raise AssertionError(f"{where}: ray-mcp rejects the args {args}") from exc


def test_every_claude_mcp_add_line_in_the_docs_uses_flags_claude_code_has() -> None:
    lines = [
        line.strip()
        for p in DOCS_WITH_CONFIGS
        for _h, block in code_blocks(p, "bash")
        for line in block.splitlines()
        if line.strip().startswith("claude mcp add")
    ]
    assert lines
    for line in lines:
        if "--transport http" in line:
            # a token on every server but make run's own, on loopback (which needs none)
            assert re.search(
                r"--transport http ray (http://[\w.-]+:\d+/mcp --header \"Authorization: Bearer "
                r"|http://127\.0\.0\.1:8270/mcp( |$))",
                line,
            ), line
        else:
            assert re.match(r'claude mcp add ray -- (ray-mcp|"\$PWD/\.venv/bin/ray-mcp")( |$)', line), line
    # After `make run` the command is in the repo's venv, not on PATH: the README gives that form.
    readme = (REPO / "README.md").read_text()
    assert 'claude mcp add ray -- "$PWD/.venv/bin/ray-mcp"' in readme and ".venv/bin/ray-mcp" in readme


async def test_the_python_http_client_of_the_docs_calls_cluster_status(ray_cluster, tmp_path: Path) -> None:
    (block,) = [t for _h, t in code_blocks(REPO / "docs" / "clients.md", "python")]
    (tmp_path / "token").write_text("docs-test-token")
    args = ["--transport", "streamable-http", "--address", ray_cluster.dashboard_url]
    with http_server([*args, "--auth-token-file", str(tmp_path / "token")], tmp_path / "server.log") as port:
        script = block.replace("http://127.0.0.1:8270/mcp", f"http://127.0.0.1:{port}/mcp")
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(RAY_MCP_AUTH_TOKEN="docs-test-token"),
        )
        assert out.returncode == 0, out.stderr
        assert "node(s) alive" in out.stdout
        # The same client, with a call that takes longer than httpx's default 5 s timeout: it must finish.
        follow = (
            'call_tool("tail_logs", {"node": "%s", "filename": "gcs_server.out", "lines": 1, "follow_s": 8})'
        )
        long_call = script.replace('call_tool("cluster_status", {})', follow % node_ip(ray_cluster))
        assert long_call != script
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-c", long_call],
            capture_output=True,
            text=True,
            timeout=180,
            env=clean_env(RAY_MCP_AUTH_TOKEN="docs-test-token"),
        )
    assert out.returncode == 0, out.stderr[-3000:]
    assert time.monotonic() - started > 8 and "gcs_server.out" in out.stdout


@pytest.mark.live
def test_the_python_http_client_of_the_docs_needs_no_token_for_a_server_without_one(tmp_path: Path) -> None:
    """Before: the snippet read os.environ['RAY_MCP_AUTH_TOKEN'] and died with a KeyError against make run's
    server, which needs no token (issue 27 item 11)."""
    (block,) = [t for _h, t in code_blocks(REPO / "docs" / "clients.md", "python")]
    with http_server(
        ["--transport", "streamable-http", "--address", "http://127.0.0.1:9"], tmp_path / "log"
    ) as port:
        script = block.replace("http://127.0.0.1:8270/mcp", f"http://127.0.0.1:{port}/mcp")
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=clean_env()
        )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "127.0.0.1:9" in out.stdout, out.stdout  # the server's answer: no cluster there


def node_ip(ray_cluster) -> str:
    import httpx

    nodes = httpx.get(f"{ray_cluster.dashboard_url}/api/v0/nodes", timeout=30).json()["data"]["result"][
        "result"
    ]
    return next(n["node_ip"] for n in nodes if n["state"] == "ALIVE")


def test_every_doc_says_destructive_calls_confirm_by_elicitation_first_then_token() -> None:
    """README, docs/security.md and docs/conformance.md agree with confirm.py: elicitation, else a token."""
    from ray_mcp.guard import confirm

    assert "elicitation" in (confirm.__doc__ or "") and "token" in (confirm.__doc__ or "")
    for name in ("README.md", "docs/security.md", "docs/conformance.md"):
        text = (REPO / name).read_text()
        parts = re.split(r"\n\s*\n|\n\||\n- |\n\d\. ", text)  # paragraphs, table rows, list items
        paragraphs = [p for p in parts if re.search(r"confirm", p, re.I)]
        assert paragraphs, name
        for paragraph in paragraphs:
            if "token" in paragraph and re.search(r"destructive", paragraph, re.I):
                assert "elicitation" in paragraph, (name, paragraph)
                assert not re.search(r"token,? not elicitation|only with a token", paragraph), (
                    name,
                    paragraph,
                )


def test_the_readme_sends_the_reader_to_the_address_table() -> None:
    """The README gives examples, not the list: `ray-mcp --help` and server.json list every row of the table
    (tests/test_addresses.py), so a new form edits neither the README nor this test."""
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "`ray-mcp --help` lists every form" in readme


def test_the_docs_index_lists_every_page_and_every_page_names_the_token_variable_one_way() -> None:
    index = (REPO / "docs" / "README.md").read_text()
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md") if p.name != "README.md")
    assert [p for p in pages if f"`{p}`" not in index] == []
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        assert "RAY_MCP_TOKEN" not in page.read_text().replace("RAY_MCP_TOKEN_", ""), page.name


def test_the_readme_says_what_make_test_needs_and_gives_the_http_line_make_run_prints() -> None:
    readme = (REPO / "README.md").read_text()
    assert "npm" in readme and "docker-compose" in readme and "~35 min" in readme
    assert "only Python 3.11+ and `make`; `make test` also" in readme
    # the line the server logs at start (server/transport.py), for make run's default host and port
    assert "claude mcp add --transport http ray http://127.0.0.1:8270/mcp" in readme
    for page in (
        readme,
        (REPO / "docs" / "clients.md").read_text(),
    ):  # python -m build needs the build package
        assert "pip install build && python -m build" in page
        assert "python -m build" not in page.replace("pip install build && python -m build", "")
