//! [`Containerd`]: one gRPC channel to containerd's socket and the calls
//! the connector makes, each in the agent's containerd namespace. The
//! channel connects lazily and reconnects by itself, so an agent starts
//! while containerd is down and its workloads' runtime comes back with it.

use std::path::{Path, PathBuf};

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::events_client::EventsClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::{MountsRequest, PrepareSnapshotRequest, RemoveSnapshotRequest};
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::version_client::VersionClient;
use containerd_client::services::v1::{
    Container, CreateContainerRequest, CreateTaskRequest, DeleteContainerRequest, DeleteTaskRequest,
    GetContainerRequest, GetRequest, KillRequest, ListContainersRequest, ListTasksRequest, PublishRequest,
    StartRequest, SubscribeRequest, WaitRequest,
};
use containerd_client::types::v1::Process;
use containerd_client::types::{Envelope, Mount};
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Code, Request, Status, Streaming};

/// containerd's default socket.
pub const DEFAULT_ADDRESS: &str = "/run/containerd/containerd.sock";

/// The runc v2 shim every container runs under (nerdctl's default).
pub const RUNC_V2: &str = "io.containerd.runc.v2";

/// The topic of the events the agent publishes to see its subscription answered.
pub const MARKER_TOPIC: &str = "/ankaios/subscribed";

/// The type of those events (they carry nothing).
const MARKER_TYPE: &str = "ankaios.io/Subscribed";

/// How long after a subscribe call the first marker is published.
const FIRST_MARKER: std::time::Duration = std::time::Duration::from_millis(2);

/// How often a marker is published again until the subscription answers.
const MARKER_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// How long a subscription may take to be answered.
pub const SUBSCRIBE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A containerd call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("containerd {call}: {message}")]
pub struct CallError {
    /// Which call (e.g. `Tasks.Create`).
    pub call: &'static str,
    /// The gRPC status code.
    pub code: CodeName,
    /// containerd's message.
    pub message: String,
}

/// A gRPC status code the connector tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeName {
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    Unavailable,
    Other,
}

impl CallError {
    fn of(call: &'static str, status: &Status) -> Self {
        let code = match status.code() {
            Code::NotFound => CodeName::NotFound,
            Code::AlreadyExists => CodeName::AlreadyExists,
            Code::FailedPrecondition => CodeName::FailedPrecondition,
            Code::Unavailable => CodeName::Unavailable,
            _ => CodeName::Other,
        };
        let message = if status.code() == Code::Unavailable {
            format!("containerd cannot be reached ({})", status.message())
        } else {
            status.message().to_owned()
        };
        Self { call, code, message }
    }

    /// Whether containerd says the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code == CodeName::NotFound
    }
}

/// A containerd connection in one namespace.
#[derive(Debug, Clone)]
pub struct Containerd {
    /// Made at the first call (inside the agent's tokio runtime), shared by clones.
    channel: std::sync::Arc<std::sync::OnceLock<Channel>>,
    namespace: String,
    address: PathBuf,
}

impl Containerd {
    /// A lazily connecting client of the socket `address` in `namespace`.
    pub fn new(address: &Path, namespace: &str) -> Self {
        Self { channel: Default::default(), namespace: namespace.to_owned(), address: address.to_path_buf() }
    }

    fn connect_lazily(address: &Path) -> Channel {
        let path = address.to_path_buf();
        // The URI is not used: every connection goes to the socket.
        let endpoint = Endpoint::from_static("http://[::]:50051");
        endpoint.connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
    }

    /// The namespace of this client.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The socket of this client.
    pub fn address(&self) -> &Path {
        &self.address
    }

    /// The gRPC channel (for the image service of [`super::image`]).
    pub fn channel(&self) -> Channel {
        self.channel.get_or_init(|| Self::connect_lazily(&self.address)).clone()
    }

    /// `msg` in this client's namespace.
    pub fn request<T>(&self, msg: T) -> Request<T> {
        let mut req = Request::new(msg);
        if let Ok(ns) = self.namespace.parse() {
            req.metadata_mut().insert("containerd-namespace", ns);
        }
        req
    }

    /// containerd's version (also: whether it answers).
    pub async fn version(&self) -> Result<String, CallError> {
        let resp = VersionClient::new(self.channel())
            .version(Request::new(()))
            .await
            .map_err(|s| CallError::of("Version", &s))?;
        Ok(resp.into_inner().version)
    }

