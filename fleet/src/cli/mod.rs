//! `ank-fleet`: the operator's command line. It talks only to the broker:
//! [`view`] reads the fleet from retained messages, [`waves`] plans a
//! rollout, [`rollout`] drives it, [`table`] prints.

pub mod rollout;
pub mod table;
pub mod view;
pub mod waves;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};

use self::rollout::{Outcome, count, drive, vehicle_progress};
use self::view::{Fleet, VehicleRow};
use crate::mqtt::TlsFiles;
use crate::payload::{PAYLOAD_VERSION, RolloutAction, RolloutControl, RolloutPhase, RolloutRecord, encode};
use crate::selector::Selector;
use crate::signing::{SigningKey, keygen};
use crate::topics::{Topics, check_id};

/// The fleet's command line: vehicles' status and staged rollouts, over the broker.
#[derive(Debug, Parser)]
#[command(name = "ank-fleet", version)]
pub struct FleetArgs {
    /// The broker: mqtts://HOST[:PORT] (TLS, port 8883) or mqtt://HOST[:PORT]
    #[arg(long, global = true, env = "ANK_FLEET_BROKER", default_value = "mqtts://localhost:8883")]
    pub broker: String,
    /// CA certificate (PEM) the broker's certificate is checked against
    #[arg(long, global = true, env = "ANK_FLEET_CA")]
    pub ca: Option<PathBuf>,
    /// The operator's client certificate (PEM)
    #[arg(long, global = true, env = "ANK_FLEET_CERT")]
    pub cert: Option<PathBuf>,
    /// The key of the client certificate (PEM)
    #[arg(long, global = true, env = "ANK_FLEET_KEY")]
    pub key: Option<PathBuf>,
    /// The first level of every topic
    #[arg(long, global = true, env = "ANK_FLEET_TOPIC_PREFIX", default_value = crate::topics::DEFAULT_PREFIX)]
    pub topic_prefix: String,
    /// Accept a plain mqtt:// broker (no TLS; tests only)
    #[arg(long, global = true, env = "ANK_FLEET_ALLOW_PLAINTEXT")]
    pub allow_plaintext: bool,
    /// The operator's Ed25519 key (PEM, from `ank-fleet keygen`) that signs
    /// every desired message a rollout publishes
    #[arg(long, global = true, env = "ANK_FLEET_SIGNING_KEY")]
    pub signing_key: Option<PathBuf>,
    /// Publish rollouts unsigned (only connectors run with --allow-unsigned apply them)
    #[arg(long, global = true, env = "ANK_FLEET_UNSIGNED", conflicts_with = "signing_key")]
    pub unsigned: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// A table of vehicles: rollout, Ready/Available, online, last seen
    Status {
        /// Only vehicles with these labels (k=v,k2=v2)
        #[arg(long, default_value = "")]
        selector: String,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Roll a manifest out wave by wave; or show, halt or resume a rollout
    Rollout(RolloutArgs),
    /// Make the operator's signing key pair (fleet-signing-key.pem, fleet-signing-pub.pem)
    Keygen {
        /// The folder to write the two files to (never overwritten)
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RolloutArgs {
    #[command(subcommand)]
    pub action: Option<RolloutCommand>,
    #[command(flatten)]
    pub start: StartArgs,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// The manifest to roll out
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    /// Only vehicles with these labels (k=v,k2=v2)
    #[arg(long, default_value = "")]
    pub selector: String,
    /// Cumulative shares of the selected vehicles per wave
    #[arg(long, default_value = "100%")]
    pub waves: String,
    /// How many vehicles may fail in all before the rollout halts: a count or a share
    #[arg(long, default_value = "0")]
    pub max_failures: String,
    /// How long each wave may take to become Ready
    #[arg(long, default_value = "5m", value_parser = ank_common::duration::parse_duration)]
    pub wave_timeout: Duration,
    /// The rollout's id [default: r-<time>-<random>]
    #[arg(long)]
    pub id: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// Where a rollout is: its phase, waves and each vehicle
    Status {
        id: String,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Halt a rollout: the process driving it stops before the next step
    Halt { id: String },
    /// Continue a halted rollout from the wave it stopped in
    Resume {
        id: String,
        /// How long each wave may take to become Ready [default: the rollout's]
        #[arg(long, value_parser = ank_common::duration::parse_duration)]
        wave_timeout: Option<Duration>,
    },
}

fn new_id() -> String {
    let secs = ank_common::daemon::clock::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    format!("r-{secs}-{:04x}", fastrand::u16(..))
}

/// How `ank-fleet` signs the desired messages it publishes.
#[derive(Debug)]
pub enum Signer {
    /// With the operator's key.
    Key(SigningKey),
    /// Not at all (`--unsigned`).
    Unsigned,
    /// No key given: publishing a rollout is refused.
    Missing,
}

impl Signer {
    fn of(args: &FleetArgs) -> anyhow::Result<Self> {
        Ok(match (&args.signing_key, args.unsigned) {
            (Some(path), _) => Signer::Key(SigningKey::from_pem_file(path).context("--signing-key")?),
            (None, true) => Signer::Unsigned,
            (None, false) => Signer::Missing,
        })
    }
}

/// Whether `command` publishes desired messages (and so needs a signer).
fn publishes_desired(command: &Command) -> bool {
    matches!(
        command,
        Command::Rollout(RolloutArgs { action: None, .. })
            | Command::Rollout(RolloutArgs { action: Some(RolloutCommand::Resume { .. }), .. })
    )
}

/// Runs one command; the exit code: 0 done, 1 halted or failed.
pub async fn run(args: FleetArgs) -> anyhow::Result<u8> {
    if let Command::Keygen { out } = &args.command {
        let (private, public) = keygen(out)?;
        println!("wrote {} (the operator's: keep it secret) and", private.display());
        println!("      {} (give it to every connector: --operator-key)", public.display());
        return Ok(0);
    }
    let signer = Signer::of(&args)?;
    if matches!(signer, Signer::Missing) && publishes_desired(&args.command) {
        anyhow::bail!(
            "a rollout is signed with the operator's key: pass --signing-key FILE (make one with `ank-fleet keygen`), \
             or --unsigned for connectors run with --allow-unsigned"
        );
    }
    let topics = Topics::parse(&args.topic_prefix).context("--topic-prefix")?;
    let files = TlsFiles { ca: args.ca.clone(), cert: args.cert.clone(), key: args.key.clone() };
    let mut fleet = Fleet::connect(&args.broker, &files, topics, args.allow_plaintext).await?;
    fleet.signer = signer;
    let code = match args.command {
        Command::Keygen { .. } => unreachable!("handled before connecting"),
        Command::Status { selector, output } => {
            let selector = Selector::parse(&selector)?;
            let rows: Vec<VehicleRow> = fleet
                .vehicles
                .iter()
                .filter(|(_, v)| selector.matches(&v.labels()))
                .map(|(n, v)| VehicleRow::of(n, v))
                .collect();
            match output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
                Output::Table => print!("{}", table::vehicles(&rows)),
            }
            0
        }
        Command::Rollout(RolloutArgs { action: None, start }) => start_rollout(&mut fleet, start).await?,
        Command::Rollout(RolloutArgs { action: Some(RolloutCommand::Status { id, output }), .. }) => {
            let record = load(&mut fleet, &id).await?;
            let vehicles = vehicle_progress(&record, &fleet);
            match output {
                Output::Json => {
                    let progress: serde_json::Map<String, serde_json::Value> = vehicles
                        .iter()
                        .map(|(v, (wave, p))| {
                            (v.clone(), serde_json::json!({"wave": wave, "progress": format!("{p:?}")}))
                        })
                        .collect();
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&serde_json::json!({"record": record, "vehicles": progress}))?
                    );
                }
                Output::Table => print!("{}", table::rollout(&record, &vehicles)),
            }
            0
        }
        Command::Rollout(RolloutArgs { action: Some(RolloutCommand::Halt { id }), .. }) => {
            let mut record = load(&mut fleet, &id).await?;
            let control = RolloutControl { version: PAYLOAD_VERSION, action: RolloutAction::Halt };
            fleet.publish(&fleet.topics.rollout_control(&id), encode(&control), true).await?;
            if record.phase == RolloutPhase::Progressing {
                record.phase = RolloutPhase::Halted;
                record.reason = "halted by the operator".to_owned();
                record.updated_at = crate::payload::now();
                fleet.publish(&fleet.topics.rollout(&id), encode(&record), true).await?;
            }
            println!("rollout {id} halted after {} of {} waves", record.waves_done, record.waves.len());
            0
        }
        Command::Rollout(RolloutArgs { action: Some(RolloutCommand::Resume { id, wave_timeout }), .. }) => {
            let mut record = load(&mut fleet, &id).await?;
            if record.phase == RolloutPhase::Succeeded {
                println!("rollout {id} has succeeded already");
                0
            } else {
                let control = RolloutControl { version: PAYLOAD_VERSION, action: RolloutAction::Resume };
                fleet.publish(&fleet.topics.rollout_control(&id), encode(&control), true).await?;
                if let Some(t) = wave_timeout {
                    record.wave_timeout_secs = t.as_secs().max(1);
                }
                println!("rollout {id} resumed at wave {}/{}", record.waves_done + 1, record.waves.len());
                outcome_code(drive(&mut fleet, &mut record).await?)
            }
        }
    };
    fleet.close().await;
    Ok(code)
}

fn outcome_code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Succeeded => 0,
        Outcome::Halted => 1,
    }
}

