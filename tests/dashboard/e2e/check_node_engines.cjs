#!/usr/bin/env node
// Checks that every package in an npm lockfile (v2/v3, its "packages" map) accepts, by its
// engines.node, both the Node that Debian 12 ships and the Node running this script. Run by
// run_e2e.sh before anything is installed, and by CTest (troupe_e2e_node_engines) on the committed
// lock and on fixtures. Dependency-free: it carries its own reading of npm's semver ranges.
//   node check_node_engines.cjs LOCKFILE     exit 0 when accepted; 1 naming what is rejected
//   node check_node_engines.cjs --self-test  the range reader against a table of known answers
//
// Debian 12 (bookworm) ships nodejs 18.19.0 (12.5) and 18.20.4 (12.8 and later, deb12u2/u3);
// playwright-core from 1.62 on says engines.node ">=20", which is why tests/dashboard/e2e pins an
// older release. Ranges are read as npm does for engines (npm-install-checks: node-semver's
// satisfies with includePrerelease): <, <=, >, >=, =, bare versions, x-ranges (1, 1.2, 1.x, *),
// ~ (and ~>), ^, hyphen ranges (1.2 - 3), space-separated AND and || OR. A range it cannot read is
// a failure that names it, never a pass.
"use strict";
const fs = require("fs");

const DEBIAN12_NODE = [
  { version: "18.19.0", what: "Debian 12's oldest nodejs" },
  { version: "18.20.4", what: "Debian 12's current nodejs" },
];

class RangeError_ extends Error {}

// ---- versions ------------------------------------------------------------------------------------
const NUM = "(0|[1-9]\\d*)";
const IDENT = "(?:0|[1-9]\\d*|\\d*[a-zA-Z-][a-zA-Z0-9-]*)";
const PRE = `(?:-(${IDENT}(?:\\.${IDENT})*))?`;
const BUILD = "(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?";
const FULL_RE = new RegExp(`^v?${NUM}\\.${NUM}\\.${NUM}${PRE}${BUILD}$`);
const XR = "(x|X|\\*|0|[1-9]\\d*)";
const PARTIAL_RE = new RegExp(`^v?${XR}(?:\\.${XR}(?:\\.${XR}${PRE}${BUILD})?)?$`);

function splitPre(pre) {
  return pre === undefined ? [] : pre.split(".").map(p => (/^\d+$/.test(p) ? Number(p) : p));
}

// A full version: { major, minor, patch, pre: [identifiers] }; throws when it is not one.
function parseVersion(text) {
  const m = FULL_RE.exec(String(text).trim());
  if (!m) throw new RangeError_(`'${text}' is not a version (MAJOR.MINOR.PATCH)`);
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), pre: splitPre(m[4]) };
}

function v(major, minor, patch, pre = []) { return { major, minor, patch, pre }; }

function comparePre(a, b) {
  // A release sorts after its prereleases.
  if (a.length === 0 || b.length === 0) return (a.length === 0) - (b.length === 0);
  for (let i = 0; i < Math.max(a.length, b.length); ++i) {
    if (i >= a.length) return -1;
    if (i >= b.length) return 1;
    const x = a[i], y = b[i];
    if (x === y) continue;
    const xn = typeof x === "number", yn = typeof y === "number";
    if (xn && yn) return x < y ? -1 : 1;
    if (xn !== yn) return xn ? -1 : 1;  // numeric identifiers sort before alphanumeric ones
    return x < y ? -1 : 1;
  }
  return 0;
}

function compare(a, b) {
  return (a.major - b.major) || (a.minor - b.minor) || (a.patch - b.patch) || comparePre(a.pre, b.pre);
}

// ---- ranges --------------------------------------------------------------------------------------
// A range is a list of comparator sets (OR); a set is a list of { op, ver } (AND). NEVER is a set no
// version satisfies; an empty set is satisfied by every version.
const NEVER = [{ op: "<", ver: v(0, 0, 0, [0]) }];
const isX = s => s === undefined || s === "x" || s === "X" || s === "*";

