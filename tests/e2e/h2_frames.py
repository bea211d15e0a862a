"""A frame-level HTTP/2 conformance and attack client against a running stoa.

    python3 h2_frames.py [--tls] [--unix SOCKET] [--timeout SECS] HOST PORT PATH CASE...

h2spec (the Go conformance suite) cannot be built here, so this is our own
port of its cases, plus a set of known HTTP/2 attacks. The Rust e2e tests
start a stoa with h2c (prior knowledge, plain port) or h2 (TLS with ALPN),
run this script against it and require exit status 0; the output says which
case broke and how.

HOST and PORT name the server (they also make the :authority); with --unix
the TCP connection is replaced by a connection to the Unix socket SOCKET.
--tls speaks TLS with ALPN "h2" and verifies no certificate (the tests use
self-signed ones). PATH is a path that answers 200 with a non-empty body to
GET and to POST (`/hello/`, say). A CASE is a case id (`http2/6.5.2/1`,
`hpack/4.2/1`, `generic/3.10/2`, `attack/rapid-reset`), a section of ids
(`http2/6.5`), or a group: `http2`, `hpack`, `generic` (h2spec's three
suites, with h2spec's ids), `attacks`, or `all`.

Each case opens its own connection, sends the preface and a SETTINGS (and
waits for the server's SETTINGS and its ACK of ours), then writes raw frames
(built with hyperframe, header blocks with hpack's Encoder) and reads the
server's frames. Each wait for an expected frame gives up after --timeout
seconds (2 by default, as h2spec). Expected results follow h2spec's rules:
for a connection error, a GOAWAY with the named code or the connection
closing passes; for a stream error, a RST_STREAM (or a GOAWAY) with the
code, or the connection closing, passes.

Output: one line a case, `PASS <id> <description>` (for the attacks, with
`: <what was measured>`; for a case h2spec would skip, `: skipped, <why>`)
or `FAIL <id> <description>: expected X, got Y`; then
`N cases, P passed, F failed`. Exit status 0 only if every case passed, 1
if any failed, 2 on a usage error, 3 if the h2/hpack packages are missing.

The attacks write with a non-blocking socket from one thread (OpenSSL does
not allow a second thread in the same TLS session), reading whatever the
server sends while they write, so a server that stops reading cannot block
them and a GOAWAY is seen as soon as it arrives.
"""

# Known nginx deviations: nginx 1.22.1 (Debian, http_v2_module), serving
# `location /hello/ { return 200 "hello\n"; }`, fails these cases over h2c
# and TLS alike (checked against RFC 9113 and RFC 7541):
#   http2/5.1/1, 5.1/2, 5.1/3, 6.4/2: DATA, RST_STREAM, WINDOW_UPDATE on an
#     idle stream are ignored (nginx keeps no state for streams it has not
#     seen). RFC 9113 5.1 ("idle") and 6.4 make each a connection error
#     PROTOCOL_ERROR. nginx is wrong.
#   http2/5.1/8, 5.1/11: DATA on a closed stream (after the client's
#     RST_STREAM; after both END_STREAMs) is ignored. RFC 9113 6.1: DATA on a
#     stream not "open" or "half-closed (local)" MUST get a stream error
#     STREAM_CLOSED (5.1 only says MAY for the other frame types). nginx is
#     wrong.
#   http2/6.9.1/3: nginx writes its answer the moment the first WINDOW_UPDATE
#     opens the stream's window, and ends the stream (RST_STREAM NO_ERROR);
#     the second update then meets a closed stream, where RFC 9113 6.9 says
#     a WINDOW_UPDATE MUST NOT be treated as an error. nginx is within the
#     RFC: the case (h2spec's; both updates go in one write) presumes a
#     server that reads a batch of frames before it writes.
#   http2/8.1.2.1/1, 8.1.2.1/2, 8.1.2.3/1 to /7: malformed requests (unknown
#     or response pseudo-header; empty, missing or repeated :method/:scheme/
#     :path) get a 400 answer, not RST_STREAM PROTOCOL_ERROR. RFC 9113 8.1.1
#     makes them a stream error but lets a server answer before "closing or
#     resetting" the stream; h2spec and this script want the reset. nginx is
#     lenient, not strictly wrong.
#   http2/8.1.2.1/4, 8.1.2.2/1, 8.1.2.2/2: a pseudo-header after a regular
#     field, `connection: keep-alive`, `te: trailers, deflate` are answered
#     200. RFC 9113 8.3 and 8.2.2 make each request malformed. nginx is wrong.
#   http2/8.1.2.6/1, 8.1.2.6/2: a content-length other than the DATA sum is
#     not noticed (`return` discards the body unread). RFC 9113 8.1.1 makes
#     it malformed. nginx is wrong.
#   hpack/4.2/1: a dynamic table size update at the end of a block is
#     accepted; RFC 7541 4.2 allows it only at the start. nginx is wrong.
#   hpack/5.2/1: Huffman padding of more than 7 bits is accepted; RFC 7541
#     5.2 makes it a decoding error. nginx is wrong.
# and defends against these attacks otherwise than stoa must:
#   attack/rapid-reset: ends it with GOAWAY NO_ERROR ("too many refused
#     streams", after some 390 streams), not ENHANCE_YOUR_CALM.
#   attack/made-you-reset: answers the first WINDOW_UPDATE 0 with GOAWAY
#     PROTOCOL_ERROR (a stream error taken as a connection error, which RFC
#     9113 5.4 allows), so no stream is ever reset.
#   attack/settings-flood, attack/ping-flood: its guard (10 x keepalive_requests
#     reads while no stream is open) counts reads, not frames; 100,000 frames
#     trip it or not depending on how the bytes arrive (over TLS usually,
#     over h2c rarely).
#   attack/empty-data-flood: never stopped (a stream is open, and 0.9 MB is
#     under its guard of 8 x the payload + 1 MB).
# Passing cases h2spec writes differently: the "half-closed" and "open
# stream" cases first set SETTINGS_INITIAL_WINDOW_SIZE 0 (see hold()), since
# nginx (like any server answering at once) had closed the stream by the
# time the next frame came (without it, nginx failed 5.1/5 and 6.1/2 here).

import argparse
import collections
import select
import socket
import ssl
import struct
import sys
import time

try:
    import hpack
    from hpack.hpack import encode_integer
    from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
    from hyperframe.frame import (
        ContinuationFrame, DataFrame, GoAwayFrame, HeadersFrame, PingFrame,
        PriorityFrame, PushPromiseFrame, RstStreamFrame, SettingsFrame,
        WindowUpdateFrame)
except ImportError as e:  # the Rust side names the tool
    print(f"h2 packages missing (pip install h2): {e}", file=sys.stderr)
    sys.exit(3)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types, flags, settings and error codes (RFC 9113 sections 6, 7).
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = range(10)
TYPE_NAMES = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS",
              "PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"]
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, \
    MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = range(1, 7)
ERRORS = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
          "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR",
          "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
          "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"]
(NO_ERROR, PROTOCOL_ERROR, _, FLOW_CONTROL_ERROR, _, STREAM_CLOSED,
 FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, _,
 ENHANCE_YOUR_CALM) = range(12)

SEND_BUFFER = 64 * 1024
DEFAULT_WINDOW = 65535
DEFAULT_FRAME_SIZE = 16384
DUMMY_LEN = 4000  # h2spec's --max-header-length default
UNKNOWN_TYPE = 0x16


def error_name(code):
    return ERRORS[code] if code < len(ERRORS) else f"0x{code:x}"


class Fail(Exception):
    """A case's verdict: `expected` did not happen, `got` did."""

    def __init__(self, expected, got):
        super().__init__(f"expected {expected}, got {got}")
        self.expected, self.got = expected, got


class Skip(Exception):
    """A case h2spec skips for this server (told why)."""


class Target:
    """Where and how to connect, and the request every case makes."""

    def __init__(self, args):
        self.host, self.port, self.path = args.host, args.port, args.path
        self.tls, self.unix, self.timeout = args.tls, args.unix, args.timeout
        self.scheme = "https" if self.tls else "http"
        default = 443 if self.tls else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = host if self.port == default else f"{host}:{self.port}"
        self.context = None
        if self.tls:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            self.context.check_hostname = False
            self.context.verify_mode = ssl.CERT_NONE
            self.context.set_alpn_protocols(["h2"])

    def open(self):
        """A connected non-blocking socket (TLS with ALPN h2 under --tls).
        Its send buffer is kept small, so that what a flood counts as sent
        is close to what reached the server (loopback buffers grow to MBs)."""
        family = socket.AF_UNIX if self.unix else socket.AF_INET
        if not self.unix and ":" in self.host:
            family = socket.AF_INET6
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        sock.settimeout(self.timeout)
        if self.unix:
            sock.connect(self.unix)
        else:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.connect((self.host, self.port))
        if self.tls:
            sock = self.context.wrap_socket(sock, server_hostname=self.host)
            if sock.selected_alpn_protocol() != "h2":
                sock.close()
                raise Fail("ALPN h2", repr(sock.selected_alpn_protocol()))
        sock.setblocking(False)
        return sock


