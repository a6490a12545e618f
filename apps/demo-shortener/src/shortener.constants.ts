/** Injection tokens of the shortener app. */
export const URL_REPOSITORY = Symbol('shortener:url-repository');
