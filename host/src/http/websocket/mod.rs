//! WebSocket (RFC 6455) on the wire, free of sockets: the opening
//! handshake (`handshake`, and the app's own headers on its `101`:
//! `switch`) and the framing of an open connection
//! (`codec`, over tungstenite's protocol layer).

pub mod codec;
pub mod handshake;
pub mod switch;
