"""One budget, applied once, at the edge (issue 36 step 3): a list tool returns its page and its renderer, and
the answer a client receives is fitted to RESPONSE_BUDGET_BYTES with one note, whatever the tool. The probe tool
here has no fitting code of its own; it goes through the real server (build_server) and a real MCP client."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.types import CallToolResult
from pydantic import BaseModel
from tests.kube_apiserver import KubeState, serve, write_kubeconfig
from tests.kuberay_objects import CLUSTER, NS, head_pod, head_service, raycluster
from tests.support import mcp_client, text_of

from ray_mcp.guard.redaction import escape_controls
from ray_mcp.limits import EVENTS_SHOWN, KUBE_LOG_BYTES, RESPONSE_BUDGET_BYTES
from ray_mcp.models import ListPage
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings
from ray_mcp.shaping.common import _escaped, most_that_fit, sent_bytes, sent_escaped_bytes, tool_result
from ray_mcp.shaping.events import EventFilter, build_event_list, render_event_list
from ray_mcp.tools import READ_ONLY

PROBES = 400  # each row ~300 bytes in the text and as much again as JSON: ~30 times the budget in all


class Probe(BaseModel):
    probe_id: str
    message: str


class ProbeList(ListPage):
    items_field = "probes"
    probes: list[Probe]


def render_probes(page: ProbeList) -> str:
    lines = [f"Probes: {page.matched} match; showing {page.shown}."]
    lines += [f"  {p.probe_id} {p.message}" for p in page.probes]
    return "\n".join(lines + [f"Note: {n}" for n in page.notes])


async def list_probes() -> Annotated[CallToolResult, ProbeList]:
    """A throwaway list tool, written as a new list tool would be: its page and its renderer, nothing more."""
    rows = [Probe(probe_id=f"{i:032x}", message=f'said "{i}"\\ ' * 20) for i in range(PROBES)]
    return tool_result(ProbeList(total=PROBES, matched=PROBES, shown=PROBES, probes=rows), render_probes)


def as_sent(result: CallToolResult) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


async def test_a_new_list_tool_with_no_fitting_code_is_fitted_at_the_edge_with_one_note() -> None:
    server = build_server(Settings(address="http://127.0.0.1:1"))  # no cluster: the probe reads none
    server.tool(annotations=READ_ONLY)(list_probes)
    try:
        async with Client(server) as client:
            result = await client.call_tool("list_probes", {})
    finally:
        await server.app.aclose()
    assert not result.is_error, text_of(result)
    assert as_sent(result) <= RESPONSE_BUDGET_BYTES, as_sent(result)
    structured = result.structured_content or {}
    shown = structured["shown"]
    assert 1 <= shown < PROBES and len(structured["probes"]) == shown
    assert [p["probe_id"] for p in structured["probes"]] == [f"{i:032x}" for i in range(shown)]  # the first
    note = (
        f"{PROBES - shown} more of these {PROBES} probes left out to keep the whole answer under 8 KB as sent"
    )
    assert [n for n in structured["notes"] if "left out" in n] == [structured["notes"][-1]]
    assert note in structured["notes"][-1]
    assert text_of(result).count("left out") == 1 and note in text_of(result)
    assert f"showing {shown}." in text_of(result)  # the text is rendered from the page as kept


def test_a_list_page_that_does_not_name_its_items_field_fails_at_import() -> None:
    with pytest.raises(TypeError, match="items_field"):

        class Unnamed(ListPage):
            rows: list[Probe]

    with pytest.raises(TypeError, match="'probez'"):

        class Misspelt(ListPage):
            items_field = "probez"
            probes: list[Probe]


def test_a_list_page_given_a_fixed_text_is_refused_since_the_fitter_could_not_render_what_it_keeps() -> None:
    page = ProbeList(total=1, matched=1, shown=1, probes=[Probe(probe_id="a", message="b")])
    with pytest.raises(TypeError, match="pass its renderer"):
        tool_result(page, render_probes(page))


@settings(max_examples=300, deadline=None)
@given(high=st.integers(1, 2000), last=st.integers(0, 2000), guess=st.integers(-5, 3000))
def test_the_search_finds_the_most_that_fit_whatever_the_guess(high: int, last: int, guess: int) -> None:
    probed: list[int] = []

    def fits(k: int) -> bool:
        probed.append(k)
        return k <= last

    assert most_that_fit(high, fits, guess) == max(1, min(last, high))
    assert all(1 <= k <= high for k in probed) and len(probed) <= 2 + high.bit_length()
    if 1 <= guess == last < high:  # a right guess costs two probes: it, and the one past it
        assert probed == [guess, guess + 1]


NASTY = st.text(
    st.sampled_from(['"', "\\", "r", "u", "0", "\r", "\n", "\x01", "\x1b", "\x7f", "\u200b", "é", "a"])
)


@settings(max_examples=300, deadline=None)
@given(
    structured=st.recursive(NASTY, lambda inner: st.lists(inner) | st.dictionaries(NASTY, inner)), text=NASTY
)
def test_the_size_as_sent_is_measured_alike_with_or_without_control_characters(structured, text) -> None:
    # the fitter's quick path (no control character in the structure) must agree with escaping every string
    escaped = sent_bytes(_escaped(structured), escape_controls(text))
    assert sent_escaped_bytes(structured, text) == escaped


def test_list_events_long_messages_at_the_default_limit_are_fitted_too() -> None:
    # list_events had no fitting code and sent 16.8 KB here (20 messages of ~300 characters); its page names
    # its items, and it is fitted like every list
    rows = [
        {
            "severity": "ERROR",
            "source_type": "RAYLET",
            "time": str(1_764_500_000 - i),
            "message": f"Worker {chr(97 + i % 26)}{chr(97 + i // 26)} died: " + "the raylet lost it " * 15,
            "custom_fields": {"node_id": "a" * 56},
        }
        for i in range(300)
    ]
    page = build_event_list(rows, EventFilter(), limit=EVENTS_SHOWN.default, notes=[])
    assert page.shown == EVENTS_SHOWN.default
    result = tool_result(page, render_event_list)
    shown = (result.structured_content or {})["shown"]
    assert as_sent(result) <= RESPONSE_BUDGET_BYTES and 1 <= shown < EVENTS_SHOWN.default
    assert f"{EVENTS_SHOWN.default - shown} more of these {EVENTS_SHOWN.default} events left out" in text_of(
        result
    )


async def kuberay_log(tmp_path: Path, lines: list[str], args: dict[str, Any]) -> tuple[CallToolResult, str]:
    """kuberay_logs of the head pod whose log is ``lines``, through the loopback API server
    (tests/kube_apiserver.py, in a thread, cutting a reply at limitBytes as Kubernetes does); the pod's name."""
    state = KubeState()
    head = head_pod()
    for obj in (raycluster(), head_service(), head):
        state.put(obj)
    state.logs[(head["metadata"]["name"], "ray-head", False)] = "\n".join(lines) + "\n"
    with serve(state) as url:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url, static_token=True)
        settings = Settings(address=f"k8s://{NS}/{CLUSTER}", kubeconfig=kubeconfig, embedded="never")
        async with mcp_client(settings) as client:
            result = await client.call_tool("kuberay_logs", {"pod": "head", **args})
    assert not result.is_error, text_of(result)
    return result, head["metadata"]["name"]


