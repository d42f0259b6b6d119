"""Root cause in one call: diagnose_job and cluster_health, one engine.

``evidence.py`` reads every source once through the Ray adapter, concurrently, into ``GraphInputs``; the
reasoning over it is pure and talks to no cluster: ``graph.py`` joins the records, ``chains/`` holds the rules
(one function each, one severity scale in ``chains/links.py``), ``report.py`` ranks the chains into the answer
and ``render.py`` writes its text.
"""
