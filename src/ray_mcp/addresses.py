"""Every address form ray-mcp reads, one row each: how it is recognised and read, how help names it, what it is.

One table, read by everything that cares what an address is: cluster.py resolves a row's ``kind``; server/context.py
and doctor.py ask the row whether the address names a Kubernetes object or a terminated cluster's record;
settings, the CLI's help and every error message name the forms through ``ADDRESS_FORMS``; server.json lists
``SERVER_JSON_ADDRESS`` (tests/test_addresses.py keeps it equal). Each row carries addresses of its form that
must read (``samples``) and malformed ones that must be refused (``refused``); tests/test_addresses.py runs
every row's, so a new form that resolves like an existing kind is its row here and its line in server.json.

No heavy import at module level: settings reads this table when the process starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from ray_mcp.errors import InvalidArgument


AddressKind = Literal["dashboard", "ray_client", "gcs", "local", "kubernetes", "history"]
DEFAULT_DASHBOARD_PORT = 8265
# A host name or IP address (IPv6 in brackets): "not a url" is none.
HOST = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]")


@dataclass(frozen=True)
class Address:
    """An address as read: its kind (how it is resolved), the text given, and the host and port it names.

    ``url`` is the dashboard URL when the form names one outright (a dashboard URL); otherwise cluster.py finds it.
    """

    kind: AddressKind
    original: str
    host: str
    port: int | None
    url: str | None = None

    @property
    def default_dashboard_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{DEFAULT_DASHBOARD_PORT}"


@dataclass(frozen=True)
class AddressForm:
    """One row: ``read`` returns None when the text is not of this form, and raises InvalidArgument when it is
    but cannot be read. ``kubernetes``: it names a KubeRay object (the Kubernetes tools apply); ``record``: a
    terminated cluster's record, read-only."""

    kind: AddressKind
    words: str  # how help and messages name the form, its example included
    read: Callable[[str], Address | None]
    samples: tuple[str, ...]
    refused: tuple[str, ...] = ()
    kubernetes: bool = False
    record: bool = False


def _local(text: str) -> Address | None:
    # Ray's words for "the cluster on this machine" (RAY_ADDRESS=auto): as if no address were given.
    return Address("local", text, "127.0.0.1", DEFAULT_DASHBOARD_PORT) if text in ("auto", "local") else None


def _history(text: str) -> Address | None:
    if not text.startswith("history+"):
        return None
    from ray_mcp.sources.history import parse_history_address

    url = urlsplit(parse_history_address(text).url)
    return Address("history", text, url.hostname or "", url.port)


def _kubernetes(text: str) -> Address | None:
    if not text.startswith("k8s://"):
        return None
    from ray_mcp.sources.kube_target import parse_kube_address

    parse_kube_address(text)  # names checked as Kubernetes checks them, before anything is built from them
    return Address("kubernetes", text, "", None)


def _dashboard(text: str) -> Address | None:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        return None
    if not parts.hostname:
        raise _invalid(f"The dashboard URL {text!r} has no host. Example: http://127.0.0.1:8265.")
    url = text.rstrip("/")
    return Address("dashboard", url, parts.hostname, parts.port, url=url)


def _ray_https(text: str) -> Address | None:
    # Ray's scheme with TLS named in it (as ``history+http`` names its transport): the dashboard, served over
    # HTTPS by a proxy or an ingress in front of it; without a port, HTTPS's own (443), not the dashboard's 8265.
    if not text.startswith("ray+https://"):
        return None
    parts = urlsplit(text.removeprefix("ray+"))
    if not parts.hostname:
        raise _invalid(
            f"The TLS dashboard address {text!r} has no host. Example: ray+https://ray.example.com."
        )
    url = parts._replace(path=parts.path.rstrip("/"), query="", fragment="").geturl()
    return Address("dashboard", text, parts.hostname, parts.port, url=url)


def _ray_client(text: str) -> Address | None:
    parts = urlsplit(text)
    if parts.scheme != "ray":
        return None
    if not parts.hostname:
        raise _invalid(f"The Ray Client address {text!r} has no host. Example: ray://host:10001.")
    return Address("ray_client", text, parts.hostname, parts.port)


