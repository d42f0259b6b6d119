"""Which fields and variables hold secrets: by their name, and every ``env_vars`` value."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

# Names of fields and variables whose values are secrets: *SECRET*, *PASSWORD*, and *_TOKEN, *_KEY, ...
SECRET_KEY = re.compile(
    r"(?i)(secret|passw(or)?d|passphrase|credential|authorization|cookie|(^|[_.-])(token|api[_-]?key|key|auth)$)"
)

# Ray's own fields that match the pattern and hold no secret: a label selector's constraint names the node label
# it tests (``label_key``: "zone", "ray.io/gpu-domain"); masked, every occurrence of that label name would go.
NOT_SECRET_KEYS = frozenset({"label_key"})


def is_secret_key(key: object) -> bool:
    """A field whose value is a secret. Confirmation tokens are not: the agent must be able to send them back."""
    return isinstance(key, str) and _is_secret_name(key)


@functools.lru_cache(maxsize=4096)
def _is_secret_name(key: str) -> bool:
    return not key.startswith("confirm") and key not in NOT_SECRET_KEYS and SECRET_KEY.search(key) is not None


def secret_values(obj: Any) -> set[str]:
    """Values that must never be shown: every ``env_vars`` value and every value under a secret-looking key."""
    found: set[str] = set()
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            if key == "env_vars" and isinstance(value, Mapping):
                found.update(str(v) for v in value.values() if isinstance(v, str | int | float) and str(v))
            elif is_secret_key(key) and isinstance(value, str) and value:
                found.add(value)
            elif isinstance(value, Mapping | list | tuple):
                found |= secret_values(value)
    elif isinstance(obj, list | tuple):
        for item in obj:
            if isinstance(item, Mapping | list | tuple):
                found |= secret_values(item)
    return found
