"""Reference docs as resources (from package data), and the live API reference of the installed Ray."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from ray_mcp.guard.redaction import clean_text
from ray_mcp.reference.pages import INDEX_URI, reference_pages

ROOT = Path(__file__).resolve().parents[1]


async def test_every_reference_page_is_listed_as_markdown_with_a_summary(offline_client: Client) -> None:
    listed = {r.uri: r for r in (await offline_client.list_resources()).resources}
    pages = reference_pages()
    assert len(pages) == len(list((ROOT / "docs" / "reference").glob("*.md")))
    assert INDEX_URI in listed
    for page in pages:
        resource = listed[page.uri]
        assert resource.mime_type == "text/markdown"
        assert resource.description, page.topic


async def test_the_index_lists_every_page_and_a_page_reads_back_whole(offline_client: Client) -> None:
    index = (await offline_client.read_resource(INDEX_URI)).contents[0].text
    for page in reference_pages():
        assert page.uri in index
        body = (await offline_client.read_resource(page.uri)).contents[0]
        assert body.mime_type == "text/markdown"
        # Whole, as every answer: through the output choke point, which masks any secret this process knows of
        # (a credential such as "s3", pinned by an earlier test, masks the word in "s3://").
        assert body.text == clean_text(page.path.read_text(encoding="utf-8"))


@pytest.mark.live
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ray.remote", "remote("),
        ("ray.util.placement_group.placement_group", "bundles"),
        ("ray.job_submission.JobSubmissionClient.submit_job", "entrypoint"),
        ("ray.serve.deployment", "max_ongoing_requests"),
    ],
)
async def test_the_api_template_returns_the_installed_signature_and_docstring(
    offline_client: Client, name: str, expected: str
) -> None:
    result = await offline_client.read_resource(f"ray-docs://api/{name}")
    content = result.contents[0]
    assert content.mime_type == "text/markdown"
    assert content.text.startswith(f"# {name}\n")
    assert expected in content.text
    import ray

    assert f"Ray {ray.__version__}" in content.text


@pytest.mark.live
async def test_an_unknown_api_name_is_not_found_with_close_matches(offline_client: Client) -> None:
    with pytest.raises(MCPError, match=r"ray\.serve\.deployment"):
        await offline_client.read_resource("ray-docs://api/ray.serve.delpoyment")
    with pytest.raises(MCPError, match="private"):
        await offline_client.read_resource("ray-docs://api/ray._private.worker")
    with pytest.raises(MCPError, match="not a Ray name"):
        await offline_client.read_resource("ray-docs://api/os.system")
    assert (await offline_client.list_tools()).tools  # still serving
