"""The sources: one module per place ray-mcp reads a cluster from, and the only package that talks to Ray.

Requests in, Ray's records out (records.py: typed, basic fields apart from detail fields as Ray's State API
splits them). A source imports no shaping, no guard and no answer: it knows how to ask its system and how that
system fails (errors.py maps each failure), not what an agent is told. Each read is made once per call
(scope.py); a write makes the call read afresh.

    dashboard.py    the dashboard's one HTTP client: JSON, envelopes, log streams, writes
    state.py        the State API: lists and summaries of actors, tasks, nodes, groups, workers, events, objects
    jobs.py         the Jobs API's routes, and Ray's JobSubmissionClient bound to the same HTTP client
    serve.py        Serve's REST API; logs.py: the log routes; routes.py: the dashboard's other routes
    cluster_sources.py   one cluster's sources together (what RayAPI's answers read through)
    gcs.py          Ray's gRPC channel to the GCS, only for what the dashboard does not serve
    history.py      a terminated cluster's record on KubeRay's History Server, served as if it were a dashboard
    kubernetes.py   the Kubernetes API: KubeRay's objects, their pods, events and logs; kube_proxy.py: the
                    dashboard through the API server's service proxy; kube_target.py: a k8s:// address
                    resolved; kube_names.py, kube_reasons.py: Kubernetes' names and reasons
    local_logs.py   a log file read from this host's disk; py_spy.py: py-spy run here; hosts.py: this host
    ids.py, query.py   what a well-formed Ray id looks like; State API filters, checked before they are sent
    runtime_env.py, uploads.py   a job's runtime_env checked by Ray's own class, its local uploads confined
    scope.py, records.py   the per-call read scope; the records' types
"""
