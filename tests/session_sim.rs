//! Deterministic simulation of sessions (the FoundationDB / TigerBeetle way): a seeded world runs
//! a session's turns — a scripted model that streams with delays and breaks, idempotent and
//! non-idempotent tools, approvals asked mid-run, cancels, a client that reads the events and
//! comes back from where it was — on a simulated clock, against a memory store that, at chosen
//! writes, crashes (a torn write: some of its ops applied, then the runtime is gone and a new
//! `Session` opens the store) or refuses the write. After every run the invariants are checked:
//!
//! - no non-idempotent tool started twice (a ledger outside the store);
//! - every call has exactly one result in the history and on the wire;
//! - event ids the client was told go up by one and never repeat; a client resuming from any id
//!   gets exactly the rest;
//! - an acknowledged cancel is never undone (its turn ends cancelled);
//! - a refused approval is never acted on;
//! - the history is a valid conversation for every wire format (each assistant message's calls
//!   answered right after it, nothing answered that was not called, ids unique);
//! - every turn ends, within a bounded number of lives and of simulated time.
//!
//! `cargo test --test session_sim` runs [`SEEDS`] seeds (more with `SIM_SEEDS=n`, from
//! `SIM_FROM=n`). A failing seed prints its schedule and the command that replays it:
//! `SIM_SEED=<seed> cargo test --test session_sim replay -- --nocapture`.
//! `cargo test --features planted-bugs --test session_sim` shows each planted bug caught.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context as TaskContext, Poll};

use futures::channel::oneshot;
use futures::executor::LocalPool;
use futures::future::LocalBoxFuture;
use futures::task::LocalSpawnExt;
use futures::FutureExt;
use serde_json::{json, Value};

use kosong_wasm::engine::error::ChatProviderError;
use kosong_wasm::engine::generate::{EventSource, Limits};
use kosong_wasm::engine::json::Arguments;
use kosong_wasm::engine::message::{Message, Role, StreamedMessagePart, TokenUsage, ToolCall};
use kosong_wasm::engine::model::Model;
use kosong_wasm::engine::providers::echo::parse_echo_script;
use kosong_wasm::engine::providers::{Prompt, StreamEvent, ToolDefinition};
use kosong_wasm::engine::session::{Event, EventKind, Op, Outcome, Session, SessionLimits, Stop, Stored, TurnOutcome};
use kosong_wasm::engine::soul::agent::{
    not_resumable, run_subagent, AgentConfig, Begin, Env, SubagentRun, Turn, TurnTools, UserInput,
};
use kosong_wasm::engine::soul::approval::{ApprovalState, Approvals};
use kosong_wasm::engine::soul::context::SharedContext;
use kosong_wasm::engine::soul::recovery::{RecordedSubagent, RecoveryBudget};
use kosong_wasm::engine::soul::wire::{record_message, ApprovalResponse, SubagentOf, Wire};
use kosong_wasm::engine::step::ToolDispatch;
use kosong_wasm::engine::toolset::{ToolOutput, ToolResult, ToolReturnValue};

/// Seeds `cargo test` runs by default.
const SEEDS: u64 = 10_000;
const MAX_LIVES: u32 = 40;
const MAX_SIM_MS: f64 = 6.0 * 3600.0 * 1000.0;

// ---- randomness -------------------------------------------------------------------------------

#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn mix(a: u64, b: u64) -> u64 {
    Rng::new(a.wrapping_mul(31).wrapping_add(b)).next()
}

// ---- the simulated clock ----------------------------------------------------------------------

#[derive(Default)]
struct Clock {
    now: Cell<f64>,
    seq: Cell<u64>,
    timers: RefCell<BTreeMap<(u64, u64), oneshot::Sender<()>>>,
}

impl Clock {
    fn sleep(&self, ms: f64) -> LocalBoxFuture<'static, ()> {
        let (tx, rx) = oneshot::channel();
        let at = ((self.now.get() + ms.max(0.0)) * 1000.0) as u64;
        self.seq.set(self.seq.get() + 1);
        self.timers.borrow_mut().insert((at, self.seq.get()), tx);
        rx.map(|_| ()).boxed_local()
    }
    /// The next timer whose future is still held, in ms.
    fn next_at(&self) -> Option<f64> {
        let mut t = self.timers.borrow_mut();
        t.retain(|_, tx| !tx.is_canceled());
        t.keys().next().map(|(at, _)| *at as f64 / 1000.0)
    }
    /// Moves the time to `to`, firing every timer due.
    fn advance(&self, to: f64) {
        self.now.set(self.now.get().max(to));
        let due: Vec<(u64, u64)> =
            self.timers.borrow().keys().filter(|(at, _)| (*at as f64 / 1000.0) <= to).copied().collect();
        for k in due {
            if let Some(tx) = self.timers.borrow_mut().remove(&k) {
                let _ = tx.send(());
            }
        }
    }
}

struct SimEnv {
    clock: Rc<Clock>,
    spawner: futures::executor::LocalSpawner,
}

impl Env for SimEnv {
    fn sleep(&self, ms: f64) -> LocalBoxFuture<'static, ()> {
        self.clock.sleep(ms)
    }
    fn random(&self) -> f64 {
        0.5
    }
    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        let _ = self.spawner.spawn_local(task);
    }
    fn now_s(&self) -> f64 {
        self.clock.now.get() / 1000.0
    }
}

// ---- the scripted model -----------------------------------------------------------------------

/// A tool the model may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Not idempotent: charges a card.
    Charge,
    /// Idempotent.
    Lookup,
    /// Idempotent; asks for approval mid-run and acts only when approved.
    Ask,
    /// Not idempotent; needs approval before it starts (`needsApproval`).
    Pay,
    /// Not idempotent; reserves, then asks for approval mid-run, and books only when approved.
    Book,
    /// A sub-agent's call (idempotent, as `Agent.asTool`'s): a `helper` turn by the core's rule,
    /// whose `fix` (not idempotent) asks the parent's UI (its question carries kimi-cli's
    /// `agent_id`) and acts only when approved. After a death the call runs again and the
    /// sub-agent goes on from its record and its stored context. In the seeds that are 5 mod 7,
    /// in `book`'s place and some of `charge`'s.
    Delegate,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Charge => "charge",
            Kind::Lookup => "lookup",
            Kind::Ask => "ask",
            Kind::Pay => "pay",
            Kind::Book => "book",
            Kind::Delegate => "delegate",
        }
    }
}

/// What the model answers in turn `n` at step `k` (1-based): calls, or the final text.
fn answer_for(seed: u64, n: u32, k: u32) -> Vec<Kind> {
    let mut r = Rng::new(mix(seed, (n as u64) << 8 | k as u64));
    let steps = 1 + mix(seed, n as u64) % 3; // tool steps in this turn
    if k as u64 > steps {
        return Vec::new();
    }
    let calls = 1 + r.below(3);
    (0..calls)
        .map(|_| match r.below(14) {
            0..=1 if seed % 7 == 5 => Kind::Delegate,
            0..=3 => Kind::Charge,
            4..=6 => Kind::Lookup,
            7..=8 => Kind::Ask,
            9..=11 => Kind::Pay,
            _ if seed % 7 == 5 => Kind::Delegate,
            _ => Kind::Book,
        })
        .collect()
}

fn script_for(seed: u64, n: u32, k: u32) -> String {
    let calls = answer_for(seed, n, k);
    if calls.is_empty() {
        return format!("text: Turn {n} is done: all steps ran.");
    }
    let mut s = format!("text: Step {k} of turn {n}.\n");
    for (i, c) in calls.iter().enumerate() {
        let id = format!("t{n}s{k}c{i}");
        s.push_str(&format!(
            "tool_call: {}\n",
            json!({"id": id, "name": c.name(), "arguments": json!({"n": n, "k": k, "i": i}).to_string()})
        ));
    }
    s
}

