export * from './config.namespaces';
export * from './duration';
export * from './env.schema';
