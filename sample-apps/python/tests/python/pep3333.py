"""A WSGI application exercising each point of PEP 3333, for the bridge's
end-to-end tests (tests/e2e/pep3333.rs).

Paths under /raw/ reach the application directly, to see what the bridge
itself refuses; every other path goes through wsgiref.validate's checker,
with warnings turned into errors: a warning the checker raises fails the
request (a 500, and the test), it is never just printed.
"""

import contextvars
import json
import sys
import threading
import warnings
from wsgiref.validate import validator

warnings.simplefilter("error")

# How many response iterables the server has closed (close() of Closing).
closed = []


def text(start_response, body, status="200 OK", extra=()):
    headers = [("Content-Type", "text/plain; charset=utf-8")] + list(extra)
    start_response(status, headers)
    return [body.encode("utf-8")]


def environ_view(environ, start_response):
    """The environ's CGI keys and WSGI values, as JSON."""
    shown = {k: v for k, v in environ.items() if "." not in k}
    for key in ("wsgi.url_scheme", "wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once"):
        shown[key] = environ[key]
    shown["wsgi.version"] = list(environ["wsgi.version"])
    # PEP 3333: PATH_INFO holds the decoded bytes read as latin-1.
    shown["path_bytes"] = list(environ["PATH_INFO"].encode("latin-1"))
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(shown).encode()]


def input_view(environ, start_response):
    """Reads the body every way wsgi.input offers."""
    stream = environ["wsgi.input"]
    first = stream.read(3)
    line = stream.readline()
    limited = stream.readline(2)
    lines = stream.readlines(1)
    rest = [chunk for chunk in stream]
    report = {
        "read3": first.decode(),
        "readline": line.decode(),
        "readline2": limited.decode(),
        "readlines": [l.decode() for l in lines],
        "iterated": [l.decode() for l in rest],
        "after": stream.read(5).decode(),
        "content_length": environ.get("CONTENT_LENGTH"),
        "content_type": environ.get("CONTENT_TYPE"),
    }
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(report).encode()]


def errors_view(environ, start_response):
    errors = environ["wsgi.errors"]
    errors.write("pep3333 first line\npep3333 second")
    errors.writelines([" line\n"])
    errors.flush()
    return text(start_response, "logged")


def write_view(environ, start_response):
    """The imperative write() first, then the iterable."""
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"written,")
    return [b"iterated"]


class Closing:
    """A response iterable with close(), in several chunks (one empty)."""

    def __init__(self, chunks):
        self.chunks = chunks

    def __iter__(self):
        return iter(self.chunks)

    def close(self):
        closed.append(True)


def chunks_view(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-Chunks", "4")])
    return Closing([b"one,", b"", b"two,", b"three"])


released = threading.Event()


def stream_view(environ, start_response):
    """A generator: the first chunk, then the second once /release is
    asked (at most 10 s later), so a client sees the first one alone."""
    start_response("200 OK", [("Content-Type", "text/plain")])

    def body():
        yield b"first,"
        released.wait(10)
        released.clear()
        yield b"second"

    return body()


def release_view(environ, start_response):
    released.set()
    return text(start_response, "released")


def closed_view(environ, start_response):
    return text(start_response, str(len(closed)))


def exc_info_view(environ, start_response):
    """An error after start_response, before any body: the head is
    replaced through exc_info."""
    start_response("200 OK", [("Content-Type", "text/plain")])
    try:
        raise ValueError("the view failed")
    except ValueError:
        start_response("503 Service Unavailable",
                       [("Content-Type", "text/plain"), ("Retry-After", "7")],
                       sys.exc_info())
        return [b"recovered"]


def exc_info_late_view(environ, start_response):
    """exc_info after the head has gone: start_response re-raises."""
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"partial")
    try:
        raise KeyError("late failure")
    except KeyError:
        start_response("500 Internal Server Error", [("Content-Type", "text/plain")],
                       sys.exc_info())
    return [b"never"]


def raise_view(environ, start_response):
    raise RuntimeError("boom from the pep3333 app")


def process_view(environ, start_response):
    """The serving process's pid and wsgi.multiprocess, after a pause
    (?ms=N) that holds this interpreter's GIL-free sleep."""
    import os
    import time

    query = environ.get("QUERY_STRING", "")
    ms = int(query[3:]) if query.startswith("ms=") else 0
    started = time.time()
    time.sleep(ms / 1000)
    report = {
        "pid": os.getpid(),
        "multiprocess": environ["wsgi.multiprocess"],
        "started": started,
        "ended": time.time(),
    }
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(report).encode()]


