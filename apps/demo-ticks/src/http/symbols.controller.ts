import {
  BadRequestException,
  Controller,
  Get,
  HttpException,
  Inject,
  Logger,
  NotFoundException,
  Param,
  Query,
  ServiceUnavailableException,
} from '@nestjs/common';
import { Candle } from '../candles/candle';
import { CandleStore, LatestPrice } from '../candles/candle-store';
import { INTERVAL_NAMES, IntervalName, isIntervalName } from '../candles/interval';
import { SYMBOL_PATTERN } from '../candles/tick';

export const MAX_CANDLES_LIMIT = 1000;
export const DEFAULT_CANDLES_LIMIT = 100;

/** Parses the `interval` query parameter (default 1m); throws a 400 naming the allowed values. */
export function parseIntervalParam(raw: unknown): IntervalName {
  if (raw === undefined || raw === '') return '1m';
  if (!isIntervalName(raw))
    throw new BadRequestException(
      `interval must be one of ${INTERVAL_NAMES.join(', ')} (got ${JSON.stringify(raw)})`,
    );
  return raw;
}

/** Parses the `limit` query parameter (default 100); throws a 400 unless 1..1000. */
export function parseLimitParam(raw: unknown): number {
  if (raw === undefined || raw === '') return DEFAULT_CANDLES_LIMIT;
  const n = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_CANDLES_LIMIT)
    throw new BadRequestException(
      `limit must be a whole number from 1 to ${MAX_CANDLES_LIMIT} (got ${JSON.stringify(raw)})`,
    );
  return n;
}

/** Checks a symbol parameter; throws a 400 naming the allowed characters. */
export function parseSymbolParam(raw: unknown): string {
  if (typeof raw !== 'string' || !SYMBOL_PATTERN.test(raw))
    throw new BadRequestException(
      `symbol must be 1-32 characters of A-Z a-z 0-9 . _ - (got ${JSON.stringify(raw)})`,
    );
  return raw;
}

@Controller('symbols')
export class SymbolsController {
  private readonly logger = new Logger(SymbolsController.name);

  constructor(@Inject(CandleStore) private readonly store: CandleStore) {}

  @Get()
  async list(): Promise<{ symbols: string[] }> {
    return { symbols: await this.read(() => this.store.symbols()) };
  }

  @Get(':symbol/price')
  async price(@Param('symbol') raw: string): Promise<LatestPrice> {
    const symbol = parseSymbolParam(raw);
    const latest = await this.read(() => this.store.latest(symbol));
    if (!latest) throw new NotFoundException(`no ticks seen for symbol "${symbol}"`);
    return latest;
  }

  @Get(':symbol/candles')
  async candles(
    @Param('symbol') raw: string,
    @Query('interval') intervalRaw: unknown,
    @Query('limit') limitRaw: unknown,
  ): Promise<{ symbol: string; interval: IntervalName; candles: Candle[] }> {
    const symbol = parseSymbolParam(raw);
    const interval = parseIntervalParam(intervalRaw);
    const limit = parseLimitParam(limitRaw);
    const candles = await this.read(() => this.store.candles(symbol, interval, limit));
    if (!candles) throw new NotFoundException(`no ticks seen for symbol "${symbol}"`);
    return { symbol, interval, candles };
  }

  /** Redis errors become a 503 that says so, instead of a bare 500. */
  private async read<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof HttpException) throw err;
      this.logger.warn(`Redis read failed: ${(err as Error).message}`);
      throw new ServiceUnavailableException(`Redis is not available: ${(err as Error).message}`);
    }
  }
}
