// The deployment checks: the Kubernetes manifests and docker-compose.yml against the apps.
const path = require('node:path');
const preset = require('../jest.preset.js');

const modules = path.join(__dirname, '../node_modules');

module.exports = {
  ...preset,
  displayName: 'deploy',
  rootDir: __dirname,
  testMatch: ['<rootDir>/*.spec.ts'],
  // The preset's ES-only packages, and kubernetes-models with its helpers, ES modules published for
  // `import` only: swc turns them into CommonJS, and these paths stand in for their `exports` maps,
  // which name no `require`.
  transformIgnorePatterns: ['/node_modules/(?!(cookie|content-disposition|kubernetes-models|@kubernetes-models|is-cidr|cidr-regex)/)'],
  moduleNameMapper: {
    ...preset.moduleNameMapper,
    '^(kubernetes-models|@kubernetes-models/keda|@kubernetes-models/apimachinery)/(.+)$': `${modules}/$1/$2.js`,
    '^@kubernetes-models/(base|validate)$': `${modules}/@kubernetes-models/$1/dist/index.js`,
    '^@kubernetes-models/validate/runtime/(.+)$': `${modules}/@kubernetes-models/validate/dist/runtime/$1.js`,
  },
  // The migration check makes a database of its own; nothing here needs a copy of the test schema.
  globalSetup: undefined,
};
