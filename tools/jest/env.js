// Every test process talks to the test database and Redis, never to the development ones.
const { testUrls } = require('./urls');

const { databaseUrl, redisUrl } = testUrls();
process.env.DATABASE_URL = databaseUrl;
process.env.REDIS_URL = redisUrl;
process.env.NODE_ENV = 'test';
process.env.LOG_LEVEL = 'silent';
