//! The events of one opened request: a response body decoded by its provider's decoder, or a
//! script streamed as it is. Errors leave cleaned of the request's secrets.

use crate::engine::generate::{ByteSource, EventSource, Limits, SseEventSource, VecEventSource};
use crate::engine::message::TokenUsage;
use crate::engine::providers::{StreamDecoder, StreamEvent};
use crate::engine::secrets::Secrets;

use super::ModelError;

pub enum ModelSource<B: ByteSource> {
    Sse { source: Box<SseEventSource<B, Box<dyn StreamDecoder>>>, secrets: Secrets },
    Scripted(VecEventSource<B::Error>),
}

impl<B: ByteSource> EventSource for ModelSource<B>
where
    B::Error: ModelError,
{
    type Error = B::Error;

    async fn next_batch(&mut self, out: &mut Vec<StreamEvent>) -> Result<bool, B::Error> {
        match self {
            ModelSource::Sse { source, secrets } => source.next_batch(out).await.map_err(|e| e.redact(secrets)),
            ModelSource::Scripted(s) => s.next_batch(out).await,
        }
    }
    fn id(&self) -> Option<String> {
        match self {
            ModelSource::Sse { source, .. } => source.id(),
            ModelSource::Scripted(s) => s.id(),
        }
    }
    fn usage(&self) -> Option<TokenUsage> {
        match self {
            ModelSource::Sse { source, .. } => source.usage(),
            ModelSource::Scripted(s) => s.usage(),
        }
    }
    fn finish_reason(&self) -> Option<String> {
        match self {
            ModelSource::Sse { source, .. } => source.finish_reason(),
            ModelSource::Scripted(s) => s.finish_reason(),
        }
    }
    fn limits(&self) -> Limits {
        match self {
            ModelSource::Sse { source, .. } => source.limits(),
            ModelSource::Scripted(s) => s.limits(),
        }
    }
    fn buffered(&self) -> bool {
        match self {
            ModelSource::Sse { source, .. } => source.buffered(),
            ModelSource::Scripted(s) => s.buffered(),
        }
    }
    fn resumable(&self) -> Option<&str> {
        match self {
            ModelSource::Sse { source, .. } => source.resumable(),
            ModelSource::Scripted(_) => None,
        }
    }
    fn join_parts(&mut self, join: bool) {
        if let ModelSource::Sse { source, .. } = self {
            source.join_parts(join)
        }
    }
}
