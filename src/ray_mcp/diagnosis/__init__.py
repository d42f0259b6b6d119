"""Root cause in one call: diagnose_job and cluster_health.

``gather.py`` collects the evidence through the Ray adapter, concurrently; the reasoning over it is pure and
talks to no cluster: ``tracebacks.py`` reads tracebacks out of logs, ``job.py`` and ``health.py`` turn the
evidence into findings with a severity, ``findings.py`` ranks and renders them.
"""
