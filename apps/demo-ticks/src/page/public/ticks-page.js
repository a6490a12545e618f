/*
 * The ticks page: the symbols with their last price, a candlestick chart with volume of one symbol
 * (1m / 5m / 30m), and the consumer's figures, kept up to date by the app's server-sent events
 * (GET /_/events?symbol=&interval=). Every value is set as text (textContent, dataset): nothing
 * that comes from a tick, Redis or the address bar is ever parsed as markup.
 */
/* global document, window, location, history, EventSource, URLSearchParams, LightweightCharts */
'use strict';

(function () {
  /** As the app checks it (src/candles/tick.ts). */
  const SYMBOL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$/;
  const INTERVALS = ['1m', '5m', '30m'];
  const UP = '#26a69a';
  const DOWN = '#ef5350';
  /**
   * The chart shows at least this many candle widths: a few candles (a fresh start, a new
   * symbol) are drawn as narrow as in an hour of 1m candles, the newest on the right, rather
   * than one candle stretched over the whole chart.
   */
  const MIN_VISIBLE_BARS = 60;

  const el = (id) => document.getElementById(id);
  const status = el('status');
  const notice = el('notice');
  const list = el('symbols');
  const readout = el('readout');

  const params = new URLSearchParams(location.search);
  const state = {
    symbol: undefined,
    interval: INTERVALS.includes(params.get('interval')) ? params.get('interval') : '1m',
    /** symbol -> { row, price } */
    rows: new Map(),
    /** start (ms) -> candle, of the chosen symbol and interval */
    candles: new Map(),
    source: undefined,
  };

  const priceFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 8 });
  const countFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  const rateFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });
  /** `1 candle`, `2 candles`. */
  const counted = (n, one, many) => `${countFormat.format(n)} ${n === 1 ? one : many}`;

  function showNotice(text) {
    notice.textContent = text;
    notice.hidden = !text;
  }

  // The chart. The attribution logo is off because it adds an inline <style>, which the page's
  // Content-Security-Policy refuses; the footer links to TradingView instead, as its licence asks.
  const chart = LightweightCharts.createChart(el('chart'), {
    autoSize: true,
    layout: {
      attributionLogo: false,
      background: { type: 'solid', color: '#11161d' },
      textColor: '#c9d1d9',
    },
    grid: { vertLines: { color: '#1d2530' }, horzLines: { color: '#1d2530' } },
    timeScale: { timeVisible: true, secondsVisible: false, borderColor: '#2b3440' },
    rightPriceScale: { borderColor: '#2b3440' },
  });
  const candleSeries = chart.addSeries(LightweightCharts.CandlestickSeries, {
    upColor: UP,
    downColor: DOWN,
    borderVisible: false,
    wickUpColor: UP,
    wickDownColor: DOWN,
  });
  candleSeries.priceScale().applyOptions({ scaleMargins: { top: 0.08, bottom: 0.28 } });
  const volumeSeries = chart.addSeries(LightweightCharts.HistogramSeries, {
    priceFormat: { type: 'volume' },
    priceScaleId: '',
    lastValueVisible: false,
    priceLineVisible: false,
  });
  volumeSeries.priceScale().applyOptions({ scaleMargins: { top: 0.78, bottom: 0 } });

  const toBar = (c) => ({
    time: Math.floor(c.start / 1000),
    open: c.open,
    high: c.high,
    low: c.low,
    close: c.close,
  });
  const toVolume = (c) => ({
    time: Math.floor(c.start / 1000),
    value: c.volume,
    color: c.close >= c.open ? 'rgba(38, 166, 154, 0.45)' : 'rgba(239, 83, 80, 0.45)',
  });

  function drawAll() {
    const candles = [...state.candles.values()].sort((a, b) => a.start - b.start);
    candleSeries.setData(candles.map(toBar));
    volumeSeries.setData(candles.map(toVolume));
  }

  /**
   * Fits the candles into the chart: all of them when there are MIN_VISIBLE_BARS or more, else
   * the last MIN_VISIBLE_BARS positions, the candles at their right end (nothing to the left yet).
   */
  function frame() {
    const count = state.candles.size;
    if (count >= MIN_VISIBLE_BARS) chart.timeScale().fitContent();
    else if (count > 0)
      chart.timeScale().setVisibleLogicalRange({ from: count - MIN_VISIBLE_BARS, to: count });
  }

  const sameCandle = (a, b) =>
    a !== undefined &&
    ['open', 'high', 'low', 'close', 'volume', 'trades'].every((k) => a[k] === b[k]);

  /** `reset`: the chart's history; else the newest candles, which replace or extend it. */
  function showCandles(message) {
    if (message.symbol !== state.symbol || message.interval !== state.interval) return;
    const newest = () => Math.max(-Infinity, ...state.candles.keys());
    const before = state.candles.size;
    if (message.reset) {
      state.candles = new Map(message.candles.map((c) => [c.start, c]));
      drawAll();
      frame();
    } else {
      let redraw = false;
      for (const c of message.candles) {
        // A late tick may change a candle older than the newest one: the chart only updates its
        // last bar in place, so everything is drawn again then (rare).
        const older = c.start < newest();
        if (older && !sameCandle(state.candles.get(c.start), c)) redraw = true;
        state.candles.set(c.start, c);
        if (!older && !redraw) {
          candleSeries.update(toBar(c));
          volumeSeries.update(toVolume(c));
        }
      }
      if (redraw) drawAll();
      // A new candle while there are only a few: kept at the same width (the first one too).
      if (state.candles.size !== before && state.candles.size < MIN_VISIBLE_BARS) frame();
    }
    showReadout();
  }

  function showReadout() {
    const last = state.candles.get(Math.max(-Infinity, ...state.candles.keys()));
    readout.dataset.symbol = state.symbol || '';
    readout.dataset.interval = state.interval;
    readout.dataset.candles = String(state.candles.size);
    readout.dataset.lastStart = last ? String(last.start) : '';
    readout.dataset.lastClose = last ? String(last.close) : '';
    if (!last) {
      readout.textContent = state.symbol ? `No candles of ${state.symbol} yet.` : '';
      return;
    }
    const time = new Date(last.start).toISOString().slice(0, 16).replace('T', ' ');
    const f = (n) => priceFormat.format(n);
    readout.textContent = [
      counted(state.candles.size, 'candle', 'candles'),
      `${time} UTC`,
      `O ${f(last.open)} H ${f(last.high)} L ${f(last.low)} C ${f(last.close)}`,
      `volume ${countFormat.format(last.volume)}`,
      counted(last.trades, 'trade', 'trades'),
    ].join(' · ');
  }

  /** A row of the symbol list, created on first sight, kept in alphabetical order. */
  function rowOf(symbol) {
    let entry = state.rows.get(symbol);
    if (entry) return entry;
    const row = document.createElement('li');
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'symbol';
    button.dataset.symbol = symbol;
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = symbol;
    const price = document.createElement('span');
    price.className = 'price';
    button.append(name, price);
    button.addEventListener('click', () => choose(symbol));
    row.append(button);
    const after = [...state.rows.keys()].filter((s) => s > symbol).sort()[0];
    list.insertBefore(row, after === undefined ? null : state.rows.get(after).row);
    entry = { row, button, price, value: undefined };
    state.rows.set(symbol, entry);
    el('symbols-empty').hidden = true;
    el('symbol-count').textContent = `(${state.rows.size})`;
    markChosen();
    return entry;
  }

  function showPrices(message) {
    for (const { symbol, price } of message.prices) {
      const entry = rowOf(String(symbol));
      if (entry.value !== undefined && price !== entry.value)
        entry.price.dataset.move = price > entry.value ? 'up' : 'down';
      entry.value = price;
      entry.price.dataset.price = String(price);
      entry.price.textContent = priceFormat.format(price);
    }
    if (state.symbol === undefined) {
      const first = [...state.rows.keys()].sort().find((s) => SYMBOL_PATTERN.test(s));
      if (first !== undefined) choose(first, { keepNotice: true });
    }
  }

  // Each figure explains itself on hover, as its label does.
  for (const dd of el('stats').querySelectorAll('dd[data-stat]')) {
    const dt = dd.previousElementSibling;
    if (dt && dt.title) dd.title = dt.title;
  }

  function showStats(stats) {
    for (const dd of el('stats').querySelectorAll('dd[data-stat]')) {
      const value = stats[dd.dataset.stat];
      const number = typeof value === 'number' ? value : undefined;
      dd.dataset.value = number === undefined ? '' : String(number);
      const format = /PerSec|PerXack/.test(dd.dataset.stat) ? rateFormat : countFormat;
      dd.textContent = number === undefined ? '–' : format.format(number);
      if (number !== undefined && dd.dataset.unit) {
        const unit = document.createElement('small');
        unit.textContent = ` ${dd.dataset.unit}`;
        dd.append(unit);
      }
    }
    const problem = el('stats-problem');
    problem.textContent = stats.problem ? String(stats.problem) : '';
    problem.hidden = !stats.problem;
  }

  function markChosen() {
    for (const [symbol, { button }] of state.rows)
      button.setAttribute('aria-pressed', String(symbol === state.symbol));
    for (const button of el('intervals').querySelectorAll('button'))
      button.setAttribute('aria-pressed', String(button.dataset.interval === state.interval));
  }

  function choose(symbol, options = {}) {
    if (!SYMBOL_PATTERN.test(symbol)) {
      showNotice(
        `Not a symbol: "${symbol}" (symbols are 1 to 32 characters of A-Z a-z 0-9 . _ -).`,
      );
      return;
    }
    if (!options.keepNotice) showNotice('');
    state.symbol = symbol;
    state.candles = new Map();
    candleSeries.setData([]);
    volumeSeries.setData([]);
    el('chart-title').textContent = `${symbol} · ${state.interval}`;
    showReadout();
    markChosen();
    const query = new URLSearchParams({ symbol, interval: state.interval });
    history.replaceState(null, '', `?${query}`);
    connect();
  }

  function connect() {
    if (state.source) state.source.close();
    const query = new URLSearchParams({ interval: state.interval });
    if (state.symbol !== undefined) query.set('symbol', state.symbol);
    const source = new EventSource(`_/events?${query}`);
    state.source = source;
    const on = (type, handler) =>
      source.addEventListener(type, (event) => {
        if (state.source === source) handler(JSON.parse(event.data));
      });
    on('prices', showPrices);
    on('candles', showCandles);
    on('stats', showStats);
    on('problem', (p) => showNotice(`The app could not read Redis: ${p.message}`));
    source.addEventListener('open', () => setStatus('live', 'live'));
    source.addEventListener('error', () => {
      if (state.source !== source) return;
      if (source.readyState === EventSource.CLOSED) setStatus('closed', 'disconnected');
      else setStatus('reconnecting', 'reconnecting…');
    });
  }

  function setStatus(name, text) {
    status.dataset.state = name;
    status.textContent = text;
  }

  for (const button of el('intervals').querySelectorAll('button'))
    button.addEventListener('click', () => {
      state.interval = button.dataset.interval;
      if (state.symbol !== undefined) choose(state.symbol);
      else {
        markChosen();
        connect();
      }
    });

  window.addEventListener('pagehide', () => state.source && state.source.close());

  markChosen();
  const wanted = params.get('symbol');
  if (wanted !== null && wanted !== '') choose(wanted);
  if (state.symbol === undefined) connect(); // the first symbol listed is chosen (showPrices)
})();
