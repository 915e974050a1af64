// Runs once before the tests: names the run, so that each project's database is made anew once in
// it (tools/jest/environment.js), whichever worker starts its first integration test.
const { randomUUID } = require('node:crypto');

module.exports = async function globalSetup() {
  process.env.OPERATOR_TEST_RUN = randomUUID();
};
