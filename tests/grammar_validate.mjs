// grammar_validate.mjs - the validator for test_grammar_random: each line of the
// file holds {"schema", "output"}; the output must parse as JSON and validate
// against the schema with ajv (draft 2020-12) and ajv-formats, code that is not
// kiln's. Prints every failure; exit 1 when there is one.
//   node tests/grammar_validate.mjs FILE.jsonl NODE_MODULES_DIR
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const [file, mods] = process.argv.slice(2);
const require = createRequire(mods.replace(/\/?$/, "/"));
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

let n = 0, bad = 0;
for (const line of readFileSync(file, "utf8").split("\n")) {
  if (!line) continue;
  n++;
  const { schema, output } = JSON.parse(line);
  let value;
  try {
    value = JSON.parse(output);
  } catch (e) {
    bad++;
    console.log(`#${n}: not JSON (${e.message})\n  schema: ${JSON.stringify(schema)}\n  output: ${output}`);
    continue;
  }
  const validate = ajv.compile(schema);
  if (!validate(value)) {
    bad++;
    console.log(`#${n}: invalid: ${ajv.errorsText(validate.errors)}\n  schema: ${JSON.stringify(schema)}\n  output: ${output}`);
  }
}
console.log(`ajv: ${n - bad} of ${n} outputs valid`);
process.exit(bad || n === 0 ? 1 : 0);
