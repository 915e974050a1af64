import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, closeSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePorts } from './ports';
import { until } from './until';

// Real Redis topologies for the tests that fail over: a master, a replica and three Sentinels, or a
// Redis Cluster, each server a redis-server of its own on a free port under `dir`. They speak to
// the servers through redis-cli, as libs/queue is the only importer of a Redis client.

export interface RedisServerAddress {
  host: string;
  port: number;
}

const HOST = '127.0.0.1';
/** As production runs them (append-only, noeviction), and quick to start: no RDB, no sync delay. */
const SERVER_ARGS = ['--bind', HOST, '--protected-mode', 'no', '--save', '', '--appendonly', 'yes', '--maxmemory-policy', 'noeviction', '--repl-diskless-sync-delay', '0'];

/** One redis-cli command; its reply as text (redis-cli's raw output, one line per element). */
export function redisCli(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-h', HOST, '-p', String(port), ...args], { timeout: 5000 }, (error, stdout) => {
      if (error) reject(error);
      else resolve(stdout.trim());
    });
  });
}

/** The values of `field` in redis-cli's output of a list of maps (field and value on lines of their own). */
function fieldValues(output: string, field: string): string[] {
  const lines = output.split('\n');
  return lines.flatMap((line, i) => (i % 2 === 0 && line === field ? [lines[i + 1]] : []));
}

async function answers(port: number): Promise<boolean> {
  return (await redisCli(port, 'PING').catch(() => '')) === 'PONG';
}

/** redis-server processes started here, each killed (SIGKILL) by stopAll() whatever happened before. */
class Processes {
  /** By port, for kill(); every child started, for stopAll(). */
  private readonly children = new Map<number, ChildProcess>();
  private readonly started = new Set<ChildProcess>();

  start(port: number, dir: string, args: string[]): ChildProcess {
    mkdirSync(dir, { recursive: true });
    const log = openSync(join(dir, 'redis.log'), 'a');
    const child = spawn('redis-server', args, { cwd: dir, stdio: ['ignore', log, log] });
    closeSync(log);
    child.on('error', () => undefined);
    this.children.set(port, child);
    this.started.add(child);
    return child;
  }

  async kill(port: number): Promise<void> {
    const child = this.children.get(port);
    this.children.delete(port);
    if (child) await this.end(child);
  }

  /** Every child ever started, even one whose port another took since: a live one keeps jest from exiting. */
  async stopAll(): Promise<void> {
    this.children.clear();
    await Promise.all([...this.started].map((child) => this.end(child)));
  }

