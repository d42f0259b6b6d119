"""Every knob of ray-mcp in one place.

Precedence: command-line flags, then environment (``RAY_MCP_*``, plus Ray's own ``RAY_ADDRESS``), then
the defaults below.
"""

import ipaddress
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ray_mcp.addresses import ADDRESS_FORMS  # what --address may be: one row per form
from ray_mcp.limits import CONFIRM_TOKEN_TTL_S, REPLICA_KEY_BYTES, SECRET_REGISTRY_MIB

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (a non-loopback bind needs a token)."""
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


DEFAULT_HOST = "127.0.0.1"
# Not 8000 (Ray Serve's HTTP proxy), 8265 (dashboard), 6379 (GCS), 10001 (Ray Client), 8080 (KubeRay metrics),
# 9000 (Serve gRPC), 52365 (dashboard agent), 8076 (object manager), 10002-19999 (workers), 3000/9090 (Grafana,
# Prometheus): no Ray component listens on 8270.
DEFAULT_PORT = 8270
DEFAULT_REQUEST_TIMEOUT_S = 10.0
DEFAULT_CLUSTER_START_TIMEOUT_S = 90.0
DEFAULT_HTTP_HEADER_TIMEOUT_S = 10.0
DEFAULT_HTTP_MAX_CONNECTIONS = 256
DEFAULT_HTTP_MAX_SESSIONS = 64
DEFAULT_HTTP_SESSION_IDLE_TIMEOUT_S = 1800.0
DEFAULT_HTTP_SESSIONS_PER_CLIENT = 16  # a quarter of the sessions: one client never holds them all
# No tool takes more: a runtime_env or a Serve config is kilobytes. A bigger body is refused (413) before it is
# parsed, so one client's multi-MB calls cannot grow the server or stall the event loop for other sessions.
DEFAULT_HTTP_MAX_REQUEST_KIB = 1024
DEFAULT_HTTP_SESSION_UNUSED_TIMEOUT_S = 30.0
# Ray's own environment variable for its authentication mode ("token" or "disabled").
RAY_AUTH_MODE_ENV = "RAY_AUTH_MODE"

Transport = Literal["stdio", "sse", "streamable-http"]
EmbeddedMode = Literal["auto", "always", "never"]


class Settings(BaseSettings):
    """Configuration of one ray-mcp server process."""

    model_config = SettingsConfigDict(env_prefix="RAY_MCP_", extra="ignore", populate_by_name=True)

    address: str | None = Field(
        default=None,
        validation_alias=AliasChoices("address", "RAY_MCP_ADDRESS", "RAY_ADDRESS"),
        description=f"Cluster to use: {ADDRESS_FORMS}. "
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
    http_header_timeout_s: float = Field(
        default=DEFAULT_HTTP_HEADER_TIMEOUT_S,
        gt=0,
        le=300,
        description="HTTP transports: a connection whose request headers are not complete within this time "
        "is closed.",
    )
    http_max_connections: int = Field(
        default=DEFAULT_HTTP_MAX_CONNECTIONS,
        ge=1,
        description="HTTP transports: open connections (and requests in flight) above this answer 503.",
    )
    http_max_request_kib: int = Field(
        default=DEFAULT_HTTP_MAX_REQUEST_KIB,
        ge=16,
        le=65536,
        description="HTTP transports: a request body larger than this many KiB is refused with 413, unread.",
    )
    max_sessions: int = Field(
        default=DEFAULT_HTTP_MAX_SESSIONS,
        ge=1,
        description="Streamable HTTP: MCP sessions open at once; a new session above this is refused (503).",
    )
    replica_key_file: Path | None = Field(
        default=None,
        description="Streamable HTTP behind a load balancer: a file of at least 32 random bytes that every "
        "replica reads, so that a confirmation token or an elicitation's state made by one is honoured by "
        "another. 2026-07-28 clients can then be served by any replica; 2025 clients keep their session on one.",
    )
    session_idle_timeout_s: float = Field(
        default=DEFAULT_HTTP_SESSION_IDLE_TIMEOUT_S,
        gt=0,
        description="Streamable HTTP: a session with no request for this long is closed.",
    )
    max_sessions_per_client: int = Field(
        default=DEFAULT_HTTP_SESSIONS_PER_CLIENT,
        ge=1,
        description="Streamable HTTP: sessions one client (its address) may hold; the rest stay for others. A "
        "client at its share that opens another gives up its longest-idle one.",
    )
    session_unused_timeout_s: float = Field(
        default=DEFAULT_HTTP_SESSION_UNUSED_TIMEOUT_S,
        gt=0,
        description="Streamable HTTP: a session that made no request after its initialize is closed after this.",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="HTTP transports: addresses (or CIDR ranges) of the reverse proxies whose X-Forwarded-For "
        "names the client; from any other peer the header is ignored. Default: none.",
    )
    secret_registry_mib: int = Field(
        default=SECRET_REGISTRY_MIB,
        ge=1,
        le=4096,
        description="Memory for the secret values ray-mcp masks (jobs' and Serve apps' env_vars, tokens); a "
        "cluster whose values exceed it gets answers withheld, never shown unmasked.",
    )
    request_timeout_s: float = Field(
        default=DEFAULT_REQUEST_TIMEOUT_S, gt=0, le=300, description="Timeout of each dashboard request."
    )
    cluster_start_timeout_s: float = Field(
        default=DEFAULT_CLUSTER_START_TIMEOUT_S,
        gt=0,
        description="How long to wait for the embedded cluster.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    local_logs: bool = Field(
        default=True,
        description="tail_logs reads the log of a node that runs on this machine straight from its file (the "
        "node's logs directory as the cluster reports it); off: always through the dashboard.",
    )

    # -- safety ------------------------------------------------------------------------------------------
    read_only: bool = Field(
        default=False, description="List only read-only tools: no submit, stop, deploy or kill."
    )
    allow_destructive: bool = Field(
        default=False, description="List destructive tools (delete_job, kill_actor, serve_delete_app)."
    )
    auth_token: SecretStr | None = Field(
        default=None, description="Bearer token that HTTP clients must send (Authorization: Bearer <token>)."
    )
    auth_token_file: Path | None = Field(default=None, description="File holding the bearer token.")
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Extra Origin values accepted by the HTTP transports (browser clients).",
    )
    audit_log: Path | None = Field(
        default=None, description="File for the audit trail of write and destructive calls (default: stderr)."
    )
    upload_roots: Annotated[list[Path] | None, NoDecode] = Field(
        default=None,
        description="Directories under which local runtime_env paths (working_dir, py_modules, pip/uv/conda "
        "files) may be read and uploaded. Unset: the starting directory on stdio, none over HTTP. "
        "Env RAY_MCP_UPLOAD_ROOTS: a JSON list or paths separated by ':'.",
    )
    confirm_token_ttl_s: float = Field(
        default=CONFIRM_TOKEN_TTL_S, gt=0, le=3600, description="Lifetime of a confirmation token."
    )

    # -- credentials passed through to the Ray dashboard --------------------------------------------------
    ray_auth_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("ray_auth_token", "RAY_MCP_RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN"),
        description="Ray's own dashboard token (token authentication), sent as Authorization: Bearer.",
    )
    ray_auth_token_path: Path | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "ray_auth_token_path", "RAY_MCP_RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN_PATH"
        ),
        description="File holding Ray's dashboard token.",
    )
    dashboard_headers: dict[str, str] = Field(
        default_factory=dict,
        description='Extra headers for every dashboard request, as JSON: {"X-Proxy": "v"}.',
    )
    dashboard_verify_tls: bool = Field(
        default=True, description="Verify the certificate of an https dashboard."
    )
    dashboard_ca_file: Path | None = Field(default=None, description="CA bundle for an https dashboard.")

    # -- stacks and profiles (stack_traces, cpu_profile) --------------------------------------------------
    stack_source: Literal["auto", "dashboard", "py-spy"] = Field(
        default="auto",
        description="Where stacks and CPU profiles come from: auto (the dashboard's profiling routes when the "
        "head runs with RAY_DASHBOARD_ENABLE_PROFILING=1, else py-spy here for processes on this host), "
        "dashboard only, or py-spy (local) only.",
    )
    py_spy: str | None = Field(
        default=None,
        description="Path of py-spy (default: beside this Python, then the PATH).",
    )
    profiling_tools: bool = Field(
        default=False,
        description='List memory_profile and gpu_profile (toolset "profiling": the dashboard\'s memray and GPU '
        "routes) for a cluster ray-mcp did not start; the embedded cluster lists them anyway.",
    )

    # -- Kubernetes (a k8s:// address: KubeRay) -----------------------------------------------------------
    kubeconfig: Path | None = Field(
        default=None, description="Kubeconfig file for a k8s:// address (default KUBECONFIG, ~/.kube/config)."
    )
    kube_context: str | None = Field(default=None, description="Kubeconfig context of a k8s:// address.")
    namespace: str | None = Field(default=None, description="Namespace of a k8s:// address without one.")
    kubernetes_tools: bool = Field(
        default=False,
        description="List the Kubernetes tools even when the address is not k8s:// (they then name one).",
    )

    # -- Prometheus: history for get_metrics (toolset "metrics") ----------------------------------------
    prometheus: str | None = Field(
        default=None,
        validation_alias=AliasChoices("prometheus", "RAY_MCP_PROMETHEUS", "RAY_PROMETHEUS_HOST"),
        description="URL of the Prometheus that scrapes this cluster (Ray's own RAY_PROMETHEUS_HOST is read "
        "too). Unset: the one ray-mcp starts beside its embedded cluster, else the one the dashboard reports.",
    )
    prometheus_headers: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "prometheus_headers", "RAY_MCP_PROMETHEUS_HEADERS", "RAY_PROMETHEUS_HEADERS"
        ),
        description="Headers for every request to the configured Prometheus, in Ray's RAY_PROMETHEUS_HEADERS "
        'format: a JSON object {"Authorization": "Bearer ..."} or a list of [name, value] pairs. Masked in '
        "every answer.",
    )
    metrics_tools: bool = Field(
        default=False,
        description="List get_metrics even when no Prometheus is configured and no embedded one can start (it "
        "then asks the dashboard for one, or reads the nodes' metrics endpoints now).",
    )

    credentials_from_entry: bool = Field(
        default=False,
        exclude=True,
        description="Set for a cluster of a clusters file: its credentials come from its entry alone.",
    )
    clusters_file: Path | None = Field(
        default=None,
        description="TOML file naming several clusters ([clusters.<name>] address, auth_token, headers); "
        "tools then take an optional `cluster` argument, the first cluster being the default.",
    )

    @field_validator("prometheus")
    @classmethod
    def _prometheus_url(cls, value: str | None) -> str | None:
        return prometheus_url(value)

    @field_validator("prometheus_headers")
    @classmethod
    def _prometheus_header_format(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_prometheus_headers(value.get_secret_value())  # refused at start, not at the first query
        return value

    def prometheus_request_headers(self) -> list[tuple[str, str]]:
        """The configured Prometheus headers, as (name, value) pairs (a name may repeat, as in Ray's format)."""
        if self.prometheus_headers is None:
            return []
        return parse_prometheus_headers(self.prometheus_headers.get_secret_value())

    @field_validator("upload_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: Any) -> Any:
        """RAY_MCP_UPLOAD_ROOTS: a JSON list, or paths separated by os.pathsep (like PATH)."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part for part in text.split(os.pathsep) if part.strip()]
        return value

    def effective_upload_roots(self, cwd: Path | None = None) -> list[Path]:
        """The directories local uploads may come from, resolved (symlinks and ``..``); [] means none.

        Unset: the directory the server started in over stdio (the user's own machine and project), and
        nothing over HTTP (a remote client must not read the server's files).
        """
        if self.upload_roots is not None:
            roots = self.upload_roots
        elif self.transport == "stdio":
            roots = [cwd or Path.cwd()]
        else:
            roots = []
        return [Path(root).expanduser().resolve() for root in roots]

    def cluster_settings(self) -> dict[str, "Settings"]:
        """One Settings per cluster of the clusters file, in file order; {} without a file.

        Each cluster's credentials come from its own entry only: Ray's token (RAY_AUTH_TOKEN, its path) and
        the dashboard headers of the environment are not inherited, so one cluster's secret never reaches
        another cluster's dashboard.
        """
        if self.clusters_file is None:
            return {}
        isolated: dict[str, object] = {
            "ray_auth_token": None,
            "ray_auth_token_path": None,
            "dashboard_headers": {},
            "prometheus": None,  # one cluster's Prometheus (and its headers) is not another's
            "prometheus_headers": None,
            "credentials_from_entry": True,
        }
        return {
            name: self.model_copy(update={**isolated, **update})
            for name, update in load_clusters_file(self.clusters_file).items()
        }

    def replica_key(self) -> bytes | None:
        """The key replicas share (replica_key_file), or None: every key is this process's own."""
        if self.replica_key_file is None:
            return None
        key = self.replica_key_file.read_bytes().strip()
        if len(key) < REPLICA_KEY_BYTES:
            raise ValueError(
                f"{self.replica_key_file} holds {len(key)} bytes; a replica key needs at least {REPLICA_KEY_BYTES} "
                "(e.g. `head -c 48 /dev/urandom | base64 > key`)."
            )
        return key

    def resolved_auth_token(self) -> str | None:
        """The HTTP bearer token, from the setting or the token file."""
        if self.auth_token is not None:
            return self.auth_token.get_secret_value()
        if self.auth_token_file is not None:
            return self.auth_token_file.read_text().strip() or None
        return None

    def dashboard_request_headers(self, *, local_cluster: bool = False) -> dict[str, str]:
        """Headers for every dashboard request: the configured extras, and Ray's token when there is one.

        ``local_cluster``: the cluster was started here (embedded) or found on this machine without an
        address, where Ray itself turns token mode on when ~/.ray/auth_token exists.
        """
        headers = dict(self.dashboard_headers)
        token = self.resolved_ray_auth_token(local_cluster=local_cluster)
        if token and not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def resolved_ray_auth_token(self, *, local_cluster: bool = False) -> str | None:
        """Ray's dashboard token: the setting (RAY_AUTH_TOKEN), then its file (RAY_AUTH_TOKEN_PATH); then Ray's
        default ~/.ray/auth_token, only where Ray itself would send it.

        Ray 2.60's clients send a token only in token mode: RAY_AUTH_MODE=token, or (with RAY_AUTH_MODE unset) a
        local cluster that ``ray start``/``ray.init`` put in token mode because ~/.ray/auth_token exists. A
        cluster of a clusters file gets only what its own entry names.
        """
        if self.ray_auth_token is not None:
            return self.ray_auth_token.get_secret_value()
        if self.ray_auth_token_path is not None:
            return _read_token(self.ray_auth_token_path)
        if self.credentials_from_entry:
            return None
        mode = os.environ.get(RAY_AUTH_MODE_ENV, "").strip().lower()
        if mode == "token" or (not mode and local_cluster):
            return _read_token(Path.home() / ".ray" / "auth_token")
        return None


def prometheus_url(value: str | None) -> str | None:
    """An http(s) URL with a host (Ray's RAY_PROMETHEUS_HOST has the same form); empty means unset."""
    if value is None or not value.strip():
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{value!r} is not a Prometheus URL: expected http(s)://host:port, e.g. http://127.0.0.1:9090"
        )
    return value.strip().rstrip("/")


def parse_prometheus_headers(text: str) -> list[tuple[str, str]]:
    """RAY_PROMETHEUS_HEADERS as Ray's dashboard reads it (metrics_head.parse_prom_headers): a JSON object of
    string values, or a JSON list of [name, value] pairs. Raises ValueError otherwise (never quoting it)."""
    if not text.strip():
        return []
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the Prometheus headers are not JSON ({exc.msg} at character {exc.pos})") from None
    if isinstance(parsed, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in parsed.items()):
        return list(parsed.items())
    if isinstance(parsed, list) and all(
        isinstance(e, list) and len(e) == 2 and all(isinstance(v, str) for v in e) for e in parsed
    ):
        return [(e[0], e[1]) for e in parsed]
    raise ValueError(
        'the Prometheus headers must be a JSON object of strings, {"H1": "V1"}, or a list of [name, value] '
        'pairs, [["H1", "V1"], ["H1", "V2"]], as Ray reads RAY_PROMETHEUS_HEADERS'
    )


def _read_token(path: Path) -> str | None:
    try:
        return path.expanduser().read_text().strip() or None
    except OSError:
        return None


CLUSTER_KEYS = {
    "address",
    "dashboard_url",
    "auth_token",
    "auth_token_path",
    "headers",
    "verify_tls",
    "ca_file",
    "prometheus",
    "prometheus_headers",
}


def load_clusters_file(path: Path) -> dict[str, dict[str, object]]:
    """Read a clusters file into per-cluster Settings updates. Raises ValueError naming what is wrong.

    [clusters.prod]
    address = "http://prod-head:8265"
    auth_token = "..."               # Ray's dashboard token (or auth_token_path = "...")
    headers = { X-Proxy-Auth = "..." }
    prometheus = "http://prom:9090"  # and prometheus_headers = { Authorization = "Bearer ..." }
    """
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"Cannot read the clusters file {path}: {exc}") from exc
    clusters = data.get("clusters")
    if not isinstance(clusters, dict) or not clusters:
        raise ValueError(f"The clusters file {path} has no [clusters.<name>] table.")
    out: dict[str, dict[str, object]] = {}
    for name, entry in clusters.items():
        if not isinstance(entry, dict) or not entry.get("address"):
            raise ValueError(f"Cluster {name!r} in {path} needs an address: {ADDRESS_FORMS}.")
        unknown = set(entry) - CLUSTER_KEYS
        if unknown:
            raise ValueError(
                f"Cluster {name!r} in {path} has unknown keys {sorted(unknown)}; known: {sorted(CLUSTER_KEYS)}."
            )
        update: dict[str, object] = {
            "address": str(entry["address"]),
            "embedded": "never",
            "dashboard_url": entry.get("dashboard_url"),
        }
        if "auth_token" in entry:
            update["ray_auth_token"] = SecretStr(str(entry["auth_token"]))
        if "auth_token_path" in entry:
            update["ray_auth_token_path"] = Path(str(entry["auth_token_path"]))
        if "headers" in entry:
            update["dashboard_headers"] = {str(k): str(v) for k, v in dict(entry["headers"]).items()}
        if "verify_tls" in entry:
            update["dashboard_verify_tls"] = bool(entry["verify_tls"])
        if "ca_file" in entry:
            update["dashboard_ca_file"] = Path(str(entry["ca_file"]))
        if "prometheus" in entry:
            try:
                update["prometheus"] = prometheus_url(str(entry["prometheus"]))
            except ValueError as exc:
                raise ValueError(f"Cluster {name!r} in {path}: {exc}.") from None
        if "prometheus_headers" in entry:  # a table, as `headers` is
            update["prometheus_headers"] = SecretStr(
                json.dumps({str(k): str(v) for k, v in dict(entry["prometheus_headers"]).items()})
            )
        out[str(name)] = update
    return out