def _gcs(text: str) -> Address | None:
    if "://" in text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, ""
    if not HOST.fullmatch(host) or (port and not port.isdigit()):
        raise _invalid(f"Cannot read {text!r} as a Ray address: expected {ADDRESS_FORMS}.")
    return Address("gcs", text, host.strip("[]"), int(port) if port else None)


# Tried in this order: the first row whose ``read`` is not None reads the address.
FORMS: tuple[AddressForm, ...] = (
    AddressForm("local", "auto for the cluster on this machine", _local, samples=("auto", "local")),
    AddressForm(
        "dashboard",
        "a dashboard URL http://host:8265",
        _dashboard,
        samples=("http://10.0.0.5:8265", "https://ray.example.com/"),
        refused=("http://", "https://:8265"),
    ),
    AddressForm(
        "dashboard",
        "a dashboard behind TLS ray+https://host[:port]",
        _ray_https,
        samples=("ray+https://ray.example.com", "ray+https://10.0.0.5:8443/"),
        refused=("ray+https://", "ray+https://:8443"),
    ),
    AddressForm(
        "ray_client",
        "a Ray Client address ray://host:10001",
        _ray_client,
        samples=("ray://head:10001",),
        refused=("ray://",),
    ),
    AddressForm(
        "kubernetes",
        "a KubeRay RayCluster, RayJob or RayService k8s://[context/]namespace/name",
        _kubernetes,
        samples=("k8s://default/raycluster-kuberay", "k8s://arn:aws:eks:us-west-2:1:cluster/prod/ml/rc"),
        refused=("k8s://", "k8s://default/..", "k8s://default/Upper", "k8s://ns/a%2Fb", "k8s://../rc"),
        kubernetes=True,
    ),
    AddressForm(
        "history",
        "a History Server record history+http://host:port/namespace/kind/name[/session]",
        _history,
        samples=("history+http://hs:30080/ml/RayJob/train-lr",),
        refused=("history+ftp://hs/ml/rayjob/x", "history+http://hs:30080/ml/pod/x"),
        record=True,
    ),
    AddressForm(  # last: it reads what has no scheme
        "gcs",
        "a GCS address host:6379",
        _gcs,
        samples=("10.0.0.5:6379", "head-svc", "[::1]:6379"),
        refused=("host:port", "not a url", "head;rm:6379", "[zz]:6379"),
    ),
)

ADDRESS_FORMS = ", ".join(f.words for f in FORMS[:-1]) + f", or {FORMS[-1].words}"
# The --address argument of server.json, word for word (tests/test_addresses.py holds it to this).
SERVER_JSON_ADDRESS = f"The Ray cluster: {ADDRESS_FORMS}. Unset: a local cluster, else an embedded one."


def read_address(address: str) -> tuple[AddressForm, Address]:
    """The row that reads ``address``, and the address as read. Raises InvalidArgument for nonsense."""
    text = address.strip()
    if not text:
        raise _invalid(f"The Ray address is empty. Pass {ADDRESS_FORMS}.")
    for form in FORMS:
        if (read := form.read(text)) is not None:
            return form, read
    raise _invalid(f"Unsupported address scheme in {address!r}: expected {ADDRESS_FORMS}.")


def parse_address(address: str) -> Address:
    """Classify an address the way Ray's CLIs accept them (ADDRESS_FORMS). Raises InvalidArgument for nonsense."""
    return read_address(address)[1]


def form_of(address: str | None) -> AddressForm | None:
    """The row of a configured address, or None when there is none or it cannot be read (the first call says why)."""
    if not address or not address.strip():
        return None
    try:
        return read_address(address)[0]
    except _invalid_type():
        return None


def _invalid(message: str) -> InvalidArgument:
    """Our InvalidArgument, imported when first raised: settings reads this table to describe --address, and a
    setting that cannot serve is refused before the MCP SDK is imported (tests/test_startup.py)."""
    from ray_mcp.errors import InvalidArgument

    return InvalidArgument(message)


def _invalid_type() -> type[InvalidArgument]:
    from ray_mcp.errors import InvalidArgument

    return InvalidArgument
