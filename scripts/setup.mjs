// What `npm test`, `npm run bench` and `npm run demo` install when it is missing: the npm
// packages of package-lock.json and Debian's Chromium.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
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