class Frame:
    """A frame the server sent (headers: its decoded header block, if any)."""

    def __init__(self, ftype, flags, sid, payload):
        self.type, self.flags, self.sid, self.payload = ftype, flags, sid, payload
        self.headers = None

    def has(self, flag):
        return bool(self.flags & flag)

    @property
    def ends_stream(self):
        return self.type in (DATA, HEADERS) and self.has(END_STREAM)

    @property
    def is_ack(self):
        return self.type in (SETTINGS, PING) and self.has(ACK)

    @property
    def code(self):
        """The error code of a RST_STREAM or GOAWAY."""
        at = 0 if self.type == RST_STREAM else 4
        return int.from_bytes(self.payload[at:at + 4], "big")

    @property
    def status(self):
        return dict(self.headers or ()).get(":status")

    def settings(self):
        p = self.payload
        return {int.from_bytes(p[i:i + 2], "big"): int.from_bytes(p[i + 2:i + 6], "big")
                for i in range(0, len(p) - 5, 6)}

    def describe(self):
        name = TYPE_NAMES[self.type] if self.type < len(TYPE_NAMES) else f"type 0x{self.type:x}"
        if self.type == GOAWAY:
            last = int.from_bytes(self.payload[:4], "big") & 0x7FFFFFFF
            return f"GOAWAY ({error_name(self.code)}, last stream {last})"
        if self.type == RST_STREAM:
            return f"RST_STREAM stream {self.sid} ({error_name(self.code)})"
        text = f"{name} stream {self.sid}" if self.sid else name
        if self.type == DATA:
            text += f" length {len(self.payload)}"
        if self.status:
            text += f" :status {self.status}"
        if self.is_ack:
            text += " ACK"
        if self.ends_stream:
            text += " END_STREAM"
        return text


CLOSED, TIMEOUT = "connection closed", "timeout"


class Flood:
    """What a flood measured."""

    def __init__(self, total):
        self.total, self.units, self.bytes = total, 0, 0
        self.goaway, self.closed, self.stalled = None, False, False
        self.received = {}

    def ended(self):
        """How the server ended it, if it did."""
        if self.goaway is not None:
            return self.goaway.describe() + (" and close" if self.closed else "")
        return "close" if self.closed else None

    def answers(self):
        """What the server sent meanwhile, by frame type."""
        text = ", ".join(f"{n} {TYPE_NAMES[t] if t < len(TYPE_NAMES) else t}"
                         for t, n in sorted(self.received.items()))
        return f"the server sent {text or 'no frame'}"


