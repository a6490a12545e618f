/*
 * npm run bench:ticks -- --rebalance [options]   (--help lists them)
 *
 * Ordered partitions (`ordering: 'key'`) while consumers come and go: forked consumers in one
 * group over a partitioned stream, fed by this process. For each move the table gives the time
 * until every moved partition had its new owner (the `redis_streams.partition.assigned` events; a
 * joining consumer from the moment it announced itself), and the delay of the messages sent to
 * the moved partitions while they moved, against the steady delay of the run's first 20 %. It
 * also checks that every message was handled and each key's first handlings came in order.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { firstValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  partitionOf,
  partitionStreams,
} from '@nest-redis-resilience/stream-batch-ack';
import { cliOptions, num, str } from '../shared/args';
import { Child, forkTs } from '../shared/child';
import { columns } from '../shared/columns';
import { groupInfo } from '../shared/redis-stats';
import { quantile, renderTable } from '../shared/table';
import { openRun } from './open-run';
import type { HandledRow, KeyedTick, RebalanceChildMessage } from './rebalance-consumer';

const HELP = `Ordered partitions (ordering: 'key') while consumers come and go: one consumer is killed at 20 %
of the run, a new one joins at 40 %, another leaves at 75 %; the table gives the time until every
moved partition had its new owner and the delay of the messages sent to them meanwhile.`;

const SPEC = {
  consumers: num(3, 'forked consumers in the group (one is killed, one leaves)', { min: 3 }),
  partitions: num(6, 'partitions of the stream'),
  rate: num(2000, 'messages per second'),
  keys: num(100, 'ordering keys'),
  seconds: num(20, 'length of the run'),
  lease: num(2000, 'leaseMs of the partitions'),
  'redis-url': str(undefined, 'use this Redis (default: a throwaway redis-server)', '<url>'),
  json: str(undefined, 'also write every number as JSON', '<file>'),
};

interface Member {
  child: Child<RebalanceChildMessage, { type: 'stop' }>;
  owned: Set<number>;
  events: { event: string; partition: number; at: number }[];
  joinedAt: number;
}

/** `doneAt`: when the last moved partition was assigned to its new owner. */
type Move = { what: string; at: number; partitions: number[]; doneAt?: number };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean | Promise<boolean>, ms: number) {
  for (const deadline = Date.now() + ms; !(await check()); await sleep(20))
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
}

