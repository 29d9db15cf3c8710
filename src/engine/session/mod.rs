//! A chat session, sans-IO, the way quinn-proto's `Connection` is a connection: one owner of
//! every rule of a session — what is stored, in which order, what a client may be told and when,
//! what a death or a refused write leaves, and how the unfinished turn goes on — and no I/O.
//!
//! Inputs: a user message ([`Session::submit`]), a cancel ([`Session::cancel`]), the turn's
//! progress (the wire's recorder and the context's sink, installed by [`Session::attach`]), the
//! outcome of a storage write ([`Session::write_done`]), the end of the turn
//! ([`Session::turn_ended`]) and the time ([`Session::handle_timeout`]). Outputs, polled: the
//! writes to perform ([`Session::poll_write`]), the events a client may now be told
//! ([`Session::poll_event`]), what the host must do with its turn ([`Session::poll_stop`],
//! [`Session::poll_resume`]) and the next wake-up ([`Session::poll_timeout`]). The turn loop is the
//! one `soul::agent::Turn` runs; the host runs it and feeds its progress in. No clock is read
//! here: time is an input.
//!
//! # The store
//! A store keeps three things and applies each [`Write`] whole or not at all (an adapter that
//! cannot — two files — applies the ops in order: the last, [`Op::Meta`], is the commit record,
//! and [`Session::open`] takes back whatever a torn write left past it):
//! - the context's lines (kimi-cli's `context.jsonl`);
//! - events: `(id, kind, data)`, the running turn's recording (`kind` `wire`, `data` a
//!   `wire.jsonl` record line) and each turn's end (`kind` `end`, `data` a [`TurnOutcome`]);
//! - the meta: one JSON value.
//!
//! # The rules
//! - **Write before tell.** An event is told to a client only once the write that holds it is
//!   committed; a tool starts only once its call is (the wire's gate, see `Wire::stored`).
//! - **Event ids** increase by one and never repeat: the last id given is in the commit record.
//! - **The context is written with its round or not at all.** A write is what the turn did in
//!   one synchronous stretch; a round's lines are one stretch, so the committed context is always
//!   at a round's edge.
//! - **A refused write is a death without the funeral**: the turn in memory is dropped (the host
//!   drops its future: nothing of it is recorded after), and the turn is closed from what was
//!   committed, as after a death: a call that may have run is answered as interrupted. The
//!   session is usable again as soon as the store takes writes; until then it says so.
//! - **A cancel is acknowledged once it is stored**: a turn cancelled before its runtime died
//!   ends cancelled when the session is opened again, and nothing of it runs again.
//! - **What a death leaves is decided from the recording** (`soul::recovery`), never by running
//!   a handler again to find out.
//! - **A wait on a person costs nothing**: no wake-up while only an approval is awaited; a turn
//!   that makes no progress for [`SessionLimits::stall_ms`] otherwise is stopped.
//! - **The limits** (message bytes, session bytes, turns) are checked before anything counts.
//! - `approve_for_session` is the session's: kept in the meta, across turns and deaths.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use futures::FutureExt;
use serde_json::Value;

use crate::engine::soul::agent::{TurnError, UserInput};
use crate::engine::soul::context::{Context, ContextWrite, SharedContext};
use crate::engine::soul::recovery::{RecordedTurn, RecoveryBudget, RecoveryStop};
use crate::engine::soul::wire::{read_wire_record, ApprovalResponse, Recorder, Wire, WireMessage};

#[cfg(feature = "planted-bugs")]
pub mod planted;

/// The caps a session enforces, and its times.
#[derive(Clone, Debug)]
pub struct SessionLimits {
    /// One user message, in bytes of UTF-8.
    pub max_message_bytes: usize,
    /// The whole context, in bytes of its lines.
    pub max_session_bytes: usize,
    pub max_turns: u32,
    /// Resumes in a row that make no progress before the turn is given up.
    pub max_resumes: u32,
    /// A turn that records nothing for this long (ms), while no person is awaited, is stopped.
    pub stall_ms: f64,
    /// How soon a host that can die without notice (a Durable Object) looks again at a running
    /// turn that is not waiting on a person (ms).
    pub watch_ms: f64,
    /// How soon a refused write is tried again (ms).
    pub retry_ms: f64,
    /// While a turn runs, what the model wrote so far is recorded (and so told) at least this
    /// often (ms); merged in between.
    pub flush_ms: f64,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_message_bytes: 1 << 20,
            max_session_bytes: 16 << 20,
            max_turns: 200,
            max_resumes: crate::engine::soul::recovery::DEFAULT_MAX_RESUMES,
            stall_ms: 300_000.0,
            watch_ms: 5_000.0,
            retry_ms: 1_000.0,
            flush_ms: 50.0,
        }
    }
}

/// How a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Cancelled,
    Failed,
    NotRecovered,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutcomeError {
    pub name: String,
    pub message: String,
}

/// A turn's end, as clients are told it (`{"outcome": …, "error"?: {name, message}}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnOutcome {
    pub outcome: Outcome,
    pub error: Option<OutcomeError>,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Cancelled => "cancelled",
            Outcome::Failed => "failed",
            Outcome::NotRecovered => "not_recovered",
        }
    }
}

/// A JSON string (the text of `s`, quoted and escaped).
fn quoted(s: &str) -> String {
    Value::from(s).to_string()
}

impl TurnOutcome {
    pub fn done() -> TurnOutcome {
        TurnOutcome { outcome: Outcome::Done, error: None }
    }
    pub fn cancelled() -> TurnOutcome {
        TurnOutcome { outcome: Outcome::Cancelled, error: None }
    }
    pub fn failed(name: &str, message: &str) -> TurnOutcome {
        TurnOutcome {
            outcome: Outcome::Failed,
            error: Some(OutcomeError { name: name.to_owned(), message: message.to_owned() }),
        }
    }

    /// The outcome of a turn that returned `result`; `seam` names and words a seam's own error
    /// (a provider's: its class and message).
    pub fn of<E>(result: &Result<(), TurnError<E>>, seam: impl Fn(&E) -> (String, String)) -> TurnOutcome {
        match result {
            Ok(()) => TurnOutcome::done(),
            Err(TurnError::Cancelled) => TurnOutcome::cancelled(),
            Err(TurnError::NotRecovered(_)) => TurnOutcome {
                outcome: Outcome::NotRecovered,
                error: result
                    .as_ref()
                    .err()
                    .and_then(TurnError::runtime_error)
                    .map(|(n, m)| OutcomeError { name: n.to_owned(), message: m }),
            },
            Err(TurnError::Seam(e)) => {
                let (n, m) = seam(e);
                TurnOutcome::failed(&n, &m)
            }
            Err(TurnError::ContextStore) => TurnOutcome::failed(STORAGE_ERROR, "the session's store refused a write"),
            Err(e) => match e.runtime_error() {
                Some((n, m)) => TurnOutcome::failed(n, &m),
                None => TurnOutcome::failed("Error", "the turn failed"),
            },
        }
    }

    /// Written by hand (as the meta is): a derived serializer and reader cost the .wasm more
    /// than these few lines.
    pub fn to_json(&self) -> String {
        match &self.error {
            None => format!("{{\"outcome\":\"{}\"}}", self.outcome.as_str()),
            Some(e) => format!(
                "{{\"outcome\":\"{}\",\"error\":{{\"name\":{},\"message\":{}}}}}",
                self.outcome.as_str(),
                quoted(&e.name),
                quoted(&e.message)
            ),
        }
    }

