/** The app's own prom-client Registry (one per app, so that two apps in one process keep their own). */
export const METRICS_REGISTRY = Symbol('shortener:metrics-registry');
/** The PrometheusExporter of the global MeterProvider (otel-prometheus.ts): the libraries' metrics. */
export const OTEL_PROMETHEUS = Symbol('shortener:otel-prometheus');

/** Database lookups of a code (cache misses, or every redirect with the cache off), by result. */
export const DB_LOOKUPS_TOTAL = 'shortener_db_lookups_total';
/** Redirects answered (302), whether from the cache or the database. */
export const REDIRECTS_TOTAL = 'shortener_redirects_total';
/** Duration of every HTTP request, by method, route and status code. */
export const HTTP_REQUEST_DURATION_SECONDS = 'shortener_http_request_duration_seconds';
/** Duration of every database call, by operation and outcome (ok, error). */
export const DB_QUERY_DURATION_SECONDS = 'shortener_db_query_duration_seconds';

/** Request and database call durations: from well under a millisecond (a cached redirect) to the timeouts. */
export const DURATION_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