class Conn:
    """One HTTP/2 connection: raw frame I/O, an HPACK encoder and decoder."""

    def __init__(self, target):
        self.target = target
        self.sock = target.open()
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.inbuf = bytearray()
        self.frames = collections.deque()
        self.keep = True  # queue the frames read (floods only count them)
        self.counts = collections.Counter()
        self.goaway = None
        self.eof = self.write_closed = False
        self.server_settings = {}
        self.consumed = collections.Counter()
        self.updates = []
        self.block_frags = bytearray()
        self.block_frame = None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    # -- reading

    def _read_some(self):
        """Moves what the socket holds into frames; False if it held nothing."""
        try:
            data = self.sock.recv(262144)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        except OSError:  # reset, TLS EOF
            data = b""
        if not data:
            self.eof = True
            return True
        self.inbuf += data
        self._parse()
        return True

    def _parse(self):
        buf, at = self.inbuf, 0
        while len(buf) - at >= 9:
            length = int.from_bytes(buf[at:at + 3], "big")
            if len(buf) - at < 9 + length:
                break
            sid = int.from_bytes(buf[at + 5:at + 9], "big") & 0x7FFFFFFF
            frame = Frame(buf[at + 3], buf[at + 4], sid, bytes(buf[at + 9:at + 9 + length]))
            at += 9 + length
            self._received(frame)
        del buf[:at]

    def _received(self, f):
        self.counts[f.type] += 1
        if f.type == GOAWAY and self.goaway is None:
            self.goaway = f
        if f.type in (HEADERS, PUSH_PROMISE, CONTINUATION):
            self._header_block(f)
        if f.type == DATA and f.payload:
            self._consume(f.sid, len(f.payload))
        if self.keep:
            self.frames.append(f)

    def _header_block(self, f):
        """Decodes the server's header blocks in order (keeps HPACK in sync)."""
        frag = f.payload
        if f.type != CONTINUATION:
            if f.has(PADDED):
                frag = frag[1:len(frag) - frag[0]]
            if f.type == HEADERS and f.has(PRIORITY_FLAG):
                frag = frag[5:]
            if f.type == PUSH_PROMISE:
                frag = frag[4:]
            self.block_frags = bytearray()
            self.block_frame = f
        self.block_frags += frag
        if f.has(END_HEADERS):
            try:
                headers = list(self.dec.decode(bytes(self.block_frags)))
            except Exception:  # noqa: BLE001 - shown as no headers
                headers = None
            f.headers = headers
            if self.block_frame is not None:
                self.block_frame.headers = headers

    def _consume(self, sid, n):
        """Gives back flow-control credit as h2spec does, once half is used."""
        for key in (0, sid):
            self.consumed[key] += n
            if self.consumed[key] >= DEFAULT_WINDOW // 2:
                self.updates.append(window_update(key, self.consumed[key]))
                self.consumed[key] = 0

    def _readable(self, deadline):
        if self.target.tls and self.sock.pending():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        return bool(select.select([self.sock], [], [], left)[0])

    def event(self, deadline):
        """The next frame before `deadline`, else CLOSED or TIMEOUT."""
        while True:
            if self.frames:
                return self.frames.popleft()
            if self.eof:
                return CLOSED
            if self.updates:
                updates, self.updates = self.updates, []
                self.send(b"".join(updates))
            if not self._readable(deadline):
                return TIMEOUT
            self._read_some()

    def deadline(self, seconds=None):
        return time.monotonic() + (self.target.timeout if seconds is None else seconds)

    # -- writing

    def _send_some(self, view):
        """Bytes of `view` the socket took (0 if full); None once it is shut."""
        try:
            return self.sock.send(view)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return 0
        except OSError:
            self.write_closed = True
            return None

    def send(self, data):
        """Writes `data`, reading meanwhile; gives up silently after the
        timeout or once the server has shut the connection (as h2spec)."""
        view = memoryview(data)
        deadline = self.deadline(max(self.target.timeout, 1))
        while view and not self.write_closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            rl = [] if self.eof else [self.sock]
            r, w, _ = select.select(rl, [self.sock], [], left)
            if r:
                self._read_some()
            if w:
                n = self._send_some(view)
                if n:
                    view = view[n:]

    def block(self, headers):
        """An HPACK header block for `headers`, with this connection's encoder."""
        return self.enc.encode(headers)

    def request(self, method="GET", extra=()):
        t = self.target
        return [(":method", method), (":scheme", t.scheme), (":path", t.path),
                (":authority", t.authority)] + list(extra)

    def open_stream(self, sid=1, method="GET", end_stream=True, extra=(), end_headers=True):
        """Sends a request's HEADERS on `sid`; returns the frame's bytes."""
        frame = headers_frame(sid, self.block(self.request(method, extra)), end_stream, end_headers)
        self.send(frame)
        return frame

    def handshake(self, settings=None):
        """Preface and SETTINGS, then waits for the server's SETTINGS (which
        it ACKs) and the ACK of ours."""
        if settings is None:
            settings = {INITIAL_WINDOW_SIZE: DEFAULT_WINDOW}
        self.send(PREFACE + settings_frame(settings))
        deadline = self.deadline()
        theirs = acked = False
        seen = []
        while not (theirs and acked):
            ev = self.event(deadline)
            if not isinstance(ev, Frame):
                raise Fail("the server's SETTINGS and an ACK of ours (handshake)", story(seen, ev))
            seen.append(ev.describe())
            if ev.type == SETTINGS and ev.is_ack:
                acked = True
            elif ev.type == SETTINGS:
                self.server_settings.update(ev.settings())
                self.send(settings_frame({}, ack=True))
                theirs = True
        limit = self.server_settings.get(HEADER_TABLE_SIZE, 4096)
        if limit < 4096:  # our encoder's table must fit the server's decoder
            self.enc.header_table_size = limit

    @property
    def max_frame_size(self):
        return self.server_settings.get(MAX_FRAME_SIZE, DEFAULT_FRAME_SIZE)

    # -- floods

    def flood(self, unit, total):
        """Sends `total` units (unit(i): bytes, all of one size) as fast as
        the socket takes them, reading whatever arrives, until all are sent,
        a GOAWAY arrives, the connection ends or the server stops reading;
        then waits for the server's verdict."""
        self.keep = False
        result = Flood(total)
        size = len(unit(0))
        per_batch = max(1, 65536 // size)
        batch, off, made = b"", 0, 0
        last = time.monotonic()
        stall = max(2 * self.target.timeout, 2)
        while self.goaway is None and not self.eof and not self.write_closed:
            if off == len(batch):
                if made == total:
                    break
                n = min(per_batch, total - made)
                batch, off = b"".join(unit(made + i) for i in range(n)), 0
                made += n
            if self.target.tls and self.sock.pending():
                self._read_some()
            r, w, _ = select.select([self.sock], [self.sock], [], 0.2)
            if r:
                self._read_some()
            sent = self._send_some(memoryview(batch)[off:]) if w else 0
            if sent:
                off += sent
                result.bytes += sent
                result.units = result.bytes // size
                last = time.monotonic()
            elif time.monotonic() - last > stall:
                result.stalled = True
                break
        self._await_end(self.deadline())
        result.goaway, result.closed = self.goaway, self.eof or self.write_closed
        result.received = dict(self.counts)
        return result

    def _await_end(self, deadline):
        """Reads until a GOAWAY and the close, or the deadline."""
        while not self.eof and self._readable(deadline):
            self._read_some()


# -- frame building (hyperframe where the frame is legal, raw bytes where not)

def raw(ftype, flags, sid, payload=b""):
    """Any frame at all, whatever the rules say."""
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", ftype, flags, sid) + payload


def with_flags(frame, flags):
    for flag in flags:
        frame.flags.add(flag)
    return frame.serialize()


def headers_frame(sid, block, end_stream=True, end_headers=True, pad=None, priority=None):
    f = HeadersFrame(sid, data=block)
    flags = ["END_STREAM"] * end_stream + ["END_HEADERS"] * end_headers
    if pad is not None:
        f.pad_length = pad
        flags.append("PADDED")
    if priority is not None:
        f.depends_on, f.stream_weight, f.exclusive = priority
        flags.append("PRIORITY")
    return with_flags(f, flags)


def continuation(sid, block, end_headers=True):
    if sid == 0:
        return raw(CONTINUATION, END_HEADERS if end_headers else 0, 0, block)
    return with_flags(ContinuationFrame(sid, data=block), ["END_HEADERS"] * end_headers)


def data_frame(sid, payload, end_stream=True, pad=None):
    f = DataFrame(sid, data=payload)
    flags = ["END_STREAM"] * end_stream
    if pad is not None:
        f.pad_length = pad
        flags.append("PADDED")
    return with_flags(f, flags)


def priority_frame(sid, depends_on=0, weight=255, exclusive=False):
    return PriorityFrame(sid, depends_on=depends_on, stream_weight=weight,
                         exclusive=exclusive).serialize()


def rst(sid, code):
    return RstStreamFrame(sid, error_code=code).serialize()


def settings_frame(settings, ack=False):
    return with_flags(SettingsFrame(0, settings=settings), ["ACK"] * ack)


def settings_list(pairs):
    """A SETTINGS frame that may repeat a parameter (hyperframe's may not)."""
    return raw(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def ping(payload=bytes(8), ack=False):
    return with_flags(PingFrame(0, opaque_data=payload), ["ACK"] * ack)


def goaway(last_sid, code, debug=b""):
    return GoAwayFrame(0, last_stream_id=last_sid, error_code=code,
                       additional_data=debug).serialize()


def window_update(sid, increment):
    return WindowUpdateFrame(sid, window_increment=increment).serialize()


def push_promise(sid, promised, block):
    return with_flags(PushPromiseFrame(sid, promised_stream_id=promised, data=block),
                      ["END_HEADERS"])


def restream(frames, sid):
    """`frames` (serialized, back to back) moved to stream `sid`."""
    out, at = bytearray(frames), 0
    while at < len(out):
        out[at + 5:at + 9] = struct.pack(">I", sid)
        at += 9 + int.from_bytes(out[at:at + 3], "big")
    return bytes(out)


UNKNOWN_FRAME = raw(UNKNOWN_TYPE, 0, 0, bytes(8))
H2SPEC = b"h2spec\0\0"


# -- HPACK representations written by hand (RFC 7541 section 6)

HUFFMAN = hpack.huffman.HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)
USER_AGENT = 58  # static table index of user-agent
KINDS = {"incremental": (0x40, 6), "without": (0x00, 4), "never": (0x10, 4)}


def integer(value, prefix_bits, first=0):
    out = encode_integer(value, prefix_bits)
    out[0] |= first
    return bytes(out)


def string(value, huffman=False):
    data = HUFFMAN.encode(value) if huffman else value
    return integer(len(data), 7, 0x80 if huffman else 0) + data


def literal(kind, name, value, huffman=False):
    """A literal header field; `name` an index (int) or a new name (bytes)."""
    first, bits = KINDS[kind]
    if isinstance(name, int):
        return integer(name, bits, first) + string(value, huffman)
    return bytes([first]) + string(name, huffman) + string(value, huffman)


def indexed(index):
    return integer(index, 7, 0x80)


def table_size_update(size):
    return integer(size, 5, 0x20)


def huffman_raw(text, eos_at=None, pad=None):
    """A literal x-test field whose value is `text` Huffman-coded bit by
    bit: the EOS code put before byte `eos_at`, then padded with ones to the
    byte (pad "long": 8 ones more; "zeros": zeros); for the invalid strings
    of RFC 7541 section 5.2."""
    acc = nbits = 0
    for i, ch in enumerate(text + b"\0"):
        if i == eos_at:
            acc, nbits = (acc << REQUEST_CODES_LENGTH[256]) | REQUEST_CODES[256], nbits + 30
        if i < len(text):
            acc, nbits = (acc << REQUEST_CODES_LENGTH[ch]) | REQUEST_CODES[ch], nbits + REQUEST_CODES_LENGTH[ch]
    fill = -nbits % 8 + (8 if pad == "long" else 0)
    acc = (acc << fill) | (0 if pad == "zeros" else (1 << fill) - 1)
    nbits += fill
    data = acc.to_bytes(nbits // 8, "big")
    return b"\x00" + string(b"x-test") + integer(len(data), 7, 0x80) + data


def dummy(n):
    """h2spec's filler headers: x-dummyN with a 4000-byte value."""
    return [(f"x-dummy{i}", "x" * DUMMY_LEN) for i in range(n)]


# -- expectations

def event_text(ev):
    return ev.describe() if isinstance(ev, Frame) else ev


def story(seen, end):
    """What arrived: the last few frames, then how the wait ended."""
    end = event_text(end)
    lead = ", ".join(seen[-4:])
    more = "... " if len(seen) > 4 else ""
    return f"{more}{lead}, then {end}" if seen else end


def expect(c, accept, expected, close_ok=False):
    """Reads until accept(frame) (which may raise Fail itself); returns that
    frame, or CLOSED when close_ok and the connection ends first."""
    deadline, seen = c.deadline(), []
    while True:
        ev = c.event(deadline)
        if ev is CLOSED and close_ok:
            return CLOSED
        if not isinstance(ev, Frame):
            raise Fail(expected, story(seen, ev))
        if accept(ev):
            return ev
        seen.append(ev.describe())


def codes_text(kind, codes):
    return " or ".join(f"{kind} {error_name(code)}" for code in codes)


def connection_error(c, *codes):
    """h2spec's connection error: a GOAWAY with one of `codes`, or the close."""
    expect(c, lambda f: f.type == GOAWAY and f.code in codes,
           f"{codes_text('GOAWAY', codes)} or connection closed", close_ok=True)


def stream_error(c, *codes):
    """h2spec's stream error: RST_STREAM or GOAWAY with one of `codes`, or
    the close."""
    expect(c, lambda f: f.type in (RST_STREAM, GOAWAY) and f.code in codes,
           f"{codes_text('RST_STREAM', codes)} (or GOAWAY) or connection closed",
           close_ok=True)


def connection_close(c):
    expect(c, lambda f: False, "connection closed", close_ok=True)


def goaway_frame(c, *codes):
    """A GOAWAY itself (a bare close does not do), with one of `codes` if given."""
    want = codes_text("GOAWAY", codes) if codes else "GOAWAY"
    f = expect(c, lambda f: f.type == GOAWAY, want)
    if codes and f.code not in codes:
        raise Fail(want, f.describe())
    return f


def headers_on(c, sid):
    return expect(c, lambda f: f.type == HEADERS and f.sid == sid, f"HEADERS on stream {sid}")


def stream_closes(c, sid=1):
    """The server ends stream `sid` (END_STREAM, or RST_STREAM NO_ERROR)."""
    expect(c, lambda f: f.sid == sid and (f.ends_stream or (f.type == RST_STREAM and f.code == NO_ERROR)),
           f"stream {sid} to end")


def settings_ack(c):
    expect(c, lambda f: f.type == SETTINGS and f.is_ack, "SETTINGS ACK")


def ping_ack(c, payload=bytes(8), close_ok=False):
    def accept(f):
        if f.type != PING or not f.is_ack:
            return False
        if f.payload != payload:
            raise Fail(f"PING ACK with {payload!r}", f"PING ACK with {f.payload!r}")
        return True
    expect(c, accept, "PING ACK" + (" or connection closed" if close_ok else ""), close_ok=close_ok)


def data_of_length(c, n):
    """The next DATA frame carries exactly `n` bytes."""
    f = expect(c, lambda f: f.type == DATA, f"DATA of length {n}")
    if len(f.payload) != n:
        raise Fail(f"DATA of length {n}", f.describe())


def no_handshake(fn):
    """Marks a case that does its own connection preface."""
    fn.raw = True
    return fn


def hold(c):
    """SETTINGS_INITIAL_WINDOW_SIZE 0: the server cannot send DATA, so it
    cannot end a stream before it has read what the case sends on it next.
    (h2spec does without; against a server that answers at once, its
    "half-closed" and "open" cases then meet a stream the server has
    already closed, where RFC 9113 lets it ignore WINDOW_UPDATE and reset.)"""
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 0}))


def body_length(target):
    """The length of PATH's body (h2spec's ServerDataLength), over a fresh connection."""
    c = Conn(target)
    try:
        c.handshake()
        c.open_stream(1)
        total, deadline = 0, c.deadline()
        while True:
            ev = c.event(deadline)
            if not isinstance(ev, Frame):
                raise Fail(f"a whole answer to GET {target.path}", ev)
            if ev.sid == 1 and ev.type == DATA:
                total += len(ev.payload)
            if ev.sid == 1 and (ev.ends_stream or ev.type == RST_STREAM):
                return total
    finally:
        c.close()


def need_body(c, n):
    if body_length(c.target) < n:
        raise Skip(f"the body of {c.target.path} is shorter than {n} bytes")


# -- http2: Hypertext Transfer Protocol Version 2

