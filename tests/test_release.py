"""Ready to publish: server.json is valid against the MCP registry's published schema (vendored: offline), and the
release workflow builds, tests the wheel in a fresh venv, then publishes with PyPI trusted publishing."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from tests.conftest import BIN, clean_env
from tests.npm_tools import REPO

SCHEMA = REPO / "tests" / "schemas" / "server.schema.json"
SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
SCHEMA_SHA256 = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"


def check_jsonschema(instance: Path) -> subprocess.CompletedProcess[str]:
    tool = BIN / "check-jsonschema"
    if not tool.exists():
        pytest.fail(
            f"check-jsonschema is not installed in {BIN}: it is in the dev extras (pip install -e '.[dev]')"
        )
    return subprocess.run(
        [str(tool), "--schemafile", str(SCHEMA), str(instance)],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )


def test_the_vendored_schema_is_the_published_one() -> None:
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256
    assert json.loads(SCHEMA.read_text())["$id"] == SCHEMA_URL
    assert SCHEMA_URL in (REPO / "tests" / "schemas" / "README.md").read_text()


@pytest.mark.live
def test_server_json_is_valid_against_the_registry_schema() -> None:
    out = check_jsonschema(REPO / "server.json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((REPO / "server.json").read_text())["$schema"] == SCHEMA_URL


@pytest.mark.live
@pytest.mark.parametrize(
    "breakage",
    [
        {"description": "x" * 101},  # the registry caps it at 100
        {"name": "ray-mcp"},  # not reverse-DNS with one slash
        {"packages": [{"registryType": "pypi", "identifier": "ray-mcp"}]},  # no transport
    ],
)
def test_check_jsonschema_rejects_a_broken_server_json(breakage, tmp_path) -> None:
    broken = json.loads((REPO / "server.json").read_text()) | breakage
    (tmp_path / "server.json").write_text(json.dumps(broken))
    assert check_jsonschema(tmp_path / "server.json").returncode == 1


def test_server_json_matches_the_package_it_describes() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    server = json.loads((REPO / "server.json").read_text())
    assert server["version"] == project["version"]
    (package,) = server["packages"]
    assert package["registryType"] == "pypi" and package["identifier"] == project["name"]
    assert package["version"] == project["version"] and package["transport"] == {"type": "stdio"}
    assert "ray-mcp" in project["scripts"]
    # The registry checks PyPI ownership through this marker in the package's README (its long description).
    assert f"mcp-name: {server['name']}" in (REPO / project["readme"]).read_text()
    from ray_mcp.cli import parse_settings

    for argument in package["packageArguments"]:
        parse_settings([argument["name"], argument["placeholder"]])  # a flag ray-mcp has


def test_the_release_workflow_builds_tests_the_wheel_then_publishes_with_trusted_publishing() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["tags"] == ["v*"]
    assert workflow["permissions"] == {"contents": "read"}
    jobs = workflow["jobs"]
    assert jobs["test-wheel"]["needs"] == "build" and jobs["publish-pypi"]["needs"] == "test-wheel"
    assert jobs["publish-mcp-registry"]["needs"] == "publish-pypi"

    def runs(job: str) -> str:
        return "\n".join(step.get("run", "") for step in jobs[job]["steps"])

    def uses(job: str) -> list[str]:
        return [step["uses"] for step in jobs[job]["steps"] if "uses" in step]

    build = runs("build")
    assert "python -m build" in build
    assert "check-jsonschema --schemafile tests/schemas/server.schema.json server.json" in build
    test = runs("test-wheel")
    assert "python -m venv /tmp/fresh" in test and "pip install dist/*.whl" in test
    assert "ray-mcp doctor" in test and "call_tool" in test
    # Trusted publishing: the OIDC token only where it is needed, and no password or API token anywhere.
    assert jobs["publish-pypi"]["permissions"] == {"id-token": "write"}
    assert "pypa/gh-action-pypi-publish@release/v1" in uses("publish-pypi")
    assert all("with" not in s for s in jobs["publish-pypi"]["steps"] if "pypi-publish" in s.get("uses", ""))
    assert "password" not in WORKFLOW.read_text() and "secrets." not in WORKFLOW.read_text()
    for name in ("build", "test-wheel"):
        assert "permissions" not in jobs[name], name
    assert "mcp-publisher publish" in runs("publish-mcp-registry")
