"""Reading a log straight from this machine's disk (sources/local_logs.py), without a cluster: the tail is what
Ray's own log agent would stream, and nothing outside the node's log directory is ever read."""

from __future__ import annotations

import io
import os
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_mcp.answers.targets import LogTarget
from ray_mcp.errors import InvalidArgument
from ray_mcp.sources.local_logs import LogDir, missing, node_logs_dir, open_log, read_tail, tail_of


def _ray_agent_start(data: bytes, lines: int, block: int) -> int:
    """Where Ray 2.60's log agent starts streaming the last ``lines`` lines (its own function)."""
    from ray.dashboard.modules.log.log_agent import find_start_offset_last_n_lines_from_offset

    return find_start_offset_last_n_lines_from_offset(io.BytesIO(data), offset=-1, n=lines, block_size=block)


def _log_file(tmp_path: Path, data: bytes) -> int:
    path = tmp_path / "x.log"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


line_sets = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=60)


@settings(max_examples=300, deadline=None)
@given(lines=line_sets, trailing=st.booleans(), wanted=st.integers(2, 70), block=st.integers(1, 50))
def test_the_tail_starts_exactly_where_rays_log_agent_starts_streaming(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], trailing: bool, wanted: int, block: int
) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    fd = _log_file(tmp_path_factory.mktemp("tail"), data)
    try:
        out = read_tail(fd, wanted, keep=len(data) + 1, block=block)
    finally:
        os.close(fd)
    assert out is not None
    start = _ray_agent_start(data, wanted, block=max(block, 2))
    assert out == (data[start:], len(data) - start)


@settings(max_examples=100, deadline=None)
@given(lines=line_sets, wanted=st.integers(2, 70), keep=st.integers(1, 200), block=st.integers(1, 64))
def test_only_the_last_keep_bytes_are_kept_and_the_total_is_exact(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], wanted: int, keep: int, block: int
) -> None:
    data = b"\n".join(lines) + b"\n" if lines else b""
    fd = _log_file(tmp_path_factory.mktemp("keep"), data)
    try:
        out = read_tail(fd, wanted, keep=keep, block=block)
    finally:
        os.close(fd)
    start = _ray_agent_start(data, wanted, block=64)
    assert out == (data[start:][-keep:], len(data) - start)


def test_a_start_further_back_than_the_scan_bound_is_left_to_the_dashboard(tmp_path: Path) -> None:
    fd = _log_file(tmp_path, b"x" * 100_000 + b"\nlast\n")
    try:
        assert read_tail(fd, 5, keep=1000, scan_bytes=10_000, block=4096) is None
        assert read_tail(fd, 5, keep=1000, scan_bytes=200_000, block=4096) == (
            (b"x" * 100_000 + b"\nlast\n")[-1000:],
            100_006,
        )
    finally:
        os.close(fd)


@pytest.fixture
def logs(tmp_path: Path) -> LogDir:
    real = tmp_path / "session_1" / "logs"
    (real / "old").mkdir(parents=True)
    (real / "raylet.out").write_text("a\nb\n")
    (real / "old" / "raylet.1.out").write_text("old\n")
    return LogDir(real=real, reported=real)


@pytest.mark.parametrize(
    "name",
    ["../session_1/logs/raylet.out", "old/../../x", "..", "/etc/passwd", "/", "", "./", "/tmp/../etc/passwd"],
)
def test_a_name_outside_the_logs_directory_is_refused(logs: LogDir, name: str) -> None:
    with pytest.raises(InvalidArgument, match="not a file inside the node's Ray log directory"):
        open_log(logs, name)


def test_a_name_with_dot_dot_is_refused_before_any_request() -> None:
    for name in ("../../etc/passwd", "old/../../../x", "..\\..\\x"):
        with pytest.raises(InvalidArgument, match="climbs out"):
            LogTarget(node="n", filename=name)


def test_names_and_absolute_paths_inside_the_directory_are_read(logs: LogDir) -> None:
    assert tail_of(logs, "raylet.out", 10, 100) == (b"a\nb\n", 4)
    assert tail_of(logs, "old/raylet.1.out", 10, 100) == (b"old\n", 4)
    assert tail_of(logs, str(logs.real / "raylet.out"), 1, 100) == (b"b\n", 2)


def test_a_link_out_of_the_directory_is_refused_and_its_target_never_read(
    logs: LogDir, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SECRET\n")
    (logs.real / "evil.log").symlink_to(outside / "secret.txt")
    (logs.real / "evil_dir").symlink_to(outside)
    for name in ("evil.log", "evil_dir/secret.txt"):
        with pytest.raises(InvalidArgument, match="link to a place outside") as raised:
            tail_of(logs, name, 10, 100)
        assert "OUTSIDE-SECRET" not in str(raised.value)


def test_a_link_that_stays_inside_a_directory_a_fifo_or_a_missing_file_is_left_to_the_dashboard(
    logs: LogDir,
) -> None:
    (logs.real / "inside.log").symlink_to(logs.real / "raylet.out")
    os.mkfifo(logs.real / "pipe.log")  # never opened for a blocking read
    for name in ("inside.log", "old", "pipe.log", "missing.log", "raylet.out/x"):
        assert tail_of(logs, name, 10, 100) is None, name


def test_a_node_is_read_here_only_with_this_hosts_address_and_its_raylet_socket_here(tmp_path: Path) -> None:
    session = tmp_path / "session_2026"
    (session / "logs").mkdir(parents=True)
    (session / "sockets").mkdir()
    raylet_socket = session / "sockets" / "raylet"
    here = {"10.1.2.3"}
    info = {
        "nodeManagerAddress": "10.1.2.3",
        "sessionDir": str(session),
        "rayletSocketName": str(raylet_socket),
    }
    assert node_logs_dir(info, here) is None  # no raylet socket: not this session's machine
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(raylet_socket))
        found = node_logs_dir(info, here)
        assert found == LogDir(real=Path(os.path.realpath(session / "logs")), reported=session / "logs")
        assert node_logs_dir({**info, "nodeManagerAddress": "10.9.9.9"}, here) is None  # another host
        assert node_logs_dir({**info, "sessionDir": "relative/session"}, here) is None
        assert node_logs_dir({k: v for k, v in info.items() if k != "sessionDir"}, here) is None
        (session / "logs").rename(session / "moved")
        assert node_logs_dir(info, here) is None  # no logs directory here
    raylet_socket.unlink(missing_ok=True)
    raylet_socket.write_text("not a socket")
    (session / "moved").rename(session / "logs")
    assert node_logs_dir(info, here) is None


def test_only_a_name_with_nothing_behind_it_is_missing(logs: LogDir) -> None:
    (logs.real / "inside.log").symlink_to(logs.real / "gone.log")  # a dangling link is there, not missing
    assert missing(logs, "missing.log") and missing(logs, "old/missing.log")
    assert not missing(logs, "raylet.out") and not missing(logs, "old") and not missing(logs, "inside.log")
    with pytest.raises(InvalidArgument):
        missing(logs, "../outside.log")
