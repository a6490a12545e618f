/*
 * Command-line options from a typed spec (node:util parseArgs underneath): typed values, clear
 * errors for bad input, and a --help text generated from the same spec.
 */
import { parseArgs } from 'node:util';

interface Common {
  help: string;
  /** Shown in --help after the flag, e.g. `<url>`. */
  placeholder?: string;
}
export type OptionSpec =
  /** `min`: smallest value allowed (without it: any value > 0). */
  | (Common & { type: 'number'; default?: number; min?: number })
  | (Common & { type: 'string'; default?: string })
  | (Common & { type: 'boolean' })
  | (Common & { type: 'list'; default?: readonly string[]; choices?: readonly string[] });
export type Spec = Record<string, OptionSpec>;

type ValueOf<O extends OptionSpec> = O extends { type: 'number' }
  ? O extends { default: number }
    ? number
    : number | undefined
  : O extends { type: 'string' }
    ? O extends { default: string }
      ? string
      : string | undefined
    : O extends { type: 'boolean' }
      ? boolean
      : O extends { default: readonly string[] }
        ? string[]
        : string[] | undefined;
export type Values<S extends Spec> = { [K in keyof S]: ValueOf<S[K]> };

type More = { min?: number; placeholder?: string };
/** Spec shorthands: a number (`undefined` default: none), a string, a boolean, a list. */
export const num = <D extends number | undefined>(dflt: D, help: string, more: More = {}) =>
  ({ type: 'number', default: dflt, help, ...more }) as const;
export const str = <D extends string | undefined>(dflt: D, help: string, placeholder?: string) =>
  ({ type: 'string', default: dflt, help, placeholder }) as const;
export const flag = (help: string) => ({ type: 'boolean', help }) as const;
export const list = <D extends readonly string[] | undefined>(
  choices: readonly string[] | undefined,
  dflt: D,
  help: string,
) => ({ type: 'list', choices, default: dflt, help }) as const;

export function helpText(command: string, description: string, spec: Spec): string {
  const lines = Object.entries(spec).map(([name, o]) => {
    const value =
      o.type === 'boolean'
        ? ''
        : ` ${o.placeholder ?? (o.type === 'list' ? '<a,b,...>' : `<${o.type}>`)}`;
    const d = 'default' in o ? o.default : undefined;
    const dflt = d === undefined ? '' : ` (default ${Array.isArray(d) ? d.join(',') : String(d)})`;
    const choices = o.type === 'list' && o.choices ? ` [${o.choices.join(', ')}]` : '';
    return `  --${name}${value}\n      ${o.help}${choices}${dflt}`;
  });
  const head = [`usage: ${command} [options]`, '', description.trim(), '', 'options:'];
  return [...head, ...lines, '  --help'].join('\n');
}

export class UsageError extends Error {}

/**
 * Parses `argv` against `spec`. Numbers must be finite and >= `min` (> 0 when no `min`); lists
 * are comma-separated and checked against `choices`. Throws UsageError on bad input.
 */
export function parseOptions<S extends Spec>(
  spec: S,
  argv: string[],
): Values<S> & { help: boolean } {
  const options: Record<string, { type: 'string' | 'boolean' }> = { help: { type: 'boolean' } };
  for (const [name, o] of Object.entries(spec))
    options[name] = { type: o.type === 'boolean' ? 'boolean' : 'string' };
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const out: Record<string, unknown> = { help: values.help === true };
  for (const [name, o] of Object.entries(spec)) {
    const raw = values[name];
    if (o.type === 'boolean') out[name] = raw === true;
    else if (raw === undefined)
      out[name] = o.type === 'list' && o.default ? [...o.default] : o.default;
    else if (o.type === 'number') {
      const n = Number(raw);
      const min = o.min;
      if (raw === '' || !Number.isFinite(n) || (min === undefined ? n <= 0 : n < min))
        throw new UsageError(
          `--${name} needs a number ${min === undefined ? '> 0' : `>= ${min}`} (got "${String(raw)}")`,
        );
      out[name] = n;
    } else if (o.type === 'list') {
      const list = String(raw)
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
      const bad = o.choices ? list.filter((v) => !o.choices!.includes(v)) : [];
      if (list.length === 0 || bad.length > 0)
        throw new UsageError(`--${name}: one or more of ${(o.choices ?? ['<values>']).join(',')}`);
      out[name] = list;
    } else out[name] = String(raw);
  }
  return out as Values<S> & { help: boolean };
}

/**
 * parseOptions for an entry point: on --help prints the help and exits 0; on bad input (here or
 * in `check`) prints the error and exits 2.
 */
export function cliOptions<S extends Spec>(
  command: string,
  description: string,
  spec: S,
  argv: string[],
  check: (values: Values<S>) => void = () => undefined,
): Values<S> {
  try {
    const values = parseOptions(spec, argv);
    if (values.help) {
      process.stdout.write(`${helpText(command, description, spec)}\n`);
      process.exit(0);
    }
    check(values);
    return values;
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`${command}: ${err.message}\n(${command} -- --help lists the options)\n`);
    process.exit(2);
  }
}
