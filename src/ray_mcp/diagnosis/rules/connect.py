"""A driver that never reached this cluster: it tried another address (hard-coded, a stale RAY_ADDRESS, a
cluster it cannot reach) again and again. The answer says which address it tried and which one this cluster
has."""

from __future__ import annotations

from ray_mcp.diagnosis.facts import ROOT, Chain, Edge, Kind, Say
from ray_mcp.diagnosis.graph import Graph
from ray_mcp.diagnosis.recognise import CONNECT_FAILED, TRIED
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import CONNECT_QUOTE_LINES, LOG_QUOTE_LINE_CHARS, NAMES_SHOWN
from ray_mcp.text import quoted, truncate_text

JOBS_DOC = "ray-docs://reference/12-job-submission"

NEVER_CONNECTED = Say(
    "never_connected",
    Edge.WAITS_ON,
    lambda f: (
        f"the driver never reached this cluster: it tried {quoted(f['tried'])}"
        + (f" ({f['attempts']} failed attempts)" if f["attempts"] > 1 else "")
        + ", but "
        + (
            f"this cluster's GCS is at {f['cluster']}"
            if f["cluster"]
            else "that is none of this cluster's nodes"
        )
        + (f" (nodes: {f['nodes']})" if f["nodes"] else "")
        + ". A submitted job's driver gets the cluster's address in RAY_ADDRESS: call ray.init() without an "
        "address (or fix the hard-coded one)"
    ),
)


def _host(address: str) -> str:
    return address.rsplit(":", 1)[0].removeprefix("ray://").strip("[]")


def _port(address: str) -> str:
    return address.rsplit(":", 1)[-1] if ":" in address else ""


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def same_cluster(address: str, cluster: str, ips: list[str]) -> bool:
    """Whether ``address`` is this cluster's: its GCS address, or its GCS port on one of its nodes (Ray logs a
    loopback address as the node's IP, and the lookup may give either)."""
    if address == cluster:
        return True
    here = {*ips, *LOOPBACK}
    if cluster:
        return _port(address) == _port(cluster) and _host(address) in here | {_host(cluster)}
    return _host(address) in ips


@rule(
    On.JOB,
    Kind.NOT_CONNECTED,
    order=5,
    severity=ROOT + 4,
    refs=(JOBS_DOC,),
    next_steps=("tail_logs job={sid} grep='Connecting|Failed to connect'",),
    reads=("driver_lines", "nodes", "cluster_address"),
)
def never_connected(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A driver that never reached the cluster (Ray's repeated connection failures in its log): the address it
    tried and the one this cluster has (its GCS, its nodes), when they differ."""
    lines = g.ev.driver_lines or []
    failures = [line for line in lines if CONNECT_FAILED.search(line)]
    tried = [m["addr"] or m["failed"] for line in lines for m in [TRIED.search(line)] if m]
    if not failures or not tried:
        return []
    address = tried[-1]
    cluster = g.ev.cluster_address or ""
    alive = [n for n in g.ev.nodes or [] if n.get("state") == "ALIVE"]
    ips = sorted({str(n.get("node_ip")) for n in alive if n.get("node_ip")})
    if same_cluster(address, cluster, ips):
        return []  # the right address: why it failed is another rule's
    job = g.ev.job or {}
    sid = job.get("submission_id") or job.get("job_id")
    quote = " | ".join(
        truncate_text(line.strip(), LOG_QUOTE_LINE_CHARS) for line in failures[-CONNECT_QUOTE_LINES:]
    )
    link = NEVER_CONNECTED(
        "", quote, tried=address, attempts=len(failures), cluster=cluster, nodes=", ".join(ips[:NAMES_SHOWN])
    )
    steps = [s.format(sid=sid) for s in never_connected.next_steps]
    return [Chain(ROOT + 4, Kind.NOT_CONNECTED, None, [link], steps, job_id)]
