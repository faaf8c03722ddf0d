// Loads syntaxes/rlhf.tmLanguage.json into vscode-textmate (with the
// Oniguruma WebAssembly build, as VS Code does) and returns, for a text, the
// scope list of every character.
'use strict';
const fs = require('fs');
const path = require('path');
const oniguruma = require('vscode-oniguruma');
const vsctm = require('vscode-textmate');

const GRAMMAR_PATH = path.join(__dirname, '..', 'syntaxes', 'rlhf.tmLanguage.json');

let onigLib;
function loadOniguruma() {
  if (!onigLib) {
    const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm'));
    onigLib = oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength))
      .then(() => ({
        createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
        createOnigString: (s) => new oniguruma.OnigString(s),
      }));
  }
  return onigLib;
}

// rawGrammar: the parsed JSON; defaults to the file on disk. Tests that
// mutate the grammar pass their own copy.
async function loadGrammar(rawGrammar) {
  const raw = rawGrammar || JSON.parse(fs.readFileSync(GRAMMAR_PATH, 'utf8'));
  const registry = new vsctm.Registry({
    onigLib: loadOniguruma(),
    loadGrammar: async (scopeName) =>
      scopeName === raw.scopeName
        ? vsctm.parseRawGrammar(JSON.stringify(raw), 'rlhf.tmLanguage.json')
        : null,
  });
  const grammar = await registry.loadGrammar(raw.scopeName);
  if (!grammar) throw new Error(`cannot load grammar ${raw.scopeName}`);
  return grammar;
}

// Returns one array per character of `text`: the scopes at that character
// ('\n' characters get the scopes of the line end, i.e. []).
function scopesPerChar(grammar, text) {
  const out = new Array(text.length).fill(null);
  let ruleStack = vsctm.INITIAL;
  let offset = 0;
  for (const line of text.split('\n')) {
    const r = grammar.tokenizeLine(line, ruleStack);
    for (const t of r.tokens) {
      for (let i = t.startIndex; i < Math.min(t.endIndex, line.length); i++) out[offset + i] = t.scopes;
    }
    ruleStack = r.ruleStack;
    offset += line.length;
    if (offset < text.length) out[offset++] = [];
  }
  return out;
}

module.exports = { GRAMMAR_PATH, loadGrammar, scopesPerChar };
