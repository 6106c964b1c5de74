"""The dashboard the admin server serves at ``/``: the system as a graph, coloured by its
conditions, with the configuration errors and each route's traffic, live.

* ``graph.py``: the nodes and edges (``GET /api/graph``), from the current objects, their
  statuses and the last translation's IR; ``served.py``: which listener serves which route,
  read from the IR; ``layout.py``: their positions, deterministic;
* ``handlers.py``: the routes the admin server registers;
* ``static/``: the page (HTML, CSS, JavaScript written for it; no external asset). It reads
  ``/api/graph``, ``/api/errors``, ``/api/explain/...`` and the traffic endpoints
  (``/api/traffic/stream``, server-sent events, else polling ``/api/traffic``).
"""
