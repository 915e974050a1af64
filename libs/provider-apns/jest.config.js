module.exports = { ...require('../../jest.preset.js'), displayName: 'provider-apns', rootDir: __dirname };
