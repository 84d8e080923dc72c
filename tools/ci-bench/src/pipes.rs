//! The workload's side of one control interface: writes `ToAnkaios` frames
//! to `output` and a reader task that decodes `FromAnkaios` frames from
//! `input` into one channel shared by all workloads, stamped with the time
//! they arrived.
//!
//! Both FIFOs are opened read-write, as the agent does: an open for only
//! reading or only writing waits until the other side is open, which is
//! forever when no agent serves the folder. Whether one does shows in the
//! Hello getting no answer (see [`Workload::hello`]).

use std::path::Path;
use std::time::Duration;

use ank_agent::control_interface::framing::{FrameDecoder, encode_frame};
use ank_proto::ank_base as pb;
use ank_proto::control_api::{self as ci, from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};
use anyhow::{Context, bail};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long to wait for any one answer of the agent.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// A message from the agent to workload number `from`.
#[derive(Debug)]
pub struct Received {
    pub from: usize,
    pub at: Instant,
    pub message: FromAnkaiosEnum,
}

/// Messages of all opened workloads.
pub type Inbox = mpsc::UnboundedReceiver<Received>;

/// One workload's writing end.
pub struct Workload {
    pub name: String,
    to_agent: pipe::Sender,
}

impl Workload {
    /// Opens the FIFOs in `folder` (a `control_interface` folder) as
    /// workload number `index`; what arrives goes to `inbox`.
    pub fn open(folder: &Path, index: usize, inbox: mpsc::UnboundedSender<Received>) -> anyhow::Result<Self> {
        let open = |name: &str| {
            let path = folder.join(name);
            if !path.exists() {
                bail!("'{}' does not exist: not a control interface folder of a running workload?", path.display());
            }
            Ok(path)
        };
        let output = open("output")?;
        let input = open("input")?;
        let to_agent = pipe::OpenOptions::new()
            .read_write(true)
            .open_sender(&output)
            .with_context(|| format!("cannot open '{}'", output.display()))?;
        let from_agent = pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&input)
            .with_context(|| format!("cannot open '{}'", input.display()))?;
        let name = workload_name(folder);
        tokio::spawn(read(from_agent, index, name.clone(), inbox));
        Ok(Self { name, to_agent })
    }

    /// Sends one message.
    pub async fn send(&mut self, message: ToAnkaiosEnum) -> anyhow::Result<()> {
        let bytes = encode_frame(&ci::ToAnkaios { to_ankaios_enum: Some(message) }.encode_to_vec());
        self.to_agent.write_all(&bytes).await.with_context(|| format!("cannot write to '{}'", self.name))
    }

    /// Sends a request.
    pub async fn request(&mut self, id: &str, content: pb::request::RequestContent) -> anyhow::Result<()> {
        let request = pb::Request { request_id: id.to_owned(), request_content: Some(content) };
        self.send(ToAnkaiosEnum::Request(request)).await
    }

    /// Sends the Hello; the caller waits for the acceptance in its inbox.
    pub async fn hello(&mut self) -> anyhow::Result<()> {
        self.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: ank_common::PROTOCOL_VERSION.to_owned() })).await
    }
}

/// `<workload>` of `.../<workload>.<id>/control_interface` (names have
/// no dots); the folder itself for any other layout.
fn workload_name(folder: &Path) -> String {
    let instance = if folder.ends_with("control_interface") { folder.parent() } else { Some(folder) };
    match instance.and_then(Path::file_name).and_then(|n| n.to_str()) {
        Some(name) => name.split('.').next().unwrap_or(name).to_owned(),
        None => folder.display().to_string(),
    }
}

async fn read(mut from_agent: pipe::Receiver, from: usize, name: String, inbox: mpsc::UnboundedSender<Received>) {
    let mut decoder = FrameDecoder::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Never 0 (end of file): this process holds a writing end too.
        let n = match from_agent.read(&mut buf).await {
            Ok(0) => {
                eprintln!("{name}: input closed");
                return;
            }
            Ok(n) => n,
            Err(e) => {
                eprintln!("{name}: cannot read: {e}");
                return;
            }
        };
        let at = Instant::now();
        decoder.push(&buf[..n]);
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    eprintln!("{name}: broken frame from the agent: {e}");
                    return;
                }
            };
            match ci::FromAnkaios::decode(frame.as_slice()).map(|m| m.from_ankaios_enum) {
                Ok(Some(message)) => {
                    if inbox.send(Received { from, at, message }).is_err() {
                        return;
                    }
                }
                Ok(None) => eprintln!("{name}: an empty message from the agent"),
                Err(e) => eprintln!("{name}: undecodable message from the agent: {e}"),
            }
        }
    }
}

