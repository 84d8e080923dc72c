//! [`FakeProbes`]: a scripted [`ProbeExecutor`] for tests. Each handler is
//! named by a key (`exec:<command>`, `http:<port>`, `tcp:<port>`) and
//! answers as told (pass, fail with an output, or hang until cut off);
//! every try is recorded with the (virtual) time it began.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{ProbeAction, ProbeExecutor, ProbeOutcome, ProbeTarget};

/// How a handler answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Pass,
    Fail(String),
    /// Never answers: the runner's timeout ends the try.
    Hang,
}

#[derive(Debug, Default)]
struct Inner {
    answers: HashMap<String, Answer>,
    tries: Vec<(String, Instant)>,
}

/// The scripted executor (unscripted handlers pass).
#[derive(Debug, Default)]
pub struct FakeProbes(Mutex<Inner>);

/// The key of a handler.
pub fn key(action: &ProbeAction) -> String {
    match action {
        ProbeAction::Exec(e) => format!("exec:{}", e.command.join(" ")),
        ProbeAction::HttpGet(h) => format!("http:{}", h.port),
        ProbeAction::TcpSocket(t) => format!("tcp:{}", t.port),
    }
}

impl FakeProbes {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// From now on the handler `key` answers `answer`.
    pub fn answer(&self, key: &str, answer: Answer) {
        self.inner().answers.insert(key.to_owned(), answer);
    }

    /// When each try of `key` began.
    pub fn tries_of(&self, key: &str) -> Vec<Instant> {
        self.inner().tries.iter().filter(|(k, _)| k == key).map(|(_, at)| *at).collect()
    }
}

#[async_trait]
impl ProbeExecutor for FakeProbes {
    async fn probe(&self, _target: &ProbeTarget, action: &ProbeAction, _timeout: Duration) -> ProbeOutcome {
        let key = key(action);
        let answer = {
            let mut inner = self.inner();
            inner.tries.push((key.clone(), Instant::now()));
            inner.answers.get(&key).cloned().unwrap_or(Answer::Pass)
        };
        match answer {
            Answer::Pass => ProbeOutcome::pass(format!("{key} ok")),
            Answer::Fail(output) => ProbeOutcome::fail(output),
            Answer::Hang => std::future::pending().await,
        }
    }
}
