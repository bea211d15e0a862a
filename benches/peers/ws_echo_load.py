#!/usr/bin/env python3
"""WebSocket echo load for benches/peers/asgi_vs_peers.sh.

Usage: ws_echo_load.py URL [CONNS] [TOTAL] [SIZE] [WINDOW]
  URL     ws://127.0.0.1:PORT/PATH (plain ws://, 127.0.0.1 or localhost only)
  CONNS   connections (10), TOTAL echoes to wait for (20000), SIZE bytes of
          text per message (32), WINDOW messages in flight per connection (1)

Opens CONNS connections, then each sends a text message, waits for the echo
(checked byte for byte) and sends the next, keeping WINDOW in flight, until
TOTAL echoes are in. Prints one line:
  echoes N seconds S rate R/s client-cpu-busy P%
where the client's busy share is its process CPU time over the timed span:
near 100% means the client, not the server, was the limit. A bare asyncio
Protocol (uvloop when importable) with the frames masked once up front, so
the client spends as little as Python allows per message.
"""

import asyncio
import base64
import os
import struct
import sys
import time
from urllib.parse import urlsplit


def masked_frame(payload: bytes, opcode: int) -> bytes:
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + body


class Run:
    def __init__(self, total, window, payload):
        self.total = total
        self.window = window
        self.payload = payload
        self.frame = masked_frame(payload, 0x1)
        self.sent = 0
        self.done = 0
        self.loop = asyncio.get_running_loop()
        self.finished = self.loop.create_future()

    def fail(self, why):
        if not self.finished.done():
            self.finished.set_exception(RuntimeError(why))


class Echo(asyncio.Protocol):
    def __init__(self, run, request):
        self.run = run
        self.request = request
        self.buf = bytearray()
        self.open = False
        self.transport = None
        self.upgraded = run.loop.create_future()

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc):
        if not self.upgraded.done():
            self.upgraded.set_exception(RuntimeError(f"closed before the upgrade: {exc}"))
        elif not self.run.finished.done():
            self.run.fail(f"a connection closed mid-run: {exc}")

    def start(self):
        for _ in range(self.run.window):
            if self.run.sent >= self.run.total:
                return
            self.run.sent += 1
            self.transport.write(self.run.frame)

    def data_received(self, data):
        buf = self.buf
        buf += data
        if not self.open:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(buf[: buf.find(b"\r\n")])
            if b" 101 " not in status:
                self.upgraded.set_exception(RuntimeError(f"no upgrade: {status!r}"))
                self.transport.close()
                return
            del buf[: end + 4]
            self.open = True
            self.upgraded.set_result(None)
        run = self.run
        pos = 0
        echoes = 0
        while len(buf) - pos >= 2:
            opcode = buf[pos] & 0x0F
            n = buf[pos + 1] & 0x7F
            head = 2
            if n == 126:
                if len(buf) - pos < 4:
                    break
                (n,) = struct.unpack_from("!H", buf, pos + 2)
                head = 4
            elif n == 127:
                if len(buf) - pos < 10:
                    break
                (n,) = struct.unpack_from("!Q", buf, pos + 2)
                head = 10
            if len(buf) - pos < head + n:
                break
            if opcode != 0x1 or buf[pos + head : pos + head + n] != run.payload:
                run.fail(f"unexpected frame: opcode {opcode}, {n} bytes")
                return
            pos += head + n
            echoes += 1
        if pos:
            del buf[:pos]
        if not echoes:
            return
        run.done += echoes
        more = min(echoes, run.total - run.sent)
        if more > 0:
            run.sent += more
            self.transport.write(run.frame * more)
        if run.done >= run.total and not run.finished.done():
            run.finished.set_result(None)


async def main(url, conns, total, size, window):
    parts = urlsplit(url)
    if parts.scheme != "ws" or parts.hostname not in ("127.0.0.1", "localhost"):
        sys.exit("ws_echo_load.py: only ws://127.0.0.1 or ws://localhost")
    port = parts.port or 80
    path = parts.path or "/"
    run = Run(total, window, b"x" * size)
    protocols = []
    for _ in range(conns):
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {parts.hostname}:{port}\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
        _, proto = await run.loop.create_connection(
            lambda r=request: Echo(run, r), parts.hostname, port
        )
        await proto.upgraded
        protocols.append(proto)
    cpu0, t0 = time.process_time(), time.perf_counter()
    for proto in protocols:
        proto.start()
    await asyncio.wait_for(run.finished, timeout=120)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    close = masked_frame(struct.pack("!H", 1000), 0x8)
    for proto in protocols:
        proto.transport.write(close)
        proto.transport.close()
    print(
        f"echoes {run.done} seconds {wall:.3f} rate {run.done / wall:.0f}/s "
        f"client-cpu-busy {100 * cpu / wall:.0f}%"
    )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    args = [int(a) for a in sys.argv[2:6]]
    conns, total, size, window = args + [10, 20000, 32, 1][len(args) :]
    try:
        from uvloop import run as run_loop
    except ImportError:
        run_loop = asyncio.run
    run_loop(main(sys.argv[1], conns, total, size, window))
