"""The base of every output model: its validator is built on first use, not when the server starts.

Building the validators and serializers of ~60 models took ~60 ms of cold start; a tool's first call
builds only the models it returns (a few ms), and the warm-up after tools/list builds the rest.
"""

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True)
