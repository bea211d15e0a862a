//! The server's own unit tests beside the connection's (`conn/tests*`):
//! routing and dispatch over an in-memory connection and a test app
//! (`dispatch`, `route`), the responder's two ways back (`responder`), and
//! admission at the cap over real sockets (`admission`).

mod admission;
mod dispatch;
mod responder;
mod route;
