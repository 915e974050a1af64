module.exports = { ...require('../../jest.preset.js'), displayName: 'provider-registry', rootDir: __dirname };
