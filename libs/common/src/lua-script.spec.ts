import { LuaScript, registerScripts } from './lua-script';

/** A client that records what is defined on it, and gains a method per command as ioredis does. */
function fakeClient() {
  const defined: { name: string; numberOfKeys?: number }[] = [];
  const client = {
    defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }) {
      defined.push({ name, numberOfKeys: definition.numberOfKeys });
      (client as Record<string, unknown>)[name] = () => undefined;
    },
  };
  return { client, defined };
}

describe('registerScripts', () => {
  const scripts: LuaScript[] = [
    { name: 'fixed', numberOfKeys: 2, lua: 'return 1' },
    { name: 'variable', lua: 'return #KEYS' },
  ];

  it('defines each script once per client, with its number of keys when fixed', () => {
    const { client, defined } = fakeClient();
    registerScripts(client, scripts);
    registerScripts(client, scripts);
    expect(defined).toEqual([{ name: 'fixed', numberOfKeys: 2 }, { name: 'variable' }]);
  });
});
