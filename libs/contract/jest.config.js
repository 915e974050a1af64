module.exports = { ...require('../../jest.preset.js'), displayName: 'contract', rootDir: __dirname };