  private async end(child: ChildProcess): Promise<void> {
    this.started.delete(child);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}

async function startServer(processes: Processes, port: number, dir: string, extra: string[] = []): Promise<void> {
  processes.start(port, dir, ['--port', String(port), '--dir', dir, ...SERVER_ARGS, ...extra]);
  await until(() => answers(port), `redis-server on ${port} (see ${join(dir, 'redis.log')})`, 15000);
}

export interface SentinelTopology {
  /** The master group name (REDIS_SENTINEL_NAME). */
  readonly masterName: string;
  readonly sentinels: RedisServerAddress[];
  /** REDIS_SENTINELS: the Sentinels as host:port, comma-separated. */
  readonly sentinelList: string;
  /** The servers' ports, the first master at the start; then the Sentinels'. */
  readonly ports: { servers: number[]; sentinels: number[] };
  /** What the Sentinels name as master now. */
  currentMaster(): Promise<RedisServerAddress>;
  /**
   * Resolves with the master once every Sentinel names it, no failover is under way and every live
   * replica reports to it: after it, no Sentinel reconfigures a server (and kills its clients).
   */
  settledMaster(): Promise<RedisServerAddress>;
  /** SENTINEL FAILOVER; resolves with the new master once every Sentinel names it and it answers as master. */
  failover(): Promise<RedisServerAddress>;
  /** kill -9 of the current master; resolves with the new master once the Sentinels have failed over. */
  killMaster(): Promise<RedisServerAddress>;
  /**
   * Swaps master and replica by hand (REPLICAOF) without a failover: no client is disconnected, so
   * one left on the old master meets READONLY. Resolves with the new master.
   */
  swapRolesWithoutFailover(): Promise<RedisServerAddress>;
  /** Kills every process (SIGKILL). */
  stop(): Promise<void>;
}

export interface SentinelTopologyOptions {
  /** Where each server keeps its files and log (a temporary directory of the test). */
  dir: string;
  /** Replicas besides the master (1 by default). */
  replicas?: number;
  /** Sentinels (3 by default, quorum 2). */
  sentinels?: number;
  masterName?: string;
  /** How long a server may not answer before a Sentinel takes it for down (1000 ms). */
  downAfterMs?: number;
}

const address = (port: number): RedisServerAddress => ({ host: HOST, port });
const FAILOVER_TIMEOUT_MS = 6000;

/** A master, its replicas and Sentinels monitoring them, on free ports under `dir`, ready to fail over. */
export async function startSentinelTopology(options: SentinelTopologyOptions): Promise<SentinelTopology> {
  const { dir, replicas = 1, sentinels: sentinelCount = 3, masterName = 'operator-test', downAfterMs = 1000 } = options;
  const quorum = Math.floor(sentinelCount / 2) + 1;
  const processes = new Processes();
  const servers: number[] = [];
  const sentinelPorts: number[] = [];
  try {
    const ports = await freePorts(replicas + 1 + sentinelCount);
    servers.push(...ports.slice(0, replicas + 1));
    sentinelPorts.push(...ports.slice(replicas + 1));
    await startServer(processes, servers[0], join(dir, `server-${servers[0]}`));
    await Promise.all(servers.slice(1).map((port) => startServer(processes, port, join(dir, `server-${port}`), ['--replicaof', HOST, String(servers[0])])));
    await until(async () => (await redisCli(servers[0], 'INFO', 'replication')).includes(`connected_slaves:${replicas}`), 'the replicas to attach', 15000);

    await Promise.all(
      sentinelPorts.map(async (port) => {
        const home = join(dir, `sentinel-${port}`);
        mkdirSync(home, { recursive: true });
        const config = join(home, 'sentinel.conf');
        writeFileSync(
          config,
          [
            `port ${port}`,
            `bind ${HOST}`,
            'protected-mode no',
            `dir ${home}`,
            `sentinel monitor ${masterName} ${HOST} ${servers[0]} ${quorum}`,
            `sentinel down-after-milliseconds ${masterName} ${downAfterMs}`,
            `sentinel failover-timeout ${masterName} ${FAILOVER_TIMEOUT_MS}`,
            `sentinel parallel-syncs ${masterName} 1`,
            '',
          ].join('\n'),
        );
        processes.start(port, home, [config, '--sentinel']);
        await until(() => answers(port), `sentinel on ${port}`, 15000);
      }),
    );
    // Ready to fail over once every Sentinel knows the replicas and the other Sentinels (found
    // through the master's INFO, every 10 s at first, and its hello channel, every 2 s).
    await until(
      async () => {
        const views = await Promise.all(
          sentinelPorts.map(async (port) => ({
            replicas: fieldValues(await redisCli(port, 'SENTINEL', 'REPLICAS', masterName), 'flags').filter((flags) => flags === 'slave').length,
            sentinels: fieldValues(await redisCli(port, 'SENTINEL', 'SENTINELS', masterName), 'runid').length,
          })),
        );
        return views.every((view) => view.replicas === replicas && view.sentinels === sentinelCount - 1);
      },
      'the Sentinels to know the replicas and each other',
      30000,
    );
  } catch (error) {
    await processes.stopAll();
    throw error;
  }

  const masterOf = async (port: number): Promise<RedisServerAddress | undefined> => {
    const [host, masterPort] = (await redisCli(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName).catch(() => '')).split('\n');
    return masterPort ? { host, port: Number(masterPort) } : undefined;
  };
  const currentMaster = async () => (await masterOf(sentinelPorts[0]))!;
  const role = async (port: number) => (await redisCli(port, 'ROLE').catch(() => '')).split('\n')[0];

  /** Every live Sentinel names a master other than `old`, and that server answers as master. */
  const followed = (old: RedisServerAddress, live: number[] = sentinelPorts) =>
    until(
      async () => {
        const named = await Promise.all(live.map(masterOf));
        const port = named[0]?.port;
        if (!port || port === old.port || named.some((master) => master?.port !== port)) return undefined;
        return (await role(port)) === 'master' ? address(port) : undefined;
      },
      'the Sentinels to name a new master',
      30000,
    );

  /**
   * Every Sentinel names the same master, no failover is under way, and every live replica reports
   * to it. Until then a Sentinel may still send its own REPLICAOF and undo a swap by hand. Resolves
   * with the master and a replica of it.
   */
  const settled = () =>
    until(
      async () => {
        const named = await Promise.all(sentinelPorts.map(masterOf));
        const port = named[0]?.port;
        if (!port || named.some((master) => master?.port !== port) || (await role(port)) !== 'master') return undefined;
        const views = await Promise.all(
          sentinelPorts.map(async (sentinel) => ({
            flags: fieldValues(await redisCli(sentinel, 'SENTINEL', 'MASTER', masterName), 'flags')[0],
            replicas: await redisCli(sentinel, 'SENTINEL', 'REPLICAS', masterName),
          })),
        );
        if (views.some((view) => view.flags !== 'master')) return undefined;
        const healthy = views.map(({ replicas }) => {
          const [flags, roles, masterPorts, ports] = ['flags', 'role-reported', 'master-port', 'port'].map((field) => fieldValues(replicas, field));
          const up = ports.flatMap((replica, i) => (flags[i].includes('s_down') ? [] : [{ port: Number(replica), role: roles[i], master: Number(masterPorts[i]) }]));
          return up.every((replica) => replica.role === 'slave' && replica.master === port) ? up.map((replica) => replica.port) : [];
        });
        const replica = healthy[0].find((candidate) => healthy.every((ports) => ports.includes(candidate)));
        return replica ? { master: address(port), replica } : undefined;
      },
      'the Sentinels to agree on the master and its replicas',
      30000,
    );

  return {
    masterName,
    sentinels: sentinelPorts.map(address),
    sentinelList: sentinelPorts.map((port) => `${HOST}:${port}`).join(','),
    ports: { servers, sentinels: sentinelPorts },
    currentMaster,
    settledMaster: async () => (await settled()).master,
    async failover() {
      const old = await currentMaster();
      await redisCli(sentinelPorts[0], 'SENTINEL', 'FAILOVER', masterName);
      return followed(old);
    },
    async killMaster() {
      const old = await currentMaster();
      await processes.kill(old.port);
      return followed(old);
    },
    async swapRolesWithoutFailover() {
      const { master: old, replica: next } = await settled();
      await redisCli(next, 'REPLICAOF', 'NO', 'ONE');
      await redisCli(old.port, 'REPLICAOF', HOST, String(next));
      // Every Sentinel forgets the master before any monitors the new one: one still monitoring the
      // old would announce it (hello messages, with a newer epoch) and the others would take it back.
      for (const port of sentinelPorts) await redisCli(port, 'SENTINEL', 'REMOVE', masterName);
      for (const port of sentinelPorts) {
        await redisCli(port, 'SENTINEL', 'MONITOR', masterName, HOST, String(next), String(quorum));
        await redisCli(port, 'SENTINEL', 'SET', masterName, 'down-after-milliseconds', String(downAfterMs), 'failover-timeout', String(FAILOVER_TIMEOUT_MS));
      }
      return followed(old);
    },
    stop: () => processes.stopAll(),
  };
}

export interface RedisClusterTopology {
  /** Every node: the masters at the start, then their replicas. */
  readonly nodes: RedisServerAddress[];
  /** REDIS_CLUSTER_NODES: every node as host:port, comma-separated. */
  readonly nodeList: string;
  /** The slot a key hashes to (CLUSTER KEYSLOT). */
  keySlot(key: string): Promise<number>;
  /**
   * kill -9 of the master serving the slot of `key` (of the first master without one); resolves once
   * every live node sees the cluster `ok` with that slot served by the replica promoted in its place.
   * Rejects, killing nothing, when that master has no replica (`replicas: 0`).
   */
  killMaster(key?: string): Promise<{ killed: RedisServerAddress; promoted: RedisServerAddress }>;
  /** Kills every node (SIGKILL). */
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** Where each node keeps its files and log (a temporary directory of the test). */
  dir: string;
  /** Masters, each serving a share of the slots (3 by default). */
  masters?: number;
  /** Replicas of each master (0 by default); one takes its master's slots over when the master fails. */
  replicas?: number;
}

/**
 * How long a node may not answer before the others take it for failed and its replica takes over:
 * short for tests (production keeps 15 s). A failover then takes about twice this.
 */
const CLUSTER_NODE_TIMEOUT_MS = 2000;

/** A line of CLUSTER NODES: a node, its flags and the slots it serves. */
interface ClusterNodeLine {
  id: string;
  port: number;
  flags: string[];
  /** The id of its master, for a replica. */
  masterId: string;
  slots: Array<[number, number]>;
}

function clusterNodes(output: string): ClusterNodeLine[] {
  return output
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, endpoint, flags, masterId, , , , , ...slots] = line.split(' ');
      return {
        id,
        masterId,
        port: Number(endpoint.split('@')[0].split(':').pop()),
        flags: flags.split(','),
        // Slots being moved ([slot->-id]) are left out: nothing moves slots here.
        slots: slots.filter((range) => !range.startsWith('[')).map((range) => {
          const [first, last = first] = range.split('-').map(Number);
          return [first, last] as [number, number];
        }),
      };
    });
}

