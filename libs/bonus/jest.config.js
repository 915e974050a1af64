module.exports = { ...require('../../jest.preset.js'), displayName: 'bonus', rootDir: __dirname };
