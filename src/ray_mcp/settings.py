"""Every knob of ray-mcp in one place.

Precedence: command-line flags, then environment (``RAY_MCP_*``, plus Ray's own ``RAY_ADDRESS``), then
the defaults below.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_REQUEST_TIMEOUT_S = 10.0
DEFAULT_CLUSTER_START_TIMEOUT_S = 90.0

Transport = Literal["stdio", "sse", "streamable-http"]
EmbeddedMode = Literal["auto", "always", "never"]


class Settings(BaseSettings):
    """Configuration of one ray-mcp server process."""

    model_config = SettingsConfigDict(env_prefix="RAY_MCP_", extra="ignore", populate_by_name=True)

    address: str | None = Field(
        default=None,
        validation_alias=AliasChoices("address", "RAY_MCP_ADDRESS", "RAY_ADDRESS"),
        description="Cluster to use: a dashboard URL (http://host:8265), ray://host:10001, or a GCS host:port. "
        "Unset means: use a local cluster on 127.0.0.1:8265 if one answers, else start an embedded one.",
    )
    dashboard_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("dashboard_url", "RAY_MCP_DASHBOARD_URL", "RAY_API_SERVER_ADDRESS"),
        description="Explicit dashboard URL, for when the dashboard is not on the default port of the address host.",
    )
    embedded: EmbeddedMode = Field(
        default="auto",
        description="auto: start a local cluster only when no address is given and none answers locally; "
        "always: always start one; never: fail instead of starting one.",
    )
    embedded_num_cpus: int | None = Field(default=None, ge=1, description="CPUs of the embedded cluster.")
    transport: Transport = "stdio"
    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    request_timeout_s: float = Field(
        default=DEFAULT_REQUEST_TIMEOUT_S, gt=0, le=300, description="Timeout of each dashboard request."
    )
    cluster_start_timeout_s: float = Field(
        default=DEFAULT_CLUSTER_START_TIMEOUT_S,
        gt=0,
        description="How long to wait for the embedded cluster.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
