// Runs the client of the http-tests/cache-tests suite (a checkout given as the first argument)
// against a base URL (the second) as a browser's private cache is tested, scores each test with
// the suite's own determineTestResult (dependencies honoured), and prints one JSON object:
// test id -> { result, detail }. Used by Tests/TrellisTests/CacheConformanceTests.swift.
import path from 'path'
import { pathToFileURL } from 'url'

const [checkout, base] = process.argv.slice(2)
const load = (file) => import(pathToFileURL(path.join(checkout, file)).href)
const runner = await load('test-engine/client/runner.mjs')
const scoring = await load('test-engine/lib/results.mjs')
const tests = (await load('tests/index.mjs')).default

await runner.runTests(tests, true, base)
const raw = runner.getResults()
const scored = {}
for (const id of Object.keys(raw)) {
  const type = scoring.determineTestResult(tests, id, raw, true)
  const result = Object.keys(scoring.resultTypes).find((name) => scoring.resultTypes[name] === type)
  scored[id] = { result, detail: raw[id] === true ? '' : String(raw[id][1] ?? raw[id]) }
}
console.log(JSON.stringify(scored))