@no_handshake
def preface_answered(c):
    c.send(PREFACE + settings_frame({INITIAL_WINDOW_SIZE: DEFAULT_WINDOW}))
    ev = c.event(c.deadline())
    if not (isinstance(ev, Frame) and ev.type == SETTINGS and not ev.is_ack):
        raise Fail("a SETTINGS frame (no ACK) first", story([], ev))


@no_handshake
def preface_invalid(c):
    c.send(b"INVALID CONNECTION PREFACE\r\n\r\n")
    connection_error(c, PROTOCOL_ERROR)


def unknown_type(c):
    c.send(UNKNOWN_FRAME + ping())
    ping_ack(c)


def undefined_flags(c):
    c.send(raw(PING, 0x16, 0, bytes(8)))
    ping_ack(c)


def reserved_bit(c):
    c.send(raw(PING, 0x16, 0x80000000, bytes(8)))
    ping_ack(c)


def data_max_size(c):
    c.open_stream(1, "POST", end_stream=False)
    c.send(data_frame(1, b"x" * DEFAULT_FRAME_SIZE))
    headers_on(c, 1)


def data_too_large(c):
    c.open_stream(1, "POST", end_stream=False)
    c.send(data_frame(1, b"x" * (c.max_frame_size + 1)))
    stream_error(c, FRAME_SIZE_ERROR)


def headers_too_large(c):
    n = c.max_frame_size // (DUMMY_LEN * 7 // 8) + 1
    c.send(headers_frame(1, c.block(c.request() + dummy(n))))
    connection_error(c, FRAME_SIZE_ERROR)


def invalid_block(c):
    c.send(raw(HEADERS, END_STREAM | END_HEADERS, 1, b"\x40"))
    connection_error(c, COMPRESSION_ERROR)


def priority_inside_block(c):
    c.open_stream(1, end_stream=False, end_headers=False)
    c.send(priority_frame(1) + continuation(1, c.block(dummy(1))))
    connection_error(c, PROTOCOL_ERROR)


def headers_inside_block(c):
    c.open_stream(1, end_stream=False, end_headers=False)
    c.open_stream(3)
    c.send(continuation(1, c.block(dummy(1))))
    connection_error(c, PROTOCOL_ERROR)


def idle_data(c):
    c.send(data_frame(1, b"test"))
    stream_error(c, PROTOCOL_ERROR, STREAM_CLOSED)


def idle_rst(c):
    c.send(rst(1, CANCEL))
    connection_error(c, PROTOCOL_ERROR)


def idle_window_update(c):
    c.send(window_update(1, 100))
    connection_error(c, PROTOCOL_ERROR)


def idle_continuation(c):
    c.send(continuation(1, c.block(c.request())))
    connection_error(c, PROTOCOL_ERROR)


def half_closed_data(c):
    hold(c)
    c.open_stream(1)
    c.send(data_frame(1, b"test"))
    stream_error(c, STREAM_CLOSED)


def half_closed_headers(c):
    hold(c)
    c.open_stream(1)
    c.open_stream(1)
    stream_error(c, STREAM_CLOSED)


def half_closed_continuation(c):
    hold(c)
    block = c.block(c.request())
    c.send(headers_frame(1, block) + continuation(1, block))
    stream_error(c, STREAM_CLOSED, PROTOCOL_ERROR)


def reset_then_data(c):
    c.open_stream(1, end_stream=False)
    c.send(rst(1, CANCEL) + data_frame(1, b"test"))
    stream_error(c, STREAM_CLOSED)


def reset_then_headers(c):
    c.open_stream(1, end_stream=False)
    c.send(rst(1, CANCEL))
    c.open_stream(1)
    stream_error(c, STREAM_CLOSED)


def reset_then_continuation(c):
    c.open_stream(1, end_stream=False)
    c.send(rst(1, CANCEL) + continuation(1, c.block(dummy(1))))
    stream_error(c, STREAM_CLOSED, PROTOCOL_ERROR)


def closed_data(c):
    c.open_stream(1)
    stream_closes(c)
    c.send(data_frame(1, b"test"))
    stream_error(c, STREAM_CLOSED)


def closed_headers(c):
    frame = c.open_stream(1)
    stream_closes(c)
    c.send(frame)
    connection_error(c, STREAM_CLOSED)


def closed_continuation(c):
    c.open_stream(1)
    stream_closes(c)
    c.send(continuation(1, c.block(dummy(1))))
    connection_error(c, STREAM_CLOSED, PROTOCOL_ERROR)


def even_stream(c):
    c.open_stream(2)
    connection_error(c, PROTOCOL_ERROR)


def smaller_stream(c):
    c.open_stream(5)
    c.open_stream(3)
    connection_error(c, PROTOCOL_ERROR)


def over_concurrency(c):
    limit = c.server_settings.get(MAX_CONCURRENT_STREAMS)
    if limit is None:
        raise Skip("the server sets no SETTINGS_MAX_CONCURRENT_STREAMS")
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 0}))
    send_gets(c, limit + 1)
    stream_error(c, PROTOCOL_ERROR, REFUSED_STREAM)


def send_gets(c, n, end_stream=True):
    """GETs on streams 1, 3, ... (2n-1), the first block indexing what the
    others only reference."""
    first = headers_frame(1, c.block(c.request()), end_stream)
    again = headers_frame(3, c.block(c.request()), end_stream)
    c.send(first + b"".join(restream(again, 2 * i + 1) for i in range(1, n)))


def headers_self_dependent(c):
    c.send(headers_frame(1, c.block(c.request()), priority=(1, 255, False)))
    stream_error(c, PROTOCOL_ERROR)


def priority_self_dependent(c):
    c.send(priority_frame(1, depends_on=1))
    stream_error(c, PROTOCOL_ERROR)


INVALID_PING = raw(PING, 0, 3, bytes(8))


def invalid_ping_close(c):
    c.send(INVALID_PING)
    connection_close(c)


def invalid_ping_goaway(c):
    c.send(INVALID_PING)
    return goaway_frame(c).describe()


def extension_frame(c):
    c.send(UNKNOWN_FRAME + ping())
    ping_ack(c)


def extension_inside_block(c):
    c.open_stream(1, end_headers=False)
    c.send(UNKNOWN_FRAME)
    connection_error(c, PROTOCOL_ERROR)


def data_stream_zero(c):
    c.send(raw(DATA, END_STREAM, 0, b"test"))
    connection_error(c, PROTOCOL_ERROR)


def data_not_open(c):
    hold(c)
    c.open_stream(1, "POST")
    c.send(data_frame(1, b"test"))
    stream_error(c, STREAM_CLOSED)


def data_bad_padding(c):
    c.open_stream(1, "POST", end_stream=False, extra=[("content-length", "4")])
    c.send(raw(DATA, END_STREAM | PADDED, 1, b"\x06Test"))
    connection_error(c, PROTOCOL_ERROR)


def headers_stream_zero(c):
    c.send(raw(HEADERS, END_STREAM | END_HEADERS, 0, c.block(c.request())))
    connection_error(c, PROTOCOL_ERROR)


def headers_bad_padding(c):
    block = c.block(c.request())
    pad = min(len(block) + 2, 255)
    c.send(raw(HEADERS, END_STREAM | END_HEADERS | PADDED, 1, bytes([pad]) + block))
    stream_error(c, PROTOCOL_ERROR)


def priority_stream_zero(c):
    c.send(raw(PRIORITY, 0, 0, b"\x00\x00\x00\x00\xff"))
    connection_error(c, PROTOCOL_ERROR)


def priority_bad_length(c):
    c.open_stream(1)
    c.send(raw(PRIORITY, 0, 1, b"\x80\x00\x00\x01"))
    stream_error(c, FRAME_SIZE_ERROR)


def rst_stream_zero(c):
    c.send(raw(RST_STREAM, 0, 0, struct.pack(">I", CANCEL)))
    connection_error(c, PROTOCOL_ERROR)


def rst_bad_length(c):
    c.open_stream(1)
    c.send(raw(RST_STREAM, 0, 1, b"\x00\x00\x00"))
    stream_error(c, FRAME_SIZE_ERROR)


def settings_ack_payload(c):
    c.send(raw(SETTINGS, ACK, 0, b"\x00"))
    connection_error(c, FRAME_SIZE_ERROR)


def settings_on_stream(c):
    c.send(raw(SETTINGS, 0, 1, b"\x00\x03\x00\x00\x00\x64"))
    connection_error(c, PROTOCOL_ERROR)


def settings_bad_length(c):
    c.send(raw(SETTINGS, 0, 0, b"\x00\x03\x00"))
    stream_error(c, PROTOCOL_ERROR, FRAME_SIZE_ERROR)


def bad_setting(param, value, code):
    def case(c):
        c.send(settings_frame({param: value}))
        connection_error(c, code)
    return case


def unknown_setting(c):
    c.send(settings_frame({0xFF: 1}) + ping())
    ping_ack(c)


def repeated_window_setting(c):
    need_body(c, 1)
    c.send(settings_list([(INITIAL_WINDOW_SIZE, 100), (INITIAL_WINDOW_SIZE, 1)]))
    settings_ack(c)
    c.open_stream(1)
    data_of_length(c, 1)


def settings_acked(c):
    c.send(settings_frame({ENABLE_PUSH: 0}))
    settings_ack(c)


def ping_answered(c):
    c.send(ping(H2SPEC))
    ping_ack(c, H2SPEC)


def ping_ack_ignored(c):
    c.send(ping(b"invalid\0", ack=True) + ping(H2SPEC))
    ping_ack(c, H2SPEC)


def ping_on_stream(c):
    c.send(raw(PING, 0, 1, bytes(8)))
    connection_error(c, PROTOCOL_ERROR)


