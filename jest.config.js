// `npx jest` runs every project; `npx jest --selectProjects gateway` runs one.
module.exports = {
  projects: ['<rootDir>/libs/*/jest.config.js', '<rootDir>/apps/*/jest.config.js', '<rootDir>/deploy/jest.config.js'],
  reporters: ['default', '<rootDir>/tools/jest/summary-reporter.js'],
  testTimeout: 30000,
  // A project's integration suites share its database and the dispatcher claims any pending event:
  // one suite at a time keeps them independent (and fits a 2-core machine).
  maxWorkers: 1,
};
