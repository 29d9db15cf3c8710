//! What must never leave the runtime in an error, a recording or a log: the API key, and every
//! header value or URL parameter a request carries that names itself a credential — each in the
//! forms servers echo them in (as is, URL-encoded, `\u`-escaped, base64 at any alignment, which
//! is how a `Basic`/`Bearer` header echoed as base64 looks).
//!
//! The rule is **clean, then cut**: a text is cleaned whole before it is shortened, and a text that
//! was already cut (an error body read up to its cap) loses a tail that begins a secret.

use crate::engine::providers::HttpRequest;

const REDACTED: &str = "[redacted]";
/// A secret shorter than this is not looked for (it would match ordinary words).
const MIN_SECRET: usize = 4;
/// A tail this long that begins a secret is cut off a text that was shortened.
const MIN_TAIL: usize = 4;

/// The secrets of one request, each as given (once, if it is long enough to be looked for). The
/// forms of each are made when a text is cleaned, not when the request is made: most requests
/// never fail, and the forms of a key (a `\u` escape a character, six base64 alignments) cost
/// about what building the request's body does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Secrets {
    given: Vec<String>,
}

/// A header whose value is a credential: `authorization`, `x-api-key`, `x-goog-api-key`, a cookie,
/// anything naming a key, token, secret, password or signature.
fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "password", "passwd", "cookie", "signature", "sig", "credential"]
        .iter()
        .any(|w| if *w == "sig" { n == "sig" } else { n.contains(w) })
}

impl Secrets {
    /// The request's secrets: `api_key`, the values of its credential headers (with the token after
    /// an auth scheme, `Bearer <token>`, on its own) and of its URL's credential parameters.
    pub fn of_request(api_key: Option<&str>, request: &HttpRequest) -> Secrets {
        let mut s = Secrets::default();
        if let Some(k) = api_key {
            s.add(k);
        }
        for (name, value) in &request.headers {
            if is_secret_name(name) {
                s.add(value);
                if let Some((_scheme, token)) = value.trim().split_once(' ') {
                    s.add(token.trim());
                }
            }
        }
        s.add_url_params(&request.url);
        s
    }

    /// One key's forms.
    pub fn of_key(key: &str) -> Secrets {
        let mut s = Secrets::default();
        s.add(key);
        s
    }

    /// The secrets in a URL's query string (`?key=…`, `&access_token=…`), as written and decoded.
    pub fn add_url_params(&mut self, url: &str) {
        let Some((_, query)) = url.split_once('?') else { return };
        let query = query.split('#').next().unwrap_or("");
        for pair in query.split('&') {
            if let Some((name, value)) = pair.split_once('=') {
                if is_secret_name(name) {
                    self.add(value);
                    self.add(&percent_decode(value));
                }
            }
        }
    }

    /// One secret, to be looked for in every form it may take.
    pub fn add(&mut self, secret: &str) {
        if secret.chars().count() < MIN_SECRET || self.given.iter().any(|g| g == secret) {
            return;
        }
        self.given.push(secret.to_owned());
    }

    pub fn is_empty(&self) -> bool {
        self.given.is_empty()
    }

    /// `text` with every form of every secret replaced by `[redacted]`.
    pub fn clean(&self, text: String) -> String {
        let mut text = text;
        for f in &forms_of(&self.given) {
            if text.contains(f.as_str()) {
                text = text.replace(f.as_str(), REDACTED);
            }
        }
        text
    }

    /// A text that was cut (read up to a cap): cleaned, then a tail that begins a secret is cut
    /// off too and marked, so no part of a secret cut in half survives.
    pub fn clean_cut(&self, text: String) -> String {
        let mut text = self.clean(text);
        for f in &forms_of(&self.given) {
            let longest = (f.len() - 1).min(text.len());
            let tail = (MIN_TAIL..=longest)
                .rev()
                .find(|&k| f.is_char_boundary(k) && text.is_char_boundary(text.len() - k) && text.ends_with(&f[..k]));
            if let Some(k) = tail {
                text.truncate(text.len() - k);
                text.push_str(REDACTED);
            }
        }
        text
    }
}

/// Every form of each secret, once, longest first: as is, URL-encoded, JSON-escaped, `\u`-escaped,
/// and base64 at each alignment.
fn forms_of(secrets: &[String]) -> Vec<String> {
    let mut forms = Vec::new();
    for secret in secrets {
        add_forms(&mut forms, secret);
    }
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms
}

