/*
 * The shortener's page. Everything that comes from the server (stored URLs above all) is put in
 * the page as text (textContent, element properties), never as HTML. The page talks to the app
 * with JSON only: POST /urls, and every second GET /_/stats and GET /_/recent.
 */
/* global document, window, navigator */
'use strict';

(function () {
  const REFRESH_MS = 1000;
  const STATS = ['redirects', 'cacheHits', 'dbLookups', 'joins', 'lockWaits'];
  const $ = (id) => document.getElementById(id);
  const number = new Intl.NumberFormat('en-US');

  const form = $('shorten-form');
  const input = $('url');
  const submit = $('shorten');
  const error = $('url-error');
  const result = $('result');
  const shortLink = $('short-link');
  const copyButton = $('copy');
  const copied = $('copied');

  function show(el, text) {
    if (text !== undefined) el.textContent = text;
    el.hidden = false;
  }

  function hide(el) {
    el.hidden = true;
  }

  async function getJson(path) {
    const response = await fetch(path, { headers: { Accept: 'application/json' } });
    const body = await response.json().catch(() => ({}));
    return { response, body };
  }

  // --- Shorten ----------------------------------------------------------------------------

  function showError(message) {
    input.setAttribute('aria-invalid', 'true');
    show(error, message);
  }

  function clearError() {
    input.removeAttribute('aria-invalid');
    hide(error);
  }

  function showResult(link, created) {
    shortLink.textContent = link.shortUrl;
    shortLink.href = link.shortUrl;
    $('result-state').textContent = created ? 'New link to' : 'Already shortened:';
    $('result-target').textContent = link.url;
    copied.textContent = '';
    show(result);
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearError();
    const url = input.value.trim();
    if (!url) {
      showError('Enter the URL to shorten, such as https://example.com/page');
      return;
    }
    submit.disabled = true;
    try {
      const response = await fetch('/urls', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ url }),
      });
      const body = await response.json().catch(() => ({}));
      if (!response.ok) {
        showError(body.message || `The shortener answered ${response.status}`);
        return;
      }
      showResult(body, response.status === 201);
      input.value = '';
      refreshRecent();
    } catch {
      showError('The shortener did not answer; try again.');
    } finally {
      submit.disabled = false;
    }
  });

  input.addEventListener('input', clearError);

  // --- Copy -------------------------------------------------------------------------------

  /** Clipboard API where allowed (secure contexts), else the older execCommand('copy'). */
  async function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      try {
        await navigator.clipboard.writeText(text);
        return true;
      } catch {
        // fall through to the fallback
      }
    }
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'offscreen';
    document.body.append(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    area.remove();
    return ok;
  }

  let copiedTimer;
  copyButton.addEventListener('click', async () => {
    const ok = await copyText(shortLink.textContent);
    clearTimeout(copiedTimer);
    if (ok) {
      copied.textContent = 'Copied';
    } else {
      copied.textContent = 'Press Ctrl+C to copy';
      window.getSelection().selectAllChildren(shortLink);
    }
    copiedTimer = setTimeout(() => (copied.textContent = ''), 2500);
  });

  // --- Recent links -----------------------------------------------------------------------

  let lastRecent = '';

  function linkRow(link) {
    const row = document.createElement('tr');
    const code = document.createElement('td');
    const a = document.createElement('a');
    a.href = link.shortUrl;
    a.textContent = link.shortUrl;
    code.append(a);
    const target = document.createElement('td');
    target.className = 'target';
    target.textContent = link.url;
    target.title = link.url;
    const count = document.createElement('td');
    count.className = 'num';
    count.textContent = link.redirects === null ? '–' : number.format(link.redirects);
    row.append(code, target, count);
    return row;
  }

  const COUNTS_NOTE = {
    down: 'Redis does not answer: redirect counts are paused (redirects still work).',
    off: 'The cache is off, so redirects are not counted.',
  };

  function renderRecent(body) {
    const text = JSON.stringify(body);
    if (text === lastRecent) return;
    lastRecent = text;
    $('recent').replaceChildren(...body.links.map(linkRow));
    $('recent-empty').hidden = body.links.length > 0;
    const note = COUNTS_NOTE[body.counts];
    if (note) show($('recent-note'), note);
    else hide($('recent-note'));
  }

  async function refreshRecent() {
    try {
      const { response, body } = await getJson('/_/recent');
      if (response.ok) renderRecent(body);
      else {
        lastRecent = '';
        show($('recent-note'), body.message || `The shortener answered ${response.status}`);
      }
    } catch {
      lastRecent = '';
      show($('recent-note'), 'The shortener does not answer.');
    }
  }

  // --- Live panel -------------------------------------------------------------------------

  let previous;

  const CACHE_STATE = {
    up: ['Redis connected', 'ok'],
    down: ['Redis is down: redirects are answered from the database', 'bad'],
    off: ['Cache off: every redirect reads the database', 'off'],
  };

  function renderStats(stats) {
    for (const name of STATS) {
      $(`stat-${name}`).textContent = number.format(stats[name]);
      const delta = previous ? stats[name] - previous[name] : 0;
      const el = $(`delta-${name}`);
      el.textContent = delta > 0 ? `+${number.format(delta)}` : '';
      el.classList.toggle('moving', delta > 0);
    }
    previous = stats;
    const [text, tone] = CACHE_STATE[stats.cache] || ['', 'off'];
    const state = $('cache-state');
    state.textContent = text;
    state.dataset.tone = tone;
  }

  async function refreshStats() {
    try {
      const { response, body } = await getJson('/_/stats');
      if (response.ok) renderStats(body);
      else throw new Error(String(response.status));
    } catch {
      const state = $('cache-state');
      state.textContent = 'The shortener does not answer';
      state.dataset.tone = 'bad';
    }
  }

  // --- Refresh loop: one round at a time, paused while the tab is hidden --------------------

  async function tick() {
    if (!document.hidden) await Promise.all([refreshStats(), refreshRecent()]);
    setTimeout(tick, REFRESH_MS);
  }

  tick();
})();
