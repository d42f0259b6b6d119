"""Pydantic output models: what each tool returns as structured content (and so its outputSchema). Every model is
importable from here (``from ray_mcp.models import JobInfo``); they live in ``core`` (the core areas and the shared
parts) and in one module per larger area: ``diagnosis``, ``stacks``, ``topology`` (job_topology and Ray Train).

No ``from __future__ import annotations`` here, in these modules, nor in tools/ and settings.py: pydantic and the
mcp SDK would have to evaluate every annotation string when the server starts (~20-35 ms of cold start, see bench/).

A name is imported from its module on first use (PEP 562 ``__getattr__``): ``from ray_mcp.models import JobInfo``
imports ``core`` alone, and the server starts without importing any model (~45 ms).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_mcp.models.base import TERMINAL_JOB_STATUSES as TERMINAL_JOB_STATUSES
    from ray_mcp.models.core import Actor as Actor
    from ray_mcp.models.core import ActorKill as ActorKill
    from ray_mcp.models.core import ActorList as ActorList
    from ray_mcp.models.core import AutoscalerStatus as AutoscalerStatus
    from ray_mcp.models.core import Bundle as Bundle
    from ray_mcp.models.core import ClusterStatus as ClusterStatus
    from ray_mcp.models.core import DeathCause as DeathCause
    from ray_mcp.models.core import Demand as Demand
    from ray_mcp.models.core import ErrorGroup as ErrorGroup
    from ray_mcp.models.core import GPUUse as GPUUse
    from ray_mcp.models.core import HostUsage as HostUsage
    from ray_mcp.models.core import JobChange as JobChange
    from ray_mcp.models.core import JobInfo as JobInfo
    from ray_mcp.models.core import JobList as JobList
    from ray_mcp.models.core import JobStatusName as JobStatusName
    from ray_mcp.models.core import JobSubmitted as JobSubmitted
    from ray_mcp.models.core import JobSummary as JobSummary
    from ray_mcp.models.core import JobWait as JobWait
    from ray_mcp.models.core import ListPage as ListPage
    from ray_mcp.models.core import LogSection as LogSection
    from ray_mcp.models.core import LogTail as LogTail
    from ray_mcp.models.core import Node as Node
    from ray_mcp.models.core import NodeList as NodeList
    from ray_mcp.models.core import NodeStatus as NodeStatus
    from ray_mcp.models.core import PlacementGroup as PlacementGroup
    from ray_mcp.models.core import PlacementGroupList as PlacementGroupList
    from ray_mcp.models.core import ResourceUse as ResourceUse
    from ray_mcp.models.core import RuntimeEnvSpec as RuntimeEnvSpec
    from ray_mcp.models.core import ServeApp as ServeApp
    from ray_mcp.models.core import ServeChange as ServeChange
    from ray_mcp.models.core import ServeDeployment as ServeDeployment
    from ray_mcp.models.core import ServeReplica as ServeReplica
    from ray_mcp.models.core import ServeStatus as ServeStatus
    from ray_mcp.models.core import Task as Task
    from ray_mcp.models.core import TaskGroup as TaskGroup
    from ray_mcp.models.core import TaskList as TaskList
    from ray_mcp.models.core import TaskSummary as TaskSummary
    from ray_mcp.models.diagnosis import ClusterHealth as ClusterHealth
    from ray_mcp.models.diagnosis import Finding as Finding
    from ray_mcp.models.diagnosis import JobDiagnosis as JobDiagnosis
    from ray_mcp.models.stacks import CpuProfile as CpuProfile
    from ray_mcp.models.stacks import HotFunction as HotFunction
    from ray_mcp.models.stacks import StackGroup as StackGroup
    from ray_mcp.models.stacks import StackTraces as StackTraces
    from ray_mcp.models.topology import Gap as Gap
    from ray_mcp.models.topology import GapKind as GapKind
    from ray_mcp.models.topology import JobTopology as JobTopology
    from ray_mcp.models.topology import TopoActor as TopoActor
    from ray_mcp.models.topology import TopoBundle as TopoBundle
    from ray_mcp.models.topology import TopoDeployment as TopoDeployment
    from ray_mcp.models.topology import TopoGPU as TopoGPU
    from ray_mcp.models.topology import TopoGroup as TopoGroup
    from ray_mcp.models.topology import TopoNode as TopoNode
    from ray_mcp.models.topology import TopoReplica as TopoReplica
    from ray_mcp.models.topology import TopoServe as TopoServe
    from ray_mcp.models.topology import TopoServeApp as TopoServeApp
    from ray_mcp.models.topology import TrainCheckpoint as TrainCheckpoint
    from ray_mcp.models.topology import TrainRankError as TrainRankError
    from ray_mcp.models.topology import TrainRun as TrainRun
    from ray_mcp.models.topology import TrainRunList as TrainRunList
    from ray_mcp.models.topology import TrainRunSummary as TrainRunSummary
    from ray_mcp.models.topology import TrainWorker as TrainWorker

# name -> the module of ray_mcp.models that defines it
WHERE = {
    "TERMINAL_JOB_STATUSES": "base",
    "Actor": "core",
    "ActorKill": "core",
    "ActorList": "core",
    "AutoscalerStatus": "core",
    "Bundle": "core",
    "ClusterStatus": "core",
    "DeathCause": "core",
    "Demand": "core",
    "ErrorGroup": "core",
    "GPUUse": "core",
    "HostUsage": "core",
    "JobChange": "core",
    "JobInfo": "core",
    "JobList": "core",
    "JobStatusName": "core",
    "JobSubmitted": "core",
    "JobSummary": "core",
    "JobWait": "core",
    "ListPage": "core",
    "LogSection": "core",
    "LogTail": "core",
    "Node": "core",
    "NodeList": "core",
    "NodeStatus": "core",
    "PlacementGroup": "core",
    "PlacementGroupList": "core",
    "ResourceUse": "core",
    "RuntimeEnvSpec": "core",
    "ServeApp": "core",
    "ServeChange": "core",
    "ServeDeployment": "core",
    "ServeReplica": "core",
    "ServeStatus": "core",
    "Task": "core",
    "TaskGroup": "core",
    "TaskList": "core",
    "TaskSummary": "core",
    "ClusterHealth": "diagnosis",
    "Finding": "diagnosis",
    "JobDiagnosis": "diagnosis",
    "CpuProfile": "stacks",
    "HotFunction": "stacks",
    "StackGroup": "stacks",
    "StackTraces": "stacks",
    "Gap": "topology",
    "GapKind": "topology",
    "JobTopology": "topology",
    "TopoActor": "topology",
    "TopoBundle": "topology",
    "TopoDeployment": "topology",
    "TopoGPU": "topology",
    "TopoGroup": "topology",
    "TopoNode": "topology",
    "TopoReplica": "topology",
    "TopoServe": "topology",
    "TopoServeApp": "topology",
    "TrainCheckpoint": "topology",
    "TrainRankError": "topology",
    "TrainRun": "topology",
    "TrainRunList": "topology",
    "TrainRunSummary": "topology",
    "TrainWorker": "topology",
}


def __getattr__(name: str) -> Any:
    module = WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = list(WHERE)
