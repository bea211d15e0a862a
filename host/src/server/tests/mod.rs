//! The server's own unit tests beside the connection's (`conn/tests*`):
//! routing and dispatch over an in-memory connection and a test app
//! (`dispatch`, `route`), the responder's two ways back (`responder`), and
//! admission at the cap over real sockets (`admission`), and the close of
//! idle keep-alive connections in a drain (`drain`).

mod admission;
mod dispatch;
mod drain;
mod responder;
mod route;
