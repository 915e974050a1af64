// Ends the run with one plain line, "N passed, N failed, N skipped", for tools that read it.
class SummaryReporter {
  onRunComplete(_contexts, results) {
    process.stdout.write(`\n${results.numPassedTests} passed, ${results.numFailedTests} failed, ${results.numPendingTests} skipped\n`);
  }
}
module.exports = SummaryReporter;
