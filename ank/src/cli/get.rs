//! The arguments of `ank get ...` (re-exported by [`crate::cli`]): what
//! each `get` verb selects and the `-o` formats of its output.

use clap::{Args, Subcommand, ValueEnum};

/// `ank get ...`
#[derive(Debug, Subcommand)]
pub enum GetCommand {
    /// The complete state, optionally filtered by field masks
    State(GetStateArgs),
    /// The workloads and their execution states
    #[command(visible_alias = "workloads")]
    Workload(GetWorkloadsArgs),
    /// The connected agents
    #[command(visible_alias = "agents")]
    Agent(AgentsArgs),
    /// The names of the configs in the desired state
    #[command(visible_alias = "configs")]
    Config(TableOutputArgs),
    /// The events of workloads (`ank get events NAME...`), or follow the changes of the state selected by field masks until interrupted
    Events(GetEventsArgs),
    /// The workload groups and the state of each member
    #[command(visible_alias = "groups")]
    Group(TableOutputArgs),
    /// The apply jobs the server keeps: id, phase and reason
    Jobs(TableOutputArgs),
    /// One apply job: its workloads by class (succeeded, failed, inProgress, ready, waiting)
    Job(GetJobArgs),
}

/// Arguments of `ank get job`.
#[derive(Debug, Args)]
pub struct GetJobArgs {
    /// The job's id, as `ank apply` printed it
    #[arg(value_name = "ID")]
    pub id: u64,
    /// Print YAML or JSON instead of the table
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<OutputFormat>,
}

/// Arguments of `ank get events`.
#[derive(Debug, Clone, Args)]
pub struct GetEventsArgs {
    /// Output format. Following masks: YAML documents each starting with ---
    /// (default), or one JSON object per line. Workload events: a table
    /// (default), YAML or JSON
    #[arg(short = 'o', long = "output", value_enum)]
    pub output_format: Option<OutputFormat>,
    /// Print the state under the masks at subscription time first, then the events
    #[arg(short = 'c', long = "include-current-state")]
    pub include_current_state: bool,
    /// Workload names (prints their kept events and exits), or field masks
    /// selecting what to follow, e.g. workloadStates.agent_A
    #[arg(value_name = "WORKLOAD|MASK", add = crate::completers::masks())]
    pub masks: Vec<String>,
}

impl GetEventsArgs {
    /// The workload names, when every argument is one: a mask names a
    /// top-level part of the state or has a dot.
    pub fn workload_names(&self) -> Option<&[String]> {
        const TOP_LEVEL: [&str; 4] = ["desiredState", "workloadStates", "agents", "jobs"];
        let is_name = |a: &String| !a.contains('.') && !TOP_LEVEL.contains(&a.as_str()) && a != "*";
        (!self.masks.is_empty() && !self.include_current_state && self.masks.iter().all(is_name))
            .then_some(self.masks.as_slice())
    }
}

/// `-o` of the commands that print a table.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TableOutputArgs {
    /// Print YAML or JSON instead of the table
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<OutputFormat>,
}

/// Arguments of `ank get agents`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentsArgs {
    /// Print YAML or JSON instead of the table, or the wide table (with each agent's quota)
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<AgentsFormat>,
}

/// `-o` of `ank get agents`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentsFormat {
    Yaml,
    Json,
    /// The table with the extra columns
    Wide,
}

/// Output formats of `ank get state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Yaml,
    Json,
}

/// `-o` of `ank get workloads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadsOutput {
    Yaml,
    Json,
    /// Ankaios' columns and ours: READY, AVAILABLE, PRIORITY
    Wide,
}

impl WorkloadsOutput {
    /// The record format, `None` for a table.
    pub fn records(self) -> Option<OutputFormat> {
        match self {
            Self::Yaml => Some(OutputFormat::Yaml),
            Self::Json => Some(OutputFormat::Json),
            Self::Wide => None,
        }
    }
}

/// Arguments of `ank get state`.
#[derive(Debug, Args)]
pub struct GetStateArgs {
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Yaml)]
    pub output_format: OutputFormat,
    /// Also print what the server adds beyond Ankaios' complete state (jobs, agent capabilities, metrics and quotas, instance conditions, effective priorities); a mask naming such a field prints it too
    #[arg(long = "extensions")]
    pub extensions: bool,
    /// Field masks selecting parts of the state, e.g. desiredState.workloads.nginx
    #[arg(value_name = "MASK", add = crate::completers::masks())]
    pub masks: Vec<String>,
}

/// Arguments of `ank get workloads`.
#[derive(Debug, Args)]
pub struct GetWorkloadsArgs {
    /// Only workloads of this agent
    #[arg(short = 'a', long = "agent")]
    pub agent: Option<String>,
    /// Only workloads in this state, e.g. Running or "Pending(Initial)"
    #[arg(short = 's', long = "state")]
    pub state: Option<String>,
    /// Keep the table on screen and update it on every change
    #[arg(short = 'w', long = "watch")]
    pub watch: bool,
    /// wide: the table with the READY, AVAILABLE and PRIORITY columns; yaml or json: records instead of the table
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<WorkloadsOutput>,
    /// Print the specs as rendered for the agents (templates, group
    /// defaults, pipeline order, effective priority, ${seq:N} numbers), YAML unless -o json
    #[arg(long = "rendered", conflicts_with_all = ["watch", "state"])]
    pub rendered: bool,
    /// Only these workloads
    #[arg(value_name = "NAME", add = crate::completers::workloads())]
    pub names: Vec<String>,
}