fn add_forms(forms: &mut Vec<String>, secret: &str) {
    let mut push = |f: String| {
        if f.len() >= MIN_SECRET && !forms.contains(&f) {
            forms.push(f);
        }
    };
    push(secret.to_owned());
    push(crate::engine::providers::percent_encode(secret));
    if let Ok(json) = serde_json::to_string(secret) {
        push(json[1..json.len() - 1].to_owned());
    }
    push(secret.encode_utf16().map(|u| format!("\\u{u:04x}")).collect());
    push(secret.encode_utf16().map(|u| format!("\\u{u:04X}")).collect());
    // Base64 at each of the three alignments a secret can have inside a longer encoded text:
    // the characters that depend on the secret's bytes alone.
    if secret.len() >= 6 {
        for pad in 0..3 {
            for url_safe in [false, true] {
                push(base64_inner(secret.as_bytes(), pad, url_safe));
            }
        }
    }
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The base64 characters of `bytes` placed after `pad` other bytes, without those that also
/// depend on the bytes before or after it. (A redaction needs only this much of base64, so it is
/// written here rather than taken as a dependency.)
fn base64_inner(bytes: &[u8], pad: usize, url_safe: bool) -> String {
    let mut data = vec![0u8; pad];
    data.extend_from_slice(bytes);
    let total_bits = data.len() * 8;
    let first = (pad * 8).div_ceil(6);
    let last = total_bits / 6; // exclusive: a last character with bits past the end is left out
    (first..last)
        .map(|i| {
            let bit = i * 6;
            let (byte, shift) = (bit / 8, bit % 8);
            let hi = u16::from(data[byte]) << 8 | u16::from(data.get(byte + 1).copied().unwrap_or(0));
            let v = ((hi >> (10 - shift)) & 63) as usize;
            let c = STANDARD[v];
            match (url_safe, c) {
                (true, b'+') => '-',
                (true, b'/') => '_',
                _ => c as char,
            }
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).and_then(|&c| hex(c)), b.get(i + 2).and_then(|&c| hex(c))) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        // A plain encoder, for checking the inner forms against whole encodings.
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk.len();
            let v = u32::from(chunk[0]) << 16
                | u32::from(chunk.get(1).copied().unwrap_or(0)) << 8
                | u32::from(chunk.get(2).copied().unwrap_or(0));
            for i in 0..4 {
                if i <= n {
                    out.push(STANDARD[(v >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    fn req(headers: &[(&str, &str)], url: &str) -> HttpRequest {
        HttpRequest {
            method: Default::default(),
            url: url.into(),
            headers: headers.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
            body: String::new(),
        }
    }

    #[test]
    fn every_base64_echo_is_found() {
        let key = "sk-proj-0123456789abcdefghij";
        let s = Secrets::of_request(Some(key), &req(&[], "https://x"));
        for prefix in ["", "B", "Be", "Bearer ", "user:", "Basic x:"] {
            let echoed = b64(format!("{prefix}{key}").as_bytes());
            let clean = s.clean(format!("echo: {echoed}"));
            assert!(clean.contains(REDACTED), "{prefix:?}: {clean}");
            // What is left of the encoding cannot spell 8 characters of the key.
            assert!(clean.len() < echoed.len(), "{prefix:?}");
        }
    }

    #[test]
    fn headers_and_url_params_are_secrets() {
        let r = req(
            &[
                ("authorization", "Bearer tok-abcdef12345"),
                ("x-custom-key", "custom-secret-1"),
                ("accept", "text/plain"),
            ],
            "https://h/v1?key=AIzaSyA-1234567&alt=sse",
        );
        let s = Secrets::of_request(None, &r);
        let text = "tok-abcdef12345 custom-secret-1 AIzaSyA-1234567 text/plain".to_owned();
        assert_eq!(s.clean(text), "[redacted] [redacted] [redacted] text/plain");
    }

    #[test]
    fn a_key_cut_in_half_loses_its_start() {
        let key = "sk-ant-0123456789abcdefghijklm";
        let s = Secrets::of_request(Some(key), &req(&[], "https://x"));
        let cut = format!("{}{}", "x".repeat(40), &key[..17]);
        assert_eq!(s.clean_cut(cut), format!("{}[redacted]", "x".repeat(40)));
        // Escaped forms too.
        let escaped: String = key.encode_utf16().map(|u| format!("\\u{u:04x}")).collect();
        assert_eq!(s.clean(format!("a {escaped} b")), "a [redacted] b");
        assert_eq!(s.clean("a sk-ant-0123456789abcdefghijklm%20 b".into()), "a [redacted]%20 b");
    }

    #[test]
    fn short_values_and_unicode_do_not_panic() {
        let mut s = Secrets::default();
        s.add("abc");
        assert!(s.is_empty());
        s.add("ключ-секрет-é");
        assert_eq!(s.clean_cut("текст ключ-се".into()), "текст [redacted]");
        assert_eq!(percent_decode("a%2Fb%zz%"), "a/b%zz%");
    }
}
