module.exports = { ...require('../../jest.preset.js'), displayName: 'provider-fcm', rootDir: __dirname };
