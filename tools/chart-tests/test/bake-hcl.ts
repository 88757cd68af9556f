// A narrow reader of docker-bake.hcl: the subset of HCL that file uses (blocks with string labels,
// attributes whose values are strings with ${VAR} interpolation, numbers, booleans, lists, objects,
// variable references and function calls), and bake's evaluation of it (variable defaults or the
// environment, `inherits`, args/labels merged). Anything outside that subset is an error, never a
// silent misreading: a bake file that grows past it fails the chart tests until the reader grows too.

/** A value of the file before evaluation. */
export type HclExpr =
  | { kind: 'string'; parts: Array<string | { ref: string }> }
  | { kind: 'literal'; value: number | boolean | null }
  | { kind: 'list'; items: HclExpr[] }
  | { kind: 'object'; entries: Array<[string, HclExpr]> }
  | { kind: 'ref'; name: string }
  | { kind: 'call'; fn: string; args: HclExpr[] };

/** A block: `type "label" ... { body }`. */
export interface HclBlock {
  type: string;
  labels: string[];
  body: HclBody;
}

/** A body: its attributes (each once) and its blocks in order. */
export interface HclBody {
  attributes: Map<string, HclExpr>;
  blocks: HclBlock[];
}

type Token =
  | { t: 'ident'; v: string; line: number }
  | { t: 'string'; v: HclExpr & { kind: 'string' }; line: number }
  | { t: 'number'; v: number; line: number }
  | { t: 'punct'; v: string; line: number }
  | { t: 'nl'; line: number };

/** Raised for anything the reader does not understand, with the line. */
export class HclError extends Error {}

function stringParts(raw: string, line: number): Array<string | { ref: string }> {
  const parts: Array<string | { ref: string }> = [];
  let text = '';
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === '\\') {
      const n = raw[++i];
      const esc: Record<string, string> = { n: '\n', t: '\t', '"': '"', '\\': '\\' };
      if (n === undefined || !(n in esc)) throw new HclError(`line ${line}: unsupported escape \\${n}`);
      text += esc[n];
    } else if (c === '$' && raw[i + 1] === '$' && raw[i + 2] === '{') {
      text += '${';
      i += 2;
    } else if (c === '$' && raw[i + 1] === '{') {
      const end = raw.indexOf('}', i);
      const ref = raw.slice(i + 2, end).trim();
      if (end < 0 || !/^[A-Za-z_][A-Za-z0-9_-]*$/.test(ref)) {
        throw new HclError(`line ${line}: only \${VARIABLE} interpolation is supported`);
      }
      if (text) parts.push(text);
      text = '';
      parts.push({ ref });
      i = end;
    } else if (c === '%' && raw[i + 1] === '{') {
      throw new HclError(`line ${line}: template directives are not supported`);
    } else {
      text += c;
    }
  }
  if (text || parts.length === 0) parts.push(text);
  return parts;
}

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let line = 1;
  for (let i = 0; i < src.length; ) {
    const c = src[i]!;
    if (c === '\n') {
      tokens.push({ t: 'nl', line });
      line++;
      i++;
    } else if (c === ' ' || c === '\t' || c === '\r') {
      i++;
    } else if (c === '#' || (c === '/' && src[i + 1] === '/')) {
      while (i < src.length && src[i] !== '\n') i++;
    } else if (c === '/' && src[i + 1] === '*') {
      const end = src.indexOf('*/', i + 2);
      if (end < 0) throw new HclError(`line ${line}: unterminated comment`);
      line += src.slice(i, end).split('\n').length - 1;
      i = end + 2;
    } else if (c === '"') {
      let j = i + 1;
      while (j < src.length && src[j] !== '"') {
        if (src[j] === '\n') throw new HclError(`line ${line}: unterminated string`);
        j += src[j] === '\\' ? 2 : 1;
      }
      if (j >= src.length) throw new HclError(`line ${line}: unterminated string`);
      tokens.push({
        t: 'string',
        v: { kind: 'string', parts: stringParts(src.slice(i + 1, j), line) },
        line,
      });
      i = j + 1;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_-]*/.exec(src.slice(i))!;
      tokens.push({ t: 'ident', v: m[0], line });
      i += m[0].length;
    } else if (/[0-9]/.test(c)) {
      const m = /^[0-9]+(\.[0-9]+)?/.exec(src.slice(i))!;
      tokens.push({ t: 'number', v: Number(m[0]), line });
      i += m[0].length;
    } else if ('{}[]=,()'.includes(c)) {
      tokens.push({ t: 'punct', v: c, line });
      i++;
    } else if (c === '<' && src[i + 1] === '<') {
      throw new HclError(`line ${line}: heredocs are not supported`);
    } else {
      throw new HclError(`line ${line}: unexpected character '${c}'`);
    }
  }
  return tokens;
}