/// The turn number and step the prompt asks for: from the last user message (`turn N`) and the
/// assistant messages after it.
fn turn_and_step(history: &[Message]) -> (u32, u32) {
    let Some(at) = history.iter().rposition(|m| m.role == Role::User && m.tool_call_id.is_none()) else {
        return (0, 1);
    };
    let text = serde_json::to_value(&history[at].content).unwrap_or(Value::Null).to_string();
    let n = text
        .split("turn ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    let k = history[at..].iter().filter(|m| m.role == Role::Assistant).count() as u32 + 1;
    (n, k)
}

struct SimModel {
    seed: u64,
    clock: Rc<Clock>,
    /// Requests asked of the model, across lives (what decides its faults).
    requests: Rc<Cell<u64>>,
    faults: bool,
    /// The server keeps its answers (OpenAI's Responses API in the background): each has an id,
    /// and a turn recovered while one streamed reads it again from its start.
    server: Option<Rc<RefCell<Server>>>,
}

/// What a server that keeps its answers knows of them, across the runtime's lives.
#[derive(Default)]
struct Server {
    /// Answers in the order they were asked for: their id, turn and step, and how they went.
    answers: Vec<Kept>,
    /// The ids of kept answers the store held when the runtime died, across deaths.
    stored_at_death: HashSet<String>,
    /// Each reading of an answer again (the ids), and the invariant broken, if any.
    reads: Vec<String>,
    broken: Vec<String>,
}

struct Kept {
    id: String,
    n: u32,
    k: u32,
    /// A connection to it broke by a model fault (then asking again is the retry rule's).
    fault: bool,
    /// Read to its end.
    finished: bool,
    /// A reading again was refused (the answer expired).
    gone: bool,
}

/// What the model is asked: an answer for turn `n`'s step `k`, or a kept answer read again.
enum Ask {
    New(u32, u32),
    Again(String),
}

struct SimSource {
    events: Vec<StreamEvent>,
    at: usize,
    /// The stream breaks before this event (a connection reset).
    break_at: Option<usize>,
    delays: Vec<f64>,
    clock: Rc<Clock>,
    usage: Option<TokenUsage>,
    /// The kept answer this stream reads, with its server.
    kept: Option<(String, Rc<RefCell<Server>>)>,
}

impl SimSource {
    fn mark(&self, f: impl FnOnce(&mut Kept)) {
        if let Some((id, server)) = &self.kept {
            if let Some(k) = server.borrow_mut().answers.iter_mut().find(|k| k.id == *id) {
                f(k);
            }
        }
    }
}

impl EventSource for SimSource {
    type Error = ChatProviderError;
    async fn next_batch(&mut self, out: &mut Vec<StreamEvent>) -> Result<bool, ChatProviderError> {
        if self.at >= self.events.len() {
            self.mark(|k| k.finished = true);
            return Ok(false);
        }
        let d = self.delays.get(self.at).copied().unwrap_or(0.0);
        if d > 0.0 {
            self.clock.sleep(d).await;
        }
        if self.break_at == Some(self.at) {
            self.mark(|k| k.fault = true);
            return Err(ChatProviderError::Connection("simulated reset".into()));
        }
        out.push(self.events[self.at].clone());
        self.at += 1;
        Ok(true)
    }
    fn id(&self) -> Option<String> {
        None
    }
    fn usage(&self) -> Option<TokenUsage> {
        self.usage
    }
    fn finish_reason(&self) -> Option<String> {
        None
    }
    fn limits(&self) -> Limits {
        Limits::default()
    }
    fn resumable(&self) -> Option<&str> {
        self.kept.as_ref().map(|(id, _)| id.as_str())
    }
}

impl Model for SimModel {
    type Request = Ask;
    type Source = SimSource;
    fn model_name(&self) -> String {
        "sim".into()
    }
    fn prepare(&self, prompt: &Prompt<'_>) -> Result<Ask, ChatProviderError> {
        let (n, k) = turn_and_step(prompt.history);
        Ok(Ask::New(n, k))
    }
    fn reopen(&self, answer: &str) -> Option<Result<Ask, ChatProviderError>> {
        self.server.as_ref().map(|_| Ok(Ask::Again(answer.to_owned())))
    }
    fn open(&self, ask: Ask) -> LocalBoxFuture<'_, Result<SimSource, ChatProviderError>> {
        let r = self.requests.get() + 1;
        self.requests.set(r);
        let mut rng = Rng::new(mix(self.seed, 1_000_000 + r));
        let (n, k, kept) = match (ask, &self.server) {
            (Ask::New(n, k), None) => (n, k, None),
            (Ask::New(n, k), Some(server)) => {
                let mut sv = server.borrow_mut();
                // The model is asked once per step, whatever died in between: a step is asked
                // again only when its last answer broke by a model fault, was refused when read
                // again, or died before its id was stored.
                if let Some(last) = sv.answers.iter().rev().find(|a| a.n == n && a.k == k) {
                    if !last.fault && !last.finished && !last.gone && sv.stored_at_death.contains(&last.id) {
                        let why =
                            format!("turn {n} step {k} asked again though its answer {} was kept and stored", last.id);
                        sv.broken.push(why);
                    }
                }
                let id = format!("ans-{r}");
                sv.answers.push(Kept { id: id.clone(), n, k, fault: false, finished: false, gone: false });
                (n, k, Some((id, server.clone())))
            }
            (Ask::Again(id), server) => {
                let server = server.clone().expect("a kept answer has its server");
                let mut sv = server.borrow_mut();
                sv.reads.push(id.clone());
                let Some(a) = sv.answers.iter_mut().find(|a| a.id == id) else {
                    sv.broken.push(format!("{id} read again but never given"));
                    return futures::future::ready(Err(ChatProviderError::Other("unknown".into()))).boxed_local();
                };
                // Now and then the answer has expired: the read is refused.
                if rng.chance(10) {
                    a.gone = true;
                    return futures::future::ready(Err(ChatProviderError::Status {
                        status: 404,
                        message: "the answer expired".into(),
                        request_id: None,
                        retry_after_ms: None,
                    }))
                    .boxed_local();
                }
                let (n, k) = (a.n, a.k);
                drop(sv);
                (n, k, Some((id, server)))
            }
        };
        let script = parse_echo_script(&script_for(self.seed, n, k)).expect("script");
        let events = script.events();
        let fail_open = self.faults && rng.chance(8);
        let break_at = (self.faults && rng.chance(10)).then(|| rng.below(events.len() as u64 + 1) as usize);
        let delays = (0..events.len()).map(|_| rng.below(30) as f64).collect();
        let clock = self.clock.clone();
        async move {
            clock.sleep(rng.below(50) as f64).await;
            if fail_open {
                if let Some((id, server)) = &kept {
                    if let Some(a) = server.borrow_mut().answers.iter_mut().find(|a| a.id == *id) {
                        a.fault = true;
                    }
                }
                return Err(ChatProviderError::Status {
                    status: 503,
                    message: "simulated overload".into(),
                    request_id: None,
                    retry_after_ms: None,
                });
            }
            Ok(SimSource { events, at: 0, break_at, delays, clock, usage: Some(TokenUsage::default()), kept })
        }
        .boxed_local()
    }
}

// ---- the tools and the ledger -----------------------------------------------------------------

/// What the tools did, outside any store: `(tool, call id, what)`.
type Ledger = Rc<RefCell<Vec<(String, String, String)>>>;

#[derive(Clone)]
struct SimTools {
    clock: Rc<Clock>,
    ledger: Ledger,
    approvals: Rc<RefCell<Option<Rc<Approvals>>>>,
    seed: u64,
    /// For `delegate`'s sub-agent: the life's session, its environment, the recovered turn's
    /// record of its sub-agent calls, and whether the model faults.
    session: Option<Session>,
    env: Option<Rc<SimEnv>>,
    recorded: Rc<RefCell<Vec<RecordedSubagent>>>,
    life: u32,
    faults: bool,
}

