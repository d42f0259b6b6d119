"""Pydantic output models: what each tool returns as structured content (and so its outputSchema). Every model is
importable from here (``from ray_mcp.models import JobInfo``); they live in ``core`` (the core areas and the shared
parts) and in one module per larger area: ``diagnosis``, ``stacks``, ``topology`` (job_topology and Ray Train).
"""

from ray_mcp.models.compare import *  # noqa: F403
from ray_mcp.models.core import *  # noqa: F403
from ray_mcp.models.data import *  # noqa: F403
from ray_mcp.models.diagnosis import *  # noqa: F403
from ray_mcp.models.events import *  # noqa: F403
from ray_mcp.models.logs import *  # noqa: F403
from ray_mcp.models.metrics import *  # noqa: F403
from ray_mcp.models.objects import *  # noqa: F403
from ray_mcp.models.stacks import *  # noqa: F403
from ray_mcp.models.topology import *  # noqa: F403
