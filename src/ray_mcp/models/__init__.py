"""Pydantic output models: what each tool returns as structured content (and so its outputSchema). Every model is
importable from here (``from ray_mcp.models import JobInfo``); they live in ``core`` (the core areas and the shared
parts) and in one module per larger area: ``diagnosis``, ``stacks``, ``topology`` (job_topology and Ray Train).

No ``from __future__ import annotations`` here, in these modules, nor in tools/ and settings.py: pydantic and the
mcp SDK would have to evaluate every annotation string when the server starts (~20-35 ms of cold start, see bench/).
"""

from ray_mcp.models.core import TERMINAL_JOB_STATUSES as TERMINAL_JOB_STATUSES
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
