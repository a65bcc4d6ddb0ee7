// Imports an official SDK installed by `npm ci` in tests/e2e. A missing SDK is a failure, never a
// skip: the error says how to install it.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const e2eDir = fileURLToPath(new URL('..', import.meta.url));

export async function loadSdk(name) {
  const marker = fileURLToPath(new URL(`../node_modules/${name}/package.json`, import.meta.url));
  if (!existsSync(marker)) {
    throw new Error(`the ${name} npm package is not installed (${marker} is missing). ` +
      `Run \`npm ci\` in ${e2eDir} (scripts/test.sh does this before ctest).`);
  }
  return import(name);
}