/** The master serving `slot` as one node sees it, unless it is taken for failed. */
const servingMaster = (lines: ClusterNodeLine[], slot: number) =>
  lines.find((node) => node.flags.includes('master') && !node.flags.some((flag) => flag.startsWith('fail')) && node.slots.some(([first, last]) => slot >= first && slot <= last));

/** A Redis Cluster of `masters` nodes (3 by default), each with `replicas` (0), on free ports under `dir`, every slot served. */
export async function startCluster(options: RedisClusterOptions): Promise<RedisClusterTopology> {
  const { dir, masters = 3, replicas = 0 } = options;
  const processes = new Processes();
  const ports: number[] = [];
  try {
    // Each node's cluster bus listens on its port + 10,000.
    ports.push(...(await freePorts(masters * (1 + replicas), 10_000)));
    await Promise.all(
      ports.map((port) => {
        const home = join(dir, `node-${port}`);
        return startServer(processes, port, home, ['--cluster-enabled', 'yes', '--cluster-config-file', join(home, 'nodes.conf'), '--cluster-node-timeout', String(CLUSTER_NODE_TIMEOUT_MS)]);
      }),
    );
    // With every node on one host, redis-cli makes the first `masters` addresses masters and gives
    // the rest to them as replicas.
    await new Promise<void>((resolve, reject) => {
      execFile(
        'redis-cli',
        ['--cluster', 'create', ...ports.map((port) => `${HOST}:${port}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
        { timeout: 30000 },
        (error, _stdout, stderr) => (error ? reject(new Error(`redis-cli --cluster create failed: ${stderr || error.message}`)) : resolve()),
      );
    });
    // Ready once every node sees the cluster ok with every replica known (gossip, after redis-cli)
    // and synced: a replica that has not synced would not take over. A loaded machine can take
    // long over it; what was seen last goes with a timeout, to tell a slow cluster from a stuck one.
    let seen = 'no answer yet';
    await until(
      async () => {
        const infos = await Promise.all(ports.map((port) => redisCli(port, 'CLUSTER', 'INFO')));
        const states = infos.map((info, i) => `${ports[i]} ${/cluster_state:(\w+)/.exec(info)?.[1] ?? '?'}`);
        seen = `cluster_state: ${states.join(', ')}`;
        if (!infos.every((info) => info.includes('cluster_state:ok'))) return false;
        const views = await Promise.all(ports.map(async (port) => clusterNodes(await redisCli(port, 'CLUSTER', 'NODES'))));
        const complete = (view: ClusterNodeLine[]) =>
          view.filter((node) => node.flags.includes('master') && view.filter((replica) => replica.masterId === node.id).length === replicas).length === masters;
        seen = `nodes as ${ports[0]} sees them: ${views[0].map((node) => `${node.port} ${node.flags.join(',')}`).join('; ')}`;
        if (!views.every(complete)) return false;
        const replications = await Promise.all(ports.slice(masters).map((port) => redisCli(port, 'INFO', 'replication')));
        seen = `replica links: ${replications.map((info, i) => `${ports[masters + i]} ${/master_link_status:(\w+)/.exec(info)?.[1] ?? '?'}`).join(', ')}`;
        return replications.every((info) => info.includes('master_link_status:up'));
      },
      'every node to see the cluster ok with every master and replica, and every replica to sync',
      60000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; last seen: ${seen}`);
    });
  } catch (error) {
    await processes.stopAll();
    throw error;
  }
  const killed = new Set<number>();
  const live = () => ports.filter((port) => !killed.has(port));
  const keySlot = async (key: string) => Number(await redisCli(live()[0], 'CLUSTER', 'KEYSLOT', key));
  return {
    nodes: ports.map(address),
    nodeList: ports.map((port) => `${HOST}:${port}`).join(','),
    keySlot,
    async killMaster(key) {
      const view = clusterNodes(await redisCli(live()[0], 'CLUSTER', 'NODES'));
      const first = live().flatMap((port) => view.filter((node) => node.port === port && node.flags.includes('master') && node.slots.length > 0))[0];
      const slot = key === undefined ? first.slots[0][0] : await keySlot(key);
      const master = servingMaster(view, slot);
      if (!master) throw new Error(`no master serves slot ${slot}`);
      if (!view.some((node) => node.masterId === master.id && !node.flags.some((flag) => flag.startsWith('fail')))) {
        throw new Error(`the master of slot ${slot} (${HOST}:${master.port}) has no replica to take over`);
      }
      killed.add(master.port);
      await processes.kill(master.port);
      const promoted = await until(
        async () => {
          const views = await Promise.all(live().map(async (port) => ({ info: await redisCli(port, 'CLUSTER', 'INFO').catch(() => ''), nodes: await redisCli(port, 'CLUSTER', 'NODES').catch(() => '') })));
          if (!views.every((each) => each.info.includes('cluster_state:ok'))) return undefined;
          const serving = views.map((each) => servingMaster(clusterNodes(each.nodes), slot)?.port);
          const port = serving[0];
          if (!port || port === master.port || serving.some((other) => other !== port)) return undefined;
          return (await redisCli(port, 'ROLE').catch(() => '')).startsWith('master') ? port : undefined;
        },
        `a replica to take slot ${slot} over from ${HOST}:${master.port}`,
        30000,
      );
      return { killed: address(master.port), promoted: address(promoted) };
    },
    stop: () => processes.stopAll(),
  };
}
