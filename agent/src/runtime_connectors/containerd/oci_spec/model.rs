//! The part of the OCI runtime spec (runtime-spec 1.0.2, `config.json`)
//! this agent writes, as serde types: the field names are the spec's, and
//! a misspelt one is a compile error rather than a field runc ignores.

use serde::Serialize;

/// `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    pub oci_version: String,
    pub process: Process,
    pub root: Root,
    pub hostname: String,
    pub mounts: Vec<Mount>,
    pub linux: Linux,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    pub terminal: bool,
    pub user: User,
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub cwd: String,
    pub capabilities: Capabilities,
    pub rlimits: Vec<Rlimit>,
    pub no_new_privileges: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub uid: u32,
    pub gid: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub additional_gids: Vec<u32>,
}

/// containerd sets no inheritable nor ambient capabilities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    pub bounding: Vec<String>,
    pub effective: Vec<String>,
    pub permitted: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rlimit {
    #[serde(rename = "type")]
    pub kind: String,
    pub hard: u64,
    pub soft: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Root {
    pub path: String,
    pub readonly: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mount {
    pub destination: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub source: String,
    pub options: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Linux {
    pub resources: Resources,
    pub cgroups_path: String,
    pub namespaces: Vec<Namespace>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub masked_paths: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readonly_paths: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resources {
    pub devices: Vec<DeviceRule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
}

/// A device cgroup rule; `None` fields mean "any".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceRule {
    pub allow: bool,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minor: Option<i64>,
    pub access: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Memory {
    pub limit: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cpu {
    pub quota: i64,
    pub period: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Namespace {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}