impl ToolDispatch for SimTools {
    fn is_eager(&self, name: &str) -> bool {
        // `lookup` (idempotent) and, in a third of the seeds, `charge` (not) wait for the stream's end.
        match name {
            "lookup" => self.seed.is_multiple_of(2),
            "charge" => self.seed % 3 != 1,
            _ => true,
        }
    }
    fn is_idempotent(&self, name: &str) -> bool {
        // `delegate` runs again after a death: its sub-agent goes on from its record.
        name == "lookup" || name == "ask" || name == "delegate"
    }
    fn needs_approval(
        &self,
        call: &ToolCall,
        _args: &Arguments<'_>,
    ) -> Option<LocalBoxFuture<'static, Result<bool, String>>> {
        // The question takes a while to decide (a JS `needsApproval` is an async function).
        let decided = self.clock.sleep(5.0);
        (call.function.name == "pay").then(|| decided.map(|()| Ok(true)).boxed_local())
    }
    fn dispatch(&self, call: &ToolCall, _args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
        let (name, id) = (call.function.name.clone(), call.id.clone());
        let (clock, ledger) = (self.clock.clone(), self.ledger.clone());
        let approvals = self.approvals.borrow().clone();
        let took = (mix(self.seed, id.len() as u64 * 7 + id.bytes().map(u64::from).sum::<u64>()) % 80) as f64;
        if name == "delegate" {
            return delegate(self.clone(), id, approvals.expect("approvals")).boxed_local();
        }
        // Lazy: the tool starts at the first poll (the engine's contract).
        async move {
            ledger.borrow_mut().push((name.clone(), id.clone(), "start".into()));
            if name == "ask" || name == "book" {
                let approvals = approvals.clone().expect("approvals");
                let yes = approvals.request(&id, &name, "may I?", false).expect("action").await;
                if !yes {
                    return ToolResult { tool_call_id: id.clone(), return_value: approvals.rejection(&id) };
                }
                ledger.borrow_mut().push((name.clone(), id.clone(), "effect".into()));
            }
            clock.sleep(took).await;
            ledger.borrow_mut().push((name.clone(), id.clone(), "end".into()));
            ToolResult {
                tool_call_id: id.clone(),
                return_value: ToolReturnValue::ok(ToolOutput::Text(format!("{name} {id} done")), "", ""),
            }
        }
        .boxed_local()
    }
}

impl TurnTools for SimTools {
    fn definitions(&self) -> Vec<ToolDefinition> {
        ["charge", "lookup", "ask", "pay", "book", "delegate"]
            .iter()
            .map(|n| ToolDefinition {
                name: (*n).into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            })
            .collect()
    }
}

// ---- the sub-agent ----------------------------------------------------------------------------

/// `delegate`: a sub-agent call, as the glue runs one — a `helper` turn by the core's rule
/// (`run_subagent`), its wire into the parent's, its approvals on the parent's, its context kept
/// in the session's store by agent id. Its model calls `fix` once, then answers (briefly in some
/// seeds: the summary continuation runs). After a death the call runs again with its id and the
/// sub-agent goes on from what the parent's recording holds of it and its stored context.
async fn delegate(tools: SimTools, id: String, approvals: Rc<Approvals>) -> ToolResult {
    tools.ledger.borrow_mut().push(("delegate".into(), id.clone(), "start".into()));
    let session = tools.session.clone().expect("a session");
    let record = {
        let mut r = tools.recorded.borrow_mut();
        r.iter().position(|s| s.call_id == id).map(|i| r.remove(i))
    };
    let agent_id = record.as_ref().map_or_else(|| format!("a-{id}-l{}", tools.life), |r| r.agent_id.clone());
    let context = match &record {
        None => SharedContext::default(),
        Some(r) => match session.agent(&r.agent_id) {
            Some((_, c)) => SharedContext::new(c),
            None => return ToolResult { tool_call_id: id, return_value: not_resumable(r, approvals.wire()) },
        },
    };
    assert!(session.attach_agent(&agent_id, "helper", &context), "the store keeps sub-agents");
    let run = SubagentRun {
        parent_tool_call_id: id.clone(),
        agent_id: agent_id.clone(),
        subagent_type: "helper".into(),
        resumed: false,
    };
    let wire = Wire::new();
    run.forward(&wire, approvals.wire(), |_| {});
    let who = SubagentOf { agent_id, subagent_type: "helper".into() };
    let child_approvals = Rc::new(approvals.child("helper".into(), who));
    let helper = HelperTools {
        clock: tools.clock.clone(),
        ledger: tools.ledger.clone(),
        approvals: child_approvals.clone(),
        seed: tools.seed,
    };
    let model = HelperModel { seed: tools.seed, clock: tools.clock.clone(), faults: tools.faults, asked: Cell::new(0) };
    let config = AgentConfig { max_steps_per_turn: 6, ..AgentConfig::default() };
    let env = tools.env.clone().expect("an environment");
    let begin = match record {
        Some(r) => Begin::from_record(r, RecoveryBudget::default(), true).0,
        None => Begin::Run(UserInput::Text(format!("help with {id}"))),
    };
    let turn = Turn {
        config: &config,
        context: &context,
        model: Some(&model),
        tools: &helper,
        wire: &wire,
        approvals: &child_approvals,
        env: &*env,
    };
    let never = || futures::future::pending::<()>().boxed_local();
    let rv = run_subagent(&turn, &run, begin, never, |e: &ChatProviderError| e.to_string()).await;
    child_approvals.close_asked();
    wire.shutdown();
    ToolResult { tool_call_id: id, return_value: rv }
}

/// The sub-agent's one tool, `fix` (not idempotent): asks before it starts (`needsApproval`) in
/// even seeds, mid-run in odd ones; acts only when approved.
struct HelperTools {
    clock: Rc<Clock>,
    ledger: Ledger,
    approvals: Rc<Approvals>,
    seed: u64,
}

impl ToolDispatch for HelperTools {
    fn is_eager(&self, _name: &str) -> bool {
        true
    }
    fn is_idempotent(&self, _name: &str) -> bool {
        false
    }
    fn needs_approval(
        &self,
        _call: &ToolCall,
        _args: &Arguments<'_>,
    ) -> Option<LocalBoxFuture<'static, Result<bool, String>>> {
        self.seed.is_multiple_of(2).then(|| futures::future::ready(Ok(true)).boxed_local())
    }
    fn dispatch(&self, call: &ToolCall, _args: &Arguments<'_>) -> LocalBoxFuture<'static, ToolResult> {
        let (id, clock, ledger, approvals) =
            (call.id.clone(), self.clock.clone(), self.ledger.clone(), self.approvals.clone());
        let asks = !self.seed.is_multiple_of(2);
        async move {
            ledger.borrow_mut().push(("fix".into(), id.clone(), "start".into()));
            if asks && !approvals.request(&id, "fix", "may the sub-agent fix?", false).expect("action").await {
                return ToolResult { tool_call_id: id.clone(), return_value: approvals.rejection(&id) };
            }
            ledger.borrow_mut().push(("fix".into(), id.clone(), "effect".into()));
            clock.sleep(20.0).await;
            ledger.borrow_mut().push(("fix".into(), id.clone(), "end".into()));
            ToolResult {
                tool_call_id: id.clone(),
                return_value: ToolReturnValue::ok(ToolOutput::Text(format!("fixed {id}")), "", ""),
            }
        }
        .boxed_local()
    }
}

impl TurnTools for HelperTools {
    fn definitions(&self) -> Vec<ToolDefinition> {
        vec![ToolDefinition { name: "fix".into(), description: String::new(), parameters: json!({"type": "object"}) }]
    }
}

