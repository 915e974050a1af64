module.exports = { ...require('../../jest.preset.js'), displayName: 'provider-onesignal', rootDir: __dirname };