/** Parses the subset of HCL described above into blocks and attributes. */
export function parseHcl(src: string): HclBody {
  const tokens = tokenize(src);
  let pos = 0;
  const peek = () => tokens[pos];
  const lineOf = () => peek()?.line ?? 'end';
  const skipNl = () => {
    while (peek()?.t === 'nl') pos++;
  };
  const expectPunct = (v: string) => {
    const tok = peek();
    if (tok?.t !== 'punct' || tok.v !== v) throw new HclError(`line ${lineOf()}: expected '${v}'`);
    pos++;
  };

  function expr(): HclExpr {
    skipNl();
    const tok = peek();
    if (!tok) throw new HclError('unexpected end of file');
    pos++;
    if (tok.t === 'string') return tok.v;
    if (tok.t === 'number') return { kind: 'literal', value: tok.v };
    if (tok.t === 'ident') {
      if (tok.v === 'true' || tok.v === 'false') return { kind: 'literal', value: tok.v === 'true' };
      if (tok.v === 'null') return { kind: 'literal', value: null };
      const next = peek();
      if (next?.t === 'punct' && next.v === '(') {
        pos++;
        return { kind: 'call', fn: tok.v, args: sequence(')') };
      }
      return { kind: 'ref', name: tok.v };
    }
    if (tok.t === 'punct' && tok.v === '[') return { kind: 'list', items: sequence(']') };
    if (tok.t === 'punct' && tok.v === '{') {
      const entries: Array<[string, HclExpr]> = [];
      for (;;) {
        skipNl();
        const k = peek();
        if (k?.t === 'punct' && k.v === '}') {
          pos++;
          return { kind: 'object', entries };
        }
        pos++;
        let key: string;
        if (k?.t === 'ident') key = k.v;
        else if (k?.t === 'string' && k.v.parts.length === 1 && typeof k.v.parts[0] === 'string') {
          key = k.v.parts[0];
        } else throw new HclError(`line ${k?.line ?? 'end'}: expected an object key`);
        skipNl();
        expectPunct('=');
        entries.push([key, expr()]);
        skipNl();
        const sep = peek();
        if (sep?.t === 'punct' && sep.v === ',') pos++;
      }
    }
    throw new HclError(`line ${tok.line}: unexpected ${tok.t === 'punct' ? `'${tok.v}'` : tok.t}`);
  }

  // Comma-separated expressions up to `close` (a trailing comma allowed).
  function sequence(close: string): HclExpr[] {
    const items: HclExpr[] = [];
    for (;;) {
      skipNl();
      const tok = peek();
      if (tok?.t === 'punct' && tok.v === close) {
        pos++;
        return items;
      }
      items.push(expr());
      skipNl();
      const sep = peek();
      if (sep?.t === 'punct' && sep.v === ',') pos++;
      else if (!(sep?.t === 'punct' && sep.v === close)) {
        throw new HclError(`line ${lineOf()}: expected ',' or '${close}'`);
      }
    }
  }

  function body(nested: boolean): HclBody {
    const out: HclBody = { attributes: new Map(), blocks: [] };
    for (;;) {
      skipNl();
      const tok = peek();
      if (!tok) {
        if (nested) throw new HclError('unexpected end of file: missing }');
        return out;
      }
      if (tok.t === 'punct' && tok.v === '}' && nested) {
        pos++;
        return out;
      }
      if (tok.t !== 'ident') throw new HclError(`line ${tok.line}: expected an attribute or a block`);
      pos++;
      const next = peek();
      if (next?.t === 'punct' && next.v === '=') {
        pos++;
        if (out.attributes.has(tok.v)) throw new HclError(`line ${tok.line}: ${tok.v} is set twice`);
        out.attributes.set(tok.v, expr());
        const end = peek();
        if (end && end.t !== 'nl' && !(end.t === 'punct' && end.v === '}')) {
          throw new HclError(`line ${end.line}: expected a new line after ${tok.v}`);
        }
        continue;
      }
      const labels: string[] = [];
      while (peek()?.t === 'string') {
        const s = (peek() as { v: HclExpr & { kind: 'string' } }).v;
        if (s.parts.length !== 1 || typeof s.parts[0] !== 'string') {
          throw new HclError(`line ${tok.line}: a block label cannot interpolate`);
        }
        labels.push(s.parts[0]);
        pos++;
      }
      expectPunct('{');
      out.blocks.push({ type: tok.v, labels, body: body(true) });
    }
  }

  return body(false);
}

/** A target after bake's evaluation: the fields the tests read. */
export interface BakeTarget {
  name: string;
  context?: string;
  dockerfile?: string;
  target?: string;
  args: Record<string, string>;
  labels: Record<string, string>;
  tags: string[];
  platforms: string[];
  attest: string[];
  output: string[];
}

