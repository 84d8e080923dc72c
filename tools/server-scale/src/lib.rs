//! `ank-server-scale` as a library: measures an `ank-server` with many
//! agents. The agents run in this process ([`fleet`]: the `ank_agent`
//! library on its in-memory FakeRuntime, over real insecure gRPC); the
//! server is a binary ([`server`]) whose CPU and memory are read from
//! `/proc` ([`procstat`]). [`measure`] runs the scenarios ([`phases`]) of
//! one size against one server; [`run`] runs all sizes and rounds for one
//! or two servers and writes the report ([`report`], [`svg`]).

pub mod commander;
pub mod error;
pub mod fleet;
pub mod manifest;
pub mod measure;
pub mod phases;
pub mod procstat;
pub mod report;
pub mod run;
pub mod sample;
pub mod server;
pub mod state_book;
pub mod subscriber;
pub mod svg;
