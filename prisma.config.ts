// Configuration of the Prisma CLI (generate, migrate). The running apps never load this file.
import { defineConfig } from 'prisma/config';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';

const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/operator_api';
process.env.DATABASE_URL ??= DEFAULT_DATABASE_URL;

// The WebAssembly schema engine cannot decode a few PostgreSQL catalog column types
// ("char", name, regproc, pg_node_tree, regclass); it reads them fine as text.
const CATALOG_TYPES_READ_AS_TEXT = new Set([18, 19, 24, 194, 2205]);
const TEXT_OID = 25;
const resultProto = (pg as unknown as { Result: { prototype: { addFields(fields: { dataTypeID: number }[]): void } } })
  .Result.prototype;
const addFields = resultProto.addFields;
resultProto.addFields = function (fields) {
  for (const field of fields) {
    if (CATALOG_TYPES_READ_AS_TEXT.has(field.dataTypeID)) field.dataTypeID = TEXT_OID;
  }
  return addFields.call(this, fields);
};

// The stock factory opens the shadow database on the main one and drops it while its pool is
// still connected; this one uses its own database and drops it only after closing the pool.
class MigrateAdapterFactory extends PrismaPg {
  constructor(private readonly url: string) {
    super({ connectionString: url });
  }

  override async connectToShadowDb() {
    const main = new URL(this.url);
    const name = `prisma_shadow_${process.pid}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: this.url });
    await admin.connect();
    await admin.query(`CREATE DATABASE "${name}"`);
    await admin.end();
    const pool = new pg.Pool({
      host: main.hostname,
      port: Number(main.port || 5432),
      user: decodeURIComponent(main.username) || undefined,
      password: decodeURIComponent(main.password) || undefined,
      database: name,
    });
    const adapter = await new PrismaPg(pool).connect();
    const dispose = adapter.dispose.bind(adapter);
    adapter.dispose = async () => {
      await dispose();
      await pool.end().catch(() => undefined);
      const cleaner = new pg.Client({ connectionString: this.url });
      await cleaner.connect();
      await cleaner.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await cleaner.end();
    };
    return adapter;
  }
}

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  experimental: { adapter: true },
  engine: 'js',
  adapter: async () => new MigrateAdapterFactory(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL),
});
