//! [`ControlInterfaces`]: the running control interfaces of this agent by
//! workload name. Control loops open one when they create (or resume) a
//! workload that has allow rules and close it when the workload is
//! deleted; the AgentManager hands it the server's responses whose request
//! ids carry a `<workload>@` prefix.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ank_common::WorkloadInstanceName;
use ank_common::messages::{Response, ToServer};
use ank_common::workload::ControlInterfaceAccess;
use tokio::sync::mpsc;

use super::fifo;
use super::pipes::{ControlInterface, ControlInterfaceHandle};
use super::session::route_response;
use crate::probes::self_report::SelfReports;

#[derive(Debug)]
struct Entry {
    handle: ControlInterfaceHandle,
    access: ControlInterfaceAccess,
}

/// Shared registry of the agent's control interfaces (cheap to clone).
#[derive(Debug, Clone)]
pub struct ControlInterfaces {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    to_server: mpsc::UnboundedSender<ToServer>,
    /// The health the workloads report themselves.
    self_reports: SelfReports,
}

impl ControlInterfaces {
    /// Requests of workloads go to `to_server`.
    pub fn new(to_server: mpsc::UnboundedSender<ToServer>) -> Self {
        Self { entries: Arc::default(), to_server, self_reports: SelfReports::default() }
    }

    /// The health the workloads reported themselves (`HealthReport`).
    pub fn self_reports(&self) -> SelfReports {
        self.self_reports.clone()
    }

    /// Opens (or keeps) the control interface of `instance` when `access`
    /// has allow rules; returns the folder to mount. A workload without
    /// allow rules gets none, and an old one is closed.
    // [impl->swdd~agent-create-control-interface-pipes-per-workload~1]
    pub fn open(
        &self,
        io_folder: &Path,
        instance: &WorkloadInstanceName,
        access: &ControlInterfaceAccess,
    ) -> std::io::Result<Option<PathBuf>> {
        self.open_for(io_folder, instance, access, false)
    }

    /// [`Self::open`], also without allow rules when `self_report`: a
    /// workload with a `selfReport` probe reports its health there (every
    /// other request is denied by its empty rules).
    pub fn open_for(
        &self,
        io_folder: &Path,
        instance: &WorkloadInstanceName,
        access: &ControlInterfaceAccess,
        self_report: bool,
    ) -> std::io::Result<Option<PathBuf>> {
        let name = instance.workload_name.clone();
        if access.allow_rules.is_empty() && !self_report {
            self.close(&name);
            return Ok(None);
        }
        ank_common::instance_name::check_id(&instance.id)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let folder = fifo::control_interface_folder(io_folder, instance);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = entries.get(&name)
            && e.handle.folder() == folder
            && &e.access == access
        {
            return Ok(Some(folder));
        }
        if let Some(old) = entries.remove(&name) {
            old.handle.stop();
            if old.handle.folder() != folder {
                fifo::remove_pipes(old.handle.folder());
            }
        }
        let handle = ControlInterface::start(
            &name,
            folder.clone(),
            access.clone(),
            self.to_server.clone(),
            self.self_reports.clone(),
        )?;
        entries.insert(name, Entry { handle, access: access.clone() });
        Ok(Some(folder))
    }

    /// Stops the control interface of a deleted workload and removes its pipes.
    pub fn close(&self, workload: &str) {
        self.self_reports.forget(workload);
        let removed = self.entries.lock().unwrap_or_else(|p| p.into_inner()).remove(workload);
        if let Some(e) = removed {
            e.handle.stop();
            fifo::remove_pipes(e.handle.folder());
        }
    }

