"""`ray-mcp doctor` / `--check`: one line per check against the real cluster, a fix for each failure, exit 0/1."""

from __future__ import annotations

import json
import re
import subprocess

import httpx
import pytest
from tests.conftest import clean_env
from tests.test_transports import RAY_MCP

from ray_mcp.doctor import TESTED_RAY_VERSION, run_checks
from ray_mcp.settings import Settings

CHECKS = ["address", "dashboard", "ray", "auth", "profiling", "gcs", "serve", "logs", "uploads"]
LINE = re.compile(r"^(ok|warn|FAIL|skip) +(\w+) +\S.*$")


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RAY_MCP, *args], capture_output=True, text=True, timeout=300, env=clean_env(**env))


def parse(stdout: str) -> dict[str, tuple[str, str]]:
    lines = stdout.strip().splitlines()
    checks = {}
    for line in lines[:-1]:
        match = LINE.match(line)
        assert match, line
        checks[match.group(2)] = (match.group(1), line)
    assert list(checks) == CHECKS, lines
    return checks


def test_doctor_passes_on_the_real_cluster_with_one_line_per_check(ray_cluster) -> None:
    out = doctor("doctor", "--address", ray_cluster.dashboard_url)
    assert out.returncode == 0, out.stdout + out.stderr
    checks = parse(out.stdout)
    for name in ("address", "dashboard", "gcs", "serve", "logs"):
        assert checks[name][0] == "ok", checks[name]
    assert TESTED_RAY_VERSION in checks["ray"][1] and checks["ray"][0] == "ok"
    # The session's head has profiling on (LocalHead turns it on); a cluster given by address may not: the
    # verdict follows what the head's dashboard says, and without it is a warning naming the fix.
    import httpx

    answer = httpx.get(f"{ray_cluster.dashboard_url}/api/profiling_enabled", timeout=30).json()
    profiling_on = bool(answer["data"]["profilingEnabled"])
    assert checks["profiling"][0] == ("ok" if profiling_on else "warn"), checks["profiling"]
    assert profiling_on or "RAY_DASHBOARD_ENABLE_PROFILING=1" in checks["profiling"][1]
    assert "Fix:" not in checks["dashboard"][1]
    assert out.stdout.strip().splitlines()[-1] == "ray-mcp doctor: no check failed."
    assert (
        checks["uploads"][0] == "ok" and "local uploads allowed under" in checks["uploads"][1]
    )  # stdio: cwd


@pytest.mark.live
def test_doctor_fails_an_upload_root_that_is_not_a_directory(tmp_path) -> None:
    out = doctor("doctor", "--address", "http://127.0.0.1:9", "--upload-root", str(tmp_path / "missing"))
    checks = parse(out.stdout)
    assert checks["uploads"][0] == "FAIL" and "--upload-root" in checks["uploads"][1]
    http = doctor("doctor", "--address", "http://127.0.0.1:9", "--transport", "streamable-http")
    assert "no upload root" in parse(http.stdout)["uploads"][1]


def test_doctor_finds_the_dashboard_from_a_gcs_address(ray_cluster) -> None:
    out = doctor("--check", "--address", ray_cluster.gcs_address)
    assert out.returncode == 0, out.stdout + out.stderr
    checks = parse(out.stdout)
    assert ray_cluster.dashboard_url in checks["address"][1]
    assert ray_cluster.gcs_address in checks["gcs"][1]


@pytest.mark.live
def test_doctor_fails_on_a_wrong_address_with_a_fix_and_skips_the_rest() -> None:
    for address in ("http://127.0.0.1:9", "garbage"):
        out = doctor("doctor", "--address", address)
        assert out.returncode == 1, out.stdout
        checks = parse(out.stdout)
        failed = [name for name, (status, _) in checks.items() if status == "FAIL"]
        assert len(failed) == 1, checks
        assert "Fix:" in checks[failed[0]][1] and "--address" in checks[failed[0]][1]
        for name in ("ray", "auth", "gcs", "serve", "logs"):
            assert checks[name][0] == "skip", checks[name]  # never reported as passed
        assert "1 check(s) failed" in out.stdout


