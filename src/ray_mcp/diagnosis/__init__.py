"""Root cause in one call: diagnose_job and cluster_health, one engine.

``evidence.py`` (and ``job_evidence.py``, a job's own) reads every source once through the Ray adapter,
concurrently, into ``GraphInputs``; the reasoning over it is pure and talks to no cluster. ``graph.py`` joins the
records; ``recognise.py`` (and ``tracebacks.py``) turn Ray's words into facts; ``rules/`` holds the rules, one
module per failure family, each registered (``registry.py``) with its kind, severity, references and next steps;
``explain.py`` runs them into ranked chains of facts (``facts.py``: one Kind enum, one severity scale);
``report.py`` and ``render.py`` put the facts in words, at the edge.
"""