    pub fn from_json(text: &str) -> Option<TurnOutcome> {
        let v: Value = serde_json::from_str(text).ok()?;
        let outcome = match v.get("outcome")?.as_str()? {
            "done" => Outcome::Done,
            "cancelled" => Outcome::Cancelled,
            "failed" => Outcome::Failed,
            "not_recovered" => Outcome::NotRecovered,
            _ => return None,
        };
        let error = v.get("error").map(|e| OutcomeError {
            name: e.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            message: e.get("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
        });
        Some(TurnOutcome { outcome, error })
    }
}

/// The error name of a turn stopped by its store.
pub const STORAGE_ERROR: &str = "SessionStorageError";
/// The error name of a turn stopped because it would pass a session's limit.
pub const LIMIT_ERROR: &str = "SessionLimitError";
/// The error name of a turn stopped because it made no progress.
pub const STALLED: &str = "TurnStalledError";

/// What kind of event a stored event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A wire message: `data` is its `wire.jsonl` record line.
    Wire,
    /// A turn's end: `data` is its [`TurnOutcome`].
    End,
}

/// An event of the session: stored, then told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub id: u64,
    pub kind: EventKind,
    pub data: String,
}

/// One operation of a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Event(Event),
    /// Drop the events whose id is below this (a turn older than the last two).
    TrimEvents {
        before: u64,
    },
    /// Drop the events whose id is above this (a torn write's).
    TruncateEvents {
        after: u64,
    },
    /// Append a context line.
    Context(String),
    /// Keep the first `keep` context lines (`0`: clear it; the lines that follow replace it).
    TruncateContext {
        keep: usize,
    },
    /// Append a line to sub-agent `agent`'s context.
    AgentContext {
        agent: String,
        line: String,
    },
    /// Keep the first `keep` lines of sub-agent `agent`'s context (`0`: clear it).
    TruncateAgentContext {
        agent: String,
        keep: usize,
    },
    /// The session's meta: always the last op of a write, its commit record.
    Meta(String),
}

/// A write to perform whole, then report with [`Session::write_done`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub seq: u64,
    pub ops: Vec<Op>,
}

/// What a store held when the session was opened.
#[derive(Clone, Debug, Default)]
pub struct Stored {
    pub context: Vec<String>,
    pub events: Vec<Event>,
    pub meta: Option<String>,
    /// Sub-agents' contexts, by agent id (`None`: a store that keeps none; a sub-agent cannot run
    /// in its session).
    pub agents: Option<Vec<(String, Vec<String>)>>,
}

/// A sub-agent instance of the session, as the commit record keeps it.
#[derive(Clone, Debug, PartialEq)]
struct AgentMeta {
    id: String,
    /// Its type: the tool that made it.
    kind: String,
    lines: usize,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct TurnMeta {
    /// The turn's number in the session (1-based).
    n: u32,
    first_id: u64,
    running: bool,
    cancel: bool,
    /// The context's lines when the turn began: what it is taken back to when it would pass the
    /// session's size cap (`None` in a record written before this was kept).
    ctx0: Option<usize>,
}

/// The commit record: `{"v":1,"last_id","context_lines","turns","turn"?:{n,first_id,running,
/// cancel,ctx0?},"approved_for_session":[…]}`.
#[derive(Clone, Debug, Default, PartialEq)]
struct Meta {
    v: u32,
    last_id: u64,
    context_lines: usize,
    turns: u32,
    turn: Option<TurnMeta>,
    approved_for_session: Vec<String>,
    agents: Vec<AgentMeta>,
}

impl Meta {
    fn to_json(&self) -> String {
        let turn = match &self.turn {
            None => String::new(),
            Some(t) => format!(
                ",\"turn\":{{\"n\":{},\"first_id\":{},\"running\":{},\"cancel\":{}{}}}",
                t.n,
                t.first_id,
                t.running,
                t.cancel,
                t.ctx0.map_or(String::new(), |c| format!(",\"ctx0\":{c}"))
            ),
        };
        let approved: Vec<String> = self.approved_for_session.iter().map(|a| quoted(a)).collect();
        let agents: Vec<String> = self
            .agents
            .iter()
            .map(|a| format!("{{\"id\":{},\"type\":{},\"lines\":{}}}", quoted(&a.id), quoted(&a.kind), a.lines))
            .collect();
        let agents = if agents.is_empty() { String::new() } else { format!(",\"agents\":[{}]", agents.join(",")) };
        format!(
            "{{\"v\":{},\"last_id\":{},\"context_lines\":{},\"turns\":{}{turn},\"approved_for_session\":[{}]{agents}}}",
            self.v,
            self.last_id,
            self.context_lines,
            self.turns,
            approved.join(",")
        )
    }

