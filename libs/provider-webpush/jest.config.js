module.exports = { ...require('../../jest.preset.js'), displayName: 'provider-webpush', rootDir: __dirname };
