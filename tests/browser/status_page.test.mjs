// End-to-end test of the status page (`GET /`) in headless Chromium against a real `parley serve`.
//
// Environment:
//   PARLEY_BIN       the built `parley` binary (default: <repo>/target/debug/parley)
//   DATABASE_URL     optional; without it the server starts its embedded PostgreSQL
//   TEST_OUTPUT_DIR  where the screenshot and the server log go (default: tests/browser/output/)
//   CHROMIUM_PATH    the browser (default: /usr/bin/chromium)
//
// Run: cd tests/browser && npm ci && PARLEY_BIN=../../target/debug/parley npm test

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { createHmac } from "node:crypto";
import { createWriteStream, existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { chromium } from "playwright-core";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "..", "..");
const PARLEY_BIN = resolve(process.env.PARLEY_BIN || join(REPO, "target", "debug", "parley"));
const OUTPUT_DIR = resolve(process.env.TEST_OUTPUT_DIR || join(HERE, "output"));
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const WAIT_MS = 15_000; // any single wait for the page or the server
const STARTUP_MS = 90_000; // first start may initialise the embedded PostgreSQL

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const NEGOTIATION = {
  sourceUser: {
    id: "user-maya",
    name: "Maya Chen",
    profile: {
      bio: "Founder of a fintech startup building payments infrastructure for small merchants",
      skills: ["product management", "fundraising", "fintech"],
      interests: ["payments", "startups", "rust"],
    },
    intents: [{ text: "Looking for a senior Rust backend engineer to build our payments API" }],
  },
  candidateUser: {
    id: "user-tomas",
    name: "Tomas Novak",
    profile: {
      bio: "Senior backend engineer: eight years of Rust and PostgreSQL, built payments APIs at scale",
      skills: ["rust", "postgresql", "backend engineering", "payments api", "distributed systems"],
      interests: ["fintech", "startups", "payments"],
    },
    intents: [{ text: "Looking for a fintech startup to join as a senior backend engineer working on payments" }],
  },
  seedAssessment: { score: 88, reasoning: "Both want a Rust payments collaboration" },
  discoveryQuery: "senior rust backend engineer for payments",
};

// ---- the server ------------------------------------------------------------

function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

class Server {
  constructor() {
    this.child = null;
    this.exited = null;
    this.logPath = join(OUTPUT_DIR, "server.log");
  }

  async start() {
    assert.ok(existsSync(PARLEY_BIN), `PARLEY_BIN does not exist: ${PARLEY_BIN} (build with \`cargo build\` or set PARLEY_BIN)`);
    this.dataDir = await mkdtemp(join(tmpdir(), "parley-browser-"));
    await chmod(this.dataDir, 0o755); // the embedded PostgreSQL may run as another user
    this.port = await freePort();
    this.base = `http://127.0.0.1:${this.port}`;
    this.env = {
      ...process.env,
      PARLEY_BIND: `127.0.0.1:${this.port}`,
      PARLEY_JWT_SECRET: randomBytes(24).toString("base64url"), // 32 characters
      PARLEY_DATA_DIR: this.dataDir,
      PARLEY_LOG_FORMAT: "json",
      // Agents registered by AgentCard are served on loopback by the test itself.
      PARLEY_A2A_ALLOW_PRIVATE_TARGETS: "true",
    };
    const log = createWriteStream(this.logPath);
    this.child = spawn(PARLEY_BIN, ["serve"], { env: this.env, stdio: ["ignore", "pipe", "pipe"] });
    this.child.stdout.pipe(log);
    this.child.stderr.pipe(log);
    this.exited = new Promise((r) => this.child.once("exit", (code, signal) => r({ code, signal })));
    this.exitInfo = null;
    this.exited.then((info) => { this.exitInfo = info; });

    const deadline = Date.now() + STARTUP_MS;
    for (;;) {
      if (this.exitInfo) throw new Error(`parley serve exited early (${JSON.stringify(this.exitInfo)}):\n${await this.logTail()}`);
      try {
        const res = await fetch(`${this.base}/readyz`, { signal: AbortSignal.timeout(2000) });
        if (res.status === 200) return;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) throw new Error(`GET /readyz was not 200 within ${STARTUP_MS / 1000}s:\n${await this.logTail()}`);
      await sleep(200);
    }
  }

  async token(sub, role) {
    const { stdout } = await promisify(execFile)(PARLEY_BIN, ["token", "--sub", sub, "--role", role], { env: this.env, timeout: WAIT_MS });
    const token = stdout.trim();
    assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/, `parley token printed no JWT: ${JSON.stringify(stdout)}`);
    return token;
  }

  /** A call with an agent's API key, as `api` makes one with a token. */
  async keyed(key, method, path, body) {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: { "x-api-key": key, ...(body ? { "Content-Type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(WAIT_MS),
    });
    const raw = await res.text();
    return { status: res.status, json: raw ? JSON.parse(raw) : null, text: raw };
  }

  async api(token, method, path, body) {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(WAIT_MS),
    });
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, json, text };
  }

  async logTail(lines = 30) {
    const text = await readFile(this.logPath, "utf8").catch(() => "");
    return text.split("\n").slice(-lines).join("\n");
  }

  /**
   * SIGTERM and wait; after 15 s SIGKILL, stop the embedded PostgreSQL it leaves behind, and
   * report the failure to stop. Always removes the data directory. Safe to call twice.
   */
  async stop() {
    let error = null;
    if (this.child && !this.exitInfo) {
      this.child.kill("SIGTERM");
      const stopped = await Promise.race([this.exited, sleep(WAIT_MS).then(() => null)]);
      if (!stopped) {
        this.child.kill("SIGKILL");
        await this.exited;
        await this.stopOrphanPostgres();
        error = new Error(`parley serve did not exit within ${WAIT_MS / 1000}s of SIGTERM:\n${await this.logTail(10)}`);
      }
    }
    if (this.dataDir) await rm(this.dataDir, { recursive: true, force: true }).catch(() => {});
    if (error) throw error;
  }

  /** After a SIGKILL the embedded PostgreSQL is still running: fast-stop it by its pid file. */
  async stopOrphanPostgres() {
    const pidFile = await readFile(join(this.dataDir, "pg", "postmaster.pid"), "utf8").catch(() => null);
    const pid = Number(pidFile?.split("\n")[0]);
    if (!pid) return;
    try { process.kill(pid, "SIGINT"); } catch { return; }
    for (let i = 0; i < 100; i++) {
      try { process.kill(pid, 0); } catch { return; }
      await sleep(100);
    }
  }
}

/** A TCP proxy in front of the server for the browser, so the test can drop its connections. */
class CuttableProxy {
  constructor(targetPort) {
    this.targetPort = targetPort;
    this.sockets = new Set();
    this.down = false;
  }

  async start() {
    this.server = createServer((client) => {
      if (this.down) return client.destroy();
      const upstream = connect(this.targetPort, "127.0.0.1");
      for (const [a, b] of [[client, upstream], [upstream, client]]) {
        this.sockets.add(a);
        a.pipe(b);
        a.on("error", () => b.destroy());
        a.on("close", () => { this.sockets.delete(a); b.destroy(); });
      }
    });
    await new Promise((ok) => this.server.listen(0, "127.0.0.1", ok));
    this.base = `http://127.0.0.1:${this.server.address().port}`;
  }

  /** Drops every open connection and refuses new ones until `restore`. */
  cut() {
    this.down = true;
    for (const s of this.sockets) s.destroy();
  }

  restore() { this.down = false; }

  async close() {
    this.cut();
    await new Promise((ok) => this.server?.close(ok) ?? ok());
  }
}

// ---- page helpers ----------------------------------------------------------

/** Waits until `read()` returns `expected`; fails naming `what` and the last value seen. */
async function eventually(what, read, expected) {
  const deadline = Date.now() + WAIT_MS;
  let last;
  for (;;) {
    try { last = await read(); } catch (e) { last = `<${e.message.split("\n")[0]}>`; }
    if (last === expected) return;
    if (Date.now() > deadline) {
      throw new Error(`${what}: expected ${JSON.stringify(expected)} within ${WAIT_MS / 1000}s, last saw ${JSON.stringify(last)}`);
    }
    await sleep(100);
  }
}

/** The element's trimmed text, or "<absent>" while there is no such element. */
const text = async (locator) => ((await locator.count()) ? (await locator.textContent({ timeout: 1000 }))?.trim() : "<absent>");

/** An opportunity card's status as the API names it (the badge itself says it in words). */
const statusOf = async (card) => {
  const badge = card.locator('[data-testid="status"]');
  return (await badge.count()) ? badge.getAttribute("data-status", { timeout: 1000 }) : "<absent>";
};

/** The section a card is listed under. */
const sectionOf = (card) => card.locator("xpath=ancestor::section").getAttribute("data-testid");

/** How many negotiations ended and how, in the page's words (only the outcomes that happened). */
function endedText({ total, accepted, rejected, stalled }) {
  if (!total) return "none ended";
  const noAgreement = stalled.turnCap + stalled.timeout;
  const parts = [accepted ? `the agents agreed in ${accepted}` : null, rejected ? `an agent said no in ${rejected}` : null,
    noAgreement ? `${noAgreement} ended without agreement` : null,
    stalled.canceled ? `the platform canceled ${stalled.canceled}` : null].filter(Boolean);
  return `${total} ended: ${parts.join(", ")}`;
}

/**
 * The commands the page gives to run an agent against `base` from a source checkout, run here as
 * a person would: they must name files that exist and keep the key off the command line.
 */
function runCommand(base) {
  return [`export PARLEY_URL=${base}`, "read -rsp 'API key: ' PARLEY_AGENT_KEY && export PARLEY_AGENT_KEY",
    'cargo run -q -- agent --exec "python3 examples/my_agent.py"'].join("\n");
}

