"""Local uploads (runtime_env working_dir, py_modules, pip/uv/conda files) only from the operator's upload roots.

Over HTTP a client is remote: any local path Ray's Jobs SDK reads on the server's machine is a way to read the
server's files. Symlinks and ``..`` are resolved first, and every symlink Ray's packaging would follow inside an
uploaded directory must stay under a root too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.conftest import clean_env
from tests.support import TERMINAL, call_ok, mcp_client, text_of, wait_until
from tests.test_transports import RAY_MCP, http_server

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings
from ray_mcp.sources.uploads import confine_uploads

PY = sys.executable
SECRET = "top-secret-value-from-outside-the-root"


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """root/ (the upload root) with a project, and outside/ with a secret the project must not leak."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    project = root / "project"
    project.mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "requirements.txt").write_text(SECRET + "\n")
    (project / "main.py").write_text("print(open('shared/data.txt').read().strip(), flush=True)\n")
    shared = root / "shared-data"
    shared.mkdir()
    (shared / "data.txt").write_text("data-from-inside-the-root\n")
    return {"root": root, "outside": outside, "project": project, "shared": shared}


async def submit(client: Client, runtime_env: dict[str, Any]) -> Any:
    return await client.call_tool("submit_job", {"entrypoint": f"{PY} main.py", "runtime_env": runtime_env})


async def job_total(client: Client) -> int:
    return int((await call_ok(client, "list_jobs", {"limit": 1})).structured_content["total"])


async def test_a_symlink_inside_the_root_is_uploaded_and_one_leading_outside_is_refused(
    ray_cluster: Any, layout: dict[str, Path]
) -> None:
    project = layout["project"]
    (project / "shared").symlink_to(layout["shared"], target_is_directory=True)  # inside the root: fine
    async with mcp_client(
        Settings(address=ray_cluster.dashboard_url, upload_roots=[layout["root"]])
    ) as client:
        ok = await submit(client, {"working_dir": str(project)})
        assert not ok.is_error, text_of(ok)
        sid = ok.structured_content["submission_id"]
        info = await wait_until(client, sid, TERMINAL)
        assert info["status"] == "SUCCEEDED", info
        logs = await call_ok(client, "tail_logs", {"job": sid})
        assert "data-from-inside-the-root" in text_of(logs)

        before = await job_total(client)
        (project / "leak.txt").symlink_to(layout["outside"] / "secret.txt")  # a file link out of the root
        refused = await submit(client, {"working_dir": str(project)})
        (project / "leak.txt").unlink()
        (project / "stolen").symlink_to(layout["outside"], target_is_directory=True)  # a directory link out
        refused_dir = await submit(client, {"working_dir": str(project)})
        for result, link in ((refused, "leak.txt"), (refused_dir, "stolen")):
            text = text_of(result)
            assert result.is_error and "nothing was submitted" in text, text
            assert f"project/{link}" in text and "--upload-root" in text, text
            assert SECRET not in text
        assert await job_total(client) == before  # nothing reached the cluster


async def test_a_link_ray_would_not_upload_because_it_is_excluded_does_not_block_the_job(
    ray_cluster: Any, layout: dict[str, Path]
) -> None:
    """A virtualenv's python -> /usr/bin/python3 is the common case: excluded, Ray never reads it."""
    project = layout["project"]
    (project / "main.py").write_text("print('excluded-links-ignored', flush=True)\n")
    venv = project / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(layout["outside"] / "secret.txt")
    (project / "ignored-by-git").symlink_to(layout["outside"] / "secret.txt")
    (project / ".gitignore").write_text("ignored-by-git\n")
    async with mcp_client(
        Settings(address=ray_cluster.dashboard_url, upload_roots=[layout["root"]])
    ) as client:
        refused = await submit(client, {"working_dir": str(project)})
        assert refused.is_error and ".venv/bin/python" in text_of(refused), text_of(refused)
        ok = await submit(client, {"working_dir": str(project), "excludes": [".venv"]})
        assert not ok.is_error, text_of(ok)
        info = await wait_until(client, ok.structured_content["submission_id"], TERMINAL)
        assert info["status"] == "SUCCEEDED", info


async def test_paths_outside_the_roots_are_refused_in_every_field_ray_reads_locally(
    ray_cluster: Any, layout: dict[str, Path]
) -> None:
    root, outside = layout["root"], layout["outside"]
    (root / "escape").symlink_to(outside, target_is_directory=True)
    server = build_server(Settings(address=ray_cluster.dashboard_url, upload_roots=[root]))
    cases = [
        ("working_dir", {"working_dir": str(outside)}),
        ("working_dir", {"working_dir": f"{root}/../outside"}),  # `..` is resolved first
        ("working_dir", {"working_dir": str(root / "escape")}),  # a symlinked root entry: its target counts
        ("py_modules", {"py_modules": [str(outside)]}),
        ("pip", {"pip": str(outside / "requirements.txt")}),  # Ray reads it here and ships its lines
        ("uv", {"uv": str(root / "escape" / "requirements.txt")}),
        ("conda", {"conda": str(outside / "env.yaml")}),
    ]
    async with Client(server) as client:
        before = await job_total(client)
        for field, env in cases:
            result = await submit(client, env)
            text = text_of(result)
            assert result.is_error and f"runtime_env.{field}" in text and "--upload-root" in text, (env, text)
            assert str(root) in text and SECRET not in text, text
        assert await job_total(client) == before
    await server.app.aclose()


