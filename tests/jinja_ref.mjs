// jinja_ref.mjs - the reference side of test_jinja_conformance: renders every chat template with
// every conversation of tests/data/jinja_conversations.json through @huggingface/jinja and writes
// OUT/<template>.<case>.out (the rendered bytes) or OUT/<template>.<case>.err (the engine's error),
// and OUT/<case>.context.json (the variables) and OUT/now (the clock, seconds since the epoch).
// usage: node jinja_ref.mjs PACKAGE_DIR CONVERSATIONS.json OUT_DIR TEMPLATE.jinja...
//   PACKAGE_DIR holds node_modules/@huggingface/jinja
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [pkgDir, convPath, outDir, ...templates] = process.argv.slice(2);
const conv = JSON.parse(fs.readFileSync(convPath, "utf8"));

// the clock the templates print (strftime_now): fixed, in UTC, as on kiln's side
process.env.TZ = "UTC";
const fixed = Date.parse(conv.now);
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...a) { super(...(a.length ? a : [fixed])); }
  static now() { return fixed; }
};

const entry = path.join(pkgDir, "node_modules", "@huggingface", "jinja", "dist", "index.js");
const { Template } = await import(pathToFileURL(entry).href);
fs.mkdirSync(outDir, { recursive: true });
// what the other side needs to render the same pairs: the clock and each case's whole context
fs.writeFileSync(path.join(outDir, "now"), String(Math.floor(fixed / 1000)));
for (const c of conv.cases) {
  const ctx = { ...conv.common, ...c.context };
  if (c.tools) ctx.tools = conv.tools;
  fs.writeFileSync(path.join(outDir, `${c.name}.context.json`), JSON.stringify(ctx));
}
for (const file of templates) {
  const name = path.basename(file, ".jinja");
  let tmpl = null, parseErr = null;
  try { tmpl = new Template(fs.readFileSync(file, "utf8")); } catch (e) { parseErr = String(e.message || e); }
  for (const c of conv.cases) {
    const ctx = { ...conv.common, ...c.context };
    if (c.tools) ctx.tools = conv.tools;
    const base = path.join(outDir, `${name}.${c.name}`);
    if (parseErr) { fs.writeFileSync(base + ".err", "parse: " + parseErr); continue; }
    try {
      fs.writeFileSync(base + ".out", tmpl.render(structuredClone(ctx)));
    } catch (e) {
      fs.writeFileSync(base + ".err", String(e.message || e));
    }
  }
}
