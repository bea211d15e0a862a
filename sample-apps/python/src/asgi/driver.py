"""The bridge's ASGI driver: runs on the event-loop thread the bridge starts
once per process. The host's loop threads hand requests and events over
through `_rs` (the bridge's Rust module): they queue them and wake this
loop through a socket it reads; `_drain` takes them. Applications are
called here as coroutines, one task per request or WebSocket."""

import asyncio
import sys
import threading
import traceback

_rs = None
_loop = None
_ident = None
# index -> [application, target, lifespan state]
_apps = []
# Seconds a task may run on after its client went (or the host answered
# for it, past the app deadline) before it is cancelled.
GRACE = 1.0
BEAT = 0.1


class ClientGone(OSError):
    """send() after the client went (ASGI spec 2.4: an OSError)."""


def run(rs, fd):
    """Runs the loop on this thread, forever."""
    global _rs, _loop, _ident
    _rs = rs
    try:
        import uvloop

        loop = uvloop.new_event_loop()
        kind = "uvloop " + getattr(uvloop, "__version__", "")
    except ImportError:
        loop = asyncio.new_event_loop()
        kind = "asyncio (uvloop is not installed)"
    asyncio.set_event_loop(loop)
    _loop = loop
    _ident = threading.get_ident()
    loop.add_reader(fd, _drain)
    loop.call_soon(_beat)
    rs.info("ASGI event loop: " + kind)
    loop.run_forever()


def _beat():
    _rs.beat()
    _loop.call_later(BEAT, _beat)


def add(app, target):
    """Registers an application; returns its index."""
    _apps.append([app, target, {}])
    return len(_apps) - 1


def _drain():
    jobs, futures, gone = _rs.take()
    for f in futures:
        if not f.done():
            f.set_result(None)
    for task in gone:
        _loop.call_later(GRACE, _cancel, task)
    loop = _loop
    for kind, index, x in jobs:
        if kind == 0:
            task = loop.create_task(_http(index, x))
        elif kind == 1:
            task = loop.create_task(_ws(index, x))
        elif kind == 2:
            loop.create_task(_startup(index, x))
            continue
        else:
            loop.create_task(_shutdown(index, x))
            continue
        if x.watch(task):
            loop.call_later(GRACE, _cancel, task)


_flushing = False


def _flush_soon():
    """Whole answers are held until the end of this turn of the loop."""
    global _flushing
    if not _flushing:
        _flushing = True
        _loop.call_soon(_flush)


def _flush():
    global _flushing
    _flushing = False
    _rs.flush()


def _cancel(task):
    if not task.done():
        task.cancel()


def blocked_by():
    """What the loop thread runs now, if it is an application's request."""
    frame = sys._current_frames().get(_ident)
    while frame is not None:
        code = frame.f_code
        if code is _http.__code__ or code is _ws.__code__:
            local = frame.f_locals
            x, target = local.get("x"), local.get("target")
            if x is not None:
                return "%s (app %s)" % (x.describe(), target)
        elif code is _startup.__code__:
            return "lifespan startup (app %s)" % (frame.f_locals.get("target"),)
        frame = frame.f_back
    return None


def _ended(x, e):
    """The application raised `e`: the exchange hears of it."""
    if isinstance(e, asyncio.CancelledError):
        x.cancelled()
        return
    # The driver's own "client gone", or what a framework makes of it
    # (Starlette's ClientDisconnect): quiet when the client did go.
    gone_error = isinstance(e, OSError) or type(e).__name__ == "ClientDisconnect"
    x.failed(traceback.format_exc(), gone_error)
    if not isinstance(e, Exception):
        raise e


def _receiver(x, loop):
    async def receive():
        while True:
            message = x.receive()
            if message is not None:
                return message
            f = loop.create_future()
            if x.wait_receive(f):
                await f

    return receive


async def _call(app, scope, x, send):
    """Calls the application; the exchange hears how it ended."""
    try:
        await app(scope, _receiver(x, _loop), send)
    except BaseException as e:
        _ended(x, e)
    else:
        x.returned()


async def _http(index, x):
    app, target, state = _apps[index]
    loop = _loop

    async def send(message):
        kind = message["type"]
        if kind == "http.response.body":
            body = message.get("body", b"")
            more = message.get("more_body", False)
            while True:
                sent = x.body(body, more)
                if sent == 0:
                    return
                if sent == 3:
                    _flush_soon()
                    return
                if sent == 2:
                    raise ClientGone("the client is gone")
                f = loop.create_future()
                if x.wait_send(f):
                    await f
        elif kind == "http.response.start":
            x.start(message["status"], message.get("headers", ()))
        elif kind == "http.response.pathsend":
            await _pathsend(x, message["path"], send)
        else:
            raise RuntimeError(
                "unexpected ASGI message %r on an HTTP request" % (kind,)
            )

    await _call(app, x.scope(state), x, send)


async def _pathsend(x, path, send):
    step = 256 * 1024
    with open(path, "rb") as f:
        x.sized(f.seek(0, 2))
        f.seek(0)
        while True:
            chunk = f.read(step)
            more = len(chunk) == step
            await send({"type": "http.response.body", "body": chunk, "more_body": more})
            if not more:
                return


async def _ws(index, x):
    app, target, state = _apps[index]
    loop = _loop

    async def send(message):
        while True:
            sent = x.send(message)
            if sent == 0:
                return
            if sent == 2:
                raise ClientGone("the WebSocket is closed")
            f = loop.create_future()
            if x.wait_send(f):
                await f

    await _call(app, x.scope(state), x, send)


class _Lifespan:
    """One application's lifespan task: its receive queue and outcome."""

    def __init__(self, index):
        self.queue = asyncio.Queue()
        self.started = _loop.create_future()
        self.stopped = _loop.create_future()
        self.task = None
        self.index = index


_lifespans = {}


async def _startup(index, outcome):
    app, target, state = _apps[index]
    life = _Lifespan(index)
    _lifespans[index] = life
    scope = {
        "type": "lifespan",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "state": state,
    }

    async def receive():
        return await life.queue.get()

    async def send(message):
        kind = message["type"]
        fut = None
        if kind.startswith("lifespan.startup."):
            fut = life.started
        elif kind.startswith("lifespan.shutdown."):
            fut = life.stopped
        if fut is None or fut.done():
            raise RuntimeError("unexpected ASGI message %r on the lifespan scope" % (kind,))
        fut.set_result((kind.endswith(".complete"), message.get("message", "")))

    async def main():
        try:
            await app(scope, receive, send)
        except BaseException as e:
            trace = traceback.format_exc()
            for fut in (life.started, life.stopped):
                if not fut.done():
                    fut.set_exception(_Raised(trace, e))
            if not isinstance(e, Exception):
                raise
        else:
            for fut in (life.started, life.stopped):
                if not fut.done():
                    fut.set_exception(_Raised(None, None))

    life.task = _loop.create_task(main())
    await life.queue.put({"type": "lifespan.startup"})
    try:
        ok, message = await life.started
        outcome.set(0 if ok else 1, message)
    except _Raised as r:
        outcome.set(2, r.trace or "")


async def _shutdown(index, outcome):
    life = _lifespans.pop(index, None)
    if life is None or life.task.done():
        outcome.set(3, "")
        return
    await life.queue.put({"type": "lifespan.shutdown"})
    try:
        ok, message = await life.stopped
        outcome.set(0 if ok else 1, message)
    except _Raised as r:
        outcome.set(2, r.trace or "")


class _Raised(Exception):
    def __init__(self, trace, error):
        super().__init__(trace)
        self.trace = trace
        self.error = error
