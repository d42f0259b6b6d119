"""RayAPI: every area of ray_api in one object (imported on first use, see __init__.py)."""

from ray_mcp.ray_api.actors import ActorsAPI
from ray_mcp.ray_api.placement_groups import PlacementGroupsAPI
from ray_mcp.ray_api.serve import ServeAPI
from ray_mcp.ray_api.stacks import StacksAPI
from ray_mcp.ray_api.tasks import TasksAPI


class RayAPI(ServeAPI, ActorsAPI, PlacementGroupsAPI, TasksAPI, StacksAPI):
    """A connection to one Ray cluster, every area in one object. One instance per cluster, reused by every call."""
