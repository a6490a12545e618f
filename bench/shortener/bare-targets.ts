/** What the bare servers of the redirect benchmark read from their environment. */
export function bareTargets(env: NodeJS.ProcessEnv): {
  port: number;
  host: string;
  targets: Map<string, string>;
} {
  const targets = JSON.parse(env.BARE_TARGETS ?? '{}') as Record<string, string>;
  return {
    port: Number(env.PORT ?? 3000),
    host: env.HOST ?? '127.0.0.1',
    targets: new Map(Object.entries(targets)),
  };
}
