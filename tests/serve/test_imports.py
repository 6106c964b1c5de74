"""What ``gateweave serve`` keeps imported: modules it never calls in steady state are imported
where they are used, so a long-running controller does not keep them resident (issue 18's
memory target). Each check runs in a fresh interpreter: this process has imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# The serve command's modules (the composition root, the CLI that runs it, the logging the
# CLI configures), then one exception logged as serve logs one.
_SERVE = textwrap.dedent(
    """
    import json, sys
    import gateweave.app, gateweave.cli
    import structlog
    from gateweave import logs
    logs.configure("info")
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))
    try:
        1 / 0
    except ZeroDivisionError:
        structlog.get_logger("t").exception("failed")
    import rich.console  # the CLI's tables still import it
    print(json.dumps({"loaded": loaded, "rich": rich.console.Console.__name__}))
    """
)


def _serve_modules(*names: str) -> tuple[dict[str, object], str]:
    proc = subprocess.run(
        [sys.executable, "-c", _SERVE, *names],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout), proc.stderr


def test_serve_imports_neither_rich_nor_the_kubernetes_client() -> None:
    # rich and pygments: structlog's exception rendering and the CLI's tables (gateweave/logs.py,
    # statusview.py); kubernetes_asyncio: the Kubernetes provider's and data plane's client,
    # imported when `serve --provider kubernetes` opens it (gateweave/app/root.py, settings.py).
    answer, _ = _serve_modules("rich", "pygments", "kubernetes_asyncio")
    assert answer == {"loaded": [], "rich": "Console"}


def test_logged_exceptions_are_plain_tracebacks() -> None:
    _, stderr = _serve_modules()
    # structlog's plain exception formatter: the standard traceback, no rich panel.
    assert "Traceback (most recent call last):" in stderr
    assert "ZeroDivisionError: division by zero" in stderr
    assert "╭" not in stderr
