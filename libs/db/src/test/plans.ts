// For the specs: the plans PostgreSQL ran a function's statements with (EXPLAIN ANALYZE), to count
// what a statement read or compared whatever the tables' statistics make the planner choose.
import type { PoolClient } from 'pg';
import type { Db, Sql } from '../client';

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Join Filter'?: number;
  'Function Name'?: string;
  Plans?: PlanNode[];
}

/** A plan's node and every node under it. */
export const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

/**
 * Runs `work` in a transaction that is rolled back, with `sql` for its setup and `explaining` for
 * the statements under study: each is run under EXPLAIN ANALYZE (so it does its work) and answers
 * no rows, as if nothing matched (the function under study then ends rather than trying again).
 * Answers their plans, in order.
 */
export async function plans(db: Db, work: (sql: Sql, explaining: Sql) => Promise<unknown>): Promise<PlanNode[]> {
  const client: PoolClient = await db.pool.connect();
  try {
    await client.query('BEGIN');
    const found: PlanNode[] = [];
    const explaining: Sql = {
      query: (async (text: string, params: unknown[]) => {
        const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params);
        found.push(rows[0]['QUERY PLAN'][0].Plan);
        return { rows: [], rowCount: 0 };
      }) as unknown as Sql['query'],
    } as Sql;
    await work(client as unknown as Sql, explaining);
    return found;
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}
