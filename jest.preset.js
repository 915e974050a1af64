// Shared Jest settings: every project's jest.config.js spreads this.
const path = require('node:path');

const root = __dirname;

module.exports = {
  // light-my-request (fastify.inject) loads the ESM-only `cookie`, and @fastify/static (under the
  // docs page and the queue dashboard) the ESM-only `content-disposition`; swc turns them into CommonJS.
  transform: { '^.+\\.(t|j)s$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }] },
  transformIgnorePatterns: ['/node_modules/(?!(cookie|content-disposition)/)'],
  moduleFileExtensions: ['ts', 'js', 'json'],
  moduleNameMapper: { '^@operator/(provider-[a-z0-9]+)/descriptor$': path.join(root, 'libs/$1/src/descriptor.ts'), '^@operator/(.*)$': path.join(root, 'libs/$1/src/index.ts') },
  testMatch: ['<rootDir>/src/**/*.spec.ts'],
  // A project's integration tests (*.int.spec.ts) get a database of their own, cloned for the run from
  // a migrated template; its unit tests get none (tools/jest/environment.js).
  testEnvironment: path.join(root, 'tools/jest/environment.js'),
  globalSetup: path.join(root, 'tools/jest/global-setup.js'),
  testTimeout: 30000,
};
