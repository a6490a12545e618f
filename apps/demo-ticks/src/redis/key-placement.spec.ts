import { scopedPrefix } from '../candles/candle-store';
import { hashTag } from './redis-keys';
import { tickPlacement } from './tick-streams';

describe('candle key placement', () => {
  it('puts the keys of a symbol in the slot of the stream carrying it', () => {
    expect(hashTag('ticks:{2}')).toBe('2');
    expect(hashTag('ticks:{}x')).toBeUndefined();
    expect(scopedPrefix('t:', 'ticks')).toBe('t:');
    expect(scopedPrefix('t:', 'ticks:{2}')).toBe('t:{2}:');
    const placement = tickPlacement({ stream: 'ticks', partitions: 6 });
    expect(placement.streams).toHaveLength(6);
    for (const symbol of ['SYM001', 'BTC', 'ETH'])
      expect(placement.streams).toContain(placement.streamOf(symbol));
    expect(tickPlacement({ stream: 'ticks', partitions: 0 }).streams).toEqual(['ticks']);
  });
});
