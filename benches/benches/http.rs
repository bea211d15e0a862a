//! Per-request HTTP work on the server's hot path, without the network:
//! parsing a typical GET with httparse and serialising the response the way
//! the host does (static status line, cached Date, Content-Length, the
//! app's headers, body) into a reused buffer.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::io::Write;
use stoa_app_api::Response;

/// What curl or a browser-ish client sends for `/hello/`.
const REQUEST: &[u8] = b"GET /hello/ HTTP/1.1\r\n\
Host: 127.0.0.1:8000\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n\
Accept-Language: en-US,en;q=0.5\r\n\
Accept-Encoding: gzip, deflate\r\n\
Connection: keep-alive\r\n\
Upgrade-Insecure-Requests: 1\r\n\r\n";

const DATE: &str = "Mon, 30 Nov 2026 06:45:31 GMT";

/// Parses the request head; returns (method, path, header count) lengths so
/// nothing is optimised away.
fn parse(buf: &[u8]) -> (usize, usize, usize) {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => (
            req.method.map_or(0, str::len),
            req.path.map_or(0, str::len),
            req.headers.len(),
        ),
        _ => (0, 0, 0),
    }
}

/// The host's serialisation of a 200 response (see host/src/http/response.rs).
fn serialise(out: &mut Vec<u8>, resp: &Response) {
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\nServer: stoa/0.1.0\r\nDate: {DATE}\r\nContent-Length: {}\r\n",
        resp.status,
        reason(resp.status),
        resp.body.len()
    );
    for h in resp.headers.iter() {
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(&h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&resp.body);
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Unknown",
    }
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("http");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse GET (8 headers)", |b| {
        b.iter(|| parse(black_box(REQUEST)))
    });
    let resp = Response::text(200, "Hello World!");
    let mut out = Vec::with_capacity(4096);
    g.bench_function("serialise 200 hello", |b| {
        b.iter(|| {
            out.clear();
            serialise(&mut out, black_box(&resp));
            out.len()
        })
    });
    g.bench_function("parse + build + serialise", |b| {
        b.iter(|| {
            out.clear();
            let parsed = parse(black_box(REQUEST));
            let resp = Response::text(200, "Hello World!");
            serialise(&mut out, &resp);
            (parsed, out.len())
        })
    });
    g.finish();
}

criterion_group!(http, benches);
criterion_main!(http);
