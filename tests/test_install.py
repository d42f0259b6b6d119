"""Install paths: the built wheel installs into a fresh venv and serves its packaged docs; uvx runs it too.

The fresh venv gets ray-mcp from the wheel only. Its dependencies (Ray and the rest: minutes to install) come
from this venv's site-packages through a .pth file, and the tests check that ray_mcp itself is imported from
the fresh venv, never from the source tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.conftest import BIN, clean_env
from tests.npm_tools import REPO

from ray_mcp.prompts import prompt_files
from ray_mcp.resources import INDEX_URI, reference_pages


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(out), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (built,) = out.glob("ray_mcp-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    python = root / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # Dependencies from this venv, appended after the fresh venv's own site-packages.
    (Path(site) / "_deps_from_test_venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    yield root


def test_the_wheel_carries_the_docs_and_prompts_as_package_data(wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    for kind in ("docs", "prompts"):
        for path in (REPO / kind).rglob("*.md"):
            assert f"ray_mcp/_data/{kind}/{path.relative_to(REPO / kind)}" in names, path


def test_the_installed_package_is_imported_from_the_fresh_venv_not_the_source_tree(venv: Path) -> None:
    code = "import ray_mcp, ray_mcp.resources as r; print(ray_mcp.__file__); print(r.data_dir('docs'))"
    out = subprocess.run(
        [venv / "bin" / "python", "-c", code], capture_output=True, text=True, check=True, cwd=venv,
        env=clean_env(PYTHONPATH=""),
    ).stdout.split()  # fmt: skip
    assert all(Path(p).is_relative_to(venv) for p in out), out
    assert out[1].endswith(os.path.join("ray_mcp", "_data", "docs"))


async def test_the_installed_ray_mcp_serves_its_packaged_docs_over_stdio(venv: Path, ray_cluster) -> None:
    params = StdioServerParameters(
        command=str(venv / "bin" / "ray-mcp"), args=["--address", ray_cluster.dashboard_url],
        env=clean_env(), cwd=str(venv),
    )  # fmt: skip
    async with Client(stdio_client(params)) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {INDEX_URI, *(p.uri for p in reference_pages())} <= uris
        index = (await client.read_resource(INDEX_URI)).contents[0]
        assert index.text.startswith("# Ray reference pages")  # type: ignore[union-attr]
        assert all(p.uri in index.text for p in reference_pages())  # type: ignore[union-attr]
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert prompts == {p.name for p in prompt_files()}
        status = await client.call_tool("cluster_status", {})
        assert not status.is_error and status.structured_content["dashboard_url"] == ray_cluster.dashboard_url


def test_uvx_runs_ray_mcp_from_the_wheel(wheel: Path, tmp_path: Path) -> None:
    uvx = BIN / "uvx"
    if not uvx.exists():
        pytest.skip(f"uv is not installed in {BIN} (pip install uv; it is in the dev extras)")
    env = clean_env(UV_CACHE_DIR=str(REPO / ".cache" / "uv"))
    out = subprocess.run(
        [uvx, "--from", str(wheel), "ray-mcp", "--help"], capture_output=True, text=True, timeout=600,
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "--transport" in out.stdout and "RAY_ADDRESS" in out.stdout