// A partial version: numbers for the parts given, null for x / * / absent parts.
function parsePartial(text, whole) {
  const m = PARTIAL_RE.exec(text);
  if (!m) throw new RangeError_(`'${text}' in '${whole}' is not a version or x-range`);
  // A number after an x (1.x.3, x.2) is not a range npm reads the same way everywhere: refused.
  const given = [m[1], m[2], m[3]].filter(p => p !== undefined);
  const firstX = given.findIndex(p => isX(p));
  if (firstX >= 0 && given.slice(firstX).some(p => !isX(p)))
    throw new RangeError_(`'${text}' in '${whole}' has a number after an x`);
  const parts = [m[1], m[2], m[3]].map(p => (isX(p) ? null : Number(p)));
  if (parts[2] === null && m[4] !== undefined)
    throw new RangeError_(`'${text}' in '${whole}' has a prerelease on an x-range`);
  return { major: parts[0], minor: parts[1], patch: parts[2], pre: splitPre(m[4]) };
}

// The lowest version a partial names: x parts as 0 and, as npm's includePrerelease has it, the
// lowest prerelease (-0) when a part is an x.
function low(p) {
  if (p.patch === null) return v(p.major ?? 0, p.minor ?? 0, 0, [0]);
  return v(p.major, p.minor, p.patch, p.pre);
}
// The first version past a partial with an x part (and a major): 1.x -> 2.0.0-0, 1.2.x -> 1.3.0-0.
function pastPartial(p) {
  return p.minor === null ? v(p.major + 1, 0, 0, [0]) : v(p.major, p.minor + 1, 0, [0]);
}

function primitive(op, p) {
  if (p.major === null) {  // *, x: any version for =, >=, <=; none for < and >
    return op === "<" || op === ">" ? NEVER : [];
  }
  if (p.patch !== null) return [{ op: op === "" ? "=" : op, ver: low(p) }];
  switch (op) {
    case "": case "=": return [{ op: ">=", ver: low(p) }, { op: "<", ver: pastPartial(p) }];
    case ">=": return [{ op: ">=", ver: low(p) }];
    case ">": return [{ op: ">=", ver: pastPartial(p) }];  // >1 is >=2.0.0-0
    case "<": return [{ op: "<", ver: v(p.major, p.minor ?? 0, 0, [0]) }];
    case "<=": return [{ op: "<", ver: pastPartial(p) }];
  }
  throw new RangeError_(`unknown operator '${op}'`);
}

function tilde(p) {
  if (p.major === null) return [];
  const upper = p.minor === null ? v(p.major + 1, 0, 0, [0]) : v(p.major, p.minor + 1, 0, [0]);
  return [{ op: ">=", ver: low(p) }, { op: "<", ver: upper }];
}

function caret(p) {
  if (p.major === null) return [];
  let upper;
  if (p.major > 0 || p.minor === null) upper = v(p.major + 1, 0, 0, [0]);
  else if (p.minor > 0 || p.patch === null) upper = v(0, p.minor + 1, 0, [0]);
  else upper = v(0, 0, p.patch + 1, [0]);
  return [{ op: ">=", ver: low(p) }, { op: "<", ver: upper }];
}

function hyphen(a, b, whole) {
  const from = parsePartial(a, whole), to = parsePartial(b, whole);
  // With includePrerelease npm widens both ends to the prereleases: 1.2.3 - 2.3.4 is
  // >=1.2.3-0 <2.3.5-0.
  const set = [];
  if (from.major !== null)
    set.push({ op: ">=", ver: from.patch !== null && from.pre.length === 0
                                ? v(from.major, from.minor, from.patch, [0]) : low(from) });
  if (to.major === null) return set;
  if (to.patch === null) set.push({ op: "<", ver: pastPartial(to) });
  else if (to.pre.length) set.push({ op: "<=", ver: low(to) });
  else set.push({ op: "<", ver: v(to.major, to.minor, to.patch + 1, [0]) });
  return set;
}

const TERM_RE = /^(~>|~|\^|>=|<=|>|<|=)?(.*)$/;

function parseSet(text, whole) {
  const t = text.trim();
  const h = /^(\S+)\s+-\s+(\S+)$/.exec(t);
  if (h) return hyphen(h[1], h[2], whole);
  if (t === "") return [];
  // "> = 1.2" is not a range; ">= 1.2" is (npm joins an operator to the version after it).
  const terms = t.replace(/(~>|~|\^|>=|<=|>|<|=)\s+(?=[0-9vxX*])/g, "$1").split(/\s+/);
  let set = [];
  for (const term of terms) {
    const m = TERM_RE.exec(term);
    const op = m[1] ?? "", p = parsePartial(m[2], whole);
    if (op === "~" || op === "~>") set = set.concat(tilde(p));
    else if (op === "^") set = set.concat(caret(p));
    else set = set.concat(primitive(op, p));
  }
  return set;
}

