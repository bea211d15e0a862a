//! `/demo/ws`: a WebSocket echo, and broadcast rooms.
//!
//! - `/demo/ws` echoes each message back as it came (text as text,
//!   binary as binary);
//! - `/demo/ws?room=NAME` joins room NAME (1 to 64 characters): each
//!   message a member sends goes to every member of the room, the sender
//!   included, in the order the room got them. A member whose queue is
//!   full (a slow reader) misses the message rather than holding up the
//!   room.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use stoa_app_api::{Request, Responder, Response, Sent, WebSocket, WsMessage, WsSender};

/// Longest room name.
const MAX_ROOM: usize = 64;

/// The open rooms: name -> members.
#[derive(Default)]
pub struct Rooms {
    rooms: Mutex<HashMap<String, HashMap<u64, WsSender>>>,
    next: AtomicU64,
}

impl Rooms {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<u64, WsSender>>> {
        self.rooms.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn join(&self, room: &str, sender: WsSender) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .entry(room.to_string())
            .or_default()
            .insert(id, sender);
        id
    }

    fn leave(&self, room: &str, id: u64) {
        let mut rooms = self.lock();
        if let Some(members) = rooms.get_mut(room) {
            members.remove(&id);
            if members.is_empty() {
                rooms.remove(room);
            }
        }
    }

    /// Sends `message` to every member; drops members that are gone. The
    /// lock is held while sending (sends never block), which keeps one
    /// order for every member.
    fn broadcast(&self, room: &str, message: WsMessage<'_>) {
        let mut rooms = self.lock();
        let Some(members) = rooms.get_mut(room) else {
            return;
        };
        members.retain(|_, member| send(member, message) != Sent::Closed);
    }

    /// Members of `room` now.
    pub fn members(&self, room: &str) -> usize {
        self.lock().get(room).map_or(0, HashMap::len)
    }
}

fn send(to: &WsSender, message: WsMessage<'_>) -> Sent {
    match message {
        WsMessage::Text(t) => to.send_text(t),
        WsMessage::Binary(b) => to.send_binary(b),
    }
}

/// One client of `/demo/ws`.
struct Member {
    room: Option<(Arc<Rooms>, String)>,
    id: Option<u64>,
    sender: Option<WsSender>,
}

impl WebSocket for Member {
    fn on_open(&mut self, sender: WsSender) {
        if let Some((rooms, name)) = &self.room {
            self.id = Some(rooms.join(name, sender.clone()));
        }
        self.sender = Some(sender);
    }

    fn on_message(&mut self, message: WsMessage<'_>) {
        match (&self.room, &self.sender) {
            (Some((rooms, name)), _) => rooms.broadcast(name, message),
            (None, Some(sender)) => {
                // An echo to a reader whose queue is full is dropped.
                send(sender, message);
            }
            (None, None) => {}
        }
    }

    fn on_close(&mut self, _code: u16, _reason: &str) {
        if let (Some((rooms, name)), Some(id)) = (&self.room, self.id) {
            rooms.leave(name, id);
        }
        self.sender = None;
    }
}

/// Accepts `/demo/ws` (see the module's doc).
pub fn accept(rooms: &Arc<Rooms>, request: &Request<'_>, responder: Responder) {
    let room = match request.query_param("room") {
        None => None,
        Some(name) if !name.is_empty() && name.len() <= MAX_ROOM => {
            Some((rooms.clone(), name.to_string()))
        }
        Some(_) => {
            let why = format!("room must be 1 to {MAX_ROOM} characters\n");
            return responder.respond(Response::text(400, &why));
        }
    };
    responder.accept_websocket(Member {
        room,
        id: None,
        sender: None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_app_api::testing::{self, Received};

    fn open(rooms: &Arc<Rooms>, query: &'static str) -> testing::WsTest {
        struct One(Arc<Rooms>);
        impl stoa_app_api::App for One {
            fn handle(&self, request: &Request<'_>, responder: Responder) {
                accept(&self.0, request, responder);
            }
        }
        let request = Request::sample("GET", "/demo", "/ws", query);
        match testing::websocket(&One(rooms.clone()), &request) {
            Ok(ws) => ws,
            Err(outcome) => panic!("not accepted: {outcome:?}"),
        }
    }

    #[test]
    fn echo_sends_each_message_back_as_it_came() {
        let rooms = Arc::new(Rooms::default());
        let mut ws = open(&rooms, "");
        ws.send_text("hello");
        ws.send_binary(&[0, 255]);
        assert_eq!(
            ws.received(),
            [
                Received::Text("hello".into()),
                Received::Binary(vec![0, 255])
            ]
        );
    }

    #[test]
    fn a_room_message_reaches_every_member_and_leaving_empties_it() {
        let rooms = Arc::new(Rooms::default());
        let mut a = open(&rooms, "room=lobby");
        let b = open(&rooms, "room=lobby");
        let other = open(&rooms, "room=elsewhere");
        assert_eq!(rooms.members("lobby"), 2);
        a.send_text("hi all");
        assert_eq!(a.received(), [Received::Text("hi all".into())]);
        assert_eq!(b.received(), [Received::Text("hi all".into())]);
        assert!(other.received().is_empty());
        a.close(1000, "");
        b.close(1000, "");
        assert_eq!(rooms.members("lobby"), 0);
    }
}
