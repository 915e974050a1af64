module.exports = { ...require('../../jest.preset.js'), displayName: 'providers', rootDir: __dirname };
