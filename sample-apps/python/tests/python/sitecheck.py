"""Imports C extension modules of the standard library and of packages
(they resolve libpython's symbols globally), then answers which loaded."""

import _json  # noqa: F401  (a C extension module of the standard library)
import _decimal  # noqa: F401
import zlib  # noqa: F401


def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"extensions imported"]
