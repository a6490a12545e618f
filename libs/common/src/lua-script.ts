/**
 * A Lua script to register on an ioredis client under `name` (EVALSHA with a fallback to EVAL,
 * via `defineCommand`). Without `numberOfKeys` the caller passes the number of keys as the first
 * argument of each call (for scripts over a variable number of keys).
 */
export interface LuaScript {
  readonly name: string;
  readonly numberOfKeys?: number;
  readonly lua: string;
}

/** What registerScripts needs of a client: ioredis' `Redis` and `Cluster` both have it. */
export interface ScriptHost {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
}

/**
 * Defines `scripts` as commands of `client`, skipping those it already has (a client shared by
 * several stores, or registered twice), and returns the client typed with the commands `T`.
 */
export function registerScripts<T extends object, C extends ScriptHost = ScriptHost>(
  client: C,
  scripts: readonly LuaScript[],
): C & T {
  for (const { name, numberOfKeys, lua } of scripts) {
    if (typeof (client as unknown as Record<string, unknown>)[name] !== 'function')
      client.defineCommand(name, numberOfKeys === undefined ? { lua } : { numberOfKeys, lua });
  }
  return client as C & T;
}
