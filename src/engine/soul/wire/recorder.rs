//! The recorder: the merged messages of a wire written as `wire.jsonl` lines through a sink.

use super::jsonl::{metadata_line, record_line};
use super::WireMessage;

/// A sink of messages with their lines.
pub type TypedSink = Box<dyn FnMut(&WireMessage, String)>;

/// Where the lines go: the text alone, or with the message it records (a session reads the
/// message's kind without parsing the line again).
enum Sink {
    Text(Box<dyn FnMut(String)>),
    Typed(TypedSink),
    /// The messages themselves, no line (a sub-agent's wire hands them to its parent's).
    Forward(Box<dyn FnMut(&WireMessage)>),
}

/// Writes the merged messages of a wire as `wire.jsonl` lines through a sink.
pub struct Recorder {
    sink: Sink,
    now_s: Box<dyn Fn() -> f64>,
    wrote_header: bool,
    pub(super) count: u64,
}

impl Recorder {
    /// `now_s` gives the timestamp of each record, in seconds.
    pub fn new(sink: Box<dyn FnMut(String)>, now_s: Box<dyn Fn() -> f64>) -> Recorder {
        Recorder { sink: Sink::Text(sink), now_s, wrote_header: false, count: 0 }
    }

    /// A recorder whose sink gets each message with its line, and no metadata line (the
    /// session that owns the recording writes its own header).
    pub fn typed(sink: TypedSink, now_s: Box<dyn Fn() -> f64>) -> Recorder {
        Recorder { sink: Sink::Typed(sink), now_s, wrote_header: true, count: 0 }
    }

    /// A recorder that hands each message on as it is, writing no line.
    pub fn forward(sink: Box<dyn FnMut(&WireMessage)>) -> Recorder {
        Recorder { sink: Sink::Forward(sink), now_s: Box::new(|| 0.0), wrote_header: true, count: 0 }
    }

    /// A recorder that goes on with a recording already begun (its metadata line is written):
    /// a recovered turn's.
    pub fn appending(sink: Box<dyn FnMut(String)>, now_s: Box<dyn Fn() -> f64>) -> Recorder {
        Recorder { sink: Sink::Text(sink), now_s, wrote_header: true, count: 0 }
    }

    pub(super) fn write(&mut self, m: &WireMessage) {
        self.count += 1;
        if let Sink::Forward(f) = &mut self.sink {
            return f(m);
        }
        let line = record_line((self.now_s)(), m);
        match &mut self.sink {
            Sink::Forward(_) => {}
            Sink::Text(sink) => {
                if !self.wrote_header {
                    self.wrote_header = true;
                    sink(metadata_line());
                }
                sink(line)
            }
            Sink::Typed(sink) => sink(m, line),
        }
    }
}