def ping_bad_length(c):
    c.send(raw(PING, 0, 0, bytes(6)))
    connection_error(c, FRAME_SIZE_ERROR)


def goaway_on_stream(c):
    c.send(raw(GOAWAY, 0, 1, bytes(8)))
    connection_error(c, PROTOCOL_ERROR)


def window_update_zero(c):
    c.send(window_update(0, 0))
    connection_error(c, PROTOCOL_ERROR)


def window_update_zero_stream(c):
    hold(c)
    c.open_stream(1, end_stream=False)
    c.send(window_update(1, 0))
    stream_error(c, PROTOCOL_ERROR)


def window_update_bad_length(c):
    c.send(raw(WINDOW_UPDATE, 0, 0, b"\x00\x00\x01"))
    connection_error(c, FRAME_SIZE_ERROR)


def window_of_one(c):
    need_body(c, 1)
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 1}))
    settings_ack(c)
    c.open_stream(1)
    data_of_length(c, 1)


def connection_window_overflow(c):
    c.send(window_update(0, 2**31 - 1) * 2)
    goaway_frame(c, FLOW_CONTROL_ERROR)


def stream_window_overflow(c):
    hold(c)
    c.open_stream(1, end_stream=False)
    c.send(window_update(1, 2**31 - 1) * 2)
    f = expect(c, lambda f: f.type == RST_STREAM and f.sid == 1, "RST_STREAM FLOW_CONTROL_ERROR on stream 1")
    if f.code != FLOW_CONTROL_ERROR:
        raise Fail("RST_STREAM FLOW_CONTROL_ERROR on stream 1", f.describe())


def window_setting_after_headers(c):
    need_body(c, 1)
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 0}))
    settings_ack(c)
    c.open_stream(1)
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 1}))
    data_of_length(c, 1)


def negative_window(c):
    need_body(c, 5)
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 3}))
    settings_ack(c)
    c.open_stream(1)
    expect(c, lambda f: f.type == DATA, "DATA")
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 2}))
    settings_ack(c)
    c.send(window_update(1, 2))
    data_of_length(c, 1)


def window_setting_too_large(c):
    c.send(raw(SETTINGS, 0, 0, b"\x00\x04\x80\x00\x00\x00"))
    connection_error(c, FLOW_CONTROL_ERROR)


def continuations(c):
    c.open_stream(1, end_headers=False)
    c.send(continuation(1, c.block(dummy(1)), end_headers=False))
    c.send(continuation(1, c.block(dummy(1))))
    headers_on(c, 1)


def continuation_then_data(c):
    c.open_stream(1, "POST", end_stream=False, end_headers=False)
    c.send(continuation(1, c.block(dummy(1)), end_headers=False) + data_frame(1, b"test"))
    connection_error(c, PROTOCOL_ERROR)


def continuation_stream_zero(c):
    c.open_stream(1, end_headers=False)
    c.send(continuation(0, c.block(dummy(1))))
    connection_error(c, PROTOCOL_ERROR)


def continuation_after_end_headers(c):
    c.open_stream(1)
    c.send(continuation(1, c.block(dummy(1))))
    connection_error(c, PROTOCOL_ERROR)


def continuation_after_continuation(c):
    c.open_stream(1, end_headers=False)
    c.send(continuation(1, c.block(dummy(1))))
    c.send(continuation(1, c.block(dummy(1))))
    connection_error(c, PROTOCOL_ERROR)


def continuation_after_data(c):
    # As h2spec writes it: the HEADERS lacks END_HEADERS too.
    c.open_stream(1, "POST", end_stream=False, end_headers=False)
    c.send(data_frame(1, b"test"))
    c.send(continuation(1, c.block(dummy(1)), end_headers=False))
    c.send(continuation(0, c.block(dummy(1))))
    connection_error(c, PROTOCOL_ERROR)


def goaway_unknown_code(c):
    c.send(goaway(0, 0xFF) + ping(H2SPEC))
    ping_ack(c, H2SPEC, close_ok=True)


def rst_then_ping(code, method):
    """RST_STREAM `code` on an open stream: the connection lives on (or
    closes, which h2spec allows)."""
    def case(c):
        c.open_stream(1, method, end_stream=False)
        c.send(rst(1, code) + ping())
        ping_ack(c, close_ok=True)
    return case


def trailers_without_end_stream(c):
    hold(c)
    c.open_stream(1, "POST", end_stream=False)
    c.send(data_frame(1, b"test", end_stream=False))
    c.send(headers_frame(1, c.block([("x-test", "ok")]), end_stream=False))
    stream_error(c, PROTOCOL_ERROR)


def malformed(headers):
    """A case sending `headers(c)` as a whole request: a stream error
    PROTOCOL_ERROR (the request is malformed, RFC 9113 section 8.1.1)."""
    def case(c):
        c.send(headers_frame(1, c.block(headers(c))))
        stream_error(c, PROTOCOL_ERROR)
    return case


def without(name):
    return malformed(lambda c: [h for h in c.request() if h[0] != name])


def plus(*extra):
    return malformed(lambda c: c.request(extra=extra))


def pseudo_in_trailers(c):
    hold(c)
    c.open_stream(1, "POST", end_stream=False)
    c.send(data_frame(1, b"test", end_stream=False))
    c.send(headers_frame(1, c.block([(":method", "POST")]), end_stream=False))
    stream_error(c, PROTOCOL_ERROR)


def empty_path(c):
    return [(k, "" if k == ":path" else v) for k, v in c.request()]


def content_length_mismatch(*chunks):
    def case(c):
        hold(c)
        c.open_stream(1, "POST", end_stream=False, extra=[("content-length", "1")])
        for i, chunk in enumerate(chunks):
            c.send(data_frame(1, chunk, end_stream=i == len(chunks) - 1))
        stream_error(c, PROTOCOL_ERROR)
    return case


def client_push_promise(c):
    c.send(push_promise(1, 3, c.block(c.request())))
    connection_error(c, PROTOCOL_ERROR)


# -- hpack: HPACK header compression

def bad_representation(rep, first=False):
    """A GET whose block has `rep` after it (or before, with first):
    a COMPRESSION_ERROR."""
    def case(c):
        block = c.block(c.request())
        rep_bytes = rep(c) if callable(rep) else rep
        c.send(headers_frame(1, rep_bytes + block if first else block + rep_bytes))
        connection_error(c, COMPRESSION_ERROR)
    return case


def past_the_table(c):
    return 62 + len(c.enc.header_table.dynamic_entries)


def oversized_table_update(c):
    return table_size_update(c.server_settings.get(HEADER_TABLE_SIZE, 4096) + 1)


# -- generic: valid frames get normal answers

def priority_idle(c):
    c.send(priority_frame(1) + ping())
    ping_ack(c)


def window_update_half_closed(c, priority=False):
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 0}))
    c.open_stream(1)
    c.send((priority_frame(1) if priority else b"") + window_update(1, 1))
    expect(c, lambda f: f.type == DATA, "DATA")


def rst_half_closed(c):
    c.open_stream(1)
    c.send(rst(1, CANCEL) + ping())
    ping_ack(c, close_ok=True)


def priority_closed(c):
    c.open_stream(1)
    stream_closes(c)
    c.send(priority_frame(1) + ping())
    ping_ack(c)


def answered(before=b"", method="GET", body=None, pad=None, priority=None, data_pad=None, after=b""):
    """A request (after `before`, with `body` in DATA frames, the last one
    padded by `data_pad`) gets HEADERS."""
    def case(c):
        frame = headers_frame(1, c.block(c.request(method)), end_stream=body is None,
                              pad=pad, priority=priority)
        c.send(before + frame)
        for i, chunk in enumerate(body or ()):
            last = i == len(body) - 1
            c.send(data_frame(1, chunk, end_stream=last, pad=data_pad if last else None))
        c.send(after)
        headers_on(c, 1)
    return case


def settings_all(c):
    c.send(settings_frame({HEADER_TABLE_SIZE: 4096, ENABLE_PUSH: 1, MAX_CONCURRENT_STREAMS: 100,
                           INITIAL_WINDOW_SIZE: DEFAULT_WINDOW, MAX_FRAME_SIZE: DEFAULT_FRAME_SIZE,
                           MAX_HEADER_LIST_SIZE: 100}))
    settings_ack(c)


def goaway_then_ping(c):
    c.send(goaway(0, NO_ERROR, b"h2spec") + ping(H2SPEC))
    ping_ack(c, H2SPEC, close_ok=True)


def window_update_connection(c):
    c.send(window_update(0, 1) + ping())
    ping_ack(c)


def split_block(*cuts):
    """A GET whose header block is cut at `cuts` into HEADERS + CONTINUATIONs."""
    def case(c):
        block = c.block(c.request())
        bounds = [0, *cuts, len(block)]
        parts = [block[a:b] for a, b in zip(bounds, bounds[1:])]
        out = headers_frame(1, parts[0], end_headers=False)
        for i, part in enumerate(parts[1:], 1):
            out += continuation(1, part, end_headers=i == len(parts) - 1)
        c.send(out)
        headers_on(c, 1)
    return case


def post_with_trailers(c):
    c.open_stream(1, "POST", end_stream=False, extra=[("trailer", "x-test")])
    c.send(data_frame(1, b"test", end_stream=False))
    c.send(headers_frame(1, c.block([("x-test", "ok")])))
    headers_on(c, 1)


def good_representation(rep, first=False):
    """A GET with the valid representation `rep` after its block (before it
    with first) is answered."""
    def case(c):
        block = c.block(c.request())
        c.send(headers_frame(1, rep + block if first else block + rep))
        headers_on(c, 1)
    return case


