//! Serving the router on a listener: the accept loop and each connection's timeouts.
//!
//! Slow and idle clients must not hold connections (and their file descriptors) forever, so each
//! HTTP/1 connection is served by hyper with:
//! - a header timeout (`PARLEY_HTTP_HEADER_TIMEOUT`): hyper closes a connection whose request
//!   head has not arrived whole within it, counted from when the server starts waiting for one
//!   (a fresh connection, or the next request on a kept-alive one);
//! - an idle timeout (`PARLEY_HTTP_IDLE_TIMEOUT`): a connection on which no byte moves in either
//!   direction for that long while no request is being handled is closed ([`IdleIo`]). A request
//!   in a handler (a long-poll waiting for a turn) is not idle; an event stream is not idle while
//!   its heartbeats reach the client, and one whose client stopped reading is.
//!
//! The body timeout and deadline are router layers (see [`super::layered`]). Open connections
//! are counted (`parley_http_connections`) and capped (`PARLEY_HTTP_MAX_CONNECTIONS`, lowered
//! to the descriptor limit less 256): at the cap the loop stops accepting, and new connections
//! wait in the kernel's listen backlog until one closes, instead of failing for want of
//! descriptors. The accept loop keeps going when
//! the process runs out of file descriptors: it backs off (10 ms doubling to 1 s) and logs once
//! per episode instead of spinning. Shutdown stops accepting and lets hyper finish every
//! connection gracefully.

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::{Router, extract::ConnectInfo};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpListener,
    time::{Instant, Sleep},
};
use tower::ServiceExt;

/// The per-connection timeouts, and how many connections are served at once.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// A request head must arrive whole within this.
    pub header: Duration,
    /// A connection with nothing moving and no request being handled is closed after this.
    pub idle: Duration,
    /// Connections served at once; further ones wait in the listen backlog until one closes.
    pub max: usize,
}

/// Descriptors kept for everything but HTTP connections (the database pool, files, listeners).
const RESERVED_DESCRIPTORS: u64 = 256;

/// The connection cap: `configured`, lowered to what the process's descriptor limit leaves for
/// connections, so that the cap is reached before accepting fails for want of descriptors.
pub fn connection_cap(configured: u32) -> usize {
    let configured = configured.max(1) as usize;
    let descriptors = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    match descriptors {
        Some(limit) => configured.min(limit.saturating_sub(RESERVED_DESCRIPTORS).max(1) as usize),
        None => configured,
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then waits for open connections.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()> + Send,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut backoff = Backoff::default();
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max));
    loop {
        // At the cap, nothing more is accepted until a connection closes.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, remote) = match accepted {
            Ok(accepted) => {
                backoff.succeeded();
                accepted
            }
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                let wait = backoff.failed(&e);
                tokio::select! {
                    () = tokio::time::sleep(wait) => continue,
                    () = &mut shutdown => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let io = TokioIo::new(IdleIo::new(stream, limits.idle, in_flight.clone()));
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(remote));
            let handling = InFlight::enter(&in_flight);
            let router = router.clone();
            async move {
                let response = router.oneshot(request.map(axum::body::Body::new)).await;
                drop(handling);
                response
            }
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header)
            .serve_connection(io, service);
        let connection = graceful.watch(connection);
        let counted = crate::metrics::Open::connection();
        tokio::spawn(async move {
            let (_counted, _slot) = (counted, slot);
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, %remote, "connection closed with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Errors of one incoming connection (it went away before it was accepted), not of the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// The accept loop's back-off while accepting fails (e.g. "Too many open files").
#[derive(Debug, Default)]
struct Backoff {
    /// The current wait; `None` while accepting works.
    wait: Option<Duration>,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);

    /// Records a failure; returns how long to wait before the next attempt. Logs the first
    /// failure of an episode only.
    fn failed(&mut self, e: &io::Error) -> Duration {
        let wait = match self.wait {
            None => {
                tracing::error!(error = %e, "accepting connections fails; backing off until it works again");
                Self::FIRST
            }
            Some(w) => (w * 2).min(Self::MAX),
        };
        self.wait = Some(wait);
        wait
    }

    /// Records a success, ending an episode of failures.
    fn succeeded(&mut self) {
        if self.wait.take().is_some() {
            tracing::info!("accepting connections again");
        }
    }
}

/// Marks one request being handled on a connection while alive.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(count: &Arc<AtomicUsize>) -> InFlight {
        count.fetch_add(1, Ordering::SeqCst);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection's socket that fails with `TimedOut` once no byte has moved for `timeout` while
/// no request is being handled on it.
pub struct IdleIo<T> {
    inner: T,
    timeout: Duration,
    in_flight: Arc<AtomicUsize>,
    deadline: Pin<Box<Sleep>>,
}

impl<T> IdleIo<T> {
    fn new(inner: T, timeout: Duration, in_flight: Arc<AtomicUsize>) -> IdleIo<T> {
        IdleIo { inner, timeout, in_flight, deadline: Box::pin(tokio::time::sleep(timeout)) }
    }

    fn moved(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + self.timeout);
    }

    /// What a poll of the socket answers: bytes that `moved` re-arm the deadline, and a socket
    /// with nothing to give or take right now counts towards idleness.
    fn settle<R>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<R>>, moved: bool) -> Poll<io::Result<R>> {
        if polled.is_pending() {
            return self.poll_idle(cx).map(Err);
        }
        if moved {
            self.moved();
        }
        polled
    }

    /// Called when the socket has nothing to give or take right now.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            // A handler is working: not idle. Its answer moves bytes, which re-arms the deadline.
            self.moved();
            return Poll::Pending;
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "the connection was idle too long")),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let moved = buf.filled().len() > before;
        self.settle(cx, polled, moved)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        let moved = matches!(polled, Poll::Ready(Ok(n)) if n > 0);
        self.settle(cx, polled, moved)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        let moved = matches!(polled, Poll::Ready(Ok(n)) if n > 0);
        self.settle(cx, polled, moved)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Raises the process's soft limit of open files to its hard limit, so that connections (each a
/// file descriptor) run out as late as the machine allows; returns the limit in force.
pub fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum || (limit.maximum.is_none() && limit.current.is_some()) {
        let raised = Rlimit { current: limit.maximum, maximum: limit.maximum };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return limit.maximum;
        }
    }
    limit.current
}

/// The client's address, as the serve loop records it on every request.
pub fn client_address(extensions: &axum::http::Extensions) -> Option<SocketAddr> {
    extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(a)| *a)
}
