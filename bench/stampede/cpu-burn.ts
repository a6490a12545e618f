/*
 * --cpu-burn [n]: n busy-loop processes (`node -e 'for(;;);'`) beside the run, to see the
 * patterns on a busy machine (timers late, the event loop starved). Killed at the end of the
 * run, and when the benchmark exits by any path.
 */
import { ChildProcess, spawn } from 'node:child_process';

export class CpuBurn {
  private constructor(private readonly children: ChildProcess[]) {}

  static start(n: number): CpuBurn {
    const children = Array.from({ length: n }, () =>
      spawn(process.execPath, ['-e', 'for(;;);'], { stdio: 'ignore' }),
    );
    const burn = new CpuBurn(children);
    process.once('exit', burn.killAll);
    return burn;
  }

  get pids(): number[] {
    return this.children.map((c) => c.pid ?? -1);
  }

  describe(): string {
    return this.children.length
      ? `cpu burn: ${this.children.length} busy-loop process(es) beside the run (node -e 'for(;;);', pids ${this.pids.join(', ')})`
      : 'cpu burn: none';
  }

  private readonly killAll = () => {
    for (const c of this.children)
      if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };

  async stop(): Promise<void> {
    process.removeListener('exit', this.killAll);
    await Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGKILL');
          }),
      ),
    );
  }
}
