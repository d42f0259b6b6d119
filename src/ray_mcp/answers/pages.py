"""The pages a person opens to look at a job: its page on the Ray dashboard, and Ray's Grafana dashboard over
the job's time span when the cluster exports metrics to a Grafana the dashboard knows (``/api/grafana_health``).

The dashboard's client routes by hash (``/#/jobs/<id>``, by job id, else by submission id: Ray 2.60's build).
A URL handed out never carries the credentials of the address ray-mcp was given (``user:password@``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from ray_mcp.errors import RayMCPError
from ray_mcp.models import JobInfo
from ray_mcp.sources.routes import Routes
from ray_mcp.text import quoted

GRAFANA_DISABLED = "DISABLED"  # ray.dashboard.modules.metrics.metrics_head.GRAFANA_HOST_DISABLED_VALUE


@dataclass(frozen=True)
class Page:
    key: str  # "dashboard" or "grafana": the input request's key on 2026-07-28
    title: str
    url: str


@dataclass(frozen=True)
class JobPages:
    pages: list[Page]
    note: str = ""  # why there is no Grafana page, when there is none


def without_credentials(url: str) -> str:
    """The URL with any ``user:password@`` removed (what a model or a client log may see)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _ms(iso: str | None) -> int | None:
    return int(datetime.fromisoformat(iso).timestamp() * 1000) if iso else None


def grafana_url(data: dict[str, object], info: JobInfo) -> str | None:
    """Ray's default Grafana dashboard for this session, over the job's span; None without one."""
    host = str(data.get("grafanaHost") or "")
    uids = data.get("dashboardUids")
    uid = uids.get("default") if isinstance(uids, dict) else None
    if urlsplit(host).scheme not in ("http", "https") or any(
        c.isspace() or not c.isprintable() for c in host
    ):
        return None  # none set up (or "DISABLED"), or not a URL a person could open
    if not isinstance(uid, str) or not uid:
        return None
    query: dict[str, str | int] = {"orgId": str(data.get("grafanaOrgId") or "1")}
    if data.get("sessionName"):
        query["var-SessionName"] = str(data["sessionName"])
    if data.get("dashboardDatasource"):
        query["var-datasource"] = str(data["dashboardDatasource"])
    if data.get("grafanaClusterFilter"):
        query["var-Cluster"] = str(data["grafanaClusterFilter"])
    start, end = _ms(info.start_time), _ms(info.end_time)
    if start is not None:
        query["from"] = start
        query["to"] = end if end is not None else "now"
    return without_credentials(f"{host.rstrip('/')}/d/{quote(uid, safe='')}/?{urlencode(query)}")


class Pages:
    """The pages of one cluster's jobs."""

    def __init__(self, routes: Routes) -> None:
        self.routes = routes

    async def of_job(self, info: JobInfo) -> JobPages:
        ref = str(info.job_id or info.submission_id)  # the dashboard's own choice (Ray 2.60's JobTable)
        base = without_credentials(self.routes.dashboard.dashboard_url)
        url = f"{base}/#/jobs/{quote(ref, safe='')}"
        pages = [Page("dashboard", f"the Ray dashboard's page of job {quoted(ref)}", url)]
        data, note = await self._grafana()
        grafana = grafana_url(data, info) if data is not None else None
        if grafana is not None:
            pages.append(
                Page("grafana", f"Ray's Grafana dashboard over the run of job {quoted(ref)}", grafana)
            )
        elif not note:
            note = "No Grafana page: the cluster's dashboard names no Grafana (RAY_GRAFANA_HOST) or it is disabled."
        return JobPages(pages, note)

    async def _grafana(self) -> tuple[dict[str, object] | None, str]:
        """grafana_health's data, or why there is none. Ray answers 500 when it cannot reach Grafana."""
        try:
            response = await self.routes.grafana_health()
            body = response.json() if response.text else None
        except (RayMCPError, ValueError):
            return (
                None,
                "No Grafana page: the dashboard's Grafana check did not answer; unknown if one exists.",
            )
        data = body.get("data") if isinstance(body, dict) else None
        if response.status != 200 or not isinstance(data, dict):
            return None, "No Grafana page: the dashboard cannot reach a Grafana (none set up, or it is down)."
        return data, ""
