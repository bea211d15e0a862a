"""One HTTP/2 request in flight across the host's drain.

    python3 h2_drain.py PORT PATH

Opens an h2c connection, sends GET PATH and a PING right behind it, and
prints `dispatched` when the PING's ACK comes (the host reads a batch of
frames, dispatches its requests, then writes: the ACK comes after the
request went to its app). Then it prints, as they come, `goaway CODE LAST`
for a GOAWAY, `status N` for the answer's head, `body TEXT` and `ended`
when its stream ends, and `closed` when the host closes the connection.
The e2e test signals the host after `dispatched`. Frames are read raw
(hyperframe, hpack), so frames after a GOAWAY are seen as they are.
Exit status 3 if the packages are missing.
"""

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
        SettingsFrame,
    )
except ImportError:
    print("python3 -m pip install h2", file=sys.stderr)
    sys.exit(3)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def say(text):
    print(text, flush=True)


def main():
    port, path = int(sys.argv[1]), sys.argv[2]
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    enc, dec = hpack.Encoder(), hpack.Decoder()
    head = HeadersFrame(1, flags=["END_STREAM", "END_HEADERS"])
    head.data = enc.encode([(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "localhost")])
    ping = PingFrame(0, opaque_data=b"in-fligh")
    sock.sendall(PREFACE + SettingsFrame(0).serialize() + head.serialize() + ping.serialize())
    buf, body = b"", b""
    while True:
        data = sock.recv(65536)
        if not data:
            say("closed")
            return
        buf += data
        while len(buf) >= 9:
            frame, length = Frame.parse_frame_header(memoryview(buf[:9]))
            if len(buf) < 9 + length:
                break
            frame.parse_body(memoryview(buf[9 : 9 + length]))
            buf = buf[9 + length :]
            if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
                sock.sendall(SettingsFrame(0, flags=["ACK"]).serialize())
            elif isinstance(frame, PingFrame) and "ACK" in frame.flags:
                say("dispatched")
            elif isinstance(frame, GoAwayFrame):
                say(f"goaway {frame.error_code} {frame.last_stream_id}")
            elif isinstance(frame, HeadersFrame):
                fields = dict(dec.decode(frame.data))
                say(f"status {fields.get(':status')}")
                if "END_STREAM" in frame.flags:
                    say("ended")
            elif isinstance(frame, DataFrame):
                body += frame.data
                if "END_STREAM" in frame.flags:
                    say(f"body {body.decode(errors='replace')}")
                    say("ended")


main()
