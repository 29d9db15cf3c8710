//! One instance-wide memory budget for what in-flight calls hold (their answers and arguments as
//! they are assembled). A wasm32 instance has at most 4 GiB: many large answers streaming at once
//! would otherwise run it out of memory, a trap that breaks the instance for every call. With the
//! budget, the call whose growth would pass it fails with a `limit` error naming the budget, and
//! the others go on. The core is single-threaded: the budget is the thread's (the instance's).

use std::cell::Cell;

use crate::engine::error::{ChatProviderError, FailureKind};

/// The default budget: 1 GiB, a quarter of a wasm32 instance's 4 GiB, leaving room for the copies
/// an answer has beside its assembly (the SSE event being read, the JSON handed to JavaScript, the
/// wire's buffers) and for everything else the instance holds.
pub const DEFAULT_BUDGET_BYTES: usize = 1 << 30;

/// The budget and what is taken from it, side by side: a charge reads both with one access (it
/// runs for every streamed part).
struct Budget {
    limit: Cell<usize>,
    used: Cell<usize>,
}

thread_local! {
    static BUDGET: Budget = const { Budget { limit: Cell::new(DEFAULT_BUDGET_BYTES), used: Cell::new(0) } };
}

/// Sets the instance's budget (bytes).
pub fn set_limit(bytes: usize) {
    BUDGET.with(|b| b.limit.set(bytes));
}

pub fn limit() -> usize {
    BUDGET.with(|b| b.limit.get())
}

/// What every live [`Charge`] holds together.
pub fn used() -> usize {
    BUDGET.with(|b| b.used.get())
}

/// Bytes one holder has taken from the budget; given back when it is dropped.
#[derive(Debug, Default)]
pub struct Charge(usize);

impl Charge {
    /// Takes `n` more bytes, or fails (taking nothing) when that would pass the budget.
    pub fn grow(&mut self, n: usize) -> Result<(), ChatProviderError> {
        let taken = BUDGET.with(|b| {
            let used = b.used.get().saturating_add(n);
            let fits = used <= b.limit.get();
            if fits {
                b.used.set(used);
            }
            fits
        });
        if !taken {
            let limit = limit();
            return Err(ChatProviderError::failed(
                FailureKind::Limit,
                format!(
                    "the answers streaming at once would pass the instance's memory budget of {limit} bytes \
                     (setMemoryBudget); this one was stopped, the others go on"
                ),
            ));
        }
        self.0 += n;
        Ok(())
    }

    pub fn bytes(&self) -> usize {
        self.0
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        BUDGET.with(|b| b.used.set(b.used.get().saturating_sub(self.0)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_add_up_fail_past_the_limit_and_are_given_back() {
        set_limit(100);
        let mut a = Charge::default();
        let mut b = Charge::default();
        a.grow(60).unwrap();
        let e = b.grow(50).unwrap_err();
        assert_eq!(e.kind(), "limit");
        assert!(e.message().contains("memory budget of 100 bytes"));
        b.grow(40).unwrap();
        assert_eq!(used(), 100);
        drop(a);
        assert_eq!(used(), 40);
        b.grow(60).unwrap();
        drop(b);
        assert_eq!(used(), 0);
        set_limit(DEFAULT_BUDGET_BYTES);
    }
}
