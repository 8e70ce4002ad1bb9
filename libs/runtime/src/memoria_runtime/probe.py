"""`python -m memoria_runtime.probe [URL]`: exit 0 when URL answers 200 within two seconds.

For container health checks: slim images have no curl, and the interpreter is there anyway.
Without a URL it asks this container's own ops port (``MEMORIA_METRICS_PORT``, which every
service serves, the gateway included) for ``/readyz``, or the gateway's port when none is set.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

TIMEOUT_S = 2.0
OK = 200


def default_url(environ: dict[str, str]) -> str:
    ops_port = environ.get("MEMORIA_METRICS_PORT")
    port = ops_port or environ.get("MEMORIA_GATEWAY_PORT", "8000")
    return f"http://127.0.0.1:{port}/readyz"


def probe(url: str, timeout: float = TIMEOUT_S) -> tuple[bool, str]:
    # No proxies: a health check must reach this container, never an HTTP(S)_PROXY.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            status = int(response.status)
            body = response.read(512).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return False, f"{url}: HTTP {exc.code} {exc.read(512).decode(errors='replace')}"
    except (OSError, ValueError) as exc:
        return False, f"{url}: {exc}"
    return status == OK, f"{url}: HTTP {status} {body}"


def main(argv: list[str]) -> int:
    url = argv[1] if len(argv) > 1 else default_url(dict(os.environ))
    ok, report = probe(url)
    print(report, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
