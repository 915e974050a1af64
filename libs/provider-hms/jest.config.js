module.exports = { ...require('../../jest.preset.js'), displayName: 'provider-hms', rootDir: __dirname };