    /// `None` for a record that is not one (the session then starts from nothing stored).
    fn from_json(text: &str) -> Option<Meta> {
        let v: Value = serde_json::from_str(text).ok()?;
        let n = |o: &Value, k: &str| o.get(k).and_then(Value::as_u64);
        let turn = match v.get("turn") {
            Some(t) if t.is_object() => Some(TurnMeta {
                n: n(t, "n")? as u32,
                first_id: n(t, "first_id")?,
                running: t.get("running")?.as_bool()?,
                cancel: t.get("cancel").and_then(Value::as_bool).unwrap_or(false),
                ctx0: n(t, "ctx0").map(|c| c as usize),
            }),
            _ => None,
        };
        Some(Meta {
            v: n(&v, "v").unwrap_or(1) as u32,
            last_id: n(&v, "last_id")?,
            context_lines: n(&v, "context_lines")? as usize,
            turns: n(&v, "turns")? as u32,
            turn,
            approved_for_session: v
                .get("approved_for_session")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default(),
            agents: v
                .get("agents")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|a| {
                            Some(AgentMeta {
                                id: a.get("id")?.as_str()?.to_owned(),
                                kind: a.get("type")?.as_str()?.to_owned(),
                                lines: n(a, "lines")? as usize,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

/// Why a message was refused before anything counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// A turn runs (or is being closed, or a write is being tried again).
    Busy(String),
    Empty,
    MessageTooLarge {
        bytes: usize,
        max: usize,
    },
    SessionTooLarge {
        max: usize,
    },
    TooManyTurns {
        max: u32,
    },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Busy(why) => f.write_str(why),
            Refused::Empty => f.write_str("the message is empty"),
            Refused::MessageTooLarge { bytes, max } => {
                write!(f, "the message is {bytes} bytes, over the session's limit of {max} (maxMessageBytes)")
            }
            Refused::SessionTooLarge { max } => {
                write!(f, "the session would exceed {max} bytes (maxSessionBytes); start a new one")
            }
            Refused::TooManyTurns { max } => write!(f, "this session has had its {max} turns; start a new one"),
        }
    }
}

/// What the host must do with the turn it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Resolve the turn's cancel: it closes what is open and ends (a stored cancel, or a stall).
    Cancel,
    /// Drop the turn's future now (a write was refused): nothing more of it is recorded; the
    /// session closes the turn from what was stored ([`Session::poll_resume`]).
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StopWhy {
    Cancel,
    Stalled,
    Storage,
}

struct State {
    /// The store keeps sub-agents' contexts (its `open` gave `agents`).
    keeps_agents: bool,
    /// Each sub-agent's committed context lines, by agent id.
    agents: Vec<(String, Vec<String>)>,
    limits: SessionLimits,
    now_ms: f64,
    // What the store holds (committed).
    lines: Vec<String>,
    line_bytes: usize,
    /// The context's bytes once the queued writes commit (the session's size cap is on this).
    work_bytes: usize,
    /// The context's bytes at the live turn's take-back point (`ctx0`), when known in this life.
    base_bytes: Option<usize>,
    /// The live turn wrote a line that would pass the session's size cap: its lines were taken
    /// back and it is stopping (its end says why).
    over_cap: bool,
    events: Vec<Event>,
    meta: Meta,
    // What it will hold once the queued writes commit.
    work: Meta,
    /// What a torn write left that is to be taken back: first in every write until one commits.
    repair: Vec<Op>,
    pending: Vec<Op>,
    in_flight: Option<(Write, Meta, u64)>,
    next_seq: u64,
    /// Ops queued since the session opened, and how many of them are committed.
    queued: u64,
    committed: u64,
    /// Gates of tool calls waiting for their call to be stored: `(queued mark, answer)`.
    waiters: Vec<(u64, oneshot::Sender<bool>)>,
    untold: VecDeque<Event>,
    /// The live turn: its generation (what the recorder and sink of a dropped turn carry, so
    /// their late writes are ignored).
    live: Option<u64>,
    generation: u64,
    stop: Option<StopWhy>,
    stop_told: bool,
    /// A cancel was asked and its write has not committed yet / it has and nobody was told.
    cancel_asked: bool,
    cancel_acked: bool,
    /// A turn to close or resume from its recording (after open, or after a refused write).
    resume: Option<RecordedTurn>,
    /// A write was refused: the next try is due at this time.
    retry_at: Option<f64>,
    /// The store's refusals in a row.
    refusals: u32,
    /// The turn being closed was stopped by a refused write (its end says so).
    closing_for_storage: bool,
    /// A turn dropped by a refused write before anything of it was stored: no end will be
    /// stored for it, so its end is told as it is (once, without an id).
    unstored_end: Option<TurnOutcome>,
    /// A turn was submitted and has recorded nothing yet: its meta waits to be stored with its
    /// first event (a turn stored without its `TurnBegin` could not be read back).
    fresh_turn: bool,
    last_progress_ms: f64,
    /// Approval requests recorded in this turn and not answered: (request id, action).
    waiting: Vec<(String, String)>,
    asked: Vec<(String, String)>,
    /// When the live turn's wire was last flushed, and whether it is due now (the host flushes
    /// it: the session holds no wire, so nothing of a dead turn is kept alive through it).
    flushed_at: f64,
    flush_due: bool,
    /// The wake-up the host was last told ([`Session::poll_wake`]); `None`: none is needed.
    wake_told: Option<f64>,
    /// Told (after the state is released) whenever an input may have made work to poll: a
    /// host that waits for work (a JS pump on the microtask queue) wakes on it.
    notify: Option<Rc<dyn Fn()>>,
    /// The host was told and has not polled since: telling it again is no news.
    notified: bool,
    #[cfg(feature = "planted-bugs")]
    bug: Option<planted::Bug>,
}

/// A session: a shared handle (the recorder, the sink and the gate hold it too).
#[derive(Clone)]
pub struct Session(Rc<RefCell<State>>);

impl Session {
    /// Opens a session over what a store held. A write cut short (anything past the commit
    /// record) is taken back first; a turn the meta says is running is the unfinished turn of a
    /// runtime that died: [`Session::poll_resume`] gives it (cancelled, if a cancel was stored).
    pub fn open(stored: Stored, limits: SessionLimits, now_ms: f64) -> Session {
        Session::open_with(stored, limits, now_ms, None)
    }

    #[cfg(feature = "planted-bugs")]
    pub fn open_planted(stored: Stored, limits: SessionLimits, now_ms: f64, bug: Option<planted::Bug>) -> Session {
        Session::open_with(stored, limits, now_ms, bug)
    }

    fn open_with(stored: Stored, limits: SessionLimits, now_ms: f64, _bug: Option<Bug>) -> Session {
        let Stored { mut context, mut events, meta, agents } = stored;
        let meta: Meta = match meta.as_deref() {
            None => Meta { v: 1, ..Meta::default() },
            Some(m) => Meta::from_json(m).unwrap_or_else(|| {
                // A record that cannot be read (edited by hand): nothing stored is taken back
                // on its word; the session goes on from what is there, with no turn running.
                Meta {
                    v: 1,
                    last_id: events.iter().map(|e| e.id).max().unwrap_or(0),
                    context_lines: context.len(),
                    turns: events.iter().filter(|e| e.kind == EventKind::End).count() as u32,
                    ..Meta::default()
                }
            }),
        };
        let mut repair = Vec::new();
        // Past the commit record: a torn write. Nobody was told of it; it is taken back.
        if events.iter().any(|e| e.id > meta.last_id) {
            events.retain(|e| e.id <= meta.last_id);
            repair.push(Op::TruncateEvents { after: meta.last_id });
        }
        let short = context.len() < meta.context_lines;
        if context.len() > meta.context_lines {
            context.truncate(meta.context_lines);
            repair.push(Op::TruncateContext { keep: meta.context_lines });
        }
        // Each sub-agent's context, as its commit record counts it: lines past the count are a
        // torn write's (taken back); an instance with fewer lines than it committed is lost (not
        // resumed on a shorter context).
        let keeps_agents = agents.is_some();
        let mut meta = meta;
        let mut agent_lines = Vec::new();
        for (id, mut lines) in agents.unwrap_or_default() {
            match meta.agents.iter().find(|a| a.id == id).map(|a| a.lines) {
                Some(n) if lines.len() >= n => {
                    if lines.len() > n {
                        lines.truncate(n);
                        repair.push(Op::TruncateAgentContext { agent: id.clone(), keep: n });
                    }
                    agent_lines.push((id, lines));
                }
                // Lost committed lines: left as they are, and not resumed.
                Some(_) => {}
                // Never committed (a torn write made it): taken back.
                None if !lines.is_empty() => repair.push(Op::TruncateAgentContext { agent: id, keep: 0 }),
                None => {}
            }
        }
        meta.agents.retain(|a| a.lines == 0 || agent_lines.iter().any(|(id, _)| *id == a.id));
        let line_bytes = context.iter().map(|l| l.len() + 1).sum();
        let mut st = State {
            keeps_agents,
            agents: agent_lines,
            limits,
            now_ms,
            lines: context,
            line_bytes,
            work_bytes: line_bytes,
            base_bytes: None,
            over_cap: false,
            events,
            meta: meta.clone(),
            work: meta,
            repair,
            pending: Vec::new(),
            in_flight: None,
            next_seq: 1,
            queued: 0,
            committed: 0,
            waiters: Vec::new(),
            untold: VecDeque::new(),
            live: None,
            generation: 0,
            stop: None,
            stop_told: false,
            cancel_asked: false,
            cancel_acked: false,
            resume: None,
            retry_at: None,
            refusals: 0,
            closing_for_storage: false,
            unstored_end: None,
            fresh_turn: false,
            last_progress_ms: now_ms,
            waiting: Vec::new(),
            asked: Vec::new(),
            flushed_at: now_ms,
            flush_due: false,
            wake_told: None,
            notify: None,
            notified: false,
            #[cfg(feature = "planted-bugs")]
            bug: _bug,
        };
        #[cfg(feature = "planted-bugs")]
        planted::plant(st.bug);
        #[cfg(feature = "planted-bugs")]
        if st.bug == Some(planted::Bug::IdFromEventCount) {
            st.work.last_id = st.events.len() as u64;
        }
        if st.meta.turn.as_ref().is_some_and(|t| t.running) {
            if short {
                // The store lost lines it had committed: the recording cannot be matched to it.
                st.end_turn(TurnOutcome {
                    outcome: Outcome::NotRecovered,
                    error: Some(OutcomeError {
                        name: "TurnNotRecovered".into(),
                        message: "The turn could not go on after its runtime stopped: the store holds fewer \
                                  context lines than it committed."
                            .into(),
                    }),
                });
            } else {
                st.plan_recovery();
            }
        }
        Session(Rc::new(RefCell::new(st)))
    }

    /// What to call when an input may have made work to poll (never while the session is
    /// borrowed: it may poll at once).
    pub fn set_notify(&self, notify: Option<Rc<dyn Fn()>>) {
        self.0.borrow_mut().notify = notify;
    }

    fn wake(&self) {
        let notify = {
            let mut st = self.0.borrow_mut();
            if st.notified {
                return;
            }
            st.notified = st.notify.is_some();
            st.notify.clone()
        };
        if let Some(n) = notify {
            n();
        }
    }

    /// A turn is to be resumed or closed from the store ([`Session::poll_resume`] gives it once
    /// the store is repaired).
    pub fn has_resume(&self) -> bool {
        self.0.borrow().resume.is_some()
    }

    /// The session's context as stored (a turn runs on a copy of it).
    pub fn context(&self) -> Context {
        Context::from_jsonl(&self.0.borrow().lines.join("\n")).0
    }

    /// Actions approved for the whole session (`approve_for_session`), across turns and deaths.
    pub fn approved_for_session(&self) -> Vec<String> {
        self.0.borrow().work.approved_for_session.clone()
    }

    /// A turn runs, or is to be resumed or closed.
    pub fn running(&self) -> bool {
        self.0.borrow().work.turn.as_ref().is_some_and(|t| t.running)
    }

    /// No turn runs and every event queued is stored and told: a client following the session
    /// has nothing more to wait for.
    pub fn settled(&self) -> bool {
        let st = self.0.borrow();
        !st.work.turn.as_ref().is_some_and(|t| t.running) && st.work.last_id == st.meta.last_id && st.untold.is_empty()
    }

    pub fn turns(&self) -> u32 {
        self.0.borrow().work.turns
    }

    /// The id of the last event stored or queued.
    pub fn last_event_id(&self) -> u64 {
        self.0.borrow().work.last_id
    }

    /// The events stored after `after`: the rest of the turn a client saw part of, then the
    /// next. (What is told later comes through [`Session::poll_event`].)
    pub fn events_after(&self, after: u64) -> Vec<Event> {
        let st = self.0.borrow();
        let from = st.events.partition_point(|e| e.id <= after);
        st.events[from..].to_vec()
    }

    /// The id before the first event of the running (or last) turn: where a client that joins
    /// the turn from its start reads from.
    pub fn turn_start(&self) -> u64 {
        self.0.borrow().work.turn.as_ref().map_or(0, |t| t.first_id.saturating_sub(1))
    }

    /// Starts a turn on `input`: refused (and nothing counted) when a turn runs or a limit
    /// would be passed. The host then runs `Turn::run` on a context from [`Session::context`],
    /// attached with [`Session::attach`].
    pub fn submit(&self, input: &UserInput, now_ms: f64) -> Result<(), Refused> {
        let r = self.submit_inner(input, now_ms);
        self.wake();
        r
    }

    fn submit_inner(&self, input: &UserInput, now_ms: f64) -> Result<(), Refused> {
        let mut st = self.0.borrow_mut();
        st.now_ms = now_ms;
        if st.work.turn.as_ref().is_some_and(|t| t.running) || st.resume.is_some() {
            return Err(Refused::Busy("a turn is already running in this session".into()));
        }
        if st.retry_at.is_some() {
            return Err(Refused::Busy("the session's store refused a write; it is tried again".into()));
        }
        let bytes = match input {
            UserInput::Text(t) => {
                if t.trim().is_empty() {
                    return Err(Refused::Empty);
                }
                t.len()
            }
            UserInput::Parts(p) => {
                if p.is_empty() {
                    return Err(Refused::Empty);
                }
                serde_json::to_string(p).map_or(usize::MAX, |s| s.len())
            }
        };
        let max = st.limits.max_message_bytes;
        if bytes > max {
            return Err(Refused::MessageTooLarge { bytes, max });
        }
        if st.line_bytes.saturating_add(bytes) > st.limits.max_session_bytes {
            return Err(Refused::SessionTooLarge { max: st.limits.max_session_bytes });
        }
        if st.work.turns >= st.limits.max_turns {
            return Err(Refused::TooManyTurns { max: st.limits.max_turns });
        }
        // The turn before the last makes way; the last stays, so a client that saw part of it
        // and comes back gets its rest before the new turn.
        let keep_from = st.work.turn.as_ref().map_or(0, |t| t.first_id);
        if st.events.first().is_some_and(|e| e.id < keep_from) {
            st.queue(Op::TrimEvents { before: keep_from });
        }
        st.work.turns += 1;
        let first_id = st.work.last_id + 1;
        let ctx0 = Some(st.work.context_lines);
        st.base_bytes = Some(st.work_bytes);
        st.work.turn = Some(TurnMeta { n: st.work.turns, first_id, running: true, cancel: false, ctx0 });
        st.fresh_turn = true;
        st.begin_live();
        Ok(())
    }

    /// Installs the session on a turn's wire and context: every merged message is recorded as an
    /// event, every context change as a line, and a tool waits for its call to be stored.
    /// Call once per turn (a new one or a resumed one), after [`Session::submit`] or
    /// [`Session::poll_resume`].
    pub fn attach(&self, wire: &Wire, context: &SharedContext) {
        let generation = {
            let mut st = self.0.borrow_mut();
            st.flushed_at = st.now_ms;
            st.generation
        };
        let (s1, s2, s3, s4) = (self.clone(), self.clone(), self.clone(), self.clone());
        wire.set_recorder(Recorder::typed(
            Box::new(move |m: &WireMessage, line: String| s1.record(generation, m, line)),
            Box::new(move || s2.0.borrow().now_ms / 1000.0),
        ));
        wire.set_gate(Rc::new(move || s3.gate(generation)));
        context.set_sink(Some(Box::new(move |w: ContextWrite<'_>| s4.context_write(generation, w))));
    }

    /// The turn this host ran ended with `outcome` (its wire shut down first, so everything it
    /// published is recorded). The end is stored, then told.
    pub fn turn_ended(&self, outcome: TurnOutcome) {
        self.turn_ended_inner(outcome);
        self.wake();
    }

    fn turn_ended_inner(&self, outcome: TurnOutcome) {
        let mut st = self.0.borrow_mut();
        if st.live.is_none() || st.stop == Some(StopWhy::Storage) {
            return; // a dropped turn: the session closes it from the store
        }
        let cancel_asked = st.work.turn.as_ref().is_some_and(|t| t.cancel);
        let storage = std::mem::take(&mut st.closing_for_storage);
        let over_cap = std::mem::take(&mut st.over_cap);
        let outcome = match st.stop {
            // A cancel asked wins over an end that came at the same moment.
            _ if cancel_asked => TurnOutcome::cancelled(),
            _ if over_cap => TurnOutcome::failed(
                LIMIT_ERROR,
                &format!(
                    "the session would exceed {} bytes (maxSessionBytes); the turn was taken back",
                    st.limits.max_session_bytes
                ),
            ),
            _ if storage => TurnOutcome::failed(
                STORAGE_ERROR,
                "The session's store refused a write; the turn was closed from what was stored.",
            ),
            Some(StopWhy::Cancel) => TurnOutcome::cancelled(),
            Some(StopWhy::Stalled) => TurnOutcome::failed(
                STALLED,
                &format!(
                    "The turn made no progress for {} ms and was stopped.",
                    crate::engine::json::number_text(st.limits.stall_ms)
                ),
            ),
            _ => outcome,
        };
        st.end_turn(outcome);
    }

    /// Asks the running turn to stop. `false` when no turn runs. The cancel is stored first:
    /// [`Session::poll_cancel_stored`] says when it is (then acknowledge it), and the turn is
    /// stopped ([`Stop::Cancel`]).
    pub fn cancel(&self) -> bool {
        let r = self.cancel_inner();
        self.wake();
        r
    }

    fn cancel_inner(&self) -> bool {
        let mut st = self.0.borrow_mut();
        let Some(t) = st.work.turn.as_mut() else { return false };
        if !t.running {
            return false;
        }
        if t.cancel {
            return true;
        }
        t.cancel = true;
        st.cancel_asked = true;
        #[cfg(feature = "planted-bugs")]
        if st.bug == Some(planted::Bug::CancelAckedBeforeStored) {
            st.cancel_acked = true;
        }
        if st.resume.is_some() {
            // Not resumed yet: it will be closed as cancelled.
            if let Some(r) = st.resume.as_mut() {
                r.stop = Some(RecoveryStop::Cancelled);
            }
        }
        true
    }

    /// `true` once when the live turn's wire is to be flushed now (`Wire::flush`): what the model
    /// wrote so far is recorded, stored and told.
    pub fn poll_flush(&self) -> bool {
        std::mem::take(&mut self.0.borrow_mut().flush_due)
    }

    /// `true` once (per cancel) when the cancel asked is stored: acknowledge it now.
    /// The end of a turn a refused write dropped before anything of it was stored (told once,
    /// without an id: a client that comes back finds nothing of that turn).
    pub fn poll_unstored_end(&self) -> Option<TurnOutcome> {
        self.0.borrow_mut().unstored_end.take()
    }

    pub fn poll_cancel_stored(&self) -> bool {
        std::mem::take(&mut self.0.borrow_mut().cancel_acked)
    }

    /// The next write to perform (one at a time: the next comes after this one's outcome).
    pub fn poll_write(&self) -> Option<Write> {
        let mut st = self.0.borrow_mut();
        // The host polls: the next news is news again.
        st.notified = false;
        if st.in_flight.is_some() || st.retry_at.is_some() {
            return None;
        }
        if st.fresh_turn || (st.pending.is_empty() && st.repair.is_empty() && st.work == st.meta) {
            return None;
        }
        let mut ops = st.repair.clone();
        ops.append(&mut st.pending);
        let meta = st.work.clone();
        ops.push(Op::Meta(meta.to_json()));
        let seq = st.next_seq;
        st.next_seq += 1;
        let write = Write { seq, ops };
        let mark = st.queued;
        st.in_flight = Some((write.clone(), meta, mark));
        Some(write)
    }

    /// The outcome of write `seq`: `true` when it committed whole, `false` when the store refused
    /// it (none of it applied).
    pub fn write_done(&self, seq: u64, ok: bool, now_ms: f64) {
        let mut st = self.0.borrow_mut();
        st.now_ms = now_ms;
        let Some((write, meta, mark)) = st.in_flight.take() else { return };
        if write.seq != seq {
            st.in_flight = Some((write, meta, mark));
            return;
        }
        if ok {
            st.apply(write, meta, mark);
        } else {
            st.refused();
        }
    }

    /// The next event a client may be told (its write is committed), in id order.
    pub fn poll_event(&self) -> Option<Event> {
        self.0.borrow_mut().untold.pop_front()
    }

    /// What the host must do with the turn it runs, once.
    pub fn poll_stop(&self) -> Option<Stop> {
        let mut st = self.0.borrow_mut();
        if st.stop_told || st.live.is_none() {
            return None;
        }
        let stop = match st.stop? {
            StopWhy::Cancel | StopWhy::Stalled => Stop::Cancel,
            StopWhy::Storage => Stop::Drop,
        };
        st.stop_told = true;
        Some(stop)
    }

    /// A turn to resume (or close, per its `stop`) from the store: the unfinished turn found at
    /// open, or the turn a refused write stopped. The host runs `Turn::resume` with it and the
    /// budget, attached with [`Session::attach`], and reports the end with
    /// [`Session::turn_ended`].
    pub fn poll_resume(&self) -> Option<(RecordedTurn, RecoveryBudget)> {
        let mut st = self.0.borrow_mut();
        if st.in_flight.is_some() || !st.pending.is_empty() || !st.repair.is_empty() || st.retry_at.is_some() {
            return None; // the repair of the store first
        }
        let r = st.resume.take()?;
        st.begin_live();
        // A recovered request waits again without being published again.
        st.waiting = r
            .approvals
            .iter()
            .filter(|a| a.answer.is_none())
            .map(|a| (a.request_id.clone(), a.action.clone()))
            .collect();
        st.asked = r.approvals.iter().map(|a| (a.request_id.clone(), a.action.clone())).collect();
        // A sub-agent's question waits again with its call (or is closed at once, which the
        // recording then says).
        for m in r.subagents.iter().flat_map(|s| &s.messages) {
            // (A record holds the caller's requests as a recording read back does: `Other`.)
            let (id, action) = match m {
                WireMessage::Other { kind, payload } if kind == "ApprovalRequest" => {
                    let text = |k: &str| payload.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                    (text("id"), text("action"))
                }
                _ => continue,
            };
            if r.subagent_asked.iter().any(|(a, _)| *a == id) {
                st.waiting.push((id.clone(), action.clone()));
            }
            st.asked.push((id, action));
        }
        Some((r, RecoveryBudget { max_resumes: st.limits.max_resumes }))
    }

    /// When the host should call [`Session::handle_timeout`] next, if ever.
    pub fn poll_timeout(&self) -> Option<f64> {
        let st = self.0.borrow();
        if let Some(at) = st.retry_at {
            return Some(at);
        }
        if st.live.is_some() && st.stop.is_none() && st.waiting.is_empty() {
            let stall = st.last_progress_ms + st.limits.stall_ms;
            return Some(stall.min(st.flushed_at + st.limits.flush_ms));
        }
        None
    }

    /// What a host that can die without notice (a Durable Object's alarm) is to be told of its
    /// wake-up now, if anything: `Some(Some(at))` look at the session again by `at` (while a turn
    /// runs that waits on no person), `Some(None)` no wake-up is needed, `None` nothing new. A
    /// wake-up told is told again only once less than half of the lead is left before it (so a
    /// live host's never comes, and a busy turn does not tell it at every poll); "none" is told
    /// once after a wake-up was.
    pub fn poll_wake(&self) -> Option<Option<f64>> {
        let mut st = self.0.borrow_mut();
        let running = st.work.turn.as_ref().is_some_and(|t| t.running);
        let now = st.now_ms;
        let want = (running && st.waiting.is_empty()).then(|| now + st.limits.watch_ms.max(1.0));
        match (want, st.wake_told) {
            (None, None) => None,
            (Some(at), Some(told)) if at - told < (at - now) / 2.0 => None,
            (want, _) => {
                st.wake_told = want;
                Some(want)
            }
        }
    }

    pub fn handle_timeout(&self, now_ms: f64) {
        self.handle_timeout_inner(now_ms);
        self.wake();
    }

    fn handle_timeout_inner(&self, now_ms: f64) {
        let mut st = self.0.borrow_mut();
        // What the model wrote so far is to be recorded: the host flushes its turn's wire.
        if st.live.is_some() && now_ms >= st.flushed_at + st.limits.flush_ms {
            st.flushed_at = now_ms;
            st.flush_due = true;
        }
        st.now_ms = now_ms;
        if st.retry_at.is_some_and(|at| now_ms >= at) {
            st.retry_at = None;
            st.after_refusal();
        }
        if st.live.is_some()
            && st.stop.is_none()
            && st.waiting.is_empty()
            && now_ms >= st.last_progress_ms + st.limits.stall_ms
        {
            st.stop = Some(StopWhy::Stalled);
        }
    }

    /// Sets the time (every input takes it; this is for a host that has nothing else to say).
    pub fn set_now(&self, now_ms: f64) {
        self.0.borrow_mut().now_ms = now_ms;
    }

    fn record(&self, generation: u64, m: &WireMessage, line: String) {
        self.record_inner(generation, m, line);
        self.wake();
    }

    fn record_inner(&self, generation: u64, m: &WireMessage, line: String) {
        let mut st = self.0.borrow_mut();
        if st.live != Some(generation) || st.stop == Some(StopWhy::Storage) {
            return;
        }
        st.last_progress_ms = st.now_ms;
        match m {
            WireMessage::ApprovalRequest(r) => {
                st.waiting.push((r.id.clone(), r.action.clone()));
                st.asked.push((r.id.clone(), r.action.clone()));
            }
            WireMessage::ApprovalResponse { request_id, response, .. } => {
                st.waiting.retain(|(id, _)| id != request_id);
                if *response == ApprovalResponse::ApproveForSession {
                    if let Some((_, action)) = st.asked.iter().find(|(id, _)| id == request_id).cloned() {
                        if !st.work.approved_for_session.contains(&action) {
                            st.work.approved_for_session.push(action);
                        }
                    }
                }
            }
            _ => {}
        }
        st.event(EventKind::Wire, line);
    }

    fn context_write(&self, generation: u64, w: ContextWrite<'_>) -> bool {
        let r = self.context_write_inner(generation, w);
        self.wake();
        r
    }

    fn context_write_inner(&self, generation: u64, w: ContextWrite<'_>) -> bool {
        let mut st = self.0.borrow_mut();
        if st.live != Some(generation) || st.stop == Some(StopWhy::Storage) {
            return false;
        }
        match w {
            ContextWrite::Line(l) => {
                if st.over_cap {
                    return false;
                }
                if st.work_bytes.saturating_add(l.len() + 1) > st.limits.max_session_bytes {
                    st.take_back_turn();
                    return false;
                }
                st.work_bytes += l.len() + 1;
                st.work.context_lines += 1;
                st.queue(Op::Context(l.to_owned()));
            }
            ContextWrite::Rewrite(all) => {
                st.work.context_lines = 0;
                st.work_bytes = 0;
                st.queue(Op::TruncateContext { keep: 0 });
                for l in all.lines().filter(|l| !l.is_empty()) {
                    st.work.context_lines += 1;
                    st.work_bytes += l.len() + 1;
                    st.queue(Op::Context(l.to_owned()));
                }
                // The history before the turn is gone (compacted): the rewritten history, a
                // whole conversation, is where a take-back goes back to now.
                let (lines, bytes) = (st.work.context_lines, st.work_bytes);
                if let Some(t) = st.work.turn.as_mut().filter(|t| t.ctx0.is_some()) {
                    t.ctx0 = Some(lines);
                    st.base_bytes = Some(bytes);
                }
            }
        }
        true
    }

    /// The store keeps sub-agents' contexts: a sub-agent can run in this session.
    pub fn keeps_agents(&self) -> bool {
        self.0.borrow().keeps_agents
    }

    /// Sub-agent `id`'s type and context, as stored (`None`: no such instance was stored).
    pub fn agent(&self, id: &str) -> Option<(String, Context)> {
        let st = self.0.borrow();
        let kind = st.meta.agents.iter().find(|a| a.id == id)?.kind.clone();
        let lines = st.agents.iter().find(|(a, _)| a == id).map_or(String::new(), |(_, l)| l.join("\n"));
        Some((kind, Context::from_jsonl(&lines).0))
    }

    /// Installs the session on sub-agent `id`'s context (of type `kind`) for the live turn: each
    /// change is stored with the write of the stretch that made it (a sub-agent's round and its
    /// events, which reach the turn's recording, are one write). `false` when the store keeps
    /// no sub-agents' contexts.
    pub fn attach_agent(&self, id: &str, kind: &str, context: &SharedContext) -> bool {
        let generation = {
            let mut st = self.0.borrow_mut();
            if !st.keeps_agents {
                return false;
            }
            if !st.work.agents.iter().any(|a| a.id == id) {
                st.work.agents.push(AgentMeta { id: id.to_owned(), kind: kind.to_owned(), lines: 0 });
            }
            st.generation
        };
        let (s, id) = (self.clone(), id.to_owned());
        context.set_sink(Some(Box::new(move |w: ContextWrite<'_>| {
            let r = s.agent_write(generation, &id, w);
            s.wake();
            r
        })));
        true
    }

    fn agent_write(&self, generation: u64, id: &str, w: ContextWrite<'_>) -> bool {
        let mut st = self.0.borrow_mut();
        if st.live != Some(generation) || st.stop == Some(StopWhy::Storage) {
            return false;
        }
        let Some(i) = st.work.agents.iter().position(|a| a.id == id) else { return false };
        let agent = || id.to_owned();
        match w {
            ContextWrite::Line(l) => {
                st.work.agents[i].lines += 1;
                st.queue(Op::AgentContext { agent: agent(), line: l.to_owned() });
            }
            ContextWrite::Rewrite(all) => {
                st.work.agents[i].lines = 0;
                st.queue(Op::TruncateAgentContext { agent: agent(), keep: 0 });
                for l in all.lines().filter(|l| !l.is_empty()) {
                    st.work.agents[i].lines += 1;
                    st.queue(Op::AgentContext { agent: agent(), line: l.to_owned() });
                }
            }
        }
        true
    }

    fn gate(&self, generation: u64) -> LocalBoxFuture<'static, bool> {
        let mut st = self.0.borrow_mut();
        #[cfg(feature = "planted-bugs")]
        if st.bug == Some(planted::Bug::ToolBeforeStored) {
            return futures::future::ready(true).boxed_local();
        }
        if st.live != Some(generation) || st.stop == Some(StopWhy::Storage) {
            return futures::future::ready(false).boxed_local();
        }
        let need = st.queued;
        if st.committed >= need {
            return futures::future::ready(true).boxed_local();
        }
        let (tx, rx) = oneshot::channel();
        st.waiters.push((need, tx));
        rx.map(|r| r.unwrap_or(false)).boxed_local()
    }
}

#[cfg(not(feature = "planted-bugs"))]
type Bug = ();
#[cfg(feature = "planted-bugs")]
use planted::Bug;

impl State {
    fn queue(&mut self, op: Op) {
        self.queued += 1;
        self.pending.push(op);
    }

    fn event(&mut self, kind: EventKind, data: String) {
        self.fresh_turn = false;
        self.work.last_id += 1;
        let id = self.work.last_id;
        self.queue(Op::Event(Event { id, kind, data }));
    }

    fn begin_live(&mut self) {
        self.flush_due = false;
        self.over_cap = false;
        self.generation += 1;
        self.live = Some(self.generation);
        self.stop = None;
        self.stop_told = false;
        self.waiting.clear();
        self.asked.clear();
        self.last_progress_ms = self.now_ms;
    }

    /// The live turn wrote a line that would take the context past the session's size cap: the
    /// lines it wrote are taken back (the history is as before it; its recording keeps what it
    /// did) and the line is refused, which stops it.
    fn take_back_turn(&mut self) {
        self.over_cap = true;
        let Some(keep) = self.work.turn.as_ref().and_then(|t| t.ctx0) else { return };
        if keep < self.work.context_lines {
            self.queue(Op::TruncateContext { keep });
            self.work.context_lines = keep;
            if let Some(b) = self.base_bytes {
                self.work_bytes = b;
            } else if keep <= self.lines.len() {
                self.work_bytes = self.lines[..keep].iter().map(|l| l.len() + 1).sum();
            }
        }
    }

    /// The turn's end: stored (with the turn marked ended), then told.
    fn end_turn(&mut self, outcome: TurnOutcome) {
        self.live = None;
        self.flush_due = false;
        self.waiting.clear();
        if let Some(t) = self.work.turn.as_mut() {
            t.running = false;
        }
        // A cancel asked and not stored yet is stored with the end: acknowledge it then.
        self.event(EventKind::End, outcome.to_json());
    }

    fn apply(&mut self, write: Write, meta: Meta, mark: u64) {
        self.refusals = 0;
        self.repair.clear();
        for op in write.ops {
            match op {
                Op::Event(e) => {
                    self.untold.push_back(e.clone());
                    self.events.push(e);
                }
                Op::TrimEvents { before } => self.events.retain(|e| e.id >= before),
                Op::TruncateEvents { after } => self.events.retain(|e| e.id <= after),
                Op::Context(l) => {
                    self.line_bytes += l.len() + 1;
                    self.lines.push(l);
                }
                Op::TruncateContext { keep } => {
                    self.lines.truncate(keep);
                    self.line_bytes = self.lines.iter().map(|l| l.len() + 1).sum();
                }
                Op::AgentContext { agent, line } => match self.agents.iter_mut().find(|(id, _)| *id == agent) {
                    Some((_, lines)) => lines.push(line),
                    None => self.agents.push((agent, vec![line])),
                },
                Op::TruncateAgentContext { agent, keep } => {
                    if let Some((_, lines)) = self.agents.iter_mut().find(|(id, _)| *id == agent) {
                        lines.truncate(keep);
                    }
                }
                Op::Meta(_) => {}
            }
        }
        if self.cancel_asked && meta.turn.as_ref().is_some_and(|t| t.cancel || !t.running) {
            self.cancel_asked = false;
            self.cancel_acked = true;
            if self.live.is_some() && self.stop.is_none() {
                self.stop = Some(StopWhy::Cancel);
            }
        }
        self.meta = meta;
        self.committed = mark;
        let committed = self.committed;
        let (ready, wait): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.waiters).into_iter().partition(|(need, _)| *need <= committed);
        self.waiters = wait;
        for (_, tx) in ready {
            let _ = tx.send(true);
        }
    }

    /// A write was refused: nothing of it, nor of what was queued after it, is stored. A live
    /// turn is dropped; the session goes on from what the store holds.
    fn refused(&mut self) {
        self.refusals += 1;
        self.fresh_turn = false;
        self.pending.clear();
        self.work = self.meta.clone();
        self.work_bytes = self.line_bytes;
        self.queued = self.committed;
        for (_, tx) in self.waiters.drain(..) {
            let _ = tx.send(false);
        }
        if self.cancel_asked {
            // Not stored, so not acknowledged: it is stored with the turn's closing.
            if let Some(t) = self.work.turn.as_mut() {
                t.cancel = true;
            }
        }
        if self.live.is_some() {
            self.stop = Some(StopWhy::Storage);
            // The store holds nothing of the running turn (its first write was refused): nothing
            // will close it from the store, and no end of it will be stored.
            if !self.meta.turn.as_ref().is_some_and(|t| t.running) {
                self.unstored_end = Some(TurnOutcome::failed(
                    STORAGE_ERROR,
                    "the session's store refused a write before the turn was stored",
                ));
            }
        }
        self.retry_at = Some(self.now_ms + self.limits.retry_ms);
    }

    /// After a refusal, once its wait is over: the turn the store says is running is closed from
    /// what it holds (given up: nothing runs again), and the session is usable once that is
    /// stored.
    fn after_refusal(&mut self) {
        self.live = None;
        self.stop = None;
        self.waiting.clear();
        if self.meta.turn.as_ref().is_some_and(|t| t.running) {
            self.plan_recovery();
            if let Some(r) = self.resume.as_mut() {
                if r.stop.is_none() {
                    r.stop = Some(RecoveryStop::GiveUp("the session's store refused a write".into()));
                    self.closing_for_storage = true;
                }
            }
        }
    }

    /// The unfinished turn, from the committed recording: resumed, or closed (a stored cancel),
    /// or ended at once (its `TurnEnd` is recorded: it ended and its end was not).
    fn plan_recovery(&mut self) {
        let Some(turn) = self.work.turn.clone() else { return };
        let lines: Vec<&str> = self
            .events
            .iter()
            .filter(|e| e.id >= turn.first_id && e.kind == EventKind::Wire)
            .map(|e| e.data.as_str())
            .collect();
        let messages = read_wire_record(&lines.join("\n"));
        match RecordedTurn::read(&messages) {
            Ok(mut r) => {
                if turn.cancel {
                    r.stop = Some(RecoveryStop::Cancelled);
                }
                // Its approvals for the session are the commit record's.
                r.knows_session_approvals = true;
                #[cfg(feature = "planted-bugs")]
                if self.bug == Some(planted::Bug::AskFirstForgotten) {
                    r.knows_session_approvals = false;
                }
                self.resume = Some(r);
            }
            Err(crate::engine::soul::recovery::RecoveryError::Finished) => {
                #[cfg(feature = "planted-bugs")]
                if self.bug == Some(planted::Bug::ResultTwiceAfterEnd) {
                    planted::close_again(self, &messages);
                }
                let failing = messages
                    .iter()
                    .rev()
                    .take_while(|m| m.kind() != "StepBegin")
                    .any(|m| m.kind() == "StepInterrupted");
                let outcome = if turn.cancel {
                    TurnOutcome::cancelled()
                } else if failing {
                    TurnOutcome::failed("TurnInterrupted", "the runtime stopped as the turn ended with an error")
                } else {
                    TurnOutcome::done()
                };
                self.end_turn(outcome);
            }
            Err(e) => {
                self.end_turn(TurnOutcome {
                    outcome: Outcome::NotRecovered,
                    error: Some(OutcomeError { name: "TurnNotRecovered".into(), message: e.to_string() }),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_record_and_the_outcome_read_back_as_written() {
        let meta = Meta {
            v: 1,
            last_id: 42,
            context_lines: 7,
            turns: 3,
            turn: Some(TurnMeta { n: 3, first_id: 30, running: true, cancel: true, ctx0: Some(5) }),
            approved_for_session: vec!["pay \"it\"".into(), "é\u{2028}".into()],
            agents: vec![AgentMeta { id: "a1b2c3d4".into(), kind: "re\"searcher".into(), lines: 3 }],
        };
        assert_eq!(Meta::from_json(&meta.to_json()), Some(meta.clone()));
        let none = Meta { turn: None, approved_for_session: Vec::new(), ..meta };
        assert_eq!(Meta::from_json(&none.to_json()), Some(none));
        assert_eq!(Meta::from_json("{\"v\":1}"), None, "a record without its counts is not one");
        for o in [
            TurnOutcome::done(),
            TurnOutcome::cancelled(),
            TurnOutcome::failed(STORAGE_ERROR, "a \"quoted\"\nline"),
            TurnOutcome { outcome: Outcome::NotRecovered, error: None },
        ] {
            let text = o.to_json();
            assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
            assert_eq!(TurnOutcome::from_json(&text), Some(o));
        }
    }

    /// The host's wake-up: told when a turn starts, not again at every poll, again once less than
    /// half of the lead is left, "none" once when the turn ends, and nothing while idle.
    #[test]
    fn a_wake_up_is_told_when_it_is_news() {
        let limits = SessionLimits { watch_ms: 1_000.0, ..SessionLimits::default() };
        let s = Session::open(Stored::default(), limits, 0.0);
        assert_eq!(s.poll_wake(), None, "idle: nothing to tell");
        s.submit(&UserInput::Text("hi".into()), 0.0).expect("a turn");
        assert_eq!(s.poll_wake(), Some(Some(1_000.0)), "a turn runs: look again by then");
        assert_eq!(s.poll_wake(), None, "told already");
        s.handle_timeout(400.0);
        assert_eq!(s.poll_wake(), None, "1,000 is still more than half a lead (500) away from 400");
        s.handle_timeout(500.0);
        assert_eq!(s.poll_wake(), Some(Some(1_500.0)), "half the lead is left: told again");
        assert_eq!(s.poll_wake(), None);
        s.turn_ended(TurnOutcome::done());
        assert_eq!(s.poll_wake(), Some(None), "the turn ended: no wake-up needed");
        assert_eq!(s.poll_wake(), None, "told once");
    }

    #[test]
    fn an_unreadable_commit_record_takes_nothing_back() {
        let stored = Stored {
            context: vec!["{\"role\":\"user\",\"content\":\"hi\"}".into()],
            events: vec![Event { id: 1, kind: EventKind::Wire, data: "{}".into() }],
            meta: Some("{damaged".into()),
            agents: None,
        };
        let s = Session::open(stored, SessionLimits::default(), 0.0);
        assert_eq!(s.poll_write(), None, "no take-back write");
        assert_eq!(s.events_after(0).len(), 1);
        assert_eq!(s.last_event_id(), 1, "ids go on after what is there");
        assert_eq!(s.context().history().len(), 1);
        assert!(!s.running());
    }

    #[test]
    fn a_store_that_lost_committed_context_lines_is_refused_whole_never_resumed_on_a_shorter_history() {
        // The commit record says 3 context lines and a running turn; the store gives back 2 (a
        // context one step behind its recording): the recording is not matched to it.
        let turn = TurnMeta { n: 1, first_id: 1, running: true, cancel: false, ctx0: Some(0) };
        let meta = Meta { v: 1, last_id: 2, context_lines: 3, turns: 1, turn: Some(turn), ..Meta::default() };
        let wire = |t: &str| {
            format!(
                "{{\"timestamp\":1,\"message\":{{\"type\":\"{t}\",\"payload\":{{\"n\":1,\"user_input\":\"go\"}}}}}}"
            )
        };
        let stored = Stored {
            context: vec![
                "{\"role\":\"user\",\"content\":\"go\"}".into(),
                "{\"role\":\"_checkpoint\",\"id\":0}".into(),
            ],
            events: vec![
                Event { id: 1, kind: EventKind::Wire, data: wire("TurnBegin") },
                Event { id: 2, kind: EventKind::Wire, data: wire("StepBegin") },
            ],
            meta: Some(meta.to_json()),
            agents: None,
        };
        let s = Session::open(stored, SessionLimits::default(), 0.0);
        assert!(!s.has_resume(), "nothing is resumed");
        let w = s.poll_write().expect("the turn's end is written");
        let end = w.ops.iter().find_map(|o| match o {
            Op::Event(e) if e.kind == EventKind::End => TurnOutcome::from_json(&e.data),
            _ => None,
        });
        let end = end.expect("an end event");
        assert_eq!(end.outcome, Outcome::NotRecovered);
        assert!(end.error.as_ref().is_some_and(|e| e.message.contains("fewer context lines")), "{end:?}");
        assert!(
            !w.ops.iter().any(|o| matches!(o, Op::Context(_) | Op::TruncateContext { .. })),
            "the history is left as it is"
        );
        s.write_done(w.seq, true, 0.0);
        assert!(!s.running());
        assert_eq!(s.context().history().len(), 1);
    }

    #[test]
    fn a_sub_agents_lines_past_its_commit_are_taken_back_and_one_that_lost_lines_is_not_resumed() {
        let line = |t: &str| format!("{{\"role\":\"user\",\"content\":\"{t}\"}}");
        let agents = vec![
            AgentMeta { id: "a1".into(), kind: "helper".into(), lines: 1 },
            AgentMeta { id: "a2".into(), kind: "helper".into(), lines: 2 },
        ];
        let meta = Meta { v: 1, agents, ..Meta::default() };
        let stored = Stored {
            meta: Some(meta.to_json()),
            agents: Some(vec![
                ("a1".into(), vec![line("kept"), line("torn")]),
                ("a2".into(), vec![line("only one of two")]),
                ("a3".into(), vec![line("never committed")]),
            ]),
            ..Stored::default()
        };
        let s = Session::open(stored, SessionLimits::default(), 0.0);
        let w = s.poll_write().expect("the take-back");
        assert_eq!(
            w.ops[..2],
            [
                Op::TruncateAgentContext { agent: "a1".into(), keep: 1 },
                Op::TruncateAgentContext { agent: "a3".into(), keep: 0 },
            ]
        );
        s.write_done(w.seq, true, 0.0);
        let (kind, ctx) = s.agent("a1").expect("a1 goes on");
        assert_eq!(kind, "helper");
        assert_eq!(ctx.history().len(), 1, "its committed line only");
        assert!(s.agent("a2").is_none(), "a context shorter than its commit is not resumed");
        assert!(s.agent("a3").is_none());
        assert!(s.keeps_agents());
        // A store that gives no `agents` keeps none: nothing is attached.
        let none = Session::open(Stored::default(), SessionLimits::default(), 0.0);
        assert!(!none.keeps_agents());
        assert!(!none.attach_agent("a9", "helper", &SharedContext::default()));
    }

    #[test]
    fn a_torn_write_is_taken_back_at_open_and_refusals_are_checked_before_anything_counts() {
        let meta = Meta { v: 1, last_id: 1, context_lines: 1, turns: 1, ..Meta::default() };
        let stored = Stored {
            context: vec![
                "{\"role\":\"user\",\"content\":\"a\"}".into(),
                "{\"role\":\"user\",\"content\":\"torn\"}".into(),
            ],
            events: vec![
                Event { id: 1, kind: EventKind::End, data: TurnOutcome::done().to_json() },
                Event { id: 2, kind: EventKind::Wire, data: "{}".into() },
            ],
            meta: Some(meta.to_json()),
            agents: None,
        };
        let limits = SessionLimits { max_message_bytes: 4, max_turns: 2, ..SessionLimits::default() };
        let s = Session::open(stored, limits, 0.0);
        let w = s.poll_write().expect("the take-back");
        assert_eq!(w.ops[..2], [Op::TruncateEvents { after: 1 }, Op::TruncateContext { keep: 1 }]);
        s.write_done(w.seq, true, 0.0);
        assert_eq!(s.context().history().len(), 1);
        assert_eq!(
            s.submit(&UserInput::Text("too long".into()), 0.0),
            Err(Refused::MessageTooLarge { bytes: 8, max: 4 })
        );
        assert_eq!(s.submit(&UserInput::Text(" ".into()), 0.0), Err(Refused::Empty));
        assert_eq!(s.turns(), 1, "nothing counted");
        assert_eq!(s.poll_write(), None, "nothing written");
    }
}
