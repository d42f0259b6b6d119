"""Kubernetes names checked as Kubernetes checks them, before any API path or selector is built from them.

The HTTP clients resolve dot segments (yarl, under kubernetes_asyncio, turns ``rayjobs/.`` into the collection
``rayjobs/`` and decodes ``%2E%2E`` first; httpx does the same to ``..``), so a name that is not a valid
Kubernetes name could reach another path than the one a tool means. Every name and namespace is checked here
by the rule its resource has in the API server (k8s.io/apimachinery ``util/validation``), and refused with
that rule's own words. No valid name is ``.`` or ``..``, or holds ``/`` or ``%``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ray_mcp.errors import InvalidArgument
from ray_mcp.text import truncate_text

NameKind = Literal[
    "namespace",
    "raycluster",
    "rayjob",
    "rayservice",
    "raycronjob",
    "rayobject",
    "pod",
    "service",
    "container",
    "label",
]


@dataclass(frozen=True)
class Rule:
    """One of apimachinery's validations: its pattern, its length limit and its message, word for word."""

    name: str
    pattern: re.Pattern[str]
    max_length: int
    message: str


DNS1123_LABEL = Rule(
    "RFC 1123 label",
    re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"),
    63,
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name', or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
)
DNS1123_SUBDOMAIN = Rule(
    "RFC 1123 subdomain",
    re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"),
    253,
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
)
DNS1035_LABEL = Rule(
    "DNS-1035 label",
    re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?"),
    63,
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name', or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
)
LABEL_VALUE = Rule(
    "label value",
    re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"),
    63,
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
)

# The rule the API server applies to each name (a custom resource's name is a subdomain; a Service's a
# DNS-1035 label; a namespace and a container an RFC 1123 label; a label selector's value a label value).
RULES: dict[NameKind, Rule] = {
    "namespace": DNS1123_LABEL,
    "raycluster": DNS1123_SUBDOMAIN,
    "rayjob": DNS1123_SUBDOMAIN,
    "rayservice": DNS1123_SUBDOMAIN,
    "raycronjob": DNS1123_SUBDOMAIN,
    "rayobject": DNS1123_SUBDOMAIN,
    "pod": DNS1123_SUBDOMAIN,
    "service": DNS1035_LABEL,
    "container": DNS1123_LABEL,
    "label": LABEL_VALUE,
}
WHAT: dict[NameKind, str] = {
    "namespace": "namespace",
    "raycluster": "RayCluster name",
    "rayjob": "RayJob name",
    "rayservice": "RayService name",
    "raycronjob": "RayCronJob name",
    "rayobject": "RayCluster, RayJob or RayService name",
    "pod": "pod name",
    "service": "Service name",
    "container": "container name",
    "label": "label value",
}


def violation(value: str, kind: NameKind) -> str | None:
    """Why ``value`` is not a valid name of this kind, in Kubernetes' words (None: it is valid)."""
    rule = RULES[kind]
    if len(value) > rule.max_length:
        return f"must be no more than {rule.max_length} characters"
    if not rule.pattern.fullmatch(value) or (kind != "label" and not value):
        return rule.message
    return None


def checked(value: object, kind: NameKind, *, given: str | None = None) -> str:
    """``value`` when it is a valid name of this kind; else InvalidArgument with the rule that failed (naming
    ``given``, the text the name was read from, when it is more than the name)."""
    text = value if isinstance(value, str) else repr(value)
    if (why := violation(text, kind)) is None:
        return text
    shown = truncate_text(text, 80)
    source = f" (in {given!r})" if given is not None and given != text else ""
    raise InvalidArgument(
        f"{shown!r}{source} is not a valid Kubernetes {WHAT[kind]}: {why}. Nothing was sent to the API server; "
        "pass the name as `kubectl get` shows it."
    )