def fake_dashboard(
    version: str, *, token: str | None, apps: dict | None = None, serve: str = "up"
) -> httpx.MockTransport:
    """A dashboard with Ray's token auth on, or of another Ray version, or whose Serve API times out or is
    missing (``serve``): what the session cluster is not."""

    def handle(request: httpx.Request) -> httpx.Response:
        if token and request.headers.get("authorization") != f"Bearer {token}":
            return httpx.Response(401, text="Unauthorized: Missing authentication token")
        path = request.url.path
        if path == "/api/version":
            return httpx.Response(200, json={"ray_version": version, "version": "4"})
        if path == "/api/authentication_mode":
            return httpx.Response(200, json={"authentication_mode": "token" if token else "disabled"})
        if path == "/api/profiling_enabled":
            return httpx.Response(200, json={"result": True, "data": {"profilingEnabled": True}})
        if path == "/api/v0/nodes":
            node = {"node_id": "ab" * 28, "state": "ALIVE", "is_head_node": True}
            return httpx.Response(200, json={"data": {"result": {"result": [node]}}})
        if path == "/api/serve/applications/" and serve == "slow":
            raise httpx.ReadTimeout("timed out", request=request)
        if path == "/api/serve/applications/" and serve == "up":
            return httpx.Response(200, json={"applications": apps or {"app": {"status": "DEPLOY_FAILED"}}})
        if path == "/api/v0/logs":
            return httpx.Response(200, json={"data": {"result": {"raylet": ["raylet.out"]}}})
        return httpx.Response(404)

    return httpx.MockTransport(handle)


async def test_doctor_names_the_token_fix_when_ray_token_auth_refuses_it() -> None:
    settings = Settings(address="http://10.0.0.1:8265", ray_auth_token_path="/nonexistent")
    checks = {
        c.name: c for c in await run_checks(settings, http_transport=fake_dashboard("2.60.0", token="s3"))
    }
    assert checks["dashboard"].status == "FAIL" and "RAY_AUTH_TOKEN" in checks["dashboard"].fix
    assert all(checks[n].status == "skip" for n in ("ray", "auth", "gcs", "logs"))


async def test_doctor_accepts_the_right_token_and_warns_on_another_ray_version() -> None:
    settings = Settings(address="http://10.0.0.1:8265", ray_auth_token="s3")
    transport = fake_dashboard("2.49.1", token="s3")
    checks = {c.name: c for c in await run_checks(settings, http_transport=transport)}
    assert checks["dashboard"].status == "ok"
    assert checks["auth"].status == "ok" and "token authentication is on" in checks["auth"].message
    assert (
        checks["ray"].status == "warn" and "2.49.1" in checks["ray"].message and "2.49.1" in checks["ray"].fix
    )
    assert checks["profiling"].status == "ok"
    assert checks["serve"].status == "ok" and 'not running: "app"' in checks["serve"].message
    assert "s3" not in json.dumps([c.line() for c in checks.values()])  # the token is never printed


async def test_doctor_prints_through_the_escaping_of_every_answer() -> None:
    """Before: the dashboard URL's password was printed, and an app name's terminal escapes and newlines went
    to the terminal raw (clearing it, retitling it, forging a check line)."""
    hostile = "app\x1b[2J\x1b]0;pwned\x07\nok   forged    everything is fine"
    settings = Settings(address="http://admin:hunter2-doctor@10.0.0.1:8265")
    transport = fake_dashboard("2.60.0", token=None, apps={hostile: {"status": "DEPLOY_FAILED"}})
    lines = [c.line() for c in await run_checks(settings, http_transport=transport)]
    printed = "\n".join(lines)
    assert "hunter2-doctor" not in printed and "admin:***@" in printed, printed
    assert "\x1b" not in printed and "\x07" not in printed, printed
    assert not any(line.startswith("ok   forged") for line in printed.splitlines()), printed
    assert all("\n" not in line for line in lines)


@pytest.mark.parametrize(
    "serve, says, fix",
    [
        ("slow", "did not answer within", "run the doctor again"),
        ("missing", "no Serve API (404)", "ray[serve]"),
    ],
)
async def test_doctor_tells_a_slow_serve_api_from_a_missing_one(serve: str, says: str, fix: str) -> None:
    """Before: a Serve API that timed out got "install ray[serve]", though Serve was installed."""
    transport = fake_dashboard("2.60.0", token=None, serve=serve)
    checks = {
        c.name: c
        for c in await run_checks(Settings(address="http://10.0.0.1:8265"), http_transport=transport)
    }
    assert checks["serve"].status == "warn" and says in checks["serve"].message, checks["serve"]
    assert fix in checks["serve"].fix and (serve == "missing") == ("ray[serve]" in checks["serve"].fix)