def table_size_128(c):
    c.enc.header_table_size = 128
    c.send(headers_frame(1, c.block(c.request())))
    headers_on(c, 1)


# -- attacks

def calm_verdict(r, what, codes=(ENHANCE_YOUR_CALM,), close_ok=False):
    """PASS text for a flood the server had to stop, else Fail."""
    sent = f"{r.units} of {r.total} {what} sent ({r.bytes} bytes); {r.answers()}"
    got = r.ended()
    if r.goaway is not None and r.goaway.code in codes:
        return f"{got} after {sent}"
    if close_ok and got:
        return f"{got} after {sent}"
    want = codes_text("GOAWAY", codes) + (" or close" if close_ok else "")
    how = got or ("the server stopped reading" if r.stalled else "no end")
    raise Fail(want, f"{how} after {sent}")


def rapid_reset(c):
    first = headers_frame(1, c.block(c.request())) + rst(1, CANCEL)
    again = headers_frame(3, c.block(c.request())) + rst(3, CANCEL)
    c.send(first)
    r = c.flood(lambda i: restream(again, 2 * i + 3), 9999)
    r.units += 1
    r.total += 1
    return calm_verdict(r, "HEADERS+RST_STREAM pairs")


def made_you_reset(c):
    first = headers_frame(1, c.block(c.request()), end_stream=False) + window_update(1, 0)
    again = headers_frame(3, c.block(c.request()), end_stream=False) + window_update(3, 0)
    c.send(first)
    r = c.flood(lambda i: restream(again, 2 * i + 3), 9999)
    r.units += 1
    r.total += 1
    return calm_verdict(r, "HEADERS+WINDOW_UPDATE(0) pairs")


FLOOD_REP = b"\x00" + string(b"x-flood") + integer(1012, 7) + b"a" * 1012  # 1024 bytes


def continuation_flood(c):
    c.open_stream(1, end_headers=False)
    chunk = continuation(1, FLOOD_REP * 16, end_headers=False)
    r = c.flood(lambda i: chunk, 64 * 1024 * 1024 // len(chunk))
    text = calm_verdict(r, "16 KB CONTINUATION frames", codes=(), close_ok=True)
    if r.bytes >= 4 * 1024 * 1024:
        raise Fail("the server ending it before 4 MB", text)
    return text


def continuation_empty(c):
    c.open_stream(1, end_headers=False)
    chunk = continuation(1, b"", end_headers=False)
    r = c.flood(lambda i: chunk, 1_000_000)
    return calm_verdict(r, "empty CONTINUATION frames", codes=(), close_ok=True)


def hpack_bomb(c):
    room = c.server_settings.get(HEADER_TABLE_SIZE, 4096)
    if room < 4000 + 32 + 6:
        return f"not built: the server's SETTINGS_HEADER_TABLE_SIZE {room} holds no 4000-byte entry"
    value = "b" * 4000
    c.send(headers_frame(1, c.block(c.request() + [("x-bomb", value)] * 2001)))
    f = expect(c, lambda f: f.type == GOAWAY or (f.sid == 1 and f.type in (HEADERS, RST_STREAM)),
               "HEADERS :status 431, RST_STREAM or GOAWAY for stream 1", close_ok=True)
    if f is CLOSED or f.type == GOAWAY:
        return f"{event_text(f)} on the 8 MB header list"
    if f.type == HEADERS and f.status != "431":
        raise Fail("HEADERS :status 431, RST_STREAM or GOAWAY for stream 1", f.describe())
    c.open_stream(3)
    g = expect(c, lambda g: g.type == GOAWAY or (g.type == HEADERS and g.sid == 3),
               "HEADERS :status 200 for the next GET", close_ok=True)
    if g is CLOSED or g.type == GOAWAY:
        return f"{f.describe()}, then {event_text(g)} (no next GET)"
    if g.status != "200":
        raise Fail("HEADERS :status 200 for the next GET", g.describe())
    return f"{f.describe()}; the next GET got :status 200"


def frame_flood(what, unit, open_post=False):
    """`unit` 100,000 times (after opening a POST the server cannot
    finish, with open_post)."""
    def case(c):
        if open_post:
            hold(c)
            c.open_stream(1, "POST", end_stream=False)
        r = c.flood(lambda i: unit, 100_000)
        return calm_verdict(r, what, close_ok=True)
    return case


def zero_window(c):
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 0}))
    send_gets(c, 100)
    got = collections.Counter()
    deadline = c.deadline(1)
    while (ev := c.event(deadline)) not in (CLOSED, TIMEOUT):
        got["DATA>0" if ev.type == DATA and ev.payload else ev.describe().split()[0]] += 1
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(got.items())) or "nothing"
    if ev is CLOSED or got["DATA>0"] or got["GOAWAY"]:
        raise Fail("no DATA with bytes and the connection up for 1 s",
                   summary + (", then connection closed" if ev is CLOSED else ""))
    c.send(ping(H2SPEC))
    ping_ack(c, H2SPEC)
    return f"{summary} in 1 s; the connection still answers PING"


def stream_id_reuse(c):
    frame = c.open_stream(1)
    stream_closes(c)
    c.send(frame)
    return goaway_frame(c, PROTOCOL_ERROR, STREAM_CLOSED).describe()


def even_stream_goaway(c):
    c.open_stream(2)
    return goaway_frame(c, PROTOCOL_ERROR).describe()


def too_many_streams(c):
    limit = c.server_settings.get(MAX_CONCURRENT_STREAMS)
    if limit is None or limit > 10000:
        raise Fail("SETTINGS_MAX_CONCURRENT_STREAMS of at most 10000", limit)
    c.send(settings_frame({INITIAL_WINDOW_SIZE: 0}))
    send_gets(c, limit + 1)
    want = f"RST_STREAM REFUSED_STREAM on a stream past the {limit}th"
    f = expect(c, lambda f: f.type == GOAWAY or (f.type == RST_STREAM and f.sid > 2 * limit - 1), want)
    if f.type == GOAWAY or f.code != REFUSED_STREAM:
        raise Fail(want, f.describe())
    return f"limit {limit}: {f.describe()}"


# -- the case table: (id, description, function)

