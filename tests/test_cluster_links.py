"""Resource links and job URIs carry the cluster they belong to; a read refuses a link whose cluster it cannot
match, and never reads another cluster's namesake.

Two stand-in dashboards (httpx.MockTransport, told apart by host) hold a job under the same submission id with
different entrypoints, the case that once read the wrong one; a real MCP client reads the links the tools hand
out.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceLink, TextResourceContents

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
SID = "raysubmit_same_name_7"
ENTRYPOINTS = {"prod.test": "python prod_train.py", "staging.test": "python staging_try.py"}
ONLY_STAGING = "raysubmit_only_staging"


def dashboards(request: httpx.Request) -> httpx.Response:
    host = request.url.host
    jobs = {SID: ENTRYPOINTS[host]}
    if host == "staging.test":
        jobs[ONLY_STAGING] = "python only.py"
    path = request.url.path
    for sid, entrypoint in jobs.items():
        if path == f"/api/jobs/{sid}":
            job = {"type": "SUBMISSION", "job_id": "06000000", "submission_id": sid, "status": "RUNNING"}
            return httpx.Response(200, json={**job, "entrypoint": entrypoint})
    return httpx.Response(404, text="not here")


def server_of(tmp_path: Path, names: tuple[str, ...]):  # type: ignore[no-untyped-def]
    clusters = tmp_path / "clusters.toml"
    clusters.write_text("".join(f'[clusters.{n}]\naddress = "http://{n}.test:8265"\n' for n in names))
    settings = Settings(clusters_file=clusters, request_timeout_s=2)
    return build_server(settings, http_transport=httpx.MockTransport(dashboards), gcs_lookup=None)


async def read(client: Client, uri: str) -> str:
    contents = (await client.read_resource(uri)).contents
    assert isinstance(contents[0], TextResourceContents)
    return contents[0].text


async def refused(client: Client, uri: str) -> str:
    with pytest.raises(MCPError) as raised:
        await client.read_resource(uri)
    return raised.value.error.message


async def test_a_link_reads_its_own_clusters_job_and_a_mismatched_one_is_refused(tmp_path: Path) -> None:
    server = server_of(tmp_path, ("prod", "staging"))
    try:
        async with Client(server, mode="legacy") as client:  # 2025: resources/subscribe
            for cluster, host in (("staging", "staging.test"), ("prod", "prod.test")):
                answer = await client.call_tool("get_job", {"job": SID, "cluster": cluster})
                (link,) = [c for c in answer.content if isinstance(c, ResourceLink)]
                assert str(link.uri) == f"ray://jobs/{SID}?cluster={cluster}"
                text = await read(client, str(link.uri))
                assert ENTRYPOINTS[host] in text and f"?cluster={cluster}" in text  # its subscribe URI too
            default = await client.call_tool("get_job", {"job": SID})  # no cluster named: the default's
            assert any(
                str(c.uri).endswith("?cluster=prod") for c in default.content if isinstance(c, ResourceLink)
            )

            assert "does not serve" in await refused(client, f"ray://jobs/{SID}?cluster=elsewhere")
            assert "must name its cluster" in await refused(client, f"ray://jobs/{SID}")  # ambiguous here
            with pytest.raises(MCPError):
                await client.subscribe_resource(f"ray://jobs/{SID}?cluster=elsewhere")
            with pytest.raises(MCPError) as missing:  # the job is staging's: prod has none to watch
                await client.subscribe_resource(f"ray://jobs/{ONLY_STAGING}?cluster=prod")
            assert "No job" in missing.value.error.message
            await client.subscribe_resource(f"ray://jobs/{ONLY_STAGING}?cluster=staging")
            assert server.job_watchers.watched == {f"ray://jobs/{ONLY_STAGING}?cluster=staging": 1}
    finally:
        await server.app.aclose()


async def test_a_server_of_one_cluster_keeps_its_links_and_uris_as_they_were(tmp_path: Path) -> None:
    server = build_server(
        Settings(address="http://prod.test:8265", request_timeout_s=2),
        http_transport=httpx.MockTransport(dashboards),
        gcs_lookup=None,
    )
    try:
        async with Client(server) as client:
            answer = await client.call_tool("get_job", {"job": SID})
            (link,) = [c for c in answer.content if isinstance(c, ResourceLink)]
            assert str(link.uri) == f"ray://jobs/{SID}"
            assert ENTRYPOINTS["prod.test"] in await read(client, str(link.uri))
            assert "does not serve" in await refused(client, f"ray://jobs/{SID}?cluster=staging")
    finally:
        await server.app.aclose()
