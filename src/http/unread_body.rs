//! Answers to requests whose body was not read end their connection, and say so.
//!
//! A request refused before its body is read (a 401 from the authentication extractor, a 404
//! for an unknown path, ...) leaves the body's bytes on the connection; the server cannot reuse
//! the connection after answering, so it closes it. A client that does not know that may send
//! its next request on the connection just as it closes, and never get an answer. So every
//! answer to a request with a body that was not read to its end carries `Connection: close`:
//! the answer is sent, then the connection ends, and the client opens a new one for what
//! follows.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
};

use axum::{
    body::{Body, Bytes},
    extract::Request,
    http::{HeaderValue, header},
    middleware::Next,
    response::Response,
};
use http_body::{Frame, SizeHint};

/// A request body that records when it was read to its end.
struct Tracked {
    inner: Body,
    ended: Arc<AtomicBool>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.ended.store(true, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware: see the module docs.
pub async fn close_when_unread(request: Request, next: Next) -> Response {
    if http_body::Body::is_end_stream(request.body()) {
        return next.run(request).await;
    }
    let ended = Arc::new(AtomicBool::new(false));
    let request = request.map(|inner| Body::new(Tracked { inner, ended: ended.clone() }));
    let mut response = next.run(request).await;
    if !ended.load(Ordering::Relaxed) {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
