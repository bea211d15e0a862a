"""An ASGI application with no framework (tests/e2e/asgi*.rs): the
messages exactly as the bridge hands them over, failures before and after
the response starts, a file sent by `http.response.pathsend`, a WebSocket
denial response written by hand; `application` without lifespan support
(it raises on the lifespan scope, as Django does), `strict` with lifespan
support, and `wsgi_app`, a WSGI callable (to serve beside the ASGI ones,
or to be refused when declared as ASGI).
"""

import json
import os

# What the application observed, in order.
SEEN = []


async def answer(send, status, body, content_type=b"text/plain"):
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type)],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def http(scope, receive, send):
    path = scope["path"][len(scope.get("root_path", "")) :]
    if path == "/hello":
        await answer(send, 200, b"pure hello")
    elif path == "/receive":
        # Every receive() until the request body ends, as JSON.
        messages = []
        while True:
            message = await receive()
            messages.append(
                {
                    "type": message["type"],
                    "body": len(message.get("body", b"")),
                    "more_body": message.get("more_body", False),
                }
            )
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        await answer(send, 200, json.dumps(messages).encode(), b"application/json")
    elif path == "/after-response":
        # The (empty) body read, the response whole, then what receive()
        # says next.
        while (await receive()).get("more_body"):
            pass
        await answer(send, 200, b"answered")
        message = await receive()
        SEEN.append(f"after-response {message['type']}")
    elif path == "/seen":
        await answer(send, 200, json.dumps(SEEN).encode(), b"application/json")
    elif path == "/raise":
        raise RuntimeError("pureasgi raised before the response on purpose")
    elif path == "/raise-later":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/plain")],
            }
        )
        await send({"type": "http.response.body", "body": b"first chunk\n", "more_body": True})
        raise RuntimeError("pureasgi raised after the response started on purpose")
    elif path == "/pathsend":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/plain")],
            }
        )
        await send({"type": "http.response.pathsend", "path": os.path.abspath(__file__)})
    else:
        await answer(send, 404, b"not here")


async def websocket(scope, receive, send):
    message = await receive()
    assert message["type"] == "websocket.connect", message
    path = scope["path"][len(scope.get("root_path", "")) :]
    if path == "/deny":
        await send(
            {
                "type": "websocket.http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"text/plain"), (b"x-denied", b"yes")],
            }
        )
        await send(
            {
                "type": "websocket.http.response.body",
                "body": b"denied by hand",
            }
        )
    elif path == "/refuse":
        await send({"type": "websocket.close", "code": 1008})
    else:
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            await send(dict(message, type="websocket.send"))


async def application(scope, receive, send):
    if scope["type"] == "http":
        await http(scope, receive, send)
    elif scope["type"] == "websocket":
        await websocket(scope, receive, send)
    else:
        raise ValueError(f"pureasgi does not handle {scope['type']}")


async def strict(scope, receive, send):
    """`application` with lifespan support."""
    if scope["type"] != "lifespan":
        await application(scope, receive, send)
        return
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def wsgi_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"wsgi {environ['SCRIPT_NAME']}|{environ['PATH_INFO']}".encode()]
