import { batches, idempotencyKey, nameBasedUuid } from './idempotency';

const DNS_NAMESPACE = '6ba7b810-9dad-11d1-80b4-00c04fd430c8';

describe('nameBasedUuid', () => {
  it('is RFC 9562 version 3 (the standard example: www.example.com in the DNS namespace)', () => {
    expect(nameBasedUuid(DNS_NAMESPACE, 'www.example.com')).toBe('5df41881-3aed-3515-88a7-2f4a814cf09e');
  });
});

describe('idempotencyKey', () => {
  const deliveries = ['d-3', 'd-1', 'd-2'];

  it('is a v3 UUID, the same for the same push and deliveries in any order', () => {
    const key = idempotencyKey('push-1', deliveries);
    expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-3[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(idempotencyKey('push-1', ['d-2', 'd-3', 'd-1'])).toBe(key);
  });

  it('differs for another push or another set of deliveries', () => {
    const key = idempotencyKey('push-1', deliveries);
    expect(idempotencyKey('push-2', deliveries)).not.toBe(key);
    expect(idempotencyKey('push-1', ['d-1', 'd-2'])).not.toBe(key);
    // No two lists join into the same name.
    expect(idempotencyKey('push-1', ['d-1d-2'])).not.toBe(idempotencyKey('push-1', ['d-1', 'd-2']));
  });
});

describe('batches', () => {
  const items = ['e', 'a', 'd', 'c', 'b'].map((deliveryId) => ({ deliveryId }));

  it('cuts the list sorted by delivery id into runs of at most `size`', () => {
    expect(batches(items, 2).map((run) => run.map((item) => item.deliveryId))).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
    expect(batches(items, 10)).toHaveLength(1);
    expect(batches([], 2)).toEqual([]);
  });

  it('makes the same batches again from what is left when some batches went through', () => {
    const first = batches(items, 2);
    const left = [first[2], first[0]].flat().reverse();
    expect(batches(left, 2)).toEqual([first[0], first[2]]);
  });
});
