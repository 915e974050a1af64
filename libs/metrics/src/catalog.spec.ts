import { metricsText, registry } from './catalog';
import { acceptedMessages, brandLabeler, countDispatch, countSends, NO_ERROR_CODE, observeHttpRequest, observeSendDuration } from './record';

// The family names and types are what dashboards and alerts are written against.
const PUBLIC_FAMILIES: Record<string, string> = {
  operator_http_request_duration_seconds: 'histogram',
  operator_messages_accepted_total: 'counter',
  operator_sends_total: 'counter',
  operator_send_duration_seconds: 'histogram',
  operator_push_suppressions_total: 'counter',
  operator_queue_jobs: 'gauge',
  operator_outbox_pending_events: 'gauge',
  operator_outbox_oldest_pending_seconds: 'gauge',
  operator_dispatch_total: 'counter',
  operator_dead_letters: 'gauge',
  operator_credits: 'gauge',
  process_cpu_seconds_total: 'counter',
  process_resident_memory_bytes: 'gauge',
  nodejs_eventloop_lag_seconds: 'gauge',
};

/** TYPE of each family in the exposition text. */
function types(text: string): Record<string, string> {
  return Object.fromEntries([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((match) => [match[1], match[2]]));
}

/** The value of one sample, by its exact name and labels as exposed. */
async function sample(line: string): Promise<number> {
  const text = await metricsText();
  const found = text.split('\n').find((candidate) => candidate.startsWith(`${line} `));
  return found === undefined ? 0 : Number(found.slice(line.length + 1));
}

describe('metric catalog', () => {
  it.each(Object.entries(PUBLIC_FAMILIES))('exposes %s as a %s, with its help', async (name, type) => {
    const text = await metricsText();
    expect(types(text)[name]).toBe(type);
    expect(text).toMatch(new RegExp(`^# HELP ${name} \\S`, 'm'));
  });

  it('names every family of its own operator_', () => {
    const own = registry.getMetricsAsArray().filter((metric) => !/^(process|nodejs)_/.test(metric.name));
    expect(own.map((metric) => metric.name).filter((name) => !name.startsWith('operator_'))).toEqual([]);
  });

  it('has no sample of a gauge before it is read: an app reports only the stores it reads', async () => {
    expect(await metricsText()).not.toMatch(/^operator_dead_letters /m);
    expect(await metricsText()).not.toMatch(/^operator_credits\{/m);
  });

  it('labels a brand the configuration names by its id, any other as other, and none it could not read', () => {
    const label = brandLabeler(['1', '7']);
    expect([label(1), label('7'), label(BigInt(7)), label(2), label('0'), label(undefined)]).toEqual(['1', '7', '7', 'other', 'other', 'none']);
  });

  it('counts accepted messages by mode, result and brand, adding up calls with the same labels', async () => {
    acceptedMessages('single', 'accepted', 1, '7');
    expect(await sample('operator_messages_accepted_total{mode="single",result="accepted",brand="7"}')).toBe(1);
    const line = 'operator_messages_accepted_total{mode="batch",result="duplicate",brand="none"}';
    const before = await sample(line);
    acceptedMessages('batch', 'duplicate', 3);
    acceptedMessages('batch', 'duplicate', 2);
    acceptedMessages('batch', 'duplicate', 0);
    expect((await sample(line)) - before).toBe(5);
    expect(await sample('operator_messages_accepted_total{mode="single",result="duplicate",brand="none"}')).toBe(0);
  });

  it('records sends, their durations, dispatches and requests under their labels', async () => {
    countSends('fcm', 'sent', NO_ERROR_CODE);
    countSends('fcm', 'dead-token', 'unregistered', 2);
    observeSendDuration('fcm', 'dead-token', 0.2);
    countDispatch('bonus', 'retry');
    observeHttpRequest('GET', '/v1/devices/:user_id', 404, 0.003);

    expect(await sample('operator_sends_total{provider="fcm",outcome="sent",error_code="none"}')).toBe(1);
    expect(await sample('operator_sends_total{provider="fcm",outcome="dead-token",error_code="unregistered"}')).toBe(2);
    expect(await sample('operator_send_duration_seconds_bucket{le="0.25",provider="fcm",outcome="dead-token"}')).toBe(1);
    expect(await sample('operator_send_duration_seconds_bucket{le="0.1",provider="fcm",outcome="dead-token"}')).toBe(0);
    expect(await sample('operator_dispatch_total{topic="bonus",result="retry"}')).toBe(1);
    expect(await sample('operator_http_request_duration_seconds_count{method="GET",route="/v1/devices/:user_id",status="404"}')).toBe(1);
  });
});
