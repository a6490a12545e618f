/*
 * --cpu-burn [n]: n busy-loop processes (`node -e 'for(;;);'`) beside the run, to see the
 * patterns on a busy machine (timers late, the event loop starved). Killed at the end of the
 * run, and when the benchmark exits by any path.
 */
import { ChildProcess, spawn } from 'node:child_process';

const running = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;

export class CpuBurn {
  private constructor(private readonly children: ChildProcess[]) {}

  static start(n: number): CpuBurn {
    const burn = new CpuBurn(
      Array.from({ length: n }, () =>
        spawn(process.execPath, ['-e', 'for(;;);'], { stdio: 'ignore' }),
      ),
    );
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
    for (const c of this.children) if (running(c)) c.kill('SIGKILL');
  };

  async stop(): Promise<void> {
    process.removeListener('exit', this.killAll);
    const exited = this.children.filter(running).map((c) => new Promise((r) => c.once('exit', r)));
    this.killAll();
    await Promise.all(exited);
  }
}