/// The sub-agent's model: `fix` (its id `f-<parent call>`) at the first step of its task, then
/// its report — under 200 characters in a third of the seeds, so the summary is asked for.
struct HelperModel {
    seed: u64,
    clock: Rc<Clock>,
    faults: bool,
    asked: Cell<u64>,
}

impl Model for HelperModel {
    type Request = String;
    type Source = SimSource;
    fn model_name(&self) -> String {
        "helper".into()
    }
    fn prepare(&self, prompt: &Prompt<'_>) -> Result<String, ChatProviderError> {
        let h = prompt.history;
        let text = |m: &Message| serde_json::to_value(&m.content).unwrap_or(Value::Null).to_string();
        let task = h.iter().find(|m| m.role == Role::User).map(text).unwrap_or_default();
        let parent = task.split("help with ").nth(1).and_then(|t| t.split('"').next()).unwrap_or("x").to_owned();
        let last_user = h.iter().rposition(|m| m.role == Role::User && m.tool_call_id.is_none()).unwrap_or(0);
        let summary = text(&h[last_user]).contains("too brief");
        let steps = h[last_user..].iter().filter(|m| m.role == Role::Assistant).count();
        if !summary && steps == 0 {
            return Ok(format!(
                "tool_call: {}",
                json!({"id": format!("f-{parent}"), "name": "fix", "arguments": "{}"})
            ));
        }
        let words = if summary || !self.seed.is_multiple_of(3) { 40 } else { 3 };
        Ok(format!("text: {}", vec!["fixed"; words].join(" ")))
    }
    fn open(&self, script: String) -> LocalBoxFuture<'_, Result<SimSource, ChatProviderError>> {
        self.asked.set(self.asked.get() + 1);
        let mut rng = Rng::new(mix(self.seed, 7_000_000 + self.asked.get() + script.len() as u64));
        let events = parse_echo_script(&script).expect("script").events();
        let break_at = (self.faults && rng.chance(10)).then(|| rng.below(events.len() as u64 + 1) as usize);
        let delays = (0..events.len()).map(|_| rng.below(30) as f64).collect();
        let clock = self.clock.clone();
        async move {
            Ok(SimSource { events, at: 0, break_at, delays, clock, usage: Some(TokenUsage::default()), kept: None })
        }
        .boxed_local()
    }
}

// ---- the store --------------------------------------------------------------------------------

#[derive(Clone, Default, Debug)]
struct MemStore {
    context: Vec<String>,
    events: Vec<Event>,
    meta: Option<String>,
    agents: Vec<(String, Vec<String>)>,
}

impl MemStore {
    fn apply(&mut self, op: &Op) {
        match op {
            Op::Event(e) => self.events.push(e.clone()),
            Op::TrimEvents { before } => self.events.retain(|e| e.id >= *before),
            Op::TruncateEvents { after } => self.events.retain(|e| e.id <= *after),
            Op::Context(l) => self.context.push(l.clone()),
            Op::TruncateContext { keep } => self.context.truncate(*keep),
            Op::AgentContext { agent, line } => match self.agents.iter_mut().find(|(a, _)| a == agent) {
                Some((_, lines)) => lines.push(line.clone()),
                None => self.agents.push((agent.clone(), vec![line.clone()])),
            },
            Op::TruncateAgentContext { agent, keep } => {
                if let Some((_, lines)) = self.agents.iter_mut().find(|(a, _)| a == agent) {
                    lines.truncate(*keep);
                }
            }
            Op::Meta(m) => self.meta = Some(m.clone()),
        }
    }
    fn stored(&self) -> Stored {
        Stored {
            context: self.context.clone(),
            events: self.events.clone(),
            meta: self.meta.clone(),
            agents: Some(self.agents.clone()),
        }
    }
}

// ---- the world --------------------------------------------------------------------------------

/// A fault at a write (counted across lives, from 1).
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The runtime dies during the write, after `applied` of its ops reached the store.
    Crash {
        applied: usize,
    },
    Refuse,
}

struct Plan {
    turns: u32,
    faults: BTreeMap<u64, Fault>,
    /// Turn n is cancelled this long after it starts.
    cancels: HashMap<u32, f64>,
    /// The runtime dies in the first write after a cancel is asked, with this many ops applied.
    crash_on_cancel: Option<usize>,
    model_faults: bool,
}

impl Plan {
    fn of(seed: u64) -> Plan {
        let mut r = Rng::new(seed);
        let turns = 1 + r.below(3) as u32;
        let mut faults = BTreeMap::new();
        let n = r.below(4);
        for _ in 0..n {
            let at = 1 + r.below(40);
            let f = if r.chance(70) { Fault::Crash { applied: r.below(12) as usize } } else { Fault::Refuse };
            faults.insert(at, f);
        }
        let mut cancels = HashMap::new();
        for t in 1..=turns {
            if r.chance(15) {
                cancels.insert(t, r.below(400) as f64);
            }
        }
        let crash_on_cancel = (!cancels.is_empty() && r.chance(30)).then(|| r.below(4) as usize);
        Plan { turns, faults, cancels, crash_on_cancel, model_faults: r.chance(50) }
    }
}

#[derive(Default)]
struct ClientView {
    /// Every event told, in order.
    told: Vec<Event>,
    /// Approval requests told and not answered by the client yet: (request id, answer, due at).
    to_answer: Vec<(String, ApprovalResponse, f64)>,
    answered: HashSet<String>,
    /// The first answer the client gave per request.
    answers: HashMap<String, ApprovalResponse>,
    /// Turns whose cancel was acknowledged.
    cancel_acked: HashSet<u32>,
    /// Turns the client asked to cancel (at a time).
    cancel_due: Option<(u32, f64)>,
}

struct World {
    seed: u64,
    plan: Plan,
    rng: Rng,
    clock: Rc<Clock>,
    store: MemStore,
    writes: u64,
    ledger: Ledger,
    requests: Rc<Cell<u64>>,
    /// The model's server keeps its answers (a fifth of the seeds, none of the earlier planted bugs' first).
    server: Option<Rc<RefCell<Server>>>,
    client: ClientView,
    log: Vec<String>,
    lives: u32,
    limits: SessionLimits,
    /// A fault for the next write, whatever its number.
    next_fault: Option<Fault>,
    #[cfg(feature = "planted-bugs")]
    bug: Option<kosong_wasm::engine::session::planted::Bug>,
}

/// How a pump ended.
enum Pumped {
    Quiet,
    Busy,
    Crashed,
}

impl World {
    fn new(seed: u64) -> World {
        World {
            seed,
            plan: Plan::of(seed),
            rng: Rng::new(seed ^ 0xabcdef),
            clock: Rc::new(Clock::default()),
            store: MemStore::default(),
            writes: 0,
            ledger: Rc::default(),
            requests: Rc::default(),
            server: (seed % 5 == 4).then(Rc::default),
            client: ClientView::default(),
            log: Vec::new(),
            lives: 0,
            next_fault: None,
            limits: SessionLimits { stall_ms: 60_000.0, ..SessionLimits::default() },
            #[cfg(feature = "planted-bugs")]
            bug: None,
        }
    }

    fn now(&self) -> f64 {
        self.clock.now.get()
    }

    fn note(&mut self, s: String) {
        self.log.push(format!("[{:>9.1} ms] {s}", self.now()));
    }

