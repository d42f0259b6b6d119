"""Addresses in all three forms, and the precedence flags > env > defaults."""

from __future__ import annotations

import pytest
from tests.support import mcp_client

from ray_mcp.cli import parse_settings
from ray_mcp.cluster import parse_address
from ray_mcp.errors import InvalidArgument
from ray_mcp.settings import Settings
from ray_mcp.sources.gcs import GCS_LOOKUP


@pytest.mark.parametrize(
    ("address", "kind", "host", "port", "dashboard"),
    [
        ("http://10.0.0.5:8265", "dashboard", "10.0.0.5", 8265, "http://10.0.0.5:8265"),
        ("https://ray.example.com/", "dashboard", "ray.example.com", None, "http://ray.example.com:8265"),
        ("ray://head:10001", "ray_client", "head", 10001, "http://head:8265"),
        ("10.0.0.5:6379", "gcs", "10.0.0.5", 6379, "http://10.0.0.5:8265"),
        ("head-svc", "gcs", "head-svc", None, "http://head-svc:8265"),
        ("[::1]:6379", "gcs", "::1", 6379, "http://[::1]:8265"),
    ],
)
def test_each_address_form_is_classified(address, kind, host, port, dashboard) -> None:
    parsed = parse_address(address)
    assert (parsed.kind, parsed.host, parsed.port, parsed.default_dashboard_url) == (
        kind,
        host,
        port,
        dashboard,
    )


@pytest.mark.parametrize(
    "address", ["", "ftp://x", "http://", "host:port", "ray://", "not a url", "head;rm:6379", "[zz]:6379"]
)
def test_malformed_addresses_are_rejected_with_an_example(address) -> None:
    with pytest.raises(InvalidArgument, match=r"Example|expected|empty|scheme"):
        parse_address(address)


def test_flags_override_env_which_overrides_defaults(monkeypatch) -> None:
    monkeypatch.delenv("RAY_MCP_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setenv("RAY_MCP_PORT", "9001")
    settings = parse_settings([])
    assert settings.address == "10.0.0.1:6379" and settings.port == 9001 and settings.transport == "stdio"
    monkeypatch.setenv("RAY_MCP_ADDRESS", "http://a:8265")
    assert parse_settings([]).address == "http://a:8265"
    settings = parse_settings(
        ["--address", "ray://b:10001", "--port", "9002", "--transport", "streamable-http"]
    )
    assert (settings.address, settings.port, settings.transport) == ("ray://b:10001", 9002, "streamable-http")


def test_the_gcs_reports_where_its_dashboard_listens(ray_cluster) -> None:
    assert GCS_LOOKUP.dashboard_of(ray_cluster.gcs_address, 10) == ray_cluster.dashboard_url


async def test_a_gcs_address_is_resolved_to_its_dashboard(ray_cluster) -> None:
    async with mcp_client(Settings(address=ray_cluster.gcs_address)) as client:
        result = await client.call_tool("cluster_status", {})
        assert not result.is_error
        assert result.structured_content["dashboard_url"] == ray_cluster.dashboard_url
