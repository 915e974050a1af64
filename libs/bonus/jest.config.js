module.exports = { ...require('../../jest.preset.js'), displayName: 'bonus-domain', rootDir: __dirname };
