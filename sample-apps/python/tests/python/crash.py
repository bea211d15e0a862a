"""A WSGI application whose /abort ends its process (tests/e2e/crash.rs):
os.abort() is what a C extension's failed assertion does. Every other path
answers its process id."""

import os


def application(environ, start_response):
    if environ.get("PATH_INFO") == "/abort":
        os.abort()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode()]