async def test_a_kuberay_log_over_the_budget_is_sent_within_it_with_its_newest_lines_and_one_note(
    tmp_path: Path,
) -> None:
    # kuberay_logs had no fitting: 16 KB of a pod's log, sent twice (text and structured content), was 35 KB
    lines = [f'{i:04d} raylet said "worker {i} exited" at C:\\ray\\logs' for i in range(2000)]
    assert len("\n".join(lines[-300:]).encode()) < KUBE_LOG_BYTES  # the API server's own cut is not at play
    result, pod = await kuberay_log(tmp_path, lines, {"lines": 300})
    assert as_sent(result) <= RESPONSE_BUDGET_BYTES, as_sent(result)
    structured = result.structured_content or {}
    shown = structured["lines"]
    assert 1 <= len(shown) < 300 and shown == lines[-len(shown) :]  # the newest, in order, none cut
    note = f"{300 - len(shown)} older line(s) left out, the newest kept"
    assert text_of(result).count("left out") == 1 and note in text_of(result)
    assert [h for h in structured["hints"] if "left out" in h] == [structured["hints"][-1]]
    assert text_of(result).startswith(f"{len(shown)} line(s) of pod {pod}:")


async def test_a_kuberay_log_past_the_read_limit_still_ends_with_its_newest_line(tmp_path: Path) -> None:
    # The API server cuts at limitBytes from the start of the tail: 400 lines of 100 bytes came back as the
    # oldest 163 of them, the last one cut, and the newest were never read. They are asked again, fewer.
    lines = [f"{i:04d} " + "x" * 95 for i in range(1000)]
    result, _ = await kuberay_log(tmp_path, lines, {"lines": 400})
    structured = result.structured_content or {}
    shown = structured["lines"]
    assert shown and shown == lines[-len(shown) :], shown[-1:]  # the newest line, whole
    assert as_sent(result) <= RESPONSE_BUDGET_BYTES, as_sent(result)
    fitted = KUBE_LOG_BYTES // 101
    assert f"The newest {fitted} of the 400 lines asked fill the 16,384-byte read" in text_of(result)
    assert text_of(result).count("left out") == 1