H = "Sends a HEADERS frame"
CASES = [
    ("http2/3.5/1", "Sends client connection preface", preface_answered),
    ("http2/3.5/2", "Sends invalid connection preface", preface_invalid),
    ("http2/4.1/1", "Sends a frame with unknown type", unknown_type),
    ("http2/4.1/2", "Sends a frame with undefined flag", undefined_flags),
    ("http2/4.1/3", "Sends a frame with reserved field bit", reserved_bit),
    ("http2/4.2/1", "Sends a DATA frame with 2^14 octets in length", data_max_size),
    ("http2/4.2/2", "Sends a large size DATA frame that exceeds the SETTINGS_MAX_FRAME_SIZE", data_too_large),
    ("http2/4.2/3", "Sends a large size HEADERS frame that exceeds the SETTINGS_MAX_FRAME_SIZE", headers_too_large),
    ("http2/4.3/1", "Sends invalid header block fragment", invalid_block),
    ("http2/4.3/2", "Sends a PRIORITY frame while sending the header blocks", priority_inside_block),
    ("http2/4.3/3", "Sends a HEADERS frame to another stream while sending the header blocks", headers_inside_block),
    ("http2/5.1/1", "idle: Sends a DATA frame", idle_data),
    ("http2/5.1/2", "idle: Sends a RST_STREAM frame", idle_rst),
    ("http2/5.1/3", "idle: Sends a WINDOW_UPDATE frame", idle_window_update),
    ("http2/5.1/4", "idle: Sends a CONTINUATION frame", idle_continuation),
    ("http2/5.1/5", "half closed (remote): Sends a DATA frame", half_closed_data),
    ("http2/5.1/6", "half closed (remote): Sends a HEADERS frame", half_closed_headers),
    ("http2/5.1/7", "half closed (remote): Sends a CONTINUATION frame", half_closed_continuation),
    ("http2/5.1/8", "closed: Sends a DATA frame after sending RST_STREAM frame", reset_then_data),
    ("http2/5.1/9", "closed: Sends a HEADERS frame after sending RST_STREAM frame", reset_then_headers),
    ("http2/5.1/10", "closed: Sends a CONTINUATION frame after sending RST_STREAM frame", reset_then_continuation),
    ("http2/5.1/11", "closed: Sends a DATA frame", closed_data),
    ("http2/5.1/12", "closed: Sends a HEADERS frame", closed_headers),
    ("http2/5.1/13", "closed: Sends a CONTINUATION frame", closed_continuation),
    ("http2/5.1.1/1", "Sends even-numbered stream identifier", even_stream),
    ("http2/5.1.1/2", "Sends stream identifier that is numerically smaller than previous", smaller_stream),
    ("http2/5.1.2/1", "Sends HEADERS frames that causes their advertised concurrent stream limit to be exceeded",
     over_concurrency),
    ("http2/5.3.1/1", "Sends HEADERS frame that depends on itself", headers_self_dependent),
    ("http2/5.3.1/2", "Sends PRIORITY frame that depend on itself", priority_self_dependent),
    ("http2/5.4.1/1", "Sends an invalid PING frame for connection close", invalid_ping_close),
    ("http2/5.4.1/2", "Sends an invalid PING frame to receive GOAWAY frame (h2spec --strict)", invalid_ping_goaway),
    ("http2/5.5/1", "Sends an unknown extension frame", extension_frame),
    ("http2/5.5/2", "Sends an unknown extension frame in the middle of a header block", extension_inside_block),
    ("http2/6.1/1", "Sends a DATA frame with 0x0 stream identifier", data_stream_zero),
    ("http2/6.1/2", "Sends a DATA frame on the stream that is not in \"open\" or \"half-closed (local)\" state",
     data_not_open),
    ("http2/6.1/3", "Sends a DATA frame with invalid pad length", data_bad_padding),
    ("http2/6.2/1", "Sends a HEADERS frame without the END_HEADERS flag, and a PRIORITY frame", priority_inside_block),
    ("http2/6.2/2", "Sends a HEADERS frame to another stream while sending a HEADERS frame", headers_inside_block),
    ("http2/6.2/3", "Sends a HEADERS frame with 0x0 stream identifier", headers_stream_zero),
    ("http2/6.2/4", "Sends a HEADERS frame with invalid pad length", headers_bad_padding),
    ("http2/6.3/1", "Sends a PRIORITY frame with 0x0 stream identifier", priority_stream_zero),
    ("http2/6.3/2", "Sends a PRIORITY frame with a length other than 5 octets", priority_bad_length),
    ("http2/6.4/1", "Sends a RST_STREAM frame with 0x0 stream identifier", rst_stream_zero),
    ("http2/6.4/2", "Sends a RST_STREAM frame on a idle stream", idle_rst),
    ("http2/6.4/3", "Sends a RST_STREAM frame with a length other than 4 octets", rst_bad_length),
    ("http2/6.5/1", "Sends a SETTINGS frame with ACK flag and payload", settings_ack_payload),
    ("http2/6.5/2", "Sends a SETTINGS frame with a stream identifier other than 0x0", settings_on_stream),
    ("http2/6.5/3", "Sends a SETTINGS frame with a length other than a multiple of 6 octets", settings_bad_length),
    ("http2/6.5.2/1", "SETTINGS_ENABLE_PUSH (0x2): Sends the value other than 0 or 1",
     bad_setting(ENABLE_PUSH, 2, PROTOCOL_ERROR)),
    ("http2/6.5.2/2", "SETTINGS_INITIAL_WINDOW_SIZE (0x4): Sends the value above the maximum flow control window size",
     bad_setting(INITIAL_WINDOW_SIZE, 2**31, FLOW_CONTROL_ERROR)),
    ("http2/6.5.2/3", "SETTINGS_MAX_FRAME_SIZE (0x5): Sends the value below the initial value",
     bad_setting(MAX_FRAME_SIZE, 16383, PROTOCOL_ERROR)),
    ("http2/6.5.2/4", "SETTINGS_MAX_FRAME_SIZE (0x5): Sends the value above the maximum allowed frame size",
     bad_setting(MAX_FRAME_SIZE, 2**24, PROTOCOL_ERROR)),
    ("http2/6.5.2/5", "Sends a SETTINGS frame with unknown identifier", unknown_setting),
    ("http2/6.5.3/1", "Sends multiple values of SETTINGS_INITIAL_WINDOW_SIZE", repeated_window_setting),
    ("http2/6.5.3/2", "Sends a SETTINGS frame without ACK flag", settings_acked),
    ("http2/6.7/1", "Sends a PING frame", ping_answered),
    ("http2/6.7/2", "Sends a PING frame with ACK", ping_ack_ignored),
    ("http2/6.7/3", "Sends a PING frame with a stream identifier field value other than 0x0", ping_on_stream),
    ("http2/6.7/4", "Sends a PING frame with a length field value other than 8", ping_bad_length),
    ("http2/6.8/1", "Sends a GOAWAY frame with a stream identifier other than 0x0", goaway_on_stream),
    ("http2/6.9/1", "Sends a WINDOW_UPDATE frame with a flow control window increment of 0", window_update_zero),
    ("http2/6.9/2", "Sends a WINDOW_UPDATE frame with a flow control window increment of 0 on a stream",
     window_update_zero_stream),
    ("http2/6.9/3", "Sends a WINDOW_UPDATE frame with a length other than 4 octets", window_update_bad_length),
    ("http2/6.9.1/1", "Sends SETTINGS frame to set the initial window size to 1 and sends HEADERS frame",
     window_of_one),
    ("http2/6.9.1/2", "Sends multiple WINDOW_UPDATE frames increasing the flow control window to above 2^31-1",
     connection_window_overflow),
    ("http2/6.9.1/3",
     "Sends multiple WINDOW_UPDATE frames increasing the flow control window to above 2^31-1 on a stream",
     stream_window_overflow),
    ("http2/6.9.2/1", "Changes SETTINGS_INITIAL_WINDOW_SIZE after sending HEADERS frame",
     window_setting_after_headers),
    ("http2/6.9.2/2", "Sends a SETTINGS frame for window size to be negative", negative_window),
    ("http2/6.9.2/3", "Sends a SETTINGS_INITIAL_WINDOW_SIZE settings with an exceeded maximum window size value",
     window_setting_too_large),
    ("http2/6.10/1", "Sends multiple CONTINUATION frames preceded by a HEADERS frame", continuations),
    ("http2/6.10/2", "Sends a CONTINUATION frame followed by any frame other than CONTINUATION",
     continuation_then_data),
    ("http2/6.10/3", "Sends a CONTINUATION frame with 0x0 stream identifier", continuation_stream_zero),
    ("http2/6.10/4", "Sends a CONTINUATION frame preceded by a HEADERS frame with END_HEADERS flag",
     continuation_after_end_headers),
    ("http2/6.10/5", "Sends a CONTINUATION frame preceded by a CONTINUATION frame with END_HEADERS flag",
     continuation_after_continuation),
    ("http2/6.10/6", "Sends a CONTINUATION frame preceded by a DATA frame", continuation_after_data),
    ("http2/7/1", "Sends a GOAWAY frame with unknown error code", goaway_unknown_code),
    ("http2/7/2", "Sends a RST_STREAM frame with unknown error code", rst_then_ping(0xFF, "POST")),
    ("http2/8.1/1", "Sends a second HEADERS frame without the END_STREAM flag", trailers_without_end_stream),
    ("http2/8.1.2/1", f"{H} that contains the header field name in uppercase letters", plus(("X-TEST", "ok"))),
    ("http2/8.1.2.1/1", f"{H} that contains a unknown pseudo-header field", plus((":test", "ok"))),
    ("http2/8.1.2.1/2", f"{H} that contains the pseudo-header field defined for response",
     plus((":status", "200"))),
    ("http2/8.1.2.1/3", f"{H} that contains a pseudo-header field as trailers", pseudo_in_trailers),
    ("http2/8.1.2.1/4", f"{H} that contains a pseudo-header field that appears in a header block after a regular"
     " header field", malformed(lambda c: [("x-test", "ok")] + c.request())),
    ("http2/8.1.2.2/1", f"{H} that contains the connection-specific header field",
     plus(("connection", "keep-alive"))),
    ("http2/8.1.2.2/2", f"{H} that contains the TE header field with any value other than \"trailers\"",
     plus(("trailers", "test"), ("te", "trailers, deflate"))),
    ("http2/8.1.2.3/1", f"{H} with empty \":path\" pseudo-header field", malformed(empty_path)),
    ("http2/8.1.2.3/2", f"{H} that omits \":method\" pseudo-header field", without(":method")),
    ("http2/8.1.2.3/3", f"{H} that omits \":scheme\" pseudo-header field", without(":scheme")),
    ("http2/8.1.2.3/4", f"{H} that omits \":path\" pseudo-header field", without(":path")),
    ("http2/8.1.2.3/5", f"{H} with duplicated \":method\" pseudo-header field",
     malformed(lambda c: c.request() + [(":method", "GET")])),
    ("http2/8.1.2.3/6", f"{H} with duplicated \":scheme\" pseudo-header field",
     malformed(lambda c: c.request() + [(":scheme", c.target.scheme)])),
    ("http2/8.1.2.3/7", f"{H} with duplicated \":path\" pseudo-header field",
     malformed(lambda c: c.request() + [(":path", c.target.path)])),
    ("http2/8.1.2.6/1", f"{H} with the \"content-length\" header field which does not equal the DATA frame"
     " payload length", content_length_mismatch(b"test")),
    ("http2/8.1.2.6/2", f"{H} with the \"content-length\" header field which does not equal the sum of the"
     " multiple DATA frames payload length", content_length_mismatch(b"test", b"test")),
    ("http2/8.2/1", "Sends a PUSH_PROMISE frame", client_push_promise),

    ("hpack/2.3.3/1", "Sends a indexed header field representation with invalid index",
     bad_representation(lambda c: indexed(past_the_table(c)))),
    ("hpack/2.3.3/2", "Sends a literal header field representation with invalid index",
     bad_representation(lambda c: literal("incremental", past_the_table(c), b""))),
    ("hpack/4.2/1", "Sends a dynamic table size update at the end of header block",
     bad_representation(table_size_update(1))),
    ("hpack/5.2/1", "Sends a Huffman-encoded string literal representation with padding longer than 7 bits",
     bad_representation(huffman_raw(b"test", pad="long"))),
    ("hpack/5.2/2", "Sends a Huffman-encoded string literal representation padded by zero",
     bad_representation(huffman_raw(b"test", pad="zeros"))),
    ("hpack/5.2/3", "Sends a Huffman-encoded string literal representation containing the EOS symbol",
     bad_representation(huffman_raw(b"test", eos_at=1))),
    ("hpack/6.1/1", "Sends a indexed header field representation with index 0", bad_representation(b"\x80")),
    ("hpack/6.3/1", "Sends a dynamic table size update larger than the value of SETTINGS_HEADER_TABLE_SIZE",
     bad_representation(oversized_table_update, first=True)),

    ("generic/1/1", "Sends a client connection preface", preface_answered),
    ("generic/2/1", "Sends a PRIORITY frame on idle stream", priority_idle),
    ("generic/2/2", "Sends a WINDOW_UPDATE frame on half-closed (remote) stream", window_update_half_closed),
    ("generic/2/3", "Sends a PRIORITY frame on half-closed (remote) stream",
     lambda c: window_update_half_closed(c, priority=True)),
    ("generic/2/4", "Sends a RST_STREAM frame on half-closed (remote) stream", rst_half_closed),
    ("generic/2/5", "Sends a PRIORITY frame on closed stream", priority_closed),
    ("generic/3.1/1", "Sends a DATA frame", answered(method="POST", body=[b"test"])),
    ("generic/3.1/2", "Sends multiple DATA frames", answered(method="POST", body=[b"test", b"test"])),
    ("generic/3.1/3", "Sends a DATA frame with padding", answered(method="POST", body=[b"test"], data_pad=5)),
    ("generic/3.2/1", H, answered()),
    ("generic/3.2/2", f"{H} with padding", answered(pad=8)),
    ("generic/3.2/3", f"{H} with priority", answered(priority=(0, 255, False))),
    ("generic/3.3/1", "Sends a PRIORITY frame with priority 1", answered(before=priority_frame(1, weight=0))),
    ("generic/3.3/2", "Sends a PRIORITY frame with priority 256", answered(before=priority_frame(1, weight=255))),
    ("generic/3.3/3", "Sends a PRIORITY frame with stream dependency",
     answered(before=priority_frame(3, depends_on=1, weight=0))),
    ("generic/3.3/4", "Sends a PRIORITY frame with exclusive",
     answered(before=priority_frame(1, weight=0, exclusive=True))),
    ("generic/3.3/5", "Sends a PRIORITY frame for an idle stream, then send a HEADER frame for a lower stream ID",
     answered(before=priority_frame(3))),
    ("generic/3.4/1", "Sends a RST_STREAM frame", rst_then_ping(CANCEL, "GET")),
    ("generic/3.5/1", "Sends a SETTINGS frame", settings_all),
    ("generic/3.7/1", "Sends a PING frame", ping_answered),
    ("generic/3.8/1", "Sends a GOAWAY frame", goaway_then_ping),
    ("generic/3.9/1", "Sends a WINDOW_UPDATE frame with stream ID 0", window_update_connection),
    ("generic/3.9/2", "Sends a WINDOW_UPDATE frame with stream ID 1", answered(after=window_update(1, 1))),
    ("generic/3.10/1", "Sends a CONTINUATION frame", split_block(5)),
    ("generic/3.10/2", "Sends multiple CONTINUATION frames", split_block(5, 10)),
    ("generic/4/1", "Sends a GET request", answered()),
    ("generic/4/2", "Sends a HEAD request", answered(method="HEAD")),
    ("generic/4/3", "Sends a POST request", answered(method="POST", body=[b"test"])),
    ("generic/4/4", "Sends a POST request with trailers", post_with_trailers),
    ("generic/5/1", "Sends a indexed header field representation", good_representation(indexed(16))),
    ("generic/5/2", "Sends a literal header field with incremental indexing - indexed name",
     good_representation(literal("incremental", USER_AGENT, b"h2spec"))),
    ("generic/5/3", "Sends a literal header field with incremental indexing - indexed name (with Huffman coding)",
     good_representation(literal("incremental", USER_AGENT, b"h2spec", huffman=True))),
    ("generic/5/4", "Sends a literal header field with incremental indexing - new name",
     good_representation(literal("incremental", b"x-test", b"h2spec"))),
    ("generic/5/5", "Sends a literal header field with incremental indexing - new name (with Huffman coding)",
     good_representation(literal("incremental", b"x-test", b"h2spec", huffman=True))),
    ("generic/5/6", "Sends a literal header field without indexing - indexed name",
     good_representation(literal("without", USER_AGENT, b"h2spec"))),
    ("generic/5/7", "Sends a literal header field without indexing - indexed name (with Huffman coding)",
     good_representation(literal("without", USER_AGENT, b"h2spec", huffman=True))),
    ("generic/5/8", "Sends a literal header field without indexing - new name",
     good_representation(literal("without", b"x-test", b"h2spec"))),
    ("generic/5/9", "Sends a literal header field without indexing - new name (huffman encoded)",
     good_representation(literal("without", b"x-test", b"h2spec", huffman=True))),
    ("generic/5/10", "Sends a literal header field never indexed - indexed name",
     good_representation(literal("never", USER_AGENT, b"h2spec"))),
    ("generic/5/11", "Sends a literal header field never indexed - indexed name (huffman encoded)",
     good_representation(literal("never", USER_AGENT, b"h2spec", huffman=True))),
    ("generic/5/12", "Sends a literal header field never indexed - new name",
     good_representation(literal("never", b"x-test", b"h2spec"))),
    ("generic/5/13", "Sends a literal header field never indexed - new name (huffman encoded)",
     good_representation(literal("never", b"x-test", b"h2spec", huffman=True))),
    ("generic/5/14", "Sends a dynamic table size update", table_size_128),
    ("generic/5/15", "Sends multiple dynamic table size update",
     good_representation(table_size_update(128) + table_size_update(4096), first=True)),

    ("attack/rapid-reset", "10000 x (HEADERS, RST_STREAM CANCEL) unread: GOAWAY ENHANCE_YOUR_CALM", rapid_reset),
    ("attack/made-you-reset", "10000 x (HEADERS, WINDOW_UPDATE 0) the server must reset: GOAWAY ENHANCE_YOUR_CALM",
     made_you_reset),
    ("attack/continuation-flood", "endless 16 KB CONTINUATION frames: ended before 4 MB", continuation_flood),
    ("attack/continuation-empty", "endless empty CONTINUATION frames: ended before 1000000", continuation_empty),
    ("attack/hpack-bomb", "a 4000-byte table entry referenced 2000 times: 431, RST_STREAM or GOAWAY",
     hpack_bomb),
    ("attack/settings-flood", "100000 SETTINGS frames: GOAWAY ENHANCE_YOUR_CALM or close",
     frame_flood("SETTINGS frames", settings_frame({}))),
    ("attack/ping-flood", "100000 PING frames: GOAWAY ENHANCE_YOUR_CALM or close",
     frame_flood("PING frames", ping(H2SPEC))),
    ("attack/empty-data-flood", "100000 empty DATA frames: GOAWAY ENHANCE_YOUR_CALM or close",
     frame_flood("empty DATA frames", data_frame(1, b"", end_stream=False), open_post=True)),
    ("attack/zero-window", "INITIAL_WINDOW_SIZE 0 and 100 GETs: no DATA, connection up", zero_window),
    ("attack/stream-id-reuse", "HEADERS on closed stream 1 again: GOAWAY PROTOCOL_ERROR or STREAM_CLOSED",
     stream_id_reuse),
    ("attack/even-stream", "HEADERS on stream 2: GOAWAY PROTOCOL_ERROR", even_stream_goaway),
    ("attack/too-many-streams", "MAX_CONCURRENT_STREAMS + 1 streams: RST_STREAM REFUSED_STREAM",
     too_many_streams),
]
GROUPS = {"http2": "http2/", "hpack": "hpack/", "generic": "generic/", "attacks": "attack/", "all": ""}


