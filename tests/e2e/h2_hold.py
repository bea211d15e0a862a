"""A client that opens streams and never opens their windows.

    python3 h2_hold.py PORT PATH N

Opens an h2c connection whose SETTINGS_INITIAL_WINDOW_SIZE is 0, so the
host may send answer heads but no DATA, and sends N requests GET PATH
(streams 1, 3, ...). It prints `status ID CODE` for each answer's head as
it comes, and `held` once the N heads have come. Then each line `probe`
on its standard input sends one more GET PATH, whose head is printed the
same way; at the end of its input the client closes the connection and
prints `closed`. Frames are read raw (hyperframe, hpack). Exit status 3
if the packages are missing.
"""

import select
import socket
import sys

try:
    import hpack
    from hyperframe.frame import Frame, GoAwayFrame, HeadersFrame, SettingsFrame
except ImportError:
    print("python3 -m pip install h2", file=sys.stderr)
    sys.exit(3)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
INITIAL_WINDOW_SIZE = 0x4


def say(text):
    print(text, flush=True)


class Client:
    def __init__(self, port, path):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.path, self.next_id, self.buf, self.heads = path, 1, b"", 0
        settings = SettingsFrame(0, settings={INITIAL_WINDOW_SIZE: 0})
        self.sock.sendall(PREFACE + settings.serialize())

    def request(self):
        head = HeadersFrame(self.next_id, flags=["END_STREAM", "END_HEADERS"])
        head.data = self.enc.encode(
            [(":method", "GET"), (":path", self.path), (":scheme", "http"), (":authority", "localhost")]
        )
        self.next_id += 2
        self.sock.sendall(head.serialize())

    def read(self):
        """Reads what came; false once the host closed the connection."""
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buf += data
        while len(self.buf) >= 9:
            frame, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
            if len(self.buf) < 9 + length:
                break
            frame.parse_body(memoryview(self.buf[9 : 9 + length]))
            self.buf = self.buf[9 + length :]
            if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
                self.sock.sendall(SettingsFrame(0, flags=["ACK"]).serialize())
            elif isinstance(frame, GoAwayFrame):
                say(f"goaway {frame.error_code} {frame.last_stream_id}")
            elif isinstance(frame, HeadersFrame):
                fields = dict(self.dec.decode(frame.data))
                say(f"status {frame.stream_id} {fields.get(':status')}")
                self.heads += 1
        return True


def main():
    port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    c = Client(port, path)
    for _ in range(n):
        c.request()
    said_held, stdin_open = False, True
    while True:
        if not said_held and c.heads >= n:
            say("held")
            said_held = True
        watched = [c.sock] + ([sys.stdin] if stdin_open else [])
        ready, _, _ = select.select(watched, [], [], 60)
        if not ready:
            say("timed out")
            return
        if c.sock in ready and not c.read():
            say("closed by the host")
            return
        if sys.stdin in ready:
            line = sys.stdin.readline()
            if not line:
                c.sock.close()
                say("closed")
                return
            if line.strip() == "probe":
                c.request()


main()
