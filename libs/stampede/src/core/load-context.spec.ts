import { StampedeConfigError } from './errors';
import { currentLoadContext, LoadContext, loadSettings, runInLoadContext } from './load-context';

describe('LoadContext', () => {
  const context = (fields: Partial<LoadContext>) =>
    Object.assign(new LoadContext('k', new AbortController().signal), fields);

  it('nothing set: the policy decides', () => {
    expect(loadSettings(undefined, 'm')).toEqual({ skip: false });
    expect(loadSettings(context({}), 'm')).toEqual({
      ttl: undefined,
      grace: undefined,
      tags: undefined,
      skip: false,
    });
  });

  it('durations are parsed, grace 0 is no grace, empty tags are none', () => {
    expect(loadSettings(context({ ttl: '2s', grace: 0, tags: [], skip: true }), 'm')).toEqual({
      ttl: 2000,
      grace: 0,
      tags: undefined,
      skip: true,
    });
    expect(loadSettings(context({ grace: '1m', tags: ['t'] }), 'm')).toMatchObject({
      grace: 60_000,
      tags: ['t'],
    });
  });

  it('bad values are refused with the name of the method', () => {
    expect(() => loadSettings(context({ ttl: 0 }), 'Svc.find')).toThrow(StampedeConfigError);
    expect(() => loadSettings(context({ ttl: 'soon' }), 'Svc.find')).toThrow(/Svc.find/);
    expect(() => loadSettings(context({ tags: [''] }), 'Svc.find')).toThrow(/tags/);
  });

  it('currentLoadContext() is the context of the load running the code, across awaits', async () => {
    const ctx = context({});
    expect(currentLoadContext()).toBeUndefined();
    await runInLoadContext(ctx, async () => {
      await Promise.resolve();
      expect(currentLoadContext()).toBe(ctx);
    });
    expect(currentLoadContext()).toBeUndefined();
  });
});
