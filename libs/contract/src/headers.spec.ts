import { CRM_HEADER_FIELDS, crmHeaderNames, displayHeaderName, readCrmHeaders } from './headers';
import { MAX_CRM_HEADER_BYTES } from './limits';

describe('crmHeaderNames', () => {
  it('gives the lower-case contract 5.2 names for the default word', () => {
    expect(crmHeaderNames('Service')).toEqual({
      id: 'x-service-id',
      activity_id: 'x-service-activityid',
      action_id: 'x-service-actionid',
      action_group_id: 'x-service-actiongroupid',
      action_communication_profile_id: 'x-service-actioncommunicationprofileid',
      trigger_hash: 'x-service-triggerhash',
    });
  });

  it('puts another maker word in the middle, lower-cased', () => {
    const names = crmHeaderNames('Acme');
    expect(names.id).toBe('x-acme-id');
    expect(names.trigger_hash).toBe('x-acme-triggerhash');
    expect(Object.keys(names).sort()).toEqual(Object.keys(CRM_HEADER_FIELDS).sort());
  });
});

describe('readCrmHeaders', () => {
  const names = crmHeaderNames('Service');

  it('reads every header present', () => {
    const headers = {
      'x-service-id': 'id-1',
      'x-service-activityid': '55',
      'x-service-actionid': '77',
      'x-service-actiongroupid': '66',
      'x-service-actioncommunicationprofileid': '9',
      'x-service-triggerhash': 'hash',
      'content-type': 'application/json',
    };
    expect(readCrmHeaders(headers, names)).toEqual({ ok: true, value: {
      id: 'id-1',
      activity_id: '55',
      action_id: '77',
      action_group_id: '66',
      action_communication_profile_id: '9',
      trigger_hash: 'hash',
    } });
  });

  it('takes the first value of a repeated header', () => {
    expect(readCrmHeaders({ 'x-service-id': ['first', 'second'] }, names)).toEqual({ ok: true, value: { id: 'first' } });
  });

  it('leaves out absent, undefined and empty headers', () => {
    const result = readCrmHeaders({ 'x-service-id': '', 'x-service-actionid': undefined, 'x-service-activityid': [], 'x-service-triggerhash': 'h' }, names);
    expect(result).toEqual({ ok: true, value: { trigger_hash: 'h' } });
    expect(result.ok && 'id' in result.value).toBe(false);
  });

  it('reads only the headers of the configured word', () => {
    expect(readCrmHeaders({ 'x-service-id': 'svc', 'x-acme-id': 'acme' }, crmHeaderNames('Acme'))).toEqual({ ok: true, value: { id: 'acme' } });
  });

  it('gives an empty object when no CRM header is sent', () => {
    expect(readCrmHeaders({ host: 'localhost' }, names)).toEqual({ ok: true, value: {} });
  });

  it('keeps a value of exactly the byte limit whole, counting UTF-8 bytes', () => {
    const value = `${'\u00e9'.repeat(MAX_CRM_HEADER_BYTES / 2 - 1)}ab`;
    expect(readCrmHeaders({ 'x-service-triggerhash': value }, names)).toEqual({ ok: true, value: { trigger_hash: value } });
  });

  it('refuses a value over the byte limit, naming the header, instead of cutting it', () => {
    for (const value of ['h'.repeat(MAX_CRM_HEADER_BYTES + 1), '\u00e9'.repeat(MAX_CRM_HEADER_BYTES / 2 + 1)]) {
      expect(readCrmHeaders({ 'x-service-triggerhash': value }, names)).toEqual({
        ok: false,
        error: `X-Service-Triggerhash header must be at most ${MAX_CRM_HEADER_BYTES} bytes (UTF-8)`,
      });
    }
    expect(readCrmHeaders({ 'x-acme-id': 'i'.repeat(600) }, crmHeaderNames('Acme'))).toEqual({ ok: false, error: expect.stringMatching(/^X-Acme-Id header/) });
  });

  it('refuses a value that is not storable text', () => {
    expect(readCrmHeaders({ 'x-service-id': 'a\udc00' }, names)).toEqual({ ok: false, error: 'X-Service-Id header must not contain unpaired UTF-16 surrogates' });
  });
});

describe('displayHeaderName', () => {
  it('capitalises each word', () => {
    expect(displayHeaderName('x-service-actioncommunicationprofileid')).toBe('X-Service-Actioncommunicationprofileid');
  });
});
