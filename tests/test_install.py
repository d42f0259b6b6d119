"""Install paths: the ones README.md gives, each run here from a local git URL or the built wheel.

* ``uvx --from git+file://<clone> ray-mcp`` and ``pipx install git+file://<clone>`` (pipx's uv backend), with
  their dependencies resolved and installed for real (uv's cache keeps that affordable);
* ``python -m build`` into ``dist/``, then ``uvx --from ./dist/<wheel> ray-mcp``;
* the built wheel in a fresh venv, serving its packaged docs over stdio.

The clone is a git repository made from the working tree (tracked and untracked, not ignored files), so the
tests check what is about to be committed. The fresh venv gets ray-mcp from the wheel only; its dependencies
(Ray and the rest: minutes to install with pip) come from this venv's site-packages through a .pth file, and the
tests check that ray_mcp itself is imported from the fresh venv, never from the source tree.
"""

from __future__ import annotations

import os
import shutil
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

from ray_mcp.reference.pages import INDEX_URI, reference_pages
from ray_mcp.server.prompts import prompt_files

pytestmark = pytest.mark.live

INSTALL_TIMEOUT_S = 1500  # a cold uv cache downloads Ray and its dependencies once


def tool(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed in {BIN}: it is in the dev extras (pip install -e '.[dev]')")
    return path


def run(cmd: list, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        cwd=cwd,
        env=clean_env(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **env),
    )
    assert out.returncode == 0, f"{cmd}: {out.stdout[-2000:]}{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A git repository holding the working tree's files, committed: what `git+file://` installs from."""
    root = tmp_path_factory.mktemp("clone") / "ray-mcp"
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run([*git, *cmd], cwd=root, check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def wheel(clone: Path) -> Path:
    """`python -m build` in the clone, as README says: an sdist and a wheel (built from the sdist) in dist/."""
    run([sys.executable, "-m", "build"], clone)
    assert sorted(p.name for p in (clone / "dist").iterdir()) == [
        "ray_mcp-0.1.0-py3-none-any.whl",
        "ray_mcp-0.1.0.tar.gz",
    ]
    return clone / "dist" / "ray_mcp-0.1.0-py3-none-any.whl"


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    python = root / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
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
    code = "import ray_mcp, ray_mcp.reference.pages as r; print(ray_mcp.__file__); print(r.data_dir('docs'))"
    out = subprocess.run(
        [venv / "bin" / "python", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=venv,
        env=clean_env(PYTHONPATH=""),
    ).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in out), out
    assert out[1].endswith(os.path.join("ray_mcp", "_data", "docs"))


async def test_the_installed_ray_mcp_serves_its_packaged_docs_over_stdio(venv: Path, ray_cluster) -> None:
    params = StdioServerParameters(
        command=str(venv / "bin" / "ray-mcp"),
        args=["--address", ray_cluster.dashboard_url],
        env=clean_env(),
        cwd=str(venv),
    )
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


def test_uvx_runs_ray_mcp_from_the_wheel_in_dist(wheel: Path, clone: Path) -> None:
    out = run([tool("uvx"), "--from", "./dist/ray_mcp-0.1.0-py3-none-any.whl", "ray-mcp", "--help"], clone)
    assert "--transport" in out.stdout and "RAY_ADDRESS" in out.stdout and "doctor" in out.stdout


def test_uvx_from_a_git_url_runs_ray_mcp_doctor_against_the_cluster(
    clone: Path, ray_cluster, tmp_path
) -> None:
    """The whole dependency tree resolved by uv from pyproject.toml: the doctor imports Ray and reaches the GCS."""
    out = subprocess.run(
        [
            str(tool("uvx")),
            "--from",
            f"git+file://{clone}",
            "ray-mcp",
            "doctor",
            "--address",
            ray_cluster.dashboard_url,
        ],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        cwd=tmp_path,
        env=clean_env(),
    )
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "ok   dashboard" in out.stdout and "ray-mcp doctor: no check failed." in out.stdout


def test_pipx_installs_ray_mcp_from_a_git_url(clone: Path, tmp_path: Path) -> None:
    home, bin_dir = tmp_path / "pipx", tmp_path / "bin"
    env = {"PIPX_HOME": str(home), "PIPX_BIN_DIR": str(bin_dir), "PIPX_MAN_DIR": str(tmp_path / "man")}
    run([tool("pipx"), "install", "--backend", "uv", f"git+file://{clone}"], tmp_path, **env)
    out = run([bin_dir / "ray-mcp", "--help"], tmp_path)
    assert "--transport" in out.stdout
    version = run(
        [home / "venvs" / "ray-mcp" / "bin" / "python", "-c", "import ray; print(ray.__version__)"], tmp_path
    )
    assert version.stdout.strip() == "2.60.0"


def test_the_license_is_the_apache_2_text_pyproject_names(wheel: Path) -> None:
    import tomllib
    import zipfile

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text) > 10_000
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
