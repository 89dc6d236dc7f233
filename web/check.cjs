// Runs tilekit-web's `run_kernel` under Node: prints the start of the kernel's WGSL and checks
// the interpreter's output against the f64 reference.
// Usage: node web/check.cjs <the bindings' folder (wasm-bindgen --target nodejs)> [kernel] [shape] [seed]
"use strict";
const path = require("node:path");

const [dir, kernel = "vector_add", shape = "1000", seed = "1"] = process.argv.slice(2);
if (!dir) {
  console.error("usage: node web/check.cjs <bindings folder> [kernel] [shape] [seed]");
  process.exit(2);
}
const web = require(path.resolve(dir, "tilekit_web.js"));
const t0 = process.hrtime.bigint();
const run = web.run_kernel(kernel, shape, BigInt(seed));
const ms = Number(process.hrtime.bigint() - t0) / 1e6;
const lines = run.wgsl.split("\n");
console.log(lines.slice(0, 12).join("\n"));
console.log(`... (${lines.length} lines of WGSL)`);
const out = run.output;
const n = out.length;
console.log(`${kernel} ${shape}: ${n} outputs in ${ms.toFixed(1)} ms, first ${Array.from(out.slice(0, 4)).join(", ")}`);
console.log(`reference   ${Array.from(run.reference.slice(0, 4)).join(", ")}`);
console.log(`max |output - reference| = ${run.max_abs_error}`);
if (!run.wgsl.includes("@compute") || n === 0 || n !== run.reference.length || !(run.max_abs_error <= 1e-5)) {
  console.error("FAILED");
  process.exit(1);
}
console.log("ok");
