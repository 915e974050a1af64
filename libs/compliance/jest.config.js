module.exports = { ...require('../../jest.preset.js'), displayName: 'compliance', rootDir: __dirname };
