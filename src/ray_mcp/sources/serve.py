"""Ray Serve's REST API on the dashboard (``/api/serve/applications/``): the applications' status and the
declarative config, and a PUT of a whole config. (Never DELETE that route: it shuts all of Serve down.)"""

from __future__ import annotations

from typing import Any

from ray_mcp.errors import RayRequestFailed, dashboard_errors
from ray_mcp.sources.dashboard import Answer, Dashboard

APPLICATIONS = "/api/serve/applications/"
SERVE_PUT_TIMEOUT_S = 30.0


class ServeAPI:
    """Serve on one cluster, through its dashboard."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard

    async def applications(self) -> dict[str, Any]:
        """Serve's details (ServeInstanceDetails as JSON: controller, proxies, applications), once per call."""
        body = await self.dashboard.get_json(APPLICATIONS, what=f"the Serve status ({APPLICATIONS})")
        if not isinstance(body, dict):
            raise RayRequestFailed(
                f"The Ray dashboard at {self.dashboard.dashboard_url} answered the Serve status oddly."
            )
        return body

    async def put(self, config: dict[str, Any]) -> Answer:
        """PUT a whole Serve config. A 400 (the dashboard checked the config against Ray's schema) comes back
        with its text; any other failure raises ours."""
        d = self.dashboard
        response = await d.write(
            "PUT",
            APPLICATIONS,
            what=f"the Serve deploy (PUT {APPLICATIONS})",
            json_body=config,
            timeout_s=max(d.timeout_s, SERVE_PUT_TIMEOUT_S),
        )
        if response.status_code != 400:
            with dashboard_errors(d.dashboard_url, f"the Serve deploy (PUT {APPLICATIONS})", d.timeout_s):
                response.raise_for_status()
        return Answer(response.status_code, response.text)
