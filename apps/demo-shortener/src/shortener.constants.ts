/** Injection tokens of the shortener app. */
export const SHORTENER_CONFIG = Symbol('shortener:config');
export const URL_REPOSITORY = Symbol('shortener:url-repository');
