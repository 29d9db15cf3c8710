// Copied beside the `test-hooks` build (pkg-test/), never shipped: breaks the instance on
// purpose (0 traps, 1 panics, 2 panics inside a task, 3 traps inside a task), through the guarded call path.
import { callWasm, wasm } from "./internal.js";

export function breakInstance(kind) {
  callWasm(() => wasm.__kosongTestTrap(kind));
}