/** The evaluated bake file: variable values, groups and targets. */
export interface BakeFile {
  variables: Record<string, string>;
  groups: Record<string, string[]>;
  targets: Record<string, BakeTarget>;
}

/**
 * Evaluates a bake file as `docker buildx bake` would for the fields above: a variable is its
 * environment value when `env` has it, else its default; strings interpolate variables; `split`
 * is the one function supported; a target's `inherits` are applied first, maps merged key by key.
 */
export function evaluateBake(src: string, env: Record<string, string | undefined> = {}): BakeFile {
  const root = parseHcl(src);
  if (root.attributes.size > 0) throw new HclError('top-level attributes are not supported');
  const variables: Record<string, string> = {};
  for (const b of root.blocks.filter((x) => x.type === 'variable')) {
    const [name] = b.labels;
    const def = b.body.attributes.get('default');
    const fromEnv = env[name!];
    variables[name!] = fromEnv ?? (def ? asString(evaluate(def, {})) : '');
  }
  const value = (e: HclExpr) => evaluate(e, variables);
  const groups: Record<string, string[]> = {};
  const raw = new Map<string, HclBlock>();
  for (const b of root.blocks) {
    if (b.labels.length !== 1) throw new HclError(`${b.type} needs exactly one label`);
    const name = b.labels[0]!;
    if (b.type === 'group') groups[name] = asStrings(value(b.body.attributes.get('targets')!));
    else if (b.type === 'target') {
      if (raw.has(name)) throw new HclError(`target ${name} is defined twice`);
      raw.set(name, b);
    } else if (b.type !== 'variable') throw new HclError(`unsupported block ${b.type}`);
  }
  const resolved = new Map<string, BakeTarget>();
  const resolve = (name: string, seen: string[] = []): BakeTarget => {
    const done = resolved.get(name);
    if (done) return done;
    if (seen.includes(name)) throw new HclError(`inherits cycle through ${name}`);
    const block = raw.get(name);
    if (!block) throw new HclError(`no target ${name}`);
    const attrs = block.body.attributes;
    const base: BakeTarget = {
      name,
      args: {},
      labels: {},
      tags: [],
      platforms: [],
      attest: [],
      output: [],
    };
    const inherits = attrs.get('inherits');
    for (const parent of inherits ? asStrings(value(inherits)) : []) {
      const p = resolve(parent, [...seen, name]);
      Object.assign(base, {
        ...p,
        name,
        args: { ...base.args, ...p.args },
        labels: { ...base.labels, ...p.labels },
      });
    }
    for (const [key, e] of attrs) {
      const v = value(e);
      switch (key) {
        case 'inherits':
          break;
        case 'context':
        case 'dockerfile':
        case 'target':
          base[key] = asString(v);
          break;
        case 'args':
        case 'labels':
          base[key] = { ...base[key], ...asMap(v) };
          break;
        case 'tags':
        case 'platforms':
        case 'attest':
        case 'output':
          base[key] = asStrings(v);
          break;
        default:
          throw new HclError(`target ${name}: attribute ${key} is not read by this reader`);
      }
    }
    resolved.set(name, base);
    return base;
  };
  const targets: Record<string, BakeTarget> = {};
  for (const name of raw.keys()) targets[name] = resolve(name);
  return { variables, groups, targets };
}

type Value = string | number | boolean | null | Value[] | { [k: string]: Value };

function evaluate(e: HclExpr, vars: Record<string, string>): Value {
  const lookup = (name: string) => {
    if (!(name in vars)) throw new HclError(`unknown variable ${name}`);
    return vars[name]!;
  };
  switch (e.kind) {
    case 'string':
      return e.parts.map((p) => (typeof p === 'string' ? p : lookup(p.ref))).join('');
    case 'literal':
      return e.value;
    case 'list':
      return e.items.map((i) => evaluate(i, vars));
    case 'object':
      return Object.fromEntries(e.entries.map(([k, v]) => [k, evaluate(v, vars)]));
    case 'ref':
      return lookup(e.name);
    case 'call': {
      if (e.fn !== 'split' || e.args.length !== 2) throw new HclError(`function ${e.fn} is not supported`);
      const [sep, s] = e.args.map((a) => asString(evaluate(a, vars)));
      return s!.split(sep!);
    }
  }
}

function asString(v: Value): string {
  if (typeof v !== 'string') throw new HclError(`expected a string, got ${JSON.stringify(v)}`);
  return v;
}

function asStrings(v: Value): string[] {
  if (!Array.isArray(v)) throw new HclError(`expected a list, got ${JSON.stringify(v)}`);
  return v.map(asString);
}

function asMap(v: Value): Record<string, string> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new HclError(`expected an object, got ${JSON.stringify(v)}`);
  }
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, asString(x)]));
}
