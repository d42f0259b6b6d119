"""The base of every output model: its validator is built on first use, not when the server starts.

Building the validators and serializers of ~60 models took ~50 ms of cold start; now a tool's first call
builds only the models it returns (2-3 ms; job_topology's, the largest, 9 ms).
"""

from pydantic import BaseModel, ConfigDict

# A job in one of these statuses will not change again.
TERMINAL_JOB_STATUSES: frozenset[str] = frozenset({"STOPPED", "SUCCEEDED", "FAILED"})


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True)
