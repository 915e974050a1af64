import { appendFileSync, chownSync } from 'node:fs';
import { join } from 'node:path';
import { freePorts } from './ports';
import { POSTGRES_BIN, psql, removeDir, runAsServer, serverDir, serverUser } from './postgres-processes';
import { until } from './until';

export interface PostgresPair {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` of each server. */
  readonly primaryUrl: string;
  readonly standbyUrl: string;
  readonly primaryPort: number;
  readonly standbyPort: number;
  /** Makes the standby a primary; returns once it takes writes. */
  promote(): Promise<void>;
  /** Stops the primary: `fast` (clients told, WAL flushed) or `immediate` (as a crash). */
  stopPrimary(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Stops both servers and deletes their files. */
  stop(): Promise<void>;
}

export interface PostgresPairOptions {
  /** The primary commits only once the standby has the commit (synchronous_standby_names). */
  synchronous?: boolean;
}

const STANDBY_NAME = 'standby';
const bin = (name: string) => join(POSTGRES_BIN, name);
const urlOf = (port: number) => `postgresql://postgres@127.0.0.1:${port}/postgres`;

/**
 * A PostgreSQL primary and a streaming standby on free ports, to rehearse a failover without
 * touching the shared server. fsync is off: these are test servers.
 */
export async function startPostgresPair({ synchronous = false }: PostgresPairOptions = {}): Promise<PostgresPair> {
  const dir = serverDir('pg-pair-');
  const primaryDir = join(dir, 'primary');
  const standbyDir = join(dir, 'standby');
  const [primaryPort, standbyPort] = await freePorts(2);
  const started: string[] = [];

  const configure = (dataDir: string, lines: string[]) => {
    const file = join(dataDir, 'postgresql.conf');
    appendFileSync(file, `\n${lines.join('\n')}\n`);
    const owner = serverUser();
    if (owner) chownSync(file, owner.uid, owner.gid);
  };
  const start = async (dataDir: string) => {
    await runAsServer(bin('pg_ctl'), ['-D', dataDir, '-l', join(dir, `${dataDir === primaryDir ? 'primary' : 'standby'}.log`), '-w', '-t', '60', 'start']);
    started.push(dataDir);
  };
  const stopServer = async (dataDir: string, mode: 'fast' | 'immediate') => {
    await runAsServer(bin('pg_ctl'), ['-D', dataDir, '-m', mode, '-w', 'stop']);
    started.splice(started.indexOf(dataDir), 1);
  };
  const stopAll = async () => {
    for (const dataDir of [...started]) await stopServer(dataDir, 'immediate').catch(() => undefined);
    removeDir(dir);
  };

  try {
    await runAsServer(bin('initdb'), ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-sync']);
    const common = ["listen_addresses = '127.0.0.1'", `unix_socket_directories = '${dir}'`, 'fsync = off', 'full_page_writes = off', 'max_connections = 50'];
    configure(primaryDir, [...common, `port = ${primaryPort}`, ...(synchronous ? [`synchronous_standby_names = '${STANDBY_NAME}'`] : [])]);
    await start(primaryDir);
    await runAsServer(bin('pg_basebackup'), ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', standbyDir, '-R', '-X', 'stream', '-c', 'fast']);
    // The standby's name on the primary (what synchronous_standby_names names) is its cluster_name.
    // The base backup copied the primary's settings: promoted, it must not wait for a standby of its own.
    configure(standbyDir, [`port = ${standbyPort}`, `cluster_name = '${STANDBY_NAME}'`, "synchronous_standby_names = ''"]);
    await start(standbyDir);
    await until(
      async () => (await psql(urlOf(primaryPort), `SELECT state FROM pg_stat_replication WHERE application_name = '${STANDBY_NAME}'`))[0] === 'streaming',
      'the standby to stream from the primary',
      30000,
    );
  } catch (error) {
    await stopAll();
    throw error;
  }

  return {
    primaryUrl: urlOf(primaryPort),
    standbyUrl: urlOf(standbyPort),
    primaryPort,
    standbyPort,
    async promote() {
      await runAsServer(bin('pg_ctl'), ['-D', standbyDir, '-w', 'promote']);
      await until(async () => (await psql(urlOf(standbyPort), 'SELECT pg_is_in_recovery()'))[0] === 'f', 'the standby to leave recovery');
    },
    stopPrimary(mode = 'fast') {
      return stopServer(primaryDir, mode);
    },
    stop: stopAll,
  };
}
