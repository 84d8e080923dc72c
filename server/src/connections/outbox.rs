//! [`Outbox`]: the messages the server sends while it handles one command,
//! collected in order and handed to the [`Connections`](super::Connections)
//! once at its end. Features fill an outbox instead of reaching into the
//! connections.
//!
//! An accepted change opens a job, and the jobs advance once, after the
//! command was handled. What the jobs hand out must still reach the agents
//! before anything the command sent after the change (above all the
//! commander's `UpdateStateSuccess`, as in Ankaios): a job that opens
//! marks its place in the outbox, and the jobs' messages go there.

use ank_common::messages::FromServer;

use super::ConnId;

/// One message and who gets it.
#[derive(Debug)]
pub enum Out {
    /// To one stream.
    To(ConnId, FromServer),
    /// To the stream of an agent, if connected.
    ToAgent(String, FromServer),
    /// To every commander that gets pushes and every agent but `except`.
    Broadcast { except: Option<String>, msg: FromServer },
}

/// The messages of one command, in order.
#[derive(Debug, Default)]
pub struct Outbox {
    sends: Vec<Out>,
    /// Where the first job not advanced yet opened.
    jobs_at: Option<usize>,
}

impl Outbox {
    /// Queues `msg` for stream `conn`.
    pub fn send(&mut self, conn: ConnId, msg: FromServer) {
        self.sends.push(Out::To(conn, msg));
    }

    /// Queues `msg` for the stream of `agent`.
    pub fn send_to_agent(&mut self, agent: &str, msg: FromServer) {
        self.sends.push(Out::ToAgent(agent.to_owned(), msg));
    }

    /// Queues `msg` for every commander that gets pushes and every agent
    /// except `except_agent`.
    pub fn broadcast(&mut self, except_agent: Option<&str>, msg: FromServer) {
        self.sends.push(Out::Broadcast { except: except_agent.map(str::to_owned), msg });
    }

    /// Queues the messages of `other` after these.
    pub fn append(&mut self, other: Outbox) {
        debug_assert!(other.jobs_at.is_none(), "a feature's outbox opened a job");
        self.sends.extend(other.sends);
    }

    /// A job opened here: what the jobs hand out when they advance goes
    /// before what is queued from now on.
    pub fn job_opened(&mut self) {
        self.jobs_at.get_or_insert(self.sends.len());
    }

    /// Whether a job opened that the jobs have not advanced over yet.
    pub fn job_pending(&self) -> bool {
        self.jobs_at.is_some()
    }

    /// The messages of advancing the jobs: at the place of the first job
    /// opened since they last advanced, else at the end.
    pub fn jobs_advanced(&mut self, jobs: Outbox) {
        let at = self.jobs_at.take().unwrap_or(self.sends.len());
        self.sends.splice(at..at, jobs.sends);
    }

    /// Takes the queued messages, in order.
    pub fn take(&mut self) -> Vec<Out> {
        self.jobs_at = None;
        std::mem::take(&mut self.sends)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(n: usize) -> FromServer {
        FromServer::ServerHello(Vec::with_capacity(n))
    }

    fn order(out: Vec<Out>) -> Vec<String> {
        out.into_iter()
            .map(|o| match o {
                Out::To(c, _) => format!("to {c}"),
                Out::ToAgent(a, _) => format!("agent {a}"),
                Out::Broadcast { except, .. } => format!("all but {except:?}"),
            })
            .collect()
    }

    #[test]
    fn outbox_puts_what_the_jobs_hand_out_where_the_first_job_opened() {
        let mut out = Outbox::default();
        out.broadcast(None, hello(0));
        out.job_opened();
        out.send(7, hello(0));
        out.job_opened();
        assert!(out.job_pending());
        let mut jobs = Outbox::default();
        jobs.send_to_agent("A", hello(0));
        out.jobs_advanced(jobs);
        assert!(!out.job_pending());
        let mut later = Outbox::default();
        later.send_to_agent("B", hello(0));
        out.jobs_advanced(later);
        assert_eq!(order(out.take()), ["all but None", "agent A", "to 7", "agent B"]);
    }
}
