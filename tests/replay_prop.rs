//! Property tests of an answer read again (`engine::replay::Replay`): whatever part of an answer a
//! dead runtime recorded, and however the two readings cut the answer into parts, the message a
//! recovered turn ends with is the answer's, each byte once; and another answer is refused.

use proptest::prelude::*;

use kosong_wasm::engine::generate::MessageAssembler;
use kosong_wasm::engine::message::{ContentPart, FunctionBody, StreamedMessagePart, ToolCall, ToolCallPart};
use kosong_wasm::engine::replay::Replay;

/// One piece of an answer: text, thinking, or a call (id, name, arguments).
#[derive(Clone, Debug)]
enum Atom {
    Text(String),
    Think(String),
    Call(String, String, String),
}

fn atom() -> impl Strategy<Value = Atom> {
    // Multi-byte characters included: a cut never falls inside one (parts are strings).
    let text = "[a-zé漢🙂 ]{1,24}";
    prop_oneof![
        text.prop_map(Atom::Text),
        text.prop_map(Atom::Think),
        ("[a-z]{1,6}", "[a-z]{0,20}").prop_map(|(name, arg)| Atom::Call(
            String::new(),
            name,
            format!("{{\"a\":\"{arg}\"}}")
        )),
    ]
}

/// An answer, its calls numbered.
fn answer() -> impl Strategy<Value = Vec<Atom>> {
    prop::collection::vec(atom(), 1..8).prop_map(|mut atoms| {
        for (i, a) in atoms.iter_mut().enumerate() {
            if let Atom::Call(id, _, _) = a {
                *id = format!("call_{i}");
            }
        }
        atoms
    })
}

/// `s` cut at char boundaries chosen by `cuts` (each a fraction of the length).
fn pieces(s: &str, cuts: &[u8]) -> Vec<String> {
    let bounds: Vec<usize> = s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
    let mut at: Vec<usize> = cuts.iter().map(|c| bounds[*c as usize % bounds.len()]).collect();
    at.push(0);
    at.push(s.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| s[w[0]..w[1]].to_owned()).collect()
}

/// The answer as a stream of parts, cut as `cuts` says; a call's fragments name their call or not
/// (`named`), as formats do.
fn parts(answer: &[Atom], cuts: &[u8], named: bool) -> Vec<StreamedMessagePart> {
    let mut out = Vec::new();
    for (k, a) in answer.iter().enumerate() {
        let c = &cuts[k % cuts.len().max(1)..];
        match a {
            Atom::Text(t) => out.extend(
                pieces(t, c)
                    .into_iter()
                    .map(|t| StreamedMessagePart::Content(ContentPart::Text { text: t, extras: None })),
            ),
            Atom::Think(t) => out.extend(
                pieces(t, c)
                    .into_iter()
                    .map(|t| StreamedMessagePart::Content(ContentPart::Think { think: t, encrypted: None })),
            ),
            Atom::Call(id, name, args) => {
                let mut ps = pieces(args, c).into_iter();
                out.push(StreamedMessagePart::ToolCall(ToolCall {
                    kind: Default::default(),
                    id: id.clone(),
                    function: FunctionBody { name: name.clone(), arguments: ps.next() },
                    extras: None,
                }));
                out.extend(ps.map(|a| {
                    StreamedMessagePart::ToolCallPart(ToolCallPart {
                        arguments_part: Some(a),
                        tool_call_id: named.then(|| id.clone()),
                    })
                }));
            }
        }
    }
    out
}

fn message(parts: &[StreamedMessagePart]) -> String {
    let mut a = MessageAssembler::new();
    for p in parts {
        a.try_push(p.clone()).unwrap();
    }
    serde_json::to_string(&a.into_message()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A prefix of one reading recorded, the whole of another read again: the message is the
    /// answer's, as if read once.
    #[test]
    fn what_was_recorded_is_never_told_twice(
        answer in answer(),
        cuts_a in prop::collection::vec(any::<u8>(), 1..12),
        cuts_b in prop::collection::vec(any::<u8>(), 1..12),
        named_a in any::<bool>(),
        named_b in any::<bool>(),
        upto in any::<prop::sample::Index>(),
    ) {
        let first = parts(&answer, &cuts_a, named_a);
        let again = parts(&answer, &cuts_b, named_b);
        let recorded = &first[..upto.index(first.len() + 1)];
        let mut round = MessageAssembler::new();
        let mut replay = Replay::default();
        for p in recorded {
            round.try_push(p.clone()).unwrap();
            replay.record(p);
        }
        for p in again.iter().cloned() {
            if let Some(rest) = replay.part(p).unwrap() {
                round.try_push(rest).unwrap();
            }
        }
        prop_assert_eq!(serde_json::to_string(&round.into_message()).unwrap(), message(&again));
    }

    /// An answer read again that is not the recorded one (a byte of what was recorded changed)
    /// is refused, never merged.
    #[test]
    fn another_answer_is_refused(
        answer in answer(),
        cuts in prop::collection::vec(any::<u8>(), 1..12),
        at in any::<prop::sample::Index>(),
    ) {
        let first = parts(&answer, &cuts, true);
        let mut replay = Replay::default();
        for p in &first {
            replay.record(p);
        }
        // Change one piece of the answer read again (all of it was recorded): the first character
        // of a text, of thinking, or of a fragment of a call's arguments.
        let mut again = first.clone();
        let i = at.index(again.len());
        let changed = match &mut again[i] {
            StreamedMessagePart::Content(ContentPart::Text { text: t, .. })
            | StreamedMessagePart::Content(ContentPart::Think { think: t, .. })
            | StreamedMessagePart::ToolCallPart(ToolCallPart { arguments_part: Some(t), .. }) => {
                let rest: String = t.chars().skip(1).collect();
                *t = format!("!{rest}");
                true
            }
            _ => false,
        };
        prop_assume!(changed);
        let refused = again.into_iter().try_for_each(|p| replay.part(p).map(|_| ())).is_err();
        prop_assert!(refused);
    }
}
