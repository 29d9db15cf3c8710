#!/usr/bin/env node
// Every JavaScript and TypeScript snippet in README.md and docs/*.md, compiled by `tsc --strict`
// (JavaScript with `--checkJs`) against the package's own types, as a user who pastes it would.
// A snippet is a module of its own; the names a fragment uses without defining them (`tools`,
// `ui`, `signal`, …: what the text around it says the reader has) are declared once, typed, in
// the prelude below. `npm test` runs it; `node scripts/snippets.mjs` alone prints each error with
// the file and line of the Markdown it came from.
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "target", "snippets");

/** The snippets of one Markdown file: `{lang, code, line}` (line: the first code line's, 1-based). */
export function snippetsOf(text) {
  const found = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(js|ts|javascript|typescript|mjs)\s*$/.exec(lines[i]);
    if (!open) continue;
    const start = i + 1;
    while (++i < lines.length && !/^```\s*$/.test(lines[i]));
    found.push({ lang: open[1].startsWith("t") ? "ts" : "js", code: lines.slice(start, i).join("\n"), line: start + 1 });
  }
  return found;
}

const PRELUDE = `// The names the docs' fragments use as the text around them says the reader has them.
import type * as k from "kosong-wasm";
declare global {
  const tools: k.SimpleToolset;
  const toolset: k.Toolset;
  const provider: k.ChatProvider;
  const system: string;
  const systemPrompt: string;
  const messages: k.Message[];
  const result: k.StepResult;
  const agent: k.Agent;
  const makeTools: (env: any) => k.Toolset;
  const signal: AbortSignal;
  const request: Request;
  const ui: (wire: k.Wire) => Promise<void>;
  const render: (value: unknown) => void;
  const search: (query: string, options: { signal: AbortSignal }) => Promise<string>;
  const bytes: Uint8Array;
  const lastSeenId: number;
  const mailer: { send(to: string, options?: { idempotencyKey?: string }): Promise<string> };
}
export {};
`;

/**
 * What a fragment uses without importing it, imported for it: the package's exports (read off
 * index.d.ts) and a few well-known names, each only when the fragment names it and does not
 * import or declare it itself.
 */
const KNOWN = {
  "node:fs": ["readFileSync", "writeFileSync", "appendFileSync"],
  "@opentelemetry/api": ["trace"],
  "@ai-sdk/react": ["useChat"],
  ai: ["DefaultChatTransport", "lastAssistantMessageIsCompleteWithApprovalResponses"],
};
function imports(code, exported) {
  const declared = new Set();
  for (const m of code.matchAll(/import\s*\{([^}]*)\}/g)) for (const n of m[1].split(",")) declared.add(n.trim().split(/\s+as\s+/).pop());
  for (const m of code.matchAll(/\b(?:const|let|var|class|function)\s+([A-Za-z_$][\w$]*)/g)) declared.add(m[1]);
  const wanted = (names) => names.filter((n) => !declared.has(n) && new RegExp(`\\b${n}\\b`).test(code));
  const lines = [];
  const own = wanted(exported);
  if (own.length) lines.push(`import { ${own.join(", ")} } from "kosong-wasm";`);
  for (const [from, names] of Object.entries(KNOWN)) {
    const w = wanted(names);
    if (w.length) lines.push(`import { ${w.join(", ")} } from "${from}";`);
  }
  return lines;
}

export function checkSnippets() {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const exported = [...readFileSync(join(root, "index.d.ts"), "utf8").matchAll(/^export (?:declare )?(?:class|function|const) (\w+)/gm)].map((m) => m[1]);
  const exportedOnce = [...new Set(exported)];
  const docs = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => join("docs", f))];
  const where = new Map();
  const files = [];
  for (const doc of docs) {
    snippetsOf(readFileSync(join(root, doc), "utf8")).forEach((s, n) => {
      const name = `${doc.replace(/[\\/.]/g, "_")}_${n + 1}.${s.lang === "ts" ? "mts" : "mjs"}`;
      // Top-level await and imports: each snippet is a module. The imports it lacks go on its
      // first line, so its own lines keep their numbers.
      const head = imports(s.code, exportedOnce);
      writeFileSync(join(out, name), head.join(" ") + (head.length ? " " : "") + s.code + "\nexport {};\n");
      where.set(name, { doc, line: s.line });
      files.push(name);
    });
  }
  writeFileSync(join(out, "prelude.d.ts"), PRELUDE);
  writeFileSync(
    join(out, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        strict: true, noEmit: true, allowJs: true, checkJs: true, target: "es2022", module: "nodenext", moduleResolution: "nodenext",
        lib: ["es2022", "dom", "dom.iterable"], types: ["node"], skipLibCheck: true,
      },
      files: ["prelude.d.ts", ...files],
    }),
  );
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  try {
    execFileSync(process.execPath, [tsc, "-p", out, "--pretty", "false"], { encoding: "utf8", stdio: "pipe" });
    return { count: files.length, errors: [] };
  } catch (e) {
    const errors = String(e.stdout).split("\n").filter(Boolean).map((l) => {
      const m = /^([\w.]+)\((\d+),(\d+)\): (.*)$/.exec(l);
      if (!m || !where.has(m[1])) return l;
      const w = where.get(m[1]);
      return `${w.doc}:${w.line + Number(m[2]) - 1}:${m[3]}: ${m[4]}`;
    });
    return { count: files.length, errors };
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { count, errors } = checkSnippets();
  for (const e of errors) console.error(e);
  console.error(`snippets: ${count} compiled, ${errors.length} errors`);
  process.exit(errors.length ? 1 : 0);
}