    /// The containers matching `filter` (containerd's filter syntax; all
    /// of the namespace when empty).
    pub async fn containers(&self, filter: &str) -> Result<Vec<Container>, CallError> {
        let filters = if filter.is_empty() { Vec::new() } else { vec![filter.to_owned()] };
        let req = ListContainersRequest { filters };
        let resp = ContainersClient::new(self.channel())
            .list(self.request(req))
            .await
            .map_err(|s| CallError::of("Containers.List", &s))?;
        Ok(resp.into_inner().containers)
    }

    /// The container `id`, if it exists.
    pub async fn container(&self, id: &str) -> Result<Option<Container>, CallError> {
        let req = GetContainerRequest { id: id.to_owned() };
        match ContainersClient::new(self.channel()).get(self.request(req)).await {
            Ok(resp) => Ok(resp.into_inner().container),
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(CallError::of("Containers.Get", &s)),
        }
    }

    /// Creates the container record.
    pub async fn create_container(&self, container: Container) -> Result<(), CallError> {
        let req = CreateContainerRequest { container: Some(container) };
        ContainersClient::new(self.channel())
            .create(self.request(req))
            .await
            .map_err(|s| CallError::of("Containers.Create", &s))?;
        Ok(())
    }

    /// Deletes the container record; a missing one is a success.
    pub async fn delete_container(&self, id: &str) -> Result<(), CallError> {
        let req = DeleteContainerRequest { id: id.to_owned() };
        match ContainersClient::new(self.channel()).delete(self.request(req)).await {
            Ok(_) => Ok(()),
            Err(s) if s.code() == Code::NotFound => Ok(()),
            Err(s) => Err(CallError::of("Containers.Delete", &s)),
        }
    }

    /// Prepares the writable snapshot `key` on top of `parent`; returns its mounts.
    pub async fn prepare_snapshot(&self, snapshotter: &str, key: &str, parent: &str) -> Result<Vec<Mount>, CallError> {
        let req = PrepareSnapshotRequest {
            snapshotter: snapshotter.to_owned(),
            key: key.to_owned(),
            parent: parent.to_owned(),
            labels: Default::default(),
        };
        let resp = SnapshotsClient::new(self.channel())
            .prepare(self.request(req))
            .await
            .map_err(|s| CallError::of("Snapshots.Prepare", &s))?;
        Ok(resp.into_inner().mounts)
    }

    /// The mounts of the existing snapshot `key`.
    pub async fn snapshot_mounts(&self, snapshotter: &str, key: &str) -> Result<Vec<Mount>, CallError> {
        let req = MountsRequest { snapshotter: snapshotter.to_owned(), key: key.to_owned() };
        let resp = SnapshotsClient::new(self.channel())
            .mounts(self.request(req))
            .await
            .map_err(|s| CallError::of("Snapshots.Mounts", &s))?;
        Ok(resp.into_inner().mounts)
    }

    /// Removes the snapshot `key`; a missing one is a success.
    pub async fn remove_snapshot(&self, snapshotter: &str, key: &str) -> Result<(), CallError> {
        let req = RemoveSnapshotRequest { snapshotter: snapshotter.to_owned(), key: key.to_owned() };
        match SnapshotsClient::new(self.channel()).remove(self.request(req)).await {
            Ok(_) => Ok(()),
            Err(s) if s.code() == Code::NotFound => Ok(()),
            Err(s) => Err(CallError::of("Snapshots.Remove", &s)),
        }
    }

    /// Creates the task (runc creates the process, not yet started) of
    /// container `id` on `rootfs`, its output appended to the file `log`;
    /// returns the process id.
    pub async fn create_task(&self, id: &str, rootfs: Vec<Mount>, log: &Path) -> Result<u32, CallError> {
        let uri = format!("file://{}", log.display());
        let req = CreateTaskRequest {
            container_id: id.to_owned(),
            rootfs,
            stdout: uri.clone(),
            stderr: uri,
            ..Default::default()
        };
        let resp = TasksClient::new(self.channel())
            .create(self.request(req))
            .await
            .map_err(|s| CallError::of("Tasks.Create", &s))?;
        Ok(resp.into_inner().pid)
    }

    /// Starts the created task of container `id`.
    pub async fn start_task(&self, id: &str) -> Result<u32, CallError> {
        let req = StartRequest { container_id: id.to_owned(), exec_id: String::new() };
        let resp = TasksClient::new(self.channel())
            .start(self.request(req))
            .await
            .map_err(|s| CallError::of("Tasks.Start", &s))?;
        Ok(resp.into_inner().pid)
    }

