//! The soul runtime, as kimi-cli runs it: the agent turn, the wire between the soul and its
//! UI (with the recorder), the context and its compaction, approvals and repeated calls.
//! Pure Rust like the rest of the core; the seams (model, tools, timers) are traits.

pub mod agent;
pub mod approval;
pub mod compaction;
pub mod context;
pub mod recovery;
pub mod repeat;
pub mod rules;
pub mod run;
pub mod wire;