    /// Delivers a response to the workload its id names; false if it is
    /// none of ours.
    pub fn deliver(&self, response: &Response) -> bool {
        let Some((workload, response)) = route_response(response) else { return false };
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(&workload) {
            Some(e) => {
                let id = response.request_id.clone();
                if !e.handle.deliver(response) {
                    tracing::warn!(
                        "workload '{workload}' is too far behind on its control interface; response '{id}' dropped"
                    );
                }
                true
            }
            None => {
                tracing::debug!("response for workload '{workload}', which has no control interface");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use ank_common::messages::RequestContent;
    use ank_common::workload::{AccessRule, ReadWrite};
    use ank_proto::ank_base as pb;
    use ank_proto::control_api::{self as ci, from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};
    use prost::Message;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::unix::pipe;

    use super::super::framing::{FrameDecoder, encode_frame};
    use super::*;

    fn access(mask: &str) -> ControlInterfaceAccess {
        let rule = AccessRule::StateRule { operation: ReadWrite::Read, filter_masks: vec![mask.into()] };
        ControlInterfaceAccess { allow_rules: vec![rule], deny_rules: vec![] }
    }

    async fn send(to_agent: &mut pipe::Sender, m: ToAnkaiosEnum) {
        let bytes = encode_frame(&ci::ToAnkaios { to_ankaios_enum: Some(m) }.encode_to_vec());
        to_agent.write_all(&bytes).await.unwrap();
    }

    fn subscribe(id: &str) -> ToAnkaiosEnum {
        ToAnkaiosEnum::Request(pb::Request {
            request_id: id.into(),
            request_content: Some(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
                field_mask: vec!["workloadStates".into()],
                subscribe_for_events: true,
            })),
        })
    }

    async fn next_forwarded(server: &mut mpsc::UnboundedReceiver<ToServer>) -> (String, RequestContent) {
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), server.recv()).await;
        let Ok(Some(ToServer::Request(r))) = next else { panic!("nothing forwarded") };
        (r.request_id, r.content)
    }

    #[tokio::test]
    // [utest->swdd~agent-create-control-interface-pipes-per-workload~1]
    async fn interfaces_are_kept_while_the_rules_stay_and_replaced_when_they_change() {
        let io = tempfile::tempdir().unwrap();
        let (to_server, mut server) = mpsc::unbounded_channel();
        let registry = ControlInterfaces::new(to_server);
        let instance = WorkloadInstanceName::parse("app.abc.agent_A").unwrap();
        let none = ControlInterfaceAccess::default();
        assert_eq!(registry.open(io.path(), &instance, &none).unwrap(), None, "no allow rules, no pipes");
        assert!(!io.path().join("app.abc").exists());

        let folder = registry.open(io.path(), &instance, &access("workloadStates")).unwrap().unwrap();
        let mut to_agent = pipe::OpenOptions::new().read_write(true).open_sender(fifo::output_pipe(&folder)).unwrap();
        let mut from_agent =
            pipe::OpenOptions::new().read_write(true).open_receiver(fifo::input_pipe(&folder)).unwrap();
        send(&mut to_agent, ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
        send(&mut to_agent, subscribe("s1")).await;
        assert_eq!(next_forwarded(&mut server).await.0, "app@s1");

        // Same rules (an update that changed something else): the same
        // session goes on, no new Hello needed.
        assert_eq!(registry.open(io.path(), &instance, &access("workloadStates")).unwrap(), Some(folder.clone()));
        send(&mut to_agent, subscribe("s2")).await;
        assert_eq!(next_forwarded(&mut server).await.0, "app@s2");

        // Changed rules: the old interface stops (its streams are
        // cancelled) and a new one awaits a Hello on the same pipes.
        registry.open(io.path(), &instance, &access("*")).unwrap();
        let mut cancelled = vec![next_forwarded(&mut server).await, next_forwarded(&mut server).await];
        cancelled.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            cancelled,
            vec![("app@s1".into(), RequestContent::EventsCancel), ("app@s2".into(), RequestContent::EventsCancel)]
        );
        send(&mut to_agent, subscribe("s3")).await;
        let mut decoder = FrameDecoder::default();
        let mut buf = vec![0u8; 4096];
        let closed = loop {
            if let Some(frame) = decoder.next_frame().unwrap() {
                match ci::FromAnkaios::decode(frame.as_slice()).unwrap().from_ankaios_enum {
                    Some(FromAnkaiosEnum::ConnectionClosed(c)) => break c.reason,
                    _ => continue,
                }
            }
            let n = from_agent.read(&mut buf).await.unwrap();
            decoder.push(&buf[..n]);
        };
        assert_eq!(closed, "Initial Hello missing!");

        // Deleting the workload removes its pipes.
        registry.close("app");
        assert!(!folder.exists());
    }

    // [test of feature H6: self-reported health]
    #[tokio::test]
    async fn a_self_report_workload_gets_pipes_without_rules_and_its_reports_are_recorded() {
        let io = tempfile::tempdir().unwrap();
        let registry = ControlInterfaces::new(mpsc::unbounded_channel().0);
        let instance = WorkloadInstanceName::parse("app.abc.agent_A").unwrap();
        let none = ControlInterfaceAccess::default();
        let folder = registry.open_for(io.path(), &instance, &none, true).unwrap().expect("pipes for selfReport");
        let mut to_agent = pipe::OpenOptions::new().read_write(true).open_sender(fifo::output_pipe(&folder)).unwrap();
        send(&mut to_agent, ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
        let report = ci::HealthReport { healthy: true, message: "up".into(), request_id: String::new() };
        send(&mut to_agent, ToAnkaiosEnum::HealthReport(report)).await;
        let reports = registry.self_reports();
        for _ in 0..100 {
            if reports.latest("app").is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(reports.latest("app").map(|r| (r.healthy, r.message)), Some((true, "up".into())));
        registry.close("app");
        assert_eq!(reports.latest("app"), None, "a deleted workload's reports go");
    }
}
