"""A FastAPI application for the bridge's ASGI end-to-end tests
(tests/e2e/asgi*.rs): plain answers, path and body validation, the scope
as JSON, streamed answers and uploads, disconnects and cancellation,
failures before and after the response starts, a blocked loop, WebSockets
(echo, broadcast rooms, refusal, denial) and lifespan state.

What the application saw (a disconnect, a cancellation) goes into `SEEN`,
which `GET /seen` returns, so a test polls for it instead of sleeping.
"""

import asyncio
import hashlib
import sys
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel
from starlette.websockets import WebSocketDisconnect

# What the application observed, in order (one interpreter per process).
SEEN = []

# WebSocket rooms: name -> the members' sockets.
ROOMS = {}

ARTICLE = b'{"Name":"A Royal Baby","Body":"A slow news week"}'


@asynccontextmanager
async def lifespan(app):
    print("fastapp lifespan startup", file=sys.stderr, flush=True)
    yield {"started": "yes", "greeting": "hello from the lifespan"}
    print("fastapp lifespan shutdown", file=sys.stderr, flush=True)


app = FastAPI(lifespan=lifespan)


@app.get("/hello")
async def hello():
    return PlainTextResponse("Hello World!")


@app.get("/article")
async def article():
    return Response(content=ARTICLE, media_type="application/json")


@app.get("/items/{item_id}")
async def item(item_id: int):
    return {"item_id": item_id}


class Article(BaseModel):
    Name: str
    Body: str


ARTICLES = []


@app.post("/articles", status_code=201)
async def create_article(body: Article):
    ARTICLES.append(body)
    return {"id": len(ARTICLES), "Name": body.Name, "Body": body.Body}


@app.get("/sse")
async def sse(n: int = 10, size: int = 64):
    """`n` Server-Sent Events whose data is `size` bytes each, produced
    as fast as the loop lets the generator run."""
    data = b"x" * size

    async def events():
        for i in range(n):
            yield b"id: %d\ndata: %s\n\n" % (i, data)

    return StreamingResponse(events(), media_type="text/event-stream")


@app.post("/upload")
async def upload(request: Request):
    """The body read piece by piece: its length, SHA-256 and how many
    pieces it came in."""
    digest = hashlib.sha256()
    length = chunks = 0
    async for chunk in request.stream():
        if chunk:
            chunks += 1
            length += len(chunk)
            digest.update(chunk)
    return {"bytes": length, "sha256": digest.hexdigest(), "chunks": chunks}


def scope_view(request: Request):
    scope = request.scope
    raw_path = scope.get("raw_path")
    return {
        "type": scope["type"],
        "asgi": scope.get("asgi"),
        "http_version": scope.get("http_version"),
        "method": scope["method"],
        "scheme": scope.get("scheme"),
        "path": scope["path"],
        "raw_path": None if raw_path is None else raw_path.decode("latin-1"),
        "query_string": scope["query_string"].decode("latin-1"),
        "root_path": scope.get("root_path"),
        "headers": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in scope["headers"]],
        "client": None if scope.get("client") is None else list(scope["client"]),
        "server": None if scope.get("server") is None else list(scope["server"]),
        "state": sorted(scope.get("state", {}).keys()),
        "extensions": sorted((scope.get("extensions") or {}).keys()),
        "tls": (scope.get("extensions") or {}).get("tls"),
    }


@app.get("/scope")
async def scope_root(request: Request):
    return scope_view(request)


@app.get("/scope/{rest:path}")
async def scope_rest(request: Request, rest: str):
    return dict(scope_view(request), rest=rest)


@app.get("/state")
async def state(request: Request, scribble: str = ""):
    """The lifespan's state; with `scribble`, a key added to this
    request's copy (the next request's copy must not have it)."""
    if scribble:
        request.state.scribbled = scribble
    return {"started": request.state.started, "greeting": request.state.greeting}


@app.get("/sse-forever")
async def sse_forever(tag: str = ""):
    """Events without end; records how the stream stopped."""

    async def events():
        SEEN.append(f"streaming {tag}")
        i = 0
        try:
            while True:
                i += 1
                yield b"data: %d\n\n" % i
                await asyncio.sleep(0.01)
        except BaseException as e:
            SEEN.append(f"stream stopped {tag}")
            SEEN.append(f"stream {tag} stopped by {type(e).__name__}")
            raise

    return StreamingResponse(events(), media_type="text/event-stream")


@app.get("/wait-disconnect")
async def wait_disconnect(request: Request, tag: str = ""):
    """Waits for the client to go, then records it."""
    SEEN.append(f"waiting {tag}")
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            SEEN.append(f"disconnected {tag}")
            return PlainTextResponse("gone")


@app.get("/seen")
async def seen():
    return SEEN


@app.get("/never")
async def never():
    """Never answers; records its cancellation."""
    SEEN.append("never started")
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        SEEN.append("cancelled")
        raise


@app.get("/raise")
async def raise_before():
    raise RuntimeError("fastapp raised before the response on purpose")


@app.get("/raise-later")
async def raise_after():
    async def body():
        yield b"first chunk\n"
        await asyncio.sleep(0.05)
        raise RuntimeError("fastapp raised after the response started on purpose")

    return StreamingResponse(body(), media_type="text/plain")


@app.get("/block")
async def block(ms: int = 300):
    """Holds the event loop (a blocking call in a coroutine)."""
    time.sleep(ms / 1000)
    return PlainTextResponse("blocked")


async def echo(websocket: WebSocket):
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            SEEN.append(f"ws disconnect {message.get('code')}")
            return
        if message.get("text") is not None:
            await websocket.send_text(message["text"])
        else:
            await websocket.send_bytes(message.get("bytes") or b"")


async def broadcast(websocket: WebSocket, room: str):
    members = ROOMS.setdefault(room, set())
    members.add(websocket)
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            for member in list(members):
                try:
                    if message.get("text") is not None:
                        await member.send_text(message["text"])
                    else:
                        await member.send_bytes(message.get("bytes") or b"")
                except (WebSocketDisconnect, RuntimeError, OSError):
                    members.discard(member)
    finally:
        members.discard(websocket)
        if not members:
            ROOMS.pop(room, None)


@app.websocket("/ws")
async def ws(websocket: WebSocket):
    """Echo, or with `?room=NAME` a broadcast room; accepts the `chat`
    subprotocol when the client offers it."""
    offered = websocket.scope.get("subprotocols") or []
    await websocket.accept(
        subprotocol="chat" if "chat" in offered else None,
        headers=[(b"x-ws-app", b"fastapp")],
    )
    room = websocket.query_params.get("room")
    if room:
        await broadcast(websocket, room)
    else:
        await echo(websocket)


@app.websocket("/ws/room")
async def ws_room(websocket: WebSocket):
    """A broadcast room (`?room=NAME`, else one shared room)."""
    await websocket.accept()
    await broadcast(websocket, websocket.query_params.get("room") or "lobby")


@app.websocket("/ws/bye")
async def ws_bye(websocket: WebSocket):
    """Accepts, says one thing, and closes with a code and reason."""
    await websocket.accept()
    await websocket.send_text("bye")
    await websocket.close(code=4001, reason="bye now")


@app.websocket("/ws/refuse")
async def ws_refuse(websocket: WebSocket):
    """Closes before accepting: the handshake is refused (403)."""
    await websocket.close(code=1008)


@app.websocket("/ws/deny")
async def ws_deny(websocket: WebSocket):
    """Refuses the handshake with an HTTP answer of its own."""
    await websocket.send_denial_response(
        PlainTextResponse("no entry without a token", status_code=401)
    )
