//! Per-request HTTP work on the server's hot path, without the network,
//! through the host's own code (`stoa::http`): parsing a typical GET with
//! `parse_head`, serialising the response with `write_response` into a
//! reused buffer, and a pipeline of 16 requests read by the connection's
//! `RequestReader` from one buffer and answered into one output buffer
//! (the shape of hyper's `benches/pipeline.rs`, minus the socket).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use stoa::http::parse::parse_head;
use stoa::http::reader::{BufPool, RequestReader};
use stoa::http::response::{write_response, DateCache, Persist};
use stoa::settings::ConnParams;
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

/// Requests per write in the pipelined row (hyper's `PIPELINED_REQUESTS`).
const PIPELINED: usize = 16;

/// Reads `PIPELINED` requests from `input` and answers each with `resp`
/// into `out`, as a connection does with one read's worth of pipelined
/// requests; returns the requests answered.
fn serve_pipeline(
    input: &[u8],
    reader: &mut RequestReader,
    pool: &mut BufPool,
    params: &ConnParams,
    resp: &Response,
    date: &str,
    out: &mut Vec<u8>,
) -> usize {
    let mut src = input;
    reader.fill(&mut src, params, false, pool);
    let mut answered = 0;
    while let Ok(true) = reader.next_request(params) {
        let Some((head, _, _)) = reader.parts() else {
            break;
        };
        let persist = if head.keep_alive {
            Persist::KeepAlive
        } else {
            Persist::Close
        };
        write_response(out, resp, false, persist, date);
        reader.consume();
        answered += 1;
    }
    // The read buffer goes back to the pool, as an idle connection's does.
    reader.release(pool);
    answered
}

fn benches(c: &mut Criterion) {
    let params = ConnParams::default();
    let date = DateCache::new();
    let resp = Response::text(200, "Hello World!");
    let mut out = Vec::with_capacity(4096);

    let mut g = c.benchmark_group("http");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse GET (8 headers)", |b| {
        b.iter(|| parse_head(black_box(REQUEST), &params).map(|h| h.map(|h| h.len)))
    });
    g.bench_function("serialise 200 hello", |b| {
        b.iter(|| {
            out.clear();
            write_response(
                &mut out,
                black_box(&resp),
                false,
                Persist::KeepAlive,
                date.get(),
            );
            out.len()
        })
    });
    g.bench_function("parse + build + serialise", |b| {
        b.iter(|| {
            out.clear();
            let parsed = parse_head(black_box(REQUEST), &params).map(|h| h.map(|h| h.len));
            let resp = Response::text(200, "Hello World!");
            write_response(&mut out, &resp, false, Persist::KeepAlive, date.get());
            (parsed, out.len())
        })
    });

    let input = REQUEST.repeat(PIPELINED);
    let mut reader = RequestReader::default();
    let mut pool = BufPool::default();
    // One request per element: the figure is per pipelined request.
    g.throughput(Throughput::Elements(PIPELINED as u64));
    g.bench_function("pipelined 16 GET, read + serialise", |b| {
        b.iter(|| {
            out.clear();
            let n = serve_pipeline(
                black_box(&input),
                &mut reader,
                &mut pool,
                &params,
                &resp,
                date.get(),
                &mut out,
            );
            assert_eq!(n, PIPELINED, "every pipelined request is answered");
            out.len()
        })
    });
    g.finish();
}

criterion_group!(http, benches);
criterion_main!(http);
