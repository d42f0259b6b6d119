"""The sources: one module per place ray-mcp reads a cluster from, and the only package that talks to Ray.

Requests in, Ray's records out. A source imports no shaping, no guard and no answer: it knows how to ask its
system and how that system fails (errors.py maps each failure), not what an agent is told.

    dashboard.py    the dashboard's HTTP API: JSON, envelopes, State API lists and summaries, log streams
    gcs.py          Ray's gRPC channel to the GCS, only for what the dashboard does not serve
    history.py      a terminated cluster's record on KubeRay's History Server, served as if it were a dashboard
    kubernetes.py   the Kubernetes API: KubeRay's objects, their pods, events and logs; the service proxy
    local_logs.py   a log file read from this host's disk; py_spy.py: py-spy run here; hosts.py: this host
    ids.py, query.py   what a well-formed Ray id looks like; State API filters, checked before they are sent
    runtime_env.py, uploads.py   a job's runtime_env checked by Ray's own class, its local uploads confined
"""
