// `npx jest` runs every project; `npx jest --selectProjects gateway` runs one.
module.exports = {
  projects: ['<rootDir>/libs/*/jest.config.js', '<rootDir>/apps/*/jest.config.js'],
  reporters: ['default', '<rootDir>/tools/jest/summary-reporter.js'],
  testTimeout: 30000,
};