    fn open(&mut self) -> Session {
        self.lives += 1;
        self.note(format!(
            "life {} opens the store ({} events, {} context lines)",
            self.lives,
            self.store.events.len(),
            self.store.context.len()
        ));
        #[cfg(feature = "planted-bugs")]
        let s = Session::open_planted(self.store.stored(), self.limits.clone(), self.now(), self.bug);
        #[cfg(not(feature = "planted-bugs"))]
        let s = Session::open(self.store.stored(), self.limits.clone(), self.now());
        // The client comes back and reads what it missed.
        let last = self.client.told.last().map_or(0, |e| e.id);
        for e in s.events_after(last) {
            self.tell(e);
        }
        // A request it answered whose answer was never stored (the runtime died first) is still
        // waiting: the client answers it again, the same way.
        let mut open: Vec<String> = Vec::new();
        for (_, m) in wire_messages(&self.client.told) {
            let p = &m["payload"];
            match m["type"].as_str() {
                Some("ApprovalRequest") => open.push(p["id"].as_str().unwrap_or("").into()),
                Some("ApprovalResponse") => open.retain(|id| p["request_id"].as_str() != Some(id)),
                Some("TurnBegin") => open.clear(),
                _ => {}
            }
        }
        for id in open {
            if !self.client.to_answer.iter().any(|(i, _, _)| *i == id) {
                let answer = self.client.answers.get(&id).copied().unwrap_or(ApprovalResponse::Approve);
                let due = self.now() + self.rng.below(500) as f64;
                self.client.to_answer.push((id, answer, due));
            }
        }
        s
    }

    fn tell(&mut self, e: Event) {
        if e.kind == EventKind::Wire {
            if let Some(m) = record_message(&e.data) {
                let v: Value = serde_json::from_str(m.get()).unwrap_or(Value::Null);
                if v["type"] == "ApprovalRequest" {
                    let id = v["payload"]["id"].as_str().unwrap_or_default().to_owned();
                    let answer = match self.rng.below(4) {
                        0 => ApprovalResponse::Reject,
                        1 => ApprovalResponse::ApproveForSession,
                        _ => ApprovalResponse::Approve,
                    };
                    let due = self.now() + self.rng.below(2_000) as f64;
                    self.client.to_answer.push((id, answer, due));
                }
            }
        }
        self.client.told.push(e);
    }

    /// Performs the session's writes and tells its events; `Crashed` when the runtime died.
    fn pump(&mut self, s: &Session) -> Pumped {
        let mut busy = false;
        while let Some(w) = s.poll_write() {
            busy = true;
            self.writes += 1;
            let n = self.writes;
            match self.next_fault.take().or_else(|| self.plan.faults.get(&n).copied()) {
                Some(Fault::Crash { applied }) => {
                    let applied = applied.min(w.ops.len());
                    for op in &w.ops[..applied] {
                        self.store.apply(op);
                    }
                    self.note(format!("write {n} (seq {}): CRASH after {applied} of {} ops", w.seq, w.ops.len()));
                    // What the next life will read as stored (a torn write's data without its
                    // commit record is not).
                    if let Some(server) = &self.server {
                        let next = Session::open(self.store.stored(), self.limits.clone(), self.now());
                        server.borrow_mut().stored_at_death.extend(kept_ids(&next.events_after(0)));
                    }
                    return Pumped::Crashed;
                }
                Some(Fault::Refuse) => {
                    self.note(format!("write {n} (seq {}): refused ({} ops)", w.seq, w.ops.len()));
                    s.write_done(w.seq, false, self.now());
                }
                None => {
                    for op in &w.ops {
                        self.store.apply(op);
                    }
                    s.write_done(w.seq, true, self.now());
                }
            }
        }
        while let Some(e) = s.poll_event() {
            busy = true;
            self.tell(e);
        }
        if busy {
            Pumped::Busy
        } else {
            Pumped::Quiet
        }
    }

    /// The next moment something is due: a timer, the session's wake-up, a client's action.
    fn next_due(&self, s: &Session) -> Option<f64> {
        let mut at: Vec<f64> = Vec::new();
        at.extend(self.clock.next_at());
        at.extend(s.poll_timeout());
        at.extend(self.client.to_answer.iter().map(|(_, _, d)| *d));
        at.extend(self.client.cancel_due.map(|(_, d)| d));
        at.into_iter().fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))))
    }
}

/// How a turn's life ended.
enum TurnEnd {
    Ended,
    /// The session's store refused a write and the turn was dropped.
    Dropped,
    Crashed,
}

fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    let waker = futures::task::noop_waker();
    let mut cx = TaskContext::from_waker(&waker);
    f.poll(&mut cx)
}

enum Start {
    New(u32),
    Resume,
}

/// Runs one turn (new or resumed) in this life until it ends, is dropped, or the runtime dies.
fn run_turn(w: &mut World, s: &Session, start: Start) -> Option<TurnEnd> {
    let mut pool = LocalPool::new();
    let env = Rc::new(SimEnv { clock: w.clock.clone(), spawner: pool.spawner() });
    let context = SharedContext::new(s.context());
    let wire = Wire::new();
    let n_turn: u32;
    let mut resume = match start {
        Start::New(n) => {
            n_turn = n;
            let input = UserInput::Text(format!("turn {n}"));
            if let Err(e) = s.submit(&input, w.now()) {
                w.note(format!("turn {n} refused: {e}"));
                return None;
            }
            w.note(format!("turn {n} starts"));
            if let Some(ms) = w.plan.cancels.get(&n) {
                w.client.cancel_due = Some((n, w.now() + ms));
            }
            None
        }
        Start::Resume => {
            let (rec, budget) = s.poll_resume()?;
            n_turn = s.turns();
            w.note(format!("turn {} resumed from step {} (stop: {:?})", n_turn, rec.step, rec.stop));
            Some((rec, budget))
        }
    };
    s.attach(&wire, &context);
    let state = Rc::new(RefCell::new(ApprovalState::new(false)));
    for a in s.approved_for_session() {
        state.borrow_mut().approve_for_session(&a);
    }
    let life = w.lives;
    let ids = Cell::new(0);
    let approvals = Rc::new(Approvals::new(
        wire.clone(),
        state,
        "agent".into(),
        Rc::new(move || {
            ids.set(ids.get() + 1);
            format!("l{life}-t{n_turn}-r{}", ids.get())
        }),
    ));
    let tools = SimTools {
        clock: w.clock.clone(),
        ledger: w.ledger.clone(),
        approvals: Rc::default(),
        seed: w.seed,
        session: Some(s.clone()),
        env: Some(env.clone()),
        recorded: Rc::new(RefCell::new(
            resume.as_mut().map(|(r, _)| std::mem::take(&mut r.subagents)).unwrap_or_default(),
        )),
        life: w.lives,
        faults: w.plan.model_faults,
    };
    *tools.approvals.borrow_mut() = Some(approvals.clone());
    let model = SimModel {
        seed: w.seed,
        clock: w.clock.clone(),
        requests: w.requests.clone(),
        faults: w.plan.model_faults,
        server: w.server.clone(),
    };
    let config = AgentConfig { max_steps_per_turn: 12, ..AgentConfig::default() };
    let turn = Turn {
        config: &config,
        context: &context,
        model: Some(&model),
        tools: &tools,
        wire: &wire,
        approvals: &approvals,
        env: &*env,
    };
    let (cancel_tx, cancel_rx) = oneshot::channel::<()>();
    let mut cancel_tx = Some(cancel_tx);
    let cancel = async move {
        let _ = cancel_rx.await;
    };
    let mut fut = match resume {
        None => turn.run(UserInput::Text(format!("turn {n_turn}")), cancel).boxed_local(),
        Some((rec, budget)) => turn.resume(rec, budget, cancel).boxed_local(),
    };
    let mut spins = 0u32;
    loop {
        spins += 1;
        assert!(spins < 200_000, "seed {}: the turn spins without end", w.seed);
        if let Poll::Ready(r) = poll_once(fut.as_mut()) {
            drop(fut);
            wire.shutdown();
            pool.run_until_stalled();
            let outcome = TurnOutcome::of(&r, |e: &ChatProviderError| (e.class_name().to_owned(), e.to_string()));
            w.note(format!("turn {n_turn} returned {:?}", outcome.outcome));
            // A host may store what the turn recorded before it hears the turn's end.
            if w.rng.chance(50) {
                if let Pumped::Crashed = w.pump(s) {
                    return Some(TurnEnd::Crashed);
                }
            }
            s.turn_ended(outcome);
            return Some(match w.pump(s) {
                Pumped::Crashed => TurnEnd::Crashed,
                _ => TurnEnd::Ended,
            });
        }
        pool.run_until_stalled();
        let pumped = w.pump(s);
        if let Pumped::Crashed = pumped {
            return Some(TurnEnd::Crashed);
        }
        if s.poll_cancel_stored() {
            w.note(format!("cancel of turn {n_turn} acknowledged"));
            w.client.cancel_acked.insert(n_turn);
        }
        match s.poll_stop() {
            Some(Stop::Cancel) => {
                w.note("the session stops the turn (cancel)".into());
                if let Some(tx) = cancel_tx.take() {
                    let _ = tx.send(());
                }
                continue;
            }
            Some(Stop::Drop) => {
                w.note("the session drops the turn (a refused write)".into());
                drop(fut);
                wire.shutdown();
                return Some(TurnEnd::Dropped);
            }
            None => {}
        }
        if let Pumped::Busy = pumped {
            continue;
        }
        // Nothing moves: the next thing due.
        let Some(at) = w.next_due(s) else {
            let tail: Vec<String> = wire_messages(&w.client.told)
                .iter()
                .rev()
                .take(12)
                .rev()
                .map(|(id, m)| format!("{id} {}", m["type"]))
                .collect();
            panic!("seed {}: turn {n_turn} is stuck with nothing due; the last events told: {tail:?}", w.seed);
        };
        w.clock.advance(at);
        s.handle_timeout(w.now());
        if s.poll_flush() {
            wire.flush();
        }
        client_acts(w, s, &wire, n_turn);
        assert!(w.now() < MAX_SIM_MS, "seed {}: the turn never ends (simulated time)", w.seed);
    }
}

