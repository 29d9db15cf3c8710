// Writes vendor/serde_core: serde_core as crates.io publishes it (the version serde pins, its
// .crate checked against the SHA-256 Cargo.lock had for it), with the edits below and nothing
// else. `[patch.crates-io]` in Cargo.toml builds it in place of the registry's copy.
//
// Why: `serde_core::de::Unexpected`'s Display writes a float with core's float formatting
// (Grisu and Dragon with their tables, and `{:.N}`'s exact mode beside the shortest: ~23 KB of
// .wasm, −10.4 KB gzip measured). serde_json never reaches that arm — its own `JsonUnexpected`
// writes a float with ryu before it hands the other kinds to this Display — but the arm is code
// in the same function, so every build carried it. The edit writes that (unreachable) arm
// without formatting the number; what a user reads in an error is serde_json's, unchanged
// (`cargo test`: `an_unexpected_float_is_told_as_serde_json_tells_it`).
//
// When serde moves to a new version this patch is no longer used (cargo says so, the build
// refuses — scripts/build.mjs — and the size budget in tests/js/packed.test.mjs would fail): set
// VERSION and SHA256 (Cargo.lock's serde_core checksum after `cargo update -p serde`, with the
// patch taken out of Cargo.toml) and run `node scripts/vendor-serde-core.mjs`. It stops if an
// edit's text is not found exactly once.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const VERSION = "1.0.229";
const SHA256 = "67dca2c9c51e58a4791a4b1ed58308b39c64224d349a935ab5039aa360942a48";

const EDITS = [
  {
    file: "src/de/mod.rs",
    from: 'Float(f) => write!(formatter, "floating point `{}`", WithDecimalPoint(f)),',
    to: '// kosong-wasm: not `{}` of an f64 (core\'s float formatting); serde_json writes its floats itself.\n            Float(_) => formatter.write_str("floating point"),',
  },
  {
    // The struct only that arm used (left, it would warn: a path dependency's lints are not capped).
    file: "src/de/mod.rs",
    from: /\nstruct WithDecimalPoint\(f64\);\n\nimpl Display for WithDecimalPoint \{\n[\s\S]*?\n\}\n/,
    to: "\n",
  },
  {
    // A path dependency's lints are not capped as a registry one's are: on wasm32 `std::ffi`'s
    // re-export is unused, which this crate denies (an error, then a warning on every build).
    file: "src/lib.rs",
    from: "#![deny(missing_docs, unused_imports)]",
    to: "#![deny(missing_docs)]\n#![allow(unused_imports)] // kosong-wasm: see scripts/vendor-serde-core.mjs",
  },
];

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "vendor", "serde_core");

const url = `https://static.crates.io/crates/serde_core/serde_core-${VERSION}.crate`;
console.error(`fetching ${url}`);
const res = await fetch(url);
if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
const crate = Buffer.from(await res.arrayBuffer());
const sum = createHash("sha256").update(crate).digest("hex");
if (sum !== SHA256) throw new Error(`serde_core-${VERSION}.crate: SHA-256 ${sum}, expected ${SHA256}`);

const tmp = mkdtempSync(join(tmpdir(), "serde_core-"));
try {
  writeFileSync(join(tmp, "c.tar.gz"), crate);
  execFileSync("tar", ["-xzf", join(tmp, "c.tar.gz"), "-C", tmp]);
  rmSync(out, { recursive: true, force: true });
  // Copied, not renamed: the temporary directory may be on another filesystem.
  cpSync(join(tmp, `serde_core-${VERSION}`), out, { recursive: true });
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
// Not needed to build it: the crate's own lock file (a dependency's is ignored) and VCS note.
for (const f of ["Cargo.lock", ".cargo_vcs_info.json", ".cargo-ok"]) rmSync(join(out, f), { force: true });

for (const { file, from, to } of EDITS) {
  const path = join(out, file);
  const text = readFileSync(path, "utf8");
  const hits = typeof from === "string" ? text.split(from).length - 1 : (text.match(new RegExp(from.source, "g")) ?? []).length;
  if (hits !== 1) throw new Error(`vendor/serde_core/${file}: the text to edit is found ${hits} times, not once (serde_core ${VERSION}): ${from}`);
  writeFileSync(path, text.replace(from, to));
}
console.error(`vendor/serde_core: serde_core ${VERSION} with ${EDITS.length} edits`);