/// The next message within [`ANSWER_TIMEOUT`].
pub async fn next(inbox: &mut Inbox, waiting_for: &str) -> anyhow::Result<Received> {
    match tokio::time::timeout(ANSWER_TIMEOUT, inbox.recv()).await {
        Ok(Some(received)) => Ok(received),
        Ok(None) => bail!("all pipes closed while waiting for {waiting_for}"),
        Err(_) => bail!("no answer within {ANSWER_TIMEOUT:?} while waiting for {waiting_for}"),
    }
}

/// Sends a Hello on every workload and waits until all are accepted;
/// other messages (left over from an earlier run) are skipped.
pub async fn connect(workloads: &mut [Workload], inbox: &mut Inbox) -> anyhow::Result<()> {
    for w in workloads.iter_mut() {
        w.hello().await?;
    }
    let mut accepted = vec![false; workloads.len()];
    while accepted.contains(&false) {
        let waiting = workloads.iter().zip(&accepted).filter(|(_, a)| !**a).map(|(w, _)| w.name.as_str());
        let names = waiting.collect::<Vec<_>>().join(", ");
        let r = next(inbox, &format!("the agent to accept the Hello of {names} (is an agent serving it?)")).await?;
        match r.message {
            FromAnkaiosEnum::ControlInterfaceAccepted(_) => accepted[r.from] = true,
            FromAnkaiosEnum::ConnectionClosed(c) => {
                bail!("{}: connection closed: {}", workloads[r.from].name, c.reason)
            }
            FromAnkaiosEnum::Response(_) => {}
        }
    }
    Ok(())
}

/// A unique prefix for request ids, so answers to an earlier run that are
/// still in a pipe are not taken for this run's.
pub fn run_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    format!("bench{}-{nanos}", std::process::id())
}

#[cfg(test)]
mod tests {
    use ank_agent::control_interface::pipes::ControlInterface;
    use ank_agent::control_interface::session::route_response;
    use ank_common::messages::{Response, ResponseContent, ToServer};
    use ank_common::workload::{AccessRule, ControlInterfaceAccess, ReadWrite};

    use super::*;

    #[test]
    fn workload_name_is_taken_from_the_instance_folder() {
        assert_eq!(workload_name(Path::new("/run/agent_A_io/app.1a2b/control_interface")), "app");
        assert_eq!(workload_name(Path::new("/somewhere/else")), "else");
    }

    #[tokio::test]
    async fn a_workload_is_accepted_and_gets_responses_from_the_agents_control_interface() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("app.1a2b/control_interface");
        let rule = AccessRule::StateRule { operation: ReadWrite::Read, filter_masks: vec!["workloadStates".into()] };
        let access = ControlInterfaceAccess { allow_rules: vec![rule], deny_rules: vec![] };
        let (to_server, mut server) = mpsc::unbounded_channel();
        let reports = ank_agent::probes::self_report::SelfReports::default();
        let agent = ControlInterface::start("app", folder.clone(), access, to_server, reports).unwrap();

        let (tx, mut inbox) = mpsc::unbounded_channel();
        let mut workloads = [Workload::open(&folder, 0, tx).unwrap()];
        assert_eq!(workloads[0].name, "app");
        connect(&mut workloads, &mut inbox).await.unwrap();
        let content = pb::request::RequestContent::EventsCancelRequest(pb::EventsCancelRequest {});
        workloads[0].request("r1", content).await.unwrap();
        let Some(ToServer::Request(forwarded)) = server.recv().await else { panic!("nothing forwarded") };
        assert_eq!(forwarded.request_id, "app@r1");
        let answer = Response { request_id: forwarded.request_id, content: ResponseContent::EventsCancelAccepted };
        assert!(agent.deliver(route_response(&answer).unwrap().1));
        let r = next(&mut inbox, "the response").await.unwrap();
        let FromAnkaiosEnum::Response(response) = r.message else { panic!("{:?}", r.message) };
        assert_eq!((r.from, response.request_id.as_str()), (0, "r1"));
        agent.stop();
    }
}
