"""The answers: one module per area (jobs, actors, placement_groups, logs, serve, ...), the same names as
``tools/`` and ``shaping/``.

An area reads what its question needs through the sources (``ray_mcp.sources``), joins the records, and hands
them to its pure shaping functions. ``RayAPI`` (api.py) holds one object per area over one cluster's sources,
so a tool's body is one call: ``api.placement_groups.status(...)``.

Every method returns our models (``ray_mcp.models``) and raises our errors (``ray_mcp.errors``).
"""

from ray_mcp.answers.api import RayAPI

__all__ = ["RayAPI"]
