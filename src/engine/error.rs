//! Errors a chat provider reports, as kosong classifies them. The JS glue turns each into the
//! `Error` subclass of the same name.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatProviderError {
    /// The request never got an answer: refused connection, DNS, reset mid-stream.
    Connection(String),
    /// The server redirected the request to another origin, where nothing was sent (a key or the
    /// conversation never leaves the origin the caller named). An `APIConnectionError` of kind
    /// `redirect`; never retried.
    Redirect(String),
    /// No response headers, or no stream bytes, within the configured time.
    Timeout(String),
    /// The model answered nothing usable.
    EmptyResponse(String),
    /// The server answered with an HTTP error status.
    Status { status: u16, message: String, request_id: Option<String>, retry_after_ms: Option<u64> },
    /// A failure of the kind named: a malformed or truncated stream, a limit, an error event…
    Failed { kind: FailureKind, message: String },
    /// The answer is not the structured output asked for (`output`): not JSON, or refused by the
    /// caller's validator. `text` is the answer's text. Kind `malformed_output`; never retried.
    MalformedOutput { message: String, text: String },
    /// Anything else (a bad script, a missing `fetch`).
    Other(String),
}

/// What went wrong, for a program to tell failures apart without reading their text (the JS
/// errors' `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The server sent something that is not its wire format.
    Malformed,
    /// The stream ended before the model finished its answer.
    Truncated,
    /// A limit (`limits.*`) was passed.
    Limit,
    /// The server reported an error inside the stream.
    Server,
    /// The history or the options cannot be sent to this provider.
    InvalidRequest,
    /// The model refused to answer; the message is its refusal. Not worth a retry.
    Refused,
    /// The provider's own host needs an API key and none was given or found in the environment;
    /// nothing was sent.
    MissingKey,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Malformed => "malformed",
            FailureKind::Truncated => "truncated",
            FailureKind::Limit => "limit",
            FailureKind::Server => "server",
            FailureKind::InvalidRequest => "invalid_request",
            FailureKind::Refused => "refused",
            FailureKind::MissingKey => "missing_key",
        }
    }
}

/// Every [`ChatProviderError::kind`], in the order docs/errors.md lists them.
pub const ERROR_KINDS: &[&str] = &[
    "status",
    "connection",
    "redirect",
    "timeout",
    "empty",
    "malformed",
    "truncated",
    "limit",
    "server",
    "invalid_request",
    "refused",
    "missing_key",
    "malformed_output",
    "other",
];

impl ChatProviderError {
    /// The JavaScript class name of this error.
    pub fn class_name(&self) -> &'static str {
        match self {
            ChatProviderError::Connection(_) | ChatProviderError::Redirect(_) => "APIConnectionError",
            ChatProviderError::Timeout(_) => "APITimeoutError",
            ChatProviderError::EmptyResponse(_) => "APIEmptyResponseError",
            ChatProviderError::Status { .. } => "APIStatusError",
            ChatProviderError::Failed { .. }
            | ChatProviderError::MalformedOutput { .. }
            | ChatProviderError::Other(_) => "ChatProviderError",
        }
    }

    /// An HTTP error status, worded as kosong words it: `Error code: {status} - {detail}`.
    pub fn status(status: u16, detail: String, request_id: Option<String>, retry_after_ms: Option<u64>) -> Self {
        ChatProviderError::Status {
            status,
            message: format!("Error code: {status} - {detail}"),
            request_id,
            retry_after_ms,
        }
    }

    pub fn failed(kind: FailureKind, message: impl Into<String>) -> Self {
        ChatProviderError::Failed { kind, message: message.into() }
    }

    /// A machine-readable kind: `connection`, `timeout`, `empty`, `status`, a
    /// [`FailureKind`], or `other`.
    pub fn kind(&self) -> &'static str {
        match self {
            ChatProviderError::Connection(_) => "connection",
            ChatProviderError::Redirect(_) => "redirect",
            ChatProviderError::Timeout(_) => "timeout",
            ChatProviderError::EmptyResponse(_) => "empty",
            ChatProviderError::Status { .. } => "status",
            ChatProviderError::Failed { kind, .. } => kind.as_str(),
            ChatProviderError::MalformedOutput { .. } => "malformed_output",
            ChatProviderError::Other(_) => "other",
        }
    }

    /// The same error with every form of every secret (an API key, a credential header) replaced,
    /// in the message and the request id: servers do echo keys back in their error bodies.
    pub fn redact(self, secrets: &crate::engine::secrets::Secrets) -> Self {
        if secrets.is_empty() {
            return self;
        }
        let clean = |s: String| secrets.clean(s);
        match self {
            ChatProviderError::Connection(m) => ChatProviderError::Connection(clean(m)),
            ChatProviderError::Redirect(m) => ChatProviderError::Redirect(clean(m)),
            ChatProviderError::Timeout(m) => ChatProviderError::Timeout(clean(m)),
            ChatProviderError::EmptyResponse(m) => ChatProviderError::EmptyResponse(clean(m)),
            ChatProviderError::Other(m) => ChatProviderError::Other(clean(m)),
            ChatProviderError::Failed { kind, message } => ChatProviderError::Failed { kind, message: clean(message) },
            ChatProviderError::MalformedOutput { message, text } => {
                ChatProviderError::MalformedOutput { message: clean(message), text: clean(text) }
            }
            ChatProviderError::Status { status, message, request_id, retry_after_ms } => ChatProviderError::Status {
                status,
                message: clean(message),
                request_id: request_id.map(clean),
                retry_after_ms,
            },
        }
    }

    pub fn message(&self) -> &str {
        match self {
            ChatProviderError::Connection(m)
            | ChatProviderError::Redirect(m)
            | ChatProviderError::Timeout(m)
            | ChatProviderError::EmptyResponse(m)
            | ChatProviderError::Other(m) => m,
            ChatProviderError::Status { message, .. }
            | ChatProviderError::Failed { message, .. }
            | ChatProviderError::MalformedOutput { message, .. } => message,
        }
    }
}

