import { CRM_HEADER_FIELDS, crmHeaderNames, readCrmHeaders } from './headers';

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
    expect(readCrmHeaders(headers, names)).toEqual({
      id: 'id-1',
      activity_id: '55',
      action_id: '77',
      action_group_id: '66',
      action_communication_profile_id: '9',
      trigger_hash: 'hash',
    });
  });

  it('takes the first value of a repeated header', () => {
    expect(readCrmHeaders({ 'x-service-id': ['first', 'second'] }, names)).toEqual({ id: 'first' });
  });

  it('leaves out absent, undefined and empty headers', () => {
    const result = readCrmHeaders({ 'x-service-id': '', 'x-service-actionid': undefined, 'x-service-activityid': [], 'x-service-triggerhash': 'h' }, names);
    expect(result).toEqual({ trigger_hash: 'h' });
    expect('id' in result).toBe(false);
  });

  it('reads only the headers of the configured word', () => {
    expect(readCrmHeaders({ 'x-service-id': 'svc', 'x-acme-id': 'acme' }, crmHeaderNames('Acme'))).toEqual({ id: 'acme' });
  });

  it('gives an empty object when no CRM header is sent', () => {
    expect(readCrmHeaders({ host: 'localhost' }, names)).toEqual({});
  });

  it('cuts values to 512 characters', () => {
    expect(readCrmHeaders({ 'x-service-triggerhash': 'h'.repeat(600) }, names).trigger_hash).toBe('h'.repeat(512));
  });
});