// Parses an engines range; throws RangeError_ naming the part it cannot read.
function parseRange(text) {
  if (typeof text !== "string") throw new RangeError_(`${JSON.stringify(text)} is not a range string`);
  return text.split("||").map(part => parseSet(part, text));
}

function test(c, ver) {
  const d = compare(ver, c.ver);
  switch (c.op) {
    case "=": return d === 0;
    case "<": return d < 0;
    case "<=": return d <= 0;
    case ">": return d > 0;
    case ">=": return d >= 0;
  }
  throw new RangeError_(`unknown operator '${c.op}'`);
}

function satisfies(versionText, rangeText) {
  const ver = parseVersion(versionText);
  return parseRange(rangeText).some(set => set.every(c => test(c, ver)));
}

// ---- the lockfile check --------------------------------------------------------------------------
function checkLock(lockPath) {
  let lock;
  try {
    lock = JSON.parse(fs.readFileSync(lockPath, "utf8"));
  } catch (e) {
    return [`cannot read ${lockPath} as JSON: ${e.message}`];
  }
  if (!lock || typeof lock.packages !== "object" || lock.packages === null)
    return [`${lockPath} has no "packages" map (lockfileVersion ${lock && lock.lockfileVersion}); ` +
            `regenerate it with npm 7 or later: npm install --package-lock-only`];
  const running = process.version.replace(/^v/, "");
  const nodes = DEBIAN12_NODE.map(n => ({ ...n }));
  const same = nodes.find(n => n.version === running);
  if (same) same.what += ", the node running this check";
  else nodes.push({ version: running, what: "the node running this check" });
  const failures = [];
  let checked = 0;
  for (const [where, pkg] of Object.entries(lock.packages)) {
    const name = where === "" ? (lock.name || "(the root package)") : where.replace(/^.*node_modules\//, "");
    const label = `${name}${pkg.version ? " " + pkg.version : ""} (${where === "" ? "root" : where})`;
    if (pkg.engines === undefined) continue;
    if (typeof pkg.engines !== "object" || pkg.engines === null || Array.isArray(pkg.engines)) {
      failures.push(`${label}: engines ${JSON.stringify(pkg.engines)} is not an object; cannot tell ` +
                    `which Node it accepts — pin another release`);
      continue;
    }
    const range = pkg.engines.node;
    if (range === undefined) continue;
    ++checked;
    let rejected;
    try {
      rejected = nodes.filter(n => !satisfies(n.version, range));
    } catch (e) {
      if (!(e instanceof RangeError_)) throw e;
      failures.push(`${label}: cannot read its engines.node ${JSON.stringify(range)} (${e.message}); ` +
                    `pin a release whose range this check can read, or teach check_node_engines.cjs the form`);
      continue;
    }
    if (rejected.length)
      failures.push(`${label}: engines.node "${range}" rejects Node ` +
                    rejected.map(n => `${n.version} (${n.what})`).join(", ") +
                    `; pin an older release of ${name} whose engines.node accepts them ` +
                    `(npm view ${name} engines --json) in tests/dashboard/e2e/package.json and ` +
                    `regenerate package-lock.json (npm install --package-lock-only)`);
  }
  if (failures.length === 0)
    console.log(`check_node_engines: ${lockPath}: ${checked} engines.node range(s) accept Node ` +
                nodes.map(n => `${n.version} (${n.what})`).join(", "));
  return failures;
}

// ---- self-test -----------------------------------------------------------------------------------
// [range, version, expected]; expected "error" means the range must be refused as unreadable.
const TABLE = [
  [">=18", "18.19.0", true], [">=18", "17.9.1", false], [">=20", "18.20.4", false],
  [">=20", "20.0.0", true], [">=18.19", "18.18.2", false], [">=18.19", "18.19.0", true],
  [">18", "18.20.4", false], [">18", "19.0.0", true], [">18.19", "18.20.0", true],
  [">18.19", "18.19.9", false], [">18.19.0", "18.19.1", true], [">18.19.0", "18.19.0", false],
  ["<20", "18.20.4", true], ["<20", "20.0.0", false], ["<18.20", "18.19.0", true],
  ["<18.20", "18.20.4", false], ["<=18", "18.99.0", true], ["<=18", "19.0.0", false],
  ["<=18.19", "18.19.5", true], ["<=18.19.0", "18.19.1", false], ["=18.19.0", "18.19.0", true],
  ["=18.19.0", "18.19.1", false], ["18.19.0", "18.19.0", true], ["v18.19.0", "18.19.1", false],
  ["18", "18.20.4", true], ["18", "19.0.0", false], ["18.x", "18.0.0", true], ["18.x", "20.1.0", false],
  ["18.19.x", "18.19.7", true], ["18.19.x", "18.20.0", false], ["*", "0.10.0", true], ["", "1.0.0", true],
  ["x", "99.0.0", true], ["18.X", "18.3.0", true], [">=18.x", "18.0.0", true], [">18.x", "19.0.0", true],
  [">18.x", "18.99.0", false], ["<18.x", "17.9.0", true], ["<18.x", "18.0.0", false],
  ["^18.19.0", "18.20.4", true], ["^18.19.0", "18.18.0", false], ["^18.19.0", "19.0.0", false],
  ["^18", "18.0.0", true], ["^0.2.3", "0.2.9", true], ["^0.2.3", "0.3.0", false],
  ["^0.0.3", "0.0.3", true], ["^0.0.3", "0.0.4", false], ["^0.x", "0.9.0", true], ["^0.x", "1.0.0", false],
  ["~18.19.0", "18.19.9", true], ["~18.19.0", "18.20.0", false], ["~18", "18.20.4", true],
  ["~18", "19.0.0", false], ["~>18.19", "18.19.0", true], ["~18.19", "18.20.0", false],
  [">=16 <19", "18.20.4", true], [">=16 <19", "19.0.0", false], [">= 18.19.0", "18.19.0", true],
  ["^18.19.0 || >=20", "18.19.0", true], ["^18.19.0 || >=20", "19.9.0", false],
  ["^18.19.0 || >=20", "20.20.2", true], ["^18.20.5 || >=20", "18.19.0", false],
  ["^14.17.0 || ^16.13.0 || >=18.0.0", "18.20.4", true], ["16 - 18", "18.20.4", true],
  ["16 - 18", "19.0.0", false], ["16.1.2 - 18.19.0", "18.19.0", true], ["16.1.2 - 18.19.0", "18.19.1", false],
  [">=18.0.0-0", "18.0.0-pre", true], [">=18.0.0", "18.0.0-pre", false], ["<18.0.0", "18.0.0-rc.1", true],
  ["banana", "18.19.0", "error"], [">=eighteen", "18.19.0", "error"], ["18.19.0.1", "18.19.0", "error"],
  ["> = 18", "18.19.0", "error"], [">=18 ||| <2", "18.19.0", "error"], ["18.x.3-pre", "18.1.3", "error"], ["18.x.3", "18.1.3", "error"],
];

function selfTest() {
  const wrong = [];
  for (const [range, ver, expected] of TABLE) {
    let got;
    try {
      got = satisfies(ver, range);
    } catch (e) {
      if (!(e instanceof RangeError_)) throw e;
      got = "error";
    }
    if (got !== expected) wrong.push(`"${range}" with ${ver}: expected ${expected}, got ${got}`);
  }
  const order = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
                 "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"];
  for (let i = 1; i < order.length; ++i)
    if (compare(parseVersion(order[i - 1]), parseVersion(order[i])) >= 0)
      wrong.push(`${order[i - 1]} should sort before ${order[i]}`);
  if (wrong.length) {
    for (const w of wrong) console.error(`check_node_engines: self-test FAILED: ${w}`);
    return 1;
  }
  console.log(`check_node_engines: self-test: ${TABLE.length} ranges and ${order.length} orderings right`);
  return 0;
}

function main(argv) {
  if (argv.length === 1 && argv[0] === "--self-test") return selfTest();
  if (argv.length !== 1 || argv[0].startsWith("-")) {
    console.error("usage: node check_node_engines.cjs LOCKFILE | --self-test");
    return 2;
  }
  const failures = checkLock(argv[0]);
  for (const f of failures) console.error(`check_node_engines: FAILED: ${f}`);
  return failures.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
