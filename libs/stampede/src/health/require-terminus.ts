/**
 * The health entry point needs the optional peer @nestjs/terminus. Checked before anything imports
 * it, so a missing install says what to do instead of a bare "Cannot find module".
 */
try {
  require.resolve('@nestjs/terminus');
} catch {
  throw new Error(
    '@nest-redis-resilience/stampede/health needs the optional peer dependency @nestjs/terminus ' +
      '(^11 or ^12). Install it: npm install @nestjs/terminus',
  );
}
