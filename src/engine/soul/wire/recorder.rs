//! The recorder: the merged messages of a wire written as `wire.jsonl` lines through a sink.

use super::jsonl::{metadata_line, record_line};
use super::WireMessage;

/// Writes the merged messages of a wire as `wire.jsonl` lines through a sink.
pub struct Recorder {
    sink: Box<dyn FnMut(String)>,
    now_s: Box<dyn Fn() -> f64>,
    wrote_header: bool,
    pub(super) count: u64,
}

impl Recorder {
    /// `now_s` gives the timestamp of each record, in seconds.
    pub fn new(sink: Box<dyn FnMut(String)>, now_s: Box<dyn Fn() -> f64>) -> Recorder {
        Recorder { sink, now_s, wrote_header: false, count: 0 }
    }

    /// A recorder that goes on with a recording already begun (its metadata line is written):
    /// a recovered turn's.
    pub fn appending(sink: Box<dyn FnMut(String)>, now_s: Box<dyn Fn() -> f64>) -> Recorder {
        Recorder { sink, now_s, wrote_header: true, count: 0 }
    }

    pub(super) fn write(&mut self, m: &WireMessage) {
        if !self.wrote_header {
            self.wrote_header = true;
            (self.sink)(metadata_line());
        }
        let line = record_line((self.now_s)(), m);
        (self.sink)(line);
        self.count += 1;
    }
}
