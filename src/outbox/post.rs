//! One POST of a delivery, within bounds: the outbound address rule again at send time (the
//! client's guarded resolver, and the URL's literal address checked before each request), no
//! redirect followed (a 3xx is a failed attempt), `PARLEY_WEBHOOK_TIMEOUT` for the whole
//! exchange, a body of at most [`MAX_BODY_BYTES`], and at most [`MAX_ANSWER_BYTES`] of the
//! answer read (the rest is dropped with the connection). What came of it is an [`Answer`].

use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::{StatusCode, Url, header};

use crate::a2a_client::guard;

/// The largest body Parley POSTs; a larger one is never sent (the delivery fails for good).
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// The most of an answer read.
pub const MAX_ANSWER_BYTES: usize = 64 << 10;

/// How long an idle connection to a receiver is kept for the next delivery (below the 5 s after
/// which common servers close one).
const IDLE_CONNECTION: Duration = Duration::from_secs(4);

/// What an attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A 2xx.
    Delivered {
        /// The status.
        status: u16,
    },
    /// Any other status; with the `Retry-After` header when there was one.
    Status {
        /// The status.
        status: u16,
        /// The `Retry-After` header, as sent.
        retry_after: Option<String>,
    },
    /// No answer within the timeout.
    Timeout,
    /// The connection failed.
    Network(String),
    /// The outbound address rule refused the URL (its scheme, its form, or where it leads now).
    Refused(String),
    /// The body is larger than [`MAX_BODY_BYTES`].
    TooLarge,
}

impl Answer {
    /// The metric's outcome label.
    pub fn outcome(&self) -> &'static str {
        match self {
            Answer::Delivered { .. } => "delivered",
            Answer::Status { status: 410, .. } => "gone",
            Answer::Status { .. } => "http_error",
            Answer::Timeout => "timeout",
            Answer::Network(_) => "network",
            Answer::Refused(_) => "refused",
            Answer::TooLarge => "too_large",
        }
    }

    /// The HTTP status, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Answer::Delivered { status } | Answer::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Why the attempt failed, for the delivery log; `None` when it did not.
    pub fn error(&self) -> Option<String> {
        match self {
            Answer::Delivered { .. } => None,
            Answer::Status { status, .. } => Some(format!("the endpoint answered HTTP {status}")),
            Answer::Timeout => Some("no answer within the timeout".to_owned()),
            Answer::Network(e) => Some(format!("the endpoint could not be reached: {e}")),
            Answer::Refused(e) => Some(format!("the URL is refused: {e}")),
            Answer::TooLarge => Some(format!("the body is larger than {MAX_BODY_BYTES} bytes")),
        }
    }
}

/// The client that POSTs deliveries. Cheap to clone.
#[derive(Clone)]
pub struct Poster {
    client: reqwest::Client,
    timeout: Duration,
    allow_private: bool,
}

impl Poster {
    /// A client for `timeout` per delivery; non-public addresses only with `allow_private`.
    pub fn new(timeout: Duration, allow_private: bool) -> anyhow::Result<Poster> {
        let client = guard::client_builder(allow_private)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_idle_timeout(IDLE_CONNECTION)
            .build()?;
        Ok(Poster { client, timeout, allow_private })
    }

    /// POSTs `body` as JSON to `url` with `headers`; what came of it, and how long it took.
    pub async fn post(&self, url: &str, headers: &[(&'static str, String)], body: Vec<u8>) -> (Answer, Duration) {
        let started = Instant::now();
        let answer = self.exchange(url, headers, body).await;
        (answer, started.elapsed())
    }

    async fn exchange(&self, url: &str, headers: &[(&'static str, String)], body: Vec<u8>) -> Answer {
        if body.len() > MAX_BODY_BYTES {
            return Answer::TooLarge;
        }
        let url = match Url::parse(url) {
            Ok(url) => url,
            Err(e) => return Answer::Refused(format!("not a URL: {e}")),
        };
        if let Err(e) = guard::check_url(&url, self.allow_private) {
            return Answer::Refused(e.to_string());
        }
        let mut request = self.client.post(url).header(header::CONTENT_TYPE, "application/json").body(body);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let exchange = async {
            let response = request.send().await.map_err(sort)?;
            let status = response.status();
            let retry_after =
                response.headers().get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_owned);
            // Read a bounded part of the answer, so that the connection can be kept; anything
            // longer is dropped with it.
            let mut read = 0;
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                read += chunk.map_err(sort)?.len();
                if read > MAX_ANSWER_BYTES {
                    break;
                }
            }
            Ok(if status.is_success() {
                Answer::Delivered { status: status.as_u16() }
            } else {
                Answer::Status { status: status.as_u16(), retry_after }
            })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(failed)) => failed,
            Err(_) => Answer::Timeout,
        }
    }
}

/// A request's failure as an [`Answer`].
fn sort(e: reqwest::Error) -> Answer {
    if let Some(refused) = guard::refusal_in(&e) {
        return Answer::Refused(refused.to_string());
    }
    if e.is_timeout() {
        return Answer::Timeout;
    }
    let mut message = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        message = format!("{message}: {c}");
        cause = c.source();
    }
    Answer::Network(message.chars().take(200).collect())
}

/// Whether `status` is one a receiver says it is gone with.
pub fn is_gone(status: u16) -> bool {
    status == StatusCode::GONE.as_u16()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At every send, the address rule holds whatever the registration judged: a literal
    /// loopback address is refused before any request, a name resolving to one by the client's
    /// resolver (no connection is made to either).
    #[tokio::test]
    async fn every_send_is_judged_by_the_address_rule_again() {
        let poster = Poster::new(Duration::from_secs(2), false).unwrap();
        for url in ["http://127.0.0.1:9/hook", "http://[::1]:9/hook", "http://localhost:9/hook"] {
            let (answer, _) = poster.post(url, &[], b"{}".to_vec()).await;
            assert!(matches!(answer, Answer::Refused(_)), "{url}: {answer:?}");
            assert_eq!(answer.outcome(), "refused");
        }
        let (answer, _) = poster.post("ftp://example.com/", &[], b"{}".to_vec()).await;
        assert!(matches!(answer, Answer::Refused(_)), "{answer:?}");
    }

    #[tokio::test]
    async fn a_body_past_the_bound_is_never_sent() {
        let poster = Poster::new(Duration::from_secs(2), true).unwrap();
        let (answer, _) = poster.post("http://127.0.0.1:9/hook", &[], vec![b' '; MAX_BODY_BYTES + 1]).await;
        assert_eq!(answer, Answer::TooLarge);
        assert_eq!(answer.error().as_deref(), Some("the body is larger than 1048576 bytes"));
    }

    #[test]
    fn outcomes_are_a_closed_set_of_labels() {
        let gone = Answer::Status { status: 410, retry_after: None };
        let failed = Answer::Status { status: 500, retry_after: Some("3".into()) };
        assert_eq!((gone.outcome(), failed.outcome()), ("gone", "http_error"));
        assert_eq!(Answer::Delivered { status: 204 }.error(), None);
        assert_eq!(failed.status(), Some(500));
        assert!(is_gone(410) && !is_gone(404));
    }
}
