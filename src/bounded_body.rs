//! Reading the answer of a server Parley called, within a size limit: the one reader of every
//! outbound answer (an agent's A2A answers and AgentCards, the negotiator model's, the
//! embeddings provider's).
//!
//! A server Parley calls may be anyone's (an agent's endpoint is chosen by whoever registers
//! it) or simply broken, and an answer read whole is held whole in memory: a 300 MB answer
//! would take the process to a gigabyte, and several calls run at once. So [`read`] refuses an
//! answer whose `Content-Length` is past the limit before reading any of it, reads the rest a
//! chunk at a time and stops (dropping the connection, so that nothing more is read) as soon as
//! the bytes so far pass the limit. The limit of each caller is named where it calls: 64 KiB for
//! a card, 1 MiB for an A2A answer, `PARLEY_NEGOTIATOR_MODEL_ANSWER_MIB` and
//! `PARLEY_EMBEDDINGS_ANSWER_MIB` for the models.

/// Why an answer was not read whole.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// It is larger than the limit (said by its `Content-Length`, or seen while reading).
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    /// The connection failed or timed out while the answer was read.
    #[error("the answer was cut off: {0}")]
    Failed(#[from] reqwest::Error),
}

/// The whole body of `response`, if it is at most `max` bytes.
pub async fn read(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge(max));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > max {
            // Dropping the response closes the connection: the rest is never read.
            return Err(BodyError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on 127.0.0.1 answering `size` bytes, with or without a `Content-Length`; its URL.
    async fn server(size: usize, with_length: bool) -> String {
        use axum::{body::Body, response::Response};
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(move || async move {
                let chunks = futures::stream::iter((0..size.div_ceil(4096)).map(move |i| {
                    let n = 4096.min(size - i * 4096);
                    Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'x'; n]))
                }));
                let mut answer = Response::builder();
                if with_length {
                    answer = answer.header("content-length", size);
                }
                answer.body(Body::from_stream(chunks)).unwrap()
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn an_answer_within_the_limit_is_read_whole_and_a_larger_one_is_refused() {
        let client = reqwest::Client::new();
        for with_length in [true, false] {
            let small = server(10_000, with_length).await;
            let body = read(client.get(&small).send().await.unwrap(), 10_000).await.unwrap();
            assert_eq!(body.len(), 10_000);
            let large = server(50_000_000, with_length).await;
            let refused = read(client.get(&large).send().await.unwrap(), 10_000).await.unwrap_err();
            assert!(matches!(refused, BodyError::TooLarge(10_000)), "{refused}");
        }
    }
}
