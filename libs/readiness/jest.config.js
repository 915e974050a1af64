module.exports = { ...require('../../jest.preset.js'), displayName: 'readiness', rootDir: __dirname };
