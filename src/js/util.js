// Small helpers shared by the JS layer's modules.

/** Waits `ms`, or rejects with the signal's reason the moment it aborts; leaves nothing behind. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Settles with `promise`, or after `ms` with `undefined`; the timer is cleared either way. */
export async function within(promise, ms) {
  let timer;
  try {
    return await Promise.race([promise, new Promise((r) => (timer = setTimeout(r, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
