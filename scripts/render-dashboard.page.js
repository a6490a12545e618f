/* global window, document, uPlot */
/* Draws the queried panels (see render-dashboard.js) on a 24-column grid, as Grafana lays them out. */
(function () {
  const COLORS = [
    '#73bf69',
    '#f2cc0c',
    '#5794f2',
    '#ff9830',
    '#f2495c',
    '#b877d9',
    '#8ab8ff',
    '#fade2a',
  ];
  const UNIT = {
    s: (v) =>
      v < 1e-3
        ? `${(v * 1e6).toFixed(0)} µs`
        : v < 1
          ? `${(v * 1e3).toFixed(1)} ms`
          : `${v.toFixed(2)} s`,
    percentunit: (v) => `${(v * 100).toFixed(v > 0.99 && v < 1 ? 2 : 1)} %`,
    reqps: (v) => `${fmt(v)}/s`,
    ops: (v) => `${fmt(v)} ops/s`,
    bytes: (v) =>
      v >= 2 ** 20 ? `${(v / 2 ** 20).toFixed(0)} MiB` : `${(v / 1024).toFixed(0)} KiB`,
    short: (v) => fmt(v),
    none: (v) => fmt(v),
  };
  function fmt(v) {
    if (v == null || Number.isNaN(v)) return '–';
    const a = Math.abs(v);
    if (a >= 1e6) return `${(v / 1e6).toFixed(2)} M`;
    if (a >= 1e3) return `${(v / 1e3).toFixed(a >= 1e4 ? 1 : 2)} k`;
    return a >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(2);
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  window.drawDashboard = function (panels, title, subtitle) {
    const header = document.querySelector('header');
    header.append(el('h1', '', title), el('p', '', subtitle));
    const main = document.querySelector('main');
    const colW = (window.innerWidth - 16) / 24;
    const rowH = 34;
    let height = 0;
    for (const p of panels) {
      const box = el('div', p.type === 'row' ? 'row' : 'panel');
      const { x, y, w, h } = p.gridPos;
      Object.assign(box.style, {
        left: `${x * colW + 2}px`,
        top: `${y * rowH + 2}px`,
        width: `${w * colW - 4}px`,
        height: `${h * rowH - 4}px`,
      });
      height = Math.max(height, (y + h) * rowH);
      main.append(box);
      if (p.type === 'row') {
        box.textContent = p.title;
        continue;
      }
      box.append(el('h2', '', p.title));
      const unit = UNIT[p.unit] ?? UNIT.short;
      if (!p.series.length) {
        box.append(el('div', 'empty', 'no data'));
        continue;
      }
      if (p.type === 'stat') {
        const s = p.series[0].values;
        const v = el('div', 'stat', unit(s[s.length - 1][1]));
        if (p.series.length > 1)
          v.append(el('small', '', `${p.series[0].name} (+${p.series.length - 1} more)`));
        box.append(v);
        continue;
      }
      const times = [...new Set(p.series.flatMap((s) => s.values.map(([t]) => t)))].sort(
        (a, b) => a - b,
      );
      const data = [
        times,
        ...p.series.map((s) => {
          const m = new Map(s.values);
          return times.map((t) => (m.has(t) ? m.get(t) : null));
        }),
      ];
      const legendRows = Math.min(3, Math.ceil(p.series.length / 3));
      new uPlot(
        {
          width: w * colW - 22,
          height: h * rowH - 40 - legendRows * 16,
          legend: { show: true, live: false },
          cursor: { show: false },
          axes: [
            { stroke: '#8e8e9e', grid: { stroke: '#2a2d33' }, ticks: { stroke: '#2a2d33' } },
            {
              stroke: '#8e8e9e',
              grid: { stroke: '#2a2d33' },
              ticks: { stroke: '#2a2d33' },
              size: 92,
              values: (u, vals) => vals.map(unit),
            },
          ],
          series: [
            {},
            ...p.series.map((s, i) => ({
              label: s.name,
              stroke: COLORS[i % COLORS.length],
              width: 1.5,
              spanGaps: true,
              fill: p.series.length === 1 ? `${COLORS[0]}22` : undefined,
              value: (u, v) => unit(v),
            })),
          ],
        },
        data,
        box,
      );
    }
    main.style.height = `${height + 8}px`;
  };
})();
