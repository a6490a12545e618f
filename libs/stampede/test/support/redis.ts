export { REDIS_URL, deleteKeys, uniquePrefix } from '../../../../test/support/redis';
export { sleep as delay } from '../../../../test/support/wait';
export { freePort, ThrowawayRedis, waitForRedis } from '../../../../support/throwaway-redis';
export { RoundTripProxy } from '../../../../support/round-trip-proxy';
