/** Status of a ServerRedisStreams / ClientRedisStreams, as emitted by their `status` observable. */
export enum RedisStreamsStatus {
  DISCONNECTED = 'disconnected',
  RECONNECTING = 'reconnecting',
  CONNECTED = 'connected',
}

/** ioredis events forwarded by `on()`. The first argument tells which connection emitted it. */
export enum RedisStreamsEventsMap {
  CONNECT = 'connect',
  READY = 'ready',
  ERROR = 'error',
  CLOSE = 'close',
  RECONNECTING = 'reconnecting',
  END = 'end',
}

/** `reader`: the blocking XREADGROUP connection; `command`: everything else (XACK, XCLAIM, scripts); `client`: the producer. */
export type RedisStreamsConnectionType = 'reader' | 'command' | 'client';

export type RedisStreamsEvents = {
  connect: (type: RedisStreamsConnectionType) => void;
  ready: (type: RedisStreamsConnectionType) => void;
  error: (type: RedisStreamsConnectionType, err: Error) => void;
  close: (type: RedisStreamsConnectionType) => void;
  reconnecting: (type: RedisStreamsConnectionType) => void;
  end: (type: RedisStreamsConnectionType) => void;
};
