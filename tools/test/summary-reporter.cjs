// Jest reporter that writes this package's pass/fail counts to $CUSTOS_TEST_RESULTS_DIR, so the
// test command can print one closing "N passed, N failed" line for the whole suite.
const fs = require('node:fs');
const path = require('node:path');

class SummaryReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
  }
  onRunComplete(_contexts, results) {
    const dir = process.env.CUSTOS_TEST_RESULTS_DIR;
    if (!dir) return;
    fs.mkdirSync(dir, { recursive: true });
    const name =
      path.relative(path.resolve(__dirname, '..', '..'), this.rootDir).replace(/[\\/]/g, '__') || 'root';
    const summary = {
      package: name,
      passed: results.numPassedTests,
      failed: results.numFailedTests + results.numRuntimeErrorTestSuites,
      skipped: results.numPendingTests + results.numTodoTests,
    };
    fs.writeFileSync(path.join(dir, `${name}.json`), JSON.stringify(summary));
  }
}
module.exports = SummaryReporter;