/** Screenshots of `locator` (or the whole page) at desktop width and at 375 px, as `<name>.png` and `<name>_375.png`. */
async function shoot(page, name, locator = null) {
  for (const [width, suffix] of [[1100, ""], [375, "_375"]]) {
    await page.setViewportSize({ width, height: width === 375 ? 800 : 900 });
    if (width === 375) {
      assert.equal(await page.evaluate(() => document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth), true,
        `${name}: nothing sticks out sideways at 375 px`);
    }
    const path = join(OUTPUT_DIR, `${name}${suffix}.png`);
    if (locator) await locator.screenshot({ path }); else await page.screenshot({ path, fullPage: true });
  }
  await page.setViewportSize({ width: 1100, height: 900 });
}

// ---- the test --------------------------------------------------------------

describe("status page", { timeout: 240_000 }, () => {
  const server = new Server();
  let proxy;
  let context, page, userDataDir, mayaToken, serviceToken, tomasToken, opportunityId;
  let laptopId, laptopKey; // Maya's first agent and its live key, once registered
  let botId; // Maya's second agent, the one that delegates
  let signedOutRequests = 0; // requests made before Maya's session (the refused tokens' checks)
  const requests = [];
  const listRequests = () => requests.filter((r) => r.url.startsWith(`${proxy.base}/api/opportunities?`)).length;
  let listsLoaded = 0;
  const pageErrors = [];
  let failed = false;

  // Each step depends on the previous one: after the first failure the rest are skipped.
  const step = (name, fn) => test(name, async (t) => {
    if (failed) return t.skip("an earlier step failed");
    try { await fn(); } catch (e) {
      failed = true;
      if (page) await page.screenshot({ path: join(OUTPUT_DIR, "failure.png"), fullPage: true }).catch(() => {});
      e.message += `\n--- server log (tail) ---\n${await server.logTail(15)}`;
      throw e;
    }
  });

  before(async () => {
    await mkdir(OUTPUT_DIR, { recursive: true });
    const stopOnExit = () => server.child?.kill("SIGKILL");
    process.once("exit", stopOnExit);
    await server.start();
    proxy = new CuttableProxy(server.port);
    await proxy.start();
    [mayaToken, tomasToken, serviceToken] = await Promise.all([
      server.token("user-maya", "user"),
      server.token("user-tomas", "user"),
      server.token("platform", "service"),
    ]);
    userDataDir = await mkdtemp(join(tmpdir(), "parley-chromium-"));
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"],
      viewport: { width: 1100, height: 900 },
      timeout: WAIT_MS * 2,
    });
    context.setDefaultTimeout(WAIT_MS);
    page = context.pages()[0] || await context.newPage();
    page.on("request", (r) => requests.push({ url: r.url(), method: r.method(), headers: r.headers() }));
    page.on("pageerror", (e) => pageErrors.push(`pageerror: ${e.message}`));
    page.on("console", (m) => {
      // Dropped connections (the reconnect step cuts them on purpose) are logged as net::ERR_*.
      if (m.type() === "error" && !/^Failed to load resource: net::ERR_/.test(m.text())) pageErrors.push(`console: ${m.text()}`);
    });
  });

  after(async () => {
    await context?.close().catch(() => {});
    await proxy?.close().catch(() => {});
    if (userDataDir) await rm(userDataDir, { recursive: true, force: true }).catch(() => {});
    await server.stop();
  });

  step("the sign-in screen at 375 px: a readable form, no account box before signing in", async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    try {
      await page.goto(`${proxy.base}/`);
      await page.locator("#connect").waitFor({ state: "visible" });
      assert.equal(await page.locator("#account").isVisible(), false, "no \"Signed in as\" box before signing in");
      assert.equal(await page.locator("#whoami").isVisible(), false);
      // "Remember on this device" reads as words on one line, not a letter per line.
      const label = await page.locator('label[for="remember"]').boundingBox();
      const lineHeight = await page.locator('label[for="remember"]').evaluate((n) => parseFloat(getComputedStyle(n).lineHeight));
      assert.ok(label && label.height < lineHeight * 1.5 && label.width > 120, `the label fits one line: ${JSON.stringify(label)}`);
      assert.equal(await page.evaluate(() => document.scrollingElement.scrollWidth <= 375), true, "nothing sticks out sideways");
      // What Parley is and where a token comes from, before anything is asked.
      const intro = await text(page.locator('[data-testid="intro"]'));
      assert.match(intro, /Parley talks over introductions for you/);
      assert.match(intro, /access token your platform gave you/);
      assert.match(intro, /parley token --sub/);
      await shoot(page, "signin");
    } finally {
      await page.setViewportSize({ width: 1100, height: 900 });
    }
  });

  step("a platform token and a badly signed token are turned away, with the reason", async () => {
    // The platform's token: not a person's, so not signed in.
    await page.locator("#token").fill(serviceToken);
    await page.locator("#connect").click();
    await eventually("the platform token refused", async () => /platform token/.test(await text(page.locator("#error"))), true);
    assert.match(await text(page.locator("#error")), /role "service"/);
    for (const hidden of ["#account", "#board", "#agents", "#insights"]) {
      assert.equal(await page.locator(hidden).isVisible(), false, `${hidden} stays hidden`);
    }
    assert.equal(await page.evaluate(() => sessionStorage.getItem("parley.token")), null, "a refused token is not kept");
    await page.screenshot({ path: join(OUTPUT_DIR, "signin_service_token.png") });
    // An operator's token is not a person's either.
    await page.locator("#token").fill(await server.token("operator", "admin"));
    await page.locator("#connect").click();
    await eventually("the admin token refused", async () => /role "admin"/.test(await text(page.locator("#error"))), true);
    assert.equal(await page.locator("#account").isVisible(), false, "never signed in with an admin token");

    // A person's token signed with another secret: the server's own reason, and never "Signed in".
    const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
    const unsigned = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ sub: "user-maya", exp: Math.floor(Date.now() / 1000) + 3600 })}`;
    const forged = `${unsigned}.${createHmac("sha256", "not-the-service-secret-at-all").update(unsigned).digest("base64url")}`;
    await page.locator("#token").fill(forged);
    await page.locator("#connect").click();
    await eventually("the server's reason shown", () => text(page.locator("#error")),
      "The server refused the token: the token's signature is not valid. Paste another one.");
    assert.equal(await page.locator("#account").isVisible(), false, "never \"Signed in as\" for a refused token");
    assert.equal(await text(page.locator("#connection")), "Not connected");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "token", "the focus is back on the token field");
    await page.screenshot({ path: join(OUTPUT_DIR, "signin_bad_signature.png") });
    // Chromium logs every answer of 401 to the console; this one was asked for.
    assert.deepEqual(pageErrors.splice(0), ["console: Failed to load resource: the server responded with a status of 401 (Unauthorized)"]);
  });

  step("the page loads, self-contained, with the sign-in form", async () => {
    signedOutRequests = requests.length;
    const res = await page.goto(`${proxy.base}/`);
    assert.equal(res.status(), 200);
    assert.match(res.headers()["content-type"] || "", /text\/html/);
    const csp = res.headers()["content-security-policy"] || "";
    assert.match(csp, /script-src 'sha256-[\w+/=]+'; style-src 'sha256-[\w+/=]+';/, `the policy allows only the page's own script and style: ${csp}`);
    assert.doesNotMatch(csp, /unsafe/);
    assert.equal(await page.title(), "Parley: your opportunities");
    assert.equal(await page.locator('label[for="token"]').count(), 1, "the token field has a real label");
    await page.locator("#connect").waitFor({ state: "visible" });
    const foreign = requests.filter((r) => !r.url.startsWith(proxy.base) && !r.url.startsWith("data:"));
    assert.deepEqual(foreign, [], "the page fetches nothing from elsewhere");
    // A marker that a reload would wipe out: later steps prove the page was never reloaded.
    await page.evaluate(() => { window.__notReloaded = true; });
  });

  step("keyboard: Tab reaches the token field, Enter connects", async () => {
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "token", "the first Tab stop is the token field");
    await page.keyboard.insertText(mayaToken); // as a paste would
    await page.keyboard.press("Enter");
    await eventually("signed-in user", () => text(page.locator("#whoami")), "user-maya");
    await eventually("connection indicator", () => page.locator("#connection").getAttribute("data-state"), "live");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("parley.token")), mayaToken, "the token is kept in sessionStorage");
    assert.equal(await page.evaluate(() => localStorage.getItem("parley.token")), null, "not remembered unless asked");
    await eventually("initial list loaded", () => page.locator("#board").getAttribute("aria-busy"), "false");
    listsLoaded = listRequests();
    assert.ok(listsLoaded >= 1, "the page read the list once connected");
  });

  step("a new negotiation shows up live as pending", async () => {
    const res = await server.api(serviceToken, "POST", "/api/negotiations", NEGOTIATION);
    assert.equal(res.status, 201, `POST /api/negotiations: ${res.text}`);
    opportunityId = res.json.opportunity.id;
    assert.ok(opportunityId, "the answer names the opportunity");

    const card = page.locator(`[data-opportunity-id="${opportunityId}"]`);
    await eventually("status of the new card", () => statusOf(card), "pending");
    assert.equal(await page.evaluate(() => window.__notReloaded), true, "the page was not reloaded");
    assert.equal(listRequests(), listsLoaded, "the list was not re-read: the card came from /api/events");
    assert.ok(requests.some((r) => r.url === `${proxy.base}/api/opportunities/${opportunityId}`), "the card was fetched after an event");
    assert.equal(await sectionOf(card), "section-pending");
    assert.equal(await text(page.locator('[data-testid="section-pending"] h2')), "Waiting for your decision (1)");
    assert.equal(await text(card.locator('[data-testid="status"]')), "your decision");
    assert.equal(await text(card.locator('[data-testid="counterpart"]')), "Tomas Novak", "the name the platform gave, not the id");
    // Signed in under the name the platform gave, no longer the id.
    await eventually("signed in by name", () => text(page.locator("#whoami")), "Maya Chen");
    assert.equal(await page.locator("#whoami").getAttribute("title"), "user-maya");
    assert.equal(await card.locator('[data-testid="counterpart"]').getAttribute("title"), "user-tomas");
    assert.equal(await text(card.locator('[data-testid="score"]')), "88 / 100");
    assert.equal(await text(card.locator('[data-testid="my-decision"]')), "not decided yet");
    assert.equal(await text(card.locator('[data-testid="other-decision"]')), "not decided yet");
    assert.equal(await card.locator('[data-testid="accept"]').isEnabled(), true);
  });

  step("the Turns view lists the negotiation's turns and outcome, in words, the private reasoning folded away", async () => {
    const card = page.locator(`[data-opportunity-id="${opportunityId}"]`);
    await card.locator('[data-testid="turns"] > summary').click();
    await card.locator('[data-testid="outcome"]').waitFor();
    const turns = card.locator('[data-testid="turn"]');
    assert.ok((await turns.count()) >= 2, "at least a propose and an accept");
    // Who did what, in words: no seat names, no action codes.
    // Maya has no agent: Parley plays her seat, and says so.
    assert.equal(await text(turns.first().locator('[data-testid="turn-head"]')), "Turn 0 · Parley for you proposed the match");
    assert.match(await text(turns.nth(1).locator('[data-testid="turn-head"]')), /^Turn 1 · (Tomas Novak's agent|Parley for Tomas Novak) (countered|accepted|asked a question|rejected the match)$/);
    assert.match(await text(turns.last().locator('[data-testid="turn-head"]')), /(agent|Parley for you|Parley for Tomas Novak) accepted$/);
    for (const head of await card.locator('[data-testid="turn-head"]').allTextContents()) {
      assert.doesNotMatch(head, /source|candidate|propose$|counter$/, head);
    }
    // Maya's own side's reasoning (the system negotiator's working, with its raw scores) is
    // labelled as hers alone and folded away: not on screen until she opens it.
    const privateNotes = card.locator('[data-testid="private-reasoning"]');
    assert.ok((await privateNotes.count()) >= 1, "her side's turns carry their reasoning");
    // Maya has no agent: the reasoning is Parley's, deciding for her, as the turn head says.
    assert.equal(await text(privateNotes.first().locator("summary")), "Parley's reasoning, deciding for you as you have no agent (only you see this)");
    for (const label of await privateNotes.locator("summary").allTextContents()) assert.doesNotMatch(label, /agent's reasoning/, label);
    assert.equal(await privateNotes.first().getAttribute("open"), null, "folded by default");
    const negotiation = (await server.api(mayaToken, "GET", `/api/negotiations/${(await server.api(mayaToken, "GET", `/api/opportunities/${opportunityId}`)).json.negotiationId}`)).json;
    const own = negotiation.turns.find((t) => t.userId === "user-maya" && t.reasoning);
    assert.ok(own, JSON.stringify(negotiation));
    assert.ok(!(await card.innerText()).includes(own.reasoning), "her side's reasoning is not on screen until opened");
    assert.doesNotMatch(await card.innerText(), /\bfit \d\.\d|coverage \d+\/\d+|matched: /, "no raw scores on screen");
    await card.screenshot({ path: join(OUTPUT_DIR, "turns_folded.png") });
    await privateNotes.first().locator("summary").click();
    assert.ok((await card.innerText()).includes(own.reasoning), "one click away");
    await card.screenshot({ path: join(OUTPUT_DIR, "turns_reasoning_open.png") });
    await privateNotes.first().locator("summary").click();
    // Roles in words: the two system negotiators' suggestions mirror each other, so they agree.
    const roles = (await server.api(mayaToken, "GET", `/api/opportunities/${opportunityId}`)).json;
    assert.equal(roles.agreedRoles.length, 2, JSON.stringify(roles));
    assert.match(await text(card.locator('[data-testid="roles"]')), /^(Tomas Novak would help you|You would help Tomas Novak|You and Tomas Novak, as peers)$/);
    assert.doesNotMatch(await text(card.locator('[data-testid="roles"]')), /agent|patient|peer:/);
    // Who accepted what, at which turn: the service's sentence, as the API gives it.
    const negotiationId = (await server.api(mayaToken, "GET", `/api/opportunities/${opportunityId}`)).json.negotiationId;
    const n = await server.api(mayaToken, "GET", `/api/negotiations/${negotiationId}`);
    const sentence = await text(card.locator('[data-testid="outcome-summary"]'));
    assert.equal(sentence, n.json.outcome.summary);
    assert.match(sentence, /^((Tomas Novak|Maya Chen)'s agent accepted (Maya Chen|Tomas Novak)'s (proposal|counter) at turn \d+|Parley accepted (Maya Chen|Tomas Novak)'s (proposal|counter) for (Tomas Novak|you) at turn \d+ \((Tomas Novak|you) (has|have) no personal agent\))\.$/);
    assert.ok(sentence.includes(`at turn ${(await turns.count()) - 1}`), `the last turn's number: ${sentence}`);
    assert.doesNotMatch(await text(card.locator('[data-testid="outcome"]')), /both agents/);
    // When her side's turn ended it, its reasoning is Parley's too, never "your agent's".
    const lastTurn = n.json.turns.at(-1);
    if (lastTurn.userId === "user-maya") {
      assert.equal(await text(card.locator('[data-testid="outcome-reasoning"] > summary')),
        "Parley's reasoning for it, deciding for you as you have no agent (only you see this)");
    } else {
      assert.equal(await card.locator('[data-testid="outcome-reasoning"]').count(), 0, "Tomas's side's reasoning is his");
    }
    // What Tomas's side keeps to itself never reaches Maya's page: the reasoning of his turns
    // (the final one's included, when his turn ended it), which the API shows to his side only.
    const tomasView = await server.api(tomasToken, "GET", `/api/negotiations/${negotiationId}`);
    const kept = tomasView.json.turns.filter((t) => t.userId === "user-tomas" && t.reasoning).map((t) => t.reasoning);
    assert.ok(kept.length > 0, `Tomas's side gave its reasons: ${tomasView.text}`);
    const shown = await text(card);
    for (const words of kept) assert.ok(!shown.includes(words), `Tomas's private reasoning on Maya's page: ${words}`);
    await card.screenshot({ path: join(OUTPUT_DIR, "outcome_wording.png") });
  });

  step("Accept records my decision; the opportunity stays pending", async () => {
    const card = page.locator(`[data-opportunity-id="${opportunityId}"]`);
    await card.locator('[data-testid="accept"]').click();
    await eventually("my decision", () => text(card.locator('[data-testid="my-decision"]')), "accepted");
    assert.equal(await statusOf(card), "pending");
    assert.equal(await text(card.locator('[data-testid="other-decision"]')), "not decided yet");
    // Nothing left to press: the buttons are gone, and the card says what she did and who is next.
    assert.equal(await card.locator('[data-testid="accept"]').count(), 0, "no Accept once decided");
    assert.equal(await card.locator('[data-testid="decline"]').count(), 0, "no Decline once decided");
    assert.equal(await text(card.locator('[data-testid="decided"]')), "You accepted. Waiting for Tomas Novak to decide.");
    const seen = await server.api(mayaToken, "GET", `/api/opportunities/${opportunityId}`);
    assert.equal(seen.json?.status, "pending", `the server agrees: ${seen.text}`);
    assert.equal(seen.json?.myDecision, "accept");
    // Accepted by Maya, it waits for Tomas: no longer counted as waiting for her decision.
    await eventually("moved to the waiting section", () => sectionOf(card), "section-waiting");
    assert.equal(await text(card.locator('[data-testid="status"]')), "waiting for Tomas Novak");
    assert.equal(await text(page.locator('[data-testid="section-pending"] h2')), "Waiting for your decision (0)");
    assert.equal(await text(page.locator('[data-testid="section-waiting"] h2')), "You accepted: waiting for the other person (1)");
    await shoot(page, "board_waiting_for_other", page.locator("#board"));
  });

  step("the other person's accept turns it accepted live", async () => {
    const res = await server.api(tomasToken, "POST", `/api/opportunities/${opportunityId}/decision`, { decision: "accept" });
    assert.equal(res.status, 200, `tomas's decision: ${res.text}`);
    const card = page.locator(`[data-opportunity-id="${opportunityId}"]`);
    await eventually("status after both accepted", () => statusOf(card), "accepted");
    assert.equal(await page.evaluate(() => window.__notReloaded), true, "the page was not reloaded");
    assert.equal(await sectionOf(card), "section-accepted");
    assert.equal(await text(card.locator('[data-testid="other-decision"]')), "accepted");
    assert.equal(await card.locator('[data-testid="accept"]').count(), 0, "no buttons once it is no longer pending");
    await eventually("announcement", () => text(page.locator("#announcer")), "Opportunity with Tomas Novak is now accepted.");
    await eventually("the insights follow", () => text(page.locator('[data-testid="insights"] [data-testid="stat"]').first()),
      "1 ended: the agents agreed in 1");
    await page.screenshot({ path: join(OUTPUT_DIR, "status_page.png"), fullPage: true });
  });

  step("after the connection drops the page reconnects with Last-Event-ID; Decline works from the keyboard", async () => {
    const streams = () => requests.filter((r) => r.url === `${proxy.base}/api/events`);
    const before = streams().length;
    proxy.cut();
    await eventually("indicator while offline", () => page.locator("#connection").getAttribute("data-state"), "offline");
    // Created while the page is cut off: it must still show up once the page is back.
    const res = await server.api(serviceToken, "POST", "/api/negotiations", NEGOTIATION);
    assert.equal(res.status, 201, `second POST /api/negotiations: ${res.text}`);
    proxy.restore();
    await eventually("indicator after reconnecting", () => page.locator("#connection").getAttribute("data-state"), "live");
    assert.ok(streams().length > before, "the stream was opened again");
    assert.match(streams().at(-1).headers["last-event-id"] || "", /\S/, "the reconnect sends Last-Event-ID");

    const id = res.json.opportunity.id;
    const card = page.locator(`[data-opportunity-id="${id}"]`);
    await eventually("status of the second card", () => statusOf(card), "pending");
    // Decline asks first; the safe choice has the focus, and keeping it changes nothing.
    await card.locator('[data-testid="decline"]').focus();
    await page.keyboard.press("Enter");
    await card.locator('[data-testid="decline-confirm"]').waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "decline-cancel", "the safe choice has the focus");
    assert.match(await text(card.locator(".confirm")), /cannot be undone/);
    await card.screenshot({ path: join(OUTPUT_DIR, "decline_confirm.png") });
    await page.keyboard.press("Enter");
    await card.locator('[data-testid="decline"]').waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "decline", "back on Decline");
    assert.equal((await server.api(mayaToken, "GET", `/api/opportunities/${id}`)).json?.status, "pending", "nothing was decided");
    assert.equal(await text(card.locator('[data-testid="my-decision"]')), "not decided yet");
    // Now decline for real: Decline, then "Yes, decline".
    await page.keyboard.press("Enter");
    await card.locator('[data-testid="decline-confirm"]').waitFor();
    await page.keyboard.press("Shift+Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "decline-confirm");
    await page.keyboard.press("Enter");
    await eventually("status after I declined", () => statusOf(card), "rejected");
    assert.equal(await text(card.locator('[data-testid="my-decision"]')), "declined");
    assert.equal(await text(card.locator('[data-testid="other-decision"]')), "not needed: you declined");
    assert.doesNotMatch(await text(card.locator('[data-testid="roles"]')), /user-|agent:|patient/, "roles in words, never ids");
    assert.equal(await sectionOf(card), "section-rejected");
    assert.equal(await page.evaluate(() => document.activeElement?.closest("[data-opportunity-id]")?.dataset.opportunityId),
      id, "focus stays on the card after it moved");
    assert.equal(await page.evaluate(() => window.__notReloaded), true, "the page was not reloaded");
  });

  step("a negotiation waiting for an agent that never ran says whose and until when; roles nobody agreed are each side's view; a canceled one is listed as canceled", async () => {
    // Tomas registers a personal agent that never runs: his turns wait for it.
    const registered = await server.api(tomasToken, "POST", "/api/agents", { name: "Tomas on his phone" });
    assert.equal(registered.status, 201, registered.text);
    const tomasAgent = registered.json.agent.id;
    const tomasKey = registered.json.apiKey.key;
    const started = await server.api(serviceToken, "POST", "/api/negotiations", NEGOTIATION);
    assert.equal(started.status, 201, started.text);
    const [id, negotiation] = [started.json.opportunity.id, started.json.negotiation.id];
    const card = page.locator(`[data-opportunity-id="${id}"]`);
    await eventually("the waiting card", () => statusOf(card), "negotiating");
    assert.equal(await sectionOf(card), "section-negotiating");
    const view = (await server.api(mayaToken, "GET", `/api/negotiations/${negotiation}`)).json;
    assert.equal(view.awaitingUserId, "user-tomas");
    assert.equal(view.awaitingThen, "system_negotiator");
    // The line says whose agent, until when (as this browser tells time), and what then.
    const until = await page.evaluate((iso) => new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }), view.awaitingUntil);
    await eventually("the waiting line", () => text(card.locator('[data-testid="waiting"]')),
      `Waiting for Tomas Novak's agent until ${until}, then Parley decides.`);
    await card.locator('[data-testid="turns"] > summary').click();
    await eventually("the turns panel says it too", async () => (await text(card.locator(".turns-body .outcome"))).startsWith("Waiting for Tomas Novak's agent"), true);
    await shoot(page, "waiting_for_agent", card);
    await card.locator('[data-testid="turns"] > summary').click();

    // His agent answers after all, accepting with roles of its own view: it sees them as peers,
    // while Maya's side proposed that Tomas would help her. Nothing was agreed; each view is told.
    const agentCall = async (method, path, body) => {
      const res = await fetch(`${server.base}/api/agents/${tomasAgent}${path}`, {
        method, headers: { "x-api-key": tomasKey, ...(body ? { "Content-Type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, json: await res.json().catch(() => null) };
    };
    const picked = await agentCall("POST", "/negotiations/pickup");
    assert.equal(picked.status, 200, JSON.stringify(picked.json));
    const answered = await agentCall("POST", `/negotiations/${negotiation}/respond`, {
      claimToken: picked.json.claimToken, action: "accept", message: "Happy to talk as equals.",
      assessment: { reasoning: "Good fit", suggestedRoles: { ownUser: "peer", otherUser: "peer" } },
    });
    assert.equal(answered.status, 200, JSON.stringify(answered.json));
    await eventually("the accepted card", () => statusOf(card), "pending");
    const o = (await server.api(mayaToken, "GET", `/api/opportunities/${id}`)).json;
    assert.deepEqual(o.agreedRoles, [], JSON.stringify(o));
    const proposed = o.roleViews.find((v) => v.userId === "user-maya").suggestedRoles;
    assert.deepEqual(proposed, { ownUser: "patient", otherUser: "agent" }, JSON.stringify(o));
    assert.equal(await text(card.locator('[data-testid="roles"]')),
      "Not agreed. Parley for you suggested Tomas Novak would help you. Tomas Novak's agent suggested you and Tomas Novak, as peers.");
    assert.equal(await card.locator('[data-testid="waiting"]').count(), 0, "nothing is awaited any more");
    await shoot(page, "roles_not_agreed", card);

    // A negotiation the platform cancels is listed apart from those the agents did not agree on.
    const second = await server.api(serviceToken, "POST", "/api/negotiations", NEGOTIATION);
    assert.equal(second.status, 201, second.text);
    const canceledCard = page.locator(`[data-opportunity-id="${second.json.opportunity.id}"]`);
    await eventually("the second waiting card", () => statusOf(canceledCard), "negotiating");
    const canceled = await server.api(serviceToken, "DELETE", `/api/negotiations/${second.json.negotiation.id}`);
    assert.equal(canceled.status, 200, canceled.text);
    await eventually("listed as canceled", () => sectionOf(canceledCard), "section-canceled");
    assert.equal(await text(page.locator('[data-testid="section-canceled"] h2')), "Canceled by the platform (1)");
    assert.equal(await text(canceledCard.locator('[data-testid="status"]')), "canceled");
    assert.equal(await text(canceledCard.locator('[data-testid="my-decision"]')), "not asked: the platform canceled it");
    assert.equal(await page.locator('[data-testid="section-stalled"] [data-opportunity-id]').count(), 0, "not among the agents' stalemates");
    await shoot(page, "canceled", page.locator('[data-testid="section-canceled"]'));

    // Tomas's agent goes: the later steps negotiate with his system negotiator again.
    assert.equal((await server.api(tomasToken, "DELETE", `/api/agents/${tomasAgent}`)).status, 204);
  });

  step("Insights: charts drawn from the server's figures, usable from the keyboard and at 375 px", async () => {
    // A weak match for Maya: Lena wants a mentor for her own company. Maya's own negotiator
    // counters, naming what is missing; that feeds her objections (never Lena's reasoning).
    const mismatch = {
      ...NEGOTIATION,
      candidateUser: {
        id: "user-lena",
        name: "Lena Vogel",
        profile: { bio: "Backend engineer", skills: ["go", "backend engineering"] },
        intents: [{ text: "Looking for a mentor in product management and fundraising for my own robotics company" }],
      },
      seedAssessment: { score: 60, reasoning: "A weak match" },
    };
    const res = await server.api(serviceToken, "POST", "/api/negotiations", mismatch);
    assert.equal(res.status, 201, `POST /api/negotiations: ${res.text}`);
    await eventually("the mismatch ended", async () => (await server.api(serviceToken, "GET", `/api/negotiations/${res.json.negotiation.id}`)).json?.status, "completed");
    const today = new Date().toISOString().slice(0, 10);
    const from = new Date(Date.now() - 29 * 86400_000).toISOString().slice(0, 10);
    const figures = await server.api(mayaToken, "GET", `/api/insights?from=${from}&to=${today}`);
    assert.equal(figures.status, 200, figures.text);
    const t = figures.json.total;
    assert.ok(t.negotiations.total >= 3, `three negotiations ended: ${figures.text}`);
    assert.ok(t.topObjections.length > 0, `the mismatch named missing terms: ${figures.text}`);

    const panel = page.locator('[data-testid="insights"]');
    const noAgreement = t.negotiations.stalled.turnCap + t.negotiations.stalled.timeout;
    await eventually("negotiations in the insights", () => text(panel.locator('[data-testid="stat"]').first()), endedText(t.negotiations));
    assert.doesNotMatch(await text(panel.locator('[data-testid="stat"]').first()), /\b0\b/, "no outcome that never happened");
    // The platform's cancel is named as the board names it, never as the agents' lack of agreement.
    assert.equal(t.negotiations.stalled.canceled, 1, `the canceled negotiation: ${figures.text}`);
    assert.match(await text(panel.locator('[data-testid="stat"]').first()), /, the platform canceled 1$/);
    if (noAgreement === 0) assert.doesNotMatch(await text(panel.locator('[data-testid="stat"]').first()), /without agreement/);
    // Maya has no agent: every turn of hers was Parley's, and the insights count them as her turns say.
    assert.equal(t.fallbacks, 0, figures.text);
    assert.ok(t.systemTurns > 0, figures.text);
    const parleyStat = panel.locator("dt", { hasText: "Turns Parley decided for you" }).locator("+ dd");
    assert.equal(await text(parleyStat), `${t.systemTurns}, while you had no agent`);
    // The rejected mismatch: nobody was asked to decide.
    const lena = page.locator(`[data-opportunity-id="${res.json.opportunity.id}"]`);
    await eventually("the mismatch's card", () => statusOf(lena), "rejected");
    assert.equal(await text(lena.locator('[data-testid="my-decision"]')), "not asked: the agents did not agree");
    // Every ending happened today: the axis runs over the last 7 days, not a 30-day sliver.
    const outcomes = panel.locator('[data-testid="chart-outcomes"] svg');
    assert.equal(await outcomes.locator("g.bar").count(), 7, "one bar per day of the last 7 days");
    const todays = outcomes.locator("g.bar").last();
    const segments = [t.negotiations.accepted, t.negotiations.rejected, noAgreement, t.negotiations.stalled.canceled].filter((v) => v > 0).length;
    assert.equal(await todays.locator("rect").count(), 1 + segments, "today's bar is stacked from its outcomes");
    assert.equal(await text(todays.locator("text.value")), String(t.negotiations.total), "the bar's value is written on it");
    const ticks = await outcomes.locator("text.y-tick").allTextContents();
    assert.equal(ticks[0], "0");
    assert.ok(Number(ticks.at(-1)) >= t.negotiations.total && ticks.length >= 2, `a value axis: ${ticks}`);
    assert.equal(await text(todays.locator("title")), `${today}: ${endedText(t.negotiations)}`);
    const turns = panel.locator('[data-testid="chart-turns"] svg g.bar');
    assert.equal(await turns.count(), t.turnsToOutcome.length);
    const objections = panel.locator('[data-testid="chart-objections"]');
    assert.equal(await objections.locator("svg g.bar").count(), t.topObjections.length);
    assert.match(await text(objections.locator("svg g.bar").first().locator("title")), new RegExp(`^${t.topObjections[0].term}: named missing`));

    // Keyboard: Tab reaches each chart; the arrow keys read the bars out.
    await panel.locator("#insights-refresh").focus();
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.closest("figure")?.dataset.testid), "chart-outcomes");
    await page.keyboard.press("End");
    assert.match(await text(panel.locator('[data-testid="chart-outcomes"] [data-testid="readout"]')), new RegExp(`^${today}:`));
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.closest("figure")?.dataset.testid), "chart-objections");
    assert.match(await text(objections.locator('[data-testid="readout"]')), new RegExp(`^${t.topObjections[0].term}: named missing`));
    if (t.topObjections.length > 1) {
      await page.keyboard.press("ArrowDown");
      assert.match(await text(objections.locator('[data-testid="readout"]')), new RegExp(`^${t.topObjections[1].term}: named missing`));
    }
    await panel.screenshot({ path: join(OUTPUT_DIR, "insights.png") });

    // A phone: nothing scrolls sideways, the charts fit.
    await page.setViewportSize({ width: 375, height: 800 });
    try {
      await eventually("no horizontal scroll at 375 px", () => page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth), true);
      for (const chartBox of await panel.locator("figure.chart svg").all()) {
        const box = await chartBox.boundingBox();
        assert.ok(box && box.x >= 0 && box.x + box.width <= 375, `a chart fits the screen: ${JSON.stringify(box)}`);
      }
      await page.screenshot({ path: join(OUTPUT_DIR, "status_page_375.png"), fullPage: true });
    } finally {
      await page.setViewportSize({ width: 1100, height: 900 });
    }
  });

  step("My agents: register one, its key shown once, usable, then revoked from the keyboard", async () => {
    const panel = page.locator('[data-testid="agents"]');
    await eventually("the agents panel is empty at first", () => panel.locator('[data-testid="agents-empty"]').isVisible(), true);
    assert.equal(await page.locator('label[for="agent-name"]').count(), 1, "the name field has a real label");
    await panel.locator("#agent-name").focus();
    await page.keyboard.insertText("Maya's laptop");
    await page.keyboard.press("Enter");

    const box = panel.locator('[data-testid="new-key"]');
    await box.waitFor({ state: "visible" });
    assert.equal(await page.evaluate(() => document.activeElement?.id), "new-key", "focus moves to the new key");
    assert.match(await text(box), /shown only this once/);
    const key = await box.locator('[data-testid="new-key-value"]').inputValue();
    assert.match(key, /^pk_/, "the key itself is shown");
    // ...and what to do with it: the command that runs the agent against this service.
    // The command as a person runs it from a source checkout: the key pasted at a prompt, never
    // on the command line; the program it names exists.
    assert.equal(await text(box.locator('[data-testid="new-key-command"]')), runCommand(proxy.base));
    assert.ok(!(await text(box.locator('[data-testid="new-key-command"]'))).includes(key), "no key on the command line");
    assert.match(await text(box), /Next, run your agent with it/);
    // Room below the text line, so that the key's underscores are not cut off at 1x.
    const [lineHeight, fontSize] = await box.locator('[data-testid="new-key-value"]').evaluate((n) =>
      [parseFloat(getComputedStyle(n).lineHeight), parseFloat(getComputedStyle(n).fontSize)]);
    assert.ok(lineHeight >= 1.5 * fontSize, `the key's line is tall enough: ${lineHeight}px for ${fontSize}px text`);
    const card = panel.locator("li[data-agent-id]");
    await eventually("one agent listed", () => card.count(), 1);
    const agentId = await card.getAttribute("data-agent-id");
    assert.equal(await text(card.locator('[data-testid="agent-name"]')), "Maya's laptop");
    // No record yet: no made-up score (and nothing to call provisional).
    await eventually("trust read", () => text(card.locator('[data-testid="trust"]')), "no record yet: it has not answered a turn or a delegation");
    assert.equal(await card.locator('[data-testid="provisional"]').count(), 0);
    // It never ran: the card says so, how to run it, and that it does not negotiate yet.
    assert.equal(await text(card.locator('[data-testid="liveness"]')), "never connected");
    assert.match(await text(card.locator('[data-testid="negotiates"]')), /^not yet: it has never connected/);
    const prefix = (await text(card.locator('[data-testid="key"] code'))).replace("…", "");
    assert.equal(await text(card.locator('[data-testid="run-command"]')), runCommand(proxy.base));
    assert.match(await text(card.locator('[data-testid="connect-hint"]')), new RegExp(`paste its key ${prefix}… when asked`));
    await shoot(page, "agent_never_connected", panel);
    assert.equal(await card.locator('[data-testid="key"]').count(), 1);
    assert.ok(key.startsWith(await text(card.locator('[data-testid="key"] code')).then((t) => t.replace("…", ""))), "the listing shows only the key's prefix");
    assert.ok(!(await text(card)).includes(key), "the listing never shows the key");
    await panel.screenshot({ path: join(OUTPUT_DIR, "agents_new_key.png") });

    // The copy button copies it (or selects it where the clipboard is refused).
    await box.locator('[data-testid="new-key-copy"]').click();
    await eventually("copy feedback", async () => /Copied|Selected/.test(await text(box.locator('[data-testid="new-key-status"]'))), true);

    // The card's command, run as the person would from the checkout's root with the key pasted at
    // the prompt (`cargo run -q --` being the built binary here): the agent connects, and the
    // card says so.
    const runner = spawn("bash", ["-c", `cargo() { [ "$1 $2 $3" = "run -q --" ] || return 2; shift 3; exec "$PARLEY_BIN" "$@"; }\n${runCommand(proxy.base)}`],
      { cwd: REPO, env: { ...process.env, PARLEY_BIN }, stdio: ["pipe", "ignore", "pipe"] });
    let runnerLog = "";
    runner.stderr.on("data", (d) => { runnerLog += d; });
    const runnerExit = new Promise((r) => runner.once("exit", (code) => r(code)));
    runner.stdin.end(`${key}\n`);
    try {
      await eventually("live once its command runs", async () => {
        await panel.locator('[data-testid="agents-refresh"]').click();
        return text(card.locator('[data-testid="liveness"]'));
      }, "live");
    } finally {
      runner.kill("SIGTERM");
    }
    assert.equal(await runnerExit, 0, `the agent stopped cleanly:\n${runnerLog}`);
    assert.match(runnerLog, /serving turns with the program `python3 examples\/my_agent.py`/, runnerLog);
    assert.ok(!runnerLog.includes(key), "the runner never prints the key");

    // The key works against the API: a heartbeat is accepted, and the page sees the agent live.
    const beat = await fetch(`${server.base}/api/agents/${agentId}/heartbeat`, { method: "POST", headers: { "x-api-key": key } });
    assert.equal(beat.status, 204, "the new key is accepted");
    const pickup = await fetch(`${server.base}/api/agents/${agentId}/negotiations/pickup`, { method: "POST", headers: { Authorization: `Bearer ${key}` } });
    assert.notEqual(pickup.status, 401, "pickup with the new key is not refused");
    await pickup.arrayBuffer();
    await panel.locator('[data-testid="agents-refresh"]').click();
    await eventually("liveness after the heartbeat", () => text(card.locator('[data-testid="liveness"]')), "live");
    assert.match(await text(card.locator('[data-testid="last-seen"]')), /^last seen/);
    assert.equal(await card.locator('[data-testid="connect-hint"]').count(), 0, "connected: no more hint");
    assert.equal(await text(card.locator('[data-testid="negotiates"]')), "yes");

    // The agent's negotiations (its user's, by name, linked to the opportunity cards) and the
    // capabilities it offers.
    const offered = await fetch(`${server.base}/api/agents/${agentId}/capabilities`, {
      method: "PUT",
      headers: { "x-api-key": key, "Content-Type": "application/json" },
      body: JSON.stringify({ taskType: "code-review", inputSchema: { type: "object" }, outputSchema: { type: "object" }, description: "Reviews Rust pull requests", tags: ["rust"] }),
    });
    assert.equal(offered.status, 201, await offered.text());
    await card.locator('[data-testid="agent-negotiations"] summary').click();
    await eventually("the capability listed", () => text(card.locator('[data-testid="capability"] strong')), "code-review");
    await eventually("the agent's negotiations listed", async () => (await card.locator('[data-testid="agent-negotiation"]').count()) >= 3, true);
    assert.match(await text(card.locator('[data-testid="agent-negotiation"]').first()), /^With (Lena Vogel|Tomas Novak)/);
    // Each says how many of its turns this agent answered, as the API counts them.
    const listed = await (await fetch(`${server.base}/api/agents/${agentId}/negotiations?status=all&limit=20`, { headers: { "x-api-key": key } })).json();
    for (const n of listed.negotiations) {
      const label = await text(card.locator(`[data-testid="agent-negotiation"][data-negotiation-id="${n.negotiationId}"] [data-testid="answered-by-agent"]`));
      assert.equal(label, n.answeredTurns ? `this agent answered ${n.answeredTurns} turn${n.answeredTurns === 1 ? "" : "s"}` : "not answered by this agent");
    }
    // "Show" takes the keyboard to the opportunity's card.
    const show = card.locator('[data-testid="agent-negotiation"] button').first();
    await show.focus();
    await page.keyboard.press("Enter");
    assert.ok(await page.evaluate(() => Boolean(document.activeElement?.dataset.opportunityId)), "focus is on an opportunity card");

    // Hidden, the key is gone for good: not in the page, not after a reload, not in storage.
    await box.locator('[data-testid="new-key-done"]').click();
    assert.equal(await box.isVisible(), false);
    await page.reload();
    await eventually("agent listed again after reload", () => panel.locator("li[data-agent-id]").count(), 1);
    await eventually("trust read again", () => text(card.locator('[data-testid="trust"]')), "no record yet: it has not answered a turn or a delegation");
    assert.equal(await box.isVisible(), false, "no key box after a reload");
    const html = await page.content();
    assert.ok(!html.includes(key), "the key is nowhere in the page after a reload");
    assert.equal(await text(box.locator('[data-testid="new-key-command"]')), "", "nor its command");
    const stored = await page.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }));
    assert.ok(!stored.includes(key), "the key is never stored in the browser");

    // Add a second key: it is shown once too.
    await card.locator('[data-testid="add-key"]').click();
    await box.waitFor({ state: "visible" });
    const second = await box.locator('[data-testid="new-key-value"]').inputValue();
    assert.match(second, /^pk_/);
    assert.notEqual(second, key);
    await eventually("two keys listed", () => card.locator('[data-testid="key"]').count(), 2);
    await box.locator('[data-testid="new-key-done"]').click();

    // Revoke the first key from the keyboard, through the confirmation.
    const firstKey = card.locator('[data-testid="key"]').first();
    await firstKey.locator('[data-testid="revoke"]').focus();
    await page.keyboard.press("Enter");
    await firstKey.locator('[data-testid="revoke-confirm"]').waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "revoke-cancel", "the safe choice has the focus");
    await page.keyboard.press("Shift+Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "revoke-confirm");
    await page.keyboard.press("Enter");
    await eventually("the key is shown revoked", async () => /^revoked/.test(await text(firstKey.locator('[data-testid="key-facts"]'))), true);
    assert.equal(await firstKey.locator("button").count(), 0, "a revoked key has no buttons");
    const refused = await fetch(`${server.base}/api/agents/${agentId}/heartbeat`, { method: "POST", headers: { "x-api-key": key } });
    assert.equal(refused.status, 401, "the revoked key is refused");
    const kept = await fetch(`${server.base}/api/agents/${agentId}/heartbeat`, { method: "POST", headers: { "x-api-key": second } });
    assert.equal(kept.status, 204, "the other key still works");
    await panel.screenshot({ path: join(OUTPUT_DIR, "agents.png") });
    [laptopId, laptopKey] = [agentId, second];
  });

  step("My agents: a delegation shows as sent on the requester's card and received on the target's", async () => {
    // A second agent of Maya's asks the laptop (which offers code-review) for a review, by API.
    const created = await server.api(mayaToken, "POST", "/api/agents", { name: "Maya's build bot" });
    assert.equal(created.status, 201, created.text);
    const botKey = created.json.apiKey.key;
    botId = created.json.agent.id;
    const keyed = async (key, method, path, body) => {
      const res = await fetch(`${server.base}${path}`, {
        method,
        headers: { "x-api-key": key, ...(body ? { "Content-Type": "application/json" } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(WAIT_MS),
      });
      const raw = await res.text();
      return { status: res.status, json: raw ? JSON.parse(raw) : null, text: raw };
    };
    const offered = await keyed(laptopKey, "GET", `/api/agents/${laptopId}/capabilities`);
    assert.equal(offered.status, 200, offered.text);
    const laptopAnon = offered.json.anonymousAgentId;
    const requestId = randomUUID();
    const asked = await keyed(botKey, "POST", "/api/agents/delegate?wait=0",
      { requestId, agentId: botId, taskType: "code-review", targetAnonymousId: laptopAnon, input: { code: "fn main() {}" } });
    assert.equal(asked.status, 202, asked.text);
    const accepted = await keyed(laptopKey, "POST", `/api/agents/${laptopId}/delegations/${requestId}/accept`);
    assert.equal(accepted.status, 200, accepted.text);
    const done = await keyed(laptopKey, "POST", `/api/agents/${laptopId}/delegations/${requestId}/complete`,
      { output: { feedback: "fine" }, claimToken: accepted.json.claimToken });
    assert.equal(done.status, 200, done.text);

    // The delegation's events re-read the agents: the new one appears without a click, and each
    // open panel shows its side of the delegation, the other agent by anonymous id only.
    const panel = page.locator('[data-testid="agents"]');
    const bot = panel.locator(`li[data-agent-id="${botId}"]`);
    const laptop = panel.locator(`li[data-agent-id="${laptopId}"]`);
    await bot.waitFor();
    await bot.locator('[data-testid="agent-negotiations"] summary').focus();
    await page.keyboard.press("Enter"); // the panel opens from the keyboard
    const sent = bot.locator('[data-testid="delegations-sent"] [data-testid="delegation"]');
    await eventually("the bot's sent delegation", () => sent.count(), 1);
    await eventually("sent delegation completed", () => text(sent.locator('[data-testid="delegation-status"]')), "completed");
    assert.equal(await text(sent.locator('[data-testid="delegation-task"]')), "code-review");
    assert.equal(await text(sent.locator('[data-testid="delegation-other"]')), laptopAnon, "the target by its anonymous id");
    assert.equal(await sent.getAttribute("data-delegation-id"), requestId);
    assert.match(await text(sent.locator("time")), /ago$/);
    assert.equal(await text(bot.locator('[data-testid="delegations-received-empty"]')), "No delegations received yet.");

    if ((await laptop.locator("details").getAttribute("open")) === null) await laptop.locator('[data-testid="agent-negotiations"] summary').click();
    const received = laptop.locator('[data-testid="delegations-received"] [data-testid="delegation"]');
    await eventually("the laptop's received delegation", () => received.count(), 1);
    await eventually("received delegation completed", () => text(received.locator('[data-testid="delegation-status"]')), "completed");
    assert.equal(await text(received.locator('[data-testid="delegation-task"]')), "code-review");
    const requesterAnon = await text(received.locator('[data-testid="delegation-other"]'));
    assert.match(requesterAnon, /^[0-9a-f-]{36}$/, "the requester by an anonymous id");
    assert.notEqual(requesterAnon, botId, "never the requester's agent id");
    assert.equal(await text(laptop.locator('[data-testid="delegations-sent-empty"]')), "No delegations sent yet.");
    // A delegation between one owner's agents is no evidence of work for others: still no record.
    assert.equal(await text(laptop.locator('[data-testid="trust"]')), "no record yet: it has not answered a turn or a delegation");
    assert.ok(!(await text(panel.locator("#agent-list"))).includes(`to ${botId}`), "no agent id as the other side");
    await panel.screenshot({ path: join(OUTPUT_DIR, "agents_delegations.png") });
  });

  step("a reactivated opportunity is listed once in the agent's panel, with names", async () => {
    // Maya now has live agents: her seat parks for them. The platform cancels the negotiation
    // (stalled) and negotiates it again with a new profile that gives no name.
    const started = await server.api(serviceToken, "POST", "/api/negotiations", NEGOTIATION);
    assert.equal(started.status, 201, started.text);
    const [id, first] = [started.json.opportunity.id, started.json.negotiation.id];
    assert.equal(started.json.negotiation.status, "waiting_for_agent", started.text);
    const canceled = await server.api(serviceToken, "DELETE", `/api/negotiations/${first}`);
    assert.equal(canceled.status, 200, canceled.text);
    const again = await server.api(serviceToken, "POST", `/api/opportunities/${id}/reactivate`,
      { candidateUser: { id: "user-tomas", profile: { skills: ["rust", "payments api", "team lead"] } } });
    assert.equal(again.status, 201, again.text);
    const second = again.json.negotiation.id;

    const card = page.locator(`[data-opportunity-id="${id}"]`);
    await eventually("the opportunity negotiates again", () => statusOf(card), "negotiating");
    assert.equal(await text(card.locator('[data-testid="counterpart"]')), "Tomas Novak", "the name survives the reactivation");
    // The card says it is the second round, and shows the first one behind a toggle.
    await eventually("round 2 on the card", () => text(card.locator('[data-testid="round"]')), "round 2");
    await eventually("waiting for Maya's own agent", async () => /^Waiting for your agent until .+, then Parley decides\.$/.test(await text(card.locator('[data-testid="waiting"]'))), true);
    await card.locator('[data-testid="turns"] > summary').click();
    await card.locator('[data-testid="earlier-round"]').waitFor();
    assert.match(await text(card.locator('[data-testid="round-head"]')), /^Round 2/);
    // Maya's own agent had not spoken yet when the platform canceled the first round.
    assert.equal(await text(card.locator('[data-testid="earlier-round"] > summary')), "Round 1: Canceled by the platform after 0 turns.");
    await card.locator('[data-testid="earlier-round"] > summary').click();
    assert.match(await text(card.locator('[data-testid="earlier-round"]')), /No turn was taken\./);
    await shoot(page, "reactivated_round_2", card);
    await card.locator('[data-testid="turns"] > summary').click();
    assert.equal(await text(card.locator('[data-testid="my-decision"]')), "not asked yet: the agents are still negotiating");
    const laptop = page.locator(`[data-testid="agents"] li[data-agent-id="${laptopId}"]`);
    if ((await laptop.locator("details").getAttribute("open")) === null) await laptop.locator('[data-testid="agent-negotiations"] summary').click();
    const entries = laptop.locator(`[data-testid="agent-negotiation"][data-for-opportunity="${id}"]`);
    await eventually("the new round listed", async () => (await entries.count()) === 1 && (await entries.getAttribute("data-negotiation-id")) === second, true);
    assert.match(await text(entries), /^With Tomas Novak/);
    assert.match(await text(entries.locator('[data-testid="agent-negotiation-turns"]')), /^round 2, /);
    assert.doesNotMatch(await text(laptop), /user-tomas/, "no raw user id");
    await laptop.screenshot({ path: join(OUTPUT_DIR, "agents_reactivated.png") });
  });

  step("who decided a turn of Maya's is said alike on the turn and on its reasoning: her agent, or Parley standing in for it, with why", async () => {
    // Round 2 of the reactivated opportunity waits for Maya's own agent; a new match will too.
    const started = await server.api(serviceToken, "POST", "/api/negotiations", NEGOTIATION);
    assert.equal(started.status, 201, started.text);
    const [handedId, handed] = [started.json.opportunity.id, started.json.negotiation.id];
    // Her laptop answers the reactivated round itself, and hands the new match's turn back to
    // Parley. The turns come in the order they parked, so it answers whichever it is given.
    let answeredId = null;
    let handedBack = false;
    for (let i = 0; i < 6 && !handedBack; i++) {
      const picked = await server.keyed(laptopKey, "POST", `/api/agents/${laptopId}/negotiations/pickup?wait=5`);
      assert.equal(picked.status, 200, picked.text);
      const { negotiationId, claimToken, turn } = picked.json;
      const path = `/api/agents/${laptopId}/negotiations/${negotiationId}`;
      if (negotiationId === handed) {
        const released = await server.keyed(laptopKey, "POST", `${path}/release`, { claimToken, handBack: true, reason: "busy" });
        assert.equal(released.status, 200, released.text);
        handedBack = true;
      } else {
        const answered = await server.keyed(laptopKey, "POST", `${path}/respond`, {
          claimToken, action: turn.number === 0 ? "propose" : "accept", message: "Tomas's Rust work is what Maya needs.",
          assessment: { reasoning: "My laptop's own reasons", suggestedRoles: { ownUser: "patient", otherUser: "agent" } },
        });
        assert.equal(answered.status, 200, answered.text);
        answeredId = answeredId || (await server.api(mayaToken, "GET", `/api/negotiations/${negotiationId}`)).json.opportunityId;
      }
    }
    assert.ok(handedBack && answeredId, "the laptop answered one turn and handed one back");

    const heads = async (card) => {
      await card.locator('[data-testid="turns"] > summary').click();
      await card.locator('[data-testid="turn"]').first().waitFor();
      return card.locator('[data-testid="turn"]').first();
    };
    // Her agent's turn: its words and its reasoning are her agent's.
    const answeredCard = page.locator(`#board li[data-opportunity-id="${answeredId}"]`);
    const byAgent = await heads(answeredCard);
    await eventually("her agent's turn", () => text(byAgent.locator('[data-testid="turn-head"]')), "Turn 0 · Your agent proposed the match");
    assert.equal(await text(byAgent.locator('[data-testid="private-reasoning"] > summary')), "Your agent's reasoning (only you see this)");
    await shoot(page, "decided_by_your_agent", answeredCard);
    // Parley standing in: the turn says so, and why, and so does its reasoning.
    const handedCard = page.locator(`#board li[data-opportunity-id="${handedId}"]`);
    const standIn = await heads(handedCard);
    await eventually("Parley's turn for her agent", () => text(standIn.locator('[data-testid="turn-head"]')),
      "Turn 0 · Parley for you proposed the match (your agent handed the turn back)");
    assert.equal(await text(standIn.locator('[data-testid="private-reasoning"] > summary')),
      "Parley's reasoning, standing in for your agent (it handed the turn back) (only you see this)");
    await shoot(page, "decided_by_parley_standing_in", handedCard);
    for (const card of [answeredCard, handedCard]) await card.locator('[data-testid="turns"] > summary').click();

    // The turn it answered gave the laptop a record: its trust in words, against how many others.
    const trust = (await server.api(mayaToken, "GET", `/api/trust/${laptopId}`)).json;
    assert.ok(trust.updatedAt && Number.isInteger(trust.otherAgents), JSON.stringify(trust));
    const score = Math.round(trust.rawScore);
    const words = trust.otherAgents === 0 ? `${score} out of 100; no other agent has a record to compare it with yet`
      : `${score} out of 100, higher than ${trust.percentile}% of the ${trust.otherAgents === 1 ? "other agent" : `${trust.otherAgents} other agents`}`;
    const laptop = page.locator(`[data-testid="agents"] li[data-agent-id="${laptopId}"]`);
    await eventually("the laptop's trust, in words", () => text(laptop.locator('[data-testid="trust"]')), words);
  });

  step("an agent asks its person: the question on the card, live, answered with a button; the other side never sees it", async () => {
    // A new match opens with Maya's turn; her laptop takes it, and asks her instead of deciding.
    const started = await server.api(serviceToken, "POST", "/api/negotiations", NEGOTIATION);
    assert.equal(started.status, 201, started.text);
    const picked = await server.keyed(laptopKey, "POST", `/api/agents/${laptopId}/negotiations/pickup?wait=5`);
    assert.equal(picked.status, 200, picked.text);
    const { negotiationId, claimToken } = picked.json;
    const path = `/api/agents/${laptopId}/negotiations/${negotiationId}`;
    const question = "Tomas wants to work remotely from Prague. Is that fine for you?";
    const options = ["Yes, remote is fine", "No, on site only"];
    const asked = await server.keyed(laptopKey, "POST", `${path}/respond`, { claimToken, action: "ask_person", question, options });
    assert.equal(asked.status, 200, asked.text);
    assert.equal(asked.json.status, "waiting_for_person");
    const opportunity = (await server.api(mayaToken, "GET", `/api/negotiations/${negotiationId}`)).json.opportunityId;

    // It shows up on her card by itself (the event), with the options as buttons and a text answer.
    const card = page.locator(`#board li[data-opportunity-id="${opportunity}"]`);
    const box = card.locator('[data-testid="question"]');
    await eventually("the question on the card", () => text(box.locator('[data-testid="question-text"]')), question);
    assert.deepEqual(await box.locator('[data-testid="question-option"]').allTextContents(), options);
    assert.equal(await box.locator('[data-testid="question-answer"]').count(), 1, "a text answer too");
    assert.equal(await box.getAttribute("aria-labelledby") !== null, true);
    await eventually("the card says her agent waits for her", () => text(card.locator('[data-testid="waiting"]')),
      "Your agent is waiting for your answer to its question.");
    await shoot(page, "ask_person", card);

    // Tomas reads only that it waits for Maya's input.
    const other = await server.api(tomasToken, "GET", `/api/negotiations/${negotiationId}`);
    assert.equal(other.json.waitingFor, "person");
    const tomasOpportunity = await server.api(tomasToken, "GET", `/api/opportunities/${opportunity}`);
    for (const seen of [other.text, tomasOpportunity.text]) assert.ok(!seen.includes("Prague"), `Tomas never reads the question: ${seen}`);

    // She answers with a button: the question goes, and her agent's next pickup carries the answer.
    await box.locator('[data-testid="question-option"]').first().click();
    await eventually("the question answered", () => box.count(), 0);
    const again = await server.keyed(laptopKey, "POST", `/api/agents/${laptopId}/negotiations/pickup?wait=5`);
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json.negotiationId, negotiationId, "the answered turn is the laptop's again");
    assert.deepEqual(again.json.context.personAnswers.map((a) => [a.question, a.answer]), [[question, options[0]]]);
    // Parley takes the turn from here (a plain release where no system negotiator plays).
    let released = await server.keyed(laptopKey, "POST", `${path}/release`, { claimToken: again.json.claimToken, handBack: true, reason: "done asking" });
    if (released.json?.code === "no_system_negotiator") released = await server.keyed(laptopKey, "POST", `${path}/release`, { claimToken: again.json.claimToken });
    assert.equal(released.status, 200, released.text);
  });

  step("the whole console fits 375 px without sideways scrolling", async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    try {
      const card = page.locator('[data-testid="agents"] li[data-agent-id]').filter({ has: page.locator('[data-testid="delegations-received"]') });
      // The card redraws live (its agent's negotiations and liveness change): an element taken
      // in one redraw may be gone by the next, so opening the list is tried again until it holds.
      await eventually("the agent's negotiations open", async () => {
        await card.locator('[data-testid="agent-negotiations"] summary').scrollIntoViewIfNeeded({ timeout: 2000 });
        if ((await card.locator("details").getAttribute("open")) === null) await card.locator('[data-testid="agent-negotiations"] summary').click({ timeout: 2000 });
        return card.locator('[data-testid="agent-negotiation"]').first().isVisible();
      }, true);
      await card.locator('[data-testid="delegations-received"] [data-testid="delegation"]').waitFor();
      await eventually("no horizontal scroll at 375 px", () => page.evaluate(() => document.scrollingElement.scrollWidth <= 375), true);
      assert.equal(await page.evaluate(() => document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth), true, "nothing sticks out sideways");
      // Read in one evaluation: the page redraws live, and a button read one by one may be
      // replaced between the listing and its measuring.
      const outside = () => page.evaluate(() => [...document.querySelectorAll('[data-testid="agents"] button')]
        .filter((b) => b.offsetParent !== null)
        .map((b) => [b.textContent.trim(), b.getBoundingClientRect()])
        .filter(([, r]) => r.left < 0 || r.right > 375)
        .map(([text, r]) => `${text}: ${r.left}-${r.right}`));
      await eventually("every button fits the screen", async () => (await outside()).join("; "), "");
      const buttons = await page.evaluate(() => [...document.querySelectorAll('[data-testid="agents"] button')].filter((b) => b.offsetParent !== null).length);
      assert.ok(buttons > 0, "the agents' cards show buttons");
      await page.screenshot({ path: join(OUTPUT_DIR, "console_375.png"), fullPage: true });
    } finally {
      await page.setViewportSize({ width: 1100, height: 900 });
    }
  });

  step("an agent without a working key says so; agents are stopped, deactivated and deleted from the page", async () => {
    const panel = page.locator('[data-testid="agents"]');
    const bot = panel.locator(`li[data-agent-id="${botId}"]`);
    const laptop = panel.locator(`li[data-agent-id="${laptopId}"]`);
    assert.equal(await text(bot.locator('[data-testid="negotiates"]')), "yes");
    // The bot's only key revoked: it no longer negotiates, and the page says why.
    await bot.locator('[data-testid="revoke"]').click();
    await bot.locator('[data-testid="revoke-confirm"]').click();
    await eventually("the bot without a key", () => text(bot.locator('[data-testid="negotiates"]')), "no: it has no working key (add one)");
    // It was live a moment ago (it delegated); with no key left it can answer nothing.
    assert.equal(await text(bot.locator('[data-testid="liveness"]')), "offline");
    assert.equal(await bot.locator('[data-testid="liveness"]').getAttribute("data-live"), "false");

    // Stop the laptop negotiating, then let it negotiate again.
    await laptop.locator('[data-testid="toggle-mode"]').click();
    await eventually("the laptop stopped", () => text(laptop.locator('[data-testid="negotiates"]')), "no: negotiating is turned off");
    assert.equal((await server.api(mayaToken, "GET", `/api/agents/${laptopId}`)).json.negotiationMode, "disabled");
    assert.equal(await text(laptop.locator('[data-testid="toggle-mode"]')), "Negotiate again");
    await laptop.locator('[data-testid="toggle-mode"]').click();
    await eventually("the laptop negotiates again", () => text(laptop.locator('[data-testid="negotiates"]')), "yes");
    assert.equal((await server.api(mayaToken, "GET", `/api/agents/${laptopId}`)).json.negotiationMode, "enabled");

    // Deactivate the laptop and activate it again.
    await laptop.locator('[data-testid="toggle-status"]').click();
    await eventually("the laptop deactivated", () => text(laptop.locator('[data-testid="negotiates"]')), "no: it is deactivated");
    assert.equal((await server.api(mayaToken, "GET", `/api/agents/${laptopId}`)).json.status, "inactive");
    assert.equal(await text(laptop.locator('[data-testid="toggle-status"]')), "Activate");
    await laptop.locator('[data-testid="toggle-status"]').click();
    await eventually("the laptop active again", () => text(laptop.locator('[data-testid="negotiates"]')), "yes");

    // Delete the bot, through a confirmation whose safe choice has the focus.
    await bot.locator('[data-testid="delete-agent"]').focus();
    await page.keyboard.press("Enter");
    await bot.locator('[data-testid="delete-confirm"]').waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "delete-cancel", "the safe choice has the focus");
    await bot.screenshot({ path: join(OUTPUT_DIR, "agents_delete_confirm.png") });
    await page.keyboard.press("Shift+Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "delete-confirm");
    await page.keyboard.press("Enter");
    await eventually("the bot is gone", () => bot.count(), 0);
    assert.equal((await server.api(mayaToken, "GET", `/api/agents/${botId}`)).status, 404, "deleted on the server");
    assert.equal(await laptop.count(), 1, "the other agent stays");
  });

  step("an agent registered by its AgentCard shows as called by Parley (A2A) with its card URL, never its credential", async () => {
    // A card server on loopback, serving an A2A 0.3 card.
    const cards = createHttpServer((req, res) => {
      const base = `http://127.0.0.1:${cards.address().port}`;
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({
        name: "Maya's reviewer", description: "Reviews code", version: "1.0.0", url: `${base}/a2a`, protocolVersion: "0.3.0",
        capabilities: { streaming: false }, defaultInputModes: ["application/json"], defaultOutputModes: ["application/json"],
        skills: [{ id: "review", name: "Code review", description: "Reviews a diff", tags: [] }],
      }));
    });
    await new Promise((r) => cards.listen(0, "127.0.0.1", r));
    try {
      const cardUrl = `http://127.0.0.1:${cards.address().port}/.well-known/agent-card.json`;
      const secret = `credential-${randomBytes(12).toString("hex")}`;
      const created = await server.api(mayaToken, "POST", "/api/agents",
        { name: "Maya's reviewer", agentCardUrl: cardUrl, a2aAuth: { scheme: "bearer", credential: secret } });
      assert.equal(created.status, 201, JSON.stringify(created.json));
      const panel = page.locator('[data-testid="agents"]');
      await panel.locator('[data-testid="agents-refresh"]').click();
      const card = panel.locator(`li[data-agent-id="${created.json.agent.id}"]`);
      await eventually("the A2A agent listed", () => card.count(), 1);
      assert.equal(await text(card.locator('[data-testid="delivery"]')), "called by Parley (A2A)");
      assert.equal(await text(card.locator('[data-testid="agent-card-url"] code')), cardUrl);
      // How Parley's last call to it ended: none yet.
      assert.equal(await text(card.locator('[data-testid="last-call"]')), "not called yet");
      // It never connects: no liveness badge, no hint to run `parley agent` with its key.
      assert.equal(await card.locator('[data-testid="liveness"]').count(), 0);
      assert.equal(await card.locator('[data-testid="connect-hint"]').count(), 0);
      assert.equal(await text(card.locator('[data-testid="negotiates"]')), "yes: Parley calls it");
      assert.ok(!(await page.content()).includes(secret), "the page never shows the credential");
      await card.screenshot({ path: join(OUTPUT_DIR, "agent_called_by_parley.png") });
    } finally {
      await new Promise((r) => cards.close(r));
    }
  });

  step("My webhooks shows the person's own webhooks with their status and last delivery", async () => {
    // A receiver on loopback: /ok answers 200, /gone 410 (which disables its webhook).
    const hooks = createHttpServer((req, res) => {
      req.resume();
      req.on("end", () => { res.writeHead(req.url === "/gone" ? 410 : 200); res.end(); });
    });
    await new Promise((r) => hooks.listen(0, "127.0.0.1", r));
    try {
      const base = `http://127.0.0.1:${hooks.address().port}`;
      const ok = await server.api(mayaToken, "POST", "/api/webhooks", { url: `${base}/ok` });
      assert.equal(ok.status, 201, JSON.stringify(ok.json));
      const gone = await server.api(mayaToken, "POST", "/api/webhooks", { url: `${base}/gone`, events: ["opportunity.status"] });
      assert.equal(gone.status, 201, JSON.stringify(gone.json));
      // Tomas's webhook is his: Maya's page never shows it.
      const his = await server.api(tomasToken, "POST", "/api/webhooks", { url: `${base}/tomas` });
      assert.equal(his.status, 201, JSON.stringify(his.json));
      // An event of Maya's: a new negotiation of hers.
      const started = await server.api(serviceToken, "POST", "/api/negotiations", NEGOTIATION);
      assert.equal(started.status, 201, started.text);
      const panel = page.locator('[data-testid="webhooks"]');
      await panel.waitFor({ state: "visible" });
      const card = (id) => panel.locator(`li[data-webhook-id="${id}"]`);
      const delivered = async () => {
        await panel.locator('[data-testid="webhooks-refresh"]').click();
        return /delivered, HTTP 200/.test(await text(card(ok.json.id).locator('[data-testid="webhook-last"]')).catch(() => ""));
      };
      await eventually("the last delivery shown", delivered, true);
      assert.equal(await text(card(ok.json.id).locator('[data-testid="webhook-url"]')), `${base}/ok`);
      assert.equal(await text(card(ok.json.id).locator('[data-testid="webhook-status"]')), "Enabled");
      const disabled = async () => {
        await panel.locator('[data-testid="webhooks-refresh"]').click();
        return await text(card(gone.json.id).locator('[data-testid="webhook-status"]')).catch(() => "");
      };
      await eventually("the 410 endpoint shown disabled", disabled, "Disabled: the endpoint answered 410 Gone");
      assert.match(await text(card(gone.json.id).locator('[data-testid="webhook-last"]')), /failed: the endpoint answered HTTP 410\.$/);
      assert.equal(await panel.locator('li[data-testid="webhook"]').count(), 2, "only Maya's own webhooks");
      assert.equal(await card(his.json.id).count(), 0);
      assert.ok(!(await page.content()).includes(ok.json.secret), "the page never shows a secret");
      await panel.screenshot({ path: join(OUTPUT_DIR, "webhooks.png") });
    } finally {
      await new Promise((r) => hooks.close(r));
    }
  });

  step("tokens travel only in the Authorization header; no page errors", async () => {
    const ours = requests.slice(signedOutRequests).filter((r) => r.url.startsWith(`${proxy.base}/api/`));
    assert.ok(ours.some((r) => r.url === `${proxy.base}/api/events`), "the page read /api/events");
    for (const r of ours) {
      assert.equal(r.headers.authorization, `Bearer ${mayaToken}`, `${r.method} ${r.url} carries the token header`);
    }
    for (const r of requests) assert.ok(!r.url.includes(mayaToken.split(".")[2]), `no token in a URL: ${r.url}`);
    assert.deepEqual(pageErrors, []);
  });

  step("sign out forgets the token", async () => {
    await page.locator("#signout").click();
    await page.locator("#token").waitFor({ state: "visible" });
    assert.equal(await page.evaluate(() => document.activeElement?.id), "token");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("parley.token")), null);
    assert.equal(await page.locator("#connection").getAttribute("data-state"), "offline");
  });
});
