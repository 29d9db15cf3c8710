//! A UI side of the wire: one subscriber's queue of messages, and the future that waits for the
//! next one.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context as TaskContext, Poll, Waker};

use super::WireMessage;

#[derive(Default)]
pub(super) struct SideState {
    pub(super) items: VecDeque<WireMessage>,
    pub(super) closed: bool,
    waker: Option<Waker>,
}

/// One subscriber's queue. Dropping every handle to it (or [`UiSide::detach`]) stops the
/// wire from filling it.
#[derive(Clone, Default)]
pub struct UiSide(pub(super) Rc<RefCell<SideState>>);

impl UiSide {
    pub(super) fn push(&self, m: WireMessage) {
        let waker = {
            let mut st = self.0.borrow_mut();
            if st.closed {
                return;
            }
            st.items.push_back(m);
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(super) fn close(&self) {
        let waker = {
            let mut st = self.0.borrow_mut();
            st.closed = true;
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Every message that is ready, oldest first (empty when none is).
    pub fn take_ready(&self) -> Vec<WireMessage> {
        self.0.borrow_mut().items.drain(..).collect()
    }

    /// The wire has shut down and every message was taken.
    pub fn is_finished(&self) -> bool {
        let st = self.0.borrow();
        st.closed && st.items.is_empty()
    }

    /// Resolves when a message is ready or the side is finished.
    pub fn ready(&self) -> Ready {
        Ready(self.clone())
    }

    /// The next message, or `None` once the wire has shut down and all were read.
    pub async fn receive(&self) -> Option<WireMessage> {
        self.ready().await;
        self.0.borrow_mut().items.pop_front()
    }

    /// Stops receiving: the queue is emptied and closed.
    pub fn detach(&self) {
        let mut st = self.0.borrow_mut();
        st.items.clear();
        st.closed = true;
    }
}

/// See [`UiSide::ready`].
pub struct Ready(UiSide);

impl Future for Ready {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        let mut st = self.0 .0.borrow_mut();
        if !st.items.is_empty() || st.closed {
            return Poll::Ready(());
        }
        st.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
