//! A request body must arrive whole within a deadline, however it trickles in.
//!
//! The body timeout (`PARLEY_HTTP_BODY_TIMEOUT`) bounds the gap between two parts of a body; a
//! client sending one byte every few seconds never trips it, and holds its connection (and a
//! file descriptor) for as long as it likes. So every request body also has a deadline,
//! `PARLEY_HTTP_BODY_DEADLINE` after the request's head arrived: reading past it fails with
//! [`BodyDeadline`], which the extractors answer `408 request_timeout` (and the connection is
//! closed, since the rest of the body may still be on its way).

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// Reading a body failed: it did not arrive whole by its deadline.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body did not arrive whole within {0:?}")]
pub struct BodyDeadline(pub Duration);

/// A body that fails once its deadline has passed.
pub struct Deadlined {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    allowed: Duration,
}

impl Deadlined {
    /// `inner`, to be read whole within `allowed` from now.
    pub fn new(inner: Body, allowed: Duration) -> Deadlined {
        Deadlined { inner, deadline: Box::pin(tokio::time::sleep_until(Instant::now() + allowed)), allowed }
    }
}

impl http_body::Body for Deadlined {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyDeadline(self.allowed))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
