/*
 * What the consumer measures: e2e latency of every message (from the producer's high-resolution
 * send time), exactly-once accounting by sequence number, peak RSS (sampled) and CPU time.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { quantile } from '../shared/table';
import { hrNow, Tick } from './protocol';

export class Recorder {
  private readonly latencies: Float64Array;
  private readonly seen: Uint8Array;
  private count = 0;
  private handled = 0;
  private duplicates = 0;
  private firstAt = 0;
  private lastAt = 0;
  private peakRss = 0;
  private cpuStart: NodeJS.CpuUsage | undefined;
  private cpuEnd: NodeJS.CpuUsage | undefined;
  private readonly sampler: ReturnType<typeof setInterval>;
  private readonly loopDelay = monitorEventLoopDelay({ resolution: 5 });

  constructor(
    private readonly warmup: number,
    private readonly expected: number,
    rssEveryMs: number,
    private readonly onDone: () => void,
    /** Called when the first measured message is handled (the measured window starts). */
    private readonly onStart: () => void,
  ) {
    this.latencies = new Float64Array(expected);
    this.seen = new Uint8Array(expected);
    this.sampleRss();
    this.sampler = setInterval(() => this.sampleRss(), rssEveryMs);
  }

  record(tick: Tick): void {
    const now = hrNow();
    const seq = tick.seq - this.warmup;
    if (seq < 0) return; // warm-up: handled, not measured
    if (this.handled++ === 0) {
      this.onStart();
      this.firstAt = now;
      this.cpuStart = process.cpuUsage();
      this.loopDelay.enable();
    }
    this.lastAt = now;
    if (seq >= this.expected) return;
    if (this.seen[seq]) {
      this.duplicates++;
      return;
    }
    this.seen[seq] = 1;
    this.latencies[this.count++] = now - tick.sentAt;
    if (this.count === this.expected) {
      this.cpuEnd = process.cpuUsage(this.cpuStart);
      this.loopDelay.disable();
      this.sampleRss();
      this.onDone();
    }
  }

  /**
   * `missing`: sequence numbers never handled (up to `expected`); p50, p99, max: e2e latency (ms);
   * `cpuMs`: user + system CPU time while messages flowed.
   */
  result() {
    clearInterval(this.sampler);
    this.loopDelay.disable();
    this.sampleRss();
    const lat = this.latencies.subarray(0, this.count).sort();
    const cpu = this.cpuEnd ?? process.cpuUsage(this.cpuStart);
    const { handled, duplicates, firstAt, lastAt } = this;
    return {
      ...{ handled, duplicates, missing: this.expected - this.count },
      ...{ p50: quantile(lat, 0.5), p99: quantile(lat, 0.99), max: lat[lat.length - 1] ?? NaN },
      ...{ firstAt, lastAt, peakRssMb: this.peakRss / 1024 / 1024 },
      cpuMs: (cpu.user + cpu.system) / 1000,
      loopDelayP99: this.loopDelay.percentile(99) / 1e6,
      loopDelayMax: this.loopDelay.max / 1e6,
    };
  }

  private sampleRss(): void {
    this.peakRss = Math.max(this.peakRss, process.memoryUsage.rss());
  }
}
