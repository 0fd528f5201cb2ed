import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends every run with one plain line, `Tests: N passed, N failed, N skipped`, that any CI log
 * reader understands. A file that failed to load, or an unhandled error, counts as a failure.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(
    testModules: ReadonlyArray<TestModule>,
    unhandledErrors: ReadonlyArray<unknown>,
  ): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const testModule of testModules) {
      let tests = 0;
      for (const test of testModule.children.allTests()) {
        tests += 1;
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failed += 1;
        else skipped += 1;
      }
      if (tests === 0 && testModule.state() === 'failed') failed += 1;
    }
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
