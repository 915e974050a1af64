import { FakeCompliance } from './fake-compliance';

// The fake operator endpoint answers as the CRM's Operator API says the operator's does, from a
// table the test changes; what it refuses, delays and counts is what the specs rely on.

describe('FakeCompliance', () => {
  let fake: FakeCompliance;
  afterEach(async () => fake?.close());

  const get = async (path: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`${fake.url}${path}`, { headers });
    return { status: response.status, body: (await response.json()) as any };
  };

  it('serves each player its blocks and consents from the table, 404 for an unknown one', async () => {
    fake = await FakeCompliance.start();
    fake.allow('ok').block('gone', 'Excluded').block('banned', 'Blocked').optOut('out').noConsentEntry('silent').allow('a/b c');

    expect(await get('/userblocks/ok')).toEqual({ status: 200, body: { blocks: [] } });
    expect(await get('/userconsents/ok')).toEqual({ status: 200, body: { consents: expect.arrayContaining([{ opted_in: true, type: 'pushNotification' }]) } });
    expect((await get('/userblocks/gone')).body.blocks).toEqual([{ active: true, type: 'Excluded', note: 'set by the test' }]);
    expect((await get('/userblocks/banned')).body.blocks).toEqual([expect.objectContaining({ active: true, type: 'Blocked' })]);
    expect((await get('/userconsents/out')).body.consents).toContainEqual({ opted_in: false, type: 'pushNotification' });
    const silent = (await get('/userconsents/silent')).body.consents as { type: string }[];
    expect(silent.length).toBeGreaterThan(0);
    expect(silent.some((consent) => consent.type === 'pushNotification')).toBe(false);
    expect(await get(`/userblocks/${encodeURIComponent('a/b c')}`)).toEqual({ status: 200, body: { blocks: [] } });
    expect((await get('/userblocks/nobody')).status).toBe(404);
    expect((await get('/elsewhere')).status).toBe(404);

    // Counted per path, as asked.
    expect(fake.asked('ok')).toEqual({ blocks: 1, consents: 1 });
    expect(fake.asked('a/b c')).toEqual({ blocks: 1, consents: 0 });
    expect(fake.asked('nobody')).toEqual({ blocks: 1, consents: 0 });
    expect(fake.requests).toBe(9);

    // A change of the table is what the next request sees.
    fake.block('ok');
    expect((await get('/userblocks/ok')).body.blocks).toHaveLength(1);
    expect(fake.asked('ok').blocks).toBe(2);
  });

  it('answers a record for unknown players when told to', async () => {
    fake = await FakeCompliance.start({ unknown: { blocks: [], consents: [{ opted_in: true, type: 'pushNotification' }] } });
    expect(await get('/userconsents/anyone')).toEqual({ status: 200, body: { consents: [{ opted_in: true, type: 'pushNotification' }] } });
  });

  it('refuses for a while, then answers again; answers late when slowed', async () => {
    fake = await FakeCompliance.start();
    fake.allow('p').unavailable(300);
    expect(fake.isUnavailable).toBe(true);
    expect(await get('/userblocks/p')).toEqual({ status: 503, body: { error: 'unavailable' } });
    expect(fake.refused).toBe(1);
    expect(fake.asked('p').blocks).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect((await get('/userblocks/p')).status).toBe(200);

    fake.unavailable(undefined, 500);
    expect((await get('/userblocks/p')).status).toBe(500);
    fake.available();
    expect((await get('/userblocks/p')).status).toBe(200);

    fake.slow(150);
    const started = Date.now();
    expect((await get('/userconsents/p')).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('checks an API key header or HTTP Basic', async () => {
    fake = await FakeCompliance.start({ apiKey: 'k-1', apiKeyHeader: 'X-Operator-Key' });
    fake.allow('p');
    expect((await get('/userblocks/p')).status).toBe(401);
    expect((await get('/userblocks/p', { 'x-operator-key': 'wrong' })).status).toBe(401);
    expect((await get('/userblocks/p', { 'X-Operator-Key': 'k-1' })).status).toBe(200);
    expect(fake.unauthorized).toBe(2);
    await fake.close();

    fake = await FakeCompliance.start({ username: 'crm', password: 's3cret' });
    fake.allow('p');
    expect((await get('/userblocks/p')).status).toBe(401);
    expect((await get('/userblocks/p', { authorization: `Basic ${Buffer.from('crm:wrong').toString('base64')}` })).status).toBe(401);
    expect((await get('/userblocks/p', { authorization: `Basic ${Buffer.from('crm:s3cret').toString('base64')}` })).status).toBe(200);
  });
});
