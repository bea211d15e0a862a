//! The futures an exchange's `receive` and `send` await, and the news
//! that came while none was parked (so the next park returns at once);
//! the application's task, cancelled once the client went.

use pyo3::prelude::*;

#[derive(Default)]
pub struct Waiters {
    pub receive: Option<Py<PyAny>>,
    pub send: Option<Py<PyAny>>,
    receive_ready: bool,
    send_ready: bool,
    /// The application's task (the driver's), while it runs.
    task: Option<Py<PyAny>>,
    /// The loop was told the client went.
    gone_told: bool,
}

impl Waiters {
    /// Parks `future` for `receive`: false if news came since the last
    /// `receive` (the caller asks again instead of waiting).
    pub fn park_receive(&mut self, future: Py<PyAny>) -> bool {
        if std::mem::take(&mut self.receive_ready) {
            return false;
        }
        self.receive = Some(future);
        true
    }

    /// As `park_receive`, for `send`.
    pub fn park_send(&mut self, future: Py<PyAny>) -> bool {
        if std::mem::take(&mut self.send_ready) {
            return false;
        }
        self.send = Some(future);
        true
    }

    /// A send is about to wait: news from before it does not count.
    pub fn send_blocked(&mut self) {
        self.send_ready = false;
    }

    /// News for `receive`: its future to resolve, if one is parked.
    pub fn for_receive(&mut self) -> Option<Py<PyAny>> {
        let f = self.receive.take();
        self.receive_ready = f.is_none();
        f
    }

    /// News for `send`: its future to resolve, if one is parked.
    pub fn for_send(&mut self) -> Option<Py<PyAny>> {
        let f = self.send.take();
        self.send_ready = f.is_none();
        f
    }

    /// Keeps the application's task, to cancel once the client is gone;
    /// true if it is gone already (the driver schedules the cancel).
    pub fn watch(&mut self, task: Py<PyAny>) -> bool {
        if self.gone_told {
            return true;
        }
        self.task = Some(task);
        false
    }

    /// The client went: `None` if the loop was told already, else the task
    /// to cancel (if one runs).
    pub fn tell_gone(&mut self) -> Option<Option<Py<PyAny>>> {
        if std::mem::replace(&mut self.gone_told, true) {
            return None;
        }
        Some(self.task.take())
    }

    /// The application ended: its task holds the exchange, so let go of it.
    pub fn release_task(&mut self) -> Option<Py<PyAny>> {
        self.task.take()
    }

    /// News for both.
    pub fn for_both(&mut self) -> [Option<Py<PyAny>>; 2] {
        [self.for_receive(), self.for_send()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn news_before_a_park_makes_the_park_return_at_once() {
        pyo3::prepare_freethreaded_python();
        Python::with_gil(|py| {
            let future = || py.None();
            let mut w = Waiters::default();
            // News with nobody waiting is kept for the next park.
            assert!(w.for_receive().is_none());
            assert!(!w.park_receive(future()), "the news was lost");
            // Taken once: the next park waits, and news then hands its future.
            assert!(w.park_receive(future()));
            assert!(w.for_receive().is_some());
            assert!(w.receive.is_none());
            // A send about to wait forgets room that came before it.
            assert!(w.for_send().is_none());
            w.send_blocked();
            assert!(w.park_send(future()));
            let [r, s] = w.for_both();
            assert!(r.is_none() && s.is_some());
            assert!(!w.park_receive(future()));
        });
    }
}