def select_cases(names):
    """The table rows `names` pick (ids, sections, groups), in table order."""
    chosen = set()
    for name in names:
        if name in GROUPS:
            hits = [row for row in CASES if row[0].startswith(GROUPS[name])]
        else:
            hits = [row for row in CASES if row[0] == name or row[0].startswith(name.rstrip("/") + "/")]
        if not hits:
            raise ValueError(name)
        chosen.update(row[0] for row in hits)
    return [row for row in CASES if row[0] in chosen]


def run(row, target):
    """Runs one case on a connection of its own; prints and returns its verdict."""
    cid, desc, fn = row
    try:
        try:
            c = Conn(target)
        except OSError as e:  # ssl.SSLError too
            raise Fail("a connection to the server", f"{type(e).__name__}: {e}") from None
        try:
            if not getattr(fn, "raw", False):
                c.handshake()
            note = fn(c)
        finally:
            c.close()
        print(f"PASS {cid} {desc}" + (f": {note}" if note else ""), flush=True)
        return True
    except Skip as e:
        print(f"PASS {cid} {desc}: skipped, {e}", flush=True)
        return True
    except Fail as e:
        print(f"FAIL {cid} {desc}: expected {e.expected}, got {e.got}", flush=True)
    except Exception as e:  # noqa: BLE001 - a client-side error fails the case
        print(f"FAIL {cid} {desc}: expected no client error, got {type(e).__name__}: {e}", flush=True)
    return False


def main():
    parser = argparse.ArgumentParser(description="HTTP/2 frame-level conformance and attack client.")
    parser.add_argument("--tls", action="store_true", help="TLS with ALPN h2, no certificate check")
    parser.add_argument("--unix", metavar="SOCKET", help="connect to this Unix socket")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds a wait may take (2)")
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("path")
    parser.add_argument("cases", nargs="+", metavar="CASE")
    args = parser.parse_args()
    try:
        rows = select_cases(args.cases)
    except ValueError as e:
        parser.error(f"no case or group {e}")
    target = Target(args)
    passed = sum(run(row, target) for row in rows)
    print(f"{len(rows)} cases, {passed} passed, {len(rows) - passed} failed", flush=True)
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