async fn load(fleet: &mut Fleet, id: &str) -> anyhow::Result<RolloutRecord> {
    check_id("rollout id", id)?;
    let (record, control) = (fleet.topics.rollout(id), fleet.topics.rollout_control(id));
    fleet.watch(&record).await?;
    fleet.watch(&control).await?;
    fleet.record(id).with_context(|| format!("rollout '{id}' not found on the broker"))
}

async fn start_rollout(fleet: &mut Fleet, start: StartArgs) -> anyhow::Result<u8> {
    let file = start.file.context("rollout needs -f FILE (or one of: status, halt, resume)")?;
    let manifest =
        std::fs::read_to_string(&file).with_context(|| format!("cannot read the manifest '{}'", file.display()))?;
    let id = start.id.unwrap_or_else(new_id);
    check_id("rollout id", &id).context("--id")?;
    let selector = Selector::parse(&start.selector)?;
    let shares = waves::parse_waves(&start.waves)?;
    let vehicles = fleet.select(&selector);
    if vehicles.is_empty() {
        anyhow::bail!("no vehicle matches the selector '{}'", selector.text());
    }
    fleet.watch(&fleet.topics.rollout(&id)).await?;
    if fleet.record(&id).is_some() {
        anyhow::bail!("rollout '{id}' exists already; use 'ank-fleet rollout resume {id}' or another --id");
    }
    let waves = waves::split(&vehicles, &shares);
    let now = crate::payload::now();
    let mut record = RolloutRecord {
        version: PAYLOAD_VERSION,
        id: id.clone(),
        manifest,
        selector: selector.text(),
        max_failures: waves::max_failures(&start.max_failures, vehicles.len())?,
        wave_timeout_secs: start.wave_timeout.as_secs().max(1),
        waves,
        waves_done: 0,
        phase: RolloutPhase::Progressing,
        reason: String::new(),
        failed: Default::default(),
        started_at: now.clone(),
        updated_at: now,
    };
    let sizes: Vec<String> = record.waves.iter().map(|w| w.len().to_string()).collect();
    println!(
        "rollout {id}: {} in {} ({}), at most {} may fail",
        count(vehicles.len(), "vehicle"),
        count(record.waves.len(), "wave"),
        sizes.join(", "),
        record.max_failures
    );
    Ok(outcome_code(drive(fleet, &mut record).await?))
}
