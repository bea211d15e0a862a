"""An HTTP/2 client steered line by line, for the e2e tests.

    python3 h2_client.py [--window N] PORT

Opens an h2c connection to 127.0.0.1:PORT whose SETTINGS_INITIAL_WINDOW_SIZE
is N (65535 by default; 0 lets the host send answer heads but no DATA),
then reads commands on its standard input, one a line:
    get PATH     sends GET PATH on the next stream (1, 3, ...), prints `sent ID`
    reset ID     sends RST_STREAM CANCEL on stream ID, prints `reset sent ID`
    ping         sends a PING; its ACK prints `pong` (the host reads a batch
                 of frames, dispatches its requests, then writes: after the
                 ACK, the requests sent before the PING are with their apps)
At the end of its input it closes the connection and prints `closed`.
What the host sends is printed as it comes: `status ID CODE` for an
answer's head, `body ID TEXT` and `end ID` when a stream's DATA ends it,
`end ID` when its head does, `rst ID CODE` for a reset, `goaway CODE LAST`,
and `closed by the host`. Frames are read raw
(hyperframe, hpack). Exit status 3 if the packages are missing.
"""

import argparse
import os
import select
import socket
import sys

try:
    import hpack
    from hyperframe.frame import (
        DataFrame,
        Frame,
        GoAwayFrame,
        HeadersFrame,
        PingFrame,
        RstStreamFrame,
        SettingsFrame,
        WindowUpdateFrame,
    )
except ImportError:
    print("python3 -m pip install h2", file=sys.stderr)
    sys.exit(3)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
INITIAL_WINDOW_SIZE = 0x4
CANCEL = 0x8


def say(text):
    print(text, flush=True)


class Client:
    def __init__(self, port, window):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.next_id, self.buf, self.window = 1, b"", window
        self.bodies = {}
        settings = SettingsFrame(0, settings={INITIAL_WINDOW_SIZE: window})
        self.sock.sendall(PREFACE + settings.serialize())

    def get(self, path):
        sid = self.next_id
        self.next_id += 2
        head = HeadersFrame(sid, flags=["END_STREAM", "END_HEADERS"])
        head.data = self.enc.encode(
            [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "localhost")]
        )
        self.sock.sendall(head.serialize())
        say(f"sent {sid}")

    def ping(self):
        self.sock.sendall(PingFrame(0, opaque_data=b"steered!").serialize())

    def reset(self, sid):
        self.sock.sendall(RstStreamFrame(sid, error_code=CANCEL).serialize())
        say(f"reset sent {sid}")

    def read(self):
        """Reads what came; false once the host closed the connection."""
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            say("reset by the host")
            return False
        if not data:
            return False
        self.buf += data
        while len(self.buf) >= 9:
            frame, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
            if len(self.buf) < 9 + length:
                break
            frame.parse_body(memoryview(self.buf[9 : 9 + length]))
            self.buf = self.buf[9 + length :]
            self.received(frame)
        return True

    def received(self, frame):
        if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
            self.sock.sendall(SettingsFrame(0, flags=["ACK"]).serialize())
        elif isinstance(frame, PingFrame) and "ACK" in frame.flags:
            say("pong")
        elif isinstance(frame, GoAwayFrame):
            say(f"goaway {frame.error_code} {frame.last_stream_id}")
        elif isinstance(frame, RstStreamFrame):
            say(f"rst {frame.stream_id} {frame.error_code}")
        elif isinstance(frame, HeadersFrame):
            fields = dict(self.dec.decode(frame.data))
            say(f"status {frame.stream_id} {fields.get(':status')}")
            if "END_STREAM" in frame.flags:
                say(f"end {frame.stream_id}")
        elif isinstance(frame, DataFrame):
            body = self.bodies.get(frame.stream_id, b"") + frame.data
            self.bodies[frame.stream_id] = body[:4096]
            if frame.data and self.window:
                # Give back what was read, on the stream and the connection.
                n = len(frame.data)
                updates = WindowUpdateFrame(0, window_increment=n).serialize()
                if "END_STREAM" not in frame.flags:
                    updates += WindowUpdateFrame(frame.stream_id, window_increment=n).serialize()
                self.sock.sendall(updates)
            if "END_STREAM" in frame.flags:
                text = self.bodies.pop(frame.stream_id, b"").decode(errors="replace")
                say(f"body {frame.stream_id} {text}")
                say(f"end {frame.stream_id}")


def command(c, line):
    words = line.split()
    if words[:1] == ["get"] and len(words) == 2:
        c.get(words[1])
    elif words == ["ping"]:
        c.ping()
    elif words[:1] == ["reset"] and len(words) == 2:
        c.reset(int(words[1]))
    else:
        say(f"unknown command: {line.strip()}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=int, default=65535)
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    c = Client(args.port, args.window)
    pending = b""
    while True:
        ready, _, _ = select.select([c.sock, sys.stdin], [], [], 60)
        if not ready:
            say("timed out")
            return
        if c.sock in ready and not c.read():
            say("closed by the host")
            return
        if sys.stdin in ready:
            # Raw reads: several commands may come in one, and a buffered
            # reader would keep the rest where select cannot see it.
            data = os.read(sys.stdin.fileno(), 4096)
            if not data:
                c.sock.close()
                say("closed")
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                command(c, line.decode())


main()
