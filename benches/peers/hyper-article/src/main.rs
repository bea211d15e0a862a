//! A hyper 1.x peer for Stoa's CPU-per-request comparison: one current-thread
//! tokio runtime, HTTP/1.1 keep-alive, `GET /article` answering the same
//! 49-byte JSON body and Content-Type as the `article` sample app, anything
//! else 404.
//!
//! Usage: hyper-article [ADDR]   (default 127.0.0.1:0; prints
//! `listening on http://ADDR:PORT` once bound, as stoa does)

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;

const ARTICLE: &[u8] = br#"{"Name":"A Royal Baby","Body":"A slow news week"}"#;

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let found =
        matches!(*req.method(), Method::GET | Method::HEAD) && req.uri().path() == "/article";
    let (status, content_type, body): (_, _, &'static [u8]) = if found {
        (StatusCode::OK, "application/json", ARTICLE)
    } else {
        (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            b"Not Found",
        )
    };
    let mut response = Response::new(Full::new(Bytes::from_static(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(response)
}

async fn serve(addr: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors and the like: wait, then accept again.
                eprintln!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::task::spawn(async move {
            let io = TokioIo::new(stream);
            // Connections the client resets are expected; nothing to report.
            let _ = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(io, service_fn(answer))
                .await;
        });
    }
}

fn main() {
    let arg = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let addr: SocketAddr = match arg.parse() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("hyper-article: bad address {arg:?}: {e} (usage: hyper-article [IP:PORT])");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build();
    let result = runtime.and_then(|rt| rt.block_on(serve(addr)));
    if let Err(e) = result {
        eprintln!("hyper-article: {e}");
        std::process::exit(1);
    }
}