/// What the client does when its time comes: answers approvals, cancels.
fn client_acts(w: &mut World, s: &Session, wire: &Wire, n_turn: u32) {
    let now = w.now();
    let due: Vec<(String, ApprovalResponse, f64)> =
        w.client.to_answer.iter().filter(|(_, _, d)| *d <= now).cloned().collect();
    for (id, answer, _) in due {
        match wire.respond(&id, answer, "") {
            Ok(()) => {
                w.note(format!("client answers {id}: {}", answer.as_str()));
                w.client.answers.entry(id.clone()).or_insert(answer);
                w.client.to_answer.retain(|(i, _, _)| *i != id);
                w.client.answered.insert(id);
            }
            Err(_) => {
                // Not waiting yet (a recovered turn takes it up soon) or not any more: try later.
                for a in w.client.to_answer.iter_mut().filter(|(i, _, _)| *i == id) {
                    a.2 = now + 100.0;
                }
                if w.client.answered.contains(&id)
                    || w.client.to_answer.iter().any(|(i, _, d)| *i == id && *d > now + 50_000.0)
                {
                    w.client.to_answer.retain(|(i, _, _)| *i != id);
                }
            }
        }
    }
    if let Some((t, d)) = w.client.cancel_due {
        if d <= now {
            w.client.cancel_due = None;
            if t == n_turn {
                let asked = s.cancel();
                w.note(format!("client cancels turn {t} (asked: {asked})"));
                // The host answers the client's cancel as soon as the session says it is stored.
                if s.poll_cancel_stored() {
                    w.note(format!("cancel of turn {t} acknowledged"));
                    w.client.cancel_acked.insert(t);
                }
                if let Some(applied) = w.plan.crash_on_cancel {
                    w.next_fault = Some(Fault::Crash { applied });
                }
            }
        }
    }
}

/// Runs a seed's whole schedule and checks the invariants: the world (its log) and the verdict.
fn run(seed: u64, #[allow(unused_variables)] bug: Option<u8>) -> (World, Result<(), String>) {
    let mut w = World::new(seed);
    #[cfg(feature = "planted-bugs")]
    {
        w.bug = bug.map(|b| kosong_wasm::engine::session::planted::ALL[b as usize]);
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_world(&mut w))).unwrap_or_else(|p| {
        Err(p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into()))
    });
    (w, r)
}

fn run_world(w: &mut World) -> Result<(), String> {
    'lives: while w.lives < MAX_LIVES {
        let s = w.open();
        loop {
            if let Pumped::Crashed = w.pump(&s) {
                continue 'lives;
            }
            if s.poll_cancel_stored() {
                let t = s.turns();
                w.client.cancel_acked.insert(t);
            }
            let ended = if let Some(e) = run_turn(w, &s, Start::Resume) {
                Some(e)
            } else if !s.running() && s.turns() < w.plan.turns && s.poll_timeout().is_none() {
                // The next turn (again, if the last try never reached the store).
                run_turn(w, &s, Start::New(s.turns() + 1))
            } else {
                None
            };
            match ended {
                Some(TurnEnd::Crashed) => continue 'lives,
                Some(TurnEnd::Ended) | Some(TurnEnd::Dropped) => continue,
                None => {}
            }
            // Nothing to start: wait for what is due (a write tried again), or the end.
            if !s.running() && s.turns() >= w.plan.turns && s.poll_timeout().is_none() {
                if let Pumped::Quiet = w.pump(&s) {
                    break 'lives;
                }
                continue;
            }
            match w.next_due(&s) {
                Some(at) => {
                    w.clock.advance(at);
                    s.handle_timeout(w.now());
                    w.client.to_answer.clear(); // nothing waits between turns
                    w.client.cancel_due = None;
                }
                None if s.running() => return Err(format!("a turn is running with nothing due\n{}", w.log.join("\n"))),
                None => break 'lives,
            }
        }
    }
    if w.lives >= MAX_LIVES {
        return Err(format!("not done after {MAX_LIVES} lives"));
    }
    check(w)
}

// ---- the invariants ---------------------------------------------------------------------------

fn wire_messages(events: &[Event]) -> Vec<(u64, Value)> {
    events
        .iter()
        .filter(|e| e.kind == EventKind::Wire)
        .filter_map(|e| record_message(&e.data).map(|m| (e.id, serde_json::from_str(m.get()).unwrap_or(Value::Null))))
        .collect()
}

/// The ids of the kept answers `events` record (`answer_kept` notifications).
fn kept_ids(events: &[Event]) -> Vec<String> {
    wire_messages(events)
        .into_iter()
        .filter(|(_, m)| m["type"] == "Notification" && m["payload"]["type"] == "answer_kept")
        .filter_map(|(_, m)| m["payload"]["payload"]["response_id"].as_str().map(str::to_owned))
        .collect()
}

