//! [`Subscriber`]: one `ank get events workloadStates`-style follow
//! stream: a command connection (as an Ankaios client: no pushed
//! workload states), a `CompleteState` request with
//! `subscribeForEvents`, and a task that takes every event into its
//! [`StateBook`]. The scenarios wait on the book with [`Subscriber::wait_for`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ank_cli::connection::Connection;
use ank_common::messages::{RequestContent, ResponseContent};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::{Result, ScaleError};
use crate::state_book::StateBook;

/// How long a request to the server may take.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// A running event subscription.
pub struct Subscriber {
    book: Arc<Mutex<StateBook>>,
    changes: watch::Receiver<u64>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Subscriber {
    /// Connects to `url` and subscribes to the events under `masks`.
    pub async fn start(url: &str, masks: &[&str]) -> Result<Self> {
        let masks: Vec<String> = masks.iter().map(|m| (*m).to_owned()).collect();
        let (conn, request_id, first) = subscribe(url, &masks).await?;
        let mut book = StateBook::default();
        book.load(&first);
        let book = Arc::new(Mutex::new(book));
        let (changed, changes) = watch::channel(0);
        let stop = CancellationToken::new();
        let stream = Stream { conn, request_id, url: url.to_owned(), masks };
        let task = tokio::spawn(follow(stream, book.clone(), changed, stop.clone()));
        Ok(Self { book, changes, stop, task })
    }

    /// Its book now.
    pub fn book(&self) -> MutexGuard<'_, StateBook> {
        lock(&self.book)
    }

    /// Waits until `done` holds for the book, at most `limit`.
    pub async fn wait_for(&mut self, what: &str, limit: Duration, done: impl Fn(&StateBook) -> bool) -> Result<()> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if done(&lock(&self.book)) {
                return Ok(());
            }
            let next = tokio::time::timeout_at(deadline, self.changes.changed()).await;
            match next {
                Ok(Ok(())) => {}
                // The stream ended: no more changes will come.
                Ok(Err(_)) => {
                    let reason = lock(&self.book).ended().unwrap_or("the subscription ended").to_owned();
                    return Err(ScaleError::SubscriptionEnded { waiting_for: what.to_owned(), reason });
                }
                Err(_) => return Err(ScaleError::Timeout { what: what.to_owned(), after: limit }),
            }
        }
    }

    /// Ends the subscription; the number of events it received and how
    /// often its stream was lost and subscribed again.
    pub async fn stop(self) -> (u64, u64) {
        self.stop.cancel();
        let _ = self.task.await;
        let book = lock(&self.book);
        (book.events(), book.resubscribed())
    }
}

fn lock(book: &Mutex<StateBook>) -> MutexGuard<'_, StateBook> {
    book.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A connection, subscribed, and how to subscribe again.
struct Stream {
    conn: Connection,
    request_id: String,
    url: String,
    masks: Vec<String>,
}

/// Connects to `url` and subscribes; the connection, the request id and
/// the first answer's state.
async fn subscribe(url: &str, masks: &[String]) -> Result<(Connection, String, Value)> {
    let connecting = |source| ScaleError::Connection { doing: "subscribing to events", source };
    let mut conn =
        Connection::connect_asking_pushes(url, None, RESPONSE_TIMEOUT, false, false).await.map_err(connecting)?;
    let request_id = conn.new_request_id();
    let request = RequestContent::CompleteState { field_mask: masks.to_vec(), subscribe_for_events: true };
    conn.send_request(&request_id, request).await.map_err(connecting)?;
    let first = tokio::time::timeout(RESPONSE_TIMEOUT, conn.next_response(&request_id))
        .await
        .map_err(|_| ScaleError::Timeout { what: "the subscription's answer".into(), after: RESPONSE_TIMEOUT })?
        .map_err(connecting)?;
    match first {
        ResponseContent::CompleteState(state) => {
            let tree = state
                .to_json()
                .map_err(|e| ScaleError::Rejected { doing: "the subscription", answer: e.to_string() })?;
            Ok((conn, request_id, tree))
        }
        other => Err(ScaleError::Rejected { doing: "the subscription", answer: format!("{other:?}") }),
    }
}

/// Takes every event into `book` until stopped. A stream the server ends
/// (a reader too slow for its queue, or a heartbeat missed on a loaded
/// machine) is subscribed again, which the book counts.
async fn follow(mut stream: Stream, book: Arc<Mutex<StateBook>>, changed: watch::Sender<u64>, stop: CancellationToken) {
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => break,
            next = stream.conn.next_response(&stream.request_id) => next,
        };
        match next {
            Ok(ResponseContent::Event { complete_state, altered_fields }) => {
                let count = {
                    let mut book = lock(&book);
                    book.apply_event(&complete_state, &altered_fields);
                    book.events()
                };
                changed.send_replace(count);
            }
            Ok(ResponseContent::Error(e)) => return lock(&book).end(format!("the server sent an error: {e}")),
            Ok(_) => {}
            Err(lost) => match subscribe(&stream.url, &stream.masks).await {
                Ok((conn, request_id, first)) => {
                    (stream.conn, stream.request_id) = (conn, request_id);
                    let count = {
                        let mut book = lock(&book);
                        book.reload(&first);
                        book.events()
                    };
                    changed.send_replace(count);
                }
                Err(e) => {
                    let reason = format!(
                        "{}; subscribing again: {}",
                        crate::run::error_chain(&lost),
                        crate::run::error_chain(&e)
                    );
                    return lock(&book).end(reason);
                }
            },
        }
    }
    let _ = stream.conn.send_request(&stream.request_id, RequestContent::EventsCancel).await;
    stream.conn.goodbye().await;
}
