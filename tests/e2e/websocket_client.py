"""A real WebSocket client (Python's `websockets`) against a running stoa.

    python3 websocket_client.py [--ca CAFILE] [--path PATH] PORT CASE...

Runs each case against ws://127.0.0.1:PORT/demo/ws (with --ca, against
wss://127.0.0.1:PORT/demo/ws, trusting CAFILE and asking for the name
`localhost`; with --path, against PATH in place of /demo/ws) and prints
one line per case, `CASE ok` or `CASE FAIL: why`; exits 0 only if every
case passed.
Cases that must break the protocol (invalid UTF-8, an unmasked frame) write
raw frames on the client's own transport after a real handshake, then let
the client read the host's close frame. `many N` opens N WebSockets at once
and has each echo a message.

The client is websockets' asyncio one: one thread reads and writes every
connection. (Its threaded client reads in a thread of its own while the
caller writes; over TLS that is two threads in one OpenSSL session, which
OpenSSL does not allow: with TLS 1.3, whose session tickets come after the
handshake, 5 connections in 3,000 lost their upgrade or their close; none
over TLS 1.2, and none with this client.)
"""

import asyncio
import os
import resource
import ssl
import struct
import sys

try:
    import websockets
    from websockets.asyncio.client import connect as aconnect
except ImportError as e:  # the Rust side names the tool
    print(f"websockets missing: {e}", file=sys.stderr)
    sys.exit(3)

ARGS = sys.argv[1:]
CA = None
PATH = "/demo/ws"
while ARGS[:1] in (["--ca"], ["--path"]):
    if ARGS[0] == "--ca":
        CA = ARGS[1]
    else:
        PATH = ARGS[1]
    ARGS = ARGS[2:]
PORT = int(ARGS[0])
BASE = f"{'wss' if CA else 'ws'}://127.0.0.1:{PORT}{PATH}"
WAIT = 10
# Over TLS every connection verifies the host's certificate against CA.
TLS = {}
if CA:
    TLS = {"ssl": ssl.create_default_context(cafile=CA), "server_hostname": "localhost"}


def connect(uri, **kw):
    """A WebSocket to `uri`, over TLS with --ca."""
    return aconnect(uri, **TLS, **kw)


async def recv(ws):
    """The next message, within WAIT."""
    return await asyncio.wait_for(ws.recv(), WAIT)


def frame(opcode, payload, mask=b"\x37\xfa\x21\x3d", fin=True):
    """A client frame, masked unless `mask` is None."""
    first = (0x80 if fin else 0) | opcode
    n = len(payload)
    bit = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", first, bit | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", first, bit | 126, n)
    else:
        head = struct.pack("!BBQ", first, bit | 127, n)
    if not mask:
        return head + payload
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def closed_with(ws):
    """Reads until the host closes; the code of its close frame."""
    try:
        while True:
            await recv(ws)
    except websockets.ConnectionClosed as e:
        return e.rcvd.code if e.rcvd else None


async def echo():
    async with connect(BASE) as ws:
        await ws.send("hello")
        assert await recv(ws) == "hello"
        await ws.send(b"\x00\x01\xff")
        assert await recv(ws) == b"\x00\x01\xff"
        await ws.send("héllo wörld ✓")
        assert await recv(ws) == "héllo wörld ✓"


async def large():
    """A message of exactly the host's limit (64 KiB here, four TLS
    records' worth), text and binary, comes back whole."""
    async with connect(BASE) as ws:
        text = "".join(chr(ord("a") + i % 26) for i in range(64 * 1024))
        await ws.send(text)
        assert await recv(ws) == text, "the text echo differs"
        data = bytes(i % 251 for i in range(64 * 1024))
        await ws.send(data)
        assert await recv(ws) == data, "the binary echo differs"


async def fragmentation():
    async with connect(BASE) as ws:
        # Three frames; the two-byte "é" split across the last two.
        await ws.send(["frag", "ment h", "é"])
        got = await recv(ws)
        assert got == "fragment hé", got
        await ws.send([b"\x01", b"\x02\x03"])
        got = await recv(ws)
        assert got == b"\x01\x02\x03", got


async def ping_pong():
    async with connect(BASE) as ws:
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, WAIT)
        # A ping between the fragments of a message is answered too.
        ws.transport.write(frame(0x1, b"a", fin=False) + frame(0x9, b"p") + frame(0x0, b"b"))
        got = await recv(ws)
        assert got == "ab", got


async def close_handshake():
    async with connect(BASE) as ws:
        await ws.send("x")
        await recv(ws)
        await ws.close(1000, "bye")
    code = ws.protocol.close_rcvd.code if ws.protocol.close_rcvd else None
    assert code == 1000, f"close echo {code}"
    reason = ws.protocol.close_rcvd.reason
    assert reason == "bye", reason
    # The host closed the TCP connection after the handshake.
    assert ws.protocol.state is websockets.protocol.State.CLOSED, ws.protocol.state


async def oversized():
    async with connect(BASE, max_size=None) as ws:
        await ws.send("x" * (100 * 1024))
        code = await closed_with(ws)
        assert code == 1009, code


async def invalid_utf8():
    async with connect(BASE) as ws:
        ws.transport.write(frame(0x1, b"ok\xff\xfe"))
        code = await closed_with(ws)
        assert code == 1007, code


async def unmasked():
    async with connect(BASE) as ws:
        ws.transport.write(frame(0x1, b"bare", mask=None))
        code = await closed_with(ws)
        assert code == 1002, code


async def broadcast():
    room = f"{BASE}?room=r{os.getpid()}"
    async with connect(room) as a, connect(room) as b:
        await a.send("from a")
        assert await recv(b) == "from a"
        assert await recv(a) == "from a"
        await b.send(b"\x07")
        assert await recv(a) == b"\x07"
        assert await recv(b) == b"\x07"
    async with connect(f"{BASE}?room=other{os.getpid()}") as c, connect(room) as a:
        await a.send("only here")
        assert await recv(a) == "only here"
        await c.send("c")
        assert await recv(c) == "c", "a room of its own"


async def hold():
    """Opens a WebSocket, says so, and reports how the host closes it."""
    async with connect(BASE) as ws:
        print("open", flush=True)
        code = await closed_with(ws)
        print(f"closed {code}", flush=True)


async def many(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    conns = await asyncio.gather(*(connect(BASE, open_timeout=30) for _ in range(n)))
    try:
        await asyncio.gather(*(c.send(f"m{i}") for i, c in enumerate(conns)))
        got = await asyncio.gather(*(asyncio.wait_for(c.recv(), 30) for c in conns))
        bad = [i for i, g in enumerate(got) if g != f"m{i}"]
        assert not bad, f"{len(bad)} wrong echoes, first {bad[:5]}"
    finally:
        await asyncio.gather(*(c.close() for c in conns))


CASES = {
    "echo": echo,
    "large": large,
    "fragmentation": fragmentation,
    "ping_pong": ping_pong,
    "close_handshake": close_handshake,
    "oversized": oversized,
    "invalid_utf8": invalid_utf8,
    "unmasked": unmasked,
    "broadcast": broadcast,
    "hold": hold,
}

failed = False
args = ARGS[1:]
while args:
    case = args.pop(0)
    try:
        if case == "many":
            n = int(args.pop(0))
            asyncio.run(many(n))
            case = f"many {n}"
        else:
            asyncio.run(CASES[case]())
        print(f"{case} ok", flush=True)
    except Exception as e:  # report and go on with the next case
        failed = True
        print(f"{case} FAIL: {type(e).__name__}: {e}", flush=True)
sys.exit(1 if failed else 0)
