// Every test talks to the test databases and Redis, never to the development ones. An integration
// test (*.int.spec.ts) finds its project's database made for this run; a unit test needs none, so
// projects with unit tests only never touch PostgreSQL.
const { TestEnvironment } = require('jest-environment-node');
const { prepareDatabase, redisAnswers } = require('./databases');
const { projectDatabaseUrl, testUrls } = require('./urls');

const prepared = new Set();

class OperatorTestEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.databaseUrl = projectDatabaseUrl(config.projectConfig.rootDir);
    // A project that opts out of the global setup (deploy: its check makes a database of its own) gets none.
    this.needsDatabase = Boolean(config.projectConfig.globalSetup) && context.testPath.endsWith('.int.spec.ts');
    Object.assign(this.global.process.env, {
      DATABASE_URL: this.databaseUrl,
      REDIS_URL: testUrls().redisUrl,
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
    });
  }

  async setup() {
    await super.setup();
    // The global setup names the run. When the caller has made the databases (OPERATOR_TEST_DB_READY),
    // nothing is prepared here.
    const run = process.env.OPERATOR_TEST_RUN;
    if (!this.needsDatabase || !run || process.env.OPERATOR_TEST_DB_READY) return;
    if (prepared.has(`${run} ${this.databaseUrl}`)) return;
    await prepareDatabase(this.databaseUrl, run);
    const { redisUrl } = testUrls();
    if (!(await redisAnswers(redisUrl))) throw new Error(`Redis does not answer at ${redisUrl}; start it before the tests`);
    prepared.add(`${run} ${this.databaseUrl}`);
  }
}

module.exports = OperatorTestEnvironment;