    /// Sends `signal` to the task's process (all its processes with `all`).
    pub async fn kill_task(&self, id: &str, signal: u32, all: bool) -> Result<(), CallError> {
        let req = KillRequest { container_id: id.to_owned(), exec_id: String::new(), signal, all };
        TasksClient::new(self.channel()).kill(self.request(req)).await.map_err(|s| CallError::of("Tasks.Kill", &s))?;
        Ok(())
    }

    /// Waits until the task of container `id` exited; its exit status.
    pub async fn wait_task(&self, id: &str) -> Result<u32, CallError> {
        let req = WaitRequest { container_id: id.to_owned(), exec_id: String::new() };
        let resp = TasksClient::new(self.channel())
            .wait(self.request(req))
            .await
            .map_err(|s| CallError::of("Tasks.Wait", &s))?;
        Ok(resp.into_inner().exit_status)
    }

    /// Deletes the (exited) task of container `id`; a missing one is a success.
    pub async fn delete_task(&self, id: &str) -> Result<(), CallError> {
        let req = DeleteTaskRequest { container_id: id.to_owned() };
        match TasksClient::new(self.channel()).delete(self.request(req)).await {
            Ok(_) => Ok(()),
            Err(s) if s.code() == Code::NotFound => Ok(()),
            Err(s) => Err(CallError::of("Tasks.Delete", &s)),
        }
    }

    /// The task of container `id`, if it has one.
    pub async fn task(&self, id: &str) -> Result<Option<Process>, CallError> {
        let req = GetRequest { container_id: id.to_owned(), exec_id: String::new() };
        match TasksClient::new(self.channel()).get(self.request(req)).await {
            Ok(resp) => Ok(resp.into_inner().process),
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(CallError::of("Tasks.Get", &s)),
        }
    }

    /// All tasks of the namespace.
    pub async fn tasks(&self) -> Result<Vec<Process>, CallError> {
        let req = ListTasksRequest { filter: String::new() };
        let resp = TasksClient::new(self.channel())
            .list(self.request(req))
            .await
            .map_err(|s| CallError::of("Tasks.List", &s))?;
        Ok(resp.into_inner().tasks)
    }

    /// containerd's events matching `filters`, from now on. containerd
    /// answers a subscription only with its first event, so this publishes
    /// [`MARKER_TOPIC`] events (which `filters` should let through) until
    /// the answer came: when this returns, every later event is in the
    /// stream. Gives up after [`SUBSCRIBE_LIMIT`].
    pub async fn subscribe(&self, filters: Vec<String>) -> Result<Streaming<Envelope>, CallError> {
        let mut client = EventsClient::new(self.channel());
        let call = client.subscribe(Request::new(SubscribeRequest { filters }));
        let markers = async {
            // The first one right after the call went out (containerd
            // registers a subscriber within a millisecond or two), then
            // again until one is seen: the agent's start waits for this.
            tokio::time::sleep(FIRST_MARKER).await;
            loop {
                let _ = self.publish_marker().await;
                tokio::time::sleep(MARKER_EVERY).await;
            }
        };
        let answered = tokio::select! {
            r = tokio::time::timeout(SUBSCRIBE_LIMIT, call) => r,
            () = markers => unreachable!("markers are published until the call returns"),
        };
        match answered {
            Ok(Ok(resp)) => Ok(resp.into_inner()),
            Ok(Err(s)) => Err(CallError::of("Events.Subscribe", &s)),
            Err(_) => Err(CallError {
                call: "Events.Subscribe",
                code: CodeName::Unavailable,
                message: format!("containerd did not answer within {SUBSCRIBE_LIMIT:?}"),
            }),
        }
    }

    /// Publishes an empty [`MARKER_TOPIC`] event in this namespace.
    async fn publish_marker(&self) -> Result<(), CallError> {
        let event = prost_types::Any { type_url: MARKER_TYPE.to_owned(), value: Vec::new() };
        let req = PublishRequest { topic: MARKER_TOPIC.to_owned(), event: Some(event) };
        EventsClient::new(self.channel())
            .publish(self.request(req))
            .await
            .map_err(|s| CallError::of("Events.Publish", &s))?;
        Ok(())
    }
}
