"""An application module that fails at import (tests/e2e/failures.rs)."""

raise ImportError("broken on purpose: the wsgi app must be refused")


def application(environ, start_response):  # never reached
    start_response("200 OK", [])
    return [b""]
