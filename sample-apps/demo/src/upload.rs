//! `/demo/upload`: hashes a request body of any size as it arrives
//! (SHA-256) and answers the hex digest and the byte count. The app reads
//! the body piece by piece (`App::reads_body`), so it never holds more
//! than one piece, and hashes each on a blocking-pool thread
//! (`Responder::read_body_on_pool`); its limit is the app's
//! `max_stream_body`.

use sha2::{Digest, Sha256};
use stoa_app_api::{BodyEnd, BodySink, Responder, Response};

/// The route.
pub const UPLOAD: &str = "/upload";

/// The running hash of one upload.
pub struct Hasher {
    hash: Sha256,
    bytes: u64,
}

impl Hasher {
    pub fn new() -> Self {
        Hasher {
            hash: Sha256::new(),
            bytes: 0,
        }
    }
}

impl Default for Hasher {
    fn default() -> Self {
        Hasher::new()
    }
}

impl BodySink for Hasher {
    fn data(&mut self, chunk: &[u8]) {
        self.hash.update(chunk);
        self.bytes += chunk.len() as u64;
    }

    fn end(self, end: BodyEnd, responder: Responder) {
        let response = match end {
            BodyEnd::Complete => {
                let digest = self.hash.finalize();
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                Response::text(200, &format!("{hex}  {} bytes\n", self.bytes))
            }
            BodyEnd::TooLarge => Response::text(413, "upload larger than max_stream_body\n"),
            BodyEnd::Broken => Response::text(400, "upload cut short\n"),
        };
        responder.respond(response);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_app_api::abi_stable::std_types::RSlice;
    use stoa_app_api::testing::call;
    use stoa_app_api::{App, Request};

    #[test]
    fn an_upload_is_hashed_as_it_arrives() {
        let request = Request {
            body: RSlice::from_slice(b"abc"),
            ..Request::sample("POST", "/demo", UPLOAD, "")
        };
        assert!(crate::Demo::default().reads_body(&request));
        let r = call(&crate::Demo::default(), &request);
        assert_eq!(
            r.body_str(),
            Ok("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  3 bytes\n")
        );
    }
}
