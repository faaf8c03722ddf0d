#!/usr/bin/env node
// Checks the TextMate grammar against the language itself, independently of
// the grammar's own regexes:
//
// 1. Every .rlhf file of stdlib/ and examples/, and test/*.test.rlhf here
//    except invalid.test.rlhf, is lexed and parsed by a small parser that
//    follows lang/RLHF.g4. The parser gives each token a role (declaration
//    keyword, declared name, property, parameter, built-in call, model
//    method, named argument, unit, ...), and every character of the token
//    must carry the scope of that role. No character may be left with only
//    source.rlhf and meta.* scopes, and no character of these valid programs
//    may be scoped invalid.*.
// 2. The grammar is in step with the compiler: every keyword of RLHF.g4, every
//    host function, model method and primitive of function bodies of
//    compiler/lib/Frontend/Builtins.cpp and every unit of
//    compiler/lib/Frontend/Units.cpp is scoped as such.
// 3. Self-test: the same checks run against grammars with a rule removed, and
//    must fail, so a check that can never fail is caught.
//
// Usage: node test/check-scopes.js [--repo DIR] [-v]
'use strict';
const fs = require('fs');
const path = require('path');
const { GRAMMAR_PATH, loadGrammar, scopesPerChar } = require('./textmate');

const args = process.argv.slice(2);
const verbose = args.includes('-v');
const repoArg = args.indexOf('--repo');
const REPO = path.resolve(repoArg >= 0 ? args[repoArg + 1] : path.join(__dirname, '..', '..', '..'));

// The keywords this checker (and the grammar) know. RLHF.g4 must declare
// exactly these; a new keyword needs a grammar rule and a role below.
const KEYWORDS = ['import', 'hardware', 'arch', 'cluster', 'model', 'dataset', 'algorithm', 'run', 'fn', 'let', 'return',
  'true', 'false'];
const ENTITY_KINDS = ['hardware', 'arch', 'cluster', 'model', 'dataset'];
const OPTIMIZERS = ['adam', 'adamw']; // Sema.cpp: a model's optimizer = adam(...) | adamw(...)
// The outputs of the trained model in a loss: model.logprobs(seq) (lang/README.md, 6.4).
const MODEL_OUTPUTS = ['logprobs', 'values', 'score', 'entropy'];