def upload_view(environ, start_response):
    """Reads the body 64 KiB at a time; reports the bytes, the largest read
    and the Content-Length it was given."""
    stream = environ["wsgi.input"]
    total = largest = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        total += len(chunk)
        largest = max(largest, len(chunk))
    report = {"bytes": total, "largest": largest,
              "content_length": environ.get("CONTENT_LENGTH")}
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(report).encode()]


def headers_view(environ, start_response):
    return text(start_response, "headers", extra=[
        ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("X-Latin", "caf\u00e9")])


# Per-thread state a request leaves for the next one on the same thread.
per_thread = threading.local()
per_context = contextvars.ContextVar("per_context", default=0)


def thread_state_view(environ, start_response):
    """Counts this thread's requests in a threading.local and in a
    contextvars.ContextVar: a WSGI server's thread keeps both between its
    requests."""
    per_thread.seen = getattr(per_thread, "seen", 0) + 1
    per_context.set(per_context.get() + 1)
    shown = {"local": per_thread.seen, "context": per_context.get(), "thread": threading.get_ident()}
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(shown).encode()]


ROUTES = {
    "/environ": environ_view,
    "/thread-state": thread_state_view,
    "/input": input_view,
    "/upload": upload_view,
    "/errors": errors_view,
    "/write": write_view,
    "/chunks": chunks_view,
    "/closed": closed_view,
    "/stream": stream_view,
    "/release": release_view,
    "/exc-info": exc_info_view,
    "/exc-info-late": exc_info_late_view,
    "/raise": raise_view,
    "/headers": headers_view,
    "/process": process_view,
}


# The chunks the server has pulled from Pulled iterables.
pulled = []


class Pulled:
    """COUNT chunks of SIZE bytes ("a", "b", ... in turn), each pull counted."""

    def __init__(self, size, count):
        self.size, self.count = size, count

    def __iter__(self):
        for i in range(self.count):
            pulled.append(True)
            yield bytes([ord("a") + i % 26]) * self.size


def raw(environ, start_response):
    """What the bridge must refuse itself (the checker would stop them first)."""
    path = environ["PATH_INFO"]
    if path == "/raw/bad-status":
        start_response("200OK", [("Content-Type", "text/plain")])
    elif path == "/raw/bad-header":
        start_response("200 OK", [("X-Split", "a\r\nInjected: yes")])
    elif path == "/raw/hop-by-hop":
        start_response("200 OK", [("Connection", "close")])
    elif path == "/raw/twice":
        start_response("200 OK", [])
        start_response("200 OK", [])
    elif path == "/raw/str-body":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return ["not bytes"]
    elif path == "/raw/no-start":
        return [b"body without a status"]
    elif path.startswith("/raw/declared/"):
        # /raw/declared/DECLARED/CHUNK/COUNT: declares DECLARED bytes, then
        # yields COUNT chunks of CHUNK bytes (counted in `pulled`).
        declared, size, count = (int(n) for n in path.split("/")[3:6])
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Length", str(declared))])
        return Pulled(size, count)
    elif path == "/raw/not-modified":
        # A 304 names the length of the representation it stands for.
        start_response("304 Not Modified", [("Content-Length", "1234"), ("ETag", '"v1"')])
        return [b""]
    elif path == "/raw/pulled":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(len(pulled)).encode()]
    elif path == "/raw/long-error-line":
        # A 2 MB line written to wsgi.errors 1000 bytes at a time, then a
        # short one.
        errors = environ["wsgi.errors"]
        for _ in range(2000):
            errors.write("x" * 1000)
        errors.write("\nafter the long line\n")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"logged"]
    elif path == "/raw/list":
        # A one-item list, unwrapped (the checker would wrap it): answered whole.
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"whole"]
    return [b""]


def app(environ, start_response):
    path = environ["PATH_INFO"]
    view = ROUTES.get(path) or ROUTES.get("/" + path.split("/")[1] if path.count("/") > 1 else path)
    if view is None:
        return text(start_response, "no such page " + path, "404 Not Found")
    return view(environ, start_response)


validated = validator(app)


def application(environ, start_response):
    if environ["PATH_INFO"].startswith("/raw/"):
        return raw(environ, start_response)
    return validated(environ, start_response)
