// Where the tests find PostgreSQL and Redis. The test database is dropped and created anew each run.
exports.testUrls = () => ({
  databaseUrl: process.env.TEST_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_test',
  redisUrl: process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379',
});