fn check(w: &World) -> Result<(), String> {
    if let Some(server) = &w.server {
        if let Some(why) = server.borrow().broken.first() {
            return Err(why.clone());
        }
    }
    // Ids told: up by one, never repeated.
    for pair in w.client.told.windows(2) {
        if pair[1].id != pair[0].id + 1 {
            return Err(format!("event ids told out of order: {} then {}", pair[0].id, pair[1].id));
        }
    }
    if let Some(first) = w.client.told.first() {
        if first.id != 1 {
            return Err(format!("the first event told is {}", first.id));
        }
    }
    // What the store holds is what was told, and a client resuming from any id gets the rest.
    let s = Session::open(w.store.stored(), w.limits.clone(), w.now());
    let kept = s.events_after(0);
    for e in &kept {
        match w.client.told.iter().find(|t| t.id == e.id) {
            Some(t) if t == e => {}
            Some(_) => return Err(format!("event {} told differs from the stored one", e.id)),
            None => return Err(format!("event {} stored was never told", e.id)),
        }
    }
    if let (Some(first), Some(last)) = (kept.first(), w.client.told.last()) {
        // From the start of what is kept, from the end, and from ids picked by the seed.
        let mut r = Rng::new(w.seed);
        let span = last.id - (first.id - 1) + 1;
        let picks = [first.id - 1, last.id].into_iter().chain((0..6).map(|_| first.id - 1 + r.below(span)));
        for after in picks {
            let rest = s.events_after(after);
            let told: Vec<&Event> = w.client.told.iter().filter(|e| e.id > after).collect();
            if rest.len() != told.len() || rest.iter().zip(&told).any(|(a, b)| a != *b) {
                return Err(format!(
                    "a client resuming after {after} gets {} events, not the {} told",
                    rest.len(),
                    told.len()
                ));
            }
        }
    }
    // No non-idempotent tool started twice; a refused approval never acted on.
    let mut starts: HashMap<(String, String), u32> = HashMap::new();
    for (tool, id, what) in w.ledger.borrow().iter() {
        if what == "start" {
            *starts.entry((tool.clone(), id.clone())).or_default() += 1;
        }
    }
    for ((tool, id), n) in &starts {
        if ["charge", "pay", "book", "fix"].contains(&tool.as_str()) && *n > 1 {
            return Err(format!("{tool} {id} started {n} times"));
        }
    }
    let all = wire_messages(&w.client.told);
    // A call answered "did not run" never started (a death is judged by what was recorded).
    for (_, m) in &all {
        let p = &m["payload"];
        if m["type"] == "ToolResult"
            && p["return_value"]["message"].as_str().is_some_and(|t| t.starts_with("The tool did not run"))
        {
            let id = p["tool_call_id"].as_str().unwrap_or("");
            if w.ledger.borrow().iter().any(|(_, call, what)| call == id && what == "start") {
                return Err(format!("{id} is answered \"did not run\" but its tool started"));
            }
        }
    }
    let mut request_call: HashMap<String, (String, String)> = HashMap::new();
    let mut first_answer: HashMap<String, String> = HashMap::new();
    let mut for_session: HashSet<String> = HashSet::new();
    for (_, m) in &all {
        let p = &m["payload"];
        if m["type"] == "ApprovalRequest" {
            let (call, action) = (p["tool_call_id"].as_str().unwrap_or(""), p["action"].as_str().unwrap_or(""));
            request_call.insert(p["id"].as_str().unwrap_or("").into(), (call.into(), action.into()));
        }
        if m["type"] == "ApprovalResponse" {
            let rid = p["request_id"].as_str().unwrap_or("").to_owned();
            if let Some((call, action)) = request_call.get(&rid) {
                let response = p["response"].as_str().unwrap_or("");
                first_answer.entry(call.clone()).or_insert_with(|| response.into());
                if response == "approve_for_session" {
                    for_session.insert(action.clone());
                }
            }
        }
    }
    for (tool, id, what) in w.ledger.borrow().iter() {
        let answer = first_answer.get(id).map(String::as_str);
        if (tool == "ask" || tool == "book" || tool == "fix") && what == "effect" && answer == Some("reject") {
            return Err(format!("{tool} {id} acted after its approval was refused"));
        }
        // The sub-agent's `fix`, asked before it starts (even seeds), starts only when approved.
        if tool == "fix"
            && what == "start"
            && w.seed.is_multiple_of(2)
            && !matches!(answer, Some("approve") | Some("approve_for_session"))
            && !for_session.contains("fix")
        {
            return Err(format!("fix {id} started without an approval (answer: {answer:?})"));
        }
        // Asked before it starts: nothing of it runs unless approved.
        let approved = matches!(answer, Some("approve") | Some("approve_for_session"))
            || (answer.is_none() && for_session.contains("pay"));
        if tool == "pay" && what == "start" && !approved {
            return Err(format!("pay {id} started without an approval (answer: {answer:?})"));
        }
    }
    // A pay call (asks before it starts) that was never asked, with pay not approved for the
    // session, never started: answering it "interrupted … may have taken effect" is false, and
    // makes the model (or the person) check for a payment that cannot have happened.
    let calls: HashMap<&str, &str> = all
        .iter()
        .filter(|(_, m)| m["type"] == "ToolCall")
        .map(|(_, m)| {
            (m["payload"]["id"].as_str().unwrap_or(""), m["payload"]["function"]["name"].as_str().unwrap_or(""))
        })
        .collect();
    let asked: HashSet<&str> = request_call.values().map(|(call, _)| call.as_str()).collect();
    for (_, m) in &all {
        let p = &m["payload"];
        let id = p["tool_call_id"].as_str().unwrap_or("");
        if m["type"] == "ToolResult"
            && calls.get(id) == Some(&"pay")
            && !asked.contains(id)
            && !for_session.contains("pay")
            && p["return_value"]["message"].as_str().is_some_and(|t| t.starts_with("The tool call was interrupted"))
        {
            return Err(format!("pay {id} was never asked, so it never started, yet it is answered interrupted"));
        }
    }
    // A sub-agent's question is never left open: by its turn's end it is answered (by the client,
    // waiting again under its id after a death) or closed refused with its call.
    let mut open: Vec<String> = Vec::new();
    for (_, m) in &all {
        let p = &m["payload"];
        match m["type"].as_str() {
            Some("TurnBegin") => {
                if let Some(id) = open.first() {
                    return Err(format!("the sub-agent question {id} was never closed"));
                }
            }
            Some("ApprovalRequest") if p.get("agent_id").is_some() => open.push(p["id"].as_str().unwrap_or("").into()),
            Some("ApprovalResponse") => open.retain(|o| p["request_id"].as_str() != Some(o)),
            _ => {}
        }
    }
    if let Some(id) = open.first() {
        return Err(format!("the sub-agent question {id} was never closed"));
    }
    // A sub-agent goes on after a death, never begins again: each delegate call's sub-agent
    // begins its task once (and the summary's continuation once), whatever died in between.
    let mut begun: HashMap<String, u32> = HashMap::new();
    for (_, m) in &all {
        if m["type"] == "SubagentEvent" && m["payload"]["event"]["type"] == "TurnBegin" {
            let task = m["payload"]["event"]["payload"]["user_input"].as_str().unwrap_or("");
            if task.starts_with("help with") {
                *begun.entry(m["payload"]["parent_tool_call_id"].as_str().unwrap_or("").into()).or_default() += 1;
            }
        }
    }
    if let Some((call, n)) = begun.iter().find(|(_, n)| **n > 1) {
        return Err(format!("delegate {call}'s sub-agent began its task {n} times"));
    }
    // Turns: each stored turn has one end; an acknowledged cancel ends its turn cancelled.
    let ends: Vec<(u64, TurnOutcome)> = w
        .client
        .told
        .iter()
        .filter(|e| e.kind == EventKind::End)
        .map(|e| (e.id, TurnOutcome::from_json(&e.data).expect("an end")))
        .collect();
    if s.running() {
        return Err("a turn is still running at the end".into());
    }
    if ends.len() as u32 != s.turns() {
        return Err(format!("{} turns and {} ends", s.turns(), ends.len()));
    }
    for t in &w.client.cancel_acked {
        let Some((_, o)) = ends.get(*t as usize - 1) else { return Err(format!("turn {t} has no end")) };
        if o.outcome != Outcome::Cancelled {
            return Err(format!("turn {t}'s cancel was acknowledged and it ended {:?}", o.outcome));
        }
    }
    // On the wire, per turn: every call has exactly one result.
    let mut turn_start = 0usize;
    let mut turns: Vec<&[(u64, Value)]> = Vec::new();
    for (i, (_, m)) in all.iter().enumerate() {
        if m["type"] == "TurnBegin" && i > turn_start {
            turns.push(&all[turn_start..i]);
            turn_start = i;
        }
    }
    turns.push(&all[turn_start..]);
    for t in turns {
        let mut results: HashMap<String, u32> = HashMap::new();
        let mut calls: Vec<String> = Vec::new();
        let mut voided: Vec<String> = Vec::new();
        for (_, m) in t {
            match m["type"].as_str() {
                Some("ToolCall") => calls.push(m["payload"]["id"].as_str().unwrap_or("").into()),
                Some("ToolResult") => {
                    *results.entry(m["payload"]["tool_call_id"].as_str().unwrap_or("").into()).or_default() += 1
                }
                // A failed attempt's parts are void (a UI drops them at the retry, or at the
                // interruption that ends the turn): a call it showed never started.
                Some("StepRetry") | Some("StepInterrupted") => {
                    voided.extend(calls.drain(..).filter(|c| !results.contains_key(c)))
                }
                _ => {}
            }
        }
        for c in &calls {
            if results.get(c).copied().unwrap_or(0) != 1 {
                return Err(format!("call {c} has {} results on the wire", results.get(c).copied().unwrap_or(0)));
            }
        }
        for (c, n) in &results {
            if *n != 1 {
                return Err(format!("call {c} has {n} results on the wire"));
            }
        }
    }
    // The history: a valid conversation.
    let history = s.context().history().to_vec();
    let mut ids_seen: HashSet<String> = HashSet::new();
    let mut i = 0;
    while i < history.len() {
        let m = &history[i];
        if m.role == Role::Tool {
            return Err(format!("a tool message at {i} answers no call just before it"));
        }
        let calls: Vec<String> = m.tool_calls.iter().flatten().map(|c| c.id.clone()).collect();
        i += 1;
        let mut answered: Vec<String> = Vec::new();
        while i < history.len() && history[i].role == Role::Tool {
            answered.push(history[i].tool_call_id.clone().unwrap_or_default());
            i += 1;
        }
        let mut a = answered.clone();
        a.sort();
        let mut c = calls.clone();
        c.sort();
        if a != c {
            return Err(format!("calls {calls:?} answered by {answered:?} in the history"));
        }
        for id in calls {
            if !ids_seen.insert(id.clone()) {
                return Err(format!("call id {id} twice in the history"));
            }
        }
    }
    // Each assistant message says what the model wrote for its step, once: its text is the
    // start of that step's answer (all of it, unless the round was cut), never more.
    let mut turn = 0u32;
    let mut step = 0u32;
    for m in &history {
        match m.role {
            Role::User if m.tool_call_id.is_none() => {
                (turn, step) = turn_and_step(std::slice::from_ref(m));
                step -= 1;
            }
            Role::Assistant => {
                step += 1;
                let text: String = m
                    .content
                    .iter()
                    .filter_map(|p| match p {
                        kosong_wasm::engine::message::ContentPart::Text { text, .. } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let script = script_for(w.seed, turn, step);
                let whole = script.lines().next().and_then(|l| l.strip_prefix("text: ")).unwrap_or("");
                if !whole.starts_with(&text) {
                    return Err(format!("turn {turn} step {step} says {text:?}, not (the start of) {whole:?}"));
                }
            }
            _ => {}
        }
    }
    let _ = StreamedMessagePart::Content;
    Ok(())
}

fn report(seed: u64, bug: Option<u8>, why: &str) -> String {
    let feature = if bug.is_some() { " --features planted-bugs" } else { "" };
    format!("seed {seed} fails: {why}\nreplay: SIM_SEED={seed}{} cargo test{feature} --test session_sim replay -- --nocapture", bug.map_or(String::new(), |b| format!(" SIM_BUG={b}")))
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The seeds in four parts, which the test runner runs at once on as many cores.
fn seeds(part: u64) {
    let total = env_u64("SIM_SEEDS").unwrap_or(SEEDS);
    let n = total / 4 + u64::from(part < total % 4);
    let from = env_u64("SIM_FROM").unwrap_or(0) + part * (total / 4) + part.min(total % 4);
    let mut faults = 0u64;
    let mut lives = 0u64;
    let mut reads = 0u64;
    let mut resumed = 0u64;
    for seed in from..from + n {
        let (w, r) = run(seed, None);
        if let Err(why) = r {
            panic!("{}", report(seed, None, &why));
        }
        lives += w.lives as u64;
        faults += w.plan.faults.len() as u64;
        reads += w.server.as_ref().map_or(0, |s| s.borrow().reads.len() as u64);
        resumed += wire_messages(&w.client.told)
            .iter()
            .filter(|(_, m)| m["type"] == "SubagentEvent" && m["payload"]["event"]["payload"]["type"] == "turn_resumed")
            .count() as u64;
    }
    eprintln!(
        "session_sim: {n} seeds from {from}: {lives} lives, {faults} planned faults, {reads} kept answers read again, \
         {resumed} sub-agent turns resumed"
    );
}

#[test]
fn seeds_1() {
    seeds(0)
}
#[test]
fn seeds_2() {
    seeds(1)
}
#[test]
fn seeds_3() {
    seeds(2)
}
#[test]
fn seeds_4() {
    seeds(3)
}

/// Seeds past the default run that once failed, run every time: 13484, 112174 and 152439 (a
/// recovered turn reading its kept answer again: a whole last call left open, a failed read that
/// voided calls a dead runtime may have started), 79437 (a cancel while a recovered round's
/// `needsApproval` was still deciding: its calls left without results), 443019 (an approval
/// answered again while a recovered turn read its kept answer, before the request waited again).
/// 8356 (a sub-agent's `approve_for_session` answered after a death, on a question a dead life
/// asked: not kept with the session, so the next life asked its tool's next call again and ran it
/// twice), 207184 and 223599 (a cancel right after a recovery, before the sub-agent whose call
/// goes on waited on its question again: the question was left open).
const REGRESSIONS: [u64; 8] = [8356, 13484, 79437, 112174, 152439, 207184, 223599, 443019];

#[test]
fn regressions() {
    for seed in REGRESSIONS {
        if let Err(why) = run(seed, None).1 {
            panic!("{}", report(seed, None, &why));
        }
    }
}

/// `SIM_SEED=n`: runs one seed and prints its schedule.
#[test]
fn replay() {
    let Some(seed) = env_u64("SIM_SEED") else { return };
    let bug = env_u64("SIM_BUG").map(|b| b as u8);
    let (w, r) = run(seed, bug);
    eprintln!("{}", w.log.join("\n"));
    eprintln!(
        "plan: {} turns, faults {:?}, cancels {:?}, model faults {}",
        w.plan.turns, w.plan.faults, w.plan.cancels, w.plan.model_faults
    );
    if std::env::var("SIM_EVENTS").is_ok() {
        for e in &w.client.told {
            eprintln!("  {} {:?} {}", e.id, e.kind, &e.data.chars().take(220).collect::<String>());
        }
    }
    eprintln!("verdict: {r:?}");
}

/// Each planted bug is caught by some seed (the first is reported): the harness is trusted only
/// because it fails on these.
#[cfg(feature = "planted-bugs")]
#[test]
fn planted_bugs_are_caught() {
    use kosong_wasm::engine::session::planted::ALL;
    let mut found = Vec::new();
    for (i, bug) in ALL.iter().enumerate() {
        let hit = (0..20_000u64).find(|&seed| run(seed, Some(i as u8)).1.is_err());
        let seed = hit.unwrap_or_else(|| panic!("{bug:?} was not caught in 20,000 seeds"));
        let why = run(seed, Some(i as u8)).1.unwrap_err();
        found.push(format!("{bug:?}: seed {seed} (SIM_SEED={seed} SIM_BUG={i}): {}", why.lines().next().unwrap_or("")));
    }
    eprintln!("{}", found.join("\n"));
}