export async function runRebalanceBench(argv: string[]): Promise<unknown> {
  const o = cliOptions(
    'npm run bench:ticks -- --rebalance',
    HELP,
    SPEC,
    argv.filter((a) => a !== '--rebalance'),
  );
  const { consumers: n, partitions, rate, keys, seconds, lease: leaseMs } = o;
  const run = await openRun(o['redis-url'], ['@nestjs/core', '@nestjs/microservices', 'ioredis']);
  const { redis, redisUrl, out } = run;
  const stream = `bench:rebalance:${process.pid}`;
  const members: Member[] = [];
  const handled: HandledRow[] = [];
  const handledBy = new Map<HandledRow, string>();
  const start = async (name: string): Promise<Member> => {
    const cfg = { redisUrl, stream, consumer: name, partitions, leaseMs };
    const child: Member['child'] = forkTs(name, join(__dirname, 'rebalance-consumer.ts'), {
      env: { BENCH_REBALANCE_CONSUMER: JSON.stringify(cfg) },
    });
    const member: Member = { child, owned: new Set(), events: [], joinedAt: 0 };
    // The partition events stream in: read off the process, not waited for one by one.
    child.proc.on('message', (msg: RebalanceChildMessage) => {
      if (msg.type === 'joining') member.joinedAt = msg.at;
      else if (msg.type === 'handled')
        for (const row of msg.rows) {
          handled.push(row);
          handledBy.set(row, name);
        }
      else if (msg.type === 'partition') {
        member.events.push(msg);
        if (msg.event === 'assigned') member.owned.add(msg.partition);
        else member.owned.delete(msg.partition);
      }
    });
    await child.waitFor('ready', 180_000);
    return member;
  };
  const balanced = () => {
    const counts = members.filter((m) => m.child.running).map((m) => m.owned.size);
    const sum = counts.reduce((a, b) => a + b, 0);
    return sum === partitions && Math.max(...counts) - Math.min(...counts) <= 1;
  };
  const assignedAfter = (move: Move) =>
    Math.max(
      ...move.partitions.map((p) =>
        Math.min(
          ...members.flatMap((m) =>
            m.events
              .filter((e) => e.event === 'assigned' && e.partition === p && e.at >= move.at)
              .map((e) => e.at),
          ),
        ),
      ),
    );

  const client = new ClientRedisStreams({
    connection: redisUrl,
    partitions: { [stream]: partitions },
    partitionKey: (_s, data) => (data as KeyedTick).key,
  });
  const moves: Move[] = [];
  let sent = 0;
  try {
    out('bench:ticks --rebalance: ordered partitions while consumers die, leave and join');
    out(run.envText);
    out(`revision ${run.revision(['libs/stream-batch-ack', 'bench/ticks'])}`);
    out(
      `${n} consumers, ${partitions} partitions, ${keys} keys, ${rate} msgs/s for ${seconds} s, leaseMs ${leaseMs}\n`,
    );
    for (let i = 0; i < n; i++) members.push(await start(`consumer-${i}`));
    await client.connect();
    await until('the partitions spread over the consumers', balanced, 60_000);

    const began = Date.now();
    const total = Math.round(rate * seconds);
    const plan = [
      { at: seconds * 0.2, what: 'kill -9' },
      { at: seconds * 0.4, what: 'join' },
      { at: seconds * 0.75, what: 'app.close()' },
    ];
    while (sent < total) {
      const next = plan[0];
      if (next && (Date.now() - began) / 1000 >= next.at) {
        plan.shift();
        if (next.what === 'join') {
          // Started in the background: the messages keep flowing while it boots.
          const move: Move = { what: 'a consumer joins', at: Infinity, partitions: [] };
          moves.push(move);
          void start(`consumer-${members.length}`).then((joined) => {
            members.push(joined);
            move.at = joined.joinedAt;
          });
        } else {
          const victim = members.find((m) => m.child.running && m.owned.size > 0)!;
          const kill = next.what === 'kill -9';
          moves.push({
            what: kill ? 'a consumer killed (-9)' : 'a consumer leaves (close)',
            at: Date.now(),
            partitions: [...victim.owned],
          });
          if (kill) victim.child.proc.kill('SIGKILL');
          else victim.child.send({ type: 'stop' });
          victim.owned.clear();
        }
      }
      const due = Math.min(total, Math.floor(((Date.now() - began) / 1000) * rate));
      const batch: Promise<unknown>[] = [];
      for (; sent < due; sent++) {
        const tick: KeyedTick = { key: `k${sent % keys}`, seq: sent, sentAt: Date.now() };
        batch.push(firstValueFrom(client.emit(stream, tick)));
      }
      await Promise.all(batch);
      await sleep(10);
    }
    const firsts = new Map<number, HandledRow>();
    // A killed consumer's last report (every 100 ms) is lost with it, although the messages in it
    // were handled and may have been acknowledged: those count once every partition is drained
    // (nothing pending, nothing unread), as handled without a report.
    let seen = 0;
    let drainedChecks = 0;
    let nextCheck = 0;
    const drained = async () => {
      for (const s of partitionStreams(stream, partitions)) {
        const { pending, lag } = await groupInfo(redis, s);
        if (pending !== 0 || lag !== 0) return false;
      }
      return true;
    };
    const allHandled = async () => {
      // The earliest handling of each message, whichever consumer's report arrived first.
      for (; seen < handled.length; seen++) {
        const row = handled[seen];
        const first = firsts.get(row[1]);
        if (!first || row[3] < first[3]) firsts.set(row[1], row);
      }
      if (firsts.size >= total) return true;
      if (Date.now() < nextCheck) return false;
      nextCheck = Date.now() + 1000;
      drainedChecks = (await drained()) ? drainedChecks + 1 : 0;
      return drainedChecks >= 3;
    };
    await until('every message handled', allHandled, 120_000);
    const unreported = total - firsts.size;
    await until(
      'the new consumer to join, and the partitions to spread again',
      () => members.length === n + 1 && balanced(),
      60_000,
    );
    // The join moved partitions from every other consumer: which ones, from the events.
    const newcomer = members[members.length - 1];
    moves.find((m) => m.what === 'a consumer joins')!.partitions = newcomer.events
      .filter((e) => e.event === 'assigned')
      .map((e) => e.partition);
    for (const move of moves) move.doneAt = assignedAfter(move);

    // Order: the first handling of each key's messages follows their seq.
    let outOfOrder = 0;
    const lastOfKey = new Map<string, HandledRow>();
    const at = (r: HandledRow) => `${r[1]} by ${handledBy.get(r)} at +${r[3] - began} ms`;
    for (const row of [...firsts.values()].sort((a, b) => a[3] - b[3] || a[1] - b[1])) {
      const last = lastOfKey.get(row[0]);
      if (last && last[1] > row[1] && ++outOfOrder <= 5)
        out(`out of order: ${row[0]} seq ${at(row)} after seq ${at(last)}`);
      if (!last || last[1] < row[1]) lastOfKey.set(row[0], row);
    }
    const delay = (rows: HandledRow[]) => rows.map((r) => r[3] - r[2]).sort((a, b) => a - b);
    const steady = delay([...firsts.values()].filter((r) => r[2] < began + seconds * 200));
    const rows = moves.map((move) => {
      const moved = new Set(move.partitions);
      const during = delay(
        [...firsts.values()].filter(
          (r) =>
            r[2] >= move.at - 1000 &&
            r[2] <= move.doneAt! &&
            moved.has(partitionOf(r[0], partitions)),
        ),
      );
      return {
        move: move.what,
        partitions: move.partitions.length,
        movedMs: move.doneAt! - move.at,
        bound: move.what.includes('killed') ? `<= ${2 * leaseMs}` : '',
        delayed: during.length,
        p50: quantile(during, 0.5),
        p99: quantile(during, 0.99),
        max: during.length > 0 ? during[during.length - 1] : NaN,
        vsSteady: quantile(during, 0.99) / quantile(steady, 0.99),
      };
    });
    const spec =
      'move, partitions, moved in ms=movedMs, bound, msgs delayed=delayed, p50 ms=p50, p99 ms=p99, max ms=max, p99 vs steady=vsSteady:1';
    out(renderTable(columns<(typeof rows)[number]>(spec), rows));
    const handledTwice = handled.length - firsts.size;
    out(
      `\nsteady delay (first 20 %): p50 ${quantile(steady, 0.5)} ms, p99 ${quantile(steady, 0.99)} ms; ` +
        `${total} messages, all handled (${unreported} of them by the killed consumer, whose last report was lost); ` +
        `handled again ${handledTwice} (the killed consumer's unacknowledged ones); ` +
        `first handlings out of order per key: ${outOfOrder}`,
    );
    const killed = rows[0];
    out(
      `target: a killed consumer's partitions move within 2 x leaseMs: ${killed.movedMs} ms ${killed.movedMs <= 2 * leaseMs ? 'PASS' : 'FAIL'}; ` +
        `per-key order kept: ${outOfOrder === 0 ? 'PASS' : 'FAIL'}`,
    );
    const report = {
      ...{
        options: o,
        env: run.env,
        steady: { p50: quantile(steady, 0.5), p99: quantile(steady, 0.99) },
      },
      ...{ rows, handledTwice, unreported, outOfOrder },
    };
    if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
    return report;
  } finally {
    await client.close();
    for (const m of members) m.child.send({ type: 'stop' });
    await Promise.race([Promise.all(members.map((m) => m.child.exited)), sleep(15_000)]);
    await Promise.all(members.map((m) => m.child.kill()));
    await run.close();
  }
}