// ---------------------------------------------------------------- compiler
function read(rel) {
  return fs.readFileSync(path.join(REPO, rel), 'utf8');
}
function g4Keywords() {
  const out = [];
  for (const m of read('lang/RLHF.g4').matchAll(/^([A-Z_]+)\s*:\s*'([a-z]+)'\s*;/gm)) out.push(m[2]);
  return out;
}
function compilerBuiltins() {
  const src = read('compiler/lib/Frontend/Builtins.cpp');
  // An entry is `{"name",` then (methods) its Node::Kind, maybe on the next line.
  const methods = [...src.matchAll(/\{"(\w+)",\s*Node::Kind::/g)].map((m) => m[1]);
  const functions = [...src.matchAll(/^\s*\{"(\w+)",\s*$/gm)]
    .map((m) => m[1])
    .filter((n) => !methods.includes(n));
  const table = /kFnPrimitives\[\] = \{([\s\S]*?)\n\};/.exec(src);
  const primitives = table ? [...table[1].matchAll(/\{"(\w+)",/g)].map((m) => m[1]) : [];
  return { functions, methods, primitives };
}
function compilerUnits() {
  return [...read('compiler/lib/Frontend/Units.cpp').matchAll(/\{"(\w+)", [^,]+, UnitDim::/g)].map((m) => m[1]);
}

// ---------------------------------------------------------------- lexer
// Token rules of RLHF.g4, in the lexer's order of preference.
const LEX = [
  ['ws', /[ \t\r\n\f]+/y],
  ['line-comment', /\/\/[^\r\n]*/y],
  ['block-comment', /\/\*[\s\S]*?\*\//y],
  ['string', /"(?:[^"\\\r\n]|\\[^\r\n])*"/y],
  ['number', /[0-9](?:_?[0-9])*(?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9](?:_?[0-9])*)?[a-zA-Z]*/y],
  ['ident', /[a-zA-Z_][a-zA-Z_0-9]*/y],
  ['op', /->|<=|>=|==|!=/y], // RLHF.g4's literal tokens of two characters
];

function lex(text, file) {
  const toks = [];
  let pos = 0;
  while (pos < text.length) {
    let tok = null;
    for (const [type, re] of LEX) {
      re.lastIndex = pos;
      const m = re.exec(text);
      if (m) {
        tok = { type, text: m[0], start: pos };
        break;
      }
    }
    if (!tok) tok = { type: 'punct', text: text[pos], start: pos };
    if (tok.type === 'ident' && KEYWORDS.includes(tok.text)) tok.type = tok.text;
    if (tok.type !== 'ws') toks.push(tok);
    pos += tok.text.length;
  }
  toks.file = file;
  return toks;
}

// ---------------------------------------------------------------- parser
// Follows the parser rules of RLHF.g4 and records the expected scope of each
// token in tok.role.
class Parser {
  constructor(toks, text) {
    this.all = toks;
    this.toks = toks.filter((t) => t.type !== 'line-comment' && t.type !== 'block-comment');
    this.text = text;
    this.i = 0;
    this.inFn = false; // in the body of a function: primitives and model outputs
    for (const t of toks) {
      if (t.type === 'line-comment') t.role = 'comment.line.double-slash.rlhf';
      if (t.type === 'block-comment') t.role = 'comment.block.rlhf';
    }
  }
  peek(k = 0) {
    return this.toks[this.i + k] || { type: 'eof', text: '<eof>', start: this.text.length };
  }
  is(text, k = 0) {
    const t = this.peek(k);
    return t.type === text || ((t.type === 'punct' || t.type === 'op') && t.text === text);
  }
  fail(msg) {
    const t = this.peek();
    const before = this.text.slice(0, t.start);
    const line = before.split('\n').length;
    const col = t.start - before.lastIndexOf('\n');
    throw new Error(`${this.all.file}:${line}:${col}: checker's parser: ${msg} at '${t.text}'`);
  }
  take(text, role) {
    if (!this.is(text)) this.fail(`expected '${text}'`);
    const t = this.toks[this.i++];
    t.role = role;
    return t;
  }
  ident(role, alsoKeywords = []) {
    const t = this.peek();
    if (t.type !== 'ident' && !alsoKeywords.includes(t.type)) this.fail('expected a name');
    this.i++;
    t.role = role;
    return t;
  }

  program() {
    while (!this.is('eof')) this.decl();
  }
  decl() {
    const t = this.peek();
    if (t.type === 'import') {
      this.take('import', 'keyword.control.import.rlhf');
      this.string();
      this.take(';', 'punctuation.terminator.rlhf');
    } else if (ENTITY_KINDS.includes(t.type)) {
      this.take(t.type, `storage.type.${t.type}.rlhf`);
      this.ident(`entity.name.type.${t.type}.rlhf`);
      if (this.is(':')) {
        this.take(':', 'punctuation.separator.inheritance.rlhf');
        this.ident('entity.other.inherited-class.rlhf');
        if (this.is('(')) { // : hf("dir")
          this.take('(', 'punctuation.section.parens.begin.rlhf');
          this.string();
          this.take(')', 'punctuation.section.parens.end.rlhf');
        }
      }
      this.block();
    } else if (t.type === 'algorithm') {
      this.take('algorithm', 'storage.type.algorithm.rlhf');
      this.ident('entity.name.function.algorithm.rlhf');
      this.take('(', 'punctuation.section.parens.begin.rlhf');
      while (!this.is(')')) {
        this.ident('variable.parameter.rlhf');
        this.take(':', 'punctuation.separator.type.rlhf');
        this.ident('support.type.rlhf', ['model', 'dataset']);
        if (!this.is(')')) this.take(',', 'punctuation.separator.comma.rlhf');
      }
      this.take(')', 'punctuation.section.parens.end.rlhf');
      this.take('{', 'punctuation.section.block.begin.rlhf');
      while (!this.is('}')) this.stmt();
      this.take('}', 'punctuation.section.block.end.rlhf');
    } else if (t.type === 'fn') {
      this.fnDecl();
    } else if (t.type === 'run') {
      this.take('run', 'keyword.other.run.rlhf');
      this.ident('entity.name.function.rlhf');
      this.args();
      this.block();
    } else {
      this.fail('expected a declaration');
    }
  }
  // fnDecl: FN name '(' fnParam, ... ')' '->' fnResults '{' fnStmt* '}'
  fnDecl() {
    this.take('fn', 'storage.type.function.rlhf');
    this.ident('entity.name.function.fn.rlhf');
    this.take('(', 'punctuation.section.parens.begin.rlhf');
    while (!this.is(')')) {
      this.ident('variable.parameter.rlhf');
      this.fnType();
      if (this.is('=')) {
        this.take('=', 'keyword.operator.assignment.rlhf');
        this.expr();
      }
      if (!this.is(')')) this.take(',', 'punctuation.separator.comma.rlhf');
    }
    this.take(')', 'punctuation.section.parens.end.rlhf');
    this.take('->', 'keyword.operator.arrow.rlhf');
    if (this.is('(')) {
      this.take('(', 'punctuation.section.parens.begin.rlhf');
      while (!this.is(')')) {
        this.ident('variable.other.result.rlhf');
        this.fnType();
        if (!this.is(')')) this.take(',', 'punctuation.separator.comma.rlhf');
      }
      this.take(')', 'punctuation.section.parens.end.rlhf');
    } else {
      this.kind();
    }
    this.take('{', 'punctuation.section.block.begin.rlhf');
    this.inFn = true;
    while (!this.is('}')) {
      if (this.is('let')) {
        this.take('let', 'storage.type.let.rlhf');
        this.ident('variable.other.definition.rlhf');
        this.take('=', 'keyword.operator.assignment.rlhf');
        this.expr();
      } else {
        this.take('return', 'keyword.control.return.rlhf');
        this.expr();
        while (this.is(',')) {
          this.take(',', 'punctuation.separator.comma.rlhf');
          this.expr();
        }
      }
      this.take(';', 'punctuation.terminator.rlhf');
    }
    this.inFn = false;
    this.take('}', 'punctuation.section.block.end.rlhf');
  }
  // ':' fnType
  fnType() {
    this.take(':', 'punctuation.separator.type.rlhf');
    this.kind();
  }
  // fnType: kind=IDENT ('[' dims+=IDENT (',' dims+=IDENT)* ']')?
  kind() {
    this.ident('support.type.rlhf');
    if (!this.is('[')) return;
    this.take('[', 'punctuation.section.brackets.begin.rlhf');
    this.ident('entity.name.type.dimension.rlhf');
    while (this.is(',')) {
      this.take(',', 'punctuation.separator.comma.rlhf');
      this.ident('entity.name.type.dimension.rlhf');
    }
    this.take(']', 'punctuation.section.brackets.end.rlhf');
  }
  string() {
    const t = this.peek();
    if (t.type !== 'string') this.fail('expected a string');
    this.i++;
    t.role = 'string.quoted.double.rlhf';
  }
  block() {
    this.take('{', 'punctuation.section.block.begin.rlhf');
    while (!this.is('}')) {
      this.ident('variable.other.property.rlhf', ENTITY_KINDS);
      if (this.is('=')) {
        this.take('=', 'keyword.operator.assignment.rlhf');
        this.expr();
      }
      this.take(';', 'punctuation.terminator.rlhf');
    }
    this.take('}', 'punctuation.section.block.end.rlhf');
  }
  stmt() {
    while (this.is('@')) {
      this.take('@', 'punctuation.definition.annotation.rlhf');
      this.ident('storage.type.annotation.rlhf');
      if (this.is('(')) this.args();
    }
    if (this.peek().type === 'ident' && this.is('=', 1)) {
      this.ident('variable.other.definition.rlhf');
      this.take('=', 'keyword.operator.assignment.rlhf');
    }
    this.expr();
    this.take(';', 'punctuation.terminator.rlhf');
  }
  // '(' argList? ')'
  args() {
    this.take('(', 'punctuation.section.parens.begin.rlhf');
    while (!this.is(')')) {
      if (this.peek().type === 'ident' && this.is('=', 1)) {
        this.ident('variable.parameter.named.rlhf');
        this.take('=', 'keyword.operator.assignment.rlhf');
      }
      this.expr();
      if (!this.is(')')) this.take(',', 'punctuation.separator.comma.rlhf');
    }
    this.take(')', 'punctuation.section.parens.end.rlhf');
  }
  // expr with the precedence of RLHF.g4: postfix, unary minus, * /, + -,
  // comparisons.
  expr() {
    this.add();
    while (['<', '<=', '>', '>=', '==', '!='].some((op) => this.is(op))) {
      this.take(this.peek().text, 'keyword.operator.comparison.rlhf');
      this.add();
    }
  }
  add() {
    this.mul();
    while (this.is('+') || this.is('-')) {
      this.take(this.peek().text, 'keyword.operator.arithmetic.rlhf');
      this.mul();
    }
  }
  mul() {
    this.unary();
    while (this.is('*') || this.is('/')) {
      this.take(this.peek().text, 'keyword.operator.arithmetic.rlhf');
      this.unary();
    }
  }
  unary() {
    if (this.is('-')) {
      this.take('-', 'keyword.operator.arithmetic.rlhf');
      this.unary();
    } else {
      this.postfix();
    }
  }
  postfix() {
    let callee = this.primary(); // a name token that a '(' would call
    let member = false;
    let receiver = null; // the token before '.'
    for (;;) {
      if (this.is('.')) {
        this.take('.', 'punctuation.accessor.rlhf');
        receiver = callee;
        callee = this.ident('variable.other.member.rlhf');
        member = true;
      } else if (this.is('(')) {
        if (callee) {
          callee.role = this.inFn
            ? fnCalleeRole(callee.text, member, receiver && receiver.type === 'model')
            : calleeRole(callee.text, member);
        }
        this.args();
        callee = null;
      } else if (this.is('[')) {
        this.take('[', 'punctuation.section.brackets.begin.rlhf');
        this.expr();
        this.take(':', 'punctuation.separator.slice.rlhf');
        this.expr();
        this.take(']', 'punctuation.section.brackets.end.rlhf');
        callee = null;
      } else {
        return;
      }
    }
  }
  primary() {
    const t = this.peek();
    if (t.type === 'number') {
      this.i++;
      t.role = 'number';
    } else if (t.type === 'string') {
      this.string();
    } else if (t.type === 'true' || t.type === 'false') {
      this.i++;
      t.role = `constant.language.boolean.${t.type}.rlhf`;
    } else if (t.type === 'ident') {
      this.i++;
      t.role = 'variable.other.rlhf';
      return t;
    } else if (t.type === 'model') {
      // RLHF.g4 nameRef: the model a loss trains, inside a function.
      this.i++;
      t.role = this.inFn ? 'variable.language.model.rlhf' : 'keyword.other.reserved.rlhf';
      return t;
    } else if (this.is('(')) {
      this.take('(', 'punctuation.section.parens.begin.rlhf');
      this.expr();
      this.take(')', 'punctuation.section.parens.end.rlhf');
    } else if (this.is('[')) {
      this.take('[', 'punctuation.section.brackets.begin.rlhf');
      while (!this.is(']')) {
        this.expr();
        if (!this.is(']')) this.take(',', 'punctuation.separator.comma.rlhf');
      }
      this.take(']', 'punctuation.section.brackets.end.rlhf');
    } else {
      this.fail('expected an expression');
    }
    return null;
  }
}

let BUILTIN_FUNCTIONS = [];
let BUILTIN_METHODS = [];
let PRIMITIVES = [];
function calleeRole(name, member) {
  if (member) return BUILTIN_METHODS.includes(name) ? 'support.function.method.rlhf' : 'entity.name.function.member.rlhf';
  if (BUILTIN_FUNCTIONS.includes(name)) return 'support.function.builtin.rlhf';
  if (OPTIMIZERS.includes(name)) return 'support.function.optimizer.rlhf';
  return 'entity.name.function.call.rlhf';
}
// In a function body: primitives, not host functions (a function of the
// stdlib may have a host function's name), and model outputs.
function fnCalleeRole(name, member, ofModel) {
  if (member) {
    return ofModel && MODEL_OUTPUTS.includes(name) ? 'support.function.model-output.rlhf' : calleeRole(name, member);
  }
  if (PRIMITIVES.includes(name)) return 'support.function.primitive.rlhf';
  return 'entity.name.function.call.rlhf';
}

// ---------------------------------------------------------------- checks
const KNOWN_UNITS = new Set();

function has(scopes, want) {
  return scopes.some((s) => s === want || s.startsWith(want + '.'));
}
function where(text, file, offset) {
  const before = text.slice(0, offset);
  return `${file}:${before.split('\n').length}:${offset - before.lastIndexOf('\n')}`;
}

// Returns the list of failures for one source text.
function checkText(grammar, text, file) {
  const failures = [];
  const stats = {};
  const toks = lex(text, file);
  new Parser(toks, text).program();
  const scopes = scopesPerChar(grammar, text);
  const fail = (offset, msg) =>
    failures.push(`${where(text, file, offset)}: ${msg}; scopes: ${(scopes[offset] || []).join(' ')}`);

  for (const t of toks) {
    if (!t.role) {
      fail(t.start, `'${t.text}' was not reached by the checker's parser`);
      continue;
    }
    // The parts of the token and the scope each part needs.
    const parts = [];
    if (t.role === 'number') {
      const num = /^[0-9](?:_?[0-9])*(?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9](?:_?[0-9])*)?/.exec(t.text)[0];
      const unit = t.text.slice(num.length);
      const kind = /[.eE]/.test(num) ? 'float' : 'integer';
      parts.push([0, t.text.length, `constant.numeric.${kind}.rlhf`]);
      if (unit) {
        parts.push([num.length, t.text.length, KNOWN_UNITS.has(unit) ? 'keyword.other.unit.rlhf' : 'invalid.illegal.unit.rlhf']);
      }
    } else {
      parts.push([0, t.text.length, t.role]);
      if (t.role.startsWith('string.')) {
        for (const m of t.text.matchAll(/\\[^\r\n]/g)) parts.push([m.index, m.index + 2, 'constant.character.escape.rlhf']);
      }
    }
    for (const [from, to, want] of parts) {
      stats[want] = (stats[want] || 0) + 1;
      for (let k = t.start + from; k < t.start + to; k++) {
        if (text[k] === '\n' || text[k] === '\r') continue;
        if (!has(scopes[k], want)) {
          fail(k, `'${t.text}' needs ${want}`);
          break;
        }
      }
    }
  }
  for (let k = 0; k < text.length; k++) {
    if (/\s/.test(text[k])) continue;
    const s = scopes[k] || [];
    if (!s.some((x) => x !== 'source.rlhf' && !x.startsWith('meta.'))) fail(k, `'${text[k]}' is unscoped`);
    if (s.some((x) => x.startsWith('invalid.'))) fail(k, `'${text[k]}' is scoped invalid in a valid program`);
  }
  return { failures, stats };
}

function rlhfFiles(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.rlhf')) out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

// Snippets that put each compiler name where the grammar must recognise it.
function syncSnippets() {
  const snippets = [];
  for (const f of BUILTIN_FUNCTIONS) snippets.push([`host function ${f}`, `algorithm a(m: model) {\n  r = ${f}(m.x, k = 1);\n}\n`]);
  for (const m of BUILTIN_METHODS) snippets.push([`model method ${m}`, `algorithm a(m: model) {\n  m.${m}(m.x);\n}\n`]);
  for (const p of PRIMITIVES) {
    snippets.push([`primitive ${p}`, `fn f(x: score[N], n: int = 2) -> score[N] {\n  let y = ${p}(x, n) >= 0;\n  return y;\n}\n`]);
  }
  for (const o of MODEL_OUTPUTS) {
    snippets.push([`model output ${o}`,
      `fn l(s: tokens[N, S]) -> loss {\n  return token_mean(model.${o}(s), mask_of(s));\n}\n`]);
  }
  snippets.push(['function with named results', 'fn g(a: number[N, S], b: int) -> (x: advantages[N, S], y: returns[N, S]) {\n' +
    '  return where(a != b, a, -a), clamp(a, lo = 0, hi = b);\n}\n']);
  for (const u of KNOWN_UNITS) snippets.push([`unit ${u}`, `hardware h { x = 1${u}; y = 2.5${u}; z = 1e3${u}; }\n`]);
  for (const k of ENTITY_KINDS) snippets.push([`keyword ${k}`, `${k} n : b { ${k} = x; }\n`]);
  snippets.push(['keywords true false', `model m { trainable = true; frozen = false; }\n`]);
  return snippets;
}

async function runAll(grammar, { quiet } = {}) {
  const failures = [];
  const totals = {};
  const files = [
    ...rlhfFiles(path.join(REPO, 'stdlib')),
    ...rlhfFiles(path.join(REPO, 'examples')),
    // invalid.test.rlhf holds what RLHF.g4 rejects; only the tmgrammar test reads it.
    ...fs.readdirSync(__dirname).filter((f) => f.endsWith('.rlhf') && !f.startsWith('invalid.'))
      .sort().map((f) => path.join(__dirname, f)),
  ];
  if (files.length < 10) failures.push(`only ${files.length} .rlhf files found under ${REPO}`);
  const inputs = files.map((f) => [path.relative(REPO, f), fs.readFileSync(f, 'utf8')]);
  inputs.push(...syncSnippets().map(([name, text]) => [`<${name}>`, text]));
  for (const [name, text] of inputs) {
    let r;
    try {
      r = checkText(grammar, text, name);
    } catch (e) {
      failures.push(e.message);
      continue;
    }
    failures.push(...r.failures);
    for (const [k, v] of Object.entries(r.stats)) totals[k] = (totals[k] || 0) + v;
    if (verbose && !quiet) console.log(`  ${name}: ${r.failures.length ? 'FAIL' : 'ok'}`);
  }
  return { failures, totals, files: files.length, snippets: inputs.length - files.length };
}

// Grammars with one rule taken out; each must make runAll fail.
function mutants(raw) {
  const clone = () => JSON.parse(JSON.stringify(raw));
  const out = [];
  const drop = (label, edit) => {
    const g = clone();
    edit(g.repository);
    out.push([label, g]);
  };
  drop('no numbers', (r) => (r.numbers.patterns = []));
  drop('no unit captures', (r) => r.numbers.patterns.forEach((p) => delete p.captures));
  drop('no built-in functions', (r) => r.calls.patterns.shift());
  drop('no model methods', (r) => r.member.patterns.shift());
  drop('no named arguments', (r) => r.arguments.patterns.splice(1, 1));
  drop('no property names', (r) => (r.property.beginCaptures = {}));
  drop('no declaration names', (r) => delete r['entity-declaration'].beginCaptures['2']);
  drop('no annotation', (r) => (r.annotation.captures = {}));
  drop('no escapes', (r) => (r.strings.patterns[0].patterns = []));
  drop('no block comments', (r) => r.comments.patterns.shift());
  drop('no variables', (r) => r.expression.patterns.splice(-2, 1));
  drop('no fn keyword', (r) => delete r['fn-declaration'].beginCaptures['1']);
  drop('no let', (r) => r['fn-body'].patterns.splice(1, 1));
  drop('no primitives', (r) => (r['fn-expression'].patterns = r['fn-expression'].patterns.filter(
    (p) => !(p.name || '').startsWith('support.function.primitive'))));
  drop('no model outputs', (r) => r['fn-expression'].patterns.splice(4, 1));
  drop('no comparisons', (r) => r.operators.patterns.shift());
  drop('no shapes', (r) => (r['fn-shape'].patterns = []));
  return out;
}

async function main() {
  const problems = [];
  const g4 = g4Keywords();
  if (g4.join(' ') !== KEYWORDS.join(' ')) {
    problems.push(`lang/RLHF.g4 keywords are [${g4.join(' ')}], this checker knows [${KEYWORDS.join(' ')}]: ` +
      'update syntaxes/rlhf.tmLanguage.json and test/check-scopes.js');
  }
  ({ functions: BUILTIN_FUNCTIONS, methods: BUILTIN_METHODS, primitives: PRIMITIVES } = compilerBuiltins());
  // Builtins.cpp now declares only the host functions exact_match and
  // script_reward (the estimators and losses are stdlib functions of the
  // prelude); fewer than two, or no exact_match, means the table moved.
  if (BUILTIN_FUNCTIONS.length < 2 || !BUILTIN_FUNCTIONS.includes('exact_match') ||
      BUILTIN_METHODS.length < 3 || PRIMITIVES.length < 10) {
    problems.push(`could not read the built-ins from compiler/lib/Frontend/Builtins.cpp ` +
      `(found functions [${BUILTIN_FUNCTIONS}], methods [${BUILTIN_METHODS}], primitives [${PRIMITIVES}]); ` +
      'update compilerBuiltins()');
  }
  const units = compilerUnits();
  if (units.length < 10) problems.push(`could not read the units from compiler/lib/Frontend/Units.cpp (found [${units}])`);
  units.forEach((u) => KNOWN_UNITS.add(u));

  const raw = JSON.parse(fs.readFileSync(GRAMMAR_PATH, 'utf8'));
  const grammar = await loadGrammar(raw);
  const r = await runAll(grammar);
  problems.push(...r.failures);

  let killed = 0;
  const ms = mutants(raw);
  for (const [label, g] of ms) {
    const m = await runAll(await loadGrammar(g), { quiet: true });
    if (m.failures.length) killed++;
    else problems.push(`self-test: the checks still pass with a broken grammar (${label})`);
  }

  const roles = Object.values(r.totals).reduce((a, b) => a + b, 0);
  for (const p of problems) console.log(`FAIL: ${p}`);
  if (verbose) for (const [k, v] of Object.entries(r.totals).sort()) console.log(`  ${String(v).padStart(5)}  ${k}`);
  console.log(`check-scopes: ${r.files} files and ${r.snippets} snippets, ${roles} token scopes checked ` +
    `(${Object.keys(r.totals).length} kinds); ${killed}/${ms.length} broken grammars caught; ` +
    `${problems.length ? problems.length + ' FAILURES' : 'all passed'}`);
  process.exit(problems.length ? 1 : 0);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
