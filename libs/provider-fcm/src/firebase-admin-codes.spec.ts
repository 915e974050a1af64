import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SDK_VERSION } from 'firebase-admin/app';
import { MessagingClientErrorCode } from 'firebase-admin/messaging';
import { FCM_ERROR_CODES, STATUS_ERROR_CODES } from './errors';

// The FCM provider speaks HTTP/2 itself but names its errors as firebase-admin does, so that
// fcmSendError() and whatever reads the codes keep firebase-admin's vocabulary. These checks fail
// when the pinned firebase-admin changes, or when a code the provider makes is not one of its names.

const PINNED = '13.9.0';
const PROVIDER = 'libs/provider-fcm/src';

const sources = readdirSync(__dirname).filter((file) => file.endsWith('.ts') && !file.endsWith('.spec.ts'));
const source = sources.map((file) => readFileSync(join(__dirname, file), 'utf8')).join('\n');
/** Codes written out in the provider's sources other than as `case` labels: the ones it makes, not the ones it reads. */
const literalCodes = [...source.matchAll(/(case\s+)?'(messaging\/[^']+)'/g)].filter(([, caseLabel]) => !caseLabel).map(([, , code]) => code);
const producedCodes = [...new Set([...Object.values(FCM_ERROR_CODES), ...Object.values(STATUS_ERROR_CODES), ...literalCodes])].sort();
const firebaseAdminCodes = new Set(Object.values(MessagingClientErrorCode).map(({ code }) => `messaging/${code}`));

describe(`the firebase-admin error codes ${PROVIDER} uses`, () => {
  it(`come from firebase-admin ${PINNED}, installed and pinned exactly in package.json`, () => {
    const pinned = JSON.parse(readFileSync(join(__dirname, '../../../package.json'), 'utf8')).dependencies['firebase-admin'];
    if (SDK_VERSION !== PINNED || pinned !== PINNED) {
      throw new Error(
        `${PROVIDER} names its errors after firebase-admin ${PINNED}'s MessagingClientErrorCode, but firebase-admin ${SDK_VERSION} is installed and package.json asks for "${pinned}". Check the codes against the new version, then update PINNED in this spec.`,
      );
    }
  });

  it('are all firebase-admin messaging codes', () => {
    expect(producedCodes).toContain('messaging/registration-token-not-registered');
    const unknown = producedCodes.filter((code) => !firebaseAdminCodes.has(code));
    if (unknown.length > 0) {
      throw new Error(`${PROVIDER} makes ${unknown.join(', ')}, which firebase-admin ${SDK_VERSION} does not name (MessagingClientErrorCode has ${[...firebaseAdminCodes].join(', ')}).`);
    }
  });

  it('are each classified by name in fcmSendError', () => {
    expect(producedCodes.filter((code) => !source.includes(`case '${code}':`))).toEqual([]);
  });
});