async def test_a_refusal_does_not_tell_whether_a_file_outside_the_roots_exists(
    ray_cluster: Any, layout: dict[str, Path]
) -> None:
    server = build_server(Settings(address=ray_cluster.dashboard_url, upload_roots=[layout["root"]]))
    async with Client(server) as client:
        exists = text_of(await submit(client, {"pip": str(layout["outside"] / "secret.txt")}))
        missing = text_of(await submit(client, {"pip": str(layout["outside"] / "no-such-file.txt")}))
    assert exists.replace("secret.txt", "X") == missing.replace("no-such-file.txt", "X")
    await server.app.aclose()


async def test_over_http_no_local_upload_is_allowed_unless_the_operator_names_a_root(
    ray_cluster: Any, layout: dict[str, Path]
) -> None:
    settings = Settings(address=ray_cluster.dashboard_url, transport="streamable-http")
    assert settings.effective_upload_roots() == []
    async with mcp_client(settings) as client:
        result = await submit(client, {"working_dir": str(layout["project"])})
        text = text_of(result)
        assert result.is_error and "allows no local uploads" in text and "--upload-root" in text, text
        remote = await client.call_tool(
            "submit_job", {"entrypoint": "echo remote-only", "runtime_env": {"env_vars": {"A": "1"}}}
        )
        assert not remote.is_error, text_of(remote)  # a job without local paths is unaffected


def test_a_symlink_loop_inside_the_root_is_refused_before_ray_walks_it_forever(
    layout: dict[str, Path],
) -> None:
    project = layout["project"]
    (project / "sub").mkdir()
    (project / "sub" / "back").symlink_to(project, target_is_directory=True)
    with pytest.raises(Exception, match="loop"):
        confine_uploads({"working_dir": str(project)}, [layout["root"]])


def test_upload_roots_come_from_flags_or_env_and_default_by_transport(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray_mcp.cli import parse_settings

    a, b = tmp_path / "a", tmp_path / "b"
    assert parse_settings(["--upload-root", str(a), "--upload-root", str(b)]).effective_upload_roots() == [
        a,
        b,
    ]
    monkeypatch.setenv("RAY_MCP_UPLOAD_ROOTS", f"{a}{os.pathsep}{b}")
    assert Settings().effective_upload_roots() == [a, b]
    monkeypatch.setenv("RAY_MCP_UPLOAD_ROOTS", f'["{a}"]')
    assert Settings().effective_upload_roots() == [a]
    monkeypatch.delenv("RAY_MCP_UPLOAD_ROOTS")
    assert Settings(transport="stdio").effective_upload_roots(cwd=tmp_path) == [tmp_path]
    assert Settings(transport="sse").effective_upload_roots(cwd=tmp_path) == []


async def test_over_stdio_the_default_root_is_the_directory_the_server_started_in(
    ray_cluster: Any, layout: dict[str, Path]
) -> None:
    project = layout["project"]
    (project / "main.py").write_text("print('from-the-start-dir', flush=True)\n")
    params = StdioServerParameters(
        command=RAY_MCP, args=["--address", ray_cluster.dashboard_url], env=clean_env(), cwd=str(project)
    )
    with open(layout["root"] / "stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            with anyio.fail_after(120):
                here = await client.call_tool(
                    "submit_job", {"entrypoint": f"{PY} main.py", "runtime_env": {"working_dir": "."}}
                )
                assert not here.is_error, text_of(here)
                above = await client.call_tool(
                    "submit_job", {"entrypoint": "echo no", "runtime_env": {"working_dir": ".."}}
                )
    assert above.is_error and "outside the upload roots" in text_of(above) and str(project) in text_of(above)


async def test_over_real_http_a_client_cannot_read_the_servers_files_until_a_root_is_named(
    ray_cluster: Any, layout: dict[str, Path]
) -> None:
    """The attack of the issue: over HTTP, working_dir (or a requirements file) pointed at the server's files."""
    base = ["--transport", "streamable-http", "--address", ray_cluster.dashboard_url]
    attempts = [
        {"working_dir": str(layout["outside"])},
        {"pip": str(layout["outside"] / "requirements.txt")},
        {"working_dir": str(Path.home() / ".ray")},
    ]
    with http_server(base, layout["root"] / "server.log") as port:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            with anyio.fail_after(120):
                for env in attempts:
                    result = await submit(client, env)
                    assert result.is_error and "allows no local uploads" in text_of(result), text_of(result)
                    assert SECRET not in text_of(result)
    project = layout["project"]
    (project / "main.py").write_text("print('uploaded-over-http', flush=True)\n")
    with http_server([*base, "--upload-root", str(layout["root"])], layout["root"] / "server2.log") as port:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            with anyio.fail_after(180):
                still = await submit(client, {"working_dir": str(layout["outside"])})
                assert still.is_error and "outside the upload roots" in text_of(still)
                ok = await submit(client, {"working_dir": str(project)})
                assert not ok.is_error, text_of(ok)
                info = await wait_until(client, ok.structured_content["submission_id"], TERMINAL)
    assert info["status"] == "SUCCEEDED", info
