import pg from 'pg';
import { startPgBouncer } from './pgbouncer';
import { startPostgresPair, type PostgresPair } from './postgres-pair';
import { until } from './until';

// Needs the PostgreSQL 15 binaries and pgbouncer. The helpers an HA suite rehearses a failover
// with: a primary streaming to a standby, and a PgBouncer that can be pointed at the new primary.

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

describe('startPostgresPair (synchronous)', () => {
  let pair: PostgresPair;

  beforeAll(async () => {
    pair = await startPostgresPair({ synchronous: true });
  }, 90000);
  afterAll(() => pair?.stop());

  it('streams a row committed on the primary to the standby, which refuses writes until promoted', async () => {
    const replication = await withClient(pair.primaryUrl, async (client) => {
      await client.query('CREATE TABLE ha_probe (id int PRIMARY KEY)');
      await client.query('INSERT INTO ha_probe VALUES (1)');
      return (await client.query('SELECT sync_state FROM pg_stat_replication')).rows;
    });
    expect(replication).toEqual([{ sync_state: 'sync' }]);
    // Synchronous commit waits for the standby's flush, not its replay: the row shows there a moment later.
    await until(() => withClient(pair.standbyUrl, async (client) => (await client.query('SELECT id FROM ha_probe')).rowCount === 1).catch(() => false), 'the row on the standby');
    await expect(withClient(pair.standbyUrl, (client) => client.query('INSERT INTO ha_probe VALUES (2)'))).rejects.toMatchObject({ code: '25006' });

    await pair.stopPrimary('immediate');
    await pair.promote();
    await withClient(pair.standbyUrl, (client) => client.query('INSERT INTO ha_probe VALUES (2)'));
    expect((await withClient(pair.standbyUrl, (client) => client.query('SELECT id FROM ha_probe ORDER BY id'))).rows).toEqual([{ id: 1 }, { id: 2 }]);
  }, 60000);
});

describe('startPgBouncer', () => {
  it('pools in transaction mode, refuses startup parameters as PgBouncer does by default, and follows reload to another server', async () => {
    const pair = await startPostgresPair();
    const bouncer = await startPgBouncer(pair.primaryUrl);
    try {
      const port = () => withClient(bouncer.url, async (client) => (await client.query('SELECT current_setting($1) AS port', ['port'])).rows[0].port);
      expect(await port()).toBe(String(pair.primaryPort));
      const refused = new pg.Client({ connectionString: bouncer.url, statement_timeout: 1000 } as pg.ClientConfig);
      refused.on('error', () => undefined);
      await expect(refused.connect().then(() => refused.query('SELECT 1'))).rejects.toMatchObject({ code: '08P01', message: 'unsupported startup parameter: statement_timeout' });

      await bouncer.reload(`127.0.0.1:${pair.standbyPort}`);
      expect(await port()).toBe(String(pair.standbyPort));
    } finally {
      await bouncer.stop();
      await pair.stop();
    }
  }, 90000);
});
