module.exports = { ...require('../../jest.preset.js'), displayName: 'push', rootDir: __dirname };