impl std::fmt::Display for ChatProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.class_name(), self.message())
    }
}

impl std::error::Error for ChatProviderError {}

/// Parses `retry-after-ms` (milliseconds) or `Retry-After` (seconds; an HTTP date is not
/// interpreted here because the core has no clock: the glue passes `now_ms` for that).
pub fn parse_retry_after(retry_after_ms: Option<&str>, retry_after: Option<&str>, now_ms: Option<f64>) -> Option<u64> {
    // A number as JSON writes one, read by serde_json's parser (the .wasm has it anyway; core's
    // `f64` parser would add its own).
    let number = |v: &str| serde_json::from_str::<f64>(v).ok();
    if let Some(ms) = retry_after_ms.and_then(|v| number(v.trim())) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(ms.round() as u64);
        }
    }
    let v = retry_after?.trim();
    if let Some(s) = number(v) {
        if s.is_finite() && s >= 0.0 {
            return Some((s * 1000.0).round() as u64);
        }
        return None;
    }
    let when = parse_http_date_ms(v)?;
    let now = now_ms?;
    Some(if when > now { (when - now).round() as u64 } else { 0 })
}

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) to Unix milliseconds.
fn parse_http_date_ms(v: &str) -> Option<f64> {
    let mut it = v.split_whitespace();
    let _weekday = it.next()?;
    let day: i64 = it.next()?.parse().ok()?;
    let month = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = it.next()?.parse().ok()?;
    let mut hms = it.next()?.split(':').map(|x| x.parse::<i64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    let in_range = (1..=31).contains(&day) && (1970..=9999).contains(&year);
    if it.next()? != "GMT" || !in_range || !(0..=23).contains(&h) || !(0..=59).contains(&m) || !(0..=60).contains(&s) {
        return None;
    }
    // days from civil (Howard Hinnant's algorithm)
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(((days * 86400 + h * 3600 + m * 60 + s) * 1000) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::secrets::Secrets;

    #[test]
    fn redaction() {
        let e = ChatProviderError::Status {
            status: 401,
            message: "bad key sk-abc123 (sk-abc123)".into(),
            request_id: Some("sk-abc123".into()),
            retry_after_ms: None,
        };
        assert_eq!(
            e.redact(&Secrets::of_key("sk-abc123")),
            ChatProviderError::Status {
                status: 401,
                message: "bad key [redacted] ([redacted])".into(),
                request_id: Some("[redacted]".into()),
                retry_after_ms: None
            }
        );
        let e = ChatProviderError::Other("x".into());
        assert_eq!(e.clone().redact(&Secrets::of_key("")), e, "an empty key redacts nothing");
        assert_eq!(e.clone().redact(&Secrets::default()), e);
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after(Some("1500"), Some("9"), None), Some(1500));
        assert_eq!(parse_retry_after(None, Some("2"), None), Some(2000));
        assert_eq!(parse_retry_after(None, Some("0.5"), None), Some(500));
        assert_eq!(parse_retry_after(None, Some("soon"), Some(0.0)), None);
        assert_eq!(parse_retry_after(None, None, None), None);
        let now = parse_http_date_ms("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(now, 784111777000.0);
        assert_eq!(parse_retry_after(None, Some("Sun, 06 Nov 1994 08:49:40 GMT"), Some(now)), Some(3000));
    }
}
